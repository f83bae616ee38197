"""The retail world's deterministic seed data: catalogue, customers, orders with their whole history, payments.

Every draw comes from the ``Rng`` passed in (one child stream per part, so changing how orders are drawn does
not shift the customers), money is integer cents and times are whole seconds before the world's clock, so a
seed gives byte-identical rows on every machine and Python version. Sets are used for membership tests
only; everything that is iterated is a list or a dict in insertion order.

The rows are built to the rules the tools enforce (``policy.md``): an order's fields always match its
status, payments add up to what the items cost, exchanges stay within one product, and enough orders sit
inside the 30-day return window for returns and exchanges to be possible.
"""

from __future__ import annotations

import bisect
import itertools
import json
import sqlite3
from dataclasses import dataclass, field
from datetime import timedelta

from toolworld.world.rng import Rng
from toolworld.worlds.shared.draw import fresh as _fresh
from toolworld.worlds.shared.draw import pct as _pct
from toolworld.worlds.shared.draw import slug as _slug
from toolworld.worlds.shared.draw import weighted as _weighted
from toolworld.worlds.shared.people import email as _email
from toolworld.worlds.shared.places import street as _street

from . import vocab
from .common import CANCEL_REASONS, NOW, format_time, parse_time, shipping_for

N_USERS = 600
N_TICKETS = 40
#: Orders by status (1,600 in all): the shares of a store whose tasks need many pending and recent orders.
STATUS_COUNTS: tuple[tuple[str, int], ...] = (
    ("pending", 288), ("processed", 128), ("shipped", 96), ("delivered", 720), ("cancelled", 160),
    ("returned", 80), ("exchanged", 64), ("return requested", 32), ("exchange requested", 32),
)  # fmt: skip
#: Delivered orders whose delivery is inside the return window (the rest were delivered long ago).
RECENT_DELIVERED = 240
POST_DELIVERY = ("return requested", "exchange requested", "returned", "exchanged")

MINUTE, HOUR, DAY = 60, 3600, 86400
_NOW = parse_time(NOW)
#: Accounts are opened between 2019-01-01 and the end of April 2026 (as ages in seconds before NOW).
_CREATED_MAX_AGE = int((_NOW - parse_time("2019-01-01T00:00:00Z")).total_seconds())
_CREATED_MIN_AGE = int((_NOW - parse_time("2026-04-30T23:59:59Z")).total_seconds())
_HISTORIC_PRICE_MIN_AGE = 60 * DAY


def _ts(age_s: int) -> str:
    """The ISO time ``age_s`` whole seconds before the world's clock (integers keep it exact)."""
    return format_time(_NOW - timedelta(seconds=age_s))


# -- row holders -------------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Variant:
    item_id: str
    product_id: str
    price: int
    stock: int


@dataclass(slots=True)
class _User:
    user_id: str
    first: str
    last: str
    created_age: int
    # (address_id, line1, line2, city, state, zip)
    addresses: list[tuple[str, str, str, str, str, str]] = field(default_factory=list)
    default_index: int = 0
    methods: list[tuple[str, str, int | None]] = field(default_factory=list)  # id, kind, gift balance (active only)
    weight: int = 1


@dataclass(slots=True)
class _Line:
    item_id: str
    product_id: str
    quantity: int
    price: int  # unit price paid
    status: str = "ordered"
    exchange_item_id: str | None = None


@dataclass(slots=True)
class _Order:
    order_id: str
    status: str
    user: _User
    placed_age: int
    delivered_age: int | None = None
    event_age: int | None = None  # cancellation, return/exchange request or completion
    items: list[_Line] = field(default_factory=list)


# -- catalogue ---------------------------------------------------------------------------------------------


