"""The run store: a run killed with SIGKILL resumes without losing or repeating a trial; rescore reproduces the
stored scores; exports; structured errors for folders that hold no run or a damaged one."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from rollout_kit import make_task
from toolworld.cli import app
from toolworld.store import RunStore, StoreError
from toolworld.tasks.model import write_jsonl

runner = CliRunner()


def invoke(*args: str | Path) -> Any:
    return runner.invoke(app, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture(scope="module")
def tasks() -> list[Any]:
    return [make_task(kind, i) for kind in ("cancel", "address", "info", "refusal") for i in range(2)]


@pytest.fixture(scope="module")
def gold_run(tmp_path_factory: pytest.TempPathFactory, tasks: list[Any]) -> Path:
    """A finished 2-trial run of a noisy gold policy (some trials fail, so scores are not all alike)."""
    folder = tmp_path_factory.mktemp("gold")
    write_jsonl(folder / "tasks.jsonl", tasks)
    res = invoke("run", "retail", "--tasks", folder / "tasks.jsonl", "--policy", "gold:drop=0.3,seed=1",
                 "--trials", "2", "--out", folder / "run")  # fmt: skip
    assert res.exit_code == 0, res.output
    return folder / "run"


def stored(out: Path) -> dict[tuple[str, int], tuple[str, bytes, str]]:
    db = sqlite3.connect(out / "run.db")
    try:
        rows = db.execute("SELECT task_id, trial, finished_at, trajectory, status FROM trials").fetchall()
    finally:
        db.close()
    return {(t, k): (f, blob, status) for t, k, f, blob, status in rows}


def test_sigkill_mid_run_then_resume_runs_every_trial_exactly_once(tmp_path, tasks):
    task_file = tmp_path / "tasks.jsonl"
    write_jsonl(task_file, tasks)
    out = tmp_path / "run"
    # Added tool latency makes the run last a few seconds, so the kill lands while trials are in flight.
    cmd = [sys.executable, "-c", "from toolworld.cli import main; main()", "run", "retail", "--tasks", str(task_file),
           "--out", str(out), "--trials", "3", "--concurrency", "2", "--noise-latency-ms", "120"]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=os.environ.copy())
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if RunStore.exists(out) and len(stored(out)) >= 4:
                    break
            except sqlite3.OperationalError:  # the run is still creating its store
                pass
            assert proc.poll() is None, "the run ended before it could be killed"
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    before = stored(out)
    total = len(tasks) * 3
    assert 4 <= len(before) < total, "the kill should land mid-run"
    assert not (out / "summary.json").exists()  # the process never reached its end

    # The same arguments: a resume refuses another configuration (latency noise included).
    res = invoke("run", "retail", "--tasks", task_file, "--out", out, "--trials", "3", "--concurrency", "8",
                 "--noise-latency-ms", "120", "--resume")  # fmt: skip
    assert res.exit_code == 0, res.output
    after = stored(out)
    assert sorted(after) == sorted((t.id, k) for t in tasks for k in range(3))  # every pair exactly once
    for key, (finished_at, blob, status) in before.items():
        if status == "done":
            assert after[key][:2] == (finished_at, blob), f"{key} was re-run"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["finished"] == total and summary["success_rate"] == 1.0 and summary["infra_errors"] == 0


def test_rescore_reproduces_the_stored_scores_exactly(gold_run):
    before = {k: v for k, v in stored(gold_run).items()}
    db = sqlite3.connect(gold_run / "run.db")
    scores_before = dict(((t, k), s) for t, k, s in db.execute("SELECT task_id, trial, score FROM trials"))
    db.close()
    res = invoke("rescore", gold_run, "--check")
    assert res.exit_code == 0, res.output
    assert "0 differ" in res.stdout
    res = invoke("rescore", gold_run)
    assert res.exit_code == 0 and "0 changed" in res.stdout
    db = sqlite3.connect(gold_run / "run.db")
    scores_after = dict(((t, k), s) for t, k, s in db.execute("SELECT task_id, trial, score FROM trials"))
    db.close()
    assert scores_after == scores_before and stored(gold_run) == before


def test_rescore_check_notices_a_tampered_score(tmp_path, gold_run):
    copy = tmp_path / "copy"
    copy.mkdir()
    src = sqlite3.connect(gold_run / "run.db")
    dst = sqlite3.connect(copy / "run.db")
    src.backup(dst)
    src.close()
    with dst:
        row = dst.execute("SELECT task_id, trial, score FROM trials LIMIT 1").fetchone()
        score = json.loads(row[2])
        score["reward"] = 0.123
        dst.execute("UPDATE trials SET score = ? WHERE task_id = ? AND trial = ?", (json.dumps(score), row[0], row[1]))
    dst.close()
    res = invoke("rescore", copy, "--check")
    assert res.exit_code == 1 and "1 differ" in res.stdout and row[0] in res.stdout


def test_noisy_gold_scores_lower_and_divergence_matches_the_dropped_step(gold_run):
    summary = json.loads((gold_run / "summary.json").read_text())
    assert 0.0 < summary["success_rate"] < 1.0
    with RunStore.open(gold_run) as store:
        for traj, score, _facts in store.trials():
            dropped = [p for p in traj.perturbations if p.get("kind") == "drop"]
            if score is not None and not score.success and dropped:
                assert score.first_divergent_step is not None


def test_export_jsonl_chat_and_parquet(gold_run, tmp_path):
    res = invoke("export", gold_run)
    assert res.exit_code == 0, res.output
    lines = (gold_run / "trajectories.jsonl").read_text().splitlines()
    assert len(lines) == 16
    first = json.loads(lines[0])
    assert {"task_id", "trial", "messages", "steps", "token_buffer", "score"} <= set(first)

    res = invoke("export", gold_run, "--format", "chat", "-o", tmp_path / "chat.jsonl")
    assert res.exit_code == 0, res.output
    convs = [json.loads(x) for x in (tmp_path / "chat.jsonl").read_text().splitlines()]
    summary = json.loads((gold_run / "summary.json").read_text())
    assert len(convs) == round(summary["success_rate"] * summary["scored"]) and all(c["success"] for c in convs)
    conv = convs[0]
    assert conv["messages"][0]["role"] == "system" and conv["messages"][1]["role"] == "user"
    assert any(m.get("tool_calls") for m in conv["messages"]) or conv["messages"][-1]["role"] == "assistant"
    assert {t["function"]["name"] for t in conv["tools"]} >= {"find_user_by_email", "cancel_pending_order"}
    res = invoke("export", gold_run, "--format", "chat", "--all", "-o", tmp_path / "all.jsonl")
    assert len((tmp_path / "all.jsonl").read_text().splitlines()) == 16
    # sft renders through a model's template: a gold run has none, so it asks for --tokenizer (tests/test_export.py)
    res = invoke("export", gold_run, "--format", "sft")
    assert res.exit_code == 1 and json.loads(res.stdout)["error"]["type"] == "no_tokenizer"

    pq = pytest.importorskip("pyarrow.parquet")
    res = invoke("export", gold_run, "--format", "parquet", "-o", tmp_path / "t.parquet")
    assert res.exit_code == 0, res.output
    table = pq.read_table(tmp_path / "t.parquet")
    assert table.num_rows == 16 and {"success", "reward", "first_divergent_step", "trajectory"} <= set(table.column_names)

    res = invoke("export", gold_run, "--format", "csv")
    assert res.exit_code == 1 and json.loads(res.stdout)["error"]["type"] == "invalid_option"


def test_folders_without_a_run_or_with_a_damaged_one(tmp_path):
    for command in ("rescore", "report", "export"):
        res = invoke(command, tmp_path / "nothing")
        assert res.exit_code == 1 and json.loads(res.stdout)["error"]["type"] == "no_run"
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "run.db").write_bytes(b"this is not sqlite" * 100)
    res = invoke("rescore", tmp_path / "bad")
    assert res.exit_code == 1 and json.loads(res.stdout)["error"]["type"] == "damaged_run"
    with pytest.raises(StoreError) as info:
        RunStore.open(tmp_path / "bad")
    assert info.value.kind == "damaged_run"


def test_store_create_refuses_an_existing_run_and_record_counts_attempts(tmp_path, gold_run, tasks):
    with pytest.raises(StoreError) as info:
        RunStore.create(gold_run, {}, tasks)
    assert info.value.kind == "output_exists"
    with RunStore.open(gold_run) as store:
        traj, score, facts = next(store.trials())
    with RunStore.create(tmp_path / "r", {"trials": 1}, tasks) as store:
        infra = traj.model_copy(update={"termination": "infra_error"})
        store.record(infra, score.model_copy(update={"infra_error": True}))
        assert store.finished() == set() and store.count("infra_error") == 1
        store.record(traj, score)
        assert store.finished() == {(traj.task_id, traj.trial)} and store.count() == 1
        (_t, _s, facts) = next(store.trials())
        assert facts["attempts"] == 2 and facts["status"] == "done"
        assert [t.id for t in store.tasks()] == [t.id for t in tasks]
