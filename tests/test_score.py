"""Scoring: gold is perfect on generated tasks, every kind of mistake is named in the right place, the first
divergent step is the step gold noise perturbed, pass@k / pass^k match hand computations, infra-errored trials
stay out of the metrics, and scores round-trip through JSON exactly."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest

from rollout_kit import make_task, run
from toolworld.core import InfraError
from toolworld.records.trajectory import Trajectory
from toolworld.rollout.backends import GoldPolicy, ScriptedPolicy, confirmation_request, gold_answer
from toolworld.rollout.loop import Limits, run_episode, run_many
from toolworld.scoring import (
    Score,
    align,
    check_outputs,
    compare_changes,
    output_kind,
    pass_at_k,
    pass_hat_k,
    percentile,
    score_trajectory,
    summarize,
    value_found,
)
from toolworld.scoring.changes import Tables, tables_from_schema
from toolworld.scoring.conduct import touches_customer_data
from toolworld.tasks.generate import generate
from toolworld.tasks.model import Task
from toolworld.world import ToolCall


@pytest.fixture(scope="module")
def generated(world) -> list[Task]:
    tasks = generate(world, 60, seed=11).tasks
    assert {t.kind for t in tasks} == {"action", "refusal", "info"}
    return tasks


@pytest.fixture(scope="module")
def kit_tasks(world) -> dict[str, Task]:
    return {kind: make_task(kind, world=world) for kind in ("cancel", "address", "refusal", "info")}


def replay(world: Any, task: Task, calls: list[Any], answer: str | None = None, trial: int = 0,
           confirm: bool = True) -> Trajectory:  # fmt: skip
    """Run ``calls`` (ToolCalls or gold actions) one per turn, then answer (gold's answer by default). With
    ``confirm``, each write that needs consent is first described and asked for, as gold does (the scripted
    user says yes)."""
    script: list[Any] = []
    for c in calls:
        call = c if isinstance(c, ToolCall) else ToolCall(c.name, dict(c.arguments))
        tool = world.tools.get(call.name)
        if confirm and tool is not None and tool.mutates and tool.confirm:
            script.append(confirmation_request(call))
        script.append(call)
    return run(run_episode(world, task, ScriptedPolicy([*script, gold_answer(task) if answer is None else answer]),
                           trial=trial))  # fmt: skip


def other_pending_order(world: Any, but: str) -> str:
    """Another pending order of the same customer (anyone else's is refused once the customer is identified)."""
    with world.episode(0) as ep:
        return ep.query("SELECT order_id FROM orders WHERE status = 'pending' AND order_id != ? AND user_id = "
                        "(SELECT user_id FROM orders WHERE order_id = ?) ORDER BY order_id LIMIT 1",
                        (but, but))[0]["order_id"]  # fmt: skip


# -- gold is perfect ---------------------------------------------------------------------------------------------


def test_gold_policy_scores_full_reward_on_every_generated_task(world, generated):
    by_id = {t.id: t for t in generated}
    trajectories = run(run_many(world, generated, GoldPolicy(), trials=1, concurrency=16))
    scores = [score_trajectory(by_id[t.task_id], t) for t in trajectories]
    for score in scores:
        assert score.success and score.reward == 1.0, score.model_dump()
        assert all(c.passed for c in score.components)
        assert not (score.missing_changes or score.wrong_values or score.extra_changes)
        assert score.first_divergent_step is None and score.divergence == "" and score.failure_visible_step is None
        assert all(o["found"] for o in score.outputs) and not score.infra_error
    kinds = Counter(by_id[s.task_id].kind for s in scores)
    assert kinds["refusal"] and kinds["info"] and kinds["action"]
    # the components that apply are there, per kind: conduct everywhere (gold identifies the customer first),
    # confirmation where gold makes a write that needs consent (a transfer alone needs none)
    for s in scores:
        task = by_id[s.task_id]
        consent = any(world.tools[a.name].mutates and world.tools[a.name].confirm for a in task.gold_actions)
        expected = {
            "action": ["state"] + ["outputs"] * bool(task.expected_outputs) + ["identified"] + ["confirmed"] * consent,
            "refusal": ["refusal", "identified"],
            "info": ["outputs", "identified", "state"],
        }[task.kind]
        assert [c.name for c in s.components] == expected
        assert sum(c.weight for c in s.components) == pytest.approx(1.0)
    assert any(by_id[s.task_id].kind == "action" and "confirmed" not in [c.name for c in s.components]
               for s in scores)  # a transfer to a human agent: no confirmation needed  # fmt: skip
    summary = summarize(by_id, trajectories, scores, trials=1).model_dump(mode="json")
    assert summary["success_rate"] == 1.0 and summary["pass_at_k"] == {"1": 1.0} == summary["pass_hat_k"]


def test_world_clock_is_fixed_so_written_timestamps_are_compared(world, generated):
    """Every timestamp a tool wrote in gold is the world's clock: equal in every episode, hence compared."""
    stamps = {row["created_at"] for t in generated for table in t.expected_changes.values()
              for row in table["inserted"] if "created_at" in row}  # fmt: skip
    assert stamps == {world.clock}
    gold = {"tickets": {"inserted": [{"ticket_id": 41, "user_id": "u1", "order_id": None, "summary": "a",
                                      "status": "open", "created_at": world.clock}], "updated": [], "deleted": []}}  # fmt: skip
    late = json.loads(json.dumps(gold).replace(world.clock, "2030-01-01T00:00:00Z"))
    diff = compare_changes(gold, late, tables=tables_from_schema(world.schema), ignore=["tickets.summary"])
    assert [(w["column"], w["expected"], w["got"]) for w in diff.wrong] == [("created_at", world.clock,
                                                                            "2030-01-01T00:00:00Z")]  # fmt: skip


# -- mistakes are named ------------------------------------------------------------------------------------------


def test_a_missing_write_is_a_missing_change(world, kit_tasks):
    task = kit_tasks["cancel"]
    order = task.gold_actions[1].arguments["order_id"]
    traj = replay(world, task, task.gold_actions[:2])
    score = score_trajectory(task, traj)
    assert not score.success and score.reward < 1.0
    assert not score.wrong_values and not score.extra_changes
    missing = {(m["table"], m["op"], tuple(m["key"])) for m in score.missing_changes}
    assert ("orders", "update", (order,)) in missing
    orders = next(m for m in score.missing_changes if m["table"] == "orders")
    assert orders["changed"]["status"] == ["pending", "cancelled"]
    assert score.first_divergent_step == 2 == score.failure_visible_step == len(traj.steps)
    assert score.divergence.startswith("stopped before gold step 2 cancel_pending_order")
    state = next(c for c in score.components if c.name == "state")
    assert not state.passed and "missing: orders " + order in state.reason


def test_a_wrong_zip_is_a_wrong_value(world, kit_tasks):
    task = kit_tasks["address"]
    write = task.gold_actions[2]
    bad = ToolCall(write.name, {**write.arguments, "zip": "62705"})
    traj = replay(world, task, [*task.gold_actions[:2], bad])
    score = score_trajectory(task, traj)
    assert not score.success
    assert score.wrong_values == [{"table": "orders", "op": "update", "key": [write.arguments["order_id"]],
                                   "column": "ship_zip", "expected": "62704", "got": "62705"}]  # fmt: skip
    assert not score.missing_changes and not score.extra_changes
    assert score.first_divergent_step == 2 == score.failure_visible_step
    assert "zip='62705' instead of '62704'" in score.divergence


def test_cancelling_another_order_is_collateral_damage(world, kit_tasks):
    task = kit_tasks["cancel"]
    order = task.gold_actions[2].arguments["order_id"]
    other = other_pending_order(world, order)
    extra_cancel = ToolCall("cancel_pending_order", {"order_id": other, "reason": "no longer needed"})
    # the extra cancellation first: its refund takes the payment id gold's refund had
    traj = replay(world, task, [*task.gold_actions[:2], extra_cancel, task.gold_actions[2]])
    score = score_trajectory(task, traj)
    assert not score.success
    assert not score.missing_changes and not score.wrong_values  # gold's own rows matched whatever their ids
    extra = {(e["table"], e["op"], tuple(e["key"])) for e in score.extra_changes}
    assert ("orders", "update", (other,)) in extra
    assert all(e["key"][0] == other or e["table"] in ("variants", "payments") for e in score.extra_changes)
    refunds = [e for e in score.extra_changes if e["table"] == "payments"]
    assert refunds and all(e["changed"]["order_id"] == [None, other] for e in refunds)
    assert score.first_divergent_step == 2 == score.failure_visible_step
    assert score.divergence.startswith("made write cancel_pending_order(order_id=" + repr(other))


def test_inserted_rows_match_by_content_not_by_surrogate_id(world):
    tables = tables_from_schema(world.schema)
    assert tables.surrogate == {"payments": "payment_id", "tickets": "ticket_id"}
    refund = {"payment_id": 1965, "order_id": "#W1", "payment_method_id": "credit_card_1", "kind": "refund",
              "amount_cents": 1000, "created_at": world.clock, "status": "completed"}  # fmt: skip
    ticket = {"ticket_id": 41, "user_id": "u1", "order_id": "#W1", "summary": "gold's words", "status": "open",
              "created_at": world.clock}  # fmt: skip
    gold = {"payments": {"inserted": [refund], "updated": [], "deleted": []},
            "tickets": {"inserted": [ticket], "updated": [], "deleted": []}}  # fmt: skip
    moved = {"payments": {"inserted": [{**refund, "payment_id": 1966}], "updated": [], "deleted": []},
             "tickets": {"inserted": [{**ticket, "ticket_id": 42, "summary": "the agent's words"}], "updated": [],
                         "deleted": []}}  # fmt: skip
    assert compare_changes(gold, moved, tables=tables, ignore=["tickets.summary"]).ok
    assert compare_changes(gold, moved, tables=Tables(), ignore=["tickets.summary"]).ok  # no schema: id heuristic
    assert not compare_changes(gold, moved, tables=tables).ok  # the summary counts when not ignored
    # a refund to another card is one wrong value of the one row, not a missing row plus an extra one
    other_card = {"payments": {"inserted": [{**refund, "payment_id": 1966, "payment_method_id": "paypal_2"}],
                               "updated": [], "deleted": []}}  # fmt: skip
    diff = compare_changes({"payments": gold["payments"]}, other_card, tables=tables)
    assert diff.wrong == [{"table": "payments", "op": "insert", "key": [1966], "column": "payment_method_id",
                           "expected": "credit_card_1", "got": "paypal_2"}]  # fmt: skip
    assert not diff.missing and not diff.extra
    # a row with little in common is not a wrong version of gold's: missing plus extra
    unrelated = {"payments": {"inserted": [{**refund, "payment_id": 7, "order_id": "#W9", "payment_method_id": "x",
                                            "kind": "charge", "amount_cents": 5}], "updated": [], "deleted": []}}  # fmt: skip
    diff = compare_changes({"payments": gold["payments"]}, unrelated, tables=tables)
    assert len(diff.missing) == 1 and len(diff.extra) == 1 and not diff.wrong


def test_updates_name_missing_wrong_and_extra_columns(world):
    gold = {"orders": {"inserted": [], "deleted": [], "updated": [
        {"key": ["#W1"], "changed": {"status": ["pending", "cancelled"], "cancel_reason": [None, "no longer needed"]}}]}}  # fmt: skip
    got = {"orders": {"inserted": [], "deleted": [], "updated": [
        {"key": ["#W1"], "changed": {"status": ["pending", "processed"], "ship_zip": ["10001", "10002"]}},
        {"key": ["#W2"], "changed": {"status": ["pending", "cancelled"]}}]}}  # fmt: skip
    diff = compare_changes(gold, got, tables=tables_from_schema(world.schema))
    assert diff.missing == [{"table": "orders", "op": "update", "key": ["#W1"],
                             "changed": {"cancel_reason": [None, "no longer needed"]}}]  # fmt: skip
    assert diff.wrong == [{"table": "orders", "op": "update", "key": ["#W1"], "column": "status",
                           "expected": "cancelled", "got": "processed"}]  # fmt: skip
    assert diff.extra == [{"table": "orders", "op": "update", "key": ["#W1"], "changed": {"ship_zip": ["10001", "10002"]}},
                          {"table": "orders", "op": "update", "key": ["#W2"], "changed": {"status": ["pending", "cancelled"]}}]  # fmt: skip


def test_a_refusal_task_fails_when_the_state_changes(world, kit_tasks):
    task = kit_tasks["refusal"]
    assert task.expected_changes == {}
    gold = score_trajectory(task, replay(world, task, task.gold_actions))
    assert gold.success and gold.reward == 1.0
    user_id = run(run_episode(world, task, GoldPolicy())).steps[0].output["user_id"]
    ticket = ToolCall("transfer_to_human_agent", {"summary": "Customer wants to cancel a delivered order.",
                                                  "user_id": user_id})  # fmt: skip
    traj = replay(world, task, [*task.gold_actions, ticket])
    score = score_trajectory(task, traj)
    assert not score.success and score.reward < 1.0
    assert [(e["table"], e["op"]) for e in score.extra_changes] == [("tickets", "insert")]
    assert [c.name for c in score.components] == ["refusal", "identified"]
    refusal = score.components[0]
    assert not refusal.passed and "had to be refused" in refusal.reason
    assert score.reward == pytest.approx(0.25)  # the identification alone
    assert score.failure_visible_step == len(task.gold_actions) == score.first_divergent_step
    # leaving the state alone is not enough: the agent must say it cannot be done, and why
    silent = score_trajectory(task, replay(world, task, task.gold_actions, answer="All done, have a nice day."))
    assert not silent.success and silent.reward == pytest.approx(0.25)
    assert "no reply says the request cannot be done" in silent.components[0].reason
    bare = score_trajectory(task, replay(world, task, task.gold_actions, answer="I'm sorry, but I can't do that."))
    assert not bare.success and "never says why" in bare.components[0].reason
    explained = score_trajectory(task, replay(world, task, task.gold_actions,
                                              answer="I can't cancel it: that order was already delivered."))  # fmt: skip
    assert explained.success and explained.reward == 1.0


def test_an_info_task_needs_its_outputs_said(world, kit_tasks):
    task = kit_tasks["info"]
    status = task.expected_outputs[0].value
    said = score_trajectory(task, replay(world, task, task.gold_actions, answer=f"It is {status.upper()}."))
    assert said.success and said.outputs == [{"label": "order_status", "value": status, "found": True}]
    mute = score_trajectory(task, replay(world, task, task.gold_actions, answer="I looked it up for you."))
    assert not mute.success and mute.reward == pytest.approx(0.25 + 0.15)  # identified, state unchanged
    assert mute.outputs[0]["found"] is False
    assert mute.first_divergent_step is None and mute.failure_visible_step == len(task.gold_actions)
    assert "order_status='" + status + "'" in next(c.reason for c in mute.components if c.name == "outputs")


def test_an_output_said_before_the_agent_looked_it_up_is_named_as_a_guess(world, kit_tasks):
    task = kit_tasks["info"]
    status = task.expected_outputs[0].value
    identify, look = task.gold_actions
    script = [ToolCall(identify.name, dict(identify.arguments)), f"I'd guess it is {status}.",
              ToolCall(look.name, dict(look.arguments)), "That is all."]  # fmt: skip
    guessed = score_trajectory(task, run(run_episode(world, task, ScriptedPolicy(script))))
    outputs = next(c for c in guessed.components if c.name == "outputs")
    assert not guessed.success and guessed.reward == pytest.approx(0.25 + 0.15)  # identified, state unchanged
    assert outputs.reason.startswith("stated before any tool result") and "look it up first" in outputs.reason
    assert "not stated in the replies" not in outputs.reason


# -- outputs ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("label", "value", "text", "found"), [
    ("refund_amount", "1299.50", "You get $1,299.50 back.", True),
    ("refund_amount", "1299.50", "Refund: 1299.5", True),
    ("refund_amount", "1299.50", "a refund of 1,299.50 USD.", True),
    ("refund_amount", "1299.50", "a refund of $1299.50.", True),
    ("refund_amount", "1,299.50", "refund 1299.50", True),
    ("refund_amount", "1299.50", "a refund of $1,299.51", False),
    ("refund_amount", "1299.50", "a refund of 11299.50", False),
    ("refund_amount", "1299.50", "order #W1299 for 50 dollars", False),
    ("status", "delivered", "Your order was  DELIVERED yesterday.", True),
    ("status", "delivered", "It is still undelivered.", False),
    ("status", "exchange requested", "The status is Exchange\nRequested.", True),
    ("carrier", "FedEx", "It ships with fedex.", True),
    ("tracking_number", "1Z6LLXV16944337956", "Tracking: 1Z6LLXV16944337956.", True),
    ("tracking_number", "1Z6LLXV16944337956", "Tracking: 1z6llxv16944337956", False),
    ("tracking_number", "1Z6LLXV16944337956", "Tracking: 1Z6LLXV169443379561", False),
    ("tracking_number", "453750256585", "tracking number 453750256585.", True),
    ("tracking_number", "453750256585", "tracking number 453,750,256,585", False),
    ("tracking_number", "453750256585", "tracking number 453750256586", False),
])  # fmt: skip
def test_output_matching(label, value, text, found):
    assert value_found(label, value, text) is found


