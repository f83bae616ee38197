"""toolworld.core: atomic writes, retry delays, seed derivation and the one error base every error shares."""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
import pickle
import stat
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from toolworld.core import (
    ToolworldError,
    atomic_directory,
    atomic_path,
    atomic_text_writer,
    atomic_write_bytes,
    atomic_write_text,
    atomic_writer,
    backoff_delay,
    derive_seed,
)
from toolworld.core import files as core_files

# -- atomic writes ------------------------------------------------------------------------------------------


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_atomic_write_replaces_the_file_whole_and_shared(tmp_path):
    target = tmp_path / "deep" / "folder" / "out.bin"  # missing folders are created
    assert atomic_write_bytes(target, b"one") == target
    atomic_write_bytes(target, b"two")
    assert target.read_bytes() == b"two"
    assert _mode(target) == 0o644  # mkstemp's private mode is not what a shared result should have
    assert os.listdir(target.parent) == ["out.bin"]
    atomic_write_bytes(target, b"three", mode=None)
    assert _mode(target) == 0o600  # mode=None keeps the private mode (a file only its owner should read)


def test_atomic_write_text_uses_newline_and_can_replace_unencodable_text(tmp_path):
    target = tmp_path / "a.txt"
    atomic_write_text(target, "x\ny\n")
    assert target.read_bytes() == b"x\ny\n"
    with pytest.raises(UnicodeEncodeError):
        atomic_write_text(target, "lone \udc80 surrogate")
    assert target.read_bytes() == b"x\ny\n"  # the failed write left the old file
    atomic_write_text(target, "lone \udc80 surrogate", errors="replace")
    assert target.read_text(encoding="utf-8") == "lone ? surrogate"


