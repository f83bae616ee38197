"""Tasks with more than one acceptable end state: scorers pass a trial that reaches any of them (and say which),
doing nothing or doing the alternative plus something else still fails, and ``tasks verify`` replays every
alternative and recomputes the expected outputs that name their gold step."""

from __future__ import annotations

import json
from typing import Any

import pytest

from rollout_kit import make_task, run
from toolworld.rollout.backends import GoldPolicy, ScriptedPolicy, confirmation_request, gold_answer, make_policy
from toolworld.rollout.loop import run_episode
from toolworld.scoring import SCORER_VERSION, Score, score_trajectory
from toolworld.store.runstore import decode_model, encode_model
from toolworld.tasks.generate import GENERATOR_VERSION, output_digest
from toolworld.tasks.kit import kit_for
from toolworld.tasks.model import Action, EndState, ExpectedOutput, Task
from toolworld.tasks.verify import verify_task, verify_tasks
from toolworld.world import ToolCall

MODIFY = "modify the pending order instead"


def _executed(world: Any, seed: int, actions: list[dict[str, Any]]) -> tuple[list[Action], dict[str, Any], list[Any]]:
    """Gold actions as generation records them (with output digests), the change-set and each result."""
    done, results = [], []
    with world.episode(seed) as ep:
        for a in actions:
            output = ep.call(a["name"], a["arguments"]).unwrap()
            done.append(Action(name=a["name"], arguments=a["arguments"], output_digest=output_digest(output)))
            results.append(output)
        return done, ep.changes().to_dict(), results


@pytest.fixture(scope="module")
def exchange_task(world) -> Task:
    """An exchange asked for on a pending order: refusing it (R9) is the primary end state; swapping the item
    of the pending order (modify_pending_order_items) is the alternative, with the charge the user must hear."""
    with world.episode(0) as ep:
        row = ep.query(
            "SELECT o.order_id, u.user_id, u.email, u.first_name, u.last_name, oi.item_id, v.item_id AS new_item "
            "FROM orders o JOIN users u ON u.user_id = o.user_id JOIN order_items oi ON oi.order_id = o.order_id "
            "JOIN variants v ON v.product_id = oi.product_id AND v.item_id != oi.item_id "
            "WHERE o.status = 'pending' AND o.items_modified = 0 AND v.stock >= oi.quantity "
            "AND v.price_cents > oi.unit_price_cents ORDER BY o.order_id, oi.item_id, v.item_id LIMIT 1")[0]  # fmt: skip
        card = ep.query("SELECT payment_method_id FROM payment_methods WHERE user_id = ? AND status = 'active' "
                        "ORDER BY payment_method_id LIMIT 1", (row["user_id"],))[0]["payment_method_id"]  # fmt: skip
        swap = {"order_id": row["order_id"], "item_ids": [row["item_id"]], "new_item_ids": [row["new_item"]],
                "payment_method_id": card}  # fmt: skip
        denied = ep.probe("exchange_delivered_order_items", swap)
        assert not denied.ok and denied.error is not None and denied.error.type == "policy_violation"
        reason = denied.error.message
    identify = {"name": "find_user_by_email", "arguments": {"email": row["email"]}}
    look = {"name": "get_order_details", "arguments": {"order_id": row["order_id"]}}
    gold, changes, _ = _executed(world, 0, [identify, look])
    alt_gold, alt_changes, results = _executed(world, 0, [identify, look,
                                                          {"name": "modify_pending_order_items", "arguments": swap}])  # fmt: skip
    charged = [o for o in kit_for(world).outputs("modify_pending_order_items", swap, results[2])
               if o.label == "charge_amount"]  # fmt: skip
    assert len(charged) == 1 and float(charged[0].value) > 0
    alt_outputs = [charged[0].model_copy(update={"step": 2})]
    instruction = (f"I'd like to exchange item {row['item_id']} of my order {row['order_id']} for item "
                   f"{row['new_item']}, charged to {card}.")  # fmt: skip
    return Task.model_validate({
        "id": Task.content_id(world.name, 0, instruction, changes), "world": world.name, "seed": 0,
        "kind": "refusal", "instruction": instruction,
        "user": {"name": f"{row['first_name']} {row['last_name']}", "persona": "brief",
                 "known": {"email": row["email"], "order_ids": [row["order_id"]]}},
        "gold_actions": [a.model_dump() for a in gold], "expected_changes": changes,
        "refusal": {"rule": "R9", "reason": reason,
                    "forbidden": {"name": "exchange_delivered_order_items", "arguments": swap}},
        "alternatives": [{"label": MODIFY, "kind": "action", "gold_actions": [a.model_dump() for a in alt_gold],
                          "expected_changes": alt_changes, "expected_outputs": [o.model_dump() for o in alt_outputs]}],
        "difficulty": {"path_length": 2, "writes": 0, "tools": [a.name for a in gold], "level": "medium"},
        "provenance": {"sampler": "test", "targets": ["exchange_delivered_order_items"], "index": 0,
                       "generator_version": GENERATOR_VERSION},
    })  # fmt: skip


