"""Replay verification and statistics of task sets.

``verify_task`` replays a task's gold actions on a fresh episode and compares, step by step, each result
with the digest recorded at generation, then the final change-set with ``expected_changes``, then each expected
output that names its step with what the world's task kit derives from that step's result now. Every alternative
end state (``Task.alternatives``) is replayed the same way on its own fresh episode. A failure names the first
step that differs (and the alternative, if it is one), so an edited argument points at itself rather than at the
end state.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from ..world import World, WorldError, get_world
from .generate import GENERATOR_VERSION, output_digest
from .kit import TaskKit, kit_for
from .model import Action, EndState, ExpectedOutput, Refusal, Task


@dataclass(frozen=True, slots=True)
class Failure:
    """Why a task did not verify: ``step`` is the 0-based index of the first differing gold action (None when
    the whole task is unusable, e.g. an unknown world, or when only the end state differs); ``end_state`` is the
    label of the alternative end state that failed (None: the primary one), also named in ``message``."""

    task_id: str
    line: int | None
    step: int | None
    message: str
    end_state: str | None = None

    def __str__(self) -> str:
        where = f"line {self.line}, " if self.line is not None else ""
        at = f"step {self.step}: " if self.step is not None else ""
        return f"{self.task_id} ({where.rstrip(', ') or 'task'}) {at}{self.message}"


def verify_task(task: Task, world: World) -> Failure | None:
    """Replay ``task`` (and each of its alternative end states) on fresh episodes of ``world``; None when
    everything matches.

    A task made by another generator version that no longer replays says so: the world or its tools changed
    since the file was made, and the cure is to regenerate it, not to debug the step.
    """
    failure = _replay(task, world)
    if failure is not None and task.provenance.generator_version != GENERATOR_VERSION:
        hint = (f" (made by {task.provenance.generator_version}; this toolworld generates {GENERATOR_VERSION}: "
                "regenerate the task file)")
        return replace(failure, message=failure.message + hint)
    return failure


def _replay(task: Task, world: World) -> Failure | None:
    if world.name != task.world:
        return Failure(task.id, None, None, f"task is for world {task.world!r}, not {world.name!r}")
    labels = Counter(alt.label for alt in task.alternatives)
    twice = sorted(label for label, n in labels.items() if n > 1)
    if twice:
        return Failure(task.id, None, None, f"alternative end states share the label {twice[0]!r}: scores name the "
                       "end state they matched by its label, so each needs its own")  # fmt: skip
    kit = kit_for(world)
    primary = EndState(label="", kind=task.kind, gold_actions=task.gold_actions, expected_changes=task.expected_changes,
                       expected_outputs=task.expected_outputs, refusal=task.refusal)  # fmt: skip
    failure = _replay_end_state(task, primary, world, kit)
    if failure is not None:
        return failure
    for alt in task.alternatives:
        failure = _replay_end_state(task, alt, world, kit)
        if failure is not None:
            return replace(failure, message=f"alternative {alt.label!r}: {failure.message}", end_state=alt.label)
    return None


def _replay_end_state(task: Task, end: EndState, world: World, kit: TaskKit) -> Failure | None:
    """Replay one end state's gold actions on a fresh episode of the task's seed and compare what it records."""
    if end.kind == "refusal" and end.refusal is None:
        return Failure(task.id, None, None, "a refusal end state must name the rule and the forbidden call (refusal)")
    if end.kind == "action" and not _any_row(end.expected_changes) and not end.expected_outputs:
        # judged as an action, an end state that changes and tells nothing is reached by an agent that does nothing
        return Failure(task.id, None, None, "an action end state with no expected change and no expected output "
                       "would pass an agent that does nothing")  # fmt: skip
    for i, action in enumerate(end.gold_actions):
        if action.name not in world.tools:
            return Failure(task.id, None, i, f"unknown tool {action.name!r} in world {world.name!r}")
    results: list[Any] = []
    with world.episode(task.seed) as ep:
        for i, action in enumerate(end.gold_actions):
            result = ep.call(action.name, action.arguments)
            if not result.ok:
                assert result.error is not None
                return Failure(task.id, None, i, f"{action.name} failed: {result.error.type}: {result.error.message}")
            if action.output_digest is not None and output_digest(result.output) != action.output_digest:
                return Failure(task.id, None, i, f"{action.name} returned a different result than at generation "
                               f"(arguments {action.arguments})")  # fmt: skip
            results.append(result.output)
        changes = ep.changes().to_dict()
        if changes != end.expected_changes:
            return Failure(task.id, None, None, "end state differs from expected_changes: "
                           + describe_difference(end.expected_changes, changes))  # fmt: skip
        if end.refusal is not None:
            failure = _still_refused(task, end.refusal, ep)
            if failure is not None:
                return failure
    for expected in end.expected_outputs:
        failure = _check_output(task, expected, end.gold_actions, results, kit)
        if failure is not None:
            return failure
    return None


def _any_row(changes: dict[str, Any]) -> bool:
    return any(rows for ops in changes.values() if isinstance(ops, dict) for rows in ops.values())


def _still_refused(task: Task, refusal: Refusal, ep: Any) -> Failure | None:
    denied = ep.probe(refusal.forbidden.name, refusal.forbidden.arguments)
    if denied.ok or denied.error is None or denied.error.type != "policy_violation":
        return Failure(task.id, None, None, "the forbidden call is no longer refused with policy_violation")
    return None


def _check_output(task: Task, expected: ExpectedOutput, actions: list[Action], results: list[Any],
                  kit: TaskKit) -> Failure | None:  # fmt: skip
    """An expected output that names its gold step must be among the outputs the kit derives from that step's
    result now (outputs of older task files name no step and are not checked)."""
    if expected.step is None:
        return None
    shown = f"{expected.label}={expected.value}"
    if not 0 <= expected.step < len(actions):
        return Failure(task.id, None, None, f"expected output {shown} names step {expected.step}, but there are "
                       f"{len(actions)} gold actions")  # fmt: skip
    action = actions[expected.step]
    derived = kit.outputs(action.name, action.arguments, results[expected.step])
    if any(o.label == expected.label and o.value == expected.value for o in derived):
        return None
    same = [o.value for o in derived if o.label == expected.label]
    now = ", ".join(same) if same else f"no {expected.label}"
    return Failure(task.id, None, expected.step, f"expected output {shown} is not what step {expected.step} "
                   f"({action.name}) returns now: {now}")  # fmt: skip


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
            report.failures.append(replace(failure, line=line))
        if on_progress is not None:
            on_progress(n)
    return report