def test_a_failed_rename_leaves_the_old_file_and_no_temporary_file(tmp_path, monkeypatch):
    target = tmp_path / "summary.json"
    atomic_write_text(target, "old")

    def refuse(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(core_files.os, "replace", refuse)
    with pytest.raises(OSError, match="No space"):
        atomic_write_text(target, "new")
    with pytest.raises(OSError, match="No space"):
        atomic_write_bytes(tmp_path / "fresh.bin", b"new")
    assert target.read_text() == "old"
    assert sorted(os.listdir(tmp_path)) == ["summary.json"]  # no temporary file, and no half-made fresh.bin


def test_a_failure_while_streaming_leaves_the_old_file_and_no_temporary_file(tmp_path):
    target = tmp_path / "model.gguf"
    target.write_bytes(b"complete old model")
    with pytest.raises(RuntimeError, match="checksum"), atomic_writer(target, suffix=".partial") as fh:
        fh.write(b"half of a new")
        assert any(name.endswith(".partial") for name in os.listdir(tmp_path))  # written beside the target
        raise RuntimeError("checksum mismatch")
    assert target.read_bytes() == b"complete old model"
    assert os.listdir(tmp_path) == ["model.gguf"]

    with atomic_text_writer(tmp_path / "tasks.jsonl", fsync=True) as fh:
        for i in range(3):
            fh.write(f"{i}\n")
        assert not (tmp_path / "tasks.jsonl").exists()  # nothing under the final name until the block ends
    assert (tmp_path / "tasks.jsonl").read_bytes() == b"0\n1\n2\n"


def test_atomic_path_hands_a_writer_a_file_name_and_renames_it_only_on_success(tmp_path):
    target = tmp_path / "tasks.parquet"
    with atomic_path(target) as tmp:
        assert tmp.parent == tmp_path and tmp != target
        tmp.write_bytes(b"PAR1")
        assert not target.exists()
    assert target.read_bytes() == b"PAR1" and _mode(target) == 0o644
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        tmp.write_bytes(b"half")
        raise RuntimeError("writer crashed")
    assert target.read_bytes() == b"PAR1" and os.listdir(tmp_path) == ["tasks.parquet"]


def test_atomic_directory_appears_whole_and_the_first_copy_wins(tmp_path):
    target = tmp_path / "cache" / "tok"
    with atomic_directory(target) as tmp:
        (tmp / "tokenizer.json").write_text("{}")
        assert not target.exists()
    assert sorted(os.listdir(target)) == ["tokenizer.json"]

    with pytest.raises(OSError), atomic_directory(target) as tmp:  # another process already finished
        (tmp / "other.json").write_text("{}")
    assert sorted(os.listdir(target)) == ["tokenizer.json"]
    assert os.listdir(target.parent) == ["tok"]  # the losing temporary folder is gone

    with pytest.raises(ValueError), atomic_directory(tmp_path / "never") as tmp:
        (tmp / "half").write_text("x")
        raise ValueError("save failed")
    assert sorted(os.listdir(tmp_path)) == ["cache"]


def test_a_pulled_model_appears_only_complete_and_checked(tmp_path, monkeypatch):
    import hashlib
    import zipfile

    from toolworld.rollout.models import KnownModel, ModelPullError, model_path, pull

    monkeypatch.setenv("TOOLWORLD_CACHE", str(tmp_path / "cache"))
    payload = os.urandom(3 << 20)  # several read blocks, so the file is streamed, not written at once

    def wheel_with(member_bytes: bytes, name: str) -> tuple[Path, str]:
        wheel = tmp_path / name
        with zipfile.ZipFile(wheel, "w") as zf:
            zf.writestr("pkg/tiny.gguf", member_bytes)
        return wheel, hashlib.sha256(wheel.read_bytes()).hexdigest()

    def spec(wheel_sha: str) -> KnownModel:
        return KnownModel(name="tiny", description="", package="pkg", version="1", wheel_sha256=wheel_sha,
                          member="pkg/tiny.gguf", file_sha256=hashlib.sha256(payload).hexdigest(),
                          size=len(payload), license="MIT")  # fmt: skip

    # The member's bytes do not match its pinned hash: nothing appears under the model's name.
    bad, bad_sha = wheel_with(payload[:-1] + b"X", "bad.whl")
    with pytest.raises(ModelPullError) as info:
        pull(spec(bad_sha), wheel=bad)
    assert info.value.kind == "corrupt_wheel"
    target = model_path(spec(bad_sha))
    assert not target.exists() and os.listdir(target.parent) == []  # no .partial left behind

    good, good_sha = wheel_with(payload, "good.whl")
    assert pull(spec(good_sha), wheel=good) == target
    assert target.read_bytes() == payload and os.listdir(target.parent) == ["tiny.gguf"]


# -- retry delays -------------------------------------------------------------------------------------------


def test_backoff_doubles_is_capped_and_jitters_within_half_to_full():
    assert [backoff_delay(0.5, a, jitter=False) for a in range(4)] == [0.5, 1.0, 2.0, 4.0]
    assert backoff_delay(1.0, 20, jitter=False) == 30.0  # capped, however many retries
    assert backoff_delay(1.0, 3, jitter=False, cap_s=5.0) == 5.0
    delays = [backoff_delay(2.0, 1) for _ in range(200)]
    assert all(2.0 <= d <= 4.0 for d in delays)
    assert len(set(delays)) > 1  # jittered: concurrent retries spread out


def test_a_sane_retry_after_hint_wins_and_an_insane_one_is_ignored():
    assert backoff_delay(1.0, 5, hint_s=7.0) == 7.0
    assert backoff_delay(1.0, 0, hint_s=0.0) == 0.0
    for bad in (-1.0, 3600.0, float("nan")):
        assert 0.5 <= backoff_delay(1.0, 0, hint_s=bad) <= 1.0


def test_the_vllm_engine_retries_on_the_shared_backoff():
    from toolworld.rollout.engines.vllm import VLLMEngine

    engine = SimpleNamespace(backoff_s=1.0)  # _delay reads only the configured base delay
    assert VLLMEngine._delay(engine, 2, "3") == 3.0  # Retry-After in seconds wins
    assert 4.0 <= VLLMEngine._delay(engine, 3, "Wed, 21 Oct 2026 07:28:00 GMT") <= 8.0  # a date: own backoff
    assert 0.5 <= VLLMEngine._delay(engine, 0, None) <= 1.0


# -- seeds --------------------------------------------------------------------------------------------------


def test_derive_seed_is_fixed_across_processes_and_separates_parts():
    expected = 1174793888  # sha256("task\x1f0")[:4] & 0x7FFFFFFF: pinned, stored runs depend on it
    assert derive_seed("task", 0) == expected
    code = "from toolworld.core import derive_seed; print(derive_seed('task', 0))"
    for hash_seed in ("1", "2"):  # str hashing differs between these processes; the derived seed must not
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                             env={**os.environ, "PYTHONHASHSEED": hash_seed})  # fmt: skip
        assert int(out.stdout) == expected
    seeds = {derive_seed("noise", 0, "t1", trial, step) for trial in range(5) for step in range(20)}
    assert len(seeds) == 100 and all(0 <= s < 2**31 for s in seeds)
    assert derive_seed("a", "bc") != derive_seed("ab", "c")  # parts are separated, not concatenated


def test_noise_draws_are_per_step_and_one_probability_never_shifts_another():
    from toolworld.env.noise import NoiseConfig, NoiseInjector

    config = NoiseConfig(tool_failure_p=0.3, truncate_p=0.3, latency_ms=10.0, seed=3)
    draws = [NoiseInjector(config, "t1", 0).draw(step) for step in range(1000)]
    assert NoiseInjector(config, "t1", 0).draw(750) == draws[750]  # no matter which steps were drawn before
    assert 0.25 < sum(d.fail for d in draws) / 1000 < 0.35
    assert 0.25 < sum(d.truncate for d in draws) / 1000 < 0.35
    assert all(0.005 <= d.latency_s <= 0.015 for d in draws)  # [0.5, 1.5] x the mean
    louder = [NoiseInjector(dataclasses.replace(config, truncate_p=0.9), "t1", 0).draw(s) for s in range(1000)]
    assert [d.fail for d in louder] == [d.fail for d in draws]
    assert [d.latency_s for d in louder] == [d.latency_s for d in draws]
    # The same uniform draw decides truncation: a step cut at p=0.3 is still cut at p=0.9.
    assert all(dl.truncate for d, dl in zip(draws, louder, strict=True) if d.truncate)
    other_trial = [NoiseInjector(config, "t1", 1).draw(step).fail for step in range(1000)]
    assert other_trial != [d.fail for d in draws]


