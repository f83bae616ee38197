"""The crm world: a software company's sales CRM (reps and managers, territories, accounts, contacts, leads,
opportunities, activities, the price book and quotes).

Built from ``schema.sql``, the deterministic generator in ``data.py``, the tools in ``tools.py`` and the rules
in ``policy.md``, which the write tools enforce.
"""

from __future__ import annotations

from pathlib import Path

from toolworld.world import World

from .common import NOW
from .tools import TOOLS
from .tour import tour

_HERE = Path(__file__).parent


def _seed_data(db, rng):  # type: ignore[no-untyped-def]
    # Imported lazily so that listing tool schemas does not load the generator and its name lists.
    from .data import seed_data

    seed_data(db, rng)


world = World(
    "crm",
    description=(
        "A software company's B2B sales CRM: reps and managers in territories, accounts with contacts, leads "
        "(with duplicates to merge), opportunities through their stages, activities, a price book and quotes with "
        "discounts and expiry dates."
    ),
    policy=(_HERE / "policy.md").read_text(encoding="utf-8"),
    schema=(_HERE / "schema.sql").read_text(encoding="utf-8"),
    seed_data=_seed_data,
    tools=TOOLS,
    entities={
        "user": "users.user_id",
        "rep": "users.user_id",
        "territory": "territories.territory_id",
        "account": "accounts.account_id",
        "contact": "contacts.contact_id",
        "lead": "leads.lead_id",
        "opportunity": "opportunities.opportunity_id",
        "quote": "quotes.quote_id",
        "product": "products.product_id",
        "email": None,
    },
    # The person writing in acts as themselves only (every write's user_id must be theirs), and leads are
    # worked by their owner alone (policy R10); deals, whose owner's manager may also act, are checked by the
    # tools (policy R6).
    customer="user",
    owners={"lead": "leads.owner_id"},
    ownership_rule="R10",
    clock=NOW,
    tour=tour,
    synthesis="toolworld.worlds.crm.kit:kit",
)

__all__ = ["world"]