def test_output_kinds_and_only_the_agents_words_count():
    assert output_kind("total", "359.20") == "number"
    assert output_kind("tracking_number", "453750256585") == "identifier"
    assert output_kind("code", "12") == "identifier"
    assert output_kind("anything", "9400104849860071352170") == "identifier"  # a long digit string is an id
    assert output_kind("anything", "1ZKE0B962632659201") == "identifier"
    assert output_kind("status", "delivered") == "text"
    messages = [{"role": "tool", "content": '{"total": 359.2, "tracking_number": "1ZKE0B962632659201"}'},
                {"role": "assistant", "content": "", "tool_calls": [{"id": "a"}]},
                {"role": "assistant", "content": [{"type": "text", "text": "Your total was $359.20."}]}]  # fmt: skip
    expected = [{"label": "total", "value": "359.20"}, {"label": "tracking_number", "value": "1ZKE0B962632659201"}]
    assert [o["found"] for o in check_outputs(expected, messages)] == [True, False]


# -- first divergent step -----------------------------------------------------------------------------------------


def test_gold_drop_divergence_is_the_dropped_step(world, generated):
    by_id = {t.id: t for t in generated}
    trajectories = run(run_many(world, generated, GoldPolicy(drop=0.3), trials=3, concurrency=16))
    dropped = 0
    for traj in trajectories:
        drops = [p["step"] for p in traj.perturbations if p["kind"] == "drop"]
        score = score_trajectory(by_id[traj.task_id], traj)
        assert score.first_divergent_step == (min(drops) if drops else None), (drops, score.divergence)
        if drops:
            dropped += 1
            gold = by_id[traj.task_id].gold_actions[min(drops)]
            assert f"gold step {min(drops)} {gold.name}" in score.divergence
            state_ok = all(c.passed for c in score.components if c.name in ("state", "refusal"))
            if not score.success and (0 not in drops or not state_ok):
                # only skips: every write made was gold's, so a wrong state shows at the end
                assert score.failure_visible_step == len(traj.steps)
            elif not score.success:  # no identification: it shows at the first step that reads the customer's data
                touching = [j for j, s in enumerate(traj.steps) if touches_customer_data(world, s, world.customer_kinds)]
                assert score.failure_visible_step == (touching[0] if touching else len(traj.steps))
    assert dropped > 100  # the check ran on many trajectories, over all task kinds
    assert Counter(score_trajectory(by_id[t.task_id], t).success for t in trajectories)[False] > 20


