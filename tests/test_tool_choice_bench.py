"""benchmarks/tool_choice.py: which target tool a run ends on, against the one each task asks for."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest

from rollout_kit import load_benchmark
from toolworld import pipeline
from toolworld.rollout.backends import ScriptedPolicy


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_benchmark("tool_choice")


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Any]:
    """Two tracking and two status requests played by gold, by a policy that reads the details whatever is asked
    (gold's calls with track_order swapped for get_order_details) and by one that calls nothing."""
    from toolworld.tasks.generate import generate

    tmp = tmp_path_factory.mktemp("choice")
    tasks = generate("retail", 30, seed=5, sampler="info").tasks
    track = [t for t in tasks if list(t.provenance.targets) == ["track_order"]][:2]
    details = [t for t in tasks if list(t.provenance.targets) == ["get_order_details"]][:2]
    assert len(track) == 2 and len(details) == 2
    chosen = track + details
    pipeline.run("retail", chosen, "gold", out=tmp / "gold", report=False)

    def always_details(messages: list[Any], task: Any) -> Any:
        made = sum(1 for m in messages if m.get("role") == "assistant" and m.get("tool_calls"))
        if made >= len(task.gold_actions):
            return "Here is what you asked for."
        action = task.gold_actions[made]
        name = "get_order_details" if action.name == "track_order" else action.name
        return {"name": name, "arguments": action.arguments}

    pipeline.run("retail", chosen, ScriptedPolicy(always_details, name="lean"), out=tmp / "lean", report=False)
    pipeline.run("retail", chosen, ScriptedPolicy(["Sorry."], name="idle"), out=tmp / "idle", report=False)

    def guess(messages: list[Any], task: Any) -> Any:  # the gold's first call with values nobody gave, then gives up
        if any(m.get("role") == "assistant" for m in messages):
            return "Sorry."
        action = task.gold_actions[0]
        return {"name": action.name, "arguments": {k: f"zz{k}zz" for k in action.arguments}}

    pipeline.run("retail", chosen, ScriptedPolicy(guess, name="guess"), out=tmp / "guess", report=False)
    return {"tasks": chosen, **{name: tmp / name for name in ("gold", "lean", "idle", "guess")}}


def test_a_run_that_reads_the_details_for_every_request_shows_the_lean(bench, runs):
    gold = bench.tool_choice(runs["gold"])
    assert gold["right"] == 4
    assert gold["asked"]["track_order"] == {"ended": {"right": 2}, "trials": 2, "passed": 2}
    lean = bench.tool_choice(runs["lean"])
    assert lean["right"] == 2
    assert lean["asked"]["track_order"]["ended"] == {"get_order_details": 2}
    assert lean["asked"]["get_order_details"]["ended"] == {"right": 2}
    assert lean["asked"]["track_order"]["passed"] == 0
    idle = bench.tool_choice(runs["idle"])
    assert idle["right"] == 0 and idle["asked"]["get_order_details"] == {"ended": {"none": 2}, "trials": 2, "passed": 0}


def test_failures_are_counted_by_the_gold_tools_they_never_called(bench, runs):
    """Which gold tools a run's failures never called: a lean that reads the details for a tracking request never
    calls the gold's track_order; a policy that says nothing never calls any; gold fails nothing."""
    assert bench.tool_choice(runs["gold"])["never_called"] == {}
    assert bench.tool_choice(runs["lean"])["never_called"] == {"track_order": 2}
    gold_tools = [{a.name for a in t.gold_actions} for t in runs["tasks"]]
    assert bench.tool_choice(runs["idle"])["never_called"] == {
        name: sum(name in tools for tools in gold_tools) for name in sorted(set().union(*gold_tools))}


def test_made_up_argument_values_are_counted_per_tool_and_argument(bench, runs):
    """Gold copies every value from the conversation and makes nothing up; a policy that sends its first call with
    values nobody gave makes up each of them, and fails."""
    import collections

    assert bench.tool_choice(runs["gold"])["made_up"] == {"trials": 0, "failed": 0, "values": {}}
    firsts = [t.gold_actions[0] for t in runs["tasks"]]
    want = collections.Counter(f"{a.name}.{k}" for a in firsts for k in a.arguments)
    assert bench.tool_choice(runs["guess"])["made_up"] == {"trials": 4, "failed": 4, "values": dict(want)}


def test_a_grpo_folder_is_counted_step_by_step_from_the_policys_own_trials(bench, runs, tmp_path, monkeypatch,
                                                                           capsys):  # fmt: skip
    """A GRPO folder whose step 1 sampled gold's trials and step 2 the leaning policy's: the lean shows at step 2.
    A guide's trial (gold, at step 2), one lost to an infra error and one whose branch lead made the target call
    are not the policy's play and are left out,
    and a last line cut mid-write is skipped; without the task file, or with another one, it is refused."""
    import json
    import sys

    from toolworld.store.runstore import RunStore
    from toolworld.tasks.model import write_jsonl
    from toolworld.train.grpo import trial_record

    def records(run: Any, step: int) -> list[dict[str, Any]]:
        store = RunStore.open(run)
        try:
            return [trial_record(step, traj, score) for traj, score, _facts in store.trials()]
        finally:
            store.close()

    gold, lean = records(runs["gold"], 1), records(runs["lean"], 2)
    guide = {**records(runs["gold"], 2)[0], "guide": True}
    lost = {**records(runs["idle"], 2)[0], "infra_error": True}
    # a branched trial whose lead (train grpo --branch) made the target call itself: not the policy's choice
    led = {**records(runs["gold"], 2)[0], "lead_turns": 99}
    folder = tmp_path / "grpo"
    folder.mkdir()
    lines = [json.dumps(r) for r in [*gold, *lean, guide, lost, led]]
    (folder / "trials.jsonl").write_text("\n".join(lines) + "\n" + lines[0][: len(lines[0]) // 2])
    write_jsonl(tmp_path / "pool.jsonl", runs["tasks"])

    got = bench.training_choice(folder, tmp_path / "pool.jsonl")
    assert [s["step"] for s in got["steps"]] == [1, 2] and (got["trials"], got["right"]) == (8, 6)
    first, second = got["steps"]
    assert first["right"] == 4 and first["asked"]["track_order"] == {"ended": {"right": 2}, "trials": 2, "passed": 2}
    assert second["right"] == 2 and second["trials"] == 4
    assert first["made_up"] == {"trials": 0, "failed": 0, "values": {}}  # gold waits for what it sends
    # the leaning policy sends gold's lookup at once, before two of the four customers have said their email
    assert second["made_up"] == {"trials": 2, "failed": 2, "values": {"find_user_by_email.email": 2}}
    assert second["asked"]["track_order"] == {"ended": {"get_order_details": 2}, "trials": 2, "passed": 0}

    monkeypatch.setattr(sys, "argv", ["tool_choice.py", "--tasks", str(tmp_path / "pool.jsonl"), str(folder)])
    bench.main()
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"{folder} step 1: right target 4 of 4") and json.loads(out[-1])["runs"][0] == got
    write_jsonl(tmp_path / "other.jsonl", runs["tasks"][:1])
    for argv, says in (([str(folder)], "give --tasks FILE"),
                       (["--tasks", str(tmp_path / "other.jsonl"), str(folder)], "give the task file the run trained on"),
                       (["--tasks", str(tmp_path / "none.jsonl"), str(folder)], "cannot read the task file")):  # fmt: skip
        monkeypatch.setattr(sys, "argv", ["tool_choice.py", *argv])
        with pytest.raises(SystemExit) as exc:
            bench.main()
        assert exc.value.code == 2 and says in capsys.readouterr().err


def test_a_folder_that_holds_no_run_is_refused_with_how_to_make_one(bench, tmp_path, monkeypatch, capsys):
    import sys

    monkeypatch.setattr(sys, "argv", ["tool_choice.py", str(tmp_path / "nothing")])
    with pytest.raises(SystemExit) as exc:
        bench.main()
    assert exc.value.code == 2
    assert "holds no run" in capsys.readouterr().err
