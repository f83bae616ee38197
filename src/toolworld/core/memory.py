"""Give freed heap memory back to the operating system.

glibc's ``malloc`` keeps memory that a program frees in its arenas for reuse, and returns only the free space at
the very top of a heap on its own. A sampler that builds a KV cache of a different size for every batch (every
batch of turns has another longest prompt) and frees it afterwards leaves the heap full of holes that no later
allocation fits exactly: the process's resident memory climbs with every batch although the live tensors stay
the same size. Measured on the batched transformers engine (SmolLM2-135M in bfloat16, batches of 8 episodes):
3.9 GB of resident memory after 16 episodes, 6.9 GB after 48, 1.4 GB once ``malloc_trim`` ran; a 300-episode
sampling pass reached ~21 GB on a 24 GB machine. ``malloc_trim`` releases the free pages of every arena in
place (``madvise``), so nothing that is still allocated moves.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys
from functools import cache
from typing import Any

__all__ = ["release_freed_memory"]


@cache
def _libc() -> Any:
    """glibc, where this process runs on it (``None`` on macOS, Windows and musl, whose allocators differ)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim = libc.malloc_trim  # glibc only: musl and others have no such symbol
    except (OSError, AttributeError):
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return libc


def release_freed_memory() -> bool:
    """Return the free pages of the C heap to the OS (``malloc_trim(0)``); ``True`` where glibc did it.

    Call it after work that allocated and freed large, differently sized buffers (a batch of generation, a
    training step), not in an inner loop: it walks the heap (milliseconds for gigabytes). Elsewhere it does
    nothing and returns ``False``."""
    libc = _libc()
    if libc is None:
        return False
    libc.malloc_trim(0)
    return True
