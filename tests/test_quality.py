"""Coherence rules, minimal-gold analysis and task-set statistics: each rule flags a task built to break it and
passes a coherent one; the stats report carries the quality figures and finds near-duplicate instructions."""

from __future__ import annotations

import json
import random
from difflib import SequenceMatcher
from typing import Any

import pytest
from typer.testing import CliRunner

from toolworld.cli import app
from toolworld.tasks.generate import generate
from toolworld.tasks.kit import TaskKit
from toolworld.tasks.model import Action, EndState, Refusal, Revision, Task
from toolworld.tasks.quality import (
    GENERIC_RULES,
    coherence_problems,
    missing_checks,
    purposeless_reads,
    useful_steps,
)
from toolworld.tasks.stats import near_duplicates, task_stats
from toolworld.world import Episode, World, get_world
from toolworld.worlds.retail import rules
from toolworld.worlds.retail.common import TRANSFER_REASONS

SEED = 1
WORLD = get_world("retail")
DAMAGED = next(s for s in TRANSFER_REASONS if "damaged" in s)
DOUBLE_CHARGE = next(s for s in TRANSFER_REASONS if "charged twice" in s)


class Kit(TaskKit):
    """Retail's checks and rules wired as ``RetailKit`` wires them, without the rest of its synthesis."""

    principal = "user"
    handoff_tools = ("transfer_to_human_agent",)

    def required_checks(self, tool: str, args: Any, ep: Episode | None = None, *,
                        principal: Any = None) -> list[tuple[str, dict[str, Any]]]:  # fmt: skip
        return rules.required_checks(self, tool, args, ep, principal=principal)

    def coherence_rules(self) -> dict[str, Any]:
        return dict(rules.RETAIL_RULES)


KIT = Kit(WORLD)


@pytest.fixture(scope="module")
def generated() -> list[Task]:
    return generate(WORLD, 60, seed=SEED).tasks


@pytest.fixture(scope="module")
def ep() -> Episode:
    episode = WORLD.episode(SEED)
    yield episode
    episode.close()


def order_of(ep: Episode, status: str, skip: int = 0) -> dict[str, Any]:
    """An order of ``status`` with its owner's id and email."""
    return ep.query("SELECT o.order_id, o.user_id, u.email FROM orders o JOIN users u ON u.user_id = o.user_id "
                    "WHERE o.status = ? ORDER BY o.order_id LIMIT 1 OFFSET ?", (status, skip))[0]  # fmt: skip


def user_with_two_pending(ep: Episode) -> tuple[str, str, str, str]:
    row = ep.query("SELECT o.user_id, u.email, MIN(o.order_id) a, MAX(o.order_id) b FROM orders o JOIN users u "
                   "ON u.user_id = o.user_id WHERE o.status = 'pending' GROUP BY o.user_id HAVING COUNT(*) > 1 "
                   "ORDER BY o.user_id LIMIT 1")[0]  # fmt: skip
    return row["user_id"], row["email"], row["a"], row["b"]


def method_of(ep: Episode, user_id: str, kind: str | None = None) -> str:
    sql = "SELECT payment_method_id FROM payment_methods WHERE user_id = ? AND status = 'active'"
    params: tuple[Any, ...] = (user_id,)
    if kind:
        sql, params = sql + " AND kind = ?", (user_id, kind)
    return ep.query(sql + " ORDER BY payment_method_id", params)[0]["payment_method_id"]


def make(base: Task, gold: list[tuple[str, dict[str, Any]]], *, kind: str = "action",
         forbidden: tuple[str, dict[str, Any]] | None = None, alternatives: list[EndState] | None = None,
         known: dict[str, Any] | None = None, targets: list[str] | None = None) -> Task:  # fmt: skip
    refusal = Refusal(rule="R1", reason="refused", forbidden=Action(name=forbidden[0], arguments=forbidden[1])) \
        if forbidden else None  # fmt: skip
    return base.model_copy(update={
        "seed": SEED, "kind": kind, "refusal": refusal, "alternatives": alternatives or [], "expected_outputs": [],
        "gold_actions": [Action(name=n, arguments=a) for n, a in gold],
        "user": base.user.model_copy(update={"known": known or {}, "revision": None}),
        "provenance": base.provenance.model_copy(update={"targets": targets or []})})  # fmt: skip


