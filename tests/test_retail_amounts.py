"""Money a task tells the user: each write reports what THAT call charged and refunded, and tasks quote it.

Every call of a session runs at the store's fixed clock time, so an order's payment history cannot say which
payments one call made. When a task moves money twice on the same order (a cheaper swap refunded to one card,
then a cancellation), the cancellation's refund must be its own, not the sum of both; the write tools report
``this_call`` for that, and ``RetailKit.outputs`` reads it. Both are checked here against the ground truth:
the payments rows each call inserted, read from the episode's change-set.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from toolworld import get_world
from toolworld.tasks.generate import generate
from toolworld.tasks.model import Task
from toolworld.world import Episode
from toolworld.worlds.retail.kit import kit

WORLD = get_world("retail")
KIT = kit(WORLD)
MONEY_TOOLS = ("cancel_pending_order", "modify_pending_order_items", "modify_pending_order_payment",
               "return_delivered_order_items", "exchange_delivered_order_items")  # fmt: skip
#: Seed 0: one item at $69.34 (item 1143284629) paid with PayPal; its variant 1840681510 costs $49.99.
SWAP_ORDER, OLD_ITEM, CHEAPER_ITEM = "#W1825148", "1143284629", "1840681510"


def inserted_payments(ep: Episode) -> dict[int, dict[str, Any]]:
    return {c.after["payment_id"]: c.after for c in ep.changes().for_table("payments") if c.op == "insert"}


def call_and_payments(ep: Episode, name: str, args: dict[str, Any]) -> tuple[Any, list[dict[str, Any]]]:
    """Run a call that must succeed; return its output and the payments rows this call inserted, in order."""
    before = inserted_payments(ep)
    out = ep.call(name, args).unwrap()
    after = inserted_payments(ep)
    return out, [after[k] for k in sorted(after) if k not in before]


def as_reported(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Payments rows as a tool reports them (dollars, no ids or dates)."""
    return [{"payment_method_id": r["payment_method_id"], "kind": r["kind"], "amount": round(r["amount_cents"] / 100, 2),
             "status": r["status"]} for r in rows]  # fmt: skip


