"""Where a trained policy's replies list the customer's orders row by row, and whether they stop.

Run: ``python benchmarks/listings.py RUN_DIR [RUN_DIR ...]`` (run folders of ``toolworld run``, e.g. the
``eval-sft`` and ``eval-grpo`` folders of ``benchmarks/learning.py``).

Gold made with ``gold:explain=1`` reads a customer's orders row by row up to the one the request describes and
stops there; a model trained on it copies the reading. A reply that reads on past the match never picks, and the
turn's token cap cuts it, so the trial ends ``max_tokens``. This counts, per run, the assistant messages that name
``--min`` or more order ids (``#W…``), by how their trial ended, and for the cut ones how many ids they named in all
(rows) and how many distinct orders those were: rows well above the distinct count mean the reading loops.
The last line is one JSON object with each run's counts.
"""

from __future__ import annotations

import argparse
import collections
import json
import re
from pathlib import Path
from typing import Any

ORDER_ID = re.compile(r"#W\d+")


def listings(run_dir: Path, minimum: int = 5) -> dict[str, Any]:
    """Counts of the listing messages of one run (see the module docstring)."""
    from toolworld.store.runstore import RunStore

    by_end: collections.Counter[str] = collections.Counter()
    cut: list[tuple[int, int]] = []
    store = RunStore.open(run_dir)
    try:
        trials = 0
        for traj, _score, _facts in store.trials():
            trials += 1
            for message in traj.messages:
                ids = ORDER_ID.findall(message.get("content") or "") if message.get("role") == "assistant" else []
                if len(ids) < minimum:
                    continue
                by_end[traj.termination] += 1
                if traj.termination == "max_tokens":
                    cut.append((len(ids), len(set(ids))))
    finally:
        store.close()
    return {"run": str(run_dir), "trials": trials, "messages": sum(by_end.values()), "by_termination": dict(by_end),
            "cut_rows": sorted(r for r, _ in cut), "cut_distinct": sorted(d for _, d in cut)}  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("runs", nargs="+", type=Path, help="run folders (each holding run.db)")
    p.add_argument("--min", type=int, default=5, help="order ids a message names to count as a listing")
    a = p.parse_args()
    results = [listings(run, a.min) for run in a.runs]
    for r in results:
        print(f"{r['run']}: {r['messages']} listing messages in {r['trials']} trials, by ending {r['by_termination']}; "
              f"cut ones: rows {r['cut_rows']}, distinct {r['cut_distinct']}")
    print(json.dumps({"min_ids": a.min, "runs": results}))


if __name__ == "__main__":
    main()