@pytest.fixture(scope="module")
def base(generated: list[Task]) -> Task:
    return generated[0]


def rule_names(task: Task, ep: Episode) -> set[str]:
    return {rule for rule, _ in coherence_problems(task, WORLD, KIT, ep)}


# -- generic rules ---------------------------------------------------------------------------------------------


def test_handoff_must_be_the_last_write_and_own_its_object(base: Task, ep: Episode) -> None:
    o = order_of(ep, "delivered")
    transfer = ("transfer_to_human_agent", {"summary": DAMAGED, "user_id": o["user_id"], "order_id": o["order_id"]})
    address = {"line1": "1 Main St", "line2": "", "city": "Austin", "state": "TX", "zip": "73301"}
    after = make(base, [("find_user_by_email", {"email": o["email"]}), transfer,
                        ("modify_user_address", {"user_id": o["user_id"], **address})])  # fmt: skip
    problems = dict(coherence_problems(after, WORLD, KIT, ep))
    assert "followed by modify_user_address" in problems["handoff_last"]

    same = make(base, [("return_delivered_order_items", {"order_id": o["order_id"], "item_ids": ["x"],
                                                         "payment_method_id": "pm"}), transfer])  # fmt: skip
    assert "handoff_last" in rule_names(same, ep)
    assert "one_write_per_object" not in rule_names(same, ep), "a shared handoff object is handoff_last's case"

    fine = make(base, [("modify_user_address", {"user_id": o["user_id"], **address}), transfer])
    assert "handoff_last" not in rule_names(fine, ep)


def test_two_writes_on_one_order_are_incoherent_but_a_shared_card_is_not(base: Task, ep: Episode) -> None:
    user, _, a, b = user_with_two_pending(ep)
    pm = method_of(ep, user)
    twice = make(base, [("modify_pending_order_address", {"order_id": a, "line1": "1 Main St", "city": "Austin",
                                                          "state": "TX", "zip": "73301"}),
                        ("cancel_pending_order", {"order_id": a, "reason": "no longer needed"})])  # fmt: skip
    problems = dict(coherence_problems(twice, WORLD, KIT, ep))
    assert f"order {a}" in problems["one_write_per_object"]

    two_orders = make(base, [("modify_pending_order_payment", {"order_id": a, "payment_method_id": pm}),
                             ("modify_pending_order_payment", {"order_id": b, "payment_method_id": pm})])  # fmt: skip
    assert "one_write_per_object" not in rule_names(two_orders, ep)

    # A refused request about the order the gold just changed is the same conversation: it counts too.
    refused = make(base, [("cancel_pending_order", {"order_id": a, "reason": "no longer needed"})], kind="refusal",
                   forbidden=("modify_pending_order_address", {"order_id": a, "line1": "x", "city": "y",
                                                               "state": "TX", "zip": "73301"}))  # fmt: skip
    assert "one_write_per_object" in rule_names(refused, ep)


def test_alternatives_are_checked_as_end_states_of_their_own(base: Task, ep: Episode) -> None:
    _, _, a, _ = user_with_two_pending(ep)
    cancel = Action(name="cancel_pending_order", arguments={"order_id": a, "reason": "no longer needed"})
    alt = EndState(label="cancel it twice", kind="action", gold_actions=[cancel, cancel], expected_changes={})
    task = make(base, [("cancel_pending_order", {"order_id": a, "reason": "no longer needed"})], alternatives=[alt])
    problems = coherence_problems(task, WORLD, KIT, ep)
    assert [(r, m.split(":")[0]) for r, m in problems] == [("one_write_per_object", "alternative 0 (cancel it twice)")]