def as_if(task: Task, end: EndState) -> Task:
    """The task with ``end`` as its only end state (what an agent aiming at that end state is played against)."""
    return task.model_copy(update={"kind": end.kind, "gold_actions": end.gold_actions, "refusal": end.refusal,
                                   "expected_changes": end.expected_changes, "expected_outputs": end.expected_outputs,
                                   "alternatives": []})  # fmt: skip


def scripted(world: Any, task: Task, calls: list[Any], answer: str) -> Any:
    """Each call in a turn of its own, a write that needs consent asked for first (the scripted user says yes)."""
    script: list[Any] = []
    for c in calls:
        call = c if isinstance(c, ToolCall) else ToolCall(c.name, dict(c.arguments))
        tool = world.tools[call.name]
        if tool.mutates and tool.confirm:
            script.append(confirmation_request(call))
        script.append(call)
    return run(run_episode(world, task, ScriptedPolicy([*script, answer])))


# -- scoring -------------------------------------------------------------------------------------------------------


def test_gold_of_the_primary_end_state_passes_as_the_primary(world, exchange_task):
    score = score_trajectory(exchange_task, run(run_episode(world, exchange_task, GoldPolicy())))
    assert score.success and score.reward == 1.0 and score.end_state is None
    assert [c.name for c in score.components] == ["refusal", "identified"]
    assert score.scorer_version == SCORER_VERSION


def test_reaching_the_alternative_passes_and_names_it(world, exchange_task):
    alt = exchange_task.alternatives[0]
    traj = run(run_episode(world, as_if(exchange_task, alt), GoldPolicy()))
    assert traj.task_id == exchange_task.id and any(s.mutates for s in traj.steps)
    score = score_trajectory(exchange_task, traj)
    assert score.success and score.reward == 1.0 and score.end_state == MODIFY
    # judged as an action task: the state, the charge said, conduct (identified, the write confirmed)
    assert [c.name for c in score.components] == ["state", "outputs", "identified", "confirmed"]
    assert score.outputs == [{"label": "charge_amount", "value": alt.expected_outputs[0].value, "found": True}]
    assert score.first_divergent_step is None and not score.extra_changes
    # without the alternative the same trajectory is a refusal task whose state changed
    alone = score_trajectory(exchange_task.model_copy(update={"alternatives": []}), traj)
    assert not alone.success and alone.end_state is None and alone.extra_changes


def test_the_alternative_is_held_to_its_own_outputs_and_conduct(world, exchange_task):
    alt = exchange_task.alternatives[0]
    # the right write, but the charge is never told: a failure, judged against the alternative (higher reward)
    silent = scripted(world, exchange_task, alt.gold_actions, "Done, the item was swapped.")
    score = score_trajectory(exchange_task, silent)
    assert not score.success and score.end_state == MODIFY and score.reward == pytest.approx(0.8)
    assert not next(c for c in score.components if c.name == "outputs").passed
    # the right write made without asking first fails ``confirmed``
    pushy = run(run_episode(world, exchange_task, ScriptedPolicy(
        [ToolCall(a.name, dict(a.arguments)) for a in alt.gold_actions] + [gold_answer(as_if(exchange_task, alt))])))  # fmt: skip
    score = score_trajectory(exchange_task, pushy)
    assert not score.success and score.end_state == MODIFY
    assert not next(c for c in score.components if c.name == "confirmed").passed


