"""The learning benchmark's arithmetic: how it judges a stage against the one before it on the same held-out tasks
(the paired gain with its interval, the fixed/broke split and its sign test), the interval of a pass^1 measured
over several sampled trials per task, and which stages it evaluates again when the evaluation asked for changes."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

from rollout_kit import load_benchmark, make_task
from toolworld import pipeline
from toolworld.rollout.backends import ScriptedPolicy

pytest.importorskip("torch", reason="the learning benchmark imports the 'train' extra")


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_benchmark("learning")





def test_a_sampled_evaluation_has_its_own_folder(bench):
    assert bench.eval_folder("sft", 1, 0.0) == "eval-sft"
    assert bench.eval_folder("grpo", 4, 0.3) == "eval-grpo-k4-t0.3"
    assert bench.eval_folder("grpo", 1, 0.7) == "eval-grpo-k1-t0.7"


def test_pass_rates_read_every_trial_of_a_run(bench, tmp_path):
    tasks = [make_task("cancel", 0), make_task("info", 1)]
    pipeline.run("retail", tasks, "gold", out=tmp_path / "gold", trials=2, report=False)
    idle = ScriptedPolicy(["Sorry, I cannot help with that."], name="idle")
    pipeline.run("retail", tasks, idle, out=tmp_path / "idle", trials=2, report=False)
    gold, nothing = bench.pass_rates(tmp_path / "gold"), bench.pass_rates(tmp_path / "idle")
    assert gold == {t.id: 1.0 for t in tasks} and nothing == {t.id: 0.0 for t in tasks}
    assert bench.paired_gain(nothing, gold)["gain"] == 1.0


def test_a_trial_lost_to_an_infra_error_counts_for_nothing_in_a_stage_or_its_comparison(bench, tmp_path):
    from toolworld.core import InfraError

    tasks = [make_task("cancel", 0), make_task("info", 1)]
    down = tasks[1].id

    def idle_unless_down(messages: list[Any], task: Any) -> Any:
        """A reply that solves nothing on the first task; the model server is unreachable on the second."""
        if task.id == down:
            raise InfraError("cannot reach http://gpu:8000/v1: connection refused", retryable=False)
        return "Sorry, I cannot help with that."

    pipeline.run("retail", tasks, ScriptedPolicy(idle_unless_down, name="flaky"), out=tmp_path / "flaky", trials=2,
                 report=False)  # fmt: skip
    # as the run's summary and GRPO's evaluations judge it: the unreachable task is no failure of the model, and it
    # takes no part in a comparison (a model that lost it to the server did not break it)
    rates = bench.pass_rates(tmp_path / "flaky")
    assert rates == {tasks[0].id: 0.0}
    gain = bench.paired_gain({tasks[0].id: 1.0, down: 1.0}, rates)
    assert (gain["tasks"], gain["fixed"], gain["broke"], gain["gain"]) == (1, 0, 1, -1.0)
    # and so in a stage's row: one task judged, the lost trials counted apart
    b = object.__new__(bench.Bench)
    b.args = SimpleNamespace(eval_engine="llamacpp", eval_trials=2, eval_temperature=0.3, batch=None)
    b.out, b.world, b.heldout = tmp_path, "retail", tasks
    b.spec = lambda *args, **kwargs: ScriptedPolicy(idle_unless_down, name="flaky")
    b.limits = lambda **kwargs: None
    row = b.evaluate("sft", tmp_path / "weights", 0.0, {})
    assert (row["n"], row["pass1"], row["successes"], row["infra_errors"]) == (1, 0.0, 0, 2)
    assert row["run"] == "eval-sft-k2-t0.3" and json.loads((tmp_path / "sft.json").read_text())["n"] == 1
    # played again into the same folder, the evaluation goes on from its trials and says its time is only this call's
    assert row["eval_resumed"] is False and b.evaluate("sft", tmp_path / "weights", 0.0, {})["eval_resumed"] is True


def test_a_resumed_grpo_stage_reports_every_steps_reward_and_training_time(bench, tmp_path):
    """A GRPO stage resumed after its last step (its evaluation was cut short) ran no step in this call: its row
    still gives the first and last step's reward and the time the steps took, from the stage's log."""
    steps = [{"step": i + 1, "reward": r, "seconds": t} for i, (r, t) in enumerate([(0.2, 100.0), (0.4, 200.0), (0.6, 300.0)])]
    (tmp_path / "train.jsonl").write_text("".join(json.dumps(s) + "\n" for s in steps))
    assert bench.grpo_log(tmp_path, 3, 12.0) == {"steps": 3, "reward_first": 0.2, "reward_last": 0.6, "train_wall_s": 612.0}
    # resumed after step 2: the third step's time is inside this call's
    assert bench.grpo_log(tmp_path, 2, 310.0)["train_wall_s"] == 610.0
    assert bench.grpo_log(tmp_path, 0, 650.0) == {"steps": 3, "reward_first": 0.2, "reward_last": 0.6, "train_wall_s": 650.0}
    assert bench.grpo_log(tmp_path / "none", 0, 1.0) == {"steps": 0, "reward_first": None, "reward_last": None,
                                                         "train_wall_s": 1.0}  # fmt: skip


def test_the_pick_of_a_described_value_is_read_from_the_first_call_that_takes_it(bench, tmp_path):
    from toolworld.tasks.generate import generate

    described = [t for t in generate("retail", 40, seed=3, sampler="info").tasks
                 if any(n.slot == "order" for n in t.scenario.needs)]  # fmt: skip
    # phrasings that name a date ("the order I placed on May 3", "my order from May 3") and one that does not
    by_date = [t for t in described if " on " in t.scenario.needs[0].phrase or " from " in t.scenario.needs[0].phrase]
    tasks = by_date[:3] + [t for t in described if t not in by_date][:1]
    assert len(tasks) == 4
    pipeline.run("retail", tasks, "gold", out=tmp_path / "gold", report=False)

    def wrong_then_right(messages: list[Any], task: Any) -> Any:
        """Asks for another order first, then replays gold's calls (as a model that misread the list would)."""
        made = sum(1 for m in messages if m.get("role") == "assistant" and m.get("tool_calls"))
        if made == 0:
            return {"name": "get_order_details", "arguments": {"order_id": "#W0000000"}}
        if made > len(task.gold_actions):
            return "Done."
        action = task.gold_actions[made - 1]
        return {"name": action.name, "arguments": action.arguments}

    pipeline.run("retail", tasks, ScriptedPolicy(wrong_then_right, name="misread"), out=tmp_path / "misread",
                 report=False)  # fmt: skip
    idle = ScriptedPolicy(["Sorry, I cannot help with that."], name="idle")
    pipeline.run("retail", tasks, idle, out=tmp_path / "idle", report=False)
    gold = bench.pick_outcomes(tmp_path / "gold", tasks)
    assert gold["all"] == {"right": 4, "wrong": 0, "none": 0} and gold["dated"] == {"right": 3, "wrong": 0, "none": 0}
    assert bench.pick_outcomes(tmp_path / "misread", tasks)["all"] == {"right": 0, "wrong": 4, "none": 0}
    assert bench.pick_outcomes(tmp_path / "idle", tasks)["all"] == {"right": 0, "wrong": 0, "none": 4}
    assert bench.pick_outcomes(tmp_path / "gold", [])["all"] == {"right": 0, "wrong": 0, "none": 0}  # not its tasks
    # the misreading policy's first call sends an order number nobody gave: every trial made one up, and gold none
    assert bench.made_up_outcomes(tmp_path / "gold") == bench.made_up_outcomes(tmp_path / "idle") == {
        "trials": 0, "failed": 0, "values": {}}  # fmt: skip
    misread = bench.made_up_outcomes(tmp_path / "misread")
    assert misread["trials"] == 4 and misread["values"]["get_order_details.order_id"] == 4


