"""A small deterministic random generator that the project owns.

Seed data and tasks must be byte-identical for a given seed on every machine and every Python or library
version. Python's ``random`` only promises a stable ``random()`` stream (``randrange``, ``choice``,
``shuffle`` and ``sample`` have changed between releases), so worlds draw from this generator instead:
SplitMix64 (Steele, Lea & Flood, 2014) with integer-only derived draws, which is fully specified here.
"""

from __future__ import annotations

import hashlib
from collections.abc import MutableSequence, Sequence
from typing import TypeVar

T = TypeVar("T")
_MASK = (1 << 64) - 1


class Rng:
    """Deterministic PRNG; ``Rng(seed).child("users")`` gives independent, stable sub-streams.

    Sub-streams keep data stable under change: adding a column to the users generator does not shift the
    random draws of the orders generator if each uses its own ``child``.
    """

    __slots__ = ("_state",)

    def __init__(self, seed: int | str) -> None:
        if isinstance(seed, str):
            seed = int.from_bytes(hashlib.blake2b(seed.encode(), digest_size=8).digest(), "big")
        self._state = seed & _MASK

    def child(self, label: str) -> Rng:
        """An independent generator derived from this one's current state and ``label`` (no draw made)."""
        digest = hashlib.blake2b(f"{self._state}:{label}".encode(), digest_size=8).digest()
        return Rng(int.from_bytes(digest, "big"))

    def next_u64(self) -> int:
        self._state = (self._state + 0x9E3779B97F4A7C15) & _MASK
        z = self._state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
        return z ^ (z >> 31)

    def below(self, n: int) -> int:
        """Uniform integer in ``[0, n)`` without modulo bias (rejection sampling)."""
        if n <= 0:
            raise ValueError("below() needs n > 0")
        limit = (1 << 64) - ((1 << 64) % n)
        while True:
            x = self.next_u64()
            if x < limit:
                return x % n

    def randint(self, lo: int, hi: int) -> int:
        """Uniform integer in ``[lo, hi]`` (both ends included)."""
        return lo + self.below(hi - lo + 1)

    def random(self) -> float:
        """Uniform float in ``[0, 1)`` with 53 bits of precision."""
        return (self.next_u64() >> 11) / (1 << 53)

    def chance(self, p: float) -> bool:
        return self.random() < p

    def choice(self, seq: Sequence[T]) -> T:
        if not seq:
            raise ValueError("choice() from an empty sequence")
        return seq[self.below(len(seq))]

    def weighted(self, seq: Sequence[T], weights: Sequence[int]) -> T:
        """Pick one item with integer weights (integers keep the draw exact across platforms)."""
        if len(seq) != len(weights) or not seq:
            raise ValueError("weighted() needs one positive integer weight per item")
        r = self.below(sum(weights))
        for item, w in zip(seq, weights, strict=True):
            if r < w:
                return item
            r -= w
        raise AssertionError("unreachable")

    def shuffle(self, items: MutableSequence[T]) -> None:
        """In-place Fisher-Yates shuffle."""
        for i in range(len(items) - 1, 0, -1):
            j = self.below(i + 1)
            items[i], items[j] = items[j], items[i]

    def sample(self, seq: Sequence[T], k: int) -> list[T]:
        """``k`` distinct items in random order."""
        if k > len(seq):
            raise ValueError(f"sample of {k} from {len(seq)} items")
        pool = list(seq)
        for i in range(k):
            j = i + self.below(len(pool) - i)
            pool[i], pool[j] = pool[j], pool[i]
        return pool[:k]

    def digits(self, n: int) -> str:
        """A string of ``n`` random decimal digits (ids, card numbers, tracking numbers)."""
        return "".join(str(self.below(10)) for _ in range(n))