def test_generic_rules_apply_without_a_world_kit(base: Task, ep: Episode) -> None:
    # The plain kit has no handoff tools, but one write per object holds for any world.
    assert set(GENERIC_RULES) == {"handoff_last", "one_write_per_object"}
    _, _, a, _ = user_with_two_pending(ep)
    twice = make(base, [("cancel_pending_order", {"order_id": a, "reason": "no longer needed"})] * 2)
    assert {r for r, _ in coherence_problems(twice, WORLD, TaskKit(WORLD), ep)} == {"one_write_per_object"}


# -- retail rules ----------------------------------------------------------------------------------------------


def test_transfer_complaint_must_fit_the_order_status(base: Task, ep: Episode) -> None:
    def transfer(order: dict[str, Any], summary: str) -> Task:
        return make(base, [("transfer_to_human_agent", {"summary": summary, "user_id": order["user_id"],
                                                        "order_id": order["order_id"]})])  # fmt: skip

    pending, delivered, cancelled = order_of(ep, "pending"), order_of(ep, "delivered"), order_of(ep, "cancelled")
    problems = dict(coherence_problems(transfer(pending, DAMAGED), WORLD, KIT, ep))
    assert "'pending'" in problems["transfer_reason_fits_status"]
    assert "transfer_reason_fits_status" not in rule_names(transfer(delivered, DAMAGED), ep)
    assert "transfer_reason_fits_status" in rule_names(transfer(cancelled, DOUBLE_CHARGE), ep)
    assert "transfer_reason_fits_status" not in rule_names(transfer(pending, DOUBLE_CHARGE), ep)
    assert "transfer_reason_fits_status" not in rule_names(transfer(pending, "Something else entirely."), ep)


def test_refusals_must_be_requests_a_customer_would_make(base: Task, ep: Episode) -> None:
    cancelled, delivered = order_of(ep, "cancelled"), order_of(ep, "delivered")
    about_cancelled = make(base, [], kind="refusal",
                           forbidden=("cancel_pending_order", {"order_id": cancelled["order_id"], "reason": "x"}))
    assert "cancelled" in dict(coherence_problems(about_cancelled, WORLD, KIT, ep))["plausible_refusal"]
    about_delivered = make(base, [], kind="refusal",
                           forbidden=("cancel_pending_order", {"order_id": delivered["order_id"], "reason": "x"}))
    assert "plausible_refusal" not in rule_names(about_delivered, ep)

    processed = order_of(ep, "processed")
    charged = ep.query("SELECT payment_method_id FROM payments WHERE order_id = ? AND kind = 'charge'",
                       (processed["order_id"],))[0]["payment_method_id"]  # fmt: skip
    same_card = make(base, [], kind="refusal", forbidden=(
        "modify_pending_order_payment", {"order_id": processed["order_id"], "payment_method_id": charged}))
    assert "already charged" in dict(coherence_problems(same_card, WORLD, KIT, ep))["plausible_refusal"]
    others = [r["payment_method_id"] for r in ep.query(
        "SELECT payment_method_id FROM payment_methods WHERE user_id = ? AND payment_method_id != ?",
        (processed["user_id"], charged))]  # fmt: skip
    if others:
        other_card = make(base, [], kind="refusal", forbidden=(
            "modify_pending_order_payment", {"order_id": processed["order_id"], "payment_method_id": others[0]}))
        assert "plausible_refusal" not in rule_names(other_card, ep)


