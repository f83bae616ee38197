"""Task generation: draw, phrase, replay the gold on a fresh episode, dedupe, in parallel if asked.

Draw ``i`` depends only on (world, seed, i), and results are consumed in index order, so the same arguments
give byte-identical task files whatever the number of workers. A draw is dropped (and counted by reason) when
no candidate works, when the gold replay errors, or when it duplicates an earlier task (same instruction and
same gold change-set, which is what the task id hashes).
"""

from __future__ import annotations

import hashlib
import os
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from multiprocessing import get_context
from typing import Any

from ..core.jsonutil import canonical_json
from ..world import Rng, World, get_world
from .kit import TaskKit
from .model import Action, Difficulty, Provenance, Refusal, Task, UserProfile
from .phrasing import phrase
from .sampling import DEFAULT_MIX, SAMPLERS, Draft, Drop, Synthesizer

#: Recorded in every task's provenance. Raised when generated tasks change for the same (world, seed, index):
#: a tool's result (and so the gold output digests) or how expected outputs are derived. Version 2: retail write
#: tools report the money each call moved ("this_call"), and refund/charge amounts are read from it.
GENERATOR_VERSION = "toolworld-tasks/3"


def output_digest(output: Any) -> str:
    """A short, stable fingerprint of a tool result (canonical JSON), stored with each gold action."""
    return hashlib.sha256(canonical_json(output).encode()).hexdigest()[:12]


def level(path_length: int, writes: int) -> str:
    if writes >= 2 or path_length >= 6:
        return "hard"
    if path_length <= 3 and writes <= 1:
        return "easy"
    return "medium"


class TaskBuilder:
    """Turns drafts into verified ``Task`` objects for one world and seed."""

    def __init__(self, world: World, seed: int = 0, kit: TaskKit | None = None) -> None:
        self.synth = Synthesizer(world, seed, kit)
        self.world, self.seed, self.kit = world, seed, self.synth.kit

    def build(self, index: int, sampler: str) -> Task:
        """Draw ``index`` with ``sampler`` and return the replay-verified task (raises ``Drop``)."""
        draft = self.synth.draw(index, sampler)
        return self.finish(draft, index)

    def finish(self, draft: Draft, index: int) -> Task:
        rng = Rng(f"{self.world.name}/{self.seed}/{index}/phrase")
        gold = [Action(name=s.name, arguments=s.arguments) for s in draft.steps]
        # Gold execution on a fresh episode: the recorded change-set is what the gold actually does.
        with self.world.episode(self.seed) as ep:
            instruction = phrase(draft, self.kit, ep, rng)  # before the replay: the user speaks of the seed state
            outputs = []
            for action in gold:
                result = ep.call(action.name, action.arguments)
                if not result.ok:
                    raise Drop("replay_error")
                action.output_digest = output_digest(result.output)
                outputs.append(result.output)
            changes = ep.changes().to_dict()
            refusal = None
            if draft.kind == "refusal":
                target = draft.targets[0]
                if changes:
                    raise Drop("refusal_changed_state")
                denied = ep.probe(target.tool, target.arguments)
                if denied.ok or denied.error is None or denied.error.type != "policy_violation":
                    raise Drop("refusal_not_refused")
                refusal = Refusal(rule=target.rule or "policy", reason=denied.error.message,
                                  forbidden=Action(name=target.tool, arguments=target.arguments))  # fmt: skip
        expected = []
        if draft.kind != "refusal":
            by_step = {id(s): out for s, out in zip(draft.steps, outputs, strict=True)}
            for step in draft.steps:
                if step.role == "target":
                    expected.extend(self.kit.outputs(step.name, step.arguments, by_step[id(step)]))
        writes = sum(1 for a in gold if self.world.tools[a.name].spec.mutates)
        difficulty = Difficulty(path_length=len(gold), writes=writes, tools=sorted({a.name for a in gold}),
                                distractors=draft.distractors, level=level(len(gold), writes))  # type: ignore[arg-type]  # fmt: skip
        user = self._user(draft, gold)
        return Task(
            id=Task.content_id(self.world.name, self.seed, instruction, changes),
            world=self.world.name,
            seed=self.seed,
            kind=draft.kind,
            instruction=instruction,
            user=user,
            gold_actions=gold,
            expected_changes=changes,
            expected_outputs=expected,
            refusal=refusal,
            ignore_columns=sorted(self.kit.ignore_columns),
            difficulty=difficulty,
            provenance=Provenance(sampler=draft.sampler, targets=[t.tool for t in draft.targets],
                                  generator_version=GENERATOR_VERSION, index=index),
        )

    def _user(self, draft: Draft, gold: list[Action]) -> UserProfile:
        """The profile as stored: entity lists the user knows are trimmed to those the task is about."""
        mentioned: set[Any] = set()
        for t in draft.targets:
            for v in t.arguments.values():
                mentioned.update(v if isinstance(v, list) else [v])
        known = {}
        for key, value in draft.profile.known.items():
            if key in self.kit.known_entity_keys and isinstance(value, list):
                value = [v for v in value if v in mentioned]
            known[key] = value
        return draft.profile.model_copy(update={"known": known})


