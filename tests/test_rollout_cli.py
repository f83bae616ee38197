"""``toolworld run``: K trajectories per task written as JSONL, bad task lines reported while the rest run,
structured errors for bad input, resume after a kill, noise flags."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from rollout_kit import make_task
from toolworld.cli import app
from toolworld.rollout.trajectory import Trajectory
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
    return [Trajectory.from_json(line) for line in (out / "trajectories.jsonl").read_text().splitlines()]


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
    assert summary["trials"] == 2 and summary["finished"] == 6 and summary["answered"] == 6
    assert summary["infra_errors"] == 0 and summary["episodes"] == 6
    for word in ("finished", "answered", "infra errors", "mean turns", "tokens", "6/6"):
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
    assert not (out / "trajectories.jsonl").exists()


def test_existing_output_needs_resume_and_resume_finishes_a_killed_run(tmp_path, task_file, tasks):
    out = tmp_path / "run"
    assert invoke("run", "retail", "--tasks", task_file, "--trials", "2", "--out", out).exit_code == 0
    path = out / "trajectories.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    res = invoke("run", "retail", "--tasks", task_file, "--trials", "2", "--out", out)
    assert res.exit_code == 1 and error_of(res)["type"] == "output_exists"
    # As if killed: two episodes finished, a third half written.
    path.write_text("".join(lines[:2]) + lines[2][: len(lines[2]) // 2])
    res = invoke("run", "retail", "--tasks", task_file, "--trials", "2", "--out", out, "--resume")
    assert res.exit_code == 0, res.output
    trajs = read(out)
    assert sorted((t.task_id, t.trial) for t in trajs) == sorted((t.id, k) for t in tasks for k in range(2))
    assert json.loads((out / "summary.json").read_text())["finished"] == 6


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
