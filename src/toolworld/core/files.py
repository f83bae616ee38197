"""Atomic file writes: a reader sees the old file or the whole new one, never half of it.

The bytes go to a temporary file in the target's folder (same file system, so the rename is atomic), are
flushed, and the temporary file is renamed over the target with ``os.replace``. A failure at any point leaves
the previous file and removes the temporary one.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes, *, mode: int | None = 0o644,
                       fsync: bool = False) -> Path:  # fmt: skip
    """Write ``data`` to ``path`` atomically and return the path.

    ``mode`` is applied before the rename (``mkstemp`` creates private files; results are meant to be shared);
    None keeps the private mode. ``fsync`` also forces the bytes to disk first, for files that must survive a
    power cut (a run's summary), at the cost of a disk flush.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            if fsync:
                fh.flush()
                os.fsync(fh.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return target


def atomic_write_text(path: str | os.PathLike[str], text: str, *, encoding: str = "utf-8", mode: int | None = 0o644,
                      fsync: bool = False) -> Path:  # fmt: skip
    """``atomic_write_bytes`` for text (``\\n`` line ends on every platform, so files hash the same everywhere)."""
    return atomic_write_bytes(path, text.encode(encoding), mode=mode, fsync=fsync)
