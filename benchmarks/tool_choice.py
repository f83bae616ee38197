"""Which target tool a policy ends on, against the one each task asks for.

Run: ``python benchmarks/tool_choice.py RUN_DIR [RUN_DIR ...]`` (run folders of ``toolworld run``, e.g. the
``eval-sft`` and ``eval-grpo`` folders of ``benchmarks/learning.py``), or
``python benchmarks/tool_choice.py --tasks TASKS GRPO_DIR`` (a ``train grpo`` output folder, e.g. ``grpo`` of
``benchmarks/learning.py``, with the task file it trained on: ``fresh-pool.jsonl`` or ``train.jsonl``).

A task's synthesis walked to a target call (``provenance.targets``): on the info mix, ``get_order_details`` for a
request for an order's status and total, ``track_order`` for its carrier and tracking number. Either read can
look like progress, and a policy that leans to one of them whatever is asked fails the other kind of request. A
pass rate alone hides which way a run leans; this counts, per run and per asked target, the last call each trial
made among the run's target tools (``right``, another target, or ``none``), and how many of each passed. A run
that trades one lean for the other shows as the off-diagonal counts swapping while ``right`` barely moves.
A GRPO folder is counted per step from its ``trials.jsonl``: the trials the policy sampled at that step (a guide's
trials and those lost to an infra error are left out, and so are trials of a branched run whose lead already made a
target call before the policy took over: the choice was not the policy's), so a lean that an update sets going shows step by step,
before any evaluation. A run folder's failures are also counted by the gold tools they never called
(``never_called``), and every run's (and step's) trials by the argument values they made up (``made_up``: values no
earlier message held, ``toolworld.scoring.grounding``; an email the customer never gave, an order no tool
returned). The last line is one JSON object with each run's counts.
"""

from __future__ import annotations

import argparse
import collections
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from toolworld.scoring.grounding import made_up_counts


def _lead_chose(messages: list[dict[str, Any]], lead_turns: int, targets: set[str]) -> bool:
    """Whether a branch's lead (``train grpo --branch``) made a target call in its first ``lead_turns`` turns."""
    said = [m for m in messages if m.get("role") == "assistant"][:lead_turns]
    return bool(_called(said) & targets)


def _counts(trials: Iterable[tuple[str, list[dict[str, Any]], bool]], asked: dict[str, str]) -> dict[str, Any]:
    """``trials`` as (task id, messages, passed), counted against ``asked`` (task id -> its targets, comma-joined):
    the total, how many ended on one of the task's own targets, and per asked target where the trials ended."""
    targets = {name for joined in asked.values() for name in joined.split(",") if name}
    ended: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    passed: collections.Counter[str] = collections.Counter()
    for task_id, messages, success in trials:
        want = asked[task_id]
        calls = [call["function"]["name"] for m in messages if m.get("role") == "assistant"
                 for call in m.get("tool_calls") or [] if call.get("function", {}).get("name") in targets]  # fmt: skip
        last = calls[-1] if calls else "none"
        ended[want]["right" if last in want.split(",") else last] += 1  # any of a task's targets is right
        passed[want] += success
    right = sum(c["right"] for c in ended.values())
    return {"trials": sum(sum(c.values()) for c in ended.values()), "right": right,
            "asked": {k: {"ended": dict(v), "trials": sum(v.values()), "passed": passed[k]}
                      for k, v in sorted(ended.items())}}  # fmt: skip


def _called(messages: list[dict[str, Any]]) -> set[str]:
    """The tools a trial's assistant turns called."""
    return {call.get("function", {}).get("name") for m in messages if m.get("role") == "assistant"
            for call in m.get("tool_calls") or []}  # fmt: skip


def tool_choice(run_dir: Path) -> dict[str, Any]:
    """Counts of one run (see the module docstring): ``asked -> {ended on: trials}`` and passes per asked target,
    and ``never_called``: per gold tool, the failed trials that never called it (e.g. the customer's email given and
    the policy looking them up by name and zip code, or asking for their name piece by piece). Where a failure first
    left the gold path is the summary's ``divergence`` (by trajectory step)."""
    from toolworld.store.runstore import RunStore

    store = RunStore.open(run_dir)
    never_called: collections.Counter[str] = collections.Counter()
    try:
        tasks = {t.id: t for t in store.tasks()}
        asked = {i: ",".join(t.provenance.targets) for i, t in tasks.items()}
        trials = []
        scored = []  # (messages, passed) of the trials that were scored: one lost to an infra error did not fail
        for traj, score, _facts in store.trials():
            trials.append((traj.task_id, traj.messages, bool(score is not None and score.success)))
            if score is not None:
                scored.append((traj.messages, bool(score.success)))
            if score is None or score.success:
                continue
            never_called.update({a.name for a in tasks[traj.task_id].gold_actions} - _called(traj.messages))
    finally:
        store.close()
    return {"run": str(run_dir), **_counts(trials, asked),
            "never_called": dict(sorted(never_called.items())), "made_up": made_up_counts(scored)}