class Recorder:
    """A stand-in for the benchmark's stages: what was loaded and evaluated, nothing trained."""

    def __init__(self, bench: ModuleType, out: Path, trials: int, temperature: float) -> None:
        self.b = object.__new__(bench.Bench)
        self.b.args = SimpleNamespace(eval_trials=trials, eval_temperature=temperature)
        self.b.out = out
        self.b.model = "whatever the last stage left"
        self.calls: list[Any] = []
        self.b.load = lambda folder=None: self.calls.append(("load", folder))
        self.b.weights = lambda name: f"weights-of-{name}"
        self.b.evaluate = lambda *args: self.calls.append(("evaluate", *args))


def test_a_stage_is_evaluated_again_only_when_the_evaluation_asked_for_differs(bench, tmp_path):
    old = {"name": "grpo", "pass1": 0.5, "lo": 0.4, "hi": 0.6, "n": 100, "run": "eval-grpo", "train_wall_s": 3900.0,
           "eval_wall_s": 1900.0, "steps": 5, "reward_last": 0.4,
           "evals": [{"name": "grpo step 2", "step": 2, "pass1": 0.45}]}  # fmt: skip
    (tmp_path / "grpo.json").write_text(json.dumps(old))
    same = Recorder(bench, tmp_path, 1, 0.0)  # a row from before trials were recorded was one greedy trial
    assert same.b.reevaluate("grpo") is False and same.calls == []

    sampled = Recorder(bench, tmp_path, 4, 0.3)
    assert sampled.b.reevaluate("grpo") is True
    load, evaluate = sampled.calls
    assert load == ("load", tmp_path / "grpo" / "final") and sampled.b.model is None  # its own weights, reloaded
    _, name, weights, train_wall_s, kept = evaluate
    assert (name, weights, train_wall_s) == ("grpo", "weights-of-grpo", 3900.0)
    # the training's figures, not the old verdict (nor the points inside GRPO, made the old way)
    assert kept == {"name": "grpo", "steps": 5, "reward_last": 0.4}

    (tmp_path / "base.json").write_text(json.dumps({**old, "name": "base", "trials": 4, "temperature": 0.3}))
    assert Recorder(bench, tmp_path, 4, 0.3).b.reevaluate("base") is False
    base = Recorder(bench, tmp_path, 1, 0.0)
    assert base.b.reevaluate("base") is True and base.calls[0] == ("load", None)

    no_run = {k: v for k, v in old.items() if k != "run"}  # an RFT that had nothing to reinforce is the SFT model
    (tmp_path / "rft.json").write_text(json.dumps({**no_run, "name": "rft"}))
    assert Recorder(bench, tmp_path, 4, 0.3).b.reevaluate("rft") is False