@pytest.mark.parametrize("spec", ["noop", "gibberish:seed=3"])
def test_doing_nothing_or_babbling_fails_every_end_state(world, exchange_task, spec):
    traj = run(run_episode(world, exchange_task, make_policy(spec)))
    score = score_trajectory(exchange_task, traj)
    assert not score.success and score.reward == 0.0
    assert score.end_state is None  # no end state scored better: the tie goes to the primary


def test_the_alternative_plus_another_write_fails(world, exchange_task):
    alt = exchange_task.alternatives[0]
    order = alt.gold_actions[2].arguments["order_id"]
    move = ToolCall("modify_pending_order_address", {"order_id": order, "line1": "12 Main Street",
                                                     "city": "Springfield", "state": "IL", "zip": "62704"})  # fmt: skip
    traj = scripted(world, exchange_task, [*alt.gold_actions, move], gold_answer(as_if(exchange_task, alt)))
    assert sum(s.mutates and s.ok for s in traj.steps) == 2
    score = score_trajectory(exchange_task, traj)
    assert not score.success and score.reward < 1.0
    # the nearest end state is the alternative, and the divergence is told against its gold: the extra write
    assert score.end_state == MODIFY
    assert [(e["table"], e["key"]) for e in score.extra_changes] == [("orders", [order])]
    assert not score.missing_changes and not score.wrong_values
    assert score.first_divergent_step == score.failure_visible_step == len(traj.steps) - 1
    assert score.divergence.startswith("made write modify_pending_order_address")


def test_saying_the_refusal_and_making_the_write_is_the_alternative_not_both(world, exchange_task):
    """A refusal said over a changed state is no refusal: the state decides, here for the alternative."""
    alt = exchange_task.alternatives[0]
    both = gold_answer(exchange_task) + " " + gold_answer(as_if(exchange_task, alt))
    score = score_trajectory(exchange_task, scripted(world, exchange_task, alt.gold_actions, both))
    assert score.success and score.end_state == MODIFY


def test_scores_round_trip_with_the_end_state_and_old_scores_still_load(world, exchange_task):
    alt = exchange_task.alternatives[0]
    score = score_trajectory(exchange_task, run(run_episode(world, as_if(exchange_task, alt), GoldPolicy())))
    assert Score.model_validate_json(score.model_dump_json()) == score
    assert decode_model(Score, encode_model(score)) == score
    old = json.loads(score.model_dump_json())
    del old["end_state"]
    old["scorer_version"] = "toolworld-score/2"
    loaded = decode_model(Score, json.dumps(old))
    assert loaded.end_state is None and loaded.scorer_version == "toolworld-score/2"
    assert SCORER_VERSION != "toolworld-score/2"  # the same trajectory can score otherwise now


# -- tasks verify --------------------------------------------------------------------------------------------------


def _edit_alternative(task: Task, **update: Any) -> Task:
    alt = task.alternatives[0].model_copy(update=update)
    return task.model_copy(update={"alternatives": [alt]})


def test_verify_replays_every_alternative(world, exchange_task):
    assert verify_task(exchange_task, world) is None
    alt = exchange_task.alternatives[0]
    # a changed value in the alternative's change-set
    changes = json.loads(json.dumps(alt.expected_changes))
    changes["orders"]["updated"][0]["changed"]["items_modified"] = [0, 2]
    failure = verify_task(_edit_alternative(exchange_task, expected_changes=changes), world)
    assert failure is not None and failure.end_state == MODIFY and failure.step is None
    assert failure.message.startswith(f"alternative {MODIFY!r}: end state differs from expected_changes: orders.updated")
    # an edited argument of the alternative's write names its step
    bad = alt.gold_actions[2].model_copy(update={"arguments": {**alt.gold_actions[2].arguments,
                                                               "new_item_ids": ["0000000000"]}})  # fmt: skip
    failure = verify_task(_edit_alternative(exchange_task, gold_actions=[*alt.gold_actions[:2], bad]), world)
    assert failure is not None and failure.step == 2 and failure.end_state == MODIFY
    assert failure.message.startswith(f"alternative {MODIFY!r}: modify_pending_order_items failed")
    # the primary is untouched by those edits
    assert verify_task(exchange_task.model_copy(update={"alternatives": []}), world) is None


