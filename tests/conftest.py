"""Test-session setup: seed images go to a fresh temporary cache, never the user's ~/.cache; fixtures many test
files share (the retail world, a tiny GGUF model around SmolLM2's real vocabulary)."""

from __future__ import annotations

import os
import signal
import tempfile
from pathlib import Path

import pytest

os.environ["TOOLWORLD_CACHE"] = tempfile.mkdtemp(prefix="toolworld-test-cache-")


@pytest.fixture(scope="session")
def world():
    """The retail world (registered worlds are shared objects: one per session)."""
    from toolworld.world import get_world

    return get_world("retail")


@pytest.fixture(scope="session")
def tiny_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random-weight GGUF model built around SmolLM2's real tokenizer (skips without ../shared or gguf)."""
    from gguf_kit import SMOLLM2, write_tiny_smollm2_gguf

    if not SMOLLM2.is_dir():
        pytest.skip(f"needs the shared tokenizers at {SMOLLM2}")
    pytest.importorskip("gguf")
    return write_tiny_smollm2_gguf(tmp_path_factory.mktemp("gguf") / "tiny-smollm2.gguf")


@pytest.fixture
def terminal_sigint():
    """Ctrl-C as a terminal delivers it. A suite started in the background by a shell without job control
    (``nohup pytest &``, some CI runners) inherits SIGINT ignored, and Python then raises no KeyboardInterrupt,
    so a test of what Ctrl-C does would fail for a reason that is not the code's."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)