def test_gold_corrupt_divergence_is_the_corrupted_step(world, generated):
    """A corrupted argument is a wrong argument at that step, unless it is free text the scorer ignores."""
    by_id = {t.id: t for t in generated}
    trajectories = run(run_many(world, generated, GoldPolicy(corrupt=0.3, seed=3), trials=2, concurrency=16))
    checked = 0
    for traj in trajectories:
        corrupted = [p["step"] for p in traj.perturbations if p["kind"] == "corrupt" and p["argument"] != "summary"]
        score = score_trajectory(by_id[traj.task_id], traj)
        assert score.first_divergent_step == (min(corrupted) if corrupted else None), score.divergence
        checked += bool(corrupted)
    assert checked > 30


def test_harmless_reads_are_not_deviations_but_failed_calls_are(world, kit_tasks):
    task = kit_tasks["address"]
    g = task.gold_actions
    extra_reads = [ToolCall("list_product_types", {}), g[0], ToolCall("get_order_details", g[1].arguments)]
    traj = replay(world, task, [g[0], extra_reads[0], g[1], *extra_reads[1:], g[2]])
    score = score_trajectory(task, traj)
    assert score.success and score.first_divergent_step is None
    # an explicit default (line2="") is the call gold made without it
    explicit = ToolCall(g[2].name, {**g[2].arguments, "line2": ""})
    assert score_trajectory(task, replay(world, task, [*g[:2], explicit])).first_divergent_step is None
    # a read that fails by the agent's fault is a mistake, even when the agent recovers
    typo = ToolCall("get_order_details", {"order_id": "#W0000000"})
    score = score_trajectory(task, replay(world, task, [g[0], typo, *g[1:]]))
    assert score.success and score.first_divergent_step == 1 and "failed: not_found" in score.divergence
    # the wrong tool at a gold step
    wrong = ToolCall("cancel_pending_order", {"order_id": g[2].arguments["order_id"], "reason": "no longer needed"})
    score = score_trajectory(task, replay(world, task, [*g[:2], wrong]))
    assert not score.success and score.first_divergent_step == 2 == score.failure_visible_step
    assert score.divergence.startswith("never made gold step 2 modify_pending_order_address")


