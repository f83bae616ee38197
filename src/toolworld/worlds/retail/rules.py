"""What a retail support desk would and would not see: the checks before a write and the coherence rules.

The tools enforce the policy (a cancelled order cannot be cancelled again); these rules go further and say
which requests make sense at all: nobody complains about a late delivery of an order that has not shipped, nor
asks to pay with the card the order is already charged to. The task generator drops drafts that break a rule
and ``toolworld tasks stats`` counts the tasks that do, with the same functions.

Wiring in ``RetailKit`` (``kit.py``)::

    handoff_tools = ("transfer_to_human_agent",)

    def required_checks(self, tool, args, ep=None, *, principal=None):
        return rules.required_checks(self, tool, args, ep, principal=principal)

    def coherence_rules(self):
        return dict(rules.RETAIL_RULES)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from toolworld.tasks.kit import TaskKit
from toolworld.tasks.model import Action, Task
from toolworld.tasks.quality import CoherenceRule, writes_of
from toolworld.world import Episode

from .common import TRANSFER_REASONS, payment_key, payment_phrase

TRANSFER = "transfer_to_human_agent"


# -- checks before a write -------------------------------------------------------------------------------------


def required_checks(kit: TaskKit, tool: str, args: Mapping[str, Any], ep: Episode | None = None, *,
                    principal: Any = None) -> list[tuple[str, dict[str, Any]]]:  # fmt: skip
    """The reads a careful retail agent makes before ``tool(args)``.

    - ``get_order_details(order_id)`` before any write that names an order, a transfer included: the order's
      status decides whether the write is allowed and whether a complaint about it makes sense.
    - ``get_user_details(user_id)`` before any write that names a payment method: the user says "the card
      ending in 4004", and only the account's list of methods turns that into an id.

    The user id is the write's own ``user_id`` argument, else ``principal`` (the identified customer), else the
    owner of the payment method on ``ep``; with none of them the account check is left out rather than guessed.
    """
    tool_ = kit.world.tools.get(tool)
    if tool_ is None or not tool_.spec.mutates:
        return []
    out: list[tuple[str, dict[str, Any]]] = []
    if args.get("order_id"):
        out.append(("get_order_details", {"order_id": args["order_id"]}))
    pm = args.get("payment_method_id")
    if pm:
        user_id = args.get("user_id") or principal
        if not user_id and ep is not None:
            owner = ep.query("SELECT user_id FROM payment_methods WHERE payment_method_id = ?", (pm,))
            user_id = owner[0]["user_id"] if owner else None
        if user_id:
            out.append(("get_user_details", {"user_id": user_id}))
    return out


# -- coherence rules -------------------------------------------------------------------------------------------


def _order(ep: Episode, order_id: Any) -> dict[str, Any] | None:
    rows = ep.query("SELECT order_id, user_id, status FROM orders WHERE order_id = ?", (order_id,))
    return rows[0] if rows else None


def _net_paid_methods(ep: Episode, order_id: Any) -> set[str]:
    """Payment methods the order is charged to now: charges minus refunds, per method, above zero."""
    rows = ep.query(
        "SELECT payment_method_id, SUM(CASE kind WHEN 'charge' THEN amount_cents ELSE -amount_cents END) AS net "
        "FROM payments WHERE order_id = ? GROUP BY payment_method_id", (order_id,))  # fmt: skip
    return {r["payment_method_id"] for r in rows if r["net"] > 0}


def transfer_reason_fits_status(task: Task, ep: Episode) -> str | None:
    """A transfer's complaint fits the order it is about (``TRANSFER_REASONS``): damage, a wrong description or
    a late delivery only once the order has arrived; a double charge only on an order charged and not
    cancelled. A summary the table does not know is not judged."""
    for where, action in writes_of(task, ep.world):
        order_id = action.arguments.get("order_id")
        if action.name != TRANSFER or not order_id:
            continue
        summary = str(action.arguments.get("summary", ""))
        fits = TRANSFER_REASONS.get(summary)
        order = _order(ep, order_id)
        if fits is None or order is None or order["status"] in fits:
            continue
        return (f"{TRANSFER} ({where}) says {summary!r} about {order_id}, which is '{order['status']}'; the "
                f"complaint fits only {', '.join(fits)} orders")  # fmt: skip
    return None


def plausible_refusal(task: Task, ep: Episode) -> str | None:
    """A refused request is one a customer would make: not about a cancelled order (nothing is left to change),
    and not a switch of payment to the method the order is already charged to."""
    if task.refusal is None:
        return None
    forbidden = task.refusal.forbidden
    order = _order(ep, forbidden.arguments.get("order_id")) if forbidden.arguments.get("order_id") else None
    if order is not None and order["status"] == "cancelled":
        return f"the refused {forbidden.name} is about {order['order_id']}, which is cancelled: nobody asks that"
    pm = forbidden.arguments.get("payment_method_id")
    if forbidden.name == "modify_pending_order_payment" and order is not None \
            and pm in _net_paid_methods(ep, order["order_id"]):  # fmt: skip
        return f"the refused {forbidden.name} asks to pay {order['order_id']} with {pm}, the method already charged"
    return None


def _spoken_calls(task: Task) -> list[tuple[str, Action]]:
    calls = [(f"step {i}", a) for i, a in enumerate(task.gold_actions)]
    if task.refusal is not None:
        calls.append(("forbidden", task.refusal.forbidden))
    if task.user.revision is not None:
        calls += [(f"first wish {i}", a) for i, a in enumerate(task.user.revision.initial)]
    return calls


def payment_description_unique(task: Task, ep: Episode) -> str | None:
    """Every payment method the request speaks of can be named uniquely among the user's methods: "my gift
    card" with two gift cards on the account leaves the agent guessing, and the gold cannot be the only answer."""
    for where, action in _spoken_calls(task):
        pm = action.arguments.get("payment_method_id")
        if not pm:
            continue
        rows = ep.query("SELECT user_id, kind, brand, last_four FROM payment_methods WHERE payment_method_id = ?",
                        (pm,))  # fmt: skip
        if not rows:
            continue
        key = payment_key(rows[0])
        methods = ep.query("SELECT payment_method_id, kind, brand, last_four FROM payment_methods WHERE user_id = ? "
                           "ORDER BY payment_method_id", (rows[0]["user_id"],))  # fmt: skip
        others = [r["payment_method_id"] for r in methods if r["payment_method_id"] != pm and payment_key(r) == key]
        if others:
            return (f"{action.name} ({where}) pays with {pm}, '{payment_phrase(rows[0])}', which the user cannot tell "
                    f"apart from {', '.join(others)}")  # fmt: skip
    return None


#: Retail's own coherence rules by name (the generic ``handoff_last`` already keeps a transfer last).
RETAIL_RULES: dict[str, CoherenceRule] = {
    "transfer_reason_fits_status": transfer_reason_fits_status,
    "plausible_refusal": plausible_refusal,
    "payment_description_unique": payment_description_unique,
}
