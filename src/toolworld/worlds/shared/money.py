"""Money: integer cents in every database, decimal amounts in every tool result.

Cents keep sums exact (no float drift between a tool's total and the scorer's); results show dollars rounded to
the cent because that is what an agent reads and says back to a person.
"""

from __future__ import annotations


def dollars(cents: int | None) -> float | None:
    """Cents as a dollar amount rounded to the cent (what tools show to agents)."""
    return None if cents is None else round(cents / 100, 2)


def cents(amount: float) -> int:
    """A dollar amount an agent passed (``12.5``) as integer cents, rounded half away from zero."""
    scaled = abs(amount) * 100
    whole = int(scaled + 0.5 + 1e-9)
    return whole if amount >= 0 else -whole


def percent_of(cents_value: int, percent: float) -> int:
    """``percent`` % of an amount in cents, rounded to the cent (discounts, thresholds)."""
    exact = abs(cents_value) * percent / 100
    whole = int(exact + 0.5 + 1e-9)
    return whole if cents_value >= 0 else -whole