def test_injected_failures_are_not_deviations(world, kit_tasks):
    task = kit_tasks["cancel"]
    traj = run(run_episode(world, task, GoldPolicy()))
    failed = traj.steps[1].model_copy(update={"ok": False, "output": None, "noise": ["tool_failure"],
                                              "error": {"type": "temporarily_unavailable", "message": "retry"}})  # fmt: skip
    steps = [traj.steps[0], failed, *traj.steps[1:]]
    steps = [s.model_copy(update={"index": i}) for i, s in enumerate(steps)]
    assert align(task.gold_actions, steps).step is None
    agents = failed.model_copy(update={"noise": [], "error": {"type": "not_found", "message": "no such order"}})
    assert align(task.gold_actions, [steps[0], agents, *steps[2:]]).step == 1


def test_free_text_arguments_are_not_compared(world, generated):
    task = next(t for t in generated if t.kind == "action" and [a.name for a in t.gold_actions][-1]
                == "transfer_to_human_agent")  # fmt: skip
    calls = [ToolCall(a.name, {**a.arguments, "summary": "In my own words."} if a.name == "transfer_to_human_agent"
                      else a.arguments) for a in task.gold_actions]  # fmt: skip
    score = score_trajectory(task, replay(world, task, calls))
    assert score.success and score.first_divergent_step is None