def test_verify_recomputes_expected_outputs_from_their_step(world, exchange_task):
    alt = exchange_task.alternatives[0]
    right = alt.expected_outputs[0]
    edited = right.model_copy(update={"value": f"{float(right.value) + 1:.2f}"})
    failure = verify_task(_edit_alternative(exchange_task, expected_outputs=[edited]), world)
    assert failure is not None and failure.step == 2 and failure.end_state == MODIFY
    assert failure.message == (f"alternative {MODIFY!r}: expected output charge_amount={edited.value} is not what "
                               f"step 2 (modify_pending_order_items) returns now: {right.value}")  # fmt: skip
    # a label the step does not give
    other = right.model_copy(update={"label": "refund_amount"})
    failure = verify_task(_edit_alternative(exchange_task, expected_outputs=[other]), world)
    assert failure is not None and "returns now: no refund_amount" in failure.message
    # a step that is not there
    far = right.model_copy(update={"step": 7})
    failure = verify_task(_edit_alternative(exchange_task, expected_outputs=[far]), world)
    assert failure is not None and "names step 7, but there are 3 gold actions" in failure.message


def test_verify_checks_outputs_of_the_primary_and_skips_those_without_a_step(world):
    task = make_task("cancel", world=world)
    assert verify_task(task, world) is None and all(o.step is None for o in task.expected_outputs)
    # outputs that name no step (older files) are not checked, even when no kit output has their label
    assert task.expected_outputs[0].label not in {"status", "total", "refund_amount"}
    cancel = task.gold_actions[2]
    with world.episode(task.seed) as ep:
        results = [ep.call(a.name, a.arguments).unwrap() for a in task.gold_actions]
    derived = kit_for(world).outputs(cancel.name, cancel.arguments, results[2])
    refund = next(o for o in derived if o.label == "refund_amount")
    stepped = [ExpectedOutput(label="refund_amount", value=refund.value, step=2)]
    assert verify_task(task.model_copy(update={"expected_outputs": stepped}), world) is None
    wrong = [ExpectedOutput(label="refund_amount", value="0.01", step=2)]
    failure = verify_task(task.model_copy(update={"expected_outputs": wrong}), world)
    assert failure is not None and failure.step == 2 and failure.end_state is None
    assert failure.message.startswith(f"expected output refund_amount=0.01 is not what step 2 (cancel_pending_order) "
                                      f"returns now: {refund.value}")  # fmt: skip
    report = verify_tasks([(5, task.model_copy(update={"expected_outputs": wrong}))])
    assert report.verified == 0 and report.failures[0].line == 5 and report.failures[0].step == 2


def test_verify_rejects_alternatives_that_cannot_be_told_apart_or_are_reached_by_doing_nothing(world, exchange_task):
    alt = exchange_task.alternatives[0]
    twice = exchange_task.model_copy(update={"alternatives": [alt, alt]})
    failure = verify_task(twice, world)
    assert failure is not None and "share the label" in failure.message
    empty = EndState(label="say sorry", kind="action", gold_actions=alt.gold_actions[:2], expected_changes={})
    failure = verify_task(exchange_task.model_copy(update={"alternatives": [empty]}), world)
    assert failure is not None and failure.end_state == "say sorry" and "does nothing" in failure.message
    refusal = EndState(label="refuse", kind="refusal", gold_actions=alt.gold_actions[:2],
                       expected_changes=exchange_task.expected_changes)  # fmt: skip
    failure = verify_task(exchange_task.model_copy(update={"alternatives": [refusal]}), world)
    assert failure is not None and "forbidden call" in failure.message
