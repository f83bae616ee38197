"""Task generation: draw, phrase, replay the gold on a fresh episode, dedupe, in parallel if asked.

Draw ``i`` depends only on (world, seed, i), and results are consumed in index order, so the same arguments
give byte-identical task files whatever the number of workers. A draw is dropped (and counted by reason) when
no candidate works, when the gold replay errors, when it breaks a coherence rule (``incoherent:<rule>``), or
when it duplicates an earlier task: one task per (user, target calls, end state), however differently the
request is worded, so a task set spreads over many customers and requests instead of rewording a few.
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
from ..world import Episode, Rng, World, extract_path, get_world
from .kit import TaskKit
from .model import (
    DEMANDS,
    Action,
    Difficulty,
    EndState,
    ExpectedOutput,
    Provenance,
    Refusal,
    Revision,
    Scenario,
    Task,
    UserProfile,  # fmt: skip
)
from .phrasing import phrase
from .quality import coherence_problems, useful_steps
from .sampling import DEFAULT_MIX, SAMPLERS, Draft, Drop, Step, Synthesizer

#: Recorded in every task's provenance. Raised when generated tasks change for the same (world, seed, index):
#: a tool's result (and so the gold output digests) or how expected outputs are derived. Version 2: retail write
#: tools report the money each call moved ("this_call"), and refund/charge amounts are read from it. Version 3:
#: scenarios (unknown facts, needs, contingencies, changes of mind), pruned gold with required checks,
#: alternative end states, coherence rules, one task per (user, target, end state).
GENERATOR_VERSION = "toolworld-tasks/3"


def output_digest(output: Any) -> str:
    """A short, stable fingerprint of a tool result (canonical JSON), stored with each gold action."""
    return hashlib.sha256(canonical_json(output).encode()).hexdigest()[:12]


def level(path_length: int, writes: int, demands: int = 0) -> str:
    """Difficulty from the pruned gold path and what the request asks to reason about."""
    if writes >= 2 or path_length >= 6 or demands >= 2:
        return "hard"
    if path_length <= 3 and writes <= 1 and not demands:
        return "easy"
    return "medium"


Call = tuple[str, dict[str, Any]]


class TaskBuilder:
    """Turns drafts into verified ``Task`` objects for one world and seed.

    A draft becomes a task in five moves: the kit *dresses* it as a scenario (what the user does not know,
    needs, a change of mind); the gold gains the checks a careful agent makes before each write (the kit's
    ``required_checks``) and the reads that find what the user cannot quote; it is replayed on a fresh
    episode and pruned to the steps that serve a purpose (``quality.useful_steps``); refusals get the
    compliant alternatives the kit names, each executed; and the result must pass every coherence rule
    (``quality.coherence_problems``), else the draw is dropped with the rule's name.
    """

    def __init__(self, world: World, seed: int = 0, kit: TaskKit | None = None) -> None:
        self.synth = Synthesizer(world, seed, kit)
        self.world, self.seed, self.kit = world, seed, self.synth.kit
        self.specs = self.synth.specs

    def build(self, index: int, sampler: str) -> Task:
        """Draw ``index`` with ``sampler`` and return the replay-verified task (raises ``Drop``)."""
        return self.build_keyed(index, sampler)[0]

    def build_keyed(self, index: int, sampler: str) -> tuple[Task, str]:
        """The task and its duplicate key: one task per (user, target calls, end state)."""
        draft = self.synth.draw(index, sampler)
        task = self.finish(draft, index)
        key = canonical_json([draft.principal, [[t.tool, t.arguments] for t in draft.targets], task.expected_changes,
                              task.refusal.rule if task.refusal else None])  # fmt: skip
        return task, hashlib.sha256(key.encode()).hexdigest()[:20]

    def finish(self, draft: Draft, index: int) -> Task:
        rng = Rng(f"{self.world.name}/{self.seed}/{index}/phrase")
        with self.world.episode(self.seed) as ep:  # the seed state: what the user speaks of
            self.kit.dress(draft, ep, Rng(f"{self.world.name}/{self.seed}/{index}/dress"))
            calls, scenario_count = self._gold_calls(draft, ep)
            phrased = phrase(draft, self.kit, ep, rng)
        instruction = str(getattr(phrased, "text", phrased))
        targets = {id(t) for t in draft.steps if t.role == "target"}
        target_at = [i for i, (_, _, step) in enumerate(calls) if step is not None and id(step) in targets]
        scenario_reads = list(range(1, 1 + scenario_count))  # right after the identification (``_gold_calls``)

        with self.world.episode(self.seed) as ep:  # gold execution on a fresh episode: what gold really does
            outputs = self._execute(ep, [(n, a) for n, a, _ in calls])
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

        # Minimal gold: keep the steps that serve a purpose (reads change nothing, so dropping one changes
        # neither the other results nor the change-set).
        names_args = [(n, a) for n, a, _ in calls]
        forbidden = [(draft.targets[0].tool, draft.targets[0].arguments)] if draft.kind == "refusal" else []
        user = self._user(draft, phrased)
        useful = useful_steps(names_args, outputs, self.world, self.kit, expected_steps={*target_at, *scenario_reads},
                              known=list(user.known.values()), forbidden=forbidden[0] if forbidden else None)  # fmt: skip
        keep = [i for i in range(len(calls)) if useful[i]]
        gold = [Action(name=calls[i][0], arguments=calls[i][1], output_digest=output_digest(outputs[i])) for i in keep]
        position = {old: new for new, old in enumerate(keep)}

        expected: list[ExpectedOutput] = []
        if draft.kind != "refusal":
            for i in target_at:
                for out in self.kit.outputs(calls[i][0], calls[i][1], outputs[i]):
                    expected.append(out.model_copy(update={"step": position[i]}))
        alternatives = self._alternatives(draft, gold) if draft.kind == "refusal" else []

        writes = sum(1 for a in gold if self.specs[a.name].mutates)
        demands = [d for d in draft.demands if d in DEMANDS]
        difficulty = Difficulty(path_length=len(gold), writes=writes, tools=sorted({a.name for a in gold}),
                                distractors=draft.distractors, demands=len(demands),
                                level=level(len(gold), writes, len(demands)))  # type: ignore[arg-type]  # fmt: skip
        scenario = Scenario(demands=demands, needs=draft.needs, contingency=draft.contingency,
                            facts=list(getattr(phrased, "facts", [])),
                            templates=list(getattr(phrased, "templates", [])),
                            withheld=[key for t in draft.targets for key in t.withheld.values()],
                            reads=[position[i] for i in scenario_reads])  # fmt: skip
        task = Task(
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
            alternatives=alternatives,
            scenario=scenario,
            difficulty=difficulty,
            provenance=Provenance(sampler=draft.sampler, targets=[t.tool for t in draft.targets],
                                  generator_version=GENERATOR_VERSION, index=index),
        )
        with self.world.episode(self.seed) as ep:
            problems = coherence_problems(task, self.world, self.kit, ep=ep)
        if problems:
            raise Drop(f"incoherent:{problems[0][0]}")
        return task

    # -- the gold path --------------------------------------------------------------------------------------

    def _gold_calls(self, draft: Draft, ep: Episode) -> tuple[list[tuple[str, dict[str, Any], Step | None]], int]:
        """The draft's steps, plus a read that finds each value the user cannot quote and the checks a careful
        agent makes before each write (or before refusing one), in conversation order; and how many of them,
        right after the identification, are the scenario's reads."""
        calls: list[tuple[str, dict[str, Any], Step | None]] = [(s.name, s.arguments, s) for s in draft.steps]
        # Right after the identification: first the reads that find what the user cannot quote, then those that
        # show a need's answer (which may read what the first found); a value is used only once it is found.
        front: list[Call] = []
        shown: set[tuple[str, Any]] = set()  # what the kit's own reads yield (its finder for an order, say)
        for name, args in draft.reads:
            result = ep.call(name, args)
            if not result.ok:
                raise Drop("scenario_read_failed")
            for kind, path in self.specs[name].yields.items():
                shown.update((kind, v) for v in extract_path(result.output, path))
        for kind, value in draft.unknown:
            if (kind, value) in shown:
                continue
            if not any(self._yields(s, kind, value) for s in draft.steps if s.role == "identify"):
                found = self._finder(ep, draft, kind, value)
                if found is None:
                    raise Drop("unknown_fact_unreachable")
                front.append(found)
        front += [(name, args) for name, args in draft.reads]
        ahead: list[tuple[str, dict[str, Any], Step | None]] = []
        if front:
            for name, args in front:
                if any(c[0] == name and c[1] == args for c in ahead):
                    continue
                same = [c for c in calls[1:] if c[0] == name and c[1] == args]
                ahead.append(same[0] if same else (name, args, None))
            calls = [calls[0], *ahead, *(c for c in calls[1:] if c not in ahead)]
        out: list[tuple[str, dict[str, Any], Step | None]] = []
        writes = list(calls)
        if draft.kind == "refusal":
            writes.append((draft.targets[0].tool, draft.targets[0].arguments, None))
        for i, (name, args, step) in enumerate(writes):
            if self.specs[name].mutates:
                for check in self.kit.required_checks(name, args, ep, principal=draft.principal):
                    if not any(c[0] == check[0] and c[1] == check[1] for c in out):
                        out.append((check[0], check[1], None))
            if i < len(calls):
                out.append((name, args, step))
        return out, len(ahead)

    def _yields(self, step: Step, kind: str, value: Any) -> bool:
        path = self.specs[step.name].yields.get(kind)
        return path is not None and value in extract_path(step.output, path)

    def _finder(self, ep: Episode, draft: Draft, kind: str, value: Any) -> Call | None:
        """A read, bound to the user alone, whose result holds ``value`` (the user's orders, for an order)."""
        principal_kind = self.kit.principal
        for name in self.synth.graph.producers(kind):
            spec = self.specs[name]
            params = [p for p in spec.entity_params if p.required]
            if spec.mutates or len(params) != 1 or params[0].kind != principal_kind or params[0].many:
                continue
            args = {params[0].param: draft.principal}
            result = ep.call(name, args)
            if result.ok and value in extract_path(result.output, spec.yields[kind]):
                return name, args
        return None

    def _execute(self, ep: Episode, calls: list[Call]) -> list[Any]:
        outputs = []
        for name, args in calls:
            result = ep.call(name, args)
            if not result.ok:
                raise Drop("replay_error")
            outputs.append(result.output)
        return outputs

    def _alternatives(self, draft: Draft, gold: list[Action]) -> list[EndState]:
        """Each compliant alternative the kit names, executed after gold's reads: listed if every call works."""
        out = []
        with self.world.episode(self.seed) as ep:
            options = self.kit.alternatives(draft.targets[0], ep, draft.principal)
        for label, alt_calls in options:
            calls: list[Call] = [(a.name, a.arguments) for a in gold]
            with self.world.episode(self.seed) as ep:
                for name, args in alt_calls:
                    for check in self.kit.required_checks(name, args, ep, principal=draft.principal):
                        if check not in calls:
                            calls.append(check)
                    calls.append((name, args))
                try:
                    outputs = self._execute(ep, calls)
                except Drop:
                    continue
                changes = ep.changes().to_dict()
            actions = [Action(name=n, arguments=a, output_digest=output_digest(o))
                       for (n, a), o in zip(calls, outputs, strict=True)]  # fmt: skip
            expected = [out.model_copy(update={"step": i}) for i, (n, a) in enumerate(calls) if self.specs[n].mutates
                        for out in self.kit.outputs(n, a, outputs[i])]  # fmt: skip
            out.append(EndState(label=label, kind="action", gold_actions=actions, expected_changes=changes,
                                expected_outputs=expected))  # fmt: skip
        return out

    def _user(self, draft: Draft, phrased: Any) -> UserProfile:
        """The profile as stored: entity lists the user knows are trimmed to those the task is about, values
        the user cannot quote are left out, and a change of mind gets the words the user says."""
        mentioned: set[Any] = set(draft.mentions)
        for t in draft.targets:
            for v in (t.said or t.arguments).values():
                mentioned.update(v if isinstance(v, list) else [v])
        unknown = {v for _, v in draft.unknown}
        known = {}
        for key, value in draft.profile.known.items():
            if key in self.kit.known_entity_keys and isinstance(value, list):
                value = [v for v in value if v in mentioned and v not in unknown]
                if not value:  # nothing of that kind is the user's to quote in this task
                    continue
            known[key] = value
        update: dict[str, Any] = {"known": known}
        if draft.revision:
            message = getattr(phrased, "revision", None)
            if not message:
                raise Drop("revision_unphrased")
            update["revision"] = Revision(message=message, initial=[Action(name=n, arguments=a) for n, a in draft.revision])
        return draft.profile.model_copy(update=update)


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


