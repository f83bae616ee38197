"""Deterministic draws for seed data: integer-only chances, weighted picks, fresh ids, slugs.

Seed data must be byte-identical on every machine and Python version, so these draw integers from the world's
own ``Rng`` (never ``random`` or a float compared against a threshold) and iterate lists, never sets.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from toolworld.world.rng import Rng


def pct(rng: Rng, percent: int) -> bool:
    """True with probability ``percent``/100, drawn as an integer (no float in the stream)."""
    return rng.below(100) < percent


def weighted(rng: Rng, pairs: Sequence[tuple[str, int]]) -> str:
    """One value of ``(value, integer weight)`` pairs."""
    return rng.weighted([v for v, _ in pairs], [w for _, w in pairs])


def fresh(rng: Rng, used: set[str], make: Callable[[Rng], str]) -> str:
    """Draw ids from ``make`` until one is not in ``used`` (then claim it)."""
    while True:
        value = make(rng)
        if value not in used:
            used.add(value)
            return value


def slug(name: str) -> str:
    """Lower-case letters and digits only (``"O'Brien"`` -> ``"obrien"``): ids and e-mail local parts."""
    return "".join(ch for ch in name.lower() if ch.isalnum())


def digits(rng: Rng, n: int) -> str:
    """``n`` random decimal digits, the first not 0 (so the id has its full length as a number too)."""
    return str(rng.randint(1, 9)) + "".join(str(rng.below(10)) for _ in range(n - 1))
