"""The run pipeline from Python: run → score → store → summary → report without the command line, its
structured errors, resume and interrupt, and the typed summary that ``summary.json`` is written from."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from rollout_kit import make_task
from toolworld import pipeline
from toolworld.core import InfraError
from toolworld.env import Limits
from toolworld.env.noise import NoiseConfig
from toolworld.report import render_report
from toolworld.rollout.backends import ScriptedPolicy
from toolworld.scoring import Summary, score_trajectory, summarize
from toolworld.scoring.metrics import summary_fields
from toolworld.store import RunStore
from toolworld.tasks.generate import generate
from toolworld.world import get_world

CONTRACT = {"trials", "success_rate", "pass_at_k", "pass_hat_k", "infra_errors"}


@pytest.fixture(scope="module")
def task_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Six generated, replay-verified retail tasks, and one line that is not a task."""
    report = generate(get_world("retail"), 6, seed=3)
    path = tmp_path_factory.mktemp("tasks") / "tasks.jsonl"
    path.write_text("\n".join([*report.lines[:3], "{not json", *report.lines[3:]]) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def gold_run(tmp_path_factory: pytest.TempPathFactory, task_file: Path) -> tuple[pipeline.RunResult, list[Any]]:
    events: list[Any] = []
    out = tmp_path_factory.mktemp("gold") / "run"
    result = pipeline.run("retail", task_file, "gold", out=out, trials=2, concurrency=4, on_progress=events.append)
    return result, events


def stored(out: Path) -> dict[tuple[str, int], str]:
    db = sqlite3.connect(out / "run.db")
    try:
        return {(t, k): s for t, k, s in db.execute("SELECT task_id, trial, status FROM trials")}
    finally:
        db.close()


# -- a whole run -------------------------------------------------------------------------------------------------


def test_gold_on_a_generated_task_file_scores_stores_summarizes_and_reports(gold_run, task_file):
    result, events = gold_run
    summary = result.summary
    assert summary.success_rate == 1.0 and summary.pass_hat(2) == 1.0 and summary.pass_at(1) == 1.0
    assert (summary.tasks, summary.episodes, summary.finished, summary.infra_errors) == (6, 12, 12, 0)
    assert summary.world == "retail" and summary.policy == "gold"
    assert summary.task_file_errors == result.task_file_errors and result.task_file_errors[0].startswith("line 4:")
    assert not result.interrupted and not result.measured_nothing
    assert (result.ran, result.finished, result.scored, result.successes) == (12, 12, 12, 12)
    assert set(stored(result.out).values()) == {"done"} and len(stored(result.out)) == 12
    on_disk = json.loads((result.out / "summary.json").read_text(encoding="utf-8"))
    assert on_disk == summary.model_dump(mode="json") and set(on_disk) >= CONTRACT
    assert result.report == result.out / "report.html" and "card-success-rate" in result.report.read_text()

    started, *finished = events
    assert isinstance(started, pipeline.RunStarted) and (started.total, started.already_done) == (12, 0)
    assert all(isinstance(e, pipeline.TrialFinished) for e in finished)
    assert [e.finished for e in finished] == list(range(1, 13)) and finished[-1].success == 12
    assert finished[-1].status == "success 12/12"
    assert {(e.trajectory.task_id, e.trajectory.trial) for e in finished} == set(stored(result.out))


def test_a_policy_object_and_a_task_list_run_and_are_recorded_by_the_spec_given(tmp_path):
    tasks = [make_task("cancel", 0), make_task("info", 1)]
    idle = ScriptedPolicy(["Sorry, I cannot help with that."], name="idle")
    result = pipeline.run(get_world("retail"), tasks, idle, out=tmp_path / "run", policy_spec="idle:v1", report=False)
    assert result.summary.success_rate == 0.0 and result.summary.scored == 2 and result.summary.policy == "idle"
    assert result.report is None and not (tmp_path / "run" / "report.html").exists()
    with RunStore.open(tmp_path / "run") as store:
        assert store.config["policy_spec"] == "idle:v1" and store.config["task_file"] is None
    # The same object under another spec is another policy: a resume must not mix them.
    with pytest.raises(pipeline.RunError) as err:
        pipeline.run("retail", tasks, idle, out=tmp_path / "run", policy_spec="idle:v2", resume=True)
    assert err.value.kind == "run_mismatch" and err.value.details["differences"] == ["--policy idle:v1 -> idle:v2"]


def test_a_run_made_under_the_old_600_s_clock_resumes_only_with_that_clock(tmp_path):
    """Runs stored before the clock went off by default name the flag that resumes them, in words a flag takes."""
    tasks = [make_task("cancel", 0)]
    pipeline.run("retail", tasks, "gold", out=tmp_path / "run", limits=Limits(max_wall_s=600.0), report=False)
    with pytest.raises(pipeline.RunError) as err:
        pipeline.run("retail", tasks, "gold", out=tmp_path / "run", trials=2, resume=True, report=False)
    assert err.value.details["differences"] == ["--time-limit 600.0 -> none"]
    resumed = pipeline.run("retail", tasks, "gold", out=tmp_path / "run", trials=2, resume=True, report=False,
                           limits=Limits(max_wall_s=600.0))  # fmt: skip
    assert resumed.summary.episodes == 2 and resumed.summary.success_rate == 1.0


def test_run_async_works_inside_a_running_event_loop(tmp_path):
    tasks = [make_task("address", 0)]

    async def trainer_step() -> pipeline.RunResult:
        return await pipeline.run_async("retail", tasks, "gold", out=tmp_path / "run", trials=2)

    result = asyncio.run(trainer_step())
    assert result.summary.pass_hat(2) == 1.0 and len(stored(tmp_path / "run")) == 2


def test_a_run_that_measured_nothing_says_so_with_its_first_cause(tmp_path):
    down = InfraError("cannot reach http://gpu:8000/v1: connection refused", retryable=False, kind="connection")
    tasks = [make_task("cancel", 0), make_task("cancel", 1)]
    result = pipeline.run("retail", tasks, ScriptedPolicy([down], name="down"), out=tmp_path / "run")
    assert result.measured_nothing and result.infra_errors == 2 and result.summary.infra_errors == 2
    error = pipeline.all_infra_error(result)
    assert error is not None and error.kind == "all_trials_infra_error"
    assert error.details["cause"]["kind"] == "connection" and "all 2 trial(s)" in str(error)
    assert pipeline.all_infra_error(pipeline.run("retail", tasks, "gold", out=tmp_path / "ok")) is None


# -- interrupt and resume ----------------------------------------------------------------------------------------


def test_ctrl_c_keeps_the_finished_trials_and_resume_runs_only_the_rest(tmp_path, task_file, terminal_sigint):
    out = tmp_path / "run"
    sent: list[int] = []

    def press_ctrl_c(event: Any) -> None:
        if isinstance(event, pipeline.TrialFinished) and event.finished == 2 and not sent:
            sent.append(1)
            os.kill(os.getpid(), signal.SIGINT)  # what a terminal's Ctrl-C does

    # Tool latency gives each episode a point where it waits, as a model call would, so that the interrupt
    # lands between trials rather than after a run that never yields to the event loop.
    noise = NoiseConfig(latency_ms=1.0)
    result = pipeline.run("retail", task_file, "gold", out=out, concurrency=1, noise=noise, on_progress=press_ctrl_c)
    kept = len(stored(out))
    assert result.interrupted and kept == 2
    assert result.summary.finished == result.summary.episodes == result.finished == kept
    assert json.loads((out / "summary.json").read_text())["finished"] == kept and result.report is not None

    events: list[Any] = []
    again = pipeline.run("retail", task_file, "gold", out=out, noise=noise, resume=True, on_progress=events.append)
    assert not again.interrupted and again.ran == 6 - kept
    assert isinstance(events[0], pipeline.RunStarted) and (events[0].already_done, events[0].total) == (kept, 6 - kept)
    assert again.summary.finished == 6 and again.summary.success_rate == 1.0
    assert sorted(stored(out)) == sorted({(t.id, 0) for t in pipeline.load_tasks(task_file, "retail").tasks})


def test_rescore_and_finish_reproduce_the_run(gold_run):
    result, _ = gold_run
    before = (result.out / "summary.json").read_bytes()
    check = pipeline.rescore(result.out, check=True)
    assert (check.rescored, check.changed, check.summary) == (12, [], None)
    summary, report = pipeline.finish(result.out)
    assert report == result.out / "report.html"
    assert (result.out / "summary.json").read_bytes() == before  # the task file's line errors are kept too
    assert summary.task_file_errors == result.task_file_errors
    redone = pipeline.rescore(result.out)
    assert redone.changed == [] and redone.summary is not None and redone.summary.success_rate == 1.0


# -- structured errors -------------------------------------------------------------------------------------------


def kind_of(**kwargs: Any) -> pipeline.RunError:
    with pytest.raises(pipeline.RunError) as err:
        pipeline.run(**{"world": "retail", "policy": "gold", **kwargs})
    return err.value


def test_errors_a_caller_can_fix_are_structured_and_leave_no_run(tmp_path, task_file):
    out = tmp_path / "run"
    garbage = tmp_path / "garbage.jsonl"
    garbage.write_text("nope\n{}\n")
    err = kind_of(tasks=garbage, out=out)
    assert err.kind == "no_tasks" and err.to_dict()["errors"][0].startswith("line 1:")
    assert "toolworld tasks generate retail" in str(err)
    assert kind_of(tasks=tmp_path / "missing.jsonl", out=out).kind == "file_not_found"
    err = kind_of(tasks=task_file, policy="gpt:4", out=out)
    assert err.kind == "bad_policy_spec" and "Valid forms" in str(err)
    assert kind_of(tasks=task_file, user="nonsense:x", out=out).kind == "bad_user_spec"
    assert kind_of(world="atlantis", tasks=task_file, out=out).kind == "unknown_world"
    assert kind_of(tasks=[make_task("cancel", 0)] * 2, out=out).kind == "invalid_task"
    other = make_task("cancel", 0).model_copy(update={"world": "library"})
    assert "not 'retail'" in str(kind_of(tasks=[other], out=out))
    assert kind_of(tasks=task_file, out=out, trials=0).kind == "invalid_option"
    assert kind_of(tasks=pipeline.load_tasks(task_file, "library"), out=out).kind == "invalid_task"
    assert not RunStore.exists(out)


def test_an_existing_run_needs_resume_and_the_same_configuration(gold_run, task_file):
    result, _ = gold_run
    assert kind_of(tasks=task_file, out=result.out, trials=2).kind == "output_exists"
    err = kind_of(tasks=task_file, out=result.out, trials=1, policy="gold:drop=0.5", resume=True)
    assert err.kind == "run_mismatch"
    assert err.details["differences"] == ["--policy gold -> gold:drop=0.5",
                                          "--trials 2 -> 1 (a resumed run may add trials, not drop them)"]  # fmt: skip
    assert err.to_dict()["type"] == "run_mismatch" and "differences" in err.to_dict()


def test_config_checks_see_through_spelling_and_hide_keys():
    assert pipeline.canonical_spec("GOLD:seed=1, drop=0.3") == pipeline.canonical_spec("gold:drop=0.3,seed=1")
    assert pipeline.redact_spec("openai:m@u,api_key=sk-1,temperature=0") == "openai:m@u,api_key=***,temperature=0"
    a, b = make_task("cancel", 0), make_task("cancel", 1)
    assert pipeline.tasks_digest([a, b]) != pipeline.tasks_digest([b, a])  # the order is part of the run


# -- the typed summary -------------------------------------------------------------------------------------------


def test_a_real_summary_round_trips_key_for_key(gold_run):
    result, _ = gold_run
    text = (result.out / "summary.json").read_text(encoding="utf-8")
    loaded = Summary.load(result.out / "summary.json")
    assert loaded.to_json() == text  # same keys, same order, same values
    data = json.loads(text)
    assert loaded.model_dump(mode="json") == data == result.summary.model_dump(mode="json")
    assert list(data)[:3] == ["world", "policy", "trials"] and list(data)[-2:] == ["finished", "task_file_errors"]
    assert set(data["pass_at_k"]) == set(data["pass_hat_k"]) == {"1", "2"}  # keyed by k as a string
    assert loaded.by_kind["action"].n > 0 and loaded.tokens.total == data["tokens"]["prompt"] + data["tokens"]["completion"]


def test_compute_matches_the_plain_summary_exactly():
    world, task = get_world("retail"), make_task("cancel", 2)
    from toolworld.rollout.backends import make_policy
    from toolworld.rollout.loop import run_many

    trajs = asyncio.run(run_many(world, [task], make_policy("gold:drop=0.5,seed=2"), trials=3))
    scores = [score_trajectory(task, t) for t in trajs]
    plain = summary_fields({task.id: task}, trajs, scores, trials=3)
    assert summarize({task.id: task}, trajs, scores, trials=3).model_dump(mode="json") == {
        "world": None, "policy": None, **plain, "finished": None, "task_file_errors": []}
    typed = Summary.compute({task.id: task}, trajs, scores, trials=3, world="retail", finished=3)
    assert typed.model_dump(mode="json") == {"world": "retail", "policy": None, **plain, "finished": 3,
                                             "task_file_errors": []}  # fmt: skip
    assert typed.pass_hat(3) == plain["pass_hat_k"]["3"] and typed.pass_hat(4) is None


def test_an_older_or_damaged_summary_still_loads_and_renders():
    old = {"world": "retail", "policy": "gold", "trials": 2, "tasks": 3, "episodes": 6, "scored": 6,
           "infra_errors": 0, "success_rate": 0.5, "mean_reward": 0.61, "pass_at_k": {"1": 0.5, "2": 0.66},
           "pass_hat_k": {"1": 0.5, "2": 0.33}, "by_difficulty": {"easy": {"n": 6, "success_rate": 0.5}},
           "latency": "n/a", "legacy_note": {"kept": True}}  # fmt: skip
    summary = Summary.load(old)
    assert summary.token_integrity.episodes_affected == 0 and summary.pass_k_tasks == {} and summary.finished is None
    assert summary.latency.episode_mean_s is None  # the damaged block fell back to its default
    assert summary.model_dump(mode="json")["legacy_note"] == {"kept": True}  # unknown keys survive a rewrite
    assert summary.by_difficulty["easy"].success_rate == 0.5 and summary.pass_hat(2) == 0.33
    html = render_report(summary, [], config={"world": "retail"})
    assert "50.0%" in html and "33.0%" in html
    with pytest.raises(TypeError):
        Summary.load([1, 2])  # type: ignore[arg-type]


def test_resume_refuses_a_run_whose_trials_drew_from_older_random_streams():
    """Runs stored before the draws version was recorded drew noise and perturbations from other streams:
    resuming one must not mix two kinds of trial; a run whose trials draw nothing still resumes."""

    def config(policy: str, fail: float = 0.0, draws: int | None = pipeline.DRAWS_VERSION) -> dict:
        c = {"world": "retail", "policy_spec": policy, "user": "scripted", "trials": 1,
             "noise": {"fail": fail, "latency_ms": 0.0, "truncate": 0.0, "seed": 0}}  # fmt: skip
        if draws is not None:
            c["draws"] = draws
        return c

    def diff(stored: dict, new: dict) -> list[str]:
        return pipeline.config_differences(stored, new, lambda: [], [])

    now = config("gold")
    for drawing in (config("gold:drop=0.3", draws=None), config("gold", fail=0.1, draws=None),
                    config("gibberish:seed=2", draws=None), config("smollm2", draws=None), config("gold:drop=0.2", draws=1)):
        new = {**drawing, "draws": pipeline.DRAWS_VERSION}
        assert [d for d in diff(drawing, new) if d.startswith("random draws")], drawing
    for drawless in (config("gold", draws=None), config("noop", draws=None), config("openai:m@http://x", draws=None)):
        assert diff(drawless, {**drawless, "draws": pipeline.DRAWS_VERSION}) == [], drawless
    assert diff(config("gold:drop=0.3"), config("gold:drop=0.3")) == [] and now["draws"] == pipeline.DRAWS_VERSION