# -- pass@k, pass^k, summary ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("n", "c", "k", "at", "hat"), [
    (5, 2, 1, 0.4, 0.4),
    (5, 2, 2, 1 - 3 / 10, 1 / 10),  # 1 - C(3,2)/C(5,2); C(2,2)/C(5,2)
    (10, 3, 5, 1 - 21 / 252, 0.0),  # 1 - C(7,5)/C(10,5); C(3,5) = 0
    (10, 7, 3, 1 - 1 / 120, 35 / 120),  # 1 - C(3,3)/C(10,3); C(7,3)/C(10,3)
    (4, 3, 2, 1.0, 0.5),  # n - c < k: any 2 of 4 include a success
    (4, 0, 2, 0.0, 0.0),
    (4, 4, 4, 1.0, 1.0),
    (1, 1, 1, 1.0, 1.0),
])  # fmt: skip
def test_pass_at_k_and_pass_hat_k(n, c, k, at, hat):
    assert pass_at_k(n, c, k) == pytest.approx(at, abs=1e-12)
    assert pass_hat_k(n, c, k) == pytest.approx(hat, abs=1e-12)


@pytest.mark.parametrize(("n", "c", "k"), [(3, 1, 4), (3, 4, 1), (3, -1, 1), (3, 1, 0), (0, 0, 1)])
def test_pass_at_k_rejects_impossible_counts(n, c, k):
    with pytest.raises(ValueError):
        pass_at_k(n, c, k)
    with pytest.raises(ValueError):
        pass_hat_k(n, c, k)