# -- errors -------------------------------------------------------------------------------------------------


def _every_error() -> list[tuple[ToolworldError, str]]:
    from toolworld.core import InfraError
    from toolworld.rollout.engines.gguf import TokenizerMismatch
    from toolworld.rollout.models import ModelPullError
    from toolworld.store.export import ExportError
    from toolworld.store.runstore import StoreError
    from toolworld.tasks.sampling import Drop
    from toolworld.tokens.template import TemplateError
    from toolworld.world import ToolError, WorldError

    return [
        (ToolError("not_found", "no order #W1"), "not_found"),
        (WorldError("unknown world 'x'"), "world_error"),
        (WorldError("unknown world 'x'", kind="unknown_world"), "unknown_world"),
        (InfraError("server answered 503"), "server_error"),
        (InfraError("timed out", kind="timeout", retryable=False), "timeout"),
        (TemplateError("not_a_tokenizer", "no tokenizer.json"), "not_a_tokenizer"),
        (StoreError("run_locked", "another process writes this run"), "run_locked"),
        (ExportError("missing_dependency", "needs pyarrow"), "missing_dependency"),
        (ModelPullError("checksum_mismatch", "bad wheel", hint="pull again"), "checksum_mismatch"),
        (TokenizerMismatch("ids differ"), "tokenizer_mismatch"),
        (Drop("walk_dead_end"), "task_dropped"),
    ]


def test_every_error_is_a_toolworld_error_with_its_kind_and_survives_pickling():
    for error, kind in _every_error():
        assert isinstance(error, ToolworldError), type(error)
        assert error.kind == kind
        copy = pickle.loads(pickle.dumps(error))  # errors cross process boundaries (generation workers)
        assert type(copy) is type(error) and copy.kind == kind and str(copy) == str(error)
        assert copy.__dict__ == error.__dict__


def test_error_specifics_are_kept():
    errors = {type(e).__name__: e for e, _ in _every_error()}
    tool_error = errors["ToolError"]
    assert tool_error.type == tool_error.kind == "not_found"
    assert tool_error.to_dict() == {"type": "not_found", "message": "no order #W1"}
    with pytest.raises(ValueError, match="unknown tool error type"):
        type(tool_error)("no_such_type", "x")  # type: ignore[arg-type]
    infra = [e for e, _ in _every_error() if type(e).__name__ == "InfraError"]
    assert infra[0].retryable and not infra[1].retryable
    # Stored in trajectories: exactly these keys, read back by older and newer versions alike.
    assert infra[1].to_dict() == {"kind": "timeout", "message": "timed out", "retryable": False}
    assert isinstance(errors["TokenizerMismatch"], ValueError)  # callers catching bad input still catch it
    assert errors["ModelPullError"].hint == "pull again"
    assert errors["Drop"].reason == "walk_dead_end"
    assert ToolworldError("x").to_dict() == {"type": "error", "message": "x"}


def test_the_command_line_prints_any_uncaught_toolworld_error_as_structured_json(monkeypatch, capsys):
    from toolworld.rollout.engines.gguf import TokenizerMismatch
    from toolworld.world import WorldError

    cli_app = importlib.import_module("toolworld.cli.app")  # the module (``toolworld.cli.app`` is the Typer app)
    for error, kind in ((TokenizerMismatch("ids differ; pass the model's tokenizer folder"), "tokenizer_mismatch"),
                        (WorldError("world 'w': schema does not execute"), "world_error")):  # fmt: skip

        def broken(error=error):
            raise error

        monkeypatch.setattr(cli_app, "list_worlds", broken)
        monkeypatch.setattr(sys, "argv", ["toolworld", "worlds", "--json"])
        with pytest.raises(SystemExit) as exited:
            cli_app.main()
        assert exited.value.code == 1
        printed = json.loads(capsys.readouterr().out)
        assert printed == {"error": {"type": kind, "message": str(error)}}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="malloc_trim is glibc's; other allocators differ")
def test_freed_heap_memory_goes_back_to_the_os():
    """Blocks freed between live ones are holes glibc keeps (resident) until ``malloc_trim``: the process's
    resident memory falls by most of them once ``release_freed_memory`` runs. A fresh interpreter, so the
    measurement sees only this heap."""
    script = """
from toolworld.core.memory import release_freed_memory
def rss():
    return next(int(l.split()[1]) // 1024 for l in open("/proc/self/status") if l.startswith("VmRSS"))
blocks = [bytearray(64 * 1024) for _ in range(4096)]
kept = blocks[15::16]
del blocks
before = rss()
print(release_freed_memory(), before, rss())
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    did, before, after = done.stdout.split()
    if did != "True":
        pytest.skip("this Linux's C library has no malloc_trim (not glibc)")
    assert int(before) - int(after) >= 150, (before, after)  # 240 MB of the 256 MB were freed between kept blocks
