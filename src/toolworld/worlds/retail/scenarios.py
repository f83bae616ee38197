"""Retail scenarios: what a real customer brings instead of a command.

A sampled draft names exact values ("swap the Jacket (size M) for the Jacket (size L) in order #W1234567, pay
the difference with my Visa ending in 4004"). Customers rarely talk like that: they have lost the order number
but remember what was in it, want "the same jacket one size up", "the card I paid with", say "if it hasn't
shipped, cancel it, otherwise I'll return it", or change their mind once the agent reads the change back.
This module turns drafts into such scenarios on the live seed state, and every description it hands the
phrasing resolves to exactly one value there (an ambiguous one is simply not used).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from toolworld.core.dates import spoken_date
from toolworld.tasks.model import Need
from toolworld.tasks.sampling import Draft, Plan, Target
from toolworld.world import Episode, Rng

from . import vocab
from .common import CANCEL_REASONS, CARD_KINDS

if TYPE_CHECKING:
    from .kit import RetailKit

# How often each scenario is used where it applies (tuned on the default mix: see docs/benchmarks.md).
P_UNKNOWN_ORDER = 0.85
P_UNKNOWN_EMAIL = 0.35
P_NEED_ITEM = 0.85
P_NEED_PAYMENT = 0.75
P_REVISION = 0.35
P_PIECEMEAL = 0.25
P_PIECEMEAL_FORGOT = 0.6
P_WITHHOLD_ADDRESS = 0.8

UNKNOWN_ORDER_LINES = (
    "I don't have that order's number at hand, sorry.",
    "I can't find the receipt for that one, so I don't know its order number.",
    "No idea what that order's number is, I'm afraid.",
    "I deleted the confirmation email for that order, so I don't have its number.",
)
UNKNOWN_EMAIL_LINES = (
    "I don't remember which email I used for the account.",
    "I have a few email addresses and I'm not sure which one is on the account.",
    "I'd rather not guess the email; I don't remember it.",
)
ITEMS_TOOLS = ("modify_pending_order_items", "exchange_delivered_order_items")
RETURN_OR_EXCHANGE = ("return_delivered_order_items", "exchange_delivered_order_items")
ADDRESS_TOOLS = ("modify_user_address", "modify_pending_order_address")


# -- looking things up on the seed state ------------------------------------------------------------------------


def user_orders(ep: Episode, user_id: Any) -> list[dict[str, Any]]:
    return ep.query("SELECT order_id, status, placed_at, delivered_at FROM orders WHERE user_id = ? ORDER BY order_id",
                    (user_id,))  # fmt: skip


def charged_methods(ep: Episode, order_id: str) -> list[str]:
    return [r["payment_method_id"] for r in ep.query(
        "SELECT DISTINCT payment_method_id FROM payments WHERE order_id = ? AND kind = 'charge' ORDER BY 1",
        (order_id,))]  # fmt: skip


def variant(ep: Episode, item_id: str) -> dict[str, Any]:
    row = ep.query("SELECT v.item_id, v.product_id, v.options, v.price_cents, v.stock, p.name FROM variants v "
                   "JOIN products p ON p.product_id = v.product_id WHERE v.item_id = ?", (item_id,))[0]  # fmt: skip
    return {**row, "options": json.loads(row["options"])}


def siblings(ep: Episode, product_id: str) -> list[dict[str, Any]]:
    rows = ep.query("SELECT item_id, options, price_cents, stock FROM variants WHERE product_id = ? ORDER BY item_id",
                    (product_id,))  # fmt: skip
    return [{**r, "options": json.loads(r["options"])} for r in rows]


def option_order(product: str, dim: str) -> list[str]:
    """The catalogue's order of one option's values (sizes run small to large), or [] if unknown."""
    for p in vocab.PRODUCTS:
        if p.name == product:
            for name, values in p.options:
                if name == dim:
                    return [v for v, _ in values]
    return []


# -- describing things so that exactly one matches -------------------------------------------------------------


def describe_order(ep: Episode, user_id: Any, order_id: str, rng: Rng) -> str | None:
    """How a customer who lost the order number points at the order, if that picks it out among theirs.

    Only by what the account's order list shows (``list_user_orders``: date and status), so that the gold can
    read the list and see why this order is the one meant: "my most recent order", "the order I placed on
    May 3", "the order that hasn't shipped yet".
    """
    orders = user_orders(ep, user_id)
    if len(orders) < 2:
        return None
    me = next(o for o in orders if o["order_id"] == order_id)
    options = []
    latest = max(o["placed_at"] for o in orders)
    if me["placed_at"] == latest and sum(o["placed_at"] == latest for o in orders) == 1:
        options += ["my most recent order", "the last order I placed"]
    day = me["placed_at"][:10]
    if sum(o["placed_at"][5:10] == day[5:] for o in orders) == 1:  # "May 3" says no year: unique without it
        spoken = spoken_date(day)
        options += [f"the order I placed on {spoken}", f"my order from {spoken}"]
    if me["status"] in STATUS_PHRASES and sum(o["status"] == me["status"] for o in orders) == 1:
        options += list(STATUS_PHRASES[me["status"]])
    return rng.choice(options) if options else None


def order_finder(user_id: Any) -> tuple[str, dict[str, Any]]:
    """The read that lists the account's orders with their dates and statuses (what ``describe_order`` uses)."""
    return "list_user_orders", {"user_id": user_id}


