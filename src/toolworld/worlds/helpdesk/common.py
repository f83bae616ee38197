"""Constants the helpdesk world's data generator, tools and task kit share (one definition of each rule)."""

from __future__ import annotations

from toolworld.worlds.shared.clock import after, before, format_time, parse_time  # noqa: F401 - re-exported
from toolworld.worlds.shared.money import cents, dollars  # noqa: F401 - re-exported

#: The world's fixed clock. Every date in the seed data is before it; SLA and reopen windows are measured from it.
NOW = "2026-03-10T15:00:00Z"
PLANS = ("free", "team", "business", "enterprise")
PRIORITIES = ("low", "normal", "high", "urgent")
#: Plans whose tickets may be urgent without an outage tag (policy R1).
URGENT_PLANS = ("business", "enterprise")
#: (plan, priority) -> (first-response hours, resolution hours): the SLA a ticket's due times are set from.
SLA_HOURS: dict[tuple[str, str], tuple[int, int]] = {
    ("free", "low"): (72, 240), ("free", "normal"): (48, 168), ("free", "high"): (24, 120),
    ("free", "urgent"): (24, 120),
    ("team", "low"): (24, 120), ("team", "normal"): (12, 72), ("team", "high"): (8, 48), ("team", "urgent"): (4, 24),
    ("business", "low"): (12, 72), ("business", "normal"): (8, 48), ("business", "high"): (4, 24),
    ("business", "urgent"): (1, 8),
    ("enterprise", "low"): (8, 48), ("enterprise", "normal"): (4, 24), ("enterprise", "high"): (2, 12),
    ("enterprise", "urgent"): (1, 4),
}  # fmt: skip
PRODUCT_AREAS = ("billing", "sso", "api", "integrations", "reporting", "data-import", "mobile-app", "notifications",
                 "permissions", "performance")  # fmt: skip
#: How customers name each product area (the task kit speaks with these; the agent maps them to the enum).
AREA_WORDS: dict[str, str] = {
    "billing": "billing", "sso": "single sign-on (SSO)", "api": "the API", "integrations": "integrations",
    "reporting": "reporting and dashboards", "data-import": "data import", "mobile-app": "the mobile app",
    "notifications": "notifications", "permissions": "user permissions", "performance": "performance",
}  # fmt: skip
OPEN_STATUSES = ("new", "open", "pending", "on_hold")
#: A solved ticket can be reopened for this many days; after that (or once closed) a follow-up is opened (R3).
REOPEN_DAYS = 14
#: Solved tickets close automatically this many days after solving.
AUTO_CLOSE_DAYS = 20
#: Credits above this need a manager's approval, given only through a human agent (policy R5).
CREDIT_APPROVAL_CENTS = 50_000
CREDIT_REASONS = ("service outage", "billing error", "unused seats", "goodwill")
OUTAGE_TAG = "outage"


def sla_due(created_at: str, plan: str, priority: str) -> tuple[str, str]:
    """(first_response_due, resolution_due) of a ticket created at ``created_at`` under ``plan``'s SLA."""
    first, resolve = SLA_HOURS[(plan, priority)]
    return after(created_at, first * 3600), after(created_at, resolve * 3600)
