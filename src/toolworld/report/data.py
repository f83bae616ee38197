"""The trajectory viewer's data: what the page embeds as JSON, and how it is embedded safely.

The embedded data is a projection of the rows, not a copy: a report of a thousand or more episodes must stay
a file a browser opens in a moment. So token buffers, per-turn metadata and step outputs (the tool messages
already carry them) are left out, each task's gold (instruction, expected changes) is stored once and not per
trial, the system prompt, which is the same for every episode of a world, is stored once, and very long texts
are cut with a note that says how much was left out.

Everything in it came from a model, a user simulator or a tool, so it is treated as hostile text: it is
embedded in a ``<script type="application/json">`` element with ``<``, ``>`` and ``&`` written as JSON
``\\u`` escapes (a tool result containing ``</script>`` cannot end the element), and the page's script only
ever inserts it with ``textContent``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from ..scoring.metrics import token_integrity

#: Longest message text (or tool-call argument string) embedded as is; longer ones are cut with a note.
MAX_TEXT_CHARS = 6000
#: Most rows per table and operation shown in a change-set; the rest are counted, not embedded.
MAX_CHANGE_ROWS = 100
#: Longest text kept for an error message, a score reason or a noise detail.
MAX_NOTE_CHARS = 2000


def plain(value: Any) -> Any:
    """A pydantic model (``Task``, ``Trajectory``, ``Score``) as its JSON dict; anything else unchanged."""
    dump = getattr(value, "model_dump", None)
    return dump(mode="json") if callable(dump) else value


def json_safe(value: Any) -> Any:
    """A copy that ``JSON.parse`` accepts: NaN and infinities (invalid JSON) become None, keys become strings,
    tuples and sets become lists, and anything unknown becomes its ``str``."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if value is None or isinstance(value, (str, int)):
        return value
    if isinstance(value, Mapping):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [json_safe(v) for v in value]
    value = plain(value)
    return json_safe(value) if isinstance(value, (Mapping, list)) else str(value)


