"""Isolation as a property: random retail call sequences on several forks never leak between them, and
replaying one fork's calls on a fresh episode reproduces its state exactly."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolworld import Episode, get_world

WORLD = get_world("retail")
ADDRESSES = [
    {"line1": "1 Main Street", "city": "Austin", "state": "TX", "zip": "78701"},
    {"line1": "9 Elm Road", "line2": "Unit 3", "city": "Boise", "state": "ID", "zip": "83702"},
]


def _pick(ep: Episode, sql: str, k: int) -> dict[str, Any] | None:
    rows = ep.query(sql)
    return rows[k % len(rows)] if rows else None


def make_call(ep: Episode, op: int, k: int) -> tuple[str, dict[str, Any]]:
    """A call drawn from the episode's *live* state (valid or not: failures must not leak either)."""
    if op == 0:
        row = _pick(ep, "SELECT order_id FROM orders WHERE status IN ('pending', 'delivered') ORDER BY order_id", k)
        return "cancel_pending_order", {"order_id": row["order_id"], "reason": "no longer needed"}
    if op == 1:
        row = _pick(ep, "SELECT order_id FROM orders WHERE status IN ('pending', 'processed') ORDER BY order_id", k)
        return "modify_pending_order_address", {"order_id": row["order_id"], **ADDRESSES[k % 2]}
    if op == 2:
        row = _pick(ep, "SELECT o.order_id, m.payment_method_id FROM orders o JOIN payment_methods m ON m.user_id = o.user_id "
                    "WHERE o.status = 'pending' ORDER BY o.order_id, m.payment_method_id", k)  # fmt: skip
        return "modify_pending_order_payment", dict(row)
    if op == 3:
        row = _pick(ep, "SELECT o.order_id, oi.item_id, p.payment_method_id FROM orders o JOIN order_items oi "
                    "ON oi.order_id = o.order_id JOIN payments p ON p.order_id = o.order_id AND p.kind = 'charge' "
                    "WHERE o.status = 'delivered' ORDER BY o.delivered_at DESC, o.order_id LIMIT 60", k)  # fmt: skip
        return "return_delivered_order_items", {"order_id": row["order_id"], "item_ids": [row["item_id"]],
                                                "payment_method_id": row["payment_method_id"]}  # fmt: skip
    if op == 4:
        row = _pick(ep, "SELECT user_id FROM users ORDER BY user_id", k)
        return "modify_user_address", {"user_id": row["user_id"], **ADDRESSES[k % 2]}
    return "transfer_to_human_agent", {"summary": f"case {k}"}


ops = st.lists(
    st.tuples(st.integers(0, 3), st.integers(0, 5), st.integers(0, 10_000)),  # (fork index, op, row choice)
    min_size=1,
    max_size=25,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops)
def test_forks_never_leak(steps):
    root = WORLD.episode(0)
    episodes = [root]
    logs: list[list[tuple[str, dict[str, Any]]]] = [[]]
    for idx, op, k in steps:
        if idx >= len(episodes):  # take a new fork of a random existing episode at this point
            parent = k % len(episodes)
            episodes.append(episodes[parent].fork())
            logs.append(list(logs[parent]))
            idx = len(episodes) - 1
        hashes = [e.state_hash() for e in episodes]
        name, args = make_call(episodes[idx], op, k)
        episodes[idx].call(name, args)
        logs[idx].append((name, args))
        for j, e in enumerate(episodes):
            if j != idx:
                assert e.state_hash() == hashes[j], "a call on one fork changed another"
    for e, log in zip(episodes, logs, strict=True):
        replay = WORLD.episode(0)
        for name, args in log:
            replay.call(name, args)
        assert replay.state_hash() == e.state_hash()
        assert replay.content_hash() == e.content_hash()  # full scan: the change log missed nothing
        assert replay.changes() == e.changes()
        assert (replay.state_hash() == WORLD.episode(0).state_hash()) == (len(e.changes()) == 0)
