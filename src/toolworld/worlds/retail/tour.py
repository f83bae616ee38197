"""The scripted tour of the retail world (``toolworld tour retail``).

It picks its customer and orders from the seeded state (nothing hard-coded), so it works at any seed.
"""

from __future__ import annotations

from collections.abc import Iterator

from toolworld.world import Episode, ToolCall, TourStep


def tour(ep: Episode) -> Iterator[TourStep]:
    """Identify a customer, inspect an order, cancel it, try a refused write, and show the fork isolation."""
    row = ep.query(
        "SELECT u.email, u.user_id, o.order_id FROM users u JOIN orders o ON o.user_id = u.user_id "
        "WHERE o.status = 'pending' AND EXISTS (SELECT 1 FROM orders d WHERE d.user_id = u.user_id "
        "AND d.status = 'delivered') ORDER BY o.order_id LIMIT 1"
    )[0]
    delivered = ep.query(
        "SELECT order_id FROM orders WHERE user_id = ? AND status = 'delivered' ORDER BY order_id LIMIT 1",
        (row["user_id"],),
    )[0]["order_id"]
    yield TourStep("A customer writes in. Find their account by email.", ToolCall("find_user_by_email", {"email": row["email"]}))
    yield TourStep("Look up their profile: addresses, payment methods, orders.",
                   ToolCall("get_user_details", {"user_id": row["user_id"]}))  # fmt: skip
    yield TourStep("Inspect their pending order.", ToolCall("get_order_details", {"order_id": row["order_id"]}))
    yield TourStep("Fork the episode: a what-if copy that the next writes will not touch.", kind="fork")
    yield TourStep("Cancel it: refunds go to the original payment method, items go back into stock (policy R1, R2).",
                   ToolCall("cancel_pending_order", {"order_id": row["order_id"], "reason": "no longer needed"}))  # fmt: skip
    yield TourStep("Try to cancel a delivered order: the tool enforces the policy and says what to do instead.",
                   ToolCall("cancel_pending_order", {"order_id": delivered, "reason": "ordered by mistake"}))  # fmt: skip
    yield TourStep("A mistyped order id: a structured not_found error, nothing changes.",
                   ToolCall("get_order_details", {"order_id": "#W0000000"}))  # fmt: skip
    yield TourStep("A malformed call: wrong argument name and type.",
                   ToolCall("cancel_pending_order", {"order": 12, "reason": "because"}))  # fmt: skip