def _build_chunk(bounds: tuple[int, int]) -> list[tuple[str, str, str] | str]:
    """Draws ``[start, stop)`` in a worker: ``(duplicate key, task id, task JSON)`` or the drop reason, per index."""
    assert _WORKER is not None
    builder, mix = _WORKER
    return [_one(builder, mix, i) for i in range(*bounds)]


def _one(builder: TaskBuilder, mix: Mapping[str, int], index: int) -> tuple[str, str, str] | str:
    sampler = builder.synth.pick_sampler(index, mix)
    try:
        task, key = builder.build_keyed(index, sampler)
    except Drop as drop:
        return drop.reason
    return key, task.id, task.to_json()


def _results(world: World, seed: int, mix: dict[str, int], workers: int, chunk: int,
             builder: TaskBuilder | None) -> Iterator[tuple[str, str, str] | str]:  # fmt: skip
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
    # Ids hash the request and the end state, not the user: two users asking the same question with nothing to
    # change would share one, and a task file is keyed by id (runs, resumes, reports), so the later one goes.
    seen_ids: set[str] = set()
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
        key, task_id, line = item
        if key in seen or task_id in seen_ids:
            report.drops["duplicate"] += 1
            continue
        seen.add(key)
        seen_ids.add(task_id)
        report.ids.append(task_id)
        report.lines.append(line)
        if on_progress is not None:
            on_progress(len(report), report.draws)
    return report
