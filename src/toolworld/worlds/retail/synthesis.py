"""Task-synthesis hints for retail: customers, realistic target arguments, and how customers speak.

Candidates are drawn from the live episode (a customer's own orders, replacement variants of the same
product, the customer's payment methods), in every state: the generator executes them, so pending orders
become cancellations while delivered ones become refusal tasks under rule R1, with no rule coded twice.
Customers never quote internal ids: items are named by product and options, payment methods by brand and
last four digits; only order numbers (printed on receipts) are spoken as-is.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from toolworld.tasks.kit import Bag, TaskKit
from toolworld.tasks.model import ExpectedOutput, UserProfile
from toolworld.world import Episode, Rng, World

from . import vocab
from .common import CANCEL_REASONS

TONES = ("polite and patient", "in a hurry", "a little frustrated", "chatty and friendly", "terse",
         "unsure about the details")  # fmt: skip
REASON_PHRASES = {
    "no longer needed": ("I no longer need it", "I don't need it anymore", "it's no longer needed"),
    "ordered by mistake": ("I ordered it by mistake", "I placed it by accident", "it was ordered by mistake"),
}

INTENTS: dict[str, list[str]] = {
    "cancel_pending_order": [
        "Please cancel my order {order_id}, {reason}.",
        "I'd like to cancel order {order_id} because {reason}.",
        "Can you cancel {order_id}? {Reason}.",
    ],
    "modify_pending_order_items": [
        "In my order {order_id}, please change {items} to {new_items}, and settle any price difference with {payment}.",
        "I want to swap {items} in order {order_id} for {new_items}; use {payment} for the difference.",
        "Could you update order {order_id}: instead of {items} I want {new_items}. Any difference goes on {payment}.",
    ],
    "modify_pending_order_address": [
        "Please ship my order {order_id} to {address} instead.",
        "I need to change the shipping address of order {order_id} to {address}.",
        "Order {order_id} should go to {address}, not where it's going now.",
    ],
    "modify_pending_order_payment": [
        "Please pay for my order {order_id} with {payment} instead.",
        "I'd like to switch the payment of order {order_id} to {payment}.",
        "Can you charge {payment} for order {order_id} instead of what I used?",
    ],
    "return_delivered_order_items": [
        "I want to return {items} from order {order_id}; refund it to {payment}.",
        "Please start a return for {items} from my order {order_id}, with the refund going to {payment}.",
        "I'd like to send back {items} (order {order_id}) and get my money back on {payment}.",
    ],
    "exchange_delivered_order_items": [
        "I'd like to exchange {items} from order {order_id} for {new_items}; use {payment} for any difference.",
        "Can I swap {items} I received in order {order_id} for {new_items}? Settle the difference with {payment}.",
        "Please exchange {items} from {order_id} for {new_items}, with any price difference on {payment}.",
    ],
    "modify_user_address": [
        "Please update my default address to {address}.",
        "I moved: my new address is {address}. Can you update my account?",
        "Change the address on my account to {address}, please.",
    ],
    "transfer_to_human_agent": [
        "I need to talk to a human about my order {order_id}: {summary}",
        "Please put me through to a person about order {order_id}. {summary}",
    ],
    "track_order": [
        "Where is my order {order_id}? Please tell me the carrier and the tracking number.",
        "Can you give me the tracking number for order {order_id}, and which carrier has it?",
    ],
    "get_order_details": [
        "What is the status of my order {order_id}, and what was its total?",
        "Can you tell me where order {order_id} stands and how much I paid in total?",
    ],
}

TRANSFER_SUMMARIES = (
    "The package arrived damaged and I want someone to look at it.",
    "I was charged twice and I want a person to check the payments.",
    "I want to complain about how long the delivery took.",
    "The item is not what the description said and I want to discuss it with someone.",
)


class RetailKit(TaskKit):
    principal = "user"
    intents = INTENTS
    info_tools = ("track_order", "get_order_details")
    ignore_columns = ("tickets.summary",)
    known_entity_keys = {"order_ids": "order"}  # noqa: RUF012

    def profile(self, ep: Episode, principal_id: Any, rng: Rng) -> UserProfile:
        u = ep.query(
            "SELECT u.user_id, u.email, u.first_name, u.last_name, u.tier, a.zip FROM users u "
            "JOIN addresses a ON a.user_id = u.user_id AND a.is_default = 1 WHERE u.user_id = ?",
            (principal_id,),
        )[0]
        orders = [r["order_id"] for r in ep.query("SELECT order_id FROM orders WHERE user_id = ? ORDER BY order_id",
                                                   (principal_id,))]  # fmt: skip
        name = f"{u['first_name']} {u['last_name']}"
        return UserProfile(
            name=name,
            persona=f"{name}, a {u['tier']}-tier customer, {rng.choice(TONES)}.",
            known={"email": u["email"], "first_name": u["first_name"], "last_name": u["last_name"], "zip": u["zip"],
                   "order_ids": orders},
        )

    def identity_templates(self, tool: str) -> list[str]:
        if tool == "find_user_by_email":
            return ["My email is {email}.", "You can find my account under {email}.", "My account email is {email}."]
        return ["I'm {first_name} {last_name}, zip code {zip}.", "My name is {first_name} {last_name} and my zip is {zip}.",
                "This is {first_name} {last_name}; my zip code is {zip}."]  # fmt: skip

    # -- candidates -----------------------------------------------------------------------------------------

    def propose(self, tool: str, ep: Episode, principal_id: Any, bag: Bag, rng: Rng) -> list[dict[str, Any]]:
        orders = ep.query("SELECT order_id, status FROM orders WHERE user_id = ? ORDER BY order_id", (principal_id,))
        rng.shuffle(orders)
        methods = [r["payment_method_id"] for r in ep.query(
            "SELECT payment_method_id FROM payment_methods WHERE user_id = ? ORDER BY payment_method_id",
            (principal_id,))]  # fmt: skip
        out: list[dict[str, Any]] = []
        for o in orders[:6]:
            oid = o["order_id"]
            if tool == "cancel_pending_order":
                out.append({"order_id": oid, "reason": rng.choice(CANCEL_REASONS)})
            elif tool in ("modify_pending_order_items", "exchange_delivered_order_items"):
                swap = self._swap(ep, oid, rng)
                if swap and methods:
                    out.append({"order_id": oid, **swap, "payment_method_id": rng.choice(methods)})
            elif tool == "return_delivered_order_items":
                items = self._items(ep, oid, rng)
                paid = [r["payment_method_id"] for r in ep.query(
                    "SELECT DISTINCT payment_method_id FROM payments WHERE order_id = ? AND kind = 'charge' "
                    "ORDER BY payment_method_id", (oid,))]  # fmt: skip
                if items and (paid or methods):
                    pm = rng.choice(paid) if paid and rng.chance(0.8) else rng.choice(methods or paid)
                    out.append({"order_id": oid, "item_ids": items, "payment_method_id": pm})
            elif tool == "modify_pending_order_address":
                out.append({"order_id": oid, **self._address(rng)})
            elif tool == "modify_pending_order_payment" and methods:
                out.append({"order_id": oid, "payment_method_id": rng.choice(methods)})
            elif tool == "transfer_to_human_agent":
                out.append({"summary": rng.choice(TRANSFER_SUMMARIES), "user_id": principal_id, "order_id": oid})
            elif tool in ("track_order", "get_order_details"):
                out.append({"order_id": oid})
        if tool == "modify_user_address":
            out = [{"user_id": principal_id, **self._address(rng)} for _ in range(2)]
            if rng.chance(0.3):  # a zip code one digit short: rule R11 refuses it
                bad = {"user_id": principal_id, **self._address(rng)}
                bad["zip"] = bad["zip"][:4]
                out.insert(0, bad)
        return out

    def _items(self, ep: Episode, order_id: str, rng: Rng) -> list[str]:
        items = [r["item_id"] for r in ep.query("SELECT item_id FROM order_items WHERE order_id = ? ORDER BY item_id",
                                                (order_id,))]  # fmt: skip
        return rng.sample(items, min(len(items), rng.randint(1, 2))) if items else []

    def _swap(self, ep: Episode, order_id: str, rng: Rng) -> dict[str, list[str]] | None:
        old, new = [], []
        for item in self._items(ep, order_id, rng):
            options = [r["item_id"] for r in ep.query(
                "SELECT v.item_id FROM variants v JOIN variants o ON o.product_id = v.product_id "
                "WHERE o.item_id = ? AND v.item_id != ? AND v.stock > 0 ORDER BY v.item_id", (item, item))]  # fmt: skip
            if options:
                old.append(item)
                new.append(rng.choice(options))
        return {"item_ids": old, "new_item_ids": new} if old else None

    def _address(self, rng: Rng) -> dict[str, str]:
        city = rng.choice(vocab.CITIES)
        line1 = f"{rng.randint(1, 9999)} {rng.choice(vocab.STREET_NAMES)} {rng.choice(vocab.STREET_SUFFIXES)[0]}"
        line2 = rng.choice(("", "", f"Apt {rng.randint(1, 40)}", f"Suite {rng.randint(100, 900)}"))
        return {"line1": line1, "line2": line2, "city": city.name, "state": city.state,
                "zip": str(rng.randint(city.zip_lo, city.zip_hi)).zfill(5)}  # fmt: skip

    # -- speaking -------------------------------------------------------------------------------------------

    def slots(self, tool: str, ep: Episode, args: Mapping[str, Any], profile: UserProfile) -> dict[str, str]:
        out: dict[str, str] = {}
        if args.get("order_id"):
            out["order_id"] = str(args["order_id"])
        if "item_ids" in args:
            out["items"] = _join([self._item(ep, i, "the ") for i in args["item_ids"]])
        if "new_item_ids" in args:
            out["new_items"] = _join([self._item(ep, i, "") for i in args["new_item_ids"]])
        if "payment_method_id" in args:
            out["payment"] = self._payment(ep, args["payment_method_id"])
        if "reason" in args:
            phrases = REASON_PHRASES[args["reason"]]
            pick = phrases[len(str(args.get("order_id", ""))) % len(phrases)]
            out["reason"], out["Reason"] = pick, pick[0].upper() + pick[1:]
        if "line1" in args:
            parts = [args["line1"], args.get("line2") or "", args["city"], f"{args['state']} {args['zip']}"]
            out["address"] = ", ".join(p for p in parts if p)
        if "summary" in args:
            out["summary"] = str(args["summary"])
        return out

    def _item(self, ep: Episode, item_id: str, article: str) -> str:
        row = ep.query("SELECT p.name, v.options FROM variants v JOIN products p ON p.product_id = v.product_id "
                       "WHERE v.item_id = ?", (item_id,))[0]  # fmt: skip
        options = json.loads(row["options"])
        detail = ", ".join(f"{k} {v}" if k not in ("color", "colour") else str(v) for k, v in options.items())
        return f"{article}{row['name']} ({detail})" if detail else f"{article}{row['name']}"

    def _payment(self, ep: Episode, pm_id: str) -> str:
        rows = ep.query("SELECT kind, brand, last_four FROM payment_methods WHERE payment_method_id = ?", (pm_id,))
        if not rows:
            return "my usual payment method"
        m = rows[0]
        if m["kind"] in ("credit_card", "debit_card"):
            kind = "credit card" if m["kind"] == "credit_card" else "debit card"
            return f"my {str(m['brand']).title()} {kind} ending in {m['last_four']}"
        if m["kind"] == "gift_card":
            return "my gift card"
        return "my PayPal account"

    def outputs(self, tool: str, args: Mapping[str, Any], result: Any) -> list[ExpectedOutput]:
        if not isinstance(result, dict):
            return []
        if tool == "track_order":
            if "tracking_number" not in result:
                return []
            return [ExpectedOutput(label="carrier", value=str(result["carrier"])),
                    ExpectedOutput(label="tracking_number", value=str(result["tracking_number"]))]  # fmt: skip
        if tool == "get_order_details":
            return [ExpectedOutput(label="status", value=str(result["status"])),
                    ExpectedOutput(label="total", value=f"{result['total']:.2f}")]  # fmt: skip
        # What THIS call moved, as the tool reports it. The order's payment history cannot tell: every call of a
        # task runs at the same clock time, so a cancel after a price-difference refund on the same order would
        # owe the user the sum of both refunds.
        moved = result.get("this_call")
        if not isinstance(moved, dict):
            return []
        out = []
        if moved["refunded"]:
            out.append(ExpectedOutput(label="refund_amount", value=f"{moved['refunded']:.2f}"))
        # A payment change charges the new method the same total it refunds: the refund is the figure to tell.
        if moved["charged"] and tool != "modify_pending_order_payment":
            out.append(ExpectedOutput(label="charge_amount", value=f"{moved['charged']:.2f}"))
        return out


def _join(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def kit(world: World) -> RetailKit:
    return RetailKit(world)
