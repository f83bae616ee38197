"""The retail world's tools. Each write tool enforces the numbered rules of ``policy.md`` and cites them.

Error messages are written for the agent: they say which rule blocked the call and what to do instead.
Money is integer cents in the database and decimal dollars in every result.
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Any, Literal

from pydantic import Field

from toolworld.world import Ctx, Entity, ToolError, tool
from toolworld.worlds.shared.arith import calculate

from .common import (
    CANCEL_REASONS,
    NOW,
    RETURN_WINDOW_DAYS,
    US_STATES,
    dollars,
    parse_time,
)

UserId = Annotated[str, Entity("user"), Field(description="The customer's user id, e.g. 'olivia_martin_4821'.")]
OrderId = Annotated[str, Entity("order"), Field(description="The order id, e.g. '#W1234567' (with the '#').")]
ProductId = Annotated[str, Entity("product"), Field(description="The product id, e.g. 'p_8310295741'.")]
ItemId = Annotated[str, Entity("item")]
PaymentMethodId = Annotated[
    str, Entity("payment_method"), Field(description="A payment method id of the customer, e.g. 'credit_card_4821904'.")
]
# Address fields: the tools check them (rule R5) so that a bad address is explained, not just rejected.
Line1 = Annotated[str, Field(description="Street address, e.g. '742 Evergreen Terrace'.")]
Line2 = Annotated[str, Field(description="Apartment, suite or unit (optional), e.g. 'Apt 4B'.")]
City = Annotated[str, Field(description="City, e.g. 'Springfield'.")]
State = Annotated[str, Field(description="Two-letter US state code, e.g. 'IL'.")]
Zip = Annotated[str, Field(description="Five-digit zip code, e.g. '62704'.")]
OrderStatus = Literal[
    "pending", "processed", "shipped", "delivered", "cancelled",
    "return requested", "exchange requested", "returned", "exchanged",
]  # fmt: skip

# -- shared views and checks -------------------------------------------------------------------------------


def _order_row(ctx: Ctx, order_id: str) -> dict[str, Any]:
    row = ctx.one("SELECT * FROM orders WHERE order_id = ?", (order_id,))
    assert row is not None  # existence is checked by Episode.call before the tool runs
    return row


def _order_view(ctx: Ctx, order_id: str) -> dict[str, Any]:
    """The full order as an agent sees it (also returned by every order-changing tool)."""
    o = _order_row(ctx, order_id)
    items = ctx.all(
        "SELECT oi.item_id, oi.product_id, p.name, v.options, oi.quantity, oi.unit_price_cents, oi.status, "
        "oi.exchange_item_id FROM order_items oi JOIN variants v ON v.item_id = oi.item_id "
        "JOIN products p ON p.product_id = oi.product_id WHERE oi.order_id = ? ORDER BY p.name, oi.item_id",
        (order_id,),
    )
    payments = ctx.all(
        "SELECT payment_method_id, kind, amount_cents, status, created_at FROM payments "
        "WHERE order_id = ? ORDER BY payment_id",
        (order_id,),
    )
    subtotal = sum(i["unit_price_cents"] * i["quantity"] for i in items)
    out: dict[str, Any] = {
        "order_id": o["order_id"],
        "user_id": o["user_id"],
        "status": o["status"],
        "placed_at": o["placed_at"],
        "shipping_address": {
            "name": o["ship_name"], "line1": o["ship_line1"], "line2": o["ship_line2"], "city": o["ship_city"],
            "state": o["ship_state"], "zip": o["ship_zip"], "country": o["ship_country"],
        },
        "items": [
            {
                "item_id": i["item_id"],
                "product_id": i["product_id"],
                "name": i["name"],
                "options": json.loads(i["options"]),
                "quantity": i["quantity"],
                "unit_price": dollars(i["unit_price_cents"]),
                "status": i["status"],
                **({"exchange_item_id": i["exchange_item_id"]} if i["exchange_item_id"] else {}),
            }
            for i in items
        ],
        "subtotal": dollars(subtotal),
        "shipping": dollars(o["shipping_cents"]),
        "total": dollars(subtotal + o["shipping_cents"]),
        "payments": [
            {
                "payment_method_id": p["payment_method_id"], "kind": p["kind"], "amount": dollars(p["amount_cents"]),
                "status": p["status"], "created_at": p["created_at"],
            }
            for p in payments
        ],
    }
    for key in ("carrier", "tracking_number", "delivered_at", "cancel_reason"):
        if o[key] is not None:
            out[key] = o[key]
    if o["items_modified"]:
        out["items_modified"] = True
    return out


def _require_status(order: dict[str, Any], allowed: tuple[str, ...], rule: str, action: str, instead: str) -> None:
    if order["status"] not in allowed:
        raise ToolError(
            "policy_violation",
            f"Order {order['order_id']} is '{order['status']}'; {action} only when the order is "
            f"{' or '.join(repr(s) for s in allowed)} (policy {rule}). {instead}",
        )


def _usable_method(ctx: Ctx, user_id: str, payment_method_id: str) -> dict[str, Any]:
    """The payment method, if the customer owns it and it can be used (rule R7)."""
    pm = ctx.one("SELECT * FROM payment_methods WHERE payment_method_id = ?", (payment_method_id,))
    assert pm is not None
    if pm["user_id"] != user_id:
        raise ToolError(
            "policy_violation",
            f"Payment method {payment_method_id} does not belong to customer {user_id}; use one of the customer's "
            "own payment methods (see get_user_details).",
        )
    if pm["status"] != "active":
        raise ToolError(
            "policy_violation",
            f"Payment method {payment_method_id} is {pm['status']} and cannot be used (policy R7); ask the customer "
            "for another payment method.",
        )
    return pm


def _move_money(
    ctx: Ctx, order_id: str, pm: dict[str, Any], kind: str, cents: int, *, immediate: bool = True
) -> dict[str, Any] | None:
    """Record a charge or refund and keep gift-card balances in step (rules R2 and R4).

    Returns the payment as the order view lists it (without ``created_at``), or None when there is nothing to move;
    the calling tool reports it under ``this_call`` (see :func:`_with_this_call`).
    """
    if cents <= 0:
        return None
    gift = pm["kind"] == "gift_card"
    if kind == "charge":
        if gift:
            if pm["balance_cents"] < cents:
                raise ToolError(
                    "policy_violation",
                    f"Gift card {pm['payment_method_id']} has a balance of ${dollars(pm['balance_cents']):.2f}, less "
                    f"than the ${dollars(cents):.2f} to pay (policy R4); choose another payment method.",
                )
            ctx.execute(
                "UPDATE payment_methods SET balance_cents = balance_cents - ? WHERE payment_method_id = ?",
                (cents, pm["payment_method_id"]),
            )
        status = "completed"
    else:
        # Gift-card refunds land at once; card and PayPal refunds (and refunds awaiting returned items) are pending.
        status = "completed" if gift and immediate else "pending"
        if status == "completed":
            ctx.execute(
                "UPDATE payment_methods SET balance_cents = balance_cents + ? WHERE payment_method_id = ?",
                (cents, pm["payment_method_id"]),
            )
    ctx.execute(
        "INSERT INTO payments (order_id, payment_method_id, kind, amount_cents, created_at, status) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        (order_id, pm["payment_method_id"], kind, cents, ctx.now, status),
    )
    return {"payment_method_id": pm["payment_method_id"], "kind": kind, "amount": dollars(cents), "status": status}


def _with_this_call(view: dict[str, Any], moved: list[dict[str, Any] | None]) -> dict[str, Any]:
    """``view`` (an order view) plus ``this_call``: the money this call charged and refunded, and nothing else.

    The order's ``payments`` list is its whole history, and every call of a session happens at the store's same
    clock time, so neither the list nor ``created_at`` can tell this call's payments from an earlier change to
    the same order. An agent quoting "your refund" must be able to read it off the result, as from a real API.
    """
    payments = [p for p in moved if p is not None]
    charged = sum(round(p["amount"] * 100) for p in payments if p["kind"] == "charge")
    refunded = sum(round(p["amount"] * 100) for p in payments if p["kind"] == "refund")
    return {**view, "this_call": {"charged": dollars(charged), "refunded": dollars(refunded), "payments": payments}}


def _net_paid(ctx: Ctx, order_id: str) -> list[tuple[str, int]]:
    """What each payment method still holds of the order's money, in first-charged order. Refunding every amount
    listed returns exactly what the order was paid net of its refunds, never more.

    The payments are replayed in order. A refund comes out of what its method holds; a refund to a method that
    holds less (a price difference refunded to another card, rule R4, or a return refunded to a gift card, rule
    R8) takes the rest from the methods that paid, first-charged first. Netting per method instead would count
    such a refund twice: cancelling after it would refund the paying card in full on top of it.
    """
    held: dict[str, int] = {}
    for pm_id, kind, cents in ctx.db.execute(
        "SELECT payment_method_id, kind, amount_cents FROM payments WHERE order_id = ? ORDER BY payment_id", (order_id,)
    ):
        if kind == "charge":
            held[pm_id] = held.get(pm_id, 0) + cents
            continue
        own = min(held.get(pm_id, 0), cents)
        if own:
            held[pm_id] -= own
        rest = cents - own
        for other, amount in held.items():
            if rest == 0:
                break
            taken = min(amount, rest)
            held[other] = amount - taken
            rest -= taken
    return [(pm_id, cents) for pm_id, cents in held.items() if cents > 0]


def _order_items(ctx: Ctx, order_id: str, item_ids: list[str], want_status: str, rule: str) -> list[dict[str, Any]]:
    """The order lines for ``item_ids``; each must be in the order, once, with status ``want_status``."""
    if not item_ids:
        raise ToolError("invalid_arguments", "item_ids is empty; list the item ids (from get_order_details) to act on.")
    if len(set(item_ids)) != len(item_ids):
        raise ToolError("invalid_arguments", "item_ids lists an item twice; list each item once.")
    lines = []
    for item_id in item_ids:
        line = ctx.one("SELECT * FROM order_items WHERE order_id = ? AND item_id = ?", (order_id, item_id))
        if line is None:
            in_order = [r["item_id"] for r in ctx.all("SELECT item_id FROM order_items WHERE order_id = ?", (order_id,))]
            raise ToolError(
                "not_found",
                f"Item {item_id} is not in order {order_id}; its items are {', '.join(in_order)} "
                "(see get_order_details).",
            )
        if line["status"] != want_status:
            raise ToolError(
                "policy_violation",
                f"Item {item_id} of order {order_id} is '{line['status']}' and cannot be changed again (policy {rule}).",
            )
        lines.append(line)
    return lines


def _replacements(ctx: Ctx, lines: list[dict[str, Any]], new_item_ids: list[str], rule: str) -> list[dict[str, Any]]:
    """Check each replacement variant: same product, a different variant, in stock for the quantity (R3/R9)."""
    if len(new_item_ids) != len(lines):
        raise ToolError(
            "invalid_arguments",
            f"item_ids has {len(lines)} ids but new_item_ids has {len(new_item_ids)}; give one replacement per item, "
            "in the same order.",
        )
    variants = []
    for line, new_id in zip(lines, new_item_ids, strict=True):
        v = ctx.one("SELECT * FROM variants WHERE item_id = ?", (new_id,))
        assert v is not None
        if v["product_id"] != line["product_id"]:
            raise ToolError(
                "policy_violation",
                f"Item {new_id} is a different product than item {line['item_id']}; an item can only be swapped for "
                f"another variant of the same product (policy {rule}). See get_product_details for its variants.",
            )
        if new_id == line["item_id"]:
            raise ToolError("conflict", f"Item {new_id} is the item already ordered; choose a different variant.")
        if v["stock"] < line["quantity"]:
            raise ToolError(
                "policy_violation",
                f"Item {new_id} is out of stock (available: {v['stock']}, needed: {line['quantity']}) (policy {rule}); "
                "offer the customer another variant that is in stock.",
            )
        variants.append(v)
    return variants


_ZIP_RE = re.compile(r"^\d{5}$")


def _clean_address(line1: str, line2: str, city: str, state: str, zip: str, rule: str) -> dict[str, str]:
    state_code = state.strip().upper()
    problems = []
    if not line1.strip():
        problems.append("line1 (street address) is empty")
    if not city.strip():
        problems.append("city is empty")
    if state_code not in US_STATES:
        problems.append(f"state {state!r} is not a two-letter US state code such as 'CA' or 'NY'")
    if not _ZIP_RE.match(zip.strip()):
        problems.append(f"zip {zip!r} is not a five-digit US zip code")
    if problems:
        raise ToolError("invalid_arguments", f"Incomplete or invalid address (policy {rule}): " + "; ".join(problems) + ".")
    return {"line1": line1.strip(), "line2": line2.strip(), "city": city.strip(), "state": state_code, "zip": zip.strip()}


# -- read tools ------------------------------------------------------------------------------------------


@tool(yields={"user": "user_id"}, identifies=True)
def find_user_by_email(ctx: Ctx, email: Annotated[str, Entity("email")]) -> dict[str, str]:
    """Find a customer's user id from their email address.

    Args:
        email: The customer's email address, e.g. 'olivia.martin@example.com'.
    """
    user_id = ctx.value("SELECT user_id FROM users WHERE email = ?", (email.strip().lower(),))
    if user_id is None:
        raise ToolError(
            "not_found",
            f"No customer has the email {email!r}. Ask the customer to check it, or find them by name and zip code "
            "with find_user_by_name_zip.",
        )
    return {"user_id": user_id}


@tool(yields={"user": "user_id"}, identifies=True)
def find_user_by_name_zip(
    ctx: Ctx,
    first_name: Annotated[str, Entity("first_name")],
    last_name: Annotated[str, Entity("last_name")],
    zip: Annotated[str, Entity("zip")],
) -> dict[str, str]:
    """Find a customer's user id from their first name, last name and the zip code of one of their addresses.

    Args:
        first_name: The customer's first name, e.g. 'Olivia'.
        last_name: The customer's last name, e.g. 'Martin'.
        zip: A five-digit zip code of one of the customer's addresses, e.g. '94110'.
    """
    rows = ctx.all(
        "SELECT DISTINCT u.user_id FROM users u JOIN addresses a ON a.user_id = u.user_id "
        "WHERE lower(u.first_name) = lower(?) AND lower(u.last_name) = lower(?) AND a.zip = ?",
        (first_name.strip(), last_name.strip(), zip.strip()),
    )
    if not rows:
        raise ToolError(
            "not_found",
            f"No customer named {first_name} {last_name} has an address with zip code {zip}. Ask the customer to check "
            "the spelling and the zip code, or use their email with find_user_by_email.",
        )
    return {"user_id": rows[0]["user_id"]}


@tool(yields={"order": "orders[]", "payment_method": "payment_methods[].payment_method_id",
              "address": "addresses[].address_id", "email": "email"})  # fmt: skip
def get_user_details(ctx: Ctx, user_id: UserId) -> dict[str, Any]:
    """Get a customer's profile: name, contact details, addresses, payment methods and order ids."""
    u = ctx.one("SELECT * FROM users WHERE user_id = ?", (user_id,))
    assert u is not None
    addresses = ctx.all(
        "SELECT address_id, line1, line2, city, state, zip, country, is_default FROM addresses "
        "WHERE user_id = ? ORDER BY is_default DESC, address_id",
        (user_id,),
    )
    methods = ctx.all(
        "SELECT payment_method_id, kind, brand, last_four, expires, balance_cents, status FROM payment_methods "
        "WHERE user_id = ? ORDER BY payment_method_id",
        (user_id,),
    )
    orders = ctx.all("SELECT order_id FROM orders WHERE user_id = ? ORDER BY placed_at, order_id", (user_id,))
    return {
        "user_id": u["user_id"],
        "name": {"first_name": u["first_name"], "last_name": u["last_name"]},
        "email": u["email"],
        "phone": u["phone"],
        "tier": u["tier"],
        "member_since": u["created_at"][:10],
        "addresses": [{**a, "is_default": bool(a["is_default"])} for a in addresses],
        "payment_methods": [_method_view(m) for m in methods],
        "orders": [o["order_id"] for o in orders],
    }


