"""Exports of a stored run: trajectories as JSONL or Parquet, and chat SFT data.

- ``jsonl``: one trajectory per line, exactly ``Trajectory.to_json()`` plus its ``score`` (token buffer
  included, so RL trainers get the sampled ids, loss mask and logprobs).
- ``parquet``: one row per trial with flat columns to filter on (success, reward, termination, turns, tokens,
  divergence, difficulty) and the trajectory and score as JSON strings.
- ``sft``: one conversation per line in the chat format trainers read (``{"messages", "tools"}``, OpenAI
  tool-call shape), successful trials only unless ``include_failed``; infra-errored trials never, since they
  say nothing about the task.

Every export is written to a temporary file and renamed, so a failed export never leaves half a file behind.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .runstore import RunStore

EXPORT_FORMATS = ("jsonl", "parquet", "sft")
DEFAULT_NAMES = {"jsonl": "trajectories.jsonl", "parquet": "trajectories.parquet", "sft": "sft.jsonl"}


def _atomic_text(path: Path, write: Callable[[IO[str]], int]) -> int:
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        with tmp.open("w", encoding="utf-8", newline="\n") as fh:
            n = write(fh)
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)
    return n


def _sft_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Chat messages as trainers read them: OpenAI shape, only the keys a chat template uses."""
    out = []
    for msg in messages:
        keep = {k: msg[k] for k in ("role", "content", "tool_calls", "tool_call_id", "name", "reasoning_content")
                if msg.get(k) not in (None, [])}  # fmt: skip
        keep.setdefault("content", "")
        out.append(keep)
    return out


def sft_records(store: RunStore, *, include_failed: bool = False) -> Iterator[dict[str, Any]]:
    """The run's conversations in chat SFT form (see the module docstring for which trials)."""
    from ..world import get_world

    tools_by_world: dict[str, list[dict[str, Any]]] = {}
    for traj, score, _row in store.trials():
        if traj.failed_by_infra or score is None or score.infra_error:
            continue
        if not (include_failed or score.success):
            continue
        if traj.world not in tools_by_world:
            tools_by_world[traj.world] = get_world(traj.world).openai_tools()
        yield {"messages": _sft_messages(traj.messages), "tools": tools_by_world[traj.world],
               "task_id": traj.task_id, "trial": traj.trial, "reward": score.reward, "success": score.success}  # fmt: skip


def export_run(store: RunStore, fmt: str, path: str | Path, *, include_failed: bool = False) -> int:
    """Write the run in ``fmt`` (one of ``EXPORT_FORMATS``) to ``path``; returns the number of records."""
    if fmt not in EXPORT_FORMATS:
        raise ValueError(f"unknown export format {fmt!r}; use one of {', '.join(EXPORT_FORMATS)}")
    target = Path(path)
    if fmt == "jsonl":

        def write_jsonl(fh: IO[str]) -> int:
            n = 0
            for traj, score, _row in store.trials():
                line = traj.model_dump(mode="json")
                line["score"] = score.model_dump(mode="json") if score is not None else None
                fh.write(json.dumps(line, ensure_ascii=False, separators=(",", ":")))
                fh.write("\n")
                n += 1
            return n

        return _atomic_text(target, write_jsonl)
    if fmt == "sft":

        def write_sft(fh: IO[str]) -> int:
            n = 0
            for record in sft_records(store, include_failed=include_failed):
                fh.write(json.dumps(record, ensure_ascii=False, separators=(",", ":")))
                fh.write("\n")
                n += 1
            return n

        return _atomic_text(target, write_sft)
    return _export_parquet(store, target)


def _export_parquet(store: RunStore, path: Path) -> int:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise RuntimeError("Parquet export needs pyarrow: pip install 'toolworld[data]'") from exc
    tasks = {t.id: t for t in store.tasks()}
    cols: dict[str, list[Any]] = {k: [] for k in (
        "task_id", "trial", "world", "policy", "kind", "level", "target", "status", "termination", "success",
        "reward", "first_divergent_step", "divergence", "turns", "steps", "agent_errors", "prompt_tokens",
        "completion_tokens", "wall_s", "attempts", "trajectory", "score")}  # fmt: skip
    for traj, score, row in store.trials():
        task = tasks.get(traj.task_id)
        values = {
            "task_id": traj.task_id, "trial": traj.trial, "world": traj.world, "policy": traj.policy,
            "kind": task.kind if task else None, "level": task.difficulty.level if task else None,
            "target": ",".join(task.provenance.targets) if task else None, "status": row["status"],
            "termination": traj.termination, "success": None if score is None or score.infra_error else score.success,
            "reward": None if score is None else score.reward,
            "first_divergent_step": None if score is None else score.first_divergent_step,
            "divergence": None if score is None else score.divergence, "turns": traj.num_turns,
            "steps": len(traj.steps), "agent_errors": len(traj.agent_errors),
            "prompt_tokens": traj.usage.prompt_tokens, "completion_tokens": traj.usage.completion_tokens,
            "wall_s": traj.wall_s, "attempts": row["attempts"], "trajectory": traj.to_json(),
            "score": None if score is None else score.model_dump_json(),
        }  # fmt: skip
        for key, value in values.items():
            cols[key].append(value)
    table = pa.table(cols)
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        pq.write_table(table, tmp)
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)
    return table.num_rows
