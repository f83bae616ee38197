"""What makes a generated task worth learning from: a coherent request and a gold path with no wasted step.

Two kinds of analysis, shared by the generator (which drops incoherent drafts and prunes gold) and by
``toolworld tasks stats`` (which reports what slipped through), so every rule has one home:

- *Coherence rules* say whether a support desk would ever see the request: nobody asks for a change after
  being handed to a person, nor modifies an order and then cancels the same order in one conversation. A rule
  is a function of the task and a fresh episode at the task's seed (the state the user speaks of) that returns
  a problem message or None. Generic rules live here; a world adds its own with ``TaskKit.coherence_rules``.
- *Minimal gold*: which gold steps serve a purpose (:func:`useful_steps`). Reads that serve nothing teach an
  agent to wander; writes made without the reads a careful agent makes first (:func:`missing_checks`) teach
  it to act on the user's word alone.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from ..core.jsonutil import canonical_json
from ..world import Episode, World, extract_path
from .kit import TaskKit, kit_for
from .model import Action, Task

#: A coherence rule: (task, fresh episode of its world at its seed) -> what is wrong, or None. Rules only query
#: the episode; the task they get is one end state at a time (an alternative arrives as a task of its own).
CoherenceRule = Callable[[Task, Episode], str | None]

# The kit the current check runs with, so that generic rules (plain functions of task and episode) use the kit
# the caller passed rather than a default one.
_CURRENT_KIT: ContextVar[TaskKit | None] = ContextVar("toolworld_quality_kit", default=None)
_DEFAULT_KITS: dict[str, tuple[World, TaskKit]] = {}


def _kit(world: World) -> TaskKit:
    current = _CURRENT_KIT.get()
    if current is not None and current.world is world:
        return current
    cached = _DEFAULT_KITS.get(world.name)
    if cached is None or cached[0] is not world:
        cached = _DEFAULT_KITS[world.name] = (world, kit_for(world))
    return cached[1]


@contextmanager
def _using(kit: TaskKit) -> Iterator[None]:
    token = _CURRENT_KIT.set(kit)
    try:
        yield
    finally:
        _CURRENT_KIT.reset(token)


def _call_key(name: str, args: Mapping[str, Any]) -> str:
    return name + canonical_json(dict(args))


# -- what a write is about -------------------------------------------------------------------------------------


def is_write(world: World, name: str) -> bool:
    tool = world.tools.get(name)
    return tool is not None and tool.spec.mutates


def touched(kit: TaskKit, name: str, args: Mapping[str, Any]) -> set[tuple[str, Any]]:
    """The objects a write is about, as ``(kind, value)``: its single, non-principal entity arguments whose kind
    has an inspector read (an order, not the card used to pay for it: two writes may share a card, but two
    writes on one order are one conversation the user would not have)."""
    tool = kit.world.tools.get(name)
    if tool is None:
        return set()
    out = set()
    for p in tool.spec.entity_params:
        value = args.get(p.param)
        if p.many or p.kind == kit.principal or value is None or isinstance(value, (list, dict)):
            continue
        if kit.inspector(p.kind) is not None:
            out.add((p.kind, value))
    return out


def writes_of(task: Task, world: World) -> list[tuple[str, Action]]:
    """The task's writes in order, each with where it comes from (``step N`` or ``forbidden``).

    A refusal's forbidden call ends the list: it never runs, but the user asked for it in the same
    conversation, so it counts wherever the order of requests matters.
    """
    out = [(f"step {i}", a) for i, a in enumerate(task.gold_actions) if is_write(world, a.name)]
    if task.refusal is not None:
        out.append(("forbidden", task.refusal.forbidden))
    return out


# -- generic rules ---------------------------------------------------------------------------------------------


def handoff_last(task: Task, ep: Episode) -> str | None:
    """A handoff to a person ends the agent's part: it is the last write, and no other write is about what the
    handoff is about (the person takes the whole case, not what is left of it)."""
    kit = _kit(ep.world)
    if not kit.handoff_tools:
        return None
    writes = writes_of(task, ep.world)
    for i, (where, action) in enumerate(writes):
        if action.name not in kit.handoff_tools:
            continue
        if i != len(writes) - 1:
            later = ", ".join(f"{a.name} ({w})" for w, a in writes[i + 1:])
            return f"{action.name} ({where}) hands the case to a person but is followed by {later}"
        about = touched(kit, action.name, action.arguments)
        for other_where, other in writes[:i]:
            shared = about & touched(kit, other.name, other.arguments)
            if shared:
                kind, value = sorted(shared, key=str)[0]
                return (f"{other.name} ({other_where}) and the handoff {action.name} ({where}) are both about "
                        f"{kind} {value}: a case handed to a person is not also changed by the agent")
    return None


def one_write_per_object(task: Task, ep: Episode) -> str | None:
    """No two writes are about the same object: an order modified and then cancelled (or modified twice) is
    not a request anyone makes in one conversation. A handoff sharing an object is ``handoff_last``'s case."""
    kit = _kit(ep.world)
    first: dict[tuple[str, Any], str] = {}
    for where, action in writes_of(task, ep.world):
        if action.name in kit.handoff_tools:
            continue
        for obj in sorted(touched(kit, action.name, action.arguments), key=str):
            if obj in first:
                return f"{first[obj]} and {action.name} ({where}) both write to {obj[0]} {obj[1]}"
            first[obj] = f"{action.name} ({where})"
    return None


