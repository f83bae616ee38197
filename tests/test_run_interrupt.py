"""Ctrl-C on ``toolworld run`` with a local GGUF model mid-generation: the command stops within seconds (not when
llama.cpp would have finished the turn), keeps the finished trials in ``run.db`` and prints a summary of only
those, saying it was interrupted."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gguf_kit import SMOLLM2, write_tiny_smollm2_gguf
from rollout_kit import make_task
from toolworld.store import RunStore
from toolworld.tasks.model import write_jsonl

#: Each trial is one assistant turn of up to this many tokens (tens of seconds of llama.cpp on a small CPU), cut
#: by the per-episode time limit: the first trial ends (as ``timeout``) and is kept, and the interrupt lands while
#: llama.cpp is generating the second, with most of its turn still to go.
TURN_TOKENS = 3000
TIME_LIMIT_S = 6
EXIT_WITHIN_S = 5.0


def _finished(out: Path) -> int:
    if not (out / "run.db").exists():
        return 0
    try:
        with RunStore.open(out) as store:
            return len(store.finished())
    except Exception:  # the writer may be mid-creation: try again on the next poll
        return 0


@pytest.mark.skipif(sys.platform == "win32", reason="sends SIGINT to a child process")
def test_ctrl_c_mid_generation_stops_quickly_and_keeps_finished_trials(tmp_path):
    if not SMOLLM2.is_dir():
        pytest.skip(f"needs the shared tokenizers at {SMOLLM2}")
    pytest.importorskip("xllamacpp")
    pytest.importorskip("gguf")
    model = write_tiny_smollm2_gguf(tmp_path / "tiny.gguf")
    tasks = tmp_path / "tasks.jsonl"
    write_jsonl(tasks, [make_task("cancel", i) for i in range(3)])
    out = tmp_path / "run"
    toolworld = Path(sys.executable).with_name("toolworld")
    cmd = [str(toolworld), "run", "retail", "--tasks", str(tasks), "--out", str(out), "--max-turns", "1",
           "--time-limit", str(TIME_LIMIT_S), "--concurrency", "1",
           "--policy", f"gguf:{model},n_ctx=8192,threads=2,max_tokens={TURN_TOKENS}"]  # fmt: skip
    env = {**os.environ, "COLUMNS": "200"}
    # The child gets the terminal's Ctrl-C even when this suite runs with SIGINT ignored (``nohup pytest &``).
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while _finished(out) < 1:  # the first trial is in run.db: the second one is generating now
            assert proc.poll() is None, proc.communicate()[0]
            assert time.monotonic() < deadline, "the first trial never finished"
            time.sleep(0.2)
        time.sleep(1.0)
        assert proc.poll() is None, "the run ended before it could be interrupted; raise TURN_TOKENS"
        proc.send_signal(signal.SIGINT)
        sent = time.monotonic()
        try:
            output, _ = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            pytest.fail("toolworld run did not stop within 60 s of Ctrl-C")
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert took < EXIT_WITHIN_S, f"Ctrl-C took {took:.1f} s to stop the run\n{output}"
    assert proc.returncode == 130, output
    kept = _finished(out)
    assert 1 <= kept < 3, output
    assert "interrupted" in output and f"{kept} trials kept" in output, output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["finished"] == summary["episodes"] == kept  # the summary counts only the finished trials
    with RunStore.open(out) as store:
        assert len(list(store.trials())) == kept