ADDRESS_FIELDS = ("line1", "line2", "city", "state", "zip")


def default_address(ep: Episode, user_id: Any) -> dict[str, str] | None:
    rows = ep.query("SELECT line1, line2, city, state, zip FROM addresses WHERE user_id = ? AND is_default = 1",
                    (user_id,))  # fmt: skip
    return {k: rows[0][k] for k in ADDRESS_FIELDS} if rows else None


def ship_address(ep: Episode, order_id: str) -> dict[str, str] | None:
    rows = ep.query("SELECT ship_line1 AS line1, ship_line2 AS line2, ship_city AS city, ship_state AS state, "
                    "ship_zip AS zip FROM orders WHERE order_id = ?", (order_id,))  # fmt: skip
    return {k: rows[0][k] for k in ADDRESS_FIELDS} if rows else None


def order_items(ep: Episode, order_id: str) -> list[str]:
    return [r["item_id"] for r in ep.query("SELECT item_id FROM order_items WHERE order_id = ? ORDER BY item_id",
                                           (order_id,))]  # fmt: skip


STATUS_PHRASES: dict[str, tuple[str, ...]] = {
    "pending": ("the order that hasn't shipped yet", "my order that's still pending"),
    "processed": ("the order that's being processed",),
    "shipped": ("the order that's on its way", "my order that's already shipped"),
}
def payment_phrases(kit: RetailKit, ep: Episode, user_id: Any) -> dict[str, str]:
    """Each of the user's payment methods as the user names it, kept only where the name is unique."""
    rows = ep.query("SELECT payment_method_id FROM payment_methods WHERE user_id = ? ORDER BY 1", (user_id,))
    named = {r["payment_method_id"]: kit.payment(ep, r["payment_method_id"]) for r in rows}
    counts: dict[str, int] = {}
    for phrase in named.values():
        counts[phrase] = counts.get(phrase, 0) + 1
    return {pm: phrase for pm, phrase in named.items() if counts[phrase] == 1}


def describe_new_item(ep: Episode, old_id: str, new_id: str, rng: Rng) -> str | None:
    """A relational description of the replacement ("the same one a size up", "the cheapest one in stock in
    blue") that picks out ``new_id`` among the product's variants, or None."""
    old, new = variant(ep, old_id), variant(ep, new_id)
    if old["product_id"] != new["product_id"]:
        return None
    changed = [k for k in new["options"] if new["options"][k] != old["options"].get(k)]
    out = []
    if len(changed) == 1 and "size" in changed[0]:
        order = option_order(new["name"], changed[0])
        a, b = old["options"][changed[0]], new["options"][changed[0]]
        if a in order and b in order and abs(order.index(a) - order.index(b)) == 1:
            way = "up" if order.index(b) > order.index(a) else "down"
            out.append(rng.choice((f"the same {new['name']} one size {way}", f"the same one, just one size {way}",
                                   f"the next size {'up' if way == 'up' else 'down'} of the same {new['name']}")))
    color = new["options"].get("color")
    if color is not None:
        # Among the other in-stock variants in that colour, the replacement is the one cheapest (and the only
        # one at that price); a value another option shares ("32") would not say which option is meant.
        pool = [v for v in siblings(ep, new["product_id"])
                if v["item_id"] != old_id and v["stock"] > 0 and color in v["options"].values()]
        cheapest = min(v["price_cents"] for v in pool)
        if new["price_cents"] == cheapest and sum(v["price_cents"] == cheapest for v in pool) == 1:
            out.append(rng.choice((f"the cheapest {color} {new['name']} you have in stock",
                                   f"whichever {color} one in stock is the cheapest")))
    return rng.choice(out) if out else None