def test_percentile_interpolates():
    assert percentile([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0], 90) == pytest.approx(9.1)
    assert percentile([], 90) is None and percentile([2.5], 90) == 2.5


def test_summary_leaves_infra_trials_out_of_every_metric(world, kit_tasks):
    flaky, steady = kit_tasks["cancel"], kit_tasks["address"]
    typo = ToolCall("get_order_details", {"order_id": "#W0000000"})
    down = ScriptedPolicy([InfraError("server down", retryable=False)])
    trajectories = [
        run(run_episode(world, flaky, GoldPolicy(), trial=0)),
        replay(world, flaky, [*flaky.gold_actions[:1], typo], trial=1),
        run(run_episode(world, flaky, down, trial=2, limits=Limits(infra_backoff_s=0.0))),
        *[run(run_episode(world, steady, GoldPolicy(), trial=k)) for k in range(3)],
    ]
    tasks = {t.id: t for t in (flaky, steady)}
    scores = [score_trajectory(tasks[t.task_id], t) for t in trajectories]
    infra = scores[2]
    assert infra.infra_error and infra.reward == 0.0 and not infra.success and not infra.components
    assert "infra error" in infra.divergence
    summary = summarize(tasks, list(reversed(trajectories)), scores, trials=3).model_dump(mode="json")  # paired by (task, trial)
    assert {"trials", "success_rate", "pass_at_k", "pass_hat_k", "infra_errors"} <= set(summary)
    assert (summary["trials"], summary["episodes"], summary["scored"], summary["infra_errors"]) == (3, 6, 5, 1)
    assert summary["success_rate"] == pytest.approx(4 / 5)
    # flaky: n=2 scored, c=1; steady: n=3, c=3. k=3 only averages steady.
    assert summary["pass_at_k"] == pytest.approx({"1": (0.5 + 1) / 2, "2": (1 + 1) / 2, "3": 1.0})
    assert summary["pass_hat_k"] == pytest.approx({"1": (0.5 + 1) / 2, "2": (0 + 1) / 2, "3": 1.0})
    assert summary["pass_k_tasks"] == {"1": 2, "2": 2, "3": 1}
    assert summary["terminations"] == {"answered": 5}
    assert summary["by_kind"] == {"action": {"n": 5, "success_rate": pytest.approx(0.8)}}
    assert summary["by_target_tool"]["cancel_pending_order"] == {"n": 2, "success_rate": 0.5}
    assert summary["tool_errors"]["get_order_details"]["types"] == {"not_found": 1}
    assert summary["error_types"] == {"not_found": 1}
    assert summary["divergence"] == {"1": 1}
    assert summary["failures"]["missing_changes"] == 1
    assert summary["latency"]["episode_mean_s"] == pytest.approx(
        sum(t.wall_s for i, t in enumerate(trajectories) if i != 2) / 5, abs=1e-5)
    assert summary["noise"]["episodes_with_noise"] == 0
    json.dumps(summary)  # it is the summary.json
    with pytest.raises(ValueError, match="same trials"):
        summarize(tasks, trajectories[:-1], scores, trials=3)


