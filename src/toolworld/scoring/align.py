"""First divergent step: where the agent's tool calls first left the gold path.

The agent's steps are aligned with the gold actions by a longest common subsequence (a step matches a gold
action when it succeeded and has the same tool and the same arguments, after the tool's own validation fills
in defaults). LCS rather than a strict prefix walk, because agents legitimately look things up that gold did
not: an extra *successful read* is harmless and is not a deviation, wherever it happens. Everything else that
is off the path is:

* a gold action the agent never made (skipped, or made with other arguments): the deviation is at the agent
  step where that action was due, i.e. the first step after the previous matched action that is not a harmless
  extra read (or that calls the due action's tool); ``len(steps)`` when the agent stopped before it;
* an agent step that failed by the agent's fault (unknown tool, bad or wrong arguments, a rule broken, a
  write repeated), read or write: an agent error is a mistake even when the agent recovers from it;
* a successful write gold did not make.

Gold's order counts: reading what gold reads in another order leaves one of those reads unmatched, a
deviation. The first divergent step is about the path, not the outcome: a trajectory that skipped a
lookup can still succeed, and it is ``Score.failure_visible_step`` that says where a failure showed.

Steps that failed for reasons that are not the agent's (injected ``tool_failure`` noise, a crashing tool's
``internal_error``) are left out before aligning: retrying after them is the right thing to do.

Arguments that carry free text the world's scorer ignores (a column named in ``Task.ignore_columns``, e.g.
``summary`` for ``tickets.summary``) are not compared: no agent words a ticket summary like gold does.

Ties between equally long alignments are broken by matching each step to the earliest gold action it can
match, which is exact whenever the gold actions are distinct; a path with identical repeated gold actions can
be ambiguous (dropping the first or the second of two identical calls gives the same trajectory).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .changes import same, short

if TYPE_CHECKING:
    from ..records.trajectory import Step

Normalize = Callable[[str, Any], Any]


@dataclass(frozen=True, slots=True)
class Alignment:
    """The matched (step index -> gold index) pairs and the first deviation, if any."""

    matched: dict[int, int]
    step: int | None
    description: str


def tolerated_failure(step: Step) -> bool:
    """A failure that is not the agent's doing: injected noise, or the world's own crash."""
    if step.ok:
        return False
    kind = (step.error or {}).get("type")
    return "tool_failure" in step.noise or kind in ("internal_error", "temporarily_unavailable")


def align(gold: Sequence[Any], steps: Sequence[Step], *, normalize: Normalize | None = None,
          free_text: frozenset[str] = frozenset()) -> Alignment:  # fmt: skip
    """Align ``steps`` with the gold actions (objects with ``name`` and ``arguments``); see the module doc."""
    norm = normalize or (lambda name, args: args)

    def key(name: str, args: Any) -> str | None:
        value = norm(name, args)
        if not isinstance(value, Mapping):
            return None
        return json.dumps([name, {k: v for k, v in value.items() if k not in free_text}], sort_keys=True,
                          default=str)  # fmt: skip

    gold_keys = [key(a.name, a.arguments) for a in gold]
    considered = [j for j, s in enumerate(steps) if not tolerated_failure(s)]
    step_keys = [key(steps[j].name, steps[j].arguments) if steps[j].ok else None for j in considered]
    n, m = len(considered), len(gold)
    # suffix LCS table: lcs[i][g] = longest match of considered[i:] with gold[g:]
    lcs = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n - 1, -1, -1):
        for g in range(m - 1, -1, -1):
            if step_keys[i] is not None and step_keys[i] == gold_keys[g]:
                lcs[i][g] = lcs[i + 1][g + 1] + 1
            else:
                lcs[i][g] = max(lcs[i + 1][g], lcs[i][g + 1])
    matched: dict[int, int] = {}
    i = g = 0
    while i < n and g < m:
        if step_keys[i] is not None and step_keys[i] == gold_keys[g] and lcs[i][g] == lcs[i + 1][g + 1] + 1:
            matched[considered[i]] = g
            i += 1
            g += 1
        elif lcs[i + 1][g] >= lcs[i][g + 1]:
            i += 1
        else:
            g += 1
    gold_to_step = {gi: j for j, gi in matched.items()}

    def harmless(j: int) -> bool:
        s = steps[j]
        return j not in matched and (tolerated_failure(s) or (s.ok and not s.mutates))

    # deviations as (agent step index, gold-side first, tie-break, description); the earliest wins
    events: list[tuple[int, int, int, str]] = []
    prev = -1
    for gi, action in enumerate(gold):
        if gi in gold_to_step:
            prev = gold_to_step[gi]
            continue
        due = next((j for j in range(prev + 1, len(steps))
                    if not harmless(j) or steps[j].name == action.name), len(steps))  # fmt: skip
        made_later = any(x > gi for x in gold_to_step)
        events.append((due, 0, gi, _missed(gi, action, steps, due, matched, norm, made_later)))
    for j, s in enumerate(steps):
        if j in matched or harmless(j):
            continue
        if not s.ok:
            what = f"called {s.name}({_args(s.arguments)}) and it failed: {(s.error or {}).get('type', 'error')}"
            message = str((s.error or {}).get("message", ""))
            events.append((j, 1, j, what + (f" ({short(message, 80)[1:-1]})" if message else "")))
        else:
            events.append((j, 1, j, f"made write {s.name}({_args(s.arguments)}), which is not on the gold path"))
        break
    if not events:
        return Alignment(matched, None, "")
    index, _, _, text = min(events)
    return Alignment(matched, index, text)


def _missed(gi: int, action: Any, steps: Sequence[Step], due: int, matched: Mapping[int, int], norm: Normalize,
            made_later: bool) -> str:  # fmt: skip
    label = f"gold step {gi} {action.name}"
    if due >= len(steps):
        return f"stopped before {label}({_args(action.arguments)})"
    s = steps[due]
    if s.name == action.name and due not in matched:
        diff = _arg_diff(norm(s.name, s.arguments), norm(action.name, action.arguments))
        failed = "" if s.ok else f" and it failed: {(s.error or {}).get('type', 'error')}"
        return f"called {s.name} with {diff}{failed} ({label})"
    if not made_later:
        return f"never made {label}({_args(action.arguments)}); called {s.name} instead"
    if due in matched or (s.ok and not s.mutates):
        return f"skipped {label}({_args(action.arguments)})"
    return f"called {s.name} instead of {label}({_args(action.arguments)})"


def _args(arguments: Any, limit: int = 80) -> str:
    if not isinstance(arguments, Mapping):
        return short(arguments, limit)
    text = ", ".join(f"{k}={short(v, 40)}" for k, v in arguments.items())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _arg_diff(got: Any, want: Any) -> str:
    """``order_id='#W1' instead of '#W2'``: only the arguments that differ."""
    if not isinstance(got, Mapping) or not isinstance(want, Mapping):
        return f"arguments {short(got)} instead of {_args(want)}"
    parts = []
    for k in sorted(set(got) | set(want)):
        if k not in got:
            parts.append(f"no {k} (expected {short(want[k])})")
        elif k not in want:
            parts.append(f"unexpected {k}={short(got[k])}")
        elif not same(got[k], want[k]):
            parts.append(f"{k}={short(got[k])} instead of {short(want[k])}")
    return ", ".join(parts) or "the gold arguments"