#: Rules every world gets, by name; a world's own come from ``TaskKit.coherence_rules``.
GENERIC_RULES: dict[str, CoherenceRule] = {
    "handoff_last": handoff_last,
    "one_write_per_object": one_write_per_object,
}


def end_states(task: Task) -> list[tuple[str, Task]]:
    """The task's gold end state and each alternative, every one as a task of its own (label, task)."""
    out = [("", task)]
    for i, alt in enumerate(task.alternatives):
        out.append((f"alternative {i} ({alt.label})", task.model_copy(update={
            "kind": alt.kind, "gold_actions": alt.gold_actions, "expected_changes": alt.expected_changes,
            "expected_outputs": alt.expected_outputs, "refusal": alt.refusal, "alternatives": []})))  # fmt: skip
    return out


def coherence_problems(task: Task, world: World, kit: TaskKit | None = None,
                       ep: Episode | None = None) -> list[tuple[str, str]]:  # fmt: skip
    """``(rule, message)`` for every generic and world rule a task breaks, in any of its end states.

    ``ep`` is a fresh episode of ``world`` at ``task.seed`` (opened and closed here when not given); it may be
    shared between tasks of one seed, since rules only query it.
    """
    kit = kit or kit_for(world)
    rules = {**GENERIC_RULES, **kit.coherence_rules()}
    own = ep is None
    episode = world.episode(task.seed) if ep is None else ep
    problems: list[tuple[str, str]] = []
    try:
        with _using(kit):
            for label, variant in end_states(task):
                for name, check in rules.items():
                    message = check(variant, episode)
                    if message:
                        problems.append((name, f"{label}: {message}" if label else message))
    finally:
        if own:
            episode.close()
    return problems


# -- minimal gold ----------------------------------------------------------------------------------------------


def scalars(value: Any) -> set[Any]:
    """Every string and number inside a value (dict values and list items, recursively)."""
    out: set[Any] = set()
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, (list, tuple)):
            stack.extend(v)
        elif isinstance(v, str):
            if v:
                out.add(v)
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            out.add(v)
    return out


def principal_of(names_args: Sequence[tuple[str, Mapping[str, Any]]], outputs: Sequence[Any], world: World,
                 kit: TaskKit) -> Any:  # fmt: skip
    """The principal's id as the first successful identification step returned it (None if none did)."""
    identify = set(kit.identify_tools())
    for (name, _), output in zip(names_args, outputs, strict=False):
        if name in identify and name in world.tools and output is not None:
            path = world.tools[name].spec.yields.get(kit.principal or "")
            found = extract_path(output, path) if path else []
            if found:
                return found[0]
    return None


