"""Atomic file writes: a reader sees the old file or the whole new one, never half of it.

The bytes go to a temporary file in the target's folder (same file system, so the rename is atomic), are
flushed, and the temporary file is renamed over the target with ``os.replace``. A failure at any point leaves
the previous file and removes the temporary one. The temporary name is unique (``mkstemp``), so two processes
writing the same target never write into one temporary file; the last rename wins, whole.

Several shapes, one rule: ``atomic_write_bytes`` / ``atomic_write_text`` for data already in memory,
``atomic_writer`` / ``atomic_text_writer`` for data streamed into an open file (a pulled model, a task set
written line by line), ``atomic_path`` for a library that writes to a file name (a Parquet table), and
``atomic_directory`` for a folder that a library fills (a saved tokenizer).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, BinaryIO, TextIO

#: Permissions of a finished file unless the caller says otherwise: results are meant to be shared, and
#: ``mkstemp`` creates files only their owner can read.
SHARED_MODE = 0o644


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str], *, mode: int | None = SHARED_MODE,
                suffix: str = ".tmp") -> Iterator[Path]:  # fmt: skip
    """A temporary path beside ``path`` for a writer that wants a file name (``pyarrow.parquet.write_table``);
    it is renamed to ``path`` when the ``with`` block ends without an exception, and removed when it does not.

    Writing Parquet to a path rather than through a Python file object keeps pyarrow's native I/O (faster).
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=suffix)
    os.close(fd)
    try:
        yield Path(tmp)
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def _atomic_open(path: str | os.PathLike[str], open_mode: str, *, mode: int | None, fsync: bool, suffix: str,
                 encoding: str | None = None, errors: str | None = None) -> Iterator[IO]:  # fmt: skip
    newline = None if "b" in open_mode else "\n"
    with atomic_path(path, mode=mode, suffix=suffix) as tmp, open(tmp, open_mode, encoding=encoding, errors=errors,
                                                                   newline=newline) as fh:  # fmt: skip
        yield fh
        if fsync:
            fh.flush()
            os.fsync(fh.fileno())


def atomic_writer(path: str | os.PathLike[str], *, mode: int | None = SHARED_MODE, fsync: bool = False,
                  suffix: str = ".tmp") -> contextlib.AbstractContextManager[BinaryIO]:  # fmt: skip
    """A binary file to stream into; it replaces ``path`` when the ``with`` block ends without an exception.

    An exception inside the block (or a failed flush or rename) removes the temporary file and leaves ``path``
    as it was, so a partial download or export never appears under the final name. ``mode`` and ``fsync`` are
    those of :func:`atomic_write_bytes`; ``suffix`` names the temporary file (``.partial`` for downloads).
    """
    return _atomic_open(path, "wb", mode=mode, fsync=fsync, suffix=suffix)  # type: ignore[return-value]


def atomic_text_writer(path: str | os.PathLike[str], *, encoding: str = "utf-8", errors: str = "strict",
                       mode: int | None = SHARED_MODE, fsync: bool = False,
                       suffix: str = ".tmp") -> contextlib.AbstractContextManager[TextIO]:  # fmt: skip
    """:func:`atomic_writer` for text, with ``\\n`` line ends on every platform (files hash the same everywhere)."""
    return _atomic_open(path, "w", mode=mode, fsync=fsync, suffix=suffix, encoding=encoding,  # type: ignore[return-value]
                        errors=errors)  # fmt: skip


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes, *, mode: int | None = SHARED_MODE,
                       fsync: bool = False) -> Path:  # fmt: skip
    """Write ``data`` to ``path`` atomically and return the path.

    ``mode`` is applied before the rename (``mkstemp`` creates private files; results are meant to be shared);
    None keeps the private mode. ``fsync`` also forces the bytes to disk first, for files that must survive a
    power cut, at the cost of a disk flush.
    """
    with atomic_writer(path, mode=mode, fsync=fsync) as fh:
        fh.write(data)
    return Path(path)


def atomic_write_text(path: str | os.PathLike[str], text: str, *, encoding: str = "utf-8", errors: str = "strict",
                      mode: int | None = SHARED_MODE, fsync: bool = False) -> Path:  # fmt: skip
    """``atomic_write_bytes`` for text (``\\n`` line ends on every platform, so files hash the same everywhere).

    ``errors="replace"`` writes text that may hold lone surrogates (a model's output) instead of failing.
    """
    return atomic_write_bytes(path, text.encode(encoding, errors), mode=mode, fsync=fsync)


@contextlib.contextmanager
def atomic_directory(path: str | os.PathLike[str]) -> Iterator[Path]:
    """An empty temporary folder to fill; it is renamed to ``path`` when the ``with`` block ends cleanly.

    Readers see the whole folder under its name or none. A folder cannot be renamed over a non-empty one, so
    when ``path`` already exists (another process finished first) the rename raises ``OSError`` and the
    temporary folder is removed: for a cache the first complete copy wins and the caller may ignore the error.
    Any failure removes the temporary folder.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        yield tmp
        os.replace(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