def _catalogue(rng: Rng) -> tuple[list[tuple[str, ...]], list[_Variant], list[tuple[object, ...]]]:
    """Products and 5-30 variants each, drawn from the cartesian product of the product's option values."""
    products: list[tuple[str, ...]] = []
    variants: list[_Variant] = []
    variant_rows: list[tuple[object, ...]] = []
    used_products: set[str] = set()
    used_items: set[str] = set()
    for pt in vocab.PRODUCTS:
        product_id = _fresh(rng, used_products, lambda r: f"p_{r.randint(10**9, 10**10 - 1)}")
        products.append((product_id, pt.name, pt.category, pt.brand, pt.description))
        combos = list(itertools.product(*(values for _, values in pt.options)))
        k = rng.randint(5, min(30, len(combos)))
        for index in sorted(rng.sample(range(len(combos)), k)):
            combo = combos[index]
            options = {dim: value for (dim, _), (value, _) in zip(pt.options, combo, strict=True)}
            price = pt.base_cents + sum(delta for _, delta in combo)
            roll = rng.below(100)
            if roll < 15:
                price -= 50  # ..49 instead of ..99
            elif roll < 45:
                price += rng.randint(-300, 300)  # arbitrary cents, as real catalogues drift
            price = max(price, 199)
            stock = 0 if _pct(rng, 15) else rng.randint(1, 60)
            item_id = _fresh(rng, used_items, lambda r: str(r.randint(10**9, 10**10 - 1)))
            variants.append(_Variant(item_id, product_id, price, stock))
            variant_rows.append(
                (item_id, product_id, json.dumps(options, sort_keys=True, separators=(",", ":")), price, stock)
            )
    return products, variants, variant_rows


# -- customers ---------------------------------------------------------------------------------------------


def _customers(rng: Rng) -> tuple[list[_User], list[tuple[object, ...]], list[tuple[object, ...]],
                                  list[tuple[object, ...]]]:  # fmt: skip
    """Users with addresses and payment methods; (first, last, zip) always names exactly one user."""
    r_users, r_addr, r_pay = rng.child("users"), rng.child("addresses"), rng.child("payment_methods")
    users: list[_User] = []
    user_rows: list[tuple[object, ...]] = []
    addr_rows: list[tuple[object, ...]] = []
    pm_rows: list[tuple[object, ...]] = []
    used_ids: set[str] = set()
    used_emails: set[str] = set()
    used_phones: set[str] = set()
    used_addr: set[str] = set()
    used_pm: set[str] = set()
    zip_owner: dict[tuple[str, str, str], str] = {}
    for _ in range(N_USERS):
        if users and _pct(r_users, 2):  # namesakes: the zip code is what tells them apart
            twin = users[r_users.below(len(users))]
            first, last = twin.first, twin.last
        else:
            first, last = r_users.choice(vocab.FIRST_NAMES), r_users.choice(vocab.LAST_NAMES)
        stem = f"{_slug(first)}_{_slug(last)}_"
        user_id = _fresh(r_users, used_ids, lambda r, stem=stem: f"{stem}{r.randint(1000, 9999)}")
        email = _fresh(r_users, used_emails, lambda r, f=first, la=last: _email(r, f, la))
        created_age = r_users.randint(_CREATED_MIN_AGE, _CREATED_MAX_AGE)
        tier = _weighted(r_users, (("regular", 75), ("silver", 17), ("gold", 8)))
        user = _User(user_id, first, last, created_age)
        user.weight = r_users.weighted([0, 1, 2, 4, 8, 16], [8, 40, 25, 15, 9, 3])  # skew: a few buy a lot

        # addresses
        n_addr = r_addr.weighted([1, 2, 3], [60, 30, 10])
        user.default_index = r_addr.below(n_addr)
        key_first, key_last = first.lower(), last.lower()
        for i in range(n_addr):
            for _ in range(1000):  # a namesake may already live at the drawn zip: draw another place
                city = r_addr.choice(vocab.CITIES)
                zip_code = f"{r_addr.randint(city.zip_lo, city.zip_hi):05d}"
                owner = zip_owner.get((key_first, key_last, zip_code))
                if owner is None or owner == user_id:
                    zip_owner[(key_first, key_last, zip_code)] = user_id
                    break
            else:
                raise RuntimeError(f"no free zip code for {first} {last}: the city list is too small")
            line1, line2 = _street(r_addr)
            address_id = _fresh(r_addr, used_addr, lambda r: f"addr_{r.randint(10000, 99999)}")
            user.addresses.append((address_id, line1, line2, city.name, city.state, zip_code))
            addr_rows.append((address_id, user_id, line1, line2, city.name, city.state, zip_code, "USA",
                              int(i == user.default_index)))  # fmt: skip
        home = user.addresses[user.default_index]
        home_city = next(c for c in vocab.CITIES if c.name == home[3] and c.state == home[4])

        # phone: the home city's area code (or an old number from elsewhere), fictional 555-01xx line
        def phone(r: Rng, area: str = home_city.area_code) -> str:
            code = area if _pct(r, 80) else r.choice(vocab.AREA_CODES)
            return f"+1-{code}-555-01{r.randint(0, 99):02d}"

        phone_number = _fresh(r_users, used_phones, phone)
        user_rows.append((user_id, first, last, email, phone_number, tier, _ts(created_age)))

        # payment methods: the first is always an active card or PayPal
        n_pm = r_pay.weighted([1, 2, 3, 4], [40, 35, 18, 7])
        cards_seen: set[tuple[str, str]] = set()
        has_paypal = False
        for i in range(n_pm):
            if i == 0:
                kind = r_pay.weighted(["credit_card", "debit_card", "paypal"], [55, 25, 20])
            else:
                kind = r_pay.weighted(["credit_card", "debit_card", "gift_card", "paypal"], [40, 20, 28, 12])
            if kind == "paypal" and has_paypal:
                kind = "gift_card"
            has_paypal = has_paypal or kind == "paypal"
            pm_id = _fresh(r_pay, used_pm, lambda r, k=kind: f"{k}_{r.randint(10**6, 10**7 - 1)}")
            brand = last_four = expires = ""
            balance: int | None = None
            status = "active"
            if kind in ("credit_card", "debit_card"):
                while True:
                    brand = _weighted(r_pay, (("visa", 45), ("mastercard", 30), ("amex", 15), ("discover", 10)))
                    last_four = r_pay.digits(4)
                    if (brand, last_four) not in cards_seen:
                        cards_seen.add((brand, last_four))
                        break
                if i > 0 and _pct(r_pay, 22):
                    year = r_pay.randint(2021, 2026)
                    month = r_pay.randint(1, 4 if year == 2026 else 12)
                    status = "expired"
                else:
                    year = r_pay.randint(2026, 2031)
                    month = r_pay.randint(6 if year == 2026 else 1, 12)
                expires = f"{year}-{month:02d}"
            elif kind == "gift_card":
                balance = r_pay.randint(0, 30000)
            pm_rows.append((pm_id, user_id, kind, brand, last_four, expires, balance, status))
            if status == "active":
                user.methods.append((pm_id, kind, balance))
        users.append(user)
    return users, user_rows, addr_rows, pm_rows


