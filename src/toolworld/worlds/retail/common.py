"""Constants and helpers the retail world's data generator and tools share (one definition of each rule)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from toolworld.worlds.shared.clock import days_before, format_time, parse_time  # noqa: F401 - re-exported
from toolworld.worlds.shared.money import dollars  # noqa: F401 - re-exported
from toolworld.worlds.shared.places import US_STATES  # noqa: F401 - re-exported

#: The world's fixed clock. Every date in the seed data is before it; date rules are measured from it.
NOW = "2026-05-15T12:00:00Z"
#: Delivered items can be returned or exchanged for this many days after delivery.
RETURN_WINDOW_DAYS = 30
#: Orders whose item subtotal is below this pay a flat shipping fee.
FREE_SHIPPING_MIN_CENTS = 3500
SHIPPING_FEE_CENTS = 599
CANCEL_REASONS = ("no longer needed", "ordered by mistake")
#: Why a customer asks for a human, with the order statuses the complaint can be about (a damaged parcel or a
#: late delivery only once it has arrived; a double charge on any order that was charged and not cancelled).
TRANSFER_REASONS: dict[str, tuple[str, ...]] = {
    "The package arrived damaged and I want someone to look at it.": ("delivered",),
    "I was charged twice and I want a person to check the payments.": (
        "pending", "processed", "shipped", "delivered", "return requested", "exchange requested", "returned",
        "exchanged"),
    "I want to complain about how long the delivery took.": ("delivered",),
    "The item is not what the description said and I want to discuss it with someone.": ("delivered",),
}  # fmt: skip
CARRIERS = ("UPS", "FedEx", "USPS", "DHL")
CARD_KINDS = ("credit_card", "debit_card")


def days_before_now(days: float) -> str:
    """An ISO timestamp ``days`` before the world's clock (the generator dates everything this way)."""
    return days_before(NOW, days)


def shipping_for(subtotal_cents: int) -> int:
    return 0 if subtotal_cents >= FREE_SHIPPING_MIN_CENTS else SHIPPING_FEE_CENTS


def payment_key(method: Mapping[str, Any]) -> tuple[str, ...]:
    """What a customer can say to name a payment method (a ``payment_methods`` row): brand, kind and last four
    of a card; only the kind of a gift card or a PayPal account ("my gift card")."""
    if method["kind"] in CARD_KINDS:
        return (str(method["kind"]), str(method["brand"]).lower(), str(method["last_four"]))
    return (str(method["kind"]),)


def payment_phrase(method: Mapping[str, Any]) -> str:
    """The method as the customer names it: requests, the task kit and the coherence rules all use this."""
    if method["kind"] in CARD_KINDS:
        kind = str(method["kind"]).replace("_", " ")
        return f"my {str(method['brand']).title()} {kind} ending in {method['last_four']}"
    return "my gift card" if method["kind"] == "gift_card" else "my PayPal account"