@dataclass
class GenerateReport:
    """Generated tasks as JSONL lines (what gets written) with their ids; ``tasks`` parses them on demand."""

    lines: list[str] = field(default_factory=list)
    ids: list[str] = field(default_factory=list)
    draws: int = 0
    drops: Counter[str] = field(default_factory=Counter)
    _tasks: list[Task] | None = None

    @property
    def tasks(self) -> list[Task]:
        if self._tasks is None or len(self._tasks) != len(self.lines):
            self._tasks = [Task.model_validate_json(line) for line in self.lines]
        return self._tasks

    def __len__(self) -> int:
        return len(self.lines)


def parse_mix(spec: str | None) -> dict[str, int]:
    """``--sampler`` values: ``mixed`` (default), one sampler name, or ``name=weight,...``."""
    if not spec or spec == "mixed":
        return dict(DEFAULT_MIX)
    mix: dict[str, int] = {}
    for part in spec.split(","):
        name, _, weight = part.strip().partition("=")
        if name not in SAMPLERS:
            raise ValueError(f"unknown sampler {name!r}; choose from mixed, {', '.join(SAMPLERS)}")
        try:
            mix[name] = int(weight) if weight else 1
        except ValueError:
            raise ValueError(f"sampler weight must be an integer, got {part!r}") from None
    if not any(mix.values()):
        raise ValueError("at least one sampler needs a positive weight")
    return mix


# -- parallel generation ---------------------------------------------------------------------------------------

_WORKER: tuple[TaskBuilder, dict[str, int]] | None = None


def _init_worker(world_name: str, seed: int, mix: dict[str, int]) -> None:
    global _WORKER
    _WORKER = (TaskBuilder(get_world(world_name), seed), mix)


def _build_chunk(bounds: tuple[int, int]) -> list[tuple[str, str] | str]:
    """Draws ``[start, stop)`` in a worker: ``(task id, task JSON)`` or the drop reason, per index."""
    assert _WORKER is not None
    builder, mix = _WORKER
    return [_one(builder, mix, i) for i in range(*bounds)]


def _one(builder: TaskBuilder, mix: Mapping[str, int], index: int) -> tuple[str, str] | str:
    sampler = builder.synth.pick_sampler(index, mix)
    try:
        task = builder.build(index, sampler)
    except Drop as drop:
        return drop.reason
    return task.id, task.to_json()


def _results(world: World, seed: int, mix: dict[str, int], workers: int, chunk: int,
             builder: TaskBuilder | None) -> Iterator[tuple[str, str] | str]:  # fmt: skip
    if workers <= 1:
        builder = builder or TaskBuilder(world, seed)
        index = 0
        while True:
            yield _one(builder, mix, index)
            index += 1
    # fork shares the parent's loaded world and cached seed image; spawn (elsewhere) rebuilds them per worker.
    ctx = get_context("fork" if os.name == "posix" else "spawn")
    with ProcessPoolExecutor(workers, mp_context=ctx, initializer=_init_worker,
                             initargs=(world.name, seed, mix)) as pool:  # fmt: skip
        start = 0
        inflight = []
        try:
            while True:
                while len(inflight) < workers * 2:
                    inflight.append(pool.submit(_build_chunk, (start, start + chunk)))
                    start += chunk
                yield from inflight.pop(0).result()
        finally:
            for f in inflight:
                f.cancel()


def generate(world: World | str, n: int, *, seed: int = 0, sampler: str | dict[str, int] | None = None, workers: int = 1,
             chunk: int = 64, on_progress: Callable[[int, int], None] | None = None,
             max_draws: int | None = None) -> GenerateReport:  # fmt: skip
    """Generate ``n`` distinct, replay-verified tasks (fewer only if ``max_draws`` runs out first).

    ``world`` is a ``World`` or the name of an installed one; ``report.tasks`` holds the tasks, ``report.lines``
    their JSONL lines (what ``toolworld tasks generate`` writes).
    """
    if isinstance(world, str):
        world = get_world(world)
    mix = sampler if isinstance(sampler, dict) else parse_mix(sampler)
    if workers > 1:
        get_world(world.name)  # workers look the world up by name: fail here, clearly, if they cannot
    report = GenerateReport()
    seen: set[str] = set()
    limit = max_draws if max_draws is not None else n * 4 + 200
    builder = TaskBuilder(world, seed) if workers <= 1 else None
    # The parent only dedupes and collects lines: with workers, any parsing here would compete with them.
    for item in _results(world, seed, mix, workers, chunk, builder):
        if len(report) >= n or report.draws >= limit:
            break
        report.draws += 1
        if isinstance(item, str):
            report.drops[item] += 1
            continue
        task_id, line = item
        if task_id in seen:
            report.drops["duplicate"] += 1
            continue
        seen.add(task_id)
        report.ids.append(task_id)
        report.lines.append(line)
        if on_progress is not None:
            on_progress(len(report), report.draws)
    return report