def useful_steps(names_args: Sequence[tuple[str, Mapping[str, Any]]], outputs: Sequence[Any], world: World,
                 kit: TaskKit, principal_kinds: Iterable[str] | None = None, expected_steps: Iterable[int] = (),
                 *, known: Iterable[Any] = (),
                 forbidden: tuple[str, Mapping[str, Any]] | None = None) -> list[bool]:  # fmt: skip
    """Which gold steps serve a purpose (``outputs[i]`` is step i's result, None where it failed).

    Useful: every write; the first identification read; a read whose result is an expected output (its index
    is in ``expected_steps``); a read that is a required check (``kit.required_checks``) of a later useful
    write or of the ``forbidden`` call (a refusal's, which counts as a final useful write); a read that *feeds*
    a later useful step: a string or number in its result, other than its own arguments and other than what
    the conversation knew from the start, is an argument of that step. What was known from the start: the
    identification's arguments and result, every value any step yields for ``principal_kinds`` (the person's
    own ids and facts; by default :func:`identity_kinds`), and ``known`` (what the user can say, e.g. the order
    numbers they quote: ``Task.user.known``'s values).

    A value that the identification, an expected read or a required check shows before the step that uses it
    feeds nothing from any other read (a product id the order check lists needs no catalogue browse). Decided
    backwards, so a read that only feeds a useless read is useless too; a read that repeats an earlier one
    (same tool and arguments) is useless unless its result is an expected output.
    """
    n = len(names_args)
    expected = set(expected_steps)
    kinds = identity_kinds(kit) if principal_kinds is None else set(principal_kinds)
    identify = set(kit.identify_tools())
    first_identify = next((i for i, (name, _) in enumerate(names_args) if name in identify), None)
    principal = principal_of(names_args, outputs, world, kit)

    start: set[Any] = set(scalars(list(known)))
    for i, (name, args) in enumerate(names_args):
        if i == first_identify:
            start |= scalars(dict(args)) | scalars(outputs[i])
        spec = world.tools[name].spec if name in world.tools else None
        if spec is not None and outputs[i] is not None:
            for kind, path in spec.yields.items():
                if kind in kinds:
                    start.update(v for v in extract_path(outputs[i], path) if isinstance(v, (str, int)))

    steps = [(name, dict(args)) for name, args in names_args]
    if forbidden is not None:
        steps.append((forbidden[0], dict(forbidden[1])))
    writes = [is_write(world, name) or (forbidden is not None and i == n) for i, (name, _) in enumerate(steps)]
    checks = [{_call_key(c, a) for c, a in kit.required_checks(name, args, principal=principal)}
              if writes[i] else set() for i, (name, args) in enumerate(steps)]  # fmt: skip
    arg_values = [scalars(args) for _, args in steps]

    seen: set[str] = set()
    repeat = [False] * n
    for i, (name, args) in enumerate(names_args):
        key = _call_key(name, args)
        repeat[i] = not writes[i] and key in seen
        seen.add(key)

    keys = [_call_key(*step) for step in steps]
    new = [scalars(outputs[i]) - arg_values[i] - start if i < n else set() for i in range(len(steps))]
    # Reads with a purpose of their own, whatever the backward pass decides: every write is useful, so being a
    # required check of a later write is one.
    anchored = [not writes[i] and (not repeat[i] or i in expected)
                and (i == first_identify or i in expected
                     or any(keys[i] in checks[j] for j in range(i + 1, len(steps))))
                for i in range(len(steps))]  # fmt: skip
    useful = [writes[i] or anchored[i] for i in range(len(steps))]
    for i in range(n - 1, -1, -1):
        if useful[i] or repeat[i] or not new[i]:
            continue
        for j in range(i + 1, len(steps)):
            if not useful[j] or not new[i] & arg_values[j]:
                continue
            # A value an anchored read shows before step j needs no other read to find it.
            shown = set().union(*(new[k] for k in range(j) if anchored[k] and k != i))
            if (new[i] & arg_values[j]) - shown:
                useful[i] = True
                break
    return useful[:n]