# -- dressing a draft -------------------------------------------------------------------------------------------


def dress(kit: RetailKit, draft: Draft, ep: Episode, rng: Rng) -> None:
    """Scenario features for a draft, each where it applies and picks out exactly one value (see module doc)."""
    user = draft.principal
    single_write = draft.kind == "action" and len(draft.targets) == 1 and draft.contingency is None
    if single_write and rng.chance(P_REVISION):
        _revise(kit, draft, draft.targets[0], ep, rng)
    for target in draft.targets:
        args = target.arguments
        order = args.get("order_id")
        if order and rng.chance(P_UNKNOWN_ORDER) and not target.said and order not in draft.mentions:
            said = describe_order(ep, user, order, rng)
            if said is not None:
                target.slots["order"] = said
                if draft.contingency is not None:
                    draft.speech.contingency_slots["order"] = said
                draft.unknown.append(("order", order))
                if order_finder(user) not in draft.reads:
                    draft.reads.append(order_finder(user))
                draft.needs.append(Need(slot="order", phrase=said, value=order))
                draft.profile.unknown.setdefault("order_id", rng.choice(UNKNOWN_ORDER_LINES))
                draft.demand("unknown_fact")
        if draft.contingency is not None or target.said:
            continue  # a contingency and a change of mind are phrased by their own templates
        if target.tool in ITEMS_TOOLS and len(args.get("new_item_ids", [])) == 1 and rng.chance(P_NEED_ITEM):
            said = describe_new_item(ep, args["item_ids"][0], args["new_item_ids"][0], rng)
            if said is not None:
                _need(draft, target, "new_items", said, args["new_item_ids"])
        pm = args.get("payment_method_id")
        # "The card I paid with" asks for a lookup only when the user has other methods to choose from.
        if pm and order and target.tool != "modify_pending_order_payment" and charged_methods(ep, order) == [pm] \
                and len(payment_phrases(kit, ep, user)) > 1 and rng.chance(P_NEED_PAYMENT):  # fmt: skip
            card = _kind(ep, pm) in CARD_KINDS
            said = rng.choice(("the card I paid with", "the same card I paid with") if card else
                              ("the payment method I paid with", "whatever I paid with originally",
                               "the original payment method"))  # fmt: skip
            _need(draft, target, "payment", said, pm)
        if target.tool == "modify_pending_order_address" and \
                {k: args.get(k, "") for k in ADDRESS_FIELDS} == default_address(ep, user):  # fmt: skip
            said = rng.choice(("my default address on file", "the address on my account", "my home address, the "
                               "one saved on my account"))
            _need(draft, target, "address", said, {k: args.get(k, "") for k in ADDRESS_FIELDS})
            draft.reads.append(("get_user_details", {"user_id": user}))  # where the address on file is shown
        if target.tool == "modify_user_address":
            _shipped_address_need(draft, target, ep, rng)
        if target.tool == "modify_pending_order_payment" and rng.chance(P_NEED_PAYMENT):
            # "The other card" names one only when the account has exactly two cards, whatever they are called.
            cards = [r["payment_method_id"] for r in ep.query(
                "SELECT payment_method_id FROM payment_methods WHERE user_id = ? AND kind IN (?, ?) ORDER BY 1",
                (user, *CARD_KINDS))]  # fmt: skip
            current = charged_methods(ep, order) if order else []
            if len(cards) == 2 and args["payment_method_id"] in cards and current and current[0] in cards \
                    and current != [args["payment_method_id"]]:  # fmt: skip
                _need(draft, target, "payment", rng.choice(("my other card", "the other card on my account")),
                      args["payment_method_id"])
        items = args.get("item_ids")
        if target.tool == "return_delivered_order_items" and order and items and len(items) > 1 and \
                sorted(items) == order_items(ep, order) and rng.chance(P_NEED_ITEM):  # fmt: skip
            _need(draft, target, "items", rng.choice(("everything", "all of the items", "every item")), items)
    forgot_email = draft.identity.name == "find_user_by_name_zip" and rng.chance(P_UNKNOWN_EMAIL)
    if forgot_email:
        draft.profile.known.pop("email", None)
        draft.profile.unknown["email"] = rng.choice(UNKNOWN_EMAIL_LINES)
    # A forgotten email asks for reasoning only when the request does not already give the name and zip: the
    # agent asks for the email, hears that the user does not know it, and must find the account another way.
    if rng.chance(P_PIECEMEAL_FORGOT if forgot_email else P_PIECEMEAL):
        if forgot_email:
            draft.demand("unknown_fact")
        draft.profile.behaviour.append("piecemeal")
        draft.speech.identity = False
        draft.demand("piecemeal")
        # The new address too, when it is one the user types out (not a need such as "my address on file").
        for target in draft.targets:
            if target.tool in ADDRESS_TOOLS and "address" not in target.slots and not target.said and \
                    "new_address" not in draft.profile.known and rng.chance(P_WITHHOLD_ADDRESS):  # fmt: skip
                draft.profile.known["new_address"] = kit.slots(target.tool, ep, target.arguments, draft.profile)["address"]
                target.withheld["address"] = "new_address"


