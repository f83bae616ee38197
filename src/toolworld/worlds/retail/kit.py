"""Task-synthesis hints for retail: customers, realistic target arguments, and how customers speak.

Candidates are drawn from the live episode (a customer's own orders, replacement variants of the same
product, the customer's payment methods), in every state: the generator executes them, so pending orders
become cancellations while delivered ones become refusal tasks under rule R1, with no rule coded twice.
Customers never quote internal ids: items are named by product and options, payment methods by brand and
last four digits; only order numbers (printed on receipts) are spoken as-is.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from toolworld.core.errors import ToolworldError
from toolworld.tasks.kit import Bag, TaskKit
from toolworld.tasks.model import ExpectedOutput, UserProfile
from toolworld.tasks.sampling import Draft, Plan, Target
from toolworld.world import Episode, Rng, World

from . import rules, scenarios, vocab
from .common import CANCEL_REASONS, TRANSFER_REASONS, payment_phrase
from .phrases import CONTINGENCIES, FREE_SLOTS, IDENTITY, INTENTS, OPENERS, REASON_PHRASES, REVISIONS, TONES, WITHHELD

if TYPE_CHECKING:
    from toolworld.tasks.quality import CoherenceRule


class RetailKit(TaskKit):
    principal = "user"
    intents = INTENTS
    info_tools = ("track_order", "get_order_details")
    ignore_columns = ("tickets.summary",)
    known_entity_keys = {"order_ids": "order"}  # noqa: RUF012
    handoff_tools = ("transfer_to_human_agent",)

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
        return IDENTITY[tool] if tool in IDENTITY else super().identity_templates(tool)

    # -- candidates -----------------------------------------------------------------------------------------

    def propose(self, tool: str, ep: Episode, principal_id: Any, bag: Bag, rng: Rng) -> list[dict[str, Any]]:
        # Nobody asks about an order they cancelled, and a customer can only point at a payment method whose
        # description ("my Visa credit card ending in 4004", "my gift card") is theirs alone.
        orders = ep.query("SELECT order_id, status FROM orders WHERE user_id = ? AND status != 'cancelled' "
                          "ORDER BY order_id", (principal_id,))  # fmt: skip
        rng.shuffle(orders)
        methods = sorted(scenarios.payment_phrases(self, ep, principal_id))
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
                paid = [m for m in scenarios.charged_methods(ep, oid) if m in methods]
                if items and (paid or methods):
                    pm = rng.choice(paid) if paid and rng.chance(0.8) else rng.choice(methods or paid)
                    out.append({"order_id": oid, "item_ids": items, "payment_method_id": pm})
            elif tool == "modify_pending_order_address":
                home = scenarios.default_address(ep, principal_id)
                ship = scenarios.ship_address(ep, oid)
                # Often the customer wants it sent home: "to the address on my account" (a need to look up).
                use_home = home is not None and home != ship and rng.chance(0.4)
                out.append({"order_id": oid, **(home if use_home and home else self.random_address(rng))})
            elif tool == "modify_pending_order_payment":
                current = scenarios.charged_methods(ep, oid)  # nobody asks to switch to what they already use
                fresh = [m for m in methods if m not in current]
                if fresh:
                    out.append({"order_id": oid, "payment_method_id": rng.choice(fresh)})
            elif tool == "transfer_to_human_agent":
                fitting = [text for text, statuses in TRANSFER_REASONS.items() if o["status"] in statuses]
                if fitting:  # a complaint must fit the order: no "late delivery" about an order still pending
                    out.append({"summary": rng.choice(fitting), "user_id": principal_id, "order_id": oid})
            elif tool in ("track_order", "get_order_details"):
                out.append({"order_id": oid})
        if tool == "modify_user_address":
            out = [{"user_id": principal_id, **self.random_address(rng)} for _ in range(2)]
            home = scenarios.default_address(ep, principal_id)
            shipped = [a for o in orders if (a := scenarios.ship_address(ep, o["order_id"])) and a != home]
            if shipped and rng.chance(0.5):  # "make the address my order went to my default"
                out.insert(0, {"user_id": principal_id, **shipped[0]})
            if rng.chance(0.3):  # a zip code one digit short: rule R11 refuses it
                bad = {"user_id": principal_id, **self.random_address(rng)}
                bad["zip"] = bad["zip"][:4]
                out.insert(0, bad)
        return out

    def _items(self, ep: Episode, order_id: str, rng: Rng) -> list[str]:
        items = [r["item_id"] for r in ep.query("SELECT item_id FROM order_items WHERE order_id = ? ORDER BY item_id",
                                                (order_id,))]  # fmt: skip
        if len(items) > 1 and rng.chance(0.25):  # everything in the order
            return items
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

    def random_address(self, rng: Rng) -> dict[str, str]:
        city = rng.choice(vocab.CITIES)
        line1 = f"{rng.randint(1, 9999)} {rng.choice(vocab.STREET_NAMES)} {rng.choice(vocab.STREET_SUFFIXES)[0]}"
        line2 = rng.choice(("", "", f"Apt {rng.randint(1, 40)}", f"Suite {rng.randint(100, 900)}"))
        return {"line1": line1, "line2": line2, "city": city.name, "state": city.state,
                "zip": str(rng.randint(city.zip_lo, city.zip_hi)).zfill(5)}  # fmt: skip

    # -- checks and coherence (worlds/retail/rules.py) ------------------------------------------------------

    def required_checks(self, tool: str, args: Mapping[str, Any], ep: Episode | None = None, *,
                        principal: Any = None) -> list[tuple[str, dict[str, Any]]]:  # fmt: skip
        return rules.required_checks(self, tool, args, ep, principal=principal)

    def coherence_rules(self) -> dict[str, CoherenceRule]:
        return dict(rules.RETAIL_RULES)

    # -- scenarios ------------------------------------------------------------------------------------------

    def dress(self, draft: Draft, ep: Episode, rng: Rng) -> None:
        scenarios.dress(self, draft, ep, rng)

    def contingencies(self, ep: Episode, principal_id: Any, rng: Rng) -> list[Plan]:
        return scenarios.contingencies(self, ep, principal_id, rng)

    def alternatives(self, target: Target, ep: Episode, principal_id: Any) -> list[tuple[str, list[tuple[str, dict[str, Any]]]]]:
        return scenarios.alternatives(target, ep, principal_id)

    # -- speaking -------------------------------------------------------------------------------------------

    def slots(self, tool: str, ep: Episode, args: Mapping[str, Any], profile: UserProfile | None) -> dict[str, str]:
        out: dict[str, str] = {}
        if args.get("order_id"):
            out["order_id"] = str(args["order_id"])
            out["order"] = f"order {args['order_id']}"
        if "item_ids" in args:
            out["items"] = _join([self.item(ep, i, "the ") for i in args["item_ids"]])
        if "new_item_ids" in args:
            out["new_items"] = _join([self.item(ep, i, "the ") for i in args["new_item_ids"]])
        if "payment_method_id" in args:
            out["payment"] = self.payment(ep, args["payment_method_id"])
        if "reason" in args:
            phrases = REASON_PHRASES[args["reason"]]
            # Spread the wordings over orders; a stable sum, since str hashes change between processes.
            pick = phrases[sum(map(ord, str(args.get("order_id", "")))) % len(phrases)]
            out["reason"], out["Reason"] = pick, pick[0].upper() + pick[1:]
        if "line1" in args:
            parts = [args["line1"], args.get("line2") or "", args["city"], f"{args['state']} {args['zip']}"]
            out["address"] = ", ".join(p for p in parts if p)
        if "summary" in args:
            out["summary"] = str(args["summary"])
        return out

    def slot_facts(self, tool: str, ep: Episode, args: Mapping[str, Any],
                   profile: UserProfile | None) -> dict[str, list[str]]:  # fmt: skip
        """Facts per slot, finer than the slot text: a rewrite may say "my black Desk Lamp in size M" or "the Visa
        card ending in 4242" and still be solvable, as long as the name, each option and the digits stay."""
        out: dict[str, list[str]] = {}
        if args.get("order_id"):
            out["order"] = out["order_id"] = [str(args["order_id"])]
        if "item_ids" in args:
            out["items"] = [f for i in args["item_ids"] for f in self._item_facts(ep, i)]
        if "new_item_ids" in args:
            out["new_items"] = [f for i in args["new_item_ids"] for f in self._item_facts(ep, i)]
        if "payment_method_id" in args:
            out["payment"] = self.fact_strings("payment", self.payment(ep, args["payment_method_id"]))
        if "line1" in args:
            out["address"] = [p for p in (args["line1"], args.get("line2") or "", args["city"], args["state"],
                                          args["zip"]) if p]  # fmt: skip
        return out

    def fact_strings(self, slot: str, text: str) -> list[str]:
        if slot in FREE_SLOTS:
            return []
        card = _CARD.search(text)
        if card:
            return [card["brand"], card["digits"]]
        if slot in ("order", "order_id") and _ORDER.search(text):
            return _ORDER.findall(text)
        # _join's list of item texts: "the A (x), the B (y) and the C (z)"
        items = [_ITEM.fullmatch(part) for part in re.split(r"(?<=\))(?:, | and )", text.strip())]
        if all(items):
            return [f for m in items if m for f in (m["name"], *m["detail"].split(", "))]
        if text.strip().lower() in ("my gift card", "my paypal account"):
            return [text.strip()[3:]]
        return super().fact_strings(slot, text)

    def opener_templates(self) -> list[str]:
        return OPENERS

    def contingency_templates(self, kind: str) -> list[str]:
        if kind not in CONTINGENCIES:
            raise ToolworldError(f"retail has no contingency templates of kind {kind!r}; it has "
                                 f"{', '.join(sorted(CONTINGENCIES))}", kind="unknown_contingency")  # fmt: skip
        return CONTINGENCIES[kind]

    def revision_templates(self, tool: str) -> list[str]:
        return REVISIONS.get(tool) or super().revision_templates(tool)

    def withheld_templates(self, tool: str) -> list[str]:
        return WITHHELD.get(tool) or super().withheld_templates(tool)

    def _item_facts(self, ep: Episode, item_id: str) -> list[str]:
        match = _ITEM.fullmatch(self.item(ep, item_id, ""))
        return [match["name"], *match["detail"].split(", ")] if match else [self.item(ep, item_id, "")]

    def item(self, ep: Episode, item_id: str, article: str) -> str:
        row = ep.query("SELECT p.name, v.options FROM variants v JOIN products p ON p.product_id = v.product_id "
                       "WHERE v.item_id = ?", (item_id,))[0]  # fmt: skip
        options = json.loads(row["options"])
        detail = ", ".join(f"{k} {v}" if k not in ("color", "colour") else str(v) for k, v in options.items())
        return f"{article}{row['name']} ({detail})" if detail else f"{article}{row['name']}"

    def payment(self, ep: Episode, pm_id: str) -> str:
        """A payment method as its owner names it ("my Visa credit card ending in 4004")."""
        rows = ep.query("SELECT kind, brand, last_four FROM payment_methods WHERE payment_method_id = ?", (pm_id,))
        return payment_phrase(rows[0]) if rows else "my usual payment method"

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


# How ``item`` and ``payment`` speak, read back to find the facts in a slot text.
_ITEM = re.compile(r"(?:the )?(?P<name>[^()]+?) \((?P<detail>[^()]+)\)")
_ORDER = re.compile(r"#W\d+")
_CARD = re.compile(r"(?P<brand>[A-Z][\w&.-]*) (?:credit|debit) card ending in (?P<digits>\d{4})")


def _join(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def kit(world: World) -> RetailKit:
    return RetailKit(world)
