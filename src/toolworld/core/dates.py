"""Dates as people say them: one home for the month names that task phrasings and agents' notes share.

A customer says "the order I placed on April 16" where a tool shows ``2026-04-16T21:14:27Z``; every world that
phrases a date and every note that matches one against a tool result must spell it the same way.
"""

from __future__ import annotations

import re

MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December")

#: An ISO date, optionally with a time ("2026-04-16", "2026-04-16T21:14:27Z"): what tools return.
ISO_DATE = re.compile(r"(\d{4})-(\d{2})-(\d{2})(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?")


def spoken_date(iso: str, *, year: bool = False) -> str:
    """'2026-04-12' (or a timestamp that starts with it) as a person says it: 'April 12' ('April 12, 2026').

    Raises ``ValueError`` for a string that does not start with a valid ISO date.
    """
    m = ISO_DATE.match(iso)
    if m is None or not 1 <= int(m[2]) <= 12 or not 1 <= int(m[3]) <= 31:
        raise ValueError(f"not an ISO date: {iso!r}")
    said = f"{MONTHS[int(m[2]) - 1]} {int(m[3])}"
    return f"{said}, {m[1]}" if year else said


def is_iso_date(value: object) -> bool:
    """Whether ``value`` is exactly an ISO date or timestamp (the whole string, a valid month and day)."""
    if not isinstance(value, str):
        return False
    m = ISO_DATE.fullmatch(value)
    return m is not None and 1 <= int(m[2]) <= 12 and 1 <= int(m[3]) <= 31
