"""Test-session setup: seed images go to a fresh temporary cache, never the user's ~/.cache."""

from __future__ import annotations

import os
import tempfile

os.environ["TOOLWORLD_CACHE"] = tempfile.mkdtemp(prefix="toolworld-test-cache-")
