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


def test_a_run_that_reads_the_details_for_every_request_shows_the_lean(bench, tmp_path):
    from toolworld.tasks.generate import generate

    tasks = generate("retail", 30, seed=5, sampler="info").tasks
    track = [t for t in tasks if list(t.provenance.targets) == ["track_order"]][:2]
    details = [t for t in tasks if list(t.provenance.targets) == ["get_order_details"]][:2]
    assert len(track) == 2 and len(details) == 2
    chosen = track + details
    pipeline.run("retail", chosen, "gold", out=tmp_path / "gold", report=False)

    def always_details(messages: list[Any], task: Any) -> Any:
        """Gold's calls, with every track_order read as get_order_details (a policy that leans one way)."""
        made = sum(1 for m in messages if m.get("role") == "assistant" and m.get("tool_calls"))
        if made >= len(task.gold_actions):
            return "Here is what you asked for."
        action = task.gold_actions[made]
        name = "get_order_details" if action.name == "track_order" else action.name
        return {"name": name, "arguments": action.arguments}

    pipeline.run("retail", chosen, ScriptedPolicy(always_details, name="lean"), out=tmp_path / "lean", report=False)
    pipeline.run("retail", chosen, ScriptedPolicy(["Sorry."], name="idle"), out=tmp_path / "idle", report=False)

    gold = bench.tool_choice(tmp_path / "gold")
    assert gold["right"] == 4
    assert gold["asked"]["track_order"] == {"ended": {"right": 2}, "trials": 2, "passed": 2}
    lean = bench.tool_choice(tmp_path / "lean")
    assert lean["right"] == 2
    assert lean["asked"]["track_order"]["ended"] == {"get_order_details": 2}
    assert lean["asked"]["get_order_details"]["ended"] == {"right": 2}
    assert lean["asked"]["track_order"]["passed"] == 0
    idle = bench.tool_choice(tmp_path / "idle")
    assert idle["right"] == 0 and idle["asked"]["get_order_details"] == {"ended": {"none": 2}, "trials": 2, "passed": 0}


def test_a_folder_that_holds_no_run_is_refused_with_how_to_make_one(bench, tmp_path, monkeypatch, capsys):
    import sys

    monkeypatch.setattr(sys, "argv", ["tool_choice.py", str(tmp_path / "nothing")])
    with pytest.raises(SystemExit) as exc:
        bench.main()
    assert exc.value.code == 2
    assert "holds no run" in capsys.readouterr().err