def test_payment_methods_must_be_describable_uniquely(base: Task, ep: Episode) -> None:
    row = ep.query("SELECT user_id FROM payment_methods WHERE kind = 'gift_card' GROUP BY user_id "
                   "HAVING COUNT(*) > 1 ORDER BY user_id LIMIT 1")[0]  # fmt: skip
    gift = method_of(ep, row["user_id"], "gift_card")
    order = ep.query("SELECT order_id FROM orders WHERE user_id = ? ORDER BY order_id", (row["user_id"],))[0]
    pay = ("modify_pending_order_payment", {"order_id": order["order_id"], "payment_method_id": gift})
    problems = dict(coherence_problems(make(base, [pay]), WORLD, KIT, ep))
    assert "'my gift card'" in problems["payment_description_unique"]
    # The superseded first wish of a change of mind is spoken too.
    task = make(base, [])
    task = task.model_copy(update={"user": task.user.model_copy(update={"revision": Revision(
        message="Actually, no.", initial=[Action(name=pay[0], arguments=pay[1])])})})
    assert "first wish 0" in dict(coherence_problems(task, WORLD, KIT, ep))["payment_description_unique"]

    card_user = ep.query("SELECT user_id FROM payment_methods GROUP BY user_id HAVING COUNT(*) = 1 "
                         "ORDER BY user_id LIMIT 1")[0]["user_id"]  # fmt: skip
    only = method_of(ep, card_user)
    fine = make(base, [("modify_pending_order_payment", {"order_id": order["order_id"], "payment_method_id": only})])
    assert "payment_description_unique" not in rule_names(fine, ep)


def test_payment_key_names_cards_by_brand_kind_and_last_four() -> None:
    card = {"kind": "credit_card", "brand": "visa", "last_four": "4004"}
    assert rules.payment_phrase(card) == "my Visa credit card ending in 4004"
    assert rules.payment_key(card) != rules.payment_key({**card, "kind": "debit_card"})
    assert rules.payment_key({"kind": "gift_card", "brand": "", "last_four": ""}) == ("gift_card",)


def test_retail_required_checks(ep: Episode) -> None:
    pm = ep.query("SELECT payment_method_id, user_id FROM payment_methods ORDER BY payment_method_id LIMIT 1")[0]
    pay = {"order_id": "#W1", "payment_method_id": pm["payment_method_id"]}
    assert rules.required_checks(KIT, "modify_pending_order_payment", pay, principal="u1") == [
        ("get_order_details", {"order_id": "#W1"}), ("get_user_details", {"user_id": "u1"})]
    assert rules.required_checks(KIT, "modify_pending_order_payment", pay, ep)[1] == (
        "get_user_details", {"user_id": pm["user_id"]}), "the method's owner, found on the seed state"
    assert rules.required_checks(KIT, "modify_pending_order_payment", pay) == [
        ("get_order_details", {"order_id": "#W1"})], "no user id known: no account check is guessed"
    assert rules.required_checks(KIT, "transfer_to_human_agent", {"summary": "s", "user_id": "u1"}) == []
    assert rules.required_checks(KIT, "get_order_details", {"order_id": "#W1"}) == [], "reads need no checks"


def test_generic_required_checks_inspect_the_objects_of_a_write() -> None:
    kit = TaskKit(WORLD)
    assert kit.inspector("order") == ("get_order_details", "order_id")
    assert kit.inspector("payment_method") is None
    assert kit.required_checks("modify_pending_order_payment", {"order_id": "#W1", "payment_method_id": "pm"}) == [
        ("get_order_details", {"order_id": "#W1"})]
    assert kit.required_checks("modify_user_address", {"user_id": "u"}) == [], "the principal is not inspected"


# -- minimal gold ----------------------------------------------------------------------------------------------