def test_an_episode_of_the_benchmark_ends_by_turns_and_tokens_never_by_the_clock(bench):
    b = object.__new__(bench.Bench)
    b.args = SimpleNamespace(max_turns=12, sample_max_turns=6, n_ctx=8192, max_tokens=320)
    judged, sampled = b.limits(), b.limits(sampling=True)
    # a loaded machine slows every episode: with a wall-clock limit it would be scored as the policy's failure
    assert judged.max_wall_s is None and sampled.max_wall_s is None
    assert (judged.max_turns, judged.max_tokens) == (12, 8192 - 320) and sampled.max_turns == 6
    assert "terminations" in bench.EVAL_FIELDS  # how the trials ended is part of a stage's verdict, redone on re-judging


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--eval-trials", "4"], "at temperature 0 plays each task the same way"),
        (["--eval-trials", "0"], "--eval-trials must be >= 1"),
        (["--eval-temperature", "-1"], "--eval-temperature must be >= 0"),
        (["--grpo-eval-every", "2"], "give --engine hf"),
        (["--grpo-eval-every", "2", "--engine", "hf", "--eval-engine", "llamacpp"], "give --engine hf"),
        (["--grpo-lora"], "--grpo-lora samples through the adapters with the batched hf engine"),
        (["--grpo-lora", "--engine", "hf", "--grpo-lora-r", "0"], "--grpo-lora-r must be >= 1"),
        (["--grpo-kl-ties", "1"], "give --grpo-kl > 0"),
        (["--grpo-kl-ties", "-1", "--grpo-kl", "0.5"], "--grpo-kl-ties must be >= 0"),
        (["--grpo-branch-from-start", "0.5"], "give --grpo-branch SPEC"),
        (["--grpo-branch-from-start", "1.5", "--grpo-branch", "gold"], "in [0, 1]"),
        (["--grpo-branch-at", "pick"], "give --grpo-branch SPEC"),
    ],
)
def test_an_evaluation_that_cannot_measure_is_refused_before_any_work(bench, tmp_path, monkeypatch, capsys, argv, says):
    monkeypatch.setattr(sys, "argv", ["learning.py", "--out", str(tmp_path / "out"), *argv])
    with pytest.raises(SystemExit) as exc:
        bench.main()
    assert exc.value.code == 2 and says in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_the_curve_is_published_past_a_stage_copied_in_without_its_evaluation_run(bench, tmp_path, monkeypatch, capsys):
    rendered: list[Path] = []
    monkeypatch.setattr(pipeline, "finish", rendered.append)
    b = object.__new__(bench.Bench)
    b.args = SimpleNamespace(mix=None, eval_trials=2, eval_temperature=0.3)
    b.out, b.train, b.heldout = tmp_path, [], []
    (tmp_path / "base.json").write_text(json.dumps({"name": "base", "pass1": 0.0, "run": "eval-base"}))
    (tmp_path / "sft.json").write_text(json.dumps({"name": "sft", "pass1": 0.4, "run": "eval-sft-k2-t0.3"}))
    (tmp_path / "eval-sft-k2-t0.3").mkdir()
    curve = b.publish()
    assert [s["name"] for s in curve["stages"]] == ["base", "sft"]
    assert curve["metric"] == "held-out pass^1 (2 trials per task at T 0.3)"
    assert rendered == [tmp_path / "eval-sft-k2-t0.3"]
    assert json.loads((tmp_path / "eval-sft-k2-t0.3" / "learning.json").read_text()) == curve
    assert json.loads((tmp_path / "learning.json").read_text()) == curve and not (tmp_path / "eval-base").exists()
    assert "[base] no evaluation run" in capsys.readouterr().out


