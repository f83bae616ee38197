"""The retail world through its real tools: schemas, read results, every error type, atomicity, determinism."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

import pytest

from toolworld import get_world
from toolworld.world import ERROR_TYPES


@pytest.fixture
def ep(world):
    with world.episode(0) as e:
        yield e


def test_scale_and_shape(world):
    stats = world.stats(0)
    rows = stats["rows_by_table"]
    assert stats["tools"] >= 15 and stats["write_tools"] >= 7
    assert rows["products"] >= 50 and rows["users"] >= 500 and rows["orders"] >= 1000
    assert stats["rows"] >= 2000
    assert {"pending", "processed", "delivered", "cancelled", "returned", "exchanged"} <= {
        r["status"] for r in world.episode(0).query("SELECT DISTINCT status FROM orders")
    }


def test_every_tool_schema(world):
    for spec in world.specs():
        params = spec.parameters
        assert params["type"] == "object" and params["additionalProperties"] is False
        assert "title" not in params
        for name, prop in params["properties"].items():
            assert "title" not in prop, name
            assert prop.get("description") or prop.get("enum") or "anyOf" in prop or name in ("status", "category", "query", "expression"), (spec.name, name)
        json.dumps(spec.to_openai())
    writes = {s.name for s in world.specs() if s.mutates}
    assert writes == {
        "cancel_pending_order", "modify_pending_order_items", "modify_pending_order_address",
        "modify_pending_order_payment", "return_delivered_order_items", "exchange_delivered_order_items",
        "modify_user_address", "transfer_to_human_agent",
    }  # fmt: skip
    cancel = world.tools["cancel_pending_order"].spec
    assert cancel.parameters["properties"]["reason"]["enum"] == ["no longer needed", "ordered by mistake"]
    assert cancel.requires == {"order"}


def test_entity_graph_is_connected_from_user_facts(world):
    """Every write tool's required entities can be reached from what a customer knows."""
    reachable = {"email", "first_name", "last_name", "zip", "order"}  # order ids are on receipts
    changed = True
    while changed:
        changed = False
        for spec in world.specs():
            if spec.requires <= reachable and not spec.produces <= reachable:
                reachable |= spec.produces
                changed = True
    for spec in world.specs():
        assert spec.requires <= reachable, (spec.name, spec.requires - reachable)


def test_read_tools_walk_from_email_to_product(ep, world):
    email = ep.query("SELECT email FROM users ORDER BY user_id LIMIT 1")[0]["email"]
    uid = ep.call("find_user_by_email", {"email": email.upper()}).unwrap()["user_id"]
    user = ep.call("get_user_details", {"user_id": uid}).unwrap()
    assert user["email"] == email and sum(a["is_default"] for a in user["addresses"]) == 1
    first, last = user["name"]["first_name"], user["name"]["last_name"]
    zip_ = user["addresses"][0]["zip"]
    assert ep.call("find_user_by_name_zip", {"first_name": first.lower(), "last_name": last, "zip": zip_}).unwrap() == {"user_id": uid}
    listed = ep.call("list_user_orders", {"user_id": uid}).unwrap()
    assert sorted(o["order_id"] for o in listed) == sorted(user["orders"])
    if listed:
        order = ep.call("get_order_details", {"order_id": listed[0]["order_id"]}).unwrap()
        assert order["total"] == listed[0]["total"]
        assert order["total"] == round(order["subtotal"] + order["shipping"], 2)
        item = order["items"][0]
        product = ep.call("get_product_details", {"product_id": item["product_id"]}).unwrap()
        assert item["item_id"] in {v["item_id"] for v in product["variants"]}
        variant = ep.call("get_item_details", {"item_id": item["item_id"]}).unwrap()
        assert variant["product_id"] == item["product_id"]
        assert ep.call("track_order", {"order_id": order["order_id"]}).unwrap()["status"] == order["status"]
    products = ep.call("list_product_types", {}).unwrap()
    assert len(products) >= 50
    hits = ep.call("search_products", {"query": products[0]["name"]}).unwrap()
    assert products[0]["product_id"] in {h["product_id"] for h in hits}
    assert ep.call("calculate", {"expression": "(10 + 5.5) * 2 - 1 / 4"}).unwrap() == 30.75
    assert not ep.changes(), "read tools must not write"
    for r in ep.history:
        json.loads(json.dumps(r.output))


def test_yields_paths_extract_real_ids(ep, world):
    from toolworld.world import extract_path

    uid = ep.query("SELECT user_id FROM orders ORDER BY order_id LIMIT 1")[0]["user_id"]
    out = ep.call("get_user_details", {"user_id": uid}).unwrap()
    spec = world.tools["get_user_details"].spec
    orders = extract_path(out, spec.yields["order"])
    assert orders and all(o.startswith("#W") for o in orders)
    methods = extract_path(out, spec.yields["payment_method"])
    assert methods == [m["payment_method_id"] for m in out["payment_methods"]]
    order = ep.call("get_order_details", {"order_id": orders[0]}).unwrap()
    items = extract_path(order, world.tools["get_order_details"].spec.yields["item"])
    assert items == [i["item_id"] for i in order["items"]]