def _walk(ep: Episode) -> tuple[list[tuple[str, dict[str, Any]]], str]:
    """A walk to an item swap: identify, wander (list_product_types), check, find the new item, write."""
    order = ep.query("SELECT o.order_id, o.user_id, u.email, i.item_id, i.product_id FROM orders o "
                     "JOIN users u ON u.user_id = o.user_id JOIN order_items i ON i.order_id = o.order_id "
                     "JOIN variants v ON v.product_id = i.product_id AND v.item_id != i.item_id AND v.stock > 0 "
                     "WHERE o.status = 'pending' ORDER BY o.order_id LIMIT 1")[0]  # fmt: skip
    new_item = ep.query("SELECT item_id FROM variants WHERE product_id = ? AND item_id != ? AND stock > 0 "
                        "ORDER BY item_id LIMIT 1", (order["product_id"], order["item_id"]))[0]["item_id"]  # fmt: skip
    pm = method_of(ep, order["user_id"], "credit_card") if ep.query(
        "SELECT 1 FROM payment_methods WHERE user_id = ? AND kind = 'credit_card' AND status = 'active'",
        (order["user_id"],)) else method_of(ep, order["user_id"])  # fmt: skip
    gold = [
        ("find_user_by_email", {"email": order["email"]}),                       # 0 identification
        ("list_product_types", {}),                                              # 1 wanders: useless
        ("list_user_orders", {"user_id": order["user_id"]}),                     # 2 finds the order (unknown)
        ("get_user_details", {"user_id": order["user_id"]}),                     # 3 check for the payment method
        ("get_order_details", {"order_id": order["order_id"]}),                  # 4 check for the order
        ("get_order_details", {"order_id": order["order_id"]}),                  # 5 repeat: useless
        ("get_product_details", {"product_id": order["product_id"]}),            # 6 feeds the new item
        ("modify_pending_order_items", {"order_id": order["order_id"], "item_ids": [order["item_id"]],
                                        "new_item_ids": [new_item], "payment_method_id": pm}),  # 7
    ]  # fmt: skip
    return gold, order["order_id"]


def _outputs(gold: list[tuple[str, dict[str, Any]]], world: World = WORLD) -> list[Any]:
    with world.episode(SEED) as fresh:
        results = [fresh.call(n, a) for n, a in gold]
    assert all(r.ok for r in results), [r.error for r in results if not r.ok]
    return [r.output for r in results]


def test_useful_steps_keep_identification_checks_and_feeding_reads(ep: Episode) -> None:
    gold, _ = _walk(ep)
    useful = useful_steps(gold, _outputs(gold), WORLD, KIT, {"user", *KIT.fact_kinds})
    # list_product_types and list_user_orders only show what the checks (3, 4) show anyway; 5 repeats 4.
    assert useful == [True, False, False, True, True, False, True, True]


def test_a_read_that_finds_an_unknown_order_is_kept_unless_the_user_said_it(ep: Episode) -> None:
    o = order_of(ep, "pending")
    gold = [("find_user_by_email", {"email": o["email"]}), ("list_user_orders", {"user_id": o["user_id"]}),
            ("get_order_details", {"order_id": o["order_id"]}),
            ("cancel_pending_order", {"order_id": o["order_id"], "reason": "no longer needed"})]  # fmt: skip
    outputs = _outputs(gold)
    assert useful_steps(gold, outputs, WORLD, KIT) == [True, True, True, True]
    assert useful_steps(gold, outputs, WORLD, KIT, known=[[o["order_id"]]]) == [True, False, True, True]


def test_a_read_that_only_feeds_a_useless_read_is_useless(ep: Episode) -> None:
    gold, _ = _walk(ep)
    outputs = _outputs(gold[:2])
    other = outputs[1][0]["product_id"]
    wander = [*gold[:2], ("get_product_details", {"product_id": other}), *gold[2:]]
    useful = useful_steps(wander, _outputs(wander), WORLD, KIT, {"user"})
    assert useful[1] is False and useful[2] is False, "list_product_types feeds only an unused product read"


def test_expected_outputs_and_refusals_give_reads_a_purpose(ep: Episode) -> None:
    o = order_of(ep, "shipped")
    gold = [("find_user_by_email", {"email": o["email"]}), ("track_order", {"order_id": o["order_id"]})]
    outputs = _outputs(gold)
    assert useful_steps(gold, outputs, WORLD, KIT, {"user"}) == [True, False]
    assert useful_steps(gold, outputs, WORLD, KIT, {"user"}, expected_steps={1}) == [True, True]
    check = [gold[0], ("get_order_details", {"order_id": o["order_id"]})]
    forbidden = ("cancel_pending_order", {"order_id": o["order_id"], "reason": "no longer needed"})
    assert useful_steps(check, _outputs(check), WORLD, KIT, {"user"}, forbidden=forbidden) == [True, True]