class ChoiceError(Exception):
    """A GRPO folder or task file that cannot be counted; the message says what to give instead."""


def training_choice(grpo_dir: Path, tasks_file: Path) -> dict[str, Any]:
    """Counts of a GRPO run per step (see the module docstring), the tasks' targets read from ``tasks_file``:
    ``{"run", "trials", "right", "steps": [{"step", "trials", "right", "asked"}, ...]}``."""
    from toolworld.tasks.model import TaskSet
    from toolworld.train.grpo import TRIALS_FILE

    path = grpo_dir / TRIALS_FILE
    if not path.is_file():
        raise ChoiceError(f"{grpo_dir} holds no {TRIALS_FILE}: give a `train grpo` output folder (trials are "
                          "written unless the run was made with save_trials off)")  # fmt: skip
    try:
        tasks = TaskSet.load(tasks_file)
    except OSError as e:
        raise ChoiceError(f"cannot read the task file {tasks_file}: {e.strerror or e}") from e
    asked = {t.id: ",".join(t.provenance.targets) for t in tasks}
    targets = {name for joined in asked.values() for name in joined.split(",") if name}
    by_step: dict[int, list[tuple[str, list[dict[str, Any]], bool]]] = collections.defaultdict(list)
    with path.open(encoding="utf-8") as f:
        for number, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:  # a run killed mid-write leaves a cut last line: what came before counts
                continue
            if rec.get("guide") or rec.get("infra_error"):  # the policy did not play it, or it was not scored
                continue
            if rec["task_id"] not in asked:
                raise ChoiceError(f"{path} line {number}: task {rec['task_id']!r} is not in {tasks_file}: give the "
                                  "task file the run trained on")  # fmt: skip
            messages = rec["trajectory"]["messages"]
            if _lead_chose(messages, int(rec.get("lead_turns") or 0), targets):
                continue
            by_step[int(rec["step"])].append((rec["task_id"], messages, bool(rec["success"])))
    steps = [{"step": step, **_counts(trials, asked), "made_up": made_up_counts((m, ok) for _, m, ok in trials)}
             for step, trials in sorted(by_step.items())]  # fmt: skip
    return {"run": str(grpo_dir), "trials": sum(s["trials"] for s in steps), "right": sum(s["right"] for s in steps),
            "steps": steps}


def _say(name: str, counts: dict[str, Any]) -> str:
    parts = "; ".join(f"{k} asked ({v['trials']}, {v['passed']} passed): ended on {v['ended']}"
                      for k, v in counts["asked"].items())  # fmt: skip
    made = counts["made_up"]
    return (f"{name}: right target {counts['right']} of {counts['trials']}; {parts}\n{name}: {made['trials']} trials "
            f"made up an argument ({made['failed']} of them failed): {made['values']}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("runs", nargs="+", type=Path,
                   help="run folders (each holding run.db), or train grpo folders (each holding trials.jsonl)")
    p.add_argument("--tasks", type=Path, default=None,
                   help="the task file a train grpo folder trained on (its trials name tasks, not what they ask)")
    a = p.parse_args()
    from toolworld.store.runstore import StoreError
    from toolworld.train.grpo import TRIALS_FILE  # plain Python: torch is imported only by what trains

    results = []
    try:
        for run in a.runs:
            if (run / "run.db").exists() or not (run / TRIALS_FILE).exists():
                results.append(tool_choice(run))
            elif a.tasks is None:
                p.error(f"{run} is a train grpo folder: give --tasks FILE, the task file it trained on")
            else:
                results.append(training_choice(run, a.tasks))
    except (StoreError, ChoiceError) as e:  # not a run folder, or one this version cannot read: say which and why
        p.error(str(e))
    for r in results:
        if "steps" in r:
            for step in r["steps"]:
                print(_say(f"{r['run']} step {step['step']}", step))
        else:
            print(_say(r["run"], r))
            print(f"{r['run']}: failures that never called a gold tool {r['never_called']}")
    print(json.dumps({"runs": results}))


if __name__ == "__main__":
    main()
