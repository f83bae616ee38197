"""The helpdesk world: a B2B SaaS company's support desk (customer organisations, contacts, tickets, billing).

Built from ``schema.sql``, the deterministic generator in ``data.py``, the tools in ``tools.py`` and the
rules in ``policy.md``, which the write tools enforce.
"""

from __future__ import annotations

from pathlib import Path

from toolworld.world import World

from .common import NOW
from .tools import TOOLS
from .tour import tour

_HERE = Path(__file__).parent


def _seed_data(db, rng):  # type: ignore[no-untyped-def]
    # Imported lazily so that listing tool schemas does not load the vocabularies.
    from .data import seed_data

    seed_data(db, rng)


world = World(
    "helpdesk",
    description=(
        "The support desk of Lumen Cloud, a B2B SaaS company: customer organisations on free, team, business or "
        "enterprise plans with SLAs, their contacts (admins, members, billing), support agents in three tiers, "
        "tickets with comments, tags, priorities and SLA due times, a knowledge base, macros, invoices and credits."
    ),
    policy=(_HERE / "policy.md").read_text(encoding="utf-8"),
    schema=(_HERE / "schema.sql").read_text(encoding="utf-8"),
    seed_data=_seed_data,
    tools=TOOLS,
    entities={
        "contact": "contacts.contact_id",
        "org": "organizations.org_id",
        "ticket": "tickets.ticket_id",
        "invoice": "invoices.invoice_id",
        "article": "kb_articles.article_id",
        "agent": "agents.agent_id",
        "email": None,
        "first_name": None,
        "last_name": None,
        "org_name": None,
    },
    # The contact writing in acts only as themselves: once identified, a write naming another contact is refused
    # (policy R6); the tools check that tickets and invoices are their organisation's.
    customer="contact",
    owners={},
    ownership_rule="R6",
    clock=NOW,
    tour=tour,
    synthesis="toolworld.worlds.helpdesk.kit:kit",
)

__all__ = ["world"]
