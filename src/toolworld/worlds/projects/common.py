"""Constants the projects world's data generator, tools and task kit share (one definition of each rule)."""

from __future__ import annotations

from toolworld.worlds.shared.clock import DAY, format_time, parse_time

#: The world's fixed clock (a Friday afternoon). Every date in the seed data is before it.
NOW = "2026-06-12T15:00:00Z"
TODAY = NOW[:10]
COMPANY_DOMAIN = "brightloop.example.com"

ISSUE_TYPES = ("bug", "story", "task", "epic")
STATUSES = ("backlog", "todo", "in_progress", "in_review", "done", "closed")
#: Statuses whose issue counts are capped per project (policy R2); epics are containers and never count.
WIP_STATUSES = ("in_progress", "in_review")
FINISHED = ("done", "closed")
PRIORITIES = ("lowest", "low", "medium", "high", "highest")
RESOLUTIONS = ("fixed", "done", "wont_do", "duplicate", "cannot_reproduce")
#: Most minutes one person may log for one day, all issues together (policy R7).
MAX_MINUTES_PER_DAY = 24 * 60

_FLOW = (
    ("backlog", "todo"), ("todo", "backlog"), ("todo", "in_progress"), ("in_progress", "todo"),
    ("in_progress", "in_review"), ("in_review", "in_progress"), ("in_review", "done"), ("done", "closed"),
    ("done", "todo"), ("closed", "todo"),
)  # fmt: skip
#: Allowed status changes per issue type (policy R1): the rows of the ``workflows`` table.
WORKFLOWS: dict[str, tuple[tuple[str, str], ...]] = {
    # Bugs can be closed straight from triage (cannot reproduce, won't fix).
    "bug": (*_FLOW, ("backlog", "closed"), ("todo", "closed")),
    "story": (*_FLOW, ("backlog", "closed")),
    # Tasks skip code review.
    "task": (*_FLOW, ("in_progress", "done"), ("backlog", "closed"), ("todo", "closed")),
    # Epics are tracked, not reviewed: they open, finish and can be reopened.
    "epic": (("backlog", "todo"), ("backlog", "in_progress"), ("todo", "in_progress"), ("in_progress", "done"),
             ("done", "closed"), ("done", "in_progress"), ("closed", "in_progress"), ("backlog", "closed")),
}  # fmt: skip
#: What an issue needs before entering a status (policy R3).
REQUIREMENTS: dict[str, tuple[tuple[str, str], ...]] = {
    "in_progress": (("assignee", "The issue must have an assignee (an active member of the project)."),),
    "done": (("resolution", "A resolution must be given (fixed, done, wont_do, cannot_reproduce)."),),
    "closed": (("resolution", "A resolution must be given unless the issue already has one."),),
}


def allowed(issue_type: str, status: str) -> list[str]:
    """Statuses an issue of ``issue_type`` in ``status`` may move to, in workflow order."""
    return [to for frm, to in WORKFLOWS[issue_type] if frm == status]


def is_reopen(old: str, new: str) -> bool:
    """A move out of a finished status back into work: like closing, only some people may do it (R4)."""
    return old in FINISHED and new not in FINISHED


def days_ago(days: int, seconds: int = 0) -> str:
    """The ISO time ``days`` whole days (plus ``seconds``) before the world's clock."""
    from datetime import timedelta

    return format_time(parse_time(NOW) - timedelta(seconds=days * DAY + seconds))


def day_offset(day: str, days: int) -> str:
    """The ``YYYY-MM-DD`` day ``days`` after ``day`` (before it when negative)."""
    from datetime import date, timedelta

    return (date.fromisoformat(day) + timedelta(days=days)).isoformat()