def owed_outputs(tool: str, rows: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """The amounts the user must be told about one call, from the rows it inserted (independent of the kit)."""
    refunded = sum(r["amount_cents"] for r in rows if r["kind"] == "refund")
    charged = sum(r["amount_cents"] for r in rows if r["kind"] == "charge")
    out = []
    if refunded:
        out.append(("refund_amount", f"{refunded / 100:.2f}"))
    if charged and tool != "modify_pending_order_payment":  # its charge is the order total it also refunds
        out.append(("charge_amount", f"{charged / 100:.2f}"))
    return out


def assert_reports_its_own_money(tool: str, out: dict[str, Any], rows: list[dict[str, Any]]) -> None:
    moved = out["this_call"]
    assert moved["payments"] == as_reported(rows), (tool, moved)
    assert round(moved["refunded"] * 100) == sum(r["amount_cents"] for r in rows if r["kind"] == "refund")
    assert round(moved["charged"] * 100) == sum(r["amount_cents"] for r in rows if r["kind"] == "charge")


@pytest.fixture
def ep():
    with WORLD.episode(0) as e:
        yield e


def test_cancel_after_a_cheaper_swap_reports_only_its_own_refund(ep):
    paypal = ep.query("SELECT payment_method_id FROM payments WHERE order_id = ? AND kind = 'charge'",
                      (SWAP_ORDER,))[0]["payment_method_id"]  # fmt: skip
    card = ep.query("SELECT payment_method_id FROM payment_methods WHERE user_id = (SELECT user_id FROM orders "
                    "WHERE order_id = ?) AND status = 'active' AND kind != 'gift_card' AND payment_method_id != ? "
                    "ORDER BY payment_method_id LIMIT 1", (SWAP_ORDER, paypal))[0]["payment_method_id"]  # fmt: skip
    swap_args = {"order_id": SWAP_ORDER, "item_ids": [OLD_ITEM], "new_item_ids": [CHEAPER_ITEM], "payment_method_id": card}
    swap, swap_rows = call_and_payments(ep, "modify_pending_order_items", swap_args)
    assert swap["this_call"] == {"charged": 0.0, "refunded": 19.35, "payments": [
        {"payment_method_id": card, "kind": "refund", "amount": 19.35, "status": "pending"}]}  # fmt: skip
    assert_reports_its_own_money("modify_pending_order_items", swap, swap_rows)

    cancel_args = {"order_id": SWAP_ORDER, "reason": "no longer needed"}
    cancel, cancel_rows = call_and_payments(ep, "cancel_pending_order", cancel_args)
    assert cancel["this_call"] == {"charged": 0.0, "refunded": 49.99, "payments": [
        {"payment_method_id": paypal, "kind": "refund", "amount": 49.99, "status": "pending"}]}  # fmt: skip
    assert_reports_its_own_money("cancel_pending_order", cancel, cancel_rows)
    # The order's history still holds both refunds at the same timestamp: the sum ($69.34) is not this refund.
    refunds = [p for p in cancel["payments"] if p["kind"] == "refund"]
    assert [p["amount"] for p in refunds] == [19.35, 49.99] and len({p["created_at"] for p in refunds}) == 1

    assert [(o.label, o.value) for o in KIT.outputs("modify_pending_order_items", swap_args, swap)] == [
        ("refund_amount", "19.35")]  # fmt: skip
    assert [(o.label, o.value) for o in KIT.outputs("cancel_pending_order", cancel_args, cancel)] == [
        ("refund_amount", "49.99")]  # fmt: skip


def test_a_write_that_moves_no_money_owes_no_amount(ep):
    """A swap at the same price reports zeros, and an address change after a swap does not repeat its charge."""
    same = ep.query(
        "SELECT o.order_id, oi.item_id, v.item_id AS new_id FROM orders o JOIN order_items oi ON oi.order_id = o.order_id "
        "JOIN variants v ON v.product_id = oi.product_id AND v.item_id != oi.item_id AND v.stock >= oi.quantity "
        "AND v.price_cents = oi.unit_price_cents WHERE o.status = 'pending' AND v.item_id NOT IN "
        "(SELECT item_id FROM order_items WHERE order_id = o.order_id) ORDER BY o.order_id, oi.item_id LIMIT 1"
    )
    assert same, "seed 0 has no pending order with a same-price variant in stock"
    row = same[0]
    pm = ep.query("SELECT payment_method_id FROM payments WHERE order_id = ? AND kind = 'charge'",
                  (row["order_id"],))[0]["payment_method_id"]  # fmt: skip
    args = {"order_id": row["order_id"], "item_ids": [row["item_id"]], "new_item_ids": [row["new_id"]],
            "payment_method_id": pm}  # fmt: skip
    out, rows = call_and_payments(ep, "modify_pending_order_items", args)
    assert rows == [] and out["this_call"] == {"charged": 0.0, "refunded": 0.0, "payments": []}
    assert KIT.outputs("modify_pending_order_items", args, out) == []
    # An address change returns the order (with the swap's refund in its history) but moves no money itself.
    card = ep.query("SELECT payment_method_id FROM payment_methods WHERE user_id = (SELECT user_id FROM orders "
                    "WHERE order_id = ?) AND status = 'active' AND kind != 'gift_card' ORDER BY payment_method_id "
                    "LIMIT 1", (SWAP_ORDER,))[0]["payment_method_id"]  # fmt: skip
    ep.call("modify_pending_order_items", {"order_id": SWAP_ORDER, "item_ids": [OLD_ITEM],
                                           "new_item_ids": [CHEAPER_ITEM], "payment_method_id": card}).unwrap()  # fmt: skip
    args = {"order_id": SWAP_ORDER, "line1": "1 Main Street", "city": "Austin", "state": "TX", "zip": "78701"}
    out = ep.call("modify_pending_order_address", args).unwrap()
    assert "this_call" not in out and any(p["kind"] == "refund" for p in out["payments"])
    assert KIT.outputs("modify_pending_order_address", args, out) == []


def test_every_generated_amount_is_the_money_its_call_moved():
    """Over 300 tasks: each write's ``this_call`` is the payments rows it inserted, and the task's expected refund
    and charge amounts are exactly those owed by its writes, call by call, in order."""
    tasks: list[Task] = generate(WORLD, 300, seed=0).tasks
    assert len(tasks) == 300
    seen: Counter[str] = Counter()
    for t in tasks:
        owed: list[tuple[str, str]] = []
        with WORLD.episode(t.seed) as ep:
            for a in t.gold_actions:
                out, rows = call_and_payments(ep, a.name, a.arguments)
                if a.name in MONEY_TOOLS:
                    assert_reports_its_own_money(a.name, out, rows)
                    owed += owed_outputs(a.name, rows)
                    seen[a.name] += 1
                else:
                    assert rows == [], (t.id, a.name, "moved money without reporting it")
        amounts = [(o.label, o.value) for o in t.expected_outputs if o.label in ("refund_amount", "charge_amount")]
        assert amounts == (owed if t.kind == "action" else []), (t.id, [a.name for a in t.gold_actions])
    # Not vacuous: every money-moving tool is exercised. Two writes on one order (where a history-based amount
    # would add up both calls) are never generated (coherence rule one_write_per_object); that case is tested
    # call by call in test_cancel_after_a_cheaper_swap_reports_only_its_own_refund.
    assert set(seen) == set(MONEY_TOOLS), seen
