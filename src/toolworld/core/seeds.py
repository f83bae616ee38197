"""Seed derivation: one rule for turning named parts (a task id, a trial, a purpose) into a seed.

``hash()`` differs between processes and ``random.Random(str)`` between Python versions' seeding of strings, so
seeds come from sha256 of the parts, the same on every machine. Draws then come from the project's own
generator (``toolworld.world.Rng``), whose stream is fully specified.
"""

from __future__ import annotations

import hashlib


def derive_seed(*parts: object) -> int:
    """A stable 31-bit seed from any parts (their ``str`` joined by a unit separator)."""
    digest = hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF
