"""Statistics of a task set: coverage, difficulty, and how much of it is worth learning from.

Beyond counting targets and path lengths, :func:`task_stats` runs the same detectors the generator uses to
drop and prune drafts (``toolworld.tasks.quality``): tasks no support desk would see, gold reads that serve
nothing, writes made without the reads a careful agent makes first. It also measures what the generator can
only see across tasks: near-duplicate instructions, how many users carry the set, which reasoning demands and
phrasing templates it exercises.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from difflib import SequenceMatcher
from typing import Any

from ..world import Episode, World, WorldError, get_world
from .kit import TaskKit, kit_for
from .model import Task
from .quality import coherence_problems, gold_outputs, missing_check_calls, purposeless_reads

#: Demands that make the agent reason about state rather than follow the request word for word.
REASONING_DEMANDS = ("unknown_fact", "need", "contingency")
NEAR_DUPLICATE_RATIO = 0.9
EXAMPLES = 5  # problems quoted per detector, so a report shows what a count means

#: Progress callback: (stage, done, total).
Progress = Callable[[str, int, int], None]


def near_duplicates(texts: Sequence[str], threshold: float = NEAR_DUPLICATE_RATIO) -> list[tuple[int, int, float]]:
    """Pairs ``(i, j, ratio)`` of texts whose ``difflib.SequenceMatcher`` ratio exceeds ``threshold``.

    Exact over all pairs, but fast: texts are compared in order of length, and the cheap upper bounds come
    first (the length ratio, which ends the inner loop once it alone rules a pair out; then ``quick_ratio``).
    The ratio is that of ``SequenceMatcher(None, longer, shorter, autojunk=False)``: autojunk would treat the
    spaces and common letters of a long English sentence as junk and understate how alike two requests are.
    """
    order = sorted(range(len(texts)), key=lambda k: (len(texts[k]), k))
    pairs: list[tuple[int, int, float]] = []
    matcher = SequenceMatcher(None, autojunk=False)
    for pos, i in enumerate(order):
        short = texts[i]
        matcher.set_seq2(short)  # the shorter text's index is built once per row
        for j in order[pos + 1:]:
            other = texts[j]
            total = len(short) + len(other)
            if total == 0 or 2 * len(short) / total <= threshold:
                break  # lengths only grow from here: no later text can pass either
            matcher.set_seq1(other)
            if matcher.real_quick_ratio() <= threshold or matcher.quick_ratio() <= threshold:
                continue
            ratio = matcher.ratio()
            if ratio > threshold:
                pairs.append((min(i, j), max(i, j), round(ratio, 4)))
    return sorted(pairs)


def _user_key(task: Task) -> tuple[str, str]:
    return task.world, str(task.user.known.get("email") or task.user.name)


def _basic(tasks: list[Task]) -> dict[str, Any]:
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


def _set_level(tasks: list[Task]) -> dict[str, Any]:
    n = len(tasks)
    demands: Counter[str] = Counter()
    for t in tasks:
        demands.update(set(t.scenario.demands))
    reasoning = sum(any(d in REASONING_DEMANDS for d in t.scenario.demands) for t in tasks)
    per_user = Counter(_user_key(t) for t in tasks)
    return {
        "demands": {"share_any": round(reasoning / n, 4) if n else 0.0, "by_demand": dict(sorted(demands.items()))},
        "templates_in_use": len({tid for t in tasks for tid in t.scenario.templates}),
        "alternatives": sum(bool(t.alternatives) for t in tasks),
        "users": {"distinct": len(per_user), "max_tasks_per_user": max(per_user.values(), default=0)},
    }


def task_stats(tasks: list[Task], world_lookup: Callable[[str], World] = get_world, *,
               on_progress: Progress | None = None) -> dict[str, Any]:  # fmt: skip
    """Coverage, difficulty and quality of a task set (what ``toolworld tasks stats`` prints).

    The quality figures (``incoherent``, ``purposeless_reads``, ``missing_checks``,
    ``write_tools_never_targeted``) need each task's world: tasks of a world ``world_lookup`` cannot find are
    left out of them and named under ``skipped_worlds`` with the reason, instead of failing the whole report.
    """
    n = len(tasks)
    data = _basic(tasks)
    data.update(_set_level(tasks))

    worlds: dict[str, tuple[World, TaskKit]] = {}
    skipped: dict[str, str] = {}
    for name in data["worlds"]:
        try:
            world = world_lookup(name)
            worlds[name] = (world, kit_for(world))
        except (WorldError, TypeError, ImportError) as exc:
            skipped[name] = str(exc)
    never = []
    for world, _ in worlds.values():
        never += [t for t, tool in sorted(world.tools.items()) if tool.spec.mutates and t not in data["targets"]]
    data["write_tools_never_targeted"] = never

    by_rule: Counter[str] = Counter()
    by_check: Counter[str] = Counter()
    incoherent = purposeless_tasks = purposeless_total = missing_tasks = analysed = 0
    examples: dict[str, list[dict[str, Any]]] = {"incoherent": [], "purposeless_reads": [], "missing_checks": []}
    errors: list[dict[str, str]] = []
    episodes: dict[tuple[str, int], Episode] = {}  # rules only query: one fresh episode per (world, seed)
    try:
        for done, task in enumerate(tasks, start=1):
            if task.world in worlds:
                world, kit = worlds[task.world]
                try:
                    key = (task.world, task.seed)
                    if key not in episodes:
                        episodes[key] = world.episode(task.seed)
                    problems = coherence_problems(task, world, kit, ep=episodes[key])
                    outputs = gold_outputs(task, world)
                    idle = purposeless_reads(task, world, kit, outputs=outputs)
                    missing = missing_check_calls(task, world, kit, outputs=outputs)
                except Exception as exc:  # one malformed task must not cost the whole report
                    if len(errors) < EXAMPLES:
                        errors.append({"task": task.id, "error": f"{type(exc).__name__}: {exc}"})
                    continue
                analysed += 1
                if problems:
                    incoherent += 1
                    by_rule.update({rule for rule, _ in problems})
                    if len(examples["incoherent"]) < EXAMPLES:
                        rule, message = problems[0]
                        examples["incoherent"].append({"task": task.id, "rule": rule, "message": message})
                if idle:
                    purposeless_tasks += 1
                    purposeless_total += len(idle)
                    if len(examples["purposeless_reads"]) < EXAMPLES:
                        examples["purposeless_reads"].append(
                            {"task": task.id, "reads": [f"{i}:{task.gold_actions[i].name}" for i in idle]})
                if missing:
                    missing_tasks += 1
                    by_check.update({m.check for m in missing})
                    if len(examples["missing_checks"]) < EXAMPLES:
                        examples["missing_checks"].append({"task": task.id, "message": str(missing[0])})
            if on_progress is not None:
                on_progress("analysing", done, n)
    finally:
        for ep in episodes.values():
            ep.close()

    data["analysed"] = analysed
    data["incoherent"] = {"count": incoherent, "by_rule": dict(sorted(by_rule.items()))}
    data["purposeless_reads"] = {"tasks": purposeless_tasks, "reads": purposeless_total}
    data["missing_checks"] = {"tasks": missing_tasks, "by_check": dict(sorted(by_check.items()))}
    data["examples"] = examples
    data["analysis_errors"] = errors
    data["skipped_worlds"] = skipped

    if on_progress is not None:
        on_progress("near duplicates", 0, 1)
    pairs = near_duplicates([t.instruction for t in tasks])
    data["near_duplicates"] = {"pairs": len(pairs), "share": round(len(pairs) / n, 4) if n else 0.0,
                               "examples": [[tasks[i].id, tasks[j].id, r] for i, j, r in pairs[:EXAMPLES]]}  # fmt: skip
    if on_progress is not None:
        on_progress("near duplicates", 1, 1)
    return data
