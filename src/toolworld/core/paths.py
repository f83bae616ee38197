"""Where toolworld keeps what it builds or fetches once (seed images, pulled models, tokenizers)."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """``$TOOLWORLD_CACHE``, else ``$XDG_CACHE_HOME/toolworld``, else ``~/.cache/toolworld``."""
    root = os.environ.get("TOOLWORLD_CACHE")
    if root:
        return Path(root)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "toolworld"
