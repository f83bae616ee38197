"""No trajectory can abort a run or poison a run folder, and one process writes a run folder at a time.

Values JSON cannot hold are stored escaped and read back; damaged rows (bad JSON, bad UTF-8, a blob that is not
zlib, a torn page) are skipped by report, rescore, export and --resume with one warning line each, and --resume
carries the readable rows over to a healthy file; a file SQLite cannot open is a structured error. A second
writer gets a clear error naming the holder; --resume names every configuration difference; creating a store is
atomic; a run whose trials all ended on infra errors exits 2 with the first cause.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import zlib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import toolworld.cli.run as cli_run
import toolworld.scoring as score_pkg
from rollout_kit import make_task
from toolworld.cli import app
from toolworld.core import InfraError
from toolworld.records.messages import AssistantTurn
from toolworld.rollout.backends import ScriptedPolicy
from toolworld.store import RunStore, StoreError
from toolworld.store.runstore import encode_json
from toolworld.tasks.model import write_jsonl
from toolworld.world import ToolCall

runner = CliRunner()
TRIALS = 4


def invoke(*args: str | Path) -> Any:
    return runner.invoke(app, [str(a) for a in args], catch_exceptions=False)


def error_of(res: Any) -> dict[str, Any]:
    return json.loads(res.stdout.strip().splitlines()[-1])["error"]


def warnings_in(res: Any) -> list[str]:
    return [line for line in res.stderr.splitlines() if line.startswith("warning: ")]


@pytest.fixture(scope="module")
def tasks() -> list[Any]:
    return [make_task(kind, i) for kind in ("cancel", "address", "info", "refusal") for i in range(2)]


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory, tasks: list[Any]) -> Path:
    """A finished gold run of 8 tasks x 4 trials: 32 rows spread over many pages."""
    folder = tmp_path_factory.mktemp("pristine")
    write_jsonl(folder / "tasks.jsonl", tasks)
    res = invoke("run", "retail", "--tasks", folder / "tasks.jsonl", "--trials", TRIALS, "--out", folder / "run")
    assert res.exit_code == 0, res.output
    return folder


@pytest.fixture()
def run_copy(tmp_path: Path, pristine: Path) -> Path:
    shutil.copytree(pristine, tmp_path / "copy")
    for name in ("summary.json", "report.html"):
        (tmp_path / "copy" / "run" / name).unlink()
    return tmp_path / "copy"


def all_pairs(tasks: list[Any]) -> set[tuple[str, int]]:
    return {(t.id, k) for t in tasks for k in range(TRIALS)}


def exported_pairs(path: Path) -> set[tuple[str, int]]:
    return {(r["task_id"], r["trial"]) for r in map(json.loads, path.read_text().splitlines())}


def named_pairs(lines: list[str]) -> set[tuple[str, int]]:
    out = set()
    for line in lines:
        words = line.split()
        i = words.index("task")
        out.add((words[i + 1], int(words[i + 3].rstrip(":"))))
    return out


# -- values JSON cannot hold ----------------------------------------------------------------------------------


def test_unserialisable_values_are_stored_escaped_and_read_back(tmp_path, pristine, tasks):
    with RunStore.open(pristine / "run") as store:
        traj, score, _facts = next(store.trials())
    steps = [traj.steps[0].model_copy(update={"output": {"obj": object(), "set": {2, 1}, (1, 2): "tuple key",
                                                         "raw": b"\xff\x00"}})]  # fmt: skip
    odd = traj.model_copy(update={
        "wall_s": float("nan"),
        "messages": [*traj.messages, {"role": "user", "content": "caf\udce9 and \U0001f600"}],
        "token_buffer": {"ids": [1, 2, 3], "sampled_logprobs": [float("-inf"), float("nan"), -0.5]},
        "steps": steps + traj.steps[1:],
    })  # fmt: skip
    with RunStore.create(tmp_path / "r", {"trials": 1}, tasks) as store:
        store.record(odd, score)
        ((back, back_score, facts),) = list(store.trials())
    assert facts["status"] == "done" and back_score == score
    assert math.isnan(back.wall_s)
    assert back.messages[-1]["content"] == "caf\udce9 and \U0001f600"  # the lone surrogate survives exactly
    lps = back.token_buffer["sampled_logprobs"]
    assert lps[0] == float("-inf") and math.isnan(lps[1]) and lps[2] == -0.5
    output = back.steps[0].output
    assert output["obj"].startswith("<unserialisable object: <object object at")
    assert output["set"] == [1, 2] and output["(1, 2)"] == "tuple key" and output["raw"] == "\\xff\x00"


def _nan_safe(value: Any) -> Any:
    """NaN never equals itself: compare a stand-in instead."""
    if isinstance(value, float) and math.isnan(value):
        return "<nan>"
    if isinstance(value, dict):
        return {k: _nan_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_nan_safe(v) for v in value]
    return value


_surrogates = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF, exclude_categories=())
_any_text = st.text(st.characters(codec=None, exclude_categories=()) | _surrogates, max_size=8)
_json_like = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True, allow_infinity=True) | _any_text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_any_text, inner, max_size=4), max_leaves=20)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_json_like)
def test_encode_json_round_trips_whatever_text_and_floats_it_holds(value):
    text = encode_json(value)
    text.encode("utf-8")  # storable as UTF-8 whatever the value held
    assert _nan_safe(json.loads(text)) == _nan_safe(value)


def test_a_trajectory_json_cannot_hold_never_aborts_the_run(tmp_path, tasks, monkeypatch):
    """A model that emits a lone surrogate and a NaN argument: every trial is still stored and readable."""
    script = [AssistantTurn(content="Looking up caf\udce9 \udc80", tool_calls=[ToolCall("get_order_details",
              {"order_id": float("nan")})], finish_reason="tool_calls"), "Done: caf\udce9."]  # fmt: skip
    monkeypatch.setattr(cli_run, "_policy_or_fail", lambda spec, what: ScriptedPolicy(script, name="odd"))
    write_jsonl(tmp_path / "tasks.jsonl", tasks[:3])
    res = invoke("run", "retail", "--tasks", tmp_path / "tasks.jsonl", "--trials", "2", "--out", tmp_path / "run")
    assert res.exit_code == 0, res.output
    with RunStore.open(tmp_path / "run") as store:
        stored = list(store.trials())
    assert len(stored) == 6 and not store.damaged
    traj = stored[0][0]
    assert traj.messages[2]["content"] == "Looking up caf\udce9 \udc80"
    assert math.isnan(traj.steps[0].arguments["order_id"]) and traj.steps[0].error["type"] == "invalid_arguments"


@pytest.mark.parametrize("fmt", ["jsonl", "parquet", "chat"])
def test_export_writes_values_json_cannot_hold_escaped(tmp_path, tasks, monkeypatch, fmt):
    """A stored lone surrogate or NaN must not make the export of a finished run fail with a traceback."""
    if fmt != "jsonl":
        pytest.importorskip("pyarrow")
    script = [AssistantTurn(content="Looking up caf\udce9", tool_calls=[ToolCall("get_order_details",
              {"order_id": float("nan")})], finish_reason="tool_calls"), "Done: caf\udce9."]  # fmt: skip
    monkeypatch.setattr(cli_run, "_policy_or_fail", lambda spec, what: ScriptedPolicy(script, name="odd"))
    write_jsonl(tmp_path / "tasks.jsonl", tasks[:2])
    res = invoke("run", "retail", "--tasks", tmp_path / "tasks.jsonl", "--out", tmp_path / "run")
    assert res.exit_code == 0, res.output
    out = tmp_path / f"export.{'jsonl' if fmt == 'jsonl' else 'parquet'}"
    res = invoke("export", tmp_path / "run", "--format", fmt, "--all", "-o", out)
    assert res.exit_code == 0, res.output
    if fmt == "jsonl":
        rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
        assert len(rows) == 2 and rows[0]["messages"][2]["content"] == "Looking up caf\udce9"
        assert math.isnan(rows[0]["steps"][0]["arguments"]["order_id"])
    else:
        import pyarrow.parquet as pq

        assert pq.read_table(out).num_rows == 2


def test_a_scorer_crash_is_kept_as_an_infra_error_and_the_run_goes_on(tmp_path, tasks, monkeypatch):
    real = score_pkg.score_trajectory

    def flaky(task: Any, traj: Any, **kw: Any) -> Any:
        if task.id == tasks[0].id and not traj.failed_by_infra:
            raise KeyError("boom")
        return real(task, traj, **kw)

    monkeypatch.setattr(score_pkg, "score_trajectory", flaky)
    write_jsonl(tmp_path / "tasks.jsonl", tasks[:3])
    res = invoke("run", "retail", "--tasks", tmp_path / "tasks.jsonl", "--out", tmp_path / "run")
    assert res.exit_code == 0, res.output
    with RunStore.open(tmp_path / "run") as store:
        rows = {traj.task_id: (traj, facts) for traj, _s, facts in store.trials()}
    traj, facts = rows[tasks[0].id]
    assert facts["status"] == "infra_error" and traj.infra_errors[-1]["kind"] == "scorer_crash"
    assert "KeyError" in traj.infra_errors[-1]["message"]
    assert all(rows[t.id][1]["status"] == "done" for t in tasks[1:3])


# -- damaged rows ---------------------------------------------------------------------------------------------


def test_damaged_rows_are_skipped_with_one_warning_each_by_every_command(run_copy, tasks):
    out = run_copy / "run"
    db = sqlite3.connect(out / "run.db")
    keys = db.execute("SELECT task_id, trial FROM trials ORDER BY task_id, trial").fetchall()
    bad = {keys[1]: ("trajectory", zlib.compress(b'{"task_id": "x", ')),  # JSON cut short
           keys[5]: ("trajectory", zlib.compress(b"\xff\xfe not utf-8")),
           keys[9]: ("trajectory", b"not zlib at all"),
           keys[13]: ("trajectory", zlib.compress(b'{"hello": 1}')),  # JSON, not a trajectory
           keys[17]: ("score", "{\"reward\": "),
           keys[21]: ("score", sqlite3.Binary(b"\xff\xfe"))}  # fmt: skip
    with db:
        for (task_id, trial), (column, value) in bad.items():
            cast = "CAST(? AS TEXT)" if isinstance(value, memoryview) else "?"
            db.execute(f"UPDATE trials SET {column} = {cast} WHERE task_id = ? AND trial = ?", (value, task_id, trial))
    db.close()
    good = all_pairs(tasks) - set(bad)

    res = invoke("report", out)
    assert res.exit_code == 0, res.output
    assert named_pairs(warnings_in(res)) == set(bad) and len(warnings_in(res)) == len(bad)
    assert json.loads((out / "summary.json").read_text())["finished"] == len(good)

    res = invoke("export", out, "-o", run_copy / "t.jsonl")
    assert res.exit_code == 0, res.output
    assert exported_pairs(run_copy / "t.jsonl") == good and named_pairs(warnings_in(res)) == set(bad)
    assert len(warnings_in(res)) == len(bad)
    assert any("not valid JSON" in w for w in warnings_in(res)) and any("not zlib" in w for w in warnings_in(res))
    assert any("not UTF-8" in w for w in warnings_in(res)) and any("invalid field" in w for w in warnings_in(res))

    for args in (["--check"], []):
        res = invoke("rescore", out, *args)
        assert res.exit_code == 0, res.output
        assert len(warnings_in(res)) == len(bad) and f"{len(good)} trials re-scored" in res.stdout

    res = invoke("run", "retail", "--tasks", run_copy / "tasks.jsonl", "--trials", TRIALS, "--out", out, "--resume")
    assert res.exit_code == 0, res.output
    assert named_pairs(warnings_in(res)) == set(bad) and len(warnings_in(res)) == len(bad)
    assert f"resuming: {len(good)} of {len(all_pairs(tasks))}" in res.stderr
    res = invoke("export", out, "-o", run_copy / "after.jsonl")
    assert exported_pairs(run_copy / "after.jsonl") == all_pairs(tasks) and not warnings_in(res)


def tear(db_path: Path, pages: list[int]) -> None:
    page_size = 4096
    with db_path.open("r+b") as fh:
        for page in pages:
            fh.seek((page - 1) * page_size)
            fh.write(b"\xde\xad\xbe\xef" * (page_size // 4))


def test_a_torn_page_costs_only_its_rows_and_resume_moves_to_a_healthy_file(run_copy, tasks):
    out = run_copy / "run"
    db = sqlite3.connect(out / "run.db")
    assert db.execute("PRAGMA page_size").fetchone()[0] == 4096
    leaves = [p for (p,) in db.execute("SELECT pageno FROM dbstat WHERE name = 'trials' AND pagetype = 'leaf' "
                                       "AND ncell > 0 ORDER BY pageno")]  # fmt: skip
    overflow = [p for (p,) in db.execute("SELECT pageno FROM dbstat WHERE name = 'trials' AND pagetype = 'overflow' "
                                         "ORDER BY pageno")]  # fmt: skip
    db.close()
    assert len(leaves) >= 4 and overflow
    tear(out / "run.db", [leaves[len(leaves) // 2], overflow[-1]])

    res = invoke("export", out, "-o", run_copy / "t.jsonl")
    assert res.exit_code == 0, res.output
    exported = exported_pairs(run_copy / "t.jsonl")
    lost = named_pairs(warnings_in(res))
    assert lost and not lost & exported and lost | exported == all_pairs(tasks)
    assert len(warnings_in(res)) == len(lost)  # one line per row, however many reads the command made

    for command in (["report", out], ["rescore", out]):
        res = invoke(*command)
        assert res.exit_code == 0, res.output
        assert named_pairs(warnings_in(res)) == lost and len(warnings_in(res)) == len(lost)
    assert json.loads((out / "summary.json").read_text())["finished"] == len(exported)

    res = invoke("run", "retail", "--tasks", run_copy / "tasks.jsonl", "--trials", TRIALS, "--out", out, "--resume")
    assert res.exit_code == 0, res.output
    assert named_pairs(warnings_in(res)) == lost and "the damaged file is kept as" in res.stderr
    assert list(out.glob("run.db.damaged-*"))
    res = invoke("export", out, "-o", run_copy / "after.jsonl")
    assert exported_pairs(run_copy / "after.jsonl") == all_pairs(tasks) and not warnings_in(res)
    db = sqlite3.connect(out / "run.db")
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    db.close()


@pytest.mark.parametrize("table", ["tasks", "sqlite_autoindex_trials_1"])
def test_torn_task_rows_or_a_torn_key_index_cost_nothing_after_resume(run_copy, tasks, table):
    """Task rows come back from the task file (its digest proves they are the run's); a torn index of the trial
    keys is read around row by row."""
    out = run_copy / "run"
    db = sqlite3.connect(out / "run.db")
    (page,) = db.execute("SELECT pageno FROM dbstat WHERE name = ? AND pagetype = 'leaf' ORDER BY ncell DESC "
                         "LIMIT 1", (table,)).fetchone()  # fmt: skip
    db.close()
    tear(out / "run.db", [page])
    res = invoke("export", out, "-o", run_copy / "t.jsonl")
    assert res.exit_code == 0, res.output
    exported = exported_pairs(run_copy / "t.jsonl")
    if table == "tasks":  # per lost task: its row, and one line for its trials
        lost_tasks = {t.id for t in tasks} - {task_id for task_id, _k in exported}
        assert lost_tasks and len(exported) == TRIALS * (len(tasks) - len(lost_tasks))
        assert len(warnings_in(res)) == 2 * len(lost_tasks)
        assert all(any(task_id in w for w in warnings_in(res)) for task_id in lost_tasks)
    else:
        assert exported == all_pairs(tasks) and len(warnings_in(res)) == 1 and "trials index" in res.stderr

    res = invoke("run", "retail", "--tasks", run_copy / "tasks.jsonl", "--trials", TRIALS, "--out", out, "--resume")
    assert res.exit_code == 0, res.output
    res = invoke("export", out, "-o", run_copy / "after.jsonl")
    assert exported_pairs(run_copy / "after.jsonl") == all_pairs(tasks) and not warnings_in(res)


@pytest.mark.parametrize("damage", ["truncate", "header"])
def test_a_file_sqlite_cannot_open_is_a_structured_error_for_every_command(run_copy, damage):
    out = run_copy / "run"
    if damage == "truncate":
        with (out / "run.db").open("r+b") as fh:
            fh.truncate(90_000)
    else:
        tear(out / "run.db", [1])
    for command in (["report", out], ["rescore", out], ["export", out],
                    ["run", "retail", "--tasks", run_copy / "tasks.jsonl", "--trials", TRIALS, "--out", out,
                     "--resume"]):  # fmt: skip
        res = invoke(*command)
        assert res.exit_code == 1, (command, res.output)
        assert error_of(res)["type"] == "damaged_run" and "run.db" in error_of(res)["message"]


# -- one writer, atomic create, resume checks --------------------------------------------------------------------


def test_a_second_writer_is_refused_naming_the_folder_and_the_holder(run_copy):
    out = run_copy / "run"
    resume = ["run", "retail", "--tasks", run_copy / "tasks.jsonl", "--trials", TRIALS, "--out", out, "--resume"]
    with RunStore.open(out, writer=True):
        for command in (resume, ["rescore", out]):
            res = invoke(*command)
            assert res.exit_code == 1 and error_of(res)["type"] == "run_locked"
            assert str(out) in error_of(res)["message"] and f"pid {os.getpid()}" in error_of(res)["message"]
        assert invoke("report", out).exit_code == 0  # readers are welcome while a run writes
        with pytest.raises(StoreError) as info:
            RunStore.create(out, {}, [])
        assert info.value.kind == "run_locked"
    assert invoke(*resume).exit_code == 0  # closing the writer frees the folder


def test_the_lock_of_a_killed_writer_is_freed_by_the_os(tmp_path, pristine):
    out = tmp_path / "new"
    out.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", "import sys; from toolworld.store.runstore import RunLock; "
                               "lock = RunLock(sys.argv[1]).acquire(); print('ready', flush=True); sys.stdin.read()", str(out)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        res = invoke("run", "retail", "--tasks", pristine / "tasks.jsonl", "--limit", "1", "--out", out)
        assert res.exit_code == 1 and error_of(res)["type"] == "run_locked"
        assert f"pid {holder.pid}" in error_of(res)["message"] and not RunStore.exists(out)
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
    res = invoke("run", "retail", "--tasks", pristine / "tasks.jsonl", "--limit", "1", "--out", out)
    assert res.exit_code == 0, res.output


def test_resume_names_every_configuration_difference(tmp_path, tasks):
    write_jsonl(tmp_path / "tasks.jsonl", tasks[:2])
    out = tmp_path / "run"
    base = ["run", "retail", "--tasks", tmp_path / "tasks.jsonl", "--out", out, "--trials", "2"]
    assert invoke(*base, "--policy", "gold:drop=0.3,seed=1", "--noise-fail", "0.1").exit_code == 0

    res = invoke(*base, "--policy", "gold:drop=0.5,seed=1", "--noise-fail", "0.2", "--max-turns", "5",
                 "--noise-seed", "3", "--resume")  # fmt: skip
    assert res.exit_code == 1 and error_of(res)["type"] == "run_mismatch"
    assert sorted(error_of(res)["differences"]) == sorted([
        "--policy gold:drop=0.3,seed=1 -> gold:drop=0.5,seed=1", "--noise-fail 0.1 -> 0.2",
        "--max-turns 30 -> 5", "--noise-seed 0 -> 3"])  # fmt: skip
    assert "--noise-fail 0.1 -> 0.2" in error_of(res)["message"]

    res = invoke(*base[:-1], "1", "--policy", "gold:drop=0.3,seed=1", "--noise-fail", "0.1", "--resume")
    assert res.exit_code == 1 and error_of(res)["differences"][0].startswith("--trials 2 -> 1")

    edited = [tasks[0].model_copy(update={"instruction": tasks[0].instruction + " Thanks!"}), tasks[1]]
    write_jsonl(tmp_path / "edited.jsonl", edited)
    res = invoke("run", "retail", "--tasks", tmp_path / "edited.jsonl", "--out", out, "--trials", "2", "--policy",
                 "gold:drop=0.3,seed=1", "--noise-fail", "0.1", "--resume")  # fmt: skip
    assert res.exit_code == 1 and error_of(res)["differences"][0].startswith("--tasks")
    assert "same task ids, different contents" in error_of(res)["message"]

    # The same run spelled differently, and more trials: accepted.
    res = invoke(*base[:-1], "3", "--policy", "gold:seed=1,drop=0.3", "--noise-fail", "0.1", "--resume")
    assert res.exit_code == 0, res.output
    assert json.loads((out / "summary.json").read_text())["finished"] == 6


def test_api_keys_are_not_stored_in_the_run(tmp_path, tasks, monkeypatch):
    monkeypatch.setattr(cli_run, "_policy_or_fail", lambda spec, what: ScriptedPolicy(["Done."], name="scripted"))
    write_jsonl(tmp_path / "tasks.jsonl", tasks[:1])
    out = tmp_path / "run"
    spec = "openai:m@http://localhost:1/v1,api_key=sk-secret,temperature=0"
    assert invoke("run", "retail", "--tasks", tmp_path / "tasks.jsonl", "--policy", spec, "--out", out).exit_code == 0
    assert b"sk-secret" not in (out / "run.db").read_bytes() and "sk-secret" not in (out / "report.html").read_text()
    res = invoke("run", "retail", "--tasks", tmp_path / "tasks.jsonl", "--policy",
                 "openai:m@http://localhost:1/v1,temperature=0,api_key=sk-other", "--out", out, "--resume")  # fmt: skip
    assert res.exit_code == 0, res.output  # another key is the same policy


def test_create_is_atomic(tmp_path, tasks):
    def tasks_then_crash() -> Any:
        yield from tasks[:3]
        raise RuntimeError("lost the disk")

    folder = tmp_path / "run"
    with pytest.raises(RuntimeError, match="lost the disk"):
        RunStore.create(folder, {"trials": 1}, tasks_then_crash())
    assert not RunStore.exists(folder)
    assert sorted(p.name for p in folder.iterdir()) == ["run.lock"]  # no half store, no temporary file left
    (folder / ".run.db.tmp").write_bytes(b"debris of a create killed mid-way")
    with RunStore.create(folder, {"trials": 1}, tasks) as store:
        assert store.task_ids() == [t.id for t in tasks]
    assert sorted(p.name for p in folder.iterdir()) == ["run.db", "run.lock"]


# -- runs that measured nothing ------------------------------------------------------------------------------


def test_a_run_whose_trials_all_ended_on_infra_errors_exits_2_with_the_first_cause(tmp_path, tasks, monkeypatch):
    down = InfraError("cannot reach http://gpu:8000/v1: connection refused", retryable=False, kind="connection")
    monkeypatch.setattr(cli_run, "_policy_or_fail", lambda spec, what: ScriptedPolicy([down], name="down"))
    write_jsonl(tmp_path / "tasks.jsonl", tasks[:3])
    res = invoke("run", "retail", "--tasks", tmp_path / "tasks.jsonl", "--trials", "2", "--out", tmp_path / "run")
    assert res.exit_code == 2, res.output
    error = error_of(res)
    assert error["type"] == "all_trials_infra_error" and error["cause"]["kind"] == "connection"
    assert "connection refused" in error["cause"]["message"] and "all 6 trial(s)" in error["message"]
    assert "connection refused" in res.stderr
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["infra_errors"] == 6

    def some_down(messages: list[Any], task: Any) -> Any:
        if task.id == tasks[0].id:
            raise down
        return "All done."

    monkeypatch.setattr(cli_run, "_policy_or_fail", lambda spec, what: ScriptedPolicy(some_down, name="some"))
    res = invoke("run", "retail", "--tasks", tmp_path / "tasks.jsonl", "--out", tmp_path / "mixed")
    assert res.exit_code == 0, res.output  # some trials measured something