def test_grpo_evaluations_inside_the_stage_are_points_of_the_curve_with_their_gain(bench, tmp_path, monkeypatch):
    """``--grpo-eval-every``: GRPO's evaluations between its first and last step sit in the curve just before the
    GRPO stage, each with its paired gain over the stage GRPO started from, and the report can read the curve."""
    from toolworld.report.render import validate_learning
    from toolworld.train.grpo import GRPOEval

    b = object.__new__(bench.Bench)
    b.args = SimpleNamespace(mix=None, eval_trials=1, eval_temperature=0.0)
    b.out, b.train, b.heldout = tmp_path, [], []
    (tmp_path / "sft.json").write_text(json.dumps({"name": "sft", "pass1": 0.5, "lo": 0.1, "hi": 0.9, "run": "eval-sft"}))
    (tmp_path / "eval-sft").mkdir()
    monkeypatch.setattr(bench, "pass_rates", lambda folder: {"a": 1.0, "b": 0.0} if folder.name == "eval-sft" else {})
    ev = GRPOEval(step=2, pass1=1.0, lo=0.34, hi=1.0, reward=1.0, tasks=2, trials=1, temperature=0.0, infra_errors=0,
                  seconds=3.0, per_task={"a": 1.0, "b": 1.0}, gain=None)  # fmt: skip
    rows = b.step_rows([ev])
    assert [(r["name"], r["step"], r["pass1"], r["n"]) for r in rows] == [("grpo step 2", 2, 1.0, 2)]
    assert rows[0]["gain"]["gain"] == 0.5 and (rows[0]["gain"]["fixed"], rows[0]["gain"]["broke"]) == (1, 0)
    # an RFT stage that had nothing to reinforce has no run: GRPO started from SFT, and gains are over SFT's run
    (tmp_path / "rft.json").write_text(json.dumps({"name": "rft", "pass1": 0.5, "note": "nothing passed"}))
    assert b.step_rows([ev])[0]["gain"]["gain"] == 0.5
    (tmp_path / "rft.json").unlink()
    grpo = {"name": "grpo", "pass1": 0.5, "lo": 0.1, "hi": 0.9, "run": "eval-grpo", "evals": rows}
    (tmp_path / "grpo.json").write_text(json.dumps(grpo))
    curve = b.curve()
    assert [s["name"] for s in curve["stages"]] == ["sft", "grpo step 2", "grpo"]
    assert [s["name"] for s in validate_learning(curve)["stages"]] == ["sft", "grpo step 2", "grpo"]