def test_purposeless_reads_and_missing_checks_on_a_task(base: Task, ep: Episode) -> None:
    _, email, a, _ = user_with_two_pending(ep)
    gold = [("find_user_by_email", {"email": email}), ("list_product_types", {}), ("get_order_details", {"order_id": a}),
            ("cancel_pending_order", {"order_id": a, "reason": "no longer needed"})]  # fmt: skip
    task = make(base, gold, known={"email": email, "order_ids": [a]})
    assert purposeless_reads(task, WORLD, KIT) == [1]
    assert missing_checks(task, WORLD, KIT) == []
    blind = make(base, [gold[0], gold[3]], known={"email": email, "order_ids": [a]})
    assert missing_checks(blind, WORLD, KIT) == [
        f'cancel_pending_order (step 1) without get_order_details {{"order_id":"{a}"}} before it']
    info = make(base, [gold[0], ("track_order", {"order_id": a})], kind="info", targets=["track_order"])
    assert purposeless_reads(info, WORLD, KIT) == [], "an info task's target read is its answer"


# -- statistics ------------------------------------------------------------------------------------------------


def test_near_duplicates_pair_one_word_changes_only() -> None:
    texts = ["Please cancel my order #W1234567 because I ordered it by mistake, thank you so much.",
             "Please cancel my order #W1234567 because I ordered it by accident, thank you so much.",
             "Where is my parcel? Tell me the carrier and the tracking number of order #W7654321.",
             "I moved: my new address is 12 Oak Street, Springfield, IL 62701. Update my account."]  # fmt: skip
    assert [(i, j) for i, j, _ in near_duplicates(texts)] == [(0, 1)]


def test_near_duplicates_prefilter_loses_no_pair() -> None:
    rng = random.Random(7)
    words = ["cancel", "order", "my", "please", "the", "refund", "card", "gift", "ship", "address", "item", "swap"]
    base = [" ".join(rng.choice(words) for _ in range(rng.randint(4, 12))) for _ in range(40)]
    texts = base + [t.replace(t.split()[0], rng.choice(words), 1) for t in base[:20]]

    def ratio(a: str, b: str) -> float:
        short, long = sorted((a, b), key=len)
        return SequenceMatcher(None, long, short, autojunk=False).ratio()

    brute = {(i, j) for i in range(len(texts)) for j in range(i + 1, len(texts)) if ratio(texts[i], texts[j]) > 0.9}
    assert brute, "the fixture must contain near duplicates"
    assert {(i, j) for i, j, _ in near_duplicates(texts)} == brute


def test_stats_report_quality_figures(generated: list[Task], base: Task, tmp_path: Any) -> None:
    stranger = base.model_copy(update={"id": "t_elsewhere", "world": "no_such_world"})
    data = task_stats([*generated, stranger])
    for key in ("incoherent", "purposeless_reads", "missing_checks", "demands", "templates_in_use", "alternatives",
                "near_duplicates", "users", "skipped_worlds", "write_tools_never_targeted", "targets", "level"):
        assert key in data, key
    assert set(data["skipped_worlds"]) == {"no_such_world"}
    assert data["analysed"] == len(generated)
    assert data["users"]["distinct"] <= len(generated) + 1
    assert 0.0 <= data["demands"]["share_any"] <= 1.0

    path = tmp_path / "tasks.jsonl"
    path.write_text("".join(t.to_json() + "\n" for t in generated[:20]))
    res = CliRunner().invoke(app, ["tasks", "stats", str(path), "--json"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    shown = json.loads(res.stdout)
    assert shown["tasks"] == 20 and "near_duplicates" in shown and "incoherent" in shown
    table = CliRunner().invoke(app, ["tasks", "stats", str(path)], catch_exceptions=False)
    assert "near-duplicate pairs" in table.stdout and "incoherent tasks" in table.stdout