def _method_view(m: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"payment_method_id": m["payment_method_id"], "kind": m["kind"], "status": m["status"]}
    if m["kind"] in ("credit_card", "debit_card"):
        out.update(brand=m["brand"], last_four=m["last_four"], expires=m["expires"])
    if m["kind"] == "gift_card":
        out["balance"] = dollars(m["balance_cents"])
    return out


@tool(yields={"order": "[].order_id"})
def list_user_orders(ctx: Ctx, user_id: UserId, status: OrderStatus | None = None) -> list[dict[str, Any]]:
    """List a customer's orders, newest first, with status, date, item count and total.

    Args:
        status: Only orders with this status (all orders when omitted).
    """
    sql = (
        "SELECT o.order_id, o.status, o.placed_at, o.shipping_cents, "
        "SUM(oi.quantity) AS n_items, SUM(oi.quantity * oi.unit_price_cents) AS subtotal "
        "FROM orders o JOIN order_items oi ON oi.order_id = o.order_id WHERE o.user_id = ?"
    )
    params: list[Any] = [user_id]
    if status is not None:
        sql += " AND o.status = ?"
        params.append(status)
    sql += " GROUP BY o.order_id ORDER BY o.placed_at DESC, o.order_id"
    return [
        {"order_id": r["order_id"], "status": r["status"], "placed_at": r["placed_at"], "items": r["n_items"],
         "total": dollars(r["subtotal"] + r["shipping_cents"])}
        for r in ctx.all(sql, params)
    ]  # fmt: skip