def _shipped_address_need(draft: Draft, target: Target, ep: Episode, rng: Rng) -> None:
    """"Make the address my last order went to my default": the account's new address named by an order."""
    user = draft.principal
    address = {k: target.arguments.get(k, "") for k in ADDRESS_FIELDS}
    sent = [o["order_id"] for o in user_orders(ep, user) if ship_address(ep, o["order_id"]) == address]
    if not sent:
        return
    oid = sent[0]  # any order shipped there picks out the same address: one the user can point at
    hidden = oid in {v for _, v in draft.unknown}  # a number the user does not have is never said
    where = describe_order(ep, user, oid, rng) if hidden or rng.chance(0.5) else None
    if hidden and where is None:
        return
    _need(draft, target, "address", f"the address {where or 'order ' + oid} was shipped to", address)
    if where is None:
        draft.mentions.append(oid)  # the order number is said: the user knows it
    elif order_finder(user) not in draft.reads:
        draft.reads.append(order_finder(user))  # which order "my order from May 3" is: the list shows dates
    draft.reads.append(("get_order_details", {"order_id": oid}))  # where that order was shipped


def _need(draft: Draft, target: Target, slot: str, said: str, value: Any) -> None:
    target.slots[slot] = said
    draft.needs.append(Need(slot=slot, phrase=said, value=value))
    draft.demand("need")


def _kind(ep: Episode, pm: str) -> str:
    return str(ep.query("SELECT kind FROM payment_methods WHERE payment_method_id = ?", (pm,))[0]["kind"])


def _revise(kit: RetailKit, draft: Draft, target: Target, ep: Episode, rng: Rng) -> None:
    """A change of mind: the request asks for another valid call of the same tool; the user switches to the
    gold's when the agent reads the change back."""
    args = target.arguments
    first: dict[str, Any] | None = None
    if target.tool in ("modify_pending_order_address", "modify_user_address"):
        first = {**args, **kit.random_address(rng)}
    elif target.tool == "cancel_pending_order":
        first = {**args, "reason": next(r for r in CANCEL_REASONS if r != args["reason"])}
    elif target.tool in ITEMS_TOOLS and len(args["new_item_ids"]) == 1:
        old = variant(ep, args["item_ids"][0])
        pool = [v["item_id"] for v in siblings(ep, old["product_id"])
                if v["item_id"] not in (args["item_ids"][0], args["new_item_ids"][0]) and v["stock"] > 0]
        if pool:
            first = {**args, "new_item_ids": [rng.choice(pool)]}
    elif target.tool == "return_delivered_order_items":
        others = [pm for pm in payment_phrases(kit, ep, draft.principal) if pm != args["payment_method_id"]]
        if others:
            first = {**args, "payment_method_id": rng.choice(others)}
    if first is None or first == args or not ep.probe(target.tool, first).ok:
        return
    target.said = first
    draft.revision = [(target.tool, first)]
    draft.speech.revision = target.tool
    draft.speech.revision_slots = kit.slots(target.tool, ep, args, draft.profile)
    draft.demand("change_of_mind")


