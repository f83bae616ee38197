"""Every numbered rule of the retail policy.md has a test here proving that the tools enforce it.

Test names carry the rule id (``test_R3_...``); ``test_every_policy_rule_is_tested`` fails when a rule is
added to policy.md without a test.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from toolworld import Episode
from toolworld.worlds.retail.common import NOW, RETURN_WINDOW_DAYS, days_before_now
from world_kit import assert_every_rule_tested, ok, one, violation

RECENT = days_before_now(RETURN_WINDOW_DAYS - 1)  # delivered after this: inside the return window
EXPIRED = days_before_now(RETURN_WINDOW_DAYS + 1)  # delivered before this: outside it


@pytest.fixture
def ep(world) -> Episode:
    with world.episode(0) as e:
        yield e


def order_with_status(ep: Episode, status: str, extra: str = "", params: tuple[Any, ...] = ()) -> str:
    return one(ep, f"SELECT order_id FROM orders WHERE status = ? {extra} ORDER BY order_id", (status, *params))["order_id"]


def charge_method(ep: Episode, order_id: str) -> str:
    return one(ep, "SELECT payment_method_id FROM payments WHERE order_id = ? AND kind = 'charge' ORDER BY payment_id",
               (order_id,))["payment_method_id"]  # fmt: skip


def swappable(ep: Episode, order_id: str) -> tuple[str, str, int]:
    """(item in the order, another in-stock variant of the same product, quantity)."""
    row = one(
        ep,
        "SELECT oi.item_id, v.item_id AS new_id, oi.quantity FROM order_items oi JOIN variants v "
        "ON v.product_id = oi.product_id AND v.item_id != oi.item_id AND v.stock >= oi.quantity "
        "WHERE oi.order_id = ? AND oi.status = 'ordered' AND v.item_id NOT IN "
        "(SELECT item_id FROM order_items WHERE order_id = ?) ORDER BY oi.item_id, v.item_id",
        (order_id, order_id),
    )
    return row["item_id"], row["new_id"], row["quantity"]


def pending_with_swap(ep: Episode) -> str:
    return one(
        ep,
        "SELECT o.order_id FROM orders o JOIN order_items oi ON oi.order_id = o.order_id JOIN variants v "
        "ON v.product_id = oi.product_id AND v.item_id != oi.item_id AND v.stock >= oi.quantity "
        "WHERE o.status = 'pending' AND o.items_modified = 0 ORDER BY o.order_id",
    )["order_id"]


def recent_delivered(ep: Episode) -> str:
    return order_with_status(ep, "delivered", "AND delivered_at >= ?", (RECENT,))


def stock(ep: Episode, item_id: str) -> int:
    return one(ep, "SELECT stock FROM variants WHERE item_id = ?", (item_id,))["stock"]


def balance(ep: Episode, pm: str) -> int:
    return one(ep, "SELECT balance_cents FROM payment_methods WHERE payment_method_id = ?", (pm,))["balance_cents"]


def user_of(ep: Episode, order_id: str) -> str:
    return one(ep, "SELECT user_id FROM orders WHERE order_id = ?", (order_id,))["user_id"]


def gift_card_for(ep: Episode, order_id: str, min_cents: int = 0, max_cents: int | None = None) -> str | None:
    sql = ("SELECT payment_method_id FROM payment_methods WHERE user_id = ? AND kind = 'gift_card' "
           "AND status = 'active' AND balance_cents >= ?")  # fmt: skip
    params: list[Any] = [user_of(ep, order_id), min_cents]
    if max_cents is not None:
        sql += " AND balance_cents < ?"
        params.append(max_cents)
    rows = ep.query(sql + " ORDER BY payment_method_id", params)
    return rows[0]["payment_method_id"] if rows else None


def order_total_cents(ep: Episode, order_id: str) -> int:
    return one(ep, "SELECT SUM(unit_price_cents * quantity) + (SELECT shipping_cents FROM orders WHERE order_id = ?) "
               "AS t FROM order_items WHERE order_id = ?", (order_id, order_id))["t"]  # fmt: skip


def pending_with_gift_card(ep: Episode, enough: bool) -> tuple[str, str]:
    """A pending order and an active gift card of its customer whose balance does (or does not) cover it."""
    for row in ep.query("SELECT order_id FROM orders WHERE status = 'pending' ORDER BY order_id"):
        total = order_total_cents(ep, row["order_id"])
        gc = gift_card_for(ep, row["order_id"], total) if enough else gift_card_for(ep, row["order_id"], 0, total)
        if gc is not None and gc != charge_method(ep, row["order_id"]):
            return row["order_id"], gc
    pytest.fail("seed data has no pending order with a suitable gift card")


# -- R1 ------------------------------------------------------------------------------------------------------


def test_R1_cancel_pending_refunds_and_restocks(ep):
    oid = order_with_status(ep, "pending")
    items = ep.query("SELECT item_id, quantity FROM order_items WHERE order_id = ?", (oid,))
    before_stock = {i["item_id"]: stock(ep, i["item_id"]) for i in items}
    out = ok(ep, "cancel_pending_order", {"order_id": oid, "reason": "ordered by mistake"})
    assert out["status"] == "cancelled" and out["cancel_reason"] == "ordered by mistake"
    assert all(i["status"] == "cancelled" for i in out["items"])
    for i in items:
        assert stock(ep, i["item_id"]) == before_stock[i["item_id"]] + i["quantity"]
    refunds = [p for p in out["payments"] if p["kind"] == "refund"]
    assert round(sum(p["amount"] for p in refunds), 2) == out["total"]
    assert {p["payment_method_id"] for p in refunds} == {charge_method(ep, oid)}
    assert ep.changes().summary()["orders"]["updated"] == 1


@pytest.mark.parametrize("status", ["processed", "shipped", "delivered", "cancelled", "returned"])
def test_R1_cancel_refused_unless_pending(ep, status):
    oid = order_with_status(ep, status)
    msg = violation(ep, "cancel_pending_order", {"order_id": oid, "reason": "no longer needed"}, "R1")
    assert status in msg


def test_R1_cancel_reason_must_be_listed(ep):
    oid = order_with_status(ep, "pending")
    msg = violation(ep, "cancel_pending_order", {"order_id": oid, "reason": "too slow"}, None, "invalid_arguments")
    assert "reason" in msg


# -- R2 ------------------------------------------------------------------------------------------------------


def test_R2_card_refund_is_pending_gift_card_refund_is_immediate(ep):
    card_order = one(ep, "SELECT o.order_id FROM orders o JOIN payments p ON p.order_id = o.order_id JOIN payment_methods m "
                     "ON m.payment_method_id = p.payment_method_id WHERE o.status = 'pending' AND m.kind != 'gift_card' "
                     "ORDER BY o.order_id")["order_id"]  # fmt: skip
    out = ok(ep, "cancel_pending_order", {"order_id": card_order, "reason": "no longer needed"})
    assert [p["status"] for p in out["payments"] if p["kind"] == "refund"] == ["pending"]

    oid, gc = pending_with_gift_card(ep, enough=True)
    start = balance(ep, gc)
    total = order_total_cents(ep, oid)
    ok(ep, "modify_pending_order_payment", {"order_id": oid, "payment_method_id": gc})
    assert balance(ep, gc) == start - total
    out = ok(ep, "cancel_pending_order", {"order_id": oid, "reason": "no longer needed"})
    gift_refund = [p for p in out["payments"] if p["kind"] == "refund" and p["payment_method_id"] == gc]
    assert [p["status"] for p in gift_refund] == ["completed"]
    assert balance(ep, gc) == start  # credited at once


# -- R3 ------------------------------------------------------------------------------------------------------


def test_R3_modify_items_swaps_variant_once(ep):
    oid = pending_with_swap(ep)
    old, new, qty = swappable(ep, oid)
    pm = charge_method(ep, oid)
    old_stock, new_stock = stock(ep, old), stock(ep, new)
    out = ok(ep, "modify_pending_order_items",
             {"order_id": oid, "item_ids": [old], "new_item_ids": [new], "payment_method_id": pm})  # fmt: skip
    ids = [i["item_id"] for i in out["items"]]
    assert new in ids and old not in ids and out["items_modified"] is True
    assert stock(ep, old) == old_stock + qty and stock(ep, new) == new_stock - qty
    old2, new2, _ = swappable(ep, oid)
    msg = violation(ep, "modify_pending_order_items",
                    {"order_id": oid, "item_ids": [old2], "new_item_ids": [new2], "payment_method_id": pm}, "R3")  # fmt: skip
    assert "only once" in msg


def test_R3_modify_items_same_product_only(ep):
    oid = pending_with_swap(ep)
    old, _, _ = swappable(ep, oid)
    other = one(ep, "SELECT item_id FROM variants WHERE product_id != (SELECT product_id FROM variants WHERE item_id = ?) "
                "AND stock > 5 ORDER BY item_id", (old,))["item_id"]  # fmt: skip
    violation(ep, "modify_pending_order_items",
              {"order_id": oid, "item_ids": [old], "new_item_ids": [other], "payment_method_id": charge_method(ep, oid)},
              "R3")  # fmt: skip


def test_R3_modify_items_replacement_must_be_in_stock(ep):
    row = one(ep, "SELECT o.order_id, oi.item_id, v.item_id AS new_id FROM orders o JOIN order_items oi ON oi.order_id = o.order_id "
              "JOIN variants v ON v.product_id = oi.product_id AND v.item_id != oi.item_id AND v.stock = 0 "
              "WHERE o.status = 'pending' ORDER BY o.order_id")  # fmt: skip
    msg = violation(ep, "modify_pending_order_items",
                    {"order_id": row["order_id"], "item_ids": [row["item_id"]], "new_item_ids": [row["new_id"]],
                     "payment_method_id": charge_method(ep, row["order_id"])}, "R3")  # fmt: skip
    assert "out of stock" in msg


def test_R3_modify_items_only_pending_and_items_in_order(ep):
    oid = order_with_status(ep, "processed")
    old, new, _ = swappable(ep, oid)
    violation(ep, "modify_pending_order_items",
              {"order_id": oid, "item_ids": [old], "new_item_ids": [new], "payment_method_id": charge_method(ep, oid)},
              "R3")  # fmt: skip
    pending = pending_with_swap(ep)
    foreign = one(ep, "SELECT item_id FROM variants WHERE item_id NOT IN (SELECT item_id FROM order_items WHERE order_id = ?) "
                  "ORDER BY item_id", (pending,))["item_id"]  # fmt: skip
    msg = violation(ep, "modify_pending_order_items",
                    {"order_id": pending, "item_ids": [foreign], "new_item_ids": [foreign],
                     "payment_method_id": charge_method(ep, pending)}, None, "not_found")  # fmt: skip
    assert "is not in order" in msg


# -- R4 ------------------------------------------------------------------------------------------------------


def test_R4_price_difference_charged_or_refunded(ep):
    for row in ep.query(
        "SELECT o.order_id, oi.item_id, v.item_id AS new_id, (v.price_cents - oi.unit_price_cents) * oi.quantity AS diff "
        "FROM orders o JOIN order_items oi ON oi.order_id = o.order_id JOIN variants v ON v.product_id = oi.product_id "
        "AND v.item_id != oi.item_id AND v.stock >= oi.quantity WHERE o.status = 'pending' AND o.items_modified = 0 "
        "AND v.price_cents != oi.unit_price_cents AND v.item_id NOT IN (SELECT item_id FROM order_items x "
        "WHERE x.order_id = o.order_id) ORDER BY o.order_id, oi.item_id, v.item_id"
    ):
        pm = one(ep, "SELECT m.payment_method_id FROM payment_methods m WHERE m.user_id = ? AND m.status = 'active' "
                 "AND m.kind != 'gift_card' ORDER BY m.payment_method_id", (user_of(ep, row["order_id"]),))  # fmt: skip
        out = ok(ep, "modify_pending_order_items", {"order_id": row["order_id"], "item_ids": [row["item_id"]],
                                                     "new_item_ids": [row["new_id"]], "payment_method_id": pm["payment_method_id"]})  # fmt: skip
        last = out["payments"][-1]
        assert last["kind"] == ("charge" if row["diff"] > 0 else "refund")
        assert round(last["amount"] * 100) == abs(row["diff"])
        assert last["payment_method_id"] == pm["payment_method_id"]
        return
    pytest.fail("no pending order with a price-changing swap")


def test_R4_gift_card_must_cover_the_difference(ep):
    for row in ep.query(
        "SELECT o.order_id, oi.item_id, v.item_id AS new_id, (v.price_cents - oi.unit_price_cents) * oi.quantity AS diff "
        "FROM orders o JOIN order_items oi ON oi.order_id = o.order_id JOIN variants v ON v.product_id = oi.product_id "
        "AND v.item_id != oi.item_id AND v.stock >= oi.quantity WHERE o.status = 'pending' AND o.items_modified = 0 "
        "AND v.price_cents > oi.unit_price_cents AND v.item_id NOT IN (SELECT item_id FROM order_items x "
        "WHERE x.order_id = o.order_id) ORDER BY o.order_id"
    ):
        gc = gift_card_for(ep, row["order_id"], 0, row["diff"])
        if gc is None:
            continue
        msg = violation(ep, "modify_pending_order_items", {"order_id": row["order_id"], "item_ids": [row["item_id"]],
                                                           "new_item_ids": [row["new_id"]], "payment_method_id": gc}, "R4")  # fmt: skip
        assert "balance" in msg
        return
    pytest.fail("no pending order whose customer has a gift card too small for a price increase")


# -- R5 ------------------------------------------------------------------------------------------------------

NEW_ADDRESS = {"line1": "221 Baker Street", "line2": "Apt 2", "city": "Portland", "state": "or", "zip": "97205"}


def test_R5_address_change_while_pending(ep):
    oid = order_with_status(ep, "pending")
    out = ok(ep, "modify_pending_order_address", {"order_id": oid, **NEW_ADDRESS})
    assert out["shipping_address"]["state"] == "OR" and out["shipping_address"]["line1"] == "221 Baker Street"
    violation(ep, "modify_pending_order_address", {"order_id": oid, **NEW_ADDRESS}, None, "conflict")


@pytest.mark.parametrize("status", ["processed", "shipped", "delivered"])
def test_R5_address_change_refused_after_processing(ep, status):
    violation(ep, "modify_pending_order_address", {"order_id": order_with_status(ep, status), **NEW_ADDRESS}, "R5")


@pytest.mark.parametrize("bad", [{"state": "XX"}, {"zip": "9720"}, {"zip": "ABCDE"}, {"line1": "  "}, {"city": ""}])
def test_R5_address_must_be_complete_and_valid(ep, bad):
    oid = order_with_status(ep, "pending")
    violation(ep, "modify_pending_order_address", {"order_id": oid, **NEW_ADDRESS, **bad}, "R5", "invalid_arguments")


# -- R6 ------------------------------------------------------------------------------------------------------


def test_R6_payment_change_refunds_old_and_charges_new(ep):
    oid, gc = pending_with_gift_card(ep, enough=True)
    old_pm = charge_method(ep, oid)
    total = order_total_cents(ep, oid)
    out = ok(ep, "modify_pending_order_payment", {"order_id": oid, "payment_method_id": gc})
    new_rows = out["payments"][-2:]
    assert [(p["payment_method_id"], p["kind"]) for p in new_rows] == [(old_pm, "refund"), (gc, "charge")]
    assert round(new_rows[1]["amount"] * 100) == total
    violation(ep, "modify_pending_order_payment", {"order_id": oid, "payment_method_id": gc}, None, "conflict")


def test_R6_payment_change_rules(ep):
    oid, small_gc = pending_with_gift_card(ep, enough=False)
    msg = violation(ep, "modify_pending_order_payment", {"order_id": oid, "payment_method_id": small_gc}, "R6")
    assert "balance" in msg  # refunds written before the failed charge were rolled back (state unchanged)
    other = one(ep, "SELECT payment_method_id FROM payment_methods WHERE user_id != ? AND status = 'active' "
                "ORDER BY payment_method_id", (user_of(ep, oid),))["payment_method_id"]  # fmt: skip
    msg = violation(ep, "modify_pending_order_payment", {"order_id": oid, "payment_method_id": other}, None)
    assert "does not belong" in msg
    violation(ep, "modify_pending_order_payment",
              {"order_id": order_with_status(ep, "delivered"), "payment_method_id": other}, "R6")  # fmt: skip


# -- R7 ------------------------------------------------------------------------------------------------------


def test_R7_expired_method_cannot_be_used(ep):
    row = one(ep, "SELECT o.order_id, m.payment_method_id FROM orders o JOIN payment_methods m ON m.user_id = o.user_id "
              "WHERE o.status = 'pending' AND m.status = 'expired' ORDER BY o.order_id")  # fmt: skip
    violation(ep, "modify_pending_order_payment", {"order_id": row["order_id"], "payment_method_id": row["payment_method_id"]}, "R7")
    row = one(ep, "SELECT o.order_id, m.payment_method_id, oi.item_id FROM orders o JOIN payment_methods m ON m.user_id = o.user_id "
              "JOIN order_items oi ON oi.order_id = o.order_id WHERE o.status = 'delivered' AND o.delivered_at >= ? "
              "AND m.status = 'expired' ORDER BY o.order_id", (RECENT,))  # fmt: skip
    violation(ep, "return_delivered_order_items", {"order_id": row["order_id"], "item_ids": [row["item_id"]],
                                                   "payment_method_id": row["payment_method_id"]}, "R7")  # fmt: skip


# -- R8 ------------------------------------------------------------------------------------------------------


def test_R8_return_within_window_refunds_pending(ep):
    oid = recent_delivered(ep)
    item = one(ep, "SELECT item_id, unit_price_cents * quantity AS value FROM order_items WHERE order_id = ? ORDER BY item_id", (oid,))
    pm = charge_method(ep, oid)
    out = ok(ep, "return_delivered_order_items", {"order_id": oid, "item_ids": [item["item_id"]], "payment_method_id": pm})
    assert out["status"] == "return requested"
    assert [i["status"] for i in out["items"] if i["item_id"] == item["item_id"]] == ["return requested"]
    refund = out["payments"][-1]
    assert (refund["kind"], refund["status"], refund["payment_method_id"]) == ("refund", "pending", pm)
    assert round(refund["amount"] * 100) == item["value"]


def test_R8_return_refused_outside_window_or_not_delivered(ep):
    old = order_with_status(ep, "delivered", "AND delivered_at < ?", (EXPIRED,))
    item = one(ep, "SELECT item_id FROM order_items WHERE order_id = ?", (old,))["item_id"]
    msg = violation(ep, "return_delivered_order_items",
                    {"order_id": old, "item_ids": [item], "payment_method_id": charge_method(ep, old)}, "R8")  # fmt: skip
    assert "30 days" in msg
    pending = order_with_status(ep, "pending")
    item = one(ep, "SELECT item_id FROM order_items WHERE order_id = ?", (pending,))["item_id"]
    violation(ep, "return_delivered_order_items",
              {"order_id": pending, "item_ids": [item], "payment_method_id": charge_method(ep, pending)}, "R8")  # fmt: skip


def test_R8_refund_only_to_original_method_or_gift_card(ep):
    for row in ep.query("SELECT order_id FROM orders WHERE status = 'delivered' AND delivered_at >= ? ORDER BY order_id", (RECENT,)):
        oid = row["order_id"]
        original = charge_method(ep, oid)
        others = ep.query("SELECT payment_method_id, kind FROM payment_methods WHERE user_id = ? AND status = 'active' "
                          "AND payment_method_id != ? ORDER BY payment_method_id", (user_of(ep, oid), original))  # fmt: skip
        card = [m for m in others if m["kind"] != "gift_card"]
        gift = [m for m in others if m["kind"] == "gift_card"]
        if not (card and gift):
            continue
        item = one(ep, "SELECT item_id FROM order_items WHERE order_id = ?", (oid,))["item_id"]
        violation(ep, "return_delivered_order_items",
                  {"order_id": oid, "item_ids": [item], "payment_method_id": card[0]["payment_method_id"]}, "R8")  # fmt: skip
        ok(ep, "return_delivered_order_items", {"order_id": oid, "item_ids": [item], "payment_method_id": gift[0]["payment_method_id"]})
        return
    pytest.fail("no recent delivered order whose customer has both another card and a gift card")


# -- R9 ------------------------------------------------------------------------------------------------------


def _recent_delivered_swap(ep: Episode) -> tuple[str, str, str]:
    for row in ep.query("SELECT order_id FROM orders WHERE status = 'delivered' AND delivered_at >= ? ORDER BY order_id", (RECENT,)):
        rows = ep.query(
            "SELECT oi.item_id, v.item_id AS new_id FROM order_items oi JOIN variants v ON v.product_id = oi.product_id "
            "AND v.item_id != oi.item_id AND v.stock >= oi.quantity WHERE oi.order_id = ? ORDER BY oi.item_id, v.item_id",
            (row["order_id"],),
        )
        if rows:
            return row["order_id"], rows[0]["item_id"], rows[0]["new_id"]
    pytest.fail("no recent delivered order with an exchangeable item")


def test_R9_exchange_within_window(ep):
    oid, old, new = _recent_delivered_swap(ep)
    new_stock = stock(ep, new)
    out = ok(ep, "exchange_delivered_order_items",
             {"order_id": oid, "item_ids": [old], "new_item_ids": [new], "payment_method_id": charge_method(ep, oid)})  # fmt: skip
    line = next(i for i in out["items"] if i["item_id"] == old)
    assert (line["status"], line["exchange_item_id"], out["status"]) == ("exchange requested", new, "exchange requested")
    assert stock(ep, new) < new_stock


def test_R9_exchange_rules(ep):
    oid, old, _ = _recent_delivered_swap(ep)
    other = one(ep, "SELECT item_id FROM variants WHERE product_id != (SELECT product_id FROM variants WHERE item_id = ?) "
                "AND stock > 5 ORDER BY item_id", (old,))["item_id"]  # fmt: skip
    violation(ep, "exchange_delivered_order_items",
              {"order_id": oid, "item_ids": [old], "new_item_ids": [other], "payment_method_id": charge_method(ep, oid)}, "R9")  # fmt: skip
    old_order = order_with_status(ep, "delivered", "AND delivered_at < ?", (EXPIRED,))
    item = one(ep, "SELECT item_id FROM order_items WHERE order_id = ?", (old_order,))["item_id"]
    violation(ep, "exchange_delivered_order_items",
              {"order_id": old_order, "item_ids": [item], "new_item_ids": [item], "payment_method_id": charge_method(ep, old_order)},
              "R9")  # fmt: skip


# -- R10 -----------------------------------------------------------------------------------------------------


def test_R10_one_return_or_exchange_per_order(ep):
    oid = one(ep, "SELECT order_id FROM order_items WHERE order_id IN (SELECT order_id FROM orders WHERE status = 'delivered' "
              "AND delivered_at >= ?) GROUP BY order_id HAVING count(*) >= 2 ORDER BY order_id", (RECENT,))["order_id"]  # fmt: skip
    first, second = (r["item_id"] for r in ep.query("SELECT item_id FROM order_items WHERE order_id = ? ORDER BY item_id LIMIT 2", (oid,)))
    pm = charge_method(ep, oid)
    ok(ep, "return_delivered_order_items", {"order_id": oid, "item_ids": [first], "payment_method_id": pm})
    msg = violation(ep, "return_delivered_order_items", {"order_id": oid, "item_ids": [second], "payment_method_id": pm}, "R10")
    assert "human agent" in msg
    violation(ep, "exchange_delivered_order_items",
              {"order_id": oid, "item_ids": [second], "new_item_ids": [second], "payment_method_id": pm}, "R10")  # fmt: skip
    for status in ("returned", "exchanged", "exchange requested"):
        other = order_with_status(ep, status)
        item = one(ep, "SELECT item_id FROM order_items WHERE order_id = ?", (other,))["item_id"]
        violation(ep, "return_delivered_order_items",
                  {"order_id": other, "item_ids": [item], "payment_method_id": charge_method(ep, other)}, "R10")  # fmt: skip


# -- R11 -----------------------------------------------------------------------------------------------------


def test_R11_default_address_change_leaves_orders_alone(ep):
    oid = order_with_status(ep, "pending")
    uid = user_of(ep, oid)
    ship_before = ok(ep, "get_order_details", {"order_id": oid})["shipping_address"]
    out = ok(ep, "modify_user_address", {"user_id": uid, **NEW_ADDRESS})
    assert out["default_address"]["zip"] == "97205"
    details = ok(ep, "get_user_details", {"user_id": uid})
    default = [a for a in details["addresses"] if a["is_default"]]
    assert len(default) == 1 and default[0]["line1"] == "221 Baker Street" and default[0]["state"] == "OR"
    assert ok(ep, "get_order_details", {"order_id": oid})["shipping_address"] == ship_before
    assert set(ep.changes().tables()) == {"addresses"}
    violation(ep, "modify_user_address", {"user_id": uid, **NEW_ADDRESS, "zip": "1234"}, "R11", "invalid_arguments")


# -- R12 -----------------------------------------------------------------------------------------------------


def test_R12_transfer_needs_summary_and_opens_ticket(ep):
    violation(ep, "transfer_to_human_agent", {"summary": "   "}, "R12")
    oid = order_with_status(ep, "returned")
    out = ok(ep, "transfer_to_human_agent", {"summary": "Wants a second return.", "order_id": oid, "user_id": user_of(ep, oid)})
    ticket = one(ep, "SELECT * FROM tickets WHERE ticket_id = ?", (out["ticket_id"],))
    assert (ticket["status"], ticket["order_id"], ticket["created_at"]) == ("open", oid, NOW)
    assert ep.changes().summary() == {"tickets": {"inserted": 1, "updated": 0, "deleted": 0}}


# -- R13 -----------------------------------------------------------------------------------------------------


def identify(ep: Episode, user_id: str) -> None:
    email = one(ep, "SELECT email FROM users WHERE user_id = ?", (user_id,))["email"]
    assert ok(ep, "find_user_by_email", {"email": email}) == {"user_id": user_id}
    assert ep.customer == user_id


def two_customers_with_pending_orders(ep: Episode) -> tuple[tuple[str, str], tuple[str, str]]:
    """(user, pending order of theirs) for two different customers, each with two usable cards or PayPal."""
    rows = ep.query("SELECT user_id, min(order_id) AS order_id FROM orders o WHERE status = 'pending' AND "
                    "(SELECT count(*) FROM payment_methods m WHERE m.user_id = o.user_id AND m.status = 'active' "
                    "AND m.kind != 'gift_card') >= 2 GROUP BY user_id ORDER BY user_id LIMIT 2")  # fmt: skip
    assert len(rows) == 2
    return (rows[0]["user_id"], rows[0]["order_id"]), (rows[1]["user_id"], rows[1]["order_id"])


def active_method(ep: Episode, user_id: str, not_: str = "") -> str:
    return one(ep, "SELECT payment_method_id FROM payment_methods WHERE user_id = ? AND status = 'active' "
               "AND kind != 'gift_card' AND payment_method_id != ? ORDER BY payment_method_id",
               (user_id, not_))["payment_method_id"]  # fmt: skip


def test_R13_writes_on_another_customers_objects_are_refused_after_identification(ep):
    (me, my_order), (them, their_order) = two_customers_with_pending_orders(ep)
    identify(ep, me)
    msg = violation(ep, "cancel_pending_order", {"order_id": their_order, "reason": "no longer needed"}, "R13")
    assert "belongs to another customer" in msg and "find_user_by_email" in msg and them not in msg
    # their payment method on my own order: refused by ownership before the tool's own check runs
    msg = violation(ep, "modify_pending_order_payment",
                    {"order_id": my_order, "payment_method_id": active_method(ep, them)}, "R13")  # fmt: skip
    assert "payment method" in msg
    msg = violation(ep, "modify_user_address", {"user_id": them, **NEW_ADDRESS}, "R13")
    assert "not the identified customer" in msg
    violation(ep, "transfer_to_human_agent", {"summary": "Wants a refund.", "order_id": their_order}, "R13")
    assert ep.changes().summary() == {}
    # reads are not writes: looking at another order is still possible (the conduct rules cover that)
    assert ok(ep, "get_order_details", {"order_id": their_order})["order_id"] == their_order


def test_R13_the_same_writes_are_allowed_for_the_identified_customer(ep):
    (me, my_order), (them, their_order) = two_customers_with_pending_orders(ep)
    identify(ep, me)
    ok(ep, "modify_pending_order_payment",
       {"order_id": my_order, "payment_method_id": active_method(ep, me, charge_method(ep, my_order))})  # fmt: skip
    ok(ep, "modify_user_address", {"user_id": me, **NEW_ADDRESS})
    # the other customer turns out to be the one asking: once identified, their order can be changed, mine not
    first, last, zip_ = (one(ep, "SELECT u.first_name, u.last_name, a.zip FROM users u JOIN addresses a "
                             "ON a.user_id = u.user_id WHERE u.user_id = ? ORDER BY a.address_id", (them,)).values())  # fmt: skip
    ok(ep, "find_user_by_name_zip", {"first_name": first, "last_name": last, "zip": zip_})
    assert ep.customer == them
    ok(ep, "cancel_pending_order", {"order_id": their_order, "reason": "no longer needed"})
    violation(ep, "cancel_pending_order", {"order_id": my_order, "reason": "no longer needed"}, "R13")


def test_R13_nothing_is_checked_before_identification(ep):
    (me, _), (_, their_order) = two_customers_with_pending_orders(ep)
    assert ep.customer is None
    ok(ep, "cancel_pending_order", {"order_id": their_order, "reason": "no longer needed"})
    # a failed identification identifies no one
    assert not ep.call("find_user_by_email", {"email": "nobody@example.invalid"}).ok
    assert ep.customer is None
    ok(ep, "modify_user_address", {"user_id": me, **NEW_ADDRESS})


def test_R13_identification_is_not_world_state(ep, world):
    (me, _), _ = two_customers_with_pending_orders(ep)
    before = ep.state_hash()
    identify(ep, me)
    assert ep.state_hash() == before and not ep.changes()
    with ep.fork() as child:
        assert child.customer == me
    with world.episode(0) as fresh:
        email = one(fresh, "SELECT email FROM users WHERE user_id = ?", (me,))["email"]
        assert fresh.probe("find_user_by_email", {"email": email}).ok
        assert fresh.customer is None  # a probe leaves no trace


# -- no over-refund --------------------------------------------------------------------------------------------

SWAP_ORDER = "#W1825148"  # seed 0: one item at $69.34 paid with PayPal; a $49.99 variant of it is in stock


def paid_and_refunded(ep: Episode, order_id: str) -> tuple[int, int]:
    row = one(ep, "SELECT SUM(CASE kind WHEN 'charge' THEN amount_cents ELSE 0 END) AS paid, "
              "SUM(CASE kind WHEN 'refund' THEN amount_cents ELSE 0 END) AS refunded FROM payments WHERE order_id = ?",
              (order_id,))  # fmt: skip
    return row["paid"], row["refunded"]


def cheaper_swap_refunded_elsewhere(ep: Episode) -> tuple[str, str]:
    """Swap #W1825148's item for a $19.35 cheaper variant, the difference refunded to a card that paid nothing."""
    assert paid_and_refunded(ep, SWAP_ORDER) == (6934, 0)
    paypal = charge_method(ep, SWAP_ORDER)
    card = active_method(ep, user_of(ep, SWAP_ORDER), paypal)
    ok(ep, "modify_pending_order_items", {"order_id": SWAP_ORDER, "item_ids": ["1143284629"],
                                          "new_item_ids": ["1840681510"], "payment_method_id": card})  # fmt: skip
    assert paid_and_refunded(ep, SWAP_ORDER) == (6934, 1935)
    return paypal, card