def gold_outputs(task: Task, world: World) -> list[Any]:
    """Replay the gold on a fresh episode: each step's result (None where a step failed)."""
    out: list[Any] = []
    with world.episode(task.seed) as ep:
        for action in task.gold_actions:
            result = ep.call(action.name, action.arguments)
            out.append(result.output if result.ok else None)
    return out


def identity_kinds(kit: TaskKit) -> set[str]:
    """The principal's kind and the user's fact kinds: values of these kinds are known from the start."""
    return {kit.principal or "", *kit.fact_kinds}


def expected_steps(task: Task) -> set[int]:
    """Indices of gold steps that serve a purpose of their own: those whose result the agent must tell, and the
    scenario's reads (``Scenario.reads``: finding an order the user cannot number, showing a need's answer).
    Outputs recorded without a step (older tasks) make every call of a target tool count."""
    steps = {o.step for o in task.expected_outputs if o.step is not None} | set(task.scenario.reads)
    if any(o.step is None for o in task.expected_outputs) or (task.kind == "info" and not steps):
        steps |= {i for i, a in enumerate(task.gold_actions) if a.name in task.provenance.targets}
    return steps


def _known_values(task: Task) -> list[Any]:
    return list(task.user.known.values())


def purposeless_reads(task: Task, world: World, kit: TaskKit | None = None, *,
                      outputs: Sequence[Any] | None = None) -> list[int]:  # fmt: skip
    """Indices of the gold reads that serve nothing (see :func:`useful_steps`); ``outputs`` skips the replay."""
    kit = kit or kit_for(world)
    outputs = gold_outputs(task, world) if outputs is None else outputs
    names_args = [(a.name, a.arguments) for a in task.gold_actions]
    forbidden = (task.refusal.forbidden.name, task.refusal.forbidden.arguments) if task.refusal else None
    useful = useful_steps(names_args, outputs, world, kit, identity_kinds(kit), expected_steps(task),
                          known=_known_values(task), forbidden=forbidden)  # fmt: skip
    return [i for i, ok in enumerate(useful) if not ok and not is_write(world, names_args[i][0])]


@dataclass(frozen=True, slots=True)
class MissingCheck:
    """A read a careful agent makes before ``write`` (at ``where``: ``step N`` or ``forbidden``) that the gold
    does not make before it."""

    where: str
    write: str
    check: str
    arguments: dict[str, Any]

    def __str__(self) -> str:
        return f"{self.write} ({self.where}) without {self.check} {canonical_json(self.arguments)} before it"


def missing_check_calls(task: Task, world: World, kit: TaskKit | None = None, *,
                        outputs: Sequence[Any] | None = None) -> list[MissingCheck]:  # fmt: skip
    """Every required check (``kit.required_checks``) the gold skips before a write or a refusal's forbidden
    call; ``outputs`` (the gold's replayed results) skips the replay."""
    kit = kit or kit_for(world)
    outputs = gold_outputs(task, world) if outputs is None else outputs
    principal = principal_of([(a.name, a.arguments) for a in task.gold_actions], outputs, world, kit)
    done: set[str] = set()
    missing: list[MissingCheck] = []
    calls = [(f"step {i}", a) for i, a in enumerate(task.gold_actions)]
    if task.refusal is not None:
        calls.append(("forbidden", task.refusal.forbidden))
    for where, action in calls:
        if where == "forbidden" or is_write(world, action.name):
            for name, args in kit.required_checks(action.name, action.arguments, principal=principal):
                if _call_key(name, args) not in done:
                    missing.append(MissingCheck(where, action.name, name, dict(args)))
        done.add(_call_key(action.name, action.arguments))
    return missing


def missing_checks(task: Task, world: World, kit: TaskKit | None = None, *,
                   outputs: Sequence[Any] | None = None) -> list[str]:  # fmt: skip
    """Writes (and a refusal's forbidden call) made without the reads a careful agent makes first, one message
    per missing read (see :func:`missing_check_calls`)."""
    return [str(m) for m in missing_check_calls(task, world, kit, outputs=outputs)]
