"""Time for worlds with a fixed clock: ISO timestamps, ages before the clock, business days.

Every world fixes its "now" (a constant), dates its seed data before it and measures its date rules from it, so
a task's answer never depends on when it runs. Times are whole seconds in UTC, written ``YYYY-MM-DDTHH:MM:SSZ``.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

MINUTE, HOUR, DAY = 60, 3600, 86400


def parse_time(value: str) -> datetime:
    """An ISO timestamp (``2026-05-15T12:00:00Z``) as an aware UTC datetime."""
    return datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)


def format_time(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def before(now: str, seconds: int) -> str:
    """The ISO time ``seconds`` whole seconds before ``now`` (integers keep it exact)."""
    return format_time(parse_time(now) - timedelta(seconds=seconds))


def after(now: str, seconds: int) -> str:
    """The ISO time ``seconds`` whole seconds after ``now``."""
    return format_time(parse_time(now) + timedelta(seconds=seconds))


def days_before(now: str, days: float) -> str:
    return format_time(parse_time(now) - timedelta(days=days))


def is_business_day(day: date) -> bool:
    """Monday to Friday (worlds that need holidays pass them to the functions below)."""
    return day.weekday() < 5


def add_business_days(start: date, days: int, holidays: frozenset[date] = frozenset()) -> date:
    """The date ``days`` business days after ``start`` (before it when negative), skipping weekends and
    ``holidays``: due dates, SLA deadlines and notice periods."""
    step = 1 if days >= 0 else -1
    day, left = start, abs(days)
    while left:
        day += timedelta(days=step)
        if is_business_day(day) and day not in holidays:
            left -= 1
    return day


def business_days_between(start: date, end: date, holidays: frozenset[date] = frozenset()) -> int:
    """Business days in ``(start, end]`` (negative when ``end`` is before ``start``): leave requests count these."""
    if end < start:
        return -business_days_between(end, start, holidays)
    n, day = 0, start
    while day < end:
        day += timedelta(days=1)
        if is_business_day(day) and day not in holidays:
            n += 1
    return n