@tool(yields={"user": "user_id", "item": "items[].item_id", "product": "items[].product_id",
              "payment_method": "payments[].payment_method_id"})  # fmt: skip
def get_order_details(ctx: Ctx, order_id: OrderId) -> dict[str, Any]:
    """Get an order: status, shipping address, items (with item ids and options), totals, payments and tracking."""
    return _order_view(ctx, order_id)


@tool(yields={"product": "[].product_id"})
def list_product_types(ctx: Ctx) -> list[dict[str, str]]:
    """List every product type the store sells, with its product id and category."""
    return ctx.all("SELECT product_id, name, category FROM products ORDER BY name")


@tool(yields={"item": "variants[].item_id"})
def get_product_details(ctx: Ctx, product_id: ProductId) -> dict[str, Any]:
    """Get a product with all its variants: item id, options, price and whether it is in stock."""
    p = ctx.one("SELECT * FROM products WHERE product_id = ?", (product_id,))
    assert p is not None
    variants = ctx.all(
        "SELECT item_id, options, price_cents, stock FROM variants WHERE product_id = ? ORDER BY item_id", (product_id,)
    )
    return {
        **p,
        "variants": [
            {"item_id": v["item_id"], "options": json.loads(v["options"]), "price": dollars(v["price_cents"]),
             "available": v["stock"] > 0}
            for v in variants
        ],
    }  # fmt: skip


