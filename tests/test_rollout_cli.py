"""``toolworld run``: K trajectories per task written as JSONL, bad task lines reported while the rest run,
structured errors for bad input, resume after a kill, noise flags."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from rollout_kit import make_task
from toolworld.cli import app
from toolworld.records.trajectory import Trajectory
from toolworld.store import RunStore
from toolworld.tasks.model import write_jsonl

runner = CliRunner()


def invoke(*args: str | Path) -> Any:
    return runner.invoke(app, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture(scope="module")
def tasks() -> list[Any]:
    return [make_task("cancel", 0), make_task("address", 1), make_task("refusal", 0)]


@pytest.fixture()
def task_file(tmp_path: Path, tasks: list[Any]) -> Path:
    path = tmp_path / "tasks.jsonl"
    write_jsonl(path, tasks)
    return path


def read(out: Path) -> list[Trajectory]:
    with RunStore.open(out) as store:
        return [traj for traj, _score, _facts in store.trials()]


def error_of(res: Any) -> dict[str, Any]:
    return json.loads(res.stdout.strip().splitlines()[-1])["error"]


def test_run_gold_writes_k_trajectories_per_task(tmp_path, task_file, tasks):
    out = tmp_path / "run"
    res = invoke("run", "retail", "--tasks", task_file, "--policy", "gold", "--trials", "2", "--out", out)
    assert res.exit_code == 0, res.output
    trajs = read(out)
    assert sorted((t.task_id, t.trial) for t in trajs) == sorted((t.id, k) for t in tasks for k in range(2))
    by_id = {t.id: t for t in tasks}
    assert all(t.changes == by_id[t.task_id].expected_changes and t.termination == "answered" for t in trajs)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["trials"] == 2 and summary["finished"] == 6 and summary["terminations"]["answered"] == 6
    assert summary["infra_errors"] == 0 and summary["episodes"] == 6
    assert summary["success_rate"] == 1.0 and summary["pass_hat_k"] == {"1": 1.0, "2": 1.0}
    assert summary["pass_at_k"] == {"1": 1.0, "2": 1.0}
    for word in ("done", "success", "pass^2", "infra", "tokens", "6/6", "100.0%", f"report: {out / 'report.html'}"):
        assert word in res.stdout


def test_bad_task_lines_are_reported_and_the_rest_run(tmp_path, tasks):
    path = tmp_path / "mixed.jsonl"
    other_world = tasks[1].model_copy(update={"world": "library"}).to_json()
    lines = [tasks[0].to_json(), "{not json", json.dumps({"id": "x"}), other_world, tasks[0].to_json(),
             "", tasks[2].to_json()]  # fmt: skip
    path.write_text("\n".join(lines) + "\n")
    out = tmp_path / "run"
    res = invoke("run", "retail", "--tasks", path, "--trials", "1", "--out", out)
    assert res.exit_code == 0, res.output
    assert sorted(t.task_id for t in read(out)) == sorted([tasks[0].id, tasks[2].id])
    errors = json.loads((out / "summary.json").read_text())["task_file_errors"]
    assert [e.split(":")[0] for e in errors] == ["line 2", "line 3", "line 4", "line 5"]
    assert "not valid JSON" in errors[0] and "library" in errors[2] and "duplicate" in errors[3]
    assert "line 2" in res.stderr and "line 4" in res.stderr


def test_structured_errors_for_bad_input(tmp_path, task_file):
    out = tmp_path / "run"
    res = invoke("run", "atlantis", "--tasks", task_file, "--out", out)
    assert res.exit_code == 1 and error_of(res)["type"] == "unknown_world"
    res = invoke("run", "retail", "--tasks", tmp_path / "missing.jsonl", "--out", out)
    assert res.exit_code == 1 and error_of(res)["type"] == "file_not_found"
    res = invoke("run", "retail", "--tasks", task_file, "--policy", "gpt:4", "--out", out)
    assert res.exit_code == 1 and error_of(res)["type"] == "bad_policy_spec"
    assert "Valid forms" in error_of(res)["message"]
    res = invoke("run", "retail", "--tasks", task_file, "--user", "nonsense:x", "--out", out)
    assert res.exit_code == 1 and error_of(res)["type"] == "bad_user_spec"
    garbage = tmp_path / "garbage.jsonl"
    garbage.write_text("nope\n")
    res = invoke("run", "retail", "--tasks", garbage, "--out", out)
    assert res.exit_code == 1 and error_of(res)["type"] == "no_tasks"
    assert not RunStore.exists(out)


def test_existing_output_needs_resume_and_resume_redoes_only_missing_and_infra_trials(tmp_path, task_file, tasks):
    out = tmp_path / "run"
    assert invoke("run", "retail", "--tasks", task_file, "--trials", "2", "--out", out).exit_code == 0
    res = invoke("run", "retail", "--tasks", task_file, "--trials", "2", "--out", out)
    assert res.exit_code == 1 and error_of(res)["type"] == "output_exists"
    res = invoke("run", "retail", "--tasks", task_file, "--trials", "2", "--out", out, "--resume", "--policy",
                 "gold:drop=0.5")  # fmt: skip
    assert res.exit_code == 1 and error_of(res)["type"] == "run_mismatch"
    # As if killed and hit by a server outage: two trials never finished, one ended on an infra error.
    db = sqlite3.connect(out / "run.db")
    with db:
        db.execute("DELETE FROM trials WHERE trial = 1 AND task_id IN (?, ?)", (tasks[0].id, tasks[1].id))
        db.execute("UPDATE trials SET status = 'infra_error' WHERE task_id = ? AND trial = 0", (tasks[2].id,))
    kept = dict(((t, k), f) for t, k, f in db.execute("SELECT task_id, trial, finished_at FROM trials WHERE status = 'done'"))
    db.close()
    res = invoke("run", "retail", "--tasks", task_file, "--trials", "2", "--out", out, "--resume")
    assert res.exit_code == 0, res.output
    assert "resuming: 3 of 6" in res.stderr
    trajs = read(out)
    assert sorted((t.task_id, t.trial) for t in trajs) == sorted((t.id, k) for t in tasks for k in range(2))
    db = sqlite3.connect(out / "run.db")
    after = dict(((t, k), (f, a)) for t, k, f, a in db.execute("SELECT task_id, trial, finished_at, attempts FROM trials"))
    db.close()
    assert all(after[key][0] == stamp for key, stamp in kept.items())  # finished trials were not re-run
    assert after[(tasks[2].id, 0)][1] == 2  # the infra-errored one was
    summary = json.loads((out / "summary.json").read_text())
    assert summary["finished"] == 6 and summary["success_rate"] == 1.0


def test_noise_flags_and_limit(tmp_path, task_file, tasks):
    out = tmp_path / "run"
    res = invoke("run", "retail", "--tasks", task_file, "--out", out, "--limit", "1", "--noise-fail", "1",
                 "--max-turns", "3")  # fmt: skip
    assert res.exit_code == 0, res.output
    (traj,) = read(out)
    assert traj.task_id == tasks[0].id and traj.changes == {}
    assert {e.kind for e in traj.noise_events} == {"tool_failure"} and traj.termination == "max_turns"
    res = invoke("run", "retail", "--tasks", task_file, "--out", tmp_path / "x", "--noise-fail", "2")
    assert res.exit_code != 0