@pytest.mark.parametrize(
    ("tool", "args", "error_type", "needle"),
    [
        ("get_order_detail", {"order_id": "#W1"}, "unknown_tool", "get_order_details"),
        ("get_order_details", {}, "invalid_arguments", "missing required argument 'order_id'"),
        ("get_order_details", {"order_id": "#W1", "verbose": True}, "invalid_arguments", "unexpected argument 'verbose'"),
        ("get_order_details", {"order_id": 1234567}, "invalid_arguments", "order_id"),
        ("get_order_details", '{"order_id": ', "invalid_arguments", "not valid JSON"),
        ("get_order_details", {"order_id": "nope"}, "not_found", "nope"),
        ("get_product_details", {"product_id": "p_0"}, "not_found", "product"),
        ("find_user_by_email", {"email": "nobody@example.invalid"}, "not_found", "find_user_by_name_zip"),
        ("calculate", {"expression": "__import__('os')"}, "invalid_arguments", "arithmetic"),
        ("calculate", {"expression": "1/0"}, "invalid_arguments", "zero"),
    ],
)
def test_error_types_through_real_tools(ep, tool, args, error_type, needle):
    r = ep.call(tool, args)
    assert not r.ok and r.error.type == error_type and error_type in ERROR_TYPES
    assert needle in r.error.message, r.error.message


def test_not_found_inside_a_list_argument(ep):
    oid = ep.query("SELECT order_id, user_id FROM orders WHERE status = 'pending' ORDER BY order_id LIMIT 1")[0]["order_id"]
    pm = ep.query("SELECT payment_method_id FROM payments WHERE order_id = ?", (oid,))[0]["payment_method_id"]
    r = ep.call("modify_pending_order_items", {"order_id": oid, "item_ids": ["0000000000"], "new_item_ids": ["1"],
                                               "payment_method_id": pm})  # fmt: skip
    assert r.error.type == "not_found" and "0000000000" in r.error.message


def test_failing_write_is_atomic(ep):
    """modify_pending_order_payment writes refunds before the gift-card charge fails: all of it rolls back."""
    rows = ep.query(
        "SELECT o.order_id, m.payment_method_id FROM orders o JOIN payment_methods m ON m.user_id = o.user_id "
        "WHERE o.status = 'pending' AND m.kind = 'gift_card' AND m.status = 'active' AND m.balance_cents < "
        "(SELECT SUM(unit_price_cents * quantity) FROM order_items WHERE order_id = o.order_id) ORDER BY o.order_id LIMIT 1"
    )
    assert rows
    before = ep.content_hash()
    r = ep.call("modify_pending_order_payment", {"order_id": rows[0]["order_id"], "payment_method_id": rows[0]["payment_method_id"]})
    assert r.error.type == "policy_violation"
    assert len(ep.changes()) == 0 and ep.content_hash() == before


def test_writes_are_isolated_between_forks(ep):
    oid = ep.query("SELECT order_id FROM orders WHERE status = 'pending' ORDER BY order_id LIMIT 1")[0]["order_id"]
    fork = ep.fork()
    assert ep.call("cancel_pending_order", {"order_id": oid, "reason": "no longer needed"}).ok
    assert fork.call("get_order_details", {"order_id": oid}).unwrap()["status"] == "pending"
    assert fork.call("cancel_pending_order", {"order_id": oid, "reason": "ordered by mistake"}).ok
    assert ep.call("get_order_details", {"order_id": oid}).unwrap()["cancel_reason"] == "no longer needed"
    assert ep.state_hash() != fork.state_hash()
    fresh = get_world("retail").episode(0)
    assert not fresh.changes()
    fork.close()


_HASH_SCRIPT = "from toolworld import get_world; e = get_world('retail').episode({seed}); print(e.state_hash(), e.content_hash())"


def _hash_in_new_process(seed: int) -> list[str]:
    env = {**os.environ, "TOOLWORLD_CACHE": tempfile.mkdtemp(prefix="tw-det-")}
    proc = subprocess.run([sys.executable, "-c", _HASH_SCRIPT.format(seed=seed)], capture_output=True, text=True,
                          env=env, timeout=300, check=True)  # fmt: skip
    return proc.stdout.split()


def test_determinism_across_processes(world):
    a, b = _hash_in_new_process(0), _hash_in_new_process(0)
    assert a == b and a[0] == a[1]  # a fresh episode's state hash is the seed image's content hash
    assert a[0] == world.episode(0).state_hash()
    assert _hash_in_new_process(1)[0] != a[0]
