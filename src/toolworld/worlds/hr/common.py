"""Constants and rules the hr world's data generator, tools and task kit share (one definition of each).

The balance arithmetic lives here because three places must agree on it: the seed data (balances that never
start overdrawn), the tools (rules R2 and R3) and the task kit (what an employee is told they have left).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import date
from typing import Any

from toolworld.worlds.shared.clock import business_days_between, parse_time

#: The world's fixed clock: a Monday in early March, so carried-over days (expiring March 31) still matter.
NOW = "2026-03-09T09:00:00Z"
TODAY = parse_time(NOW).date()
YEAR = TODAY.year
#: Carried-over days can be used only for leave that ends on or before this date (policy R3).
CARRY_EXPIRY = date(YEAR, 3, 31)
COMPANY = "Brightwater Analytics"
DOMAIN = "brightwater.example.com"
#: A raise (or cut) above this share of the current salary needs an HR approver (policy R7).
HR_ONLY_CHANGE_PCT = 15

#: leave_type -> (name, yearly days, carry-over cap, paid)
LEAVE_TYPES: dict[str, tuple[str, int, int, int]] = {
    "vacation": ("Vacation", 20, 5, 1),
    "sick": ("Sick leave", 10, 0, 1),
    "parental": ("Parental leave", 60, 0, 1),
    "unpaid": ("Unpaid leave", 0, 0, 0),
}
RELATIONSHIPS = ("spouse", "partner", "parent", "sibling", "child", "friend", "other")

#: The company calendar (observed dates), 2025 and 2026.
HOLIDAYS: tuple[tuple[str, str], ...] = (
    ("2025-01-01", "New Year's Day"), ("2025-01-20", "Martin Luther King Jr. Day"),
    ("2025-02-17", "Presidents' Day"), ("2025-05-26", "Memorial Day"), ("2025-06-19", "Juneteenth"),
    ("2025-07-04", "Independence Day"), ("2025-09-01", "Labor Day"), ("2025-11-27", "Thanksgiving"),
    ("2025-11-28", "Day after Thanksgiving"), ("2025-12-24", "Christmas Eve"), ("2025-12-25", "Christmas Day"),
    ("2026-01-01", "New Year's Day"), ("2026-01-19", "Martin Luther King Jr. Day"),
    ("2026-02-16", "Presidents' Day"), ("2026-04-03", "Spring Company Day"), ("2026-05-25", "Memorial Day"),
    ("2026-06-19", "Juneteenth"), ("2026-07-03", "Independence Day (observed)"), ("2026-09-07", "Labor Day"),
    ("2026-11-26", "Thanksgiving"), ("2026-11-27", "Day after Thanksgiving"), ("2026-12-24", "Christmas Eve"),
    ("2026-12-25", "Christmas Day"),
)  # fmt: skip
HOLIDAY_DATES = frozenset(date.fromisoformat(d) for d, _ in HOLIDAYS)


def leave_days(start: date, end: date) -> int:
    """Business days from ``start`` to ``end`` inclusive, without weekends and company holidays (policy R4)."""
    from datetime import timedelta

    return business_days_between(start - timedelta(days=1), end, HOLIDAY_DATES)


def balance(allowance: int, carried: int, booked: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """What is left of one leave type this year, from its allowance, carry-over and booked requests.

    ``booked``: the year's pending and approved requests (``end_date``, ``business_days``). Carried-over days are
    spent first by leave that ends by March 31 and are gone after it (policy R3), so days booked later always
    come out of the allowance.
    """
    early = sum(int(r["business_days"]) for r in booked if date.fromisoformat(str(r["end_date"])) <= CARRY_EXPIRY)
    total = sum(int(r["business_days"]) for r in booked)
    carry_used = min(carried, early)
    return {
        "booked": total,
        "carry_over_left": carried - carry_used,
        "allowance_left": allowance - (total - carry_used),
    }


def available_for(bal: Mapping[str, int], end: date) -> int:
    """Days a request ending on ``end`` may take: carry-over counts only for leave ending by March 31."""
    return bal["allowance_left"] + (bal["carry_over_left"] if end <= CARRY_EXPIRY else 0)