# -- orders ------------------------------------------------------------------------------------------------

_CARRIERS = (("UPS", 35), ("USPS", 30), ("FedEx", 25), ("DHL", 10))
_ALNUM = "ABCDEFGHJKLMNPRSTUVWXYZ0123456789"


def _tracking(rng: Rng, carrier: str) -> str:
    """A tracking number in the shape each carrier uses (made up, never a real parcel)."""
    if carrier == "UPS":
        return "1Z" + "".join(rng.choice(_ALNUM) for _ in range(6)) + rng.digits(10)
    if carrier == "USPS":
        return "9400" + rng.digits(18)
    if carrier == "FedEx":
        return str(rng.randint(1, 9)) + rng.digits(11)
    return str(rng.randint(1, 9)) + rng.digits(9)


def _ages(rng: Rng, status: str, recent: bool) -> tuple[int, int | None, int | None]:
    """(placed, delivered, event) ages in seconds for an order of ``status``: its timeline is consistent."""
    transit = rng.randint(DAY, 7 * DAY)
    if status == "pending":
        return rng.randint(20 * MINUTE, 3 * DAY - HOUR), None, None
    if status == "processed":
        return rng.randint(DAY, 6 * DAY), None, None
    if status == "shipped":
        return rng.randint(2 * DAY, 10 * DAY), None, None
    if status == "cancelled":
        placed = rng.randint(DAY, 540 * DAY)
        return placed, None, placed - rng.randint(10 * MINUTE, min(2 * DAY, placed - HOUR))
    if status == "delivered":
        if recent:
            delivered = rng.randint(2 * HOUR, 28 * DAY)
            return delivered + transit, delivered, None
        placed = rng.randint(40 * DAY, 540 * DAY)
        return placed, placed - transit, None
    if status in ("return requested", "exchange requested"):  # requested inside the window, not yet resolved
        delivered = rng.randint(DAY, 27 * DAY)
        return delivered + transit, delivered, delivered - rng.randint(HOUR, delivered - HOUR)
    # returned / exchanged: resolved within the window, some time ago
    delivered = rng.randint(10 * DAY, 530 * DAY)
    return delivered + transit, delivered, delivered - rng.randint(2 * DAY, min(29 * DAY, delivered - DAY))


