"""Constants and helpers the crm world's data generator, tools and task kit share (one definition of each rule)."""

from __future__ import annotations

from toolworld.worlds.shared.clock import DAY, after, days_before, format_time, parse_time  # noqa: F401 - re-exported
from toolworld.worlds.shared.money import dollars, percent_of  # noqa: F401 - re-exported

#: The world's fixed clock (a Monday). Every date in the seed data is relative to it; date rules are measured from it.
NOW = "2026-03-16T09:00:00Z"
TODAY = NOW[:10]
#: A quote can be sent or accepted for this many days after it was created (policy R8).
QUOTE_VALID_DAYS = 30
#: Open stages in the order a deal moves through them (policy R4), then the two closed stages.
OPEN_STAGES = ("prospecting", "qualification", "proposal", "negotiation")
CLOSED_STAGES = ("closed_won", "closed_lost")
STAGES = OPEN_STAGES + CLOSED_STAGES
#: The forecast probability each stage sets.
STAGE_PROBABILITY = {"prospecting": 10, "qualification": 25, "proposal": 50, "negotiation": 75, "closed_won": 100,
                     "closed_lost": 0}  # fmt: skip
#: The highest discount (percent) each role may give on a quote line (policy R5); admins have no limit.
DISCOUNT_LIMITS = {"rep": 10, "manager": 25, "admin": 100}
LEAD_SOURCES = ("web", "referral", "event", "partner", "outbound", "import")
#: Statuses a rep moves a lead between by hand; 'converted' and 'merged' are set by convert_lead and merge_leads.
LEAD_WORK_STATUSES = ("new", "working", "qualified", "disqualified")
ACTIVITY_KINDS = ("call", "email", "meeting", "note")
#: Kinds of activity that reach the contact, which a do-not-contact flag forbids (policy R9).
OUTREACH_KINDS = ("call", "email")
LOSS_REASONS = ("price", "lost to competitor", "no budget", "no decision", "timing")

#: Territories and the states each covers (every state in exactly one).
TERRITORIES: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("T-WEST", "West", ("AK", "AZ", "CA", "CO", "HI", "ID", "MT", "NM", "NV", "OR", "UT", "WA", "WY")),
    ("T-CENTRAL", "Central", ("IA", "IL", "IN", "KS", "MI", "MN", "MO", "ND", "NE", "OH", "SD", "WI")),
    ("T-SOUTH", "South", ("AL", "AR", "FL", "GA", "KY", "LA", "MS", "OK", "TN", "TX")),
    ("T-EAST", "East", ("CT", "DC", "DE", "MA", "MD", "ME", "NC", "NH", "NJ", "NY", "PA", "RI", "SC", "VA", "VT",
                        "WV")),
)  # fmt: skip


def norm_email(value: str) -> str:
    """The form in which two e-mail addresses are the same person's (policy R1): surrounding spaces trimmed and
    lower case. Stored addresses are compared as ``LOWER(TRIM(email))`` so both sides go through the same steps."""
    return value.strip().lower()


def norm_company(value: str) -> str:
    """The form in which a lead's company names an existing account (policy R2): case and spacing ignored."""
    return " ".join(value.lower().split())


def days_before_now(days: float) -> str:
    return days_before(NOW, days)
