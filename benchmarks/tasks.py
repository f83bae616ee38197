"""Verified retail tasks per second, and whether the default mix is worth learning.

Every generated task has already been replayed on a fresh episode (generation drops any whose gold errors),
so the generation rate *is* the verified-task rate; a separate ``tasks verify``-style pass is timed too.
Goal: 130,000 verified retail tasks in at most 10 minutes on this 2-core machine (>= 217 tasks/s).

Quality, on the default mix of 1,000 tasks (seed 2, held apart from the seeds tests use): the stats' own
detectors (incoherent combinations, purposeless gold reads, writes without their checks: all 0), the share
of tasks that need unknown facts, needs or contingencies (>= 40%), distinct templates in use (>= 150),
near-duplicate pairs (<= 1%), and two policies run through ``toolworld.run`` with the scripted user: gold
(pass^1 must be 1.0) and the literal probe (must stay under 30%).

    python benchmarks/tasks.py            # quick: 2,000 tasks single, 4,000 with 2 workers, quality, projects
    python benchmarks/tasks.py --full     # also generates the full 130,000 with all cores and times it

The last line printed is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from toolworld import get_world
from toolworld.pipeline import run
from toolworld.tasks.generate import generate
from toolworld.tasks.stats import task_stats
from toolworld.tasks.verify import verify_task

GOAL_TASKS = 130_000
GOAL_SECONDS = 600


def rate(n: int, workers: int, seed: int) -> tuple[float, int, int]:
    world = get_world("retail")
    start = time.perf_counter()
    report = generate(world, n, seed=seed, workers=workers)
    took = time.perf_counter() - start
    return len(report) / took, report.draws, len(report)


def quality(seed: int, n: int = 1000) -> dict[str, object]:
    """The default mix's quality figures (see the module doc)."""
    tasks = generate("retail", n, seed=seed).tasks
    stats = task_stats(tasks)
    out: dict[str, object] = {
        "quality_tasks": len(tasks),
        "incoherent": stats["incoherent"]["count"],
        "purposeless_reads": stats["purposeless_reads"]["reads"],
        "missing_checks": stats["missing_checks"]["tasks"],
        "reasoning_share": stats["demands"]["share_any"],
        "templates_in_use": stats["templates_in_use"],
        "near_duplicate_share": stats["near_duplicates"]["share"],
        "alternatives": stats["alternatives"],
        "distinct_users": stats["users"]["distinct"],
    }
    with tempfile.TemporaryDirectory() as tmp:
        for policy in ("gold", "literal"):
            result = run("retail", tasks, policy, out=Path(tmp) / policy, report=False)
            out[f"{policy}_pass1"] = round(result.successes / max(result.scored, 1), 4)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=2000, help="tasks for the single-process measurement")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--full", action="store_true", help="generate all 130,000 tasks and time it")
    args = parser.parse_args()

    world = get_world("retail")
    world.episode(0).close()  # build the seed image outside the timings
    single, draws, made = rate(args.n, 1, seed=0)
    print(f"single process: {made} tasks ({draws} draws) at {single:.0f} tasks/s")
    parallel, pdraws, pmade = rate(args.n * args.workers, args.workers, seed=0)
    print(f"{args.workers} workers: {pmade} tasks ({pdraws} draws) at {parallel:.0f} tasks/s")

    tasks = generate(world, 1000, seed=1).tasks
    start = time.perf_counter()
    failures = sum(verify_task(t, world) is not None for t in tasks)
    verify_rate = len(tasks) / (time.perf_counter() - start)
    print(f"verify pass: {verify_rate:.0f} tasks/s, {failures} failures")

    print("quality of the default mix (1,000 tasks, seed 2) ...")
    measured = quality(seed=2)
    print(json.dumps(measured))

    result = {
        "benchmark": "tasks",
        "cpus": os.cpu_count(),
        "single_tasks_per_s": round(single, 1),
        "workers": args.workers,
        "parallel_tasks_per_s": round(parallel, 1),
        "parallel_speedup": round(parallel / single, 2),
        "verify_tasks_per_s": round(verify_rate, 1),
        "drop_rate": round(1 - made / draws, 3),
        "projected_130k_s": round(GOAL_TASKS / parallel, 1),
        "goal_s": GOAL_SECONDS,
        **measured,
    }
    if args.full:
        start = time.perf_counter()
        report = generate(world, GOAL_TASKS, seed=0, workers=args.workers)
        result["full_130k_s"] = round(time.perf_counter() - start, 1)
        result["full_130k_tasks"] = len(report)
        print(f"full run: {len(report)} tasks in {result['full_130k_s']} s")
    result["meets_goal"] = result.get("full_130k_s", result["projected_130k_s"]) <= GOAL_SECONDS
    print(json.dumps(result))


if __name__ == "__main__":
    main()
