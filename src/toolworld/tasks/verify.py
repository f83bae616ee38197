"""Replay verification and statistics of task sets.

``verify_task`` replays a task's gold actions on a fresh episode and compares, step by step, each result
with the digest recorded at generation, then the final change-set with ``expected_changes``. A failure names
the first step that differs, so an edited argument points at itself rather than at the end state.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from ..world import World, WorldError, get_world
from .generate import GENERATOR_VERSION, output_digest
from .model import Task


@dataclass(frozen=True, slots=True)
class Failure:
    """Why a task did not verify: ``step`` is the 0-based index of the first differing gold action (None when
    the whole task is unusable, e.g. an unknown world, or when only the end state differs)."""

    task_id: str
    line: int | None
    step: int | None
    message: str

    def __str__(self) -> str:
        where = f"line {self.line}, " if self.line is not None else ""
        at = f"step {self.step}: " if self.step is not None else ""
        return f"{self.task_id} ({where.rstrip(', ') or 'task'}) {at}{self.message}"


def verify_task(task: Task, world: World) -> Failure | None:
    """Replay ``task`` on a fresh episode of ``world``; None when everything matches.

    A task made by another generator version that no longer replays says so: the world or its tools changed
    since the file was made, and the cure is to regenerate it, not to debug the step.
    """
    failure = _replay(task, world)
    if failure is not None and task.provenance.generator_version != GENERATOR_VERSION:
        hint = (f" (made by {task.provenance.generator_version}; this toolworld generates {GENERATOR_VERSION}: "
                "regenerate the task file)")
        return Failure(failure.task_id, failure.line, failure.step, failure.message + hint)
    return failure


def _replay(task: Task, world: World) -> Failure | None:
    if world.name != task.world:
        return Failure(task.id, None, None, f"task is for world {task.world!r}, not {world.name!r}")
    for i, action in enumerate(task.gold_actions):
        if action.name not in world.tools:
            return Failure(task.id, None, i, f"unknown tool {action.name!r} in world {world.name!r}")
    with world.episode(task.seed) as ep:
        for i, action in enumerate(task.gold_actions):
            result = ep.call(action.name, action.arguments)
            if not result.ok:
                assert result.error is not None
                return Failure(task.id, None, i, f"{action.name} failed: {result.error.type}: {result.error.message}")
            if action.output_digest is not None and output_digest(result.output) != action.output_digest:
                return Failure(task.id, None, i, f"{action.name} returned a different result than at generation "
                               f"(arguments {action.arguments})")  # fmt: skip
        changes = ep.changes().to_dict()
        if changes != task.expected_changes:
            return Failure(task.id, None, None, "end state differs from expected_changes: "
                           + describe_difference(task.expected_changes, changes))  # fmt: skip
        if task.refusal is not None:
            denied = ep.probe(task.refusal.forbidden.name, task.refusal.forbidden.arguments)
            if denied.ok or denied.error is None or denied.error.type != "policy_violation":
                return Failure(task.id, None, None, "the forbidden call is no longer refused with policy_violation")
    return None


def describe_difference(expected: dict[str, Any], actual: dict[str, Any]) -> str:
    """The first tables and operations whose rows differ, briefly."""
    parts = []
    for table in sorted(set(expected) | set(actual)):
        e, a = expected.get(table, {}), actual.get(table, {})
        for op in ("inserted", "updated", "deleted"):
            if e.get(op, []) != a.get(op, []):
                parts.append(f"{table}.{op}: expected {len(e.get(op, []))} rows, got {len(a.get(op, []))}"
                             + ("" if len(e.get(op, [])) != len(a.get(op, [])) else " (values differ)"))  # fmt: skip
    return "; ".join(parts[:4]) or "differs"


@dataclass
class VerifyReport:
    verified: int = 0
    failures: list[Failure] = field(default_factory=list)


def verify_tasks(tasks: Iterable[tuple[int | None, Task]], *, resolve: Callable[[str], World] = get_world,
                 on_progress: Callable[[int], None] | None = None) -> VerifyReport:  # fmt: skip
    """Verify ``(line, task)`` pairs; an unknown world fails its tasks, never the whole run."""
    report = VerifyReport()
    worlds: dict[str, World | str] = {}
    for n, (line, task) in enumerate(tasks, start=1):
        if task.world not in worlds:
            try:
                worlds[task.world] = resolve(task.world)
            except WorldError as exc:
                worlds[task.world] = str(exc)
        world = worlds[task.world]
        failure = Failure(task.id, line, None, world) if isinstance(world, str) else verify_task(task, world)
        if failure is None:
            report.verified += 1
        else:
            report.failures.append(Failure(failure.task_id, line, failure.step, failure.message))
        if on_progress is not None:
            on_progress(n)
    return report


def task_stats(tasks: list[Task]) -> dict[str, Any]:
    """Coverage and difficulty of a task set (what ``toolworld tasks stats`` prints)."""
    n = len(tasks)
    targets: Counter[str] = Counter()
    for t in tasks:
        targets.update(t.provenance.targets)
    return {
        "tasks": n,
        "worlds": dict(Counter(t.world for t in tasks)),
        "kinds": dict(Counter(t.kind for t in tasks)),
        "refusal_share": round(sum(t.kind == "refusal" for t in tasks) / n, 4) if n else 0.0,
        "samplers": dict(Counter(t.provenance.sampler for t in tasks)),
        "targets": dict(sorted(targets.items())),
        "refusal_rules": dict(sorted(Counter(t.refusal.rule for t in tasks if t.refusal).items())),
        "path_length": dict(sorted(Counter(t.difficulty.path_length for t in tasks).items())),
        "writes": dict(sorted(Counter(t.difficulty.writes for t in tasks).items())),
        "level": {k: v for k in ("easy", "medium", "hard") if (v := sum(t.difficulty.level == k for t in tasks))},
        "distractors": dict(sorted(Counter(min(t.difficulty.distractors, 10) for t in tasks).items())),
    }
