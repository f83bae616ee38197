"""The retail world: an online store's support desk (customers, catalogue, orders, payments, returns).

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
    # Imported lazily so that listing tool schemas does not load the catalogue and name lists.
    from .data import seed_data

    seed_data(db, rng)


world = World(
    "retail",
    description=(
        "An online store's customer-support desk: customers with addresses and payment methods (cards, gift "
        "cards, PayPal), a catalogue of products with variants and stock, and orders through their whole life "
        "(pending, shipped, delivered, cancelled, returned, exchanged) with payments and refunds."
    ),
    policy=(_HERE / "policy.md").read_text(encoding="utf-8"),
    schema=(_HERE / "schema.sql").read_text(encoding="utf-8"),
    seed_data=_seed_data,
    tools=TOOLS,
    entities={
        "user": "users.user_id",
        "order": "orders.order_id",
        "product": "products.product_id",
        "item": "variants.item_id",
        "payment_method": "payment_methods.payment_method_id",
        "address": "addresses.address_id",
        "ticket": "tickets.ticket_id",
        "email": None,
        "first_name": None,
        "last_name": None,
        "zip": None,
    },
    # A customer's orders, payment methods and addresses are theirs alone: once the agent has identified a
    # customer, write tools refuse those of anyone else (policy R13).
    customer="user",
    owners={
        "order": "orders.user_id",
        "payment_method": "payment_methods.user_id",
        "address": "addresses.user_id",
    },
    ownership_rule="R13",
    clock=NOW,
    tour=tour,
    synthesis="toolworld.worlds.retail.kit:kit",
)

__all__ = ["world"]