def test_R1_cancel_after_a_cheaper_swap_refunds_only_what_is_still_paid(ep):
    paypal, _ = cheaper_swap_refunded_elsewhere(ep)
    out = ok(ep, "cancel_pending_order", {"order_id": SWAP_ORDER, "reason": "no longer needed"})
    assert paid_and_refunded(ep, SWAP_ORDER) == (6934, 6934)  # was 8,869 refunded: the difference twice
    last = out["payments"][-1]
    assert (last["payment_method_id"], last["kind"], last["amount"]) == (paypal, "refund", 49.99)


def test_R6_payment_change_after_a_cheaper_swap_charges_the_order_total(ep):
    paypal, card = cheaper_swap_refunded_elsewhere(ep)
    other = one(ep, "SELECT payment_method_id FROM payment_methods WHERE user_id = ? AND status = 'active' "
                "AND payment_method_id NOT IN (?, ?) ORDER BY payment_method_id",
                (user_of(ep, SWAP_ORDER), paypal, card))["payment_method_id"]  # fmt: skip
    out = ok(ep, "modify_pending_order_payment", {"order_id": SWAP_ORDER, "payment_method_id": other})
    assert [(p["payment_method_id"], p["kind"], p["amount"]) for p in out["payments"][-2:]] == [
        (paypal, "refund", 49.99), (other, "charge", 49.99)]  # fmt: skip
    ok(ep, "cancel_pending_order", {"order_id": SWAP_ORDER, "reason": "no longer needed"})
    assert paid_and_refunded(ep, SWAP_ORDER) == (6934 + 4999, 1935 + 4999 + 4999)


def test_R1_cancel_refunds_each_method_what_it_holds_after_a_payment_change(ep):
    """The card that got the difference then pays the order: cancelling refunds that card, not PayPal."""
    paypal, card = cheaper_swap_refunded_elsewhere(ep)
    ok(ep, "modify_pending_order_payment", {"order_id": SWAP_ORDER, "payment_method_id": card})
    out = ok(ep, "cancel_pending_order", {"order_id": SWAP_ORDER, "reason": "no longer needed"})
    assert [(p["payment_method_id"], p["kind"], p["amount"]) for p in out["payments"]] == [
        (paypal, "charge", 69.34), (card, "refund", 19.35),  # placed; the swap's difference
        (paypal, "refund", 49.99), (card, "charge", 49.99),  # the payment change
        (card, "refund", 49.99),  # the cancellation
    ]  # fmt: skip


# -- coverage of the policy itself -------------------------------------------------------------------------


def test_every_policy_rule_is_tested():
    assert_every_rule_tested("retail", globals(), minimum=12)


def test_error_messages_are_json_observations(ep):
    r = ep.call("cancel_pending_order", {"order_id": order_with_status(ep, "delivered"), "reason": "no longer needed"})
    assert json.loads(r.content)["error"]["type"] == "policy_violation"