@pytest.mark.parametrize(("native", "bf16", "dtype"), [(False, False, "float32"), (True, True, "bfloat16")])
def test_precision_defaults_to_what_the_device_runs_fastest(bench, monkeypatch, native, bf16, dtype):
    """bf16 where the hardware has it, float32 where bf16 would be emulated (11x slower SFT steps on an AVX2 CPU)."""
    from toolworld.rollout.engines import hf

    monkeypatch.setattr(hf, "native_bf16", lambda device: native)
    args = bench.resolve_precision(SimpleNamespace(device="cpu", bf16=None, hf_dtype="auto"))
    assert (args.bf16, args.hf_dtype) == (bf16, dtype)
    kept = bench.resolve_precision(SimpleNamespace(device="cpu", bf16=not bf16, hf_dtype="float16"))
    assert (kept.bf16, kept.hf_dtype) == (not bf16, "float16")  # what was given explicitly stays


def _finished_run(root: Path) -> Path:
    """A run with tasks, SFT's gold, and finished base, SFT and GRPO stages (weights as one small file each)."""
    root.mkdir()
    for name in ("train.jsonl", "heldout.jsonl", "fresh-pool.jsonl"):
        (root / name).write_text(f"{name}\n")
    for folder in ("gold-train", "eval-base", "eval-sft", "eval-sft-k2-t0.3", "eval-grpo", "sft/final", "grpo/final"):
        (root / folder).mkdir(parents=True)
        (root / folder / "data").write_text(folder)
    for stage in ("base", "sft", "grpo"):
        (root / f"{stage}.json").write_text(json.dumps({"name": stage, "run": f"eval-{stage}"}))
    return root


def test_a_run_started_from_another_takes_its_tasks_and_the_stages_before_the_first_asked(bench, tmp_path):
    src, out = _finished_run(tmp_path / "v1"), tmp_path / "b2"
    brought = bench.start_from(src, out, "grpo")
    assert sorted(brought) == sorted(["train.jsonl", "heldout.jsonl", "fresh-pool.jsonl", "gold-train", "base.json",
                                      "eval-base", "sft.json", "eval-sft", "eval-sft-k2-t0.3", "sft"])  # fmt: skip
    assert (out / "sft").is_symlink() and (out / "sft" / "final" / "data").read_text() == "sft/final"
    assert not (out / "eval-sft").is_symlink() and (out / "eval-sft" / "data").read_text() == "eval-sft"
    assert not any((out / name).exists() for name in ("grpo", "grpo.json", "eval-grpo"))  # the stage it redoes
    (out / "eval-sft" / "data").write_text("written by this run")  # a copy: the source run's evaluation is its own
    assert (src / "eval-sft" / "data").read_text() == "eval-sft"
    assert bench.start_from(src, out, "grpo") == []  # again: all there, the same (the copied folder left as it is)
    only_tasks = bench.start_from(src, tmp_path / "s2", "sft")  # SFT again: the base stage and tasks only
    assert "sft" not in only_tasks and "sft.json" not in only_tasks and "base.json" in only_tasks


def test_a_start_that_would_overwrite_anything_different_copies_nothing(bench, tmp_path):
    src, out = _finished_run(tmp_path / "v1"), tmp_path / "b2"
    out.mkdir()
    (out / "heldout.jsonl").write_text("other tasks\n")
    with pytest.raises(ValueError, match=r"already has heldout\.jsonl"):
        bench.start_from(src, out, "grpo")
    assert sorted(p.name for p in out.iterdir()) == ["heldout.jsonl"]
    (out / "heldout.jsonl").unlink()
    (out / "sft").symlink_to(_finished_run(tmp_path / "other") / "sft", target_is_directory=True)
    with pytest.raises(ValueError, match=r"already has sft\b"):
        bench.start_from(src, out, "grpo")
    with pytest.raises(ValueError, match="not a learning run"):
        bench.start_from(tmp_path / "nowhere", tmp_path / "b3", "grpo")
    with pytest.raises(ValueError, match="is --out itself"):
        bench.start_from(src, src, "grpo")


def test_the_cli_refuses_a_start_from_a_folder_that_is_no_run_before_any_work(bench, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["learning.py", "--out", str(tmp_path / "out"), "--stages", "grpo",
                                      "--start-from", str(tmp_path / "missing")])  # fmt: skip
    with pytest.raises(SystemExit) as exc:
        bench.main()
    assert exc.value.code == 2 and "not a learning run (no train.jsonl, heldout.jsonl)" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