def test_summary_groups_success_by_each_reasoning_demand(world, kit_tasks):
    """A task counts under every demand of its scenario, one without any under "none": where every level and
    kind fails alike, this is what tells which skill is missing (an order to pick from a description)."""
    picky = kit_tasks["cancel"].model_copy(deep=True)
    picky.scenario.demands = ["unknown_fact", "piecemeal"]
    plain = kit_tasks["address"]
    typo = ToolCall("get_order_details", {"order_id": "#W0000000"})
    trajectories = [run(run_episode(world, picky, GoldPolicy(), trial=0)),
                    replay(world, picky, [*picky.gold_actions[:1], typo], trial=1),
                    run(run_episode(world, plain, GoldPolicy(), trial=0))]  # fmt: skip
    tasks = {t.id: t for t in (picky, plain)}
    scores = [score_trajectory(tasks[t.task_id], t) for t in trajectories]
    summary = summarize(tasks, trajectories, scores, trials=2).model_dump(mode="json")
    assert summary["by_demand"] == {"none": {"n": 1, "success_rate": 1.0},
                                    "piecemeal": {"n": 2, "success_rate": 0.5},
                                    "unknown_fact": {"n": 2, "success_rate": 0.5}}  # fmt: skip


def test_score_round_trips_through_json_and_is_deterministic(world, kit_tasks):
    task = kit_tasks["cancel"]
    order = task.gold_actions[2].arguments["order_id"]
    extra = ToolCall("cancel_pending_order", {"order_id": other_pending_order(world, order), "reason": "no longer needed"})
    traj = replay(world, task, [*task.gold_actions[:2], extra], answer="Done: $12.50 refunded.")
    score = score_trajectory(task, traj)
    assert score.missing_changes and score.extra_changes and score.components and score.outputs
    text = score.model_dump_json()
    back = Score.model_validate_json(text)
    assert back == score and back.model_dump_json() == text
    assert score_trajectory(task, Trajectory.from_json(traj.to_json())).model_dump_json() == text


def test_a_trajectory_of_another_task_is_refused(world, kit_tasks):
    traj = run(run_episode(world, kit_tasks["cancel"], GoldPolicy()))
    with pytest.raises(ValueError, match="cannot be scored against"):
        score_trajectory(kit_tasks["address"], traj)
