"""Which target tool a policy ends on, against the one each task asks for.

Run: ``python benchmarks/tool_choice.py RUN_DIR [RUN_DIR ...]`` (run folders of ``toolworld run``, e.g. the
``eval-sft`` and ``eval-grpo`` folders of ``benchmarks/learning.py``).

A task's synthesis walked to a target call (``provenance.targets``): on the info mix, ``get_order_details`` for a
request for an order's status and total, ``track_order`` for its carrier and tracking number. Either read can
look like progress, and a policy that leans to one of them whatever is asked fails the other kind of request. A
pass rate alone hides which way a run leans; this counts, per run and per asked target, the last call each trial
made among the run's target tools (``right``, another target, or ``none``), and how many of each passed. A run
that trades one lean for the other shows as the off-diagonal counts swapping while ``right`` barely moves.
The last line is one JSON object with each run's counts.
"""

from __future__ import annotations

import argparse
import collections
import json
from pathlib import Path
from typing import Any


def tool_choice(run_dir: Path) -> dict[str, Any]:
    """Counts of one run (see the module docstring): ``asked -> {ended on: trials}`` and passes per asked target."""
    from toolworld.store.runstore import RunStore

    store = RunStore.open(run_dir)
    try:
        asked = {t.id: ",".join(t.provenance.targets) for t in store.tasks()}
        targets = {name for joined in asked.values() for name in joined.split(",") if name}
        ended: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
        passed: collections.Counter[str] = collections.Counter()
        for traj, score, _facts in store.trials():
            want = asked[traj.task_id]
            calls = [call["function"]["name"] for m in traj.messages if m.get("role") == "assistant"
                     for call in m.get("tool_calls") or [] if call.get("function", {}).get("name") in targets]  # fmt: skip
            last = calls[-1] if calls else "none"
            ended[want]["right" if last in want.split(",") else last] += 1  # any of a task's targets is right
            passed[want] += bool(score is not None and score.success)
    finally:
        store.close()
    right = sum(c["right"] for c in ended.values())
    return {"run": str(run_dir), "trials": sum(sum(c.values()) for c in ended.values()), "right": right,
            "asked": {k: {"ended": dict(v), "trials": sum(v.values()), "passed": passed[k]}
                      for k, v in sorted(ended.items())}}  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("runs", nargs="+", type=Path, help="run folders (each holding run.db)")
    a = p.parse_args()
    from toolworld.store.runstore import StoreError

    try:
        results = [tool_choice(run) for run in a.runs]
    except StoreError as e:  # not a run folder, or one this version cannot read: say which and how to make one
        p.error(str(e))
    for r in results:
        parts = "; ".join(f"{k} asked ({v['trials']}, {v['passed']} passed): ended on {v['ended']}"
                          for k, v in r["asked"].items())  # fmt: skip
        print(f"{r['run']}: right target {r['right']} of {r['trials']}; {parts}")
    print(json.dumps({"runs": results}))


if __name__ == "__main__":
    main()