def script_json(data: Any) -> str:
    """JSON text that is safe inside an HTML ``<script>`` element and parses back to ``data``.

    ``<`` and ``>`` are escaped so neither ``</script>`` nor ``<!--`` can appear (both change how the HTML
    parser reads a script element), ``&`` for good measure, and ``ensure_ascii`` escapes everything else
    beyond ASCII, lone surrogates included, so the page can always be written as UTF-8.
    """
    text = json.dumps(json_safe(data), ensure_ascii=True, separators=(",", ":"), allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def cap(text: Any, limit: int = MAX_TEXT_CHARS) -> tuple[str, int]:
    """``text`` cut to ``limit`` characters, and how many were cut (0 when it fits)."""
    text = "" if text is None else text if isinstance(text, str) else json.dumps(json_safe(text), ensure_ascii=False)
    return (text, 0) if len(text) <= limit else (text[:limit], len(text) - limit)


def _note(value: Any) -> Any:
    if isinstance(value, str):
        text, cut = cap(value, MAX_NOTE_CHARS)
        return text + (f" … [{cut} more characters]" if cut else "")
    return value


def cap_changes(changes: Any) -> dict[str, Any]:
    """A change-set (``{table: {inserted, updated, deleted}}``) with at most ``MAX_CHANGE_ROWS`` rows per table
    and operation; an ``omitted`` entry counts what was left out."""
    out: dict[str, Any] = {}
    if not isinstance(changes, Mapping):
        return out
    for table, ops in changes.items():
        if not isinstance(ops, Mapping):
            continue
        entry: dict[str, Any] = {}
        omitted: dict[str, int] = {}
        for op in ("inserted", "updated", "deleted"):
            rows = ops.get(op) or []
            rows = list(rows) if isinstance(rows, (list, tuple)) else []
            entry[op] = rows[:MAX_CHANGE_ROWS]
            if len(rows) > MAX_CHANGE_ROWS:
                omitted[op] = len(rows) - MAX_CHANGE_ROWS
        if omitted:
            entry["omitted"] = omitted
        if any(entry[op] for op in ("inserted", "updated", "deleted")) or omitted:
            out[str(table)] = entry
    return out


class _Systems:
    """System prompts stored once each; messages refer to them by position."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self._index: dict[str, int] = {}

    def ref(self, text: str) -> int:
        if text not in self._index:
            self._index[text] = len(self.texts)
            self.texts.append(text)
        return self._index[text]


def _message(msg: Any, systems: _Systems) -> dict[str, Any]:
    if not isinstance(msg, Mapping):
        text, cut = cap(msg)
        return {"role": "unknown", "content": text, "cut": cut}
    role = str(msg.get("role") or "unknown")
    content = msg.get("content")
    if isinstance(content, list):  # multi-part content: keep the text parts
        content = "\n".join(str(p.get("text", "")) if isinstance(p, Mapping) else str(p) for p in content)
    out: dict[str, Any] = {"role": role}
    if role == "system" and isinstance(content, str):
        out["system"] = systems.ref(content)
    else:
        text, cut = cap(content)
        out["content"] = text
        if cut:
            out["cut"] = cut
    if msg.get("tool_call_id") is not None:
        out["tool_call_id"] = str(msg["tool_call_id"])
    calls = []
    for call in msg.get("tool_calls") or []:
        if not isinstance(call, Mapping):
            continue
        fn = call.get("function") if isinstance(call.get("function"), Mapping) else call
        args, cut = cap(fn.get("arguments", ""))
        entry = {"id": str(call.get("id") or ""), "name": str(fn.get("name") or "?"), "arguments": args}
        if cut:
            entry["cut"] = cut
        calls.append(entry)
    if calls:
        out["tool_calls"] = calls
    return out


def _step(step: Any) -> dict[str, Any] | None:
    if not isinstance(step, Mapping):
        return None
    error = step.get("error")
    if isinstance(error, Mapping):
        error = {"type": str(error.get("type") or "error"), "message": _note(str(error.get("message") or ""))}
    elif error is not None:
        error = {"type": "error", "message": _note(str(error))}
    return {"index": step.get("index"), "turn": step.get("turn"), "call_id": str(step.get("call_id") or ""),
            "name": str(step.get("name") or ""), "ok": bool(step.get("ok", error is None)), "error": error,
            "mutates": bool(step.get("mutates")), "noise": list(step.get("noise") or []),
            "truncated": bool(step.get("observation_truncated")), "duration_s": step.get("duration_s")}  # fmt: skip


def _score(score: Any) -> dict[str, Any] | None:
    score = plain(score)
    if not isinstance(score, Mapping):
        return None
    keep = ("reward", "success", "first_divergent_step", "failure_visible_step", "divergence", "infra_error",
            "scorer_version", "end_state")  # fmt: skip
    out: dict[str, Any] = {k: _note(score.get(k)) for k in keep if k in score}
    for key in ("components", "missing_changes", "wrong_values", "extra_changes", "outputs"):
        items = score.get(key)
        out[key] = [(_note_dict(i)) for i in items[:MAX_CHANGE_ROWS]] if isinstance(items, list) else []
        if isinstance(items, list) and len(items) > MAX_CHANGE_ROWS:
            out[key + "_omitted"] = len(items) - MAX_CHANGE_ROWS
    return out


def _note_dict(item: Any) -> Any:
    return {str(k): _note(v) for k, v in item.items()} if isinstance(item, Mapping) else _note(item)


def _task(task: Mapping[str, Any]) -> dict[str, Any]:
    difficulty = task.get("difficulty") if isinstance(task.get("difficulty"), Mapping) else {}
    provenance = task.get("provenance") if isinstance(task.get("provenance"), Mapping) else {}
    user = task.get("user") if isinstance(task.get("user"), Mapping) else {}
    instruction, cut = cap(task.get("instruction"))
    return {
        "instruction": instruction + (f" … [{cut} more characters]" if cut else ""),
        "kind": task.get("kind"),
        "level": difficulty.get("level"),
        "targets": [str(t) for t in provenance.get("targets") or []],
        "user": {"name": user.get("name"), "persona": user.get("persona"), "known": user.get("known") or {}},
        "gold_actions": [
            {"name": a.get("name"), "arguments": a.get("arguments")}
            for a in task.get("gold_actions") or []
            if isinstance(a, Mapping)
        ],
        "expected_changes": cap_changes(task.get("expected_changes")),
        "expected_outputs": task.get("expected_outputs") or [],
        "refusal": task.get("refusal"),
        "ignore_columns": task.get("ignore_columns") or [],
    }


def viewer_data(rows: Sequence[Any]) -> dict[str, Any]:
    """The JSON the viewer reads: ``tasks`` (gold, once per task), ``systems`` (system prompts, once each),
    ``rows`` (one per episode, in the order given) and ``tools`` (for the tool filter)."""
    tasks: dict[str, Any] = {}
    systems = _Systems()
    out_rows: list[dict[str, Any]] = []
    all_tools: set[str] = set()
    for i, row in enumerate(rows):
        row = plain(row) if not isinstance(row, Mapping) else row
        if not isinstance(row, Mapping):
            continue
        task = plain(row.get("task"))
        task = task if isinstance(task, Mapping) else {}
        traj = plain(row.get("trajectory"))
        traj = traj if isinstance(traj, Mapping) else {}
        raw_score = plain(row.get("score"))
        raw_score = raw_score if isinstance(raw_score, Mapping) else None
        score = _score(raw_score)
        task_id = str(task.get("id") or traj.get("task_id") or (raw_score or {}).get("task_id") or f"row-{i}")
        if task_id not in tasks:
            tasks[task_id] = _task(task)
        steps = [s for s in (_step(s) for s in traj.get("steps") or []) if s is not None]
        called = {s["name"] for s in steps if s["name"]}
        tools = sorted(called | set(tasks[task_id]["targets"]))
        all_tools.update(tools)
        usage = traj.get("usage") if isinstance(traj.get("usage"), Mapping) else {}
        trial = traj.get("trial", (raw_score or {}).get("trial", 0))
        infra = bool((score or {}).get("infra_error")) or traj.get("termination") == "infra_error"
        out_rows.append({
            "task": task_id,
            "trial": trial,
            "success": None if score is None or infra else bool(score.get("success")),
            "reward": None if score is None else score.get("reward"),
            "infra": infra,
            "termination": traj.get("termination"),
            "policy": traj.get("policy"),
            "user": traj.get("user"),
            "tools": tools,
            "turns": len(traj.get("turns") or []),
            "wall_s": traj.get("wall_s"),
            "tokens": {"prompt": usage.get("prompt_tokens", 0), "completion": usage.get("completion_tokens", 0)},
            "token_integrity": token_integrity(traj),
            "messages": [_message(m, systems) for m in traj.get("messages") or []],
            "steps": steps,
            "changes": cap_changes(traj.get("changes")),
            "perturbations": [_note_dict(p) for p in traj.get("perturbations") or []],
            "noise_events": [_note_dict(e) for e in traj.get("noise_events") or []],
            "infra_errors": [_note_dict(e) for e in traj.get("infra_errors") or []],
            "score": score,
        })  # fmt: skip
    return {"tasks": tasks, "systems": systems.texts, "rows": out_rows, "tools": sorted(all_tools)}