# -- contingencies ----------------------------------------------------------------------------------------------


def contingencies(kit: RetailKit, ep: Episode, user_id: Any, rng: Rng) -> list[Plan]:
    """Conditional requests on this user's orders: cancel-or-return, and swap-with-a-fallback."""
    plans: list[Plan] = []
    phrases = payment_phrases(kit, ep, user_id)
    orders = [o for o in user_orders(ep, user_id) if o["status"] in ("pending", "delivered")]
    rng.shuffle(orders)
    for o in orders[:4]:
        oid = o["order_id"]
        items = [r["item_id"] for r in ep.query("SELECT item_id FROM order_items WHERE order_id = ? AND status = "
                                                "'ordered' ORDER BY item_id", (oid,))]  # fmt: skip
        paid = [pm for pm in charged_methods(ep, oid) if pm in phrases]
        if not items or not paid:
            continue
        pm = paid[0]
        pending = o["status"] == "pending"
        if rng.chance(0.5):
            cancel = {"order_id": oid, "reason": rng.choice(CANCEL_REASONS)}
            ret = {"order_id": oid, "item_ids": items, "payment_method_id": pm}
            slots = {**kit.slots("return_delivered_order_items", ep, ret, None),  # type: ignore[arg-type]
                     **kit.slots("cancel_pending_order", ep, cancel, None)}  # type: ignore[arg-type]
            plans.append(Plan("cancel_or_return", "the order has not shipped yet", pending,
                              ("cancel_pending_order", cancel), ("return_delivered_order_items", ret), slots))
            continue
        tool = "modify_pending_order_items" if pending else "exchange_delivered_order_items"
        item = rng.choice(items)
        old = variant(ep, item)
        pool = [v for v in siblings(ep, old["product_id"]) if v["item_id"] != item]
        in_stock = [v for v in pool if v["stock"] > 0]
        if len(pool) < 2 or not in_stock:
            continue
        second = rng.choice(in_stock)
        rest = [v for v in pool if v["item_id"] != second["item_id"]]
        out_of_stock = [v for v in rest if v["stock"] == 0]
        first = rng.choice(out_of_stock) if out_of_stock and rng.chance(0.5) else rng.choice(rest)
        then = {"order_id": oid, "item_ids": [item], "new_item_ids": [first["item_id"]], "payment_method_id": pm}
        otherwise = {**then, "new_item_ids": [second["item_id"]]}
        slots = {**kit.slots(tool, ep, then, None),  # type: ignore[arg-type]
                 "first_choice": kit.item(ep, first["item_id"], "the "),
                 "second_choice": kit.item(ep, second["item_id"], "the ")}
        plans.append(Plan("swap_fallback", f"{slots['first_choice']} is in stock", first["stock"] > 0,
                          (tool, then), (tool, otherwise), slots))
    return plans


# -- alternatives to a refusal ----------------------------------------------------------------------------------


def alternatives(target: Target, ep: Episode, user_id: Any) -> list[tuple[str, list[tuple[str, dict[str, Any]]]]]:
    """Compliant ways to serve a refused request that the policy allows (the generator executes each)."""
    args = dict(target.arguments)
    order = args.get("order_id")
    if not order:
        return []
    status = ep.query("SELECT status FROM orders WHERE order_id = ?", (order,))
    status = status[0]["status"] if status else None
    out: list[tuple[str, list[tuple[str, dict[str, Any]]]]] = []
    if target.tool == "exchange_delivered_order_items" and status == "pending":
        out.append(("modify the pending order's items instead", [("modify_pending_order_items", args)]))
    if target.tool == "modify_pending_order_items" and status == "delivered":
        out.append(("exchange the delivered items instead", [("exchange_delivered_order_items", args)]))
    if target.tool in RETURN_OR_EXCHANGE and target.rule == "R10":
        summary = f"The customer wants another {'return' if 'return' in target.tool else 'exchange'} on order {order}."
        out.append(("transfer to a human agent (a second return or exchange)",
                    [("transfer_to_human_agent", {"summary": summary, "user_id": user_id, "order_id": order})]))
    return out