_SEARCH_MAX_CHARS = 500
_SEARCH_MAX_WORDS = 12


@tool(yields={"product": "[].product_id"})
def search_products(ctx: Ctx, query: Annotated[str, Field(min_length=1)], category: str | None = None) -> list[dict[str, Any]]:
    """Search the catalogue by words in a product's name, description, brand or category.

    Args:
        query: Words to look for, e.g. 'wireless headphones'. Every word must match.
        category: Only products in this category (see list_product_types).
    """
    # Bounded before any SQL is built: each word is one LIKE term, and SQLite refuses a pattern over 50,000
    # bytes or an expression tree 1,000 terms deep, which a pasted page of text reaches.
    if len(query) > _SEARCH_MAX_CHARS:
        raise ToolError("invalid_arguments", f"query is {len(query):,} characters long; search with a few words "
                        f"(at most {_SEARCH_MAX_CHARS} characters), e.g. 'wireless headphones'.")  # fmt: skip
    words = list(dict.fromkeys(w for w in re.findall(r"\w+", query.lower()) if w))
    if not words:
        raise ToolError("invalid_arguments", "query has no words to search for; search with words from a "
                        "product's name, brand or category, e.g. 'wireless headphones'.")  # fmt: skip
    if len(words) > _SEARCH_MAX_WORDS:
        raise ToolError("invalid_arguments", f"query has {len(words)} different words; every word must match, so "
                        f"search with at most {_SEARCH_MAX_WORDS}, e.g. 'wireless headphones'.")  # fmt: skip
    sql = "SELECT product_id, name, category, brand FROM products WHERE 1 = 1"
    params: list[Any] = []
    for w in words:
        # '_' is a word character and a LIKE wildcard: escaped, a search for "a_b" matches only "a_b".
        sql += " AND lower(name || ' ' || description || ' ' || brand || ' ' || category) LIKE ? ESCAPE '\\'"
        params.append("%" + w.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%")
    if category is not None:
        sql += " AND lower(category) = lower(?)"
        params.append(category.strip())
    return ctx.all(sql + " ORDER BY name LIMIT 20", params)


@tool(yields={"product": "product_id"})
def get_item_details(ctx: Ctx, item_id: Annotated[str, Entity("item"), Field(description="A ten-digit item id.")]) -> dict[str, Any]:
    """Get one variant (item) of a product: its product, options, price and stock availability."""
    v = ctx.one(
        "SELECT v.item_id, v.product_id, p.name, v.options, v.price_cents, v.stock FROM variants v "
        "JOIN products p ON p.product_id = v.product_id WHERE v.item_id = ?",
        (item_id,),
    )
    assert v is not None
    return {"item_id": v["item_id"], "product_id": v["product_id"], "name": v["name"],
            "options": json.loads(v["options"]), "price": dollars(v["price_cents"]), "available": v["stock"] > 0,
            "in_stock": v["stock"]}  # fmt: skip


@tool
def track_order(ctx: Ctx, order_id: OrderId) -> dict[str, Any]:
    """Get an order's shipping progress: status, carrier, tracking number and delivery date."""
    o = _order_row(ctx, order_id)
    out = {"order_id": order_id, "status": o["status"], "placed_at": o["placed_at"]}
    if o["carrier"]:
        out.update(carrier=o["carrier"], tracking_number=o["tracking_number"])
    if o["delivered_at"]:
        out["delivered_at"] = o["delivered_at"]
    if o["status"] == "pending":
        out["note"] = "Not shipped yet: the order can still be changed or cancelled."
    return out


# -- write tools -----------------------------------------------------------------------------------------


@tool(mutates=True)
def cancel_pending_order(
    ctx: Ctx, order_id: OrderId, reason: Literal["no longer needed", "ordered by mistake"]
) -> dict[str, Any]:
    """Cancel a pending order: refund what was paid to the original payment methods and restock the items.

    Returns the cancelled order; its "this_call" field says what this cancellation "refunded" (in dollars) and to
    which payment methods ("payments"), while the order's own "payments" list is its whole history.

    Args:
        reason: Why the customer cancels: 'no longer needed' or 'ordered by mistake'.
    """
    order = _order_row(ctx, order_id)
    _require_status(order, ("pending",), "R1", "it can be cancelled",
                    "A delivered order's items can be returned with return_delivered_order_items instead.")
    assert reason in CANCEL_REASONS
    moved = []
    for pm_id, net in _net_paid(ctx, order_id):
        pm = ctx.one("SELECT * FROM payment_methods WHERE payment_method_id = ?", (pm_id,))
        assert pm is not None
        moved.append(_move_money(ctx, order_id, pm, "refund", net))
    ctx.execute(
        "UPDATE variants SET stock = stock + (SELECT quantity FROM order_items oi "
        "WHERE oi.order_id = ? AND oi.item_id = variants.item_id) "
        "WHERE item_id IN (SELECT item_id FROM order_items WHERE order_id = ?)",
        (order_id, order_id),
    )
    ctx.execute("UPDATE order_items SET status = 'cancelled' WHERE order_id = ?", (order_id,))
    ctx.execute("UPDATE orders SET status = 'cancelled', cancel_reason = ? WHERE order_id = ?", (reason, order_id))
    return _with_this_call(_order_view(ctx, order_id), moved)


@tool(mutates=True)
def modify_pending_order_items(
    ctx: Ctx,
    order_id: OrderId,
    item_ids: Annotated[list[ItemId], Field(description="Item ids in the order to swap.")],
    new_item_ids: Annotated[list[ItemId], Field(description="Replacement item ids, one per item, same order.")],
    payment_method_id: PaymentMethodId,
) -> dict[str, Any]:
    """Swap items of a pending order for other variants of the same products (allowed once per order).

    The price difference is charged to, or refunded to, the given payment method of the customer. Returns the
    updated order; its "this_call" field says what this change "charged" or "refunded" (in dollars, 0 when the
    prices are equal) and to which payment method ("payments").
    """
    order = _order_row(ctx, order_id)
    _require_status(order, ("pending",), "R3", "its items can be changed",
                    "For a delivered order use exchange_delivered_order_items.")
    if order["items_modified"]:
        raise ToolError(
            "policy_violation",
            f"The items of order {order_id} were already modified once; items can be modified only once per order "
            "(policy R3). The order can still be cancelled, or transfer the customer to a human agent.",
        )
    lines = _order_items(ctx, order_id, item_ids, "ordered", "R3")
    variants = _replacements(ctx, lines, new_item_ids, "R3")
    in_order = {r["item_id"] for r in ctx.all("SELECT item_id FROM order_items WHERE order_id = ?", (order_id,))}
    for v in variants:
        if v["item_id"] in in_order:
            raise ToolError("conflict", f"Item {v['item_id']} is already in order {order_id} as a separate line.")
    pm = _usable_method(ctx, order["user_id"], payment_method_id)
    diff = 0
    for line, v in zip(lines, variants, strict=True):
        diff += (v["price_cents"] - line["unit_price_cents"]) * line["quantity"]
        ctx.execute("UPDATE variants SET stock = stock + ? WHERE item_id = ?", (line["quantity"], line["item_id"]))
        ctx.execute("UPDATE variants SET stock = stock - ? WHERE item_id = ?", (line["quantity"], v["item_id"]))
        ctx.execute(
            "UPDATE order_items SET item_id = ?, unit_price_cents = ? WHERE order_id = ? AND item_id = ?",
            (v["item_id"], v["price_cents"], order_id, line["item_id"]),
        )
    moved = _move_money(ctx, order_id, pm, "charge" if diff > 0 else "refund", abs(diff))
    ctx.execute("UPDATE orders SET items_modified = 1 WHERE order_id = ?", (order_id,))
    return _with_this_call(_order_view(ctx, order_id), [moved])


@tool(mutates=True)
def modify_pending_order_address(
    ctx: Ctx, order_id: OrderId, line1: Line1, city: City, state: State, zip: Zip, line2: Line2 = ""
) -> dict[str, Any]:
    """Change the shipping address of a pending order."""
    order = _order_row(ctx, order_id)
    _require_status(order, ("pending",), "R5", "its shipping address can be changed",
                    "The parcel is already on its way; the customer can contact the carrier.")
    addr = _clean_address(line1, line2, city, state, zip, "R5")
    current = {k: order[f"ship_{k}"] for k in addr}
    if current == addr:
        raise ToolError("conflict", f"Order {order_id} already ships to that address; nothing to change.")
    ctx.execute(
        "UPDATE orders SET ship_line1 = ?, ship_line2 = ?, ship_city = ?, ship_state = ?, ship_zip = ? "
        "WHERE order_id = ?",
        (addr["line1"], addr["line2"], addr["city"], addr["state"], addr["zip"], order_id),
    )
    return _order_view(ctx, order_id)


@tool(mutates=True)
def modify_pending_order_payment(ctx: Ctx, order_id: OrderId, payment_method_id: PaymentMethodId) -> dict[str, Any]:
    """Pay a pending order with another payment method of the customer: the old charge is refunded and the new
    method is charged the order total.

    Returns the updated order; its "this_call" field says what this change "refunded" to the old payment method
    and "charged" to the new one (in dollars), with each payment listed under "payments".
    """
    order = _order_row(ctx, order_id)
    _require_status(order, ("pending",), "R6", "its payment method can be changed", "")
    paid = _net_paid(ctx, order_id)
    if [pm_id for pm_id, _ in paid] == [payment_method_id]:
        raise ToolError(
            "conflict", f"Order {order_id} is already paid with {payment_method_id}; choose a different payment method."
        )
    new_pm = _usable_method(ctx, order["user_id"], payment_method_id)
    moved = []
    for pm_id, net in paid:
        old_pm = ctx.one("SELECT * FROM payment_methods WHERE payment_method_id = ?", (pm_id,))
        assert old_pm is not None
        moved.append(_move_money(ctx, order_id, old_pm, "refund", net))
    total = sum(net for _, net in paid)
    try:
        moved.append(_move_money(ctx, order_id, new_pm, "charge", total))
    except ToolError as err:  # restate R4's message as R6 (a gift card must cover the whole total)
        raise ToolError("policy_violation", err.message.replace("(policy R4)", "(policy R6)")) from None
    return _with_this_call(_order_view(ctx, order_id), moved)


def _check_return_window(order: dict[str, Any], action: str, rule: str) -> None:
    if order["status"] in ("return requested", "exchange requested", "returned", "exchanged"):
        raise ToolError(
            "policy_violation",
            f"Order {order['order_id']} already has a return or exchange ('{order['status']}'); only one return or "
            "exchange can be requested per order (policy R10). Transfer the customer to a human agent.",
        )
    _require_status(order, ("delivered",), rule, action, "Pending orders can be cancelled or modified instead.")
    days = (parse_time(NOW) - parse_time(order["delivered_at"])).total_seconds() / 86400
    if days > RETURN_WINDOW_DAYS:
        raise ToolError(
            "policy_violation",
            f"Order {order['order_id']} was delivered on {order['delivered_at'][:10]}, {int(days)} days ago; "
            f"{action} only within {RETURN_WINDOW_DAYS} days of delivery (policy {rule}).",
        )


@tool(mutates=True)
def return_delivered_order_items(
    ctx: Ctx,
    order_id: OrderId,
    item_ids: Annotated[list[ItemId], Field(description="Item ids in the order to return.")],
    payment_method_id: PaymentMethodId,
) -> dict[str, Any]:
    """Request the return of items of a delivered order; the refund goes to the original payment method or a gift
    card of the customer and is issued once the items arrive.

    Returns the updated order; its "this_call" field says what this return "refunded" (in dollars) and to which
    payment method ("payments").

    Args:
        payment_method_id: Where the refund goes: the order's original payment method or a gift card of the customer.
    """
    order = _order_row(ctx, order_id)
    _check_return_window(order, "items can be returned", "R8")
    lines = _order_items(ctx, order_id, item_ids, "ordered", "R8")
    pm = _usable_method(ctx, order["user_id"], payment_method_id)
    original = {pm_id for pm_id, _ in _net_paid(ctx, order_id)}
    if payment_method_id not in original and pm["kind"] != "gift_card":
        raise ToolError(
            "policy_violation",
            f"A refund can go only to the original payment method ({', '.join(sorted(original))}) or to a gift card of "
            "the customer (policy R8).",
        )
    refund = sum(line["unit_price_cents"] * line["quantity"] for line in lines)
    for line in lines:
        ctx.execute(
            "UPDATE order_items SET status = 'return requested' WHERE order_id = ? AND item_id = ?",
            (order_id, line["item_id"]),
        )
    ctx.execute("UPDATE orders SET status = 'return requested' WHERE order_id = ?", (order_id,))
    moved = _move_money(ctx, order_id, pm, "refund", refund, immediate=False)
    return _with_this_call(_order_view(ctx, order_id), [moved])


@tool(mutates=True)
def exchange_delivered_order_items(
    ctx: Ctx,
    order_id: OrderId,
    item_ids: Annotated[list[ItemId], Field(description="Item ids in the order to exchange.")],
    new_item_ids: Annotated[list[ItemId], Field(description="Replacement item ids, one per item, same order.")],
    payment_method_id: PaymentMethodId,
) -> dict[str, Any]:
    """Request an exchange of items of a delivered order for other variants of the same products; the price
    difference is charged to, or refunded to, the given payment method of the customer.

    Returns the updated order; its "this_call" field says what this exchange "charged" or "refunded" (in dollars,
    0 when the prices are equal) and to which payment method ("payments").
    """
    order = _order_row(ctx, order_id)
    _check_return_window(order, "items can be exchanged", "R9")
    lines = _order_items(ctx, order_id, item_ids, "ordered", "R9")
    variants = _replacements(ctx, lines, new_item_ids, "R9")
    pm = _usable_method(ctx, order["user_id"], payment_method_id)
    diff = 0
    for line, v in zip(lines, variants, strict=True):
        diff += (v["price_cents"] - line["unit_price_cents"]) * line["quantity"]
        ctx.execute("UPDATE variants SET stock = stock - ? WHERE item_id = ?", (line["quantity"], v["item_id"]))
        ctx.execute(
            "UPDATE order_items SET status = 'exchange requested', exchange_item_id = ? WHERE order_id = ? AND item_id = ?",
            (v["item_id"], order_id, line["item_id"]),
        )
    ctx.execute("UPDATE orders SET status = 'exchange requested' WHERE order_id = ?", (order_id,))
    moved = _move_money(ctx, order_id, pm, "charge" if diff > 0 else "refund", abs(diff), immediate=False)
    return _with_this_call(_order_view(ctx, order_id), [moved])


@tool(mutates=True)
def modify_user_address(
    ctx: Ctx, user_id: UserId, line1: Line1, city: City, state: State, zip: Zip, line2: Line2 = ""
) -> dict[str, Any]:
    """Change a customer's default address (existing orders keep their shipping address)."""
    addr = _clean_address(line1, line2, city, state, zip, "R11")
    current = ctx.one("SELECT * FROM addresses WHERE user_id = ? AND is_default = 1", (user_id,))
    assert current is not None
    if {k: current[k] for k in addr} == addr:
        raise ToolError("conflict", "That is already the customer's default address; nothing to change.")
    ctx.execute(
        "UPDATE addresses SET line1 = ?, line2 = ?, city = ?, state = ?, zip = ? WHERE address_id = ?",
        (addr["line1"], addr["line2"], addr["city"], addr["state"], addr["zip"], current["address_id"]),
    )
    return {"user_id": user_id, "default_address": {**addr, "address_id": current["address_id"], "country": "USA"}}


@tool(mutates=True, yields={"ticket": "ticket_id"}, confirm=False)
def transfer_to_human_agent(
    ctx: Ctx,
    summary: Annotated[str, Field(description="What the customer needs and what was tried (one or two sentences).")],
    user_id: UserId | None = None,
    order_id: OrderId | None = None,
) -> dict[str, Any]:
    """Hand the conversation to a human agent by opening a support ticket with a summary of the case.

    Use it only when the request cannot be handled with the other tools and the policy.
    """
    if not summary.strip():
        raise ToolError("policy_violation", "A transfer needs a summary of the customer's problem (policy R12).")
    cur = ctx.execute(
        "INSERT INTO tickets (user_id, order_id, summary, status, created_at) VALUES (?, ?, ?, 'open', ?)",
        (user_id, order_id, summary.strip(), ctx.now),
    )
    return {"ticket_id": cur.lastrowid, "status": "open",
            "message": "Transferred: a human agent will contact the customer. Tell the customer and end the chat."}  # fmt: skip


TOOLS = [
    find_user_by_email,
    find_user_by_name_zip,
    get_user_details,
    list_user_orders,
    get_order_details,
    track_order,
    list_product_types,
    search_products,
    get_product_details,
    get_item_details,
    calculate,
    cancel_pending_order,
    modify_pending_order_items,
    modify_pending_order_address,
    modify_pending_order_payment,
    return_delivered_order_items,
    exchange_delivered_order_items,
    modify_user_address,
    transfer_to_human_agent,
]
