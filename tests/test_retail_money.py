"""Money as a stateful property: no sequence of accepted retail calls refunds an order more than it was paid,
charges a pending order anything but its total, or takes a gift card below zero; a refused call changes nothing;
an accepted one reports under ``this_call`` exactly the payments it made, and a write that moves no money none.

A hypothesis state machine drives the write tools (cancel, modify items / payment / address, return, exchange)
on the orders of a few customers at seed 0, with arguments drawn from the episode's live state: mostly
plausible ones (an item of the order, a variant of its product, one of the customer's payment methods) and
now and then wrong ones (another product, another customer's card, a bad address), so that both the accepted
and the refused paths are walked. It also identifies customers along the way, so the ownership refusals
(policy R13) are part of the walk.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule, run_state_machine_as_test

from toolworld import get_world
from toolworld.worlds.retail.common import CANCEL_REASONS

WORLD = get_world("retail")
#: Orders of three customers at seed 0, by status. #W1825148 (a $69.34 item with cheaper variants in stock) is the
#: order the over-refund was first seen on; every pending order here has items with cheaper and dearer variants
#: in stock; aiko_mendoza_8301 also has a gift card; the delivered orders are inside the 30-day return window.
ORDER_STATUS = {
    "#W1825148": "pending", "#W6852451": "pending", "#W3771174": "pending", "#W1974420": "pending",
    "#W3854110": "processed", "#W6811979": "delivered", "#W9316246": "delivered",
}  # fmt: skip
ORDERS = sorted(ORDER_STATUS)
MONEY_TOOLS = {"cancel_pending_order", "modify_pending_order_items", "modify_pending_order_payment",
               "return_delivered_order_items", "exchange_delivered_order_items"}  # fmt: skip


def _facts() -> tuple[dict[str, str], dict[str, list[str]], dict[str, str]]:
    with WORLD.episode(0) as ep:
        marks = ",".join("?" * len(ORDERS))
        orders = ep.query(f"SELECT order_id, user_id, status FROM orders WHERE order_id IN ({marks})", ORDERS)
        assert {o["order_id"]: o["status"] for o in orders} == ORDER_STATUS, "the seed data changed"
        owner = {o["order_id"]: o["user_id"] for o in orders}
        users = sorted(set(owner.values()))
        marks = ",".join("?" * len(users))
        methods = ep.query(f"SELECT payment_method_id, user_id FROM payment_methods WHERE user_id IN ({marks}) "
                           "ORDER BY payment_method_id", users)  # fmt: skip
        emails = ep.query(f"SELECT user_id, email FROM users WHERE user_id IN ({marks})", users)
    by_user: dict[str, list[str]] = {u: [] for u in users}
    for m in methods:
        by_user[m["user_id"]].append(m["payment_method_id"])
    return owner, by_user, {e["user_id"]: e["email"] for e in emails}


OWNER, METHODS, EMAILS = _facts()
CUSTOMERS = sorted(METHODS)
ADDRESSES = [
    {"line1": "1 Main Street", "city": "Austin", "state": "TX", "zip": "78701"},
    {"line1": "9 Elm Road", "line2": "Unit 3", "city": "Boise", "state": "id", "zip": "83702"},
    {"line1": "5 Nowhere Lane", "city": "Atlantis", "state": "XX", "zip": "00000"},  # refused: no such state
]


class RetailMoney(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.ep = WORLD.episode(0)
        self.accepted: Counter[str] = Counter()

    def teardown(self) -> None:
        self.ep.close()

    # -- drawing arguments from live state ------------------------------------------------------------------
    def _items(self, order_id: str) -> list[dict[str, Any]]:
        return self.ep.query("SELECT item_id, product_id FROM order_items WHERE order_id = ? ORDER BY item_id",
                             (order_id,))  # fmt: skip

    def _draw_items(self, data: st.DataObject, order_id: str) -> list[dict[str, Any]]:
        items = self._items(order_id)
        return data.draw(st.lists(st.sampled_from(items), min_size=1, max_size=len(items), unique_by=lambda i: i["item_id"]))

    def _draw_replacement(self, data: st.DataObject, item: dict[str, Any]) -> str:
        same = self.ep.query("SELECT item_id, stock FROM variants WHERE product_id = ? AND item_id != ? "
                             "ORDER BY price_cents, item_id", (item["product_id"], item["item_id"]))  # fmt: skip
        other = self.ep.query("SELECT item_id FROM variants WHERE product_id != ? ORDER BY item_id LIMIT 1",
                              (item["product_id"],))[0]["item_id"]  # fmt: skip
        in_stock = [v["item_id"] for v in same if v["stock"] > 0]
        # mostly a variant that can be swapped in, sometimes one out of stock, of another product or the same item
        choice = st.sampled_from([v["item_id"] for v in same]) | st.just(other) | st.just(item["item_id"])
        if in_stock:
            choice = st.sampled_from(in_stock) | st.sampled_from(in_stock) | choice
        return data.draw(choice)

    def _draw_method(self, data: st.DataObject, order_id: str) -> str:
        own = METHODS[OWNER[order_id]]
        others = [m for u, ms in METHODS.items() if u != OWNER[order_id] for m in ms]
        return data.draw(st.sampled_from(own) | st.sampled_from(own) | st.sampled_from(others))

    def _call(self, name: str, args: dict[str, Any]) -> None:
        before, changes = self.ep.state_hash(), self.ep.changes()
        r = self.ep.call(name, args)
        if r.ok:
            self.accepted[name] += 1
            self._reports_its_own_money(name, r.output, changes)
            return
        assert r.error.type != "internal_error", r.error.message  # a crash of the world, never the agent's
        assert self.ep.state_hash() == before and self.ep.changes() == changes, f"refused {name} changed state"

    def _reports_its_own_money(self, name: str, output: Any, before: Any) -> None:
        """A write's ``this_call`` lists exactly the payments rows the call inserted (what a task quotes)."""
        old = {c.key for c in before.for_table("payments") if c.op == "insert"}
        rows = [c.after for c in self.ep.changes().for_table("payments") if c.op == "insert" and c.key not in old]
        if name not in MONEY_TOOLS:
            assert rows == [] and "this_call" not in output, f"{name} moved money"
            return
        moved = output["this_call"]
        assert moved["payments"] == [
            {"payment_method_id": r["payment_method_id"], "kind": r["kind"], "amount": r["amount_cents"] / 100,
             "status": r["status"]} for r in sorted(rows, key=lambda r: r["payment_id"])], (name, moved, rows)  # fmt: skip
        for kind, total in (("charge", moved["charged"]), ("refund", moved["refunded"])):
            assert round(total * 100) == sum(r["amount_cents"] for r in rows if r["kind"] == kind), (name, moved)

    # -- the write tools ----------------------------------------------------------------------------------------
    @rule(order_id=st.sampled_from(ORDERS), reason=st.sampled_from(CANCEL_REASONS))
    def cancel(self, order_id: str, reason: str) -> None:
        self._call("cancel_pending_order", {"order_id": order_id, "reason": reason})

    @rule(order_id=st.sampled_from(ORDERS), data=st.data())
    def modify_items(self, order_id: str, data: st.DataObject) -> None:
        items = self._draw_items(data, order_id)
        self._call("modify_pending_order_items", {
            "order_id": order_id, "item_ids": [i["item_id"] for i in items],
            "new_item_ids": [self._draw_replacement(data, i) for i in items],
            "payment_method_id": self._draw_method(data, order_id)})  # fmt: skip

    @rule(order_id=st.sampled_from(ORDERS), data=st.data())
    def modify_payment(self, order_id: str, data: st.DataObject) -> None:
        self._call("modify_pending_order_payment",
                   {"order_id": order_id, "payment_method_id": self._draw_method(data, order_id)})  # fmt: skip

    @rule(order_id=st.sampled_from(ORDERS), address=st.sampled_from(ADDRESSES))
    def modify_address(self, order_id: str, address: dict[str, str]) -> None:
        self._call("modify_pending_order_address", {"order_id": order_id, **address})

    @rule(order_id=st.sampled_from(ORDERS), data=st.data())
    def return_items(self, order_id: str, data: st.DataObject) -> None:
        items = self._draw_items(data, order_id)
        self._call("return_delivered_order_items", {
            "order_id": order_id, "item_ids": [i["item_id"] for i in items],
            "payment_method_id": self._draw_method(data, order_id)})  # fmt: skip

    @rule(order_id=st.sampled_from(ORDERS), data=st.data())
    def exchange_items(self, order_id: str, data: st.DataObject) -> None:
        items = self._draw_items(data, order_id)
        self._call("exchange_delivered_order_items", {
            "order_id": order_id, "item_ids": [i["item_id"] for i in items],
            "new_item_ids": [self._draw_replacement(data, i) for i in items],
            "payment_method_id": self._draw_method(data, order_id)})  # fmt: skip

    @precondition(lambda self: self.ep.customer is None or len(self.ep.history) % 3 == 0)
    @rule(user_id=st.sampled_from(CUSTOMERS))
    def identify(self, user_id: str) -> None:
        assert self.ep.call("find_user_by_email", {"email": EMAILS[user_id]}).ok
        assert self.ep.customer == user_id

    # -- what must hold after every step ----------------------------------------------------------------------
    @invariant()
    def refunds_never_exceed_payments(self) -> None:
        marks = ",".join("?" * len(ORDERS))
        for row in self.ep.query(
            "SELECT o.order_id, o.status, o.shipping_cents + (SELECT SUM(unit_price_cents * quantity) FROM order_items i "
            "WHERE i.order_id = o.order_id) AS total, SUM(CASE p.kind WHEN 'charge' THEN p.amount_cents ELSE 0 END) AS paid, "
            "SUM(CASE p.kind WHEN 'refund' THEN p.amount_cents ELSE 0 END) AS refunded FROM orders o "
            f"JOIN payments p ON p.order_id = o.order_id WHERE o.order_id IN ({marks}) GROUP BY o.order_id", ORDERS
        ):
            assert row["refunded"] <= row["paid"], f"{row['order_id']} refunded {row['refunded']} of {row['paid']} paid"
            net = row["paid"] - row["refunded"]
            if row["status"] == "pending":
                assert net == row["total"], f"pending {row['order_id']} holds {net} cents for a {row['total']} total"
            elif row["status"] == "cancelled":
                assert net == 0, f"cancelled {row['order_id']} kept {net} cents"

    @invariant()
    def gift_cards_never_go_negative(self) -> None:
        assert self.ep.query("SELECT payment_method_id, balance_cents FROM payment_methods WHERE balance_cents < 0") == []


def test_no_sequence_of_calls_overpays_or_overrefunds():
    accepted: Counter[str] = Counter()
    refused = 0

    class Counted(RetailMoney):
        def teardown(self) -> None:
            nonlocal refused
            accepted.update(self.accepted)
            refused += sum(not r.ok for r in self.ep.history)
            super().teardown()

    run_state_machine_as_test(Counted, settings=settings(
        max_examples=100,
        stateful_step_count=30,
        deadline=None,
        derandomize=True,  # the same walks on every run: a failure here is a regression, not a lucky draw
        database=None,
        suppress_health_check=[HealthCheck.too_slow],
    ))  # fmt: skip
    # The walk proves something only if every write tool got through sometimes and refusals were walked too.
    writes = {"cancel_pending_order", "modify_pending_order_items", "modify_pending_order_payment",
              "modify_pending_order_address", "return_delivered_order_items", "exchange_delivered_order_items"}  # fmt: skip
    assert writes <= set(accepted), f"never accepted: {sorted(writes - set(accepted))}"
    assert refused > 0