class _UserPicker:
    """Draws the customer of an order: skewed by per-user weight, among accounts opened a day before it."""

    def __init__(self, users: list[_User]) -> None:
        self.order = sorted(users, key=lambda u: (-u.created_age, u.user_id))  # oldest accounts first
        self.neg_ages = [-u.created_age for u in self.order]
        self.cum: list[int] = []
        total = 0
        for u in self.order:
            total += u.weight
            self.cum.append(total)

    def pick(self, rng: Rng, placed_age: int) -> _User:
        k = bisect.bisect_left(self.neg_ages, -(placed_age + DAY))  # users with created_age > placed_age + DAY
        if k == 0 or self.cum[k - 1] == 0:
            return self.order[0]
        return self.order[bisect.bisect_right(self.cum, rng.below(self.cum[k - 1]))]


def _orders(rng: Rng, users: list[_User], products: list[tuple[str, ...]],
            variants: list[_Variant]) -> list[_Order]:  # fmt: skip
    """Orders with items, each at a point of its life consistent with its age; sorted by placement time."""
    r_orders, r_items = rng.child("orders"), rng.child("order_items")
    by_product: dict[str, list[_Variant]] = {}
    for v in variants:
        by_product.setdefault(v.product_id, []).append(v)
    product_ids = [p[0] for p in products]
    picker = _UserPicker(users)

    plan: list[tuple[str, bool]] = []
    for status, count in STATUS_COUNTS:
        plan.extend((status, status == "delivered" and i < RECENT_DELIVERED) for i in range(count))
    r_orders.shuffle(plan)

    used_ids: set[str] = set()
    orders: list[_Order] = []
    for status, recent in plan:
        order_id = _fresh(r_orders, used_ids, lambda r: f"#W{r.randint(10**6, 10**7 - 1)}")
        placed, delivered, event = _ages(r_orders, status, recent)
        order = _Order(order_id, status, picker.pick(r_orders, placed), placed, delivered, event)

        n_items = r_items.weighted([1, 2, 3, 4, 5], [35, 28, 20, 11, 6])
        historic = placed > _HISTORIC_PRICE_MIN_AGE and _pct(r_items, 10)
        for pid in r_items.sample(product_ids, n_items):
            v = r_items.choice(by_product[pid])
            qty = r_items.weighted([1, 2, 3], [86, 10, 4])
            price = v.price
            if historic:
                price = max(199, price + price * r_items.choice((-10, -8, -6, -5, -4, 4, 5, 6, 8)) // 100)
            order.items.append(_Line(v.item_id, pid, qty, price))

        if status == "cancelled":
            for line in order.items:
                line.status = "cancelled"
        elif status in POST_DELIVERY:
            chosen = r_items.sample(range(len(order.items)), r_items.randint(1, len(order.items)))
            for index in sorted(chosen):
                line = order.items[index]
                line.status = status  # the item statuses share the order statuses' names
                if status.startswith("exchange"):
                    others = [w for w in by_product[line.product_id] if w.item_id != line.item_id]
                    if status == "exchange requested":
                        others = [w for w in others if w.stock >= line.quantity] or others
                    line.exchange_item_id = r_items.choice(others).item_id
        orders.append(order)
    orders.sort(key=lambda o: (-o.placed_age, o.order_id))
    return orders


def _order_rows(
    rng: Rng, orders: list[_Order], price_of: dict[str, int]
) -> tuple[list[tuple[object, ...]], list[tuple[object, ...]], list[tuple[object, ...]]]:
    """Rows for orders, order_items and payments (ids ascending in order of placement)."""
    r_ship, r_pay = rng.child("shipping"), rng.child("payments")
    order_rows: list[tuple[object, ...]] = []
    item_rows: list[tuple[object, ...]] = []
    payment_rows: list[tuple[object, ...]] = []
    used_tracking: set[str] = set()
    for o in orders:
        u = o.user
        addr = u.addresses[u.default_index] if _pct(r_ship, 75) else r_ship.choice(u.addresses)
        subtotal = sum(line.quantity * line.price for line in o.items)
        shipping = shipping_for(subtotal)
        carrier = tracking = None
        if o.status not in ("pending", "cancelled"):
            carrier = _weighted(r_ship, _CARRIERS)
            tracking = _fresh(r_ship, used_tracking, lambda r, c=carrier: _tracking(r, c))
        order_rows.append((
            o.order_id, u.user_id, o.status, _ts(o.placed_age), f"{u.first} {u.last}", addr[1], addr[2], addr[3],
            addr[4], addr[5], "USA", shipping, 0, carrier, tracking,
            None if o.delivered_age is None else _ts(o.delivered_age),
            r_ship.choice(CANCEL_REASONS) if o.status == "cancelled" else None,
        ))  # fmt: skip
        for line in o.items:
            item_rows.append((o.order_id, line.item_id, line.product_id, line.quantity, line.price, line.status,
                              line.exchange_item_id))  # fmt: skip

        # the charge: a card or PayPal mostly, a gift card now and then when its balance covers the total
        total = subtotal + shipping
        regular = [m for m in u.methods if m[1] != "gift_card"]
        gifts = [m for m in u.methods if m[1] == "gift_card" and (m[2] or 0) >= total]
        method, kind = (r_pay.choice(gifts) if gifts and _pct(r_pay, 25) else r_pay.choice(regular))[:2]
        pays = [(method, "charge", total, o.placed_age, "completed")]
        event = o.event_age
        if o.status == "cancelled":
            assert event is not None
            # rule R2: card and PayPal refunds show as pending for 5-7 business days, gift cards at once
            done = kind == "gift_card" or event > 10 * DAY
            pays.append((method, "refund", total, event, "completed" if done else "pending"))
        elif o.status in ("returned", "return requested"):
            assert event is not None
            value = sum(line.quantity * line.price for line in o.items if line.status == o.status)
            pays.append((method, "refund", value, event, "completed" if o.status == "returned" else "pending"))
        elif o.status in ("exchanged", "exchange requested"):
            assert event is not None
            diff = sum((price_of[line.exchange_item_id] - line.price) * line.quantity
                       for line in o.items if line.exchange_item_id)  # fmt: skip
            if diff:
                pending = o.status == "exchange requested" and diff < 0
                pays.append((method, "charge" if diff > 0 else "refund", abs(diff), event,
                             "pending" if pending else "completed"))  # fmt: skip
        for pm_id, pkind, amount, age, status in pays:
            payment_rows.append((len(payment_rows) + 1, o.order_id, pm_id, pkind, amount, _ts(age), status))
    return order_rows, item_rows, payment_rows


# -- tickets -----------------------------------------------------------------------------------------------

_TICKETS_BY_STATUS: dict[str, tuple[str, ...]] = {
    "processed": (
        "Asked when the order would ship; confirmed it was being packed and shared the carrier.",
        "Asked to add an item to an order that was already processed; explained that items cannot be added.",
    ),
    "shipped": (
        "Asked where the package was; shared the tracking number and the carrier's estimate.",
        "Asked to change the shipping address after the order shipped; suggested contacting the carrier.",
    ),
    "delivered": (
        "Reported that the box arrived dented; the customer checked and the items were fine.",
        "Carrier showed the parcel delivered but the customer could not find it; it was found with a neighbour.",
        "Asked how to return an item; explained the 30-day return window.",
        "Asked for a copy of the receipt; sent it to the email on file.",
    ),
    "cancelled": (
        "Asked when the refund for a cancelled order would arrive; explained card refunds take 5-7 business days.",
        "Confirmed that a cancelled order would not ship.",
    ),
    "returned": (
        "Asked about the status of a return; confirmed the items arrived and the refund was issued.",
        "Asked for a return label to be resent; sent it to the email on file.",
    ),
    "return requested": ("Asked where to drop off a return; explained the carrier drop-off options.",),
    "exchanged": (
        "Asked whether the replacement item had shipped; confirmed the exchange was complete.",
        "Asked why an exchange changed the order total; explained the price difference between variants.",
    ),
    "exchange requested": (
        "Asked when the replacement item would arrive; explained it ships once the return is received.",
    ),
}
_ACCOUNT_TICKETS = (
    "Asked how to change the email address on the account; walked through the account settings.",
    "Reported trouble signing in; a password reset link was resent.",
    "Asked whether the store ships to P.O. boxes.",
    "Asked about the benefits of the gold tier.",
    "Asked whether gift cards can be combined with another payment method.",
    "Asked to remove an old address from the account; explained it can be done in account settings.",
    "Asked whether a product would be restocked; no restock date was available.",
    "Asked for the store's return policy in writing; sent a link to the policy page.",
    "Asked whether an expired card could be updated; explained how to add a new card.",
    "Asked about shipping costs; explained free shipping on orders of $35 or more.",
)


def _tickets(rng: Rng, users: list[_User], orders: list[_Order]) -> list[tuple[object, ...]]:
    """Closed historical support tickets, some about an order, in order of creation."""
    r = rng.child("tickets")
    eligible = [o for o in orders if o.status != "pending" and o.placed_age > 2 * DAY]
    drafts: list[tuple[int, str, str | None, str]] = []
    for _ in range(N_TICKETS):
        if _pct(r, 65):
            o = r.choice(eligible)
            since = min(a for a in (o.placed_age, o.delivered_age, o.event_age) if a is not None)
            age = r.randint(HOUR // 2, max(HOUR, since - HOUR // 2)) if since > HOUR else since // 2
            drafts.append((age, o.user.user_id, o.order_id, r.choice(_TICKETS_BY_STATUS[o.status])))
        else:
            u = r.choice(users)
            age = r.randint(DAY, min(u.created_age - DAY, 700 * DAY))
            drafts.append((age, u.user_id, None, r.choice(_ACCOUNT_TICKETS)))
    drafts.sort(key=lambda d: (-d[0], d[1], d[3]))
    return [(i + 1, uid, oid, summary, "closed", _ts(age)) for i, (age, uid, oid, summary) in enumerate(drafts)]


# -- entry point -------------------------------------------------------------------------------------------


def seed_data(db: sqlite3.Connection, rng: Rng) -> None:
    """Fill the retail schema (already created, inside the caller's transaction) with the world at ``rng``."""
    products, variants, variant_rows = _catalogue(rng.child("catalogue"))
    users, user_rows, addr_rows, pm_rows = _customers(rng.child("customers"))
    orders = _orders(rng, users, products, variants)
    order_rows, item_rows, payment_rows = _order_rows(rng, orders, {v.item_id: v.price for v in variants})
    ticket_rows = _tickets(rng, users, orders)

    db.executemany("INSERT INTO products VALUES (?, ?, ?, ?, ?)", products)
    db.executemany("INSERT INTO variants VALUES (?, ?, ?, ?, ?)", variant_rows)
    db.executemany("INSERT INTO users VALUES (?, ?, ?, ?, ?, ?, ?)", user_rows)
    db.executemany(
        "INSERT INTO addresses (address_id, user_id, line1, line2, city, state, zip, country, is_default) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", addr_rows)  # fmt: skip
    db.executemany(
        "INSERT INTO payment_methods (payment_method_id, user_id, kind, brand, last_four, expires, balance_cents, "
        "status) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", pm_rows)  # fmt: skip
    db.executemany(
        "INSERT INTO orders (order_id, user_id, status, placed_at, ship_name, ship_line1, ship_line2, ship_city, "
        "ship_state, ship_zip, ship_country, shipping_cents, items_modified, carrier, tracking_number, delivered_at, "
        "cancel_reason) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", order_rows)  # fmt: skip
    db.executemany(
        "INSERT INTO order_items (order_id, item_id, product_id, quantity, unit_price_cents, status, exchange_item_id) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)", item_rows)  # fmt: skip
    db.executemany(
        "INSERT INTO payments (payment_id, order_id, payment_method_id, kind, amount_cents, created_at, status) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)", payment_rows)  # fmt: skip
    db.executemany(
        "INSERT INTO tickets (ticket_id, user_id, order_id, summary, status, created_at) VALUES (?, ?, ?, ?, ?, ?)",
        ticket_rows,
    )
