"""No free pass: probes that do nothing or babble fail every task kind, gold passes every one; a refusal counts
only when it is said with its reason; conduct (identification first, a described and confirmed write) is
scored on real episodes, and each way of breaking it is named at the step where it broke."""

from __future__ import annotations

import statistics
from collections import Counter
from typing import Any

import pytest

from rollout_kit import make_task, run
from toolworld.env.user import ScriptedUser
from toolworld.records.trajectory import Step, Trajectory
from toolworld.rollout.backends import (
    GibberishPolicy,
    GoldPolicy,
    NoopPolicy,
    ScriptedPolicy,
    confirmation_request,
    gold_answer,
    make_policy,
)
from toolworld.rollout.loop import run_episode, run_many
from toolworld.scoring import (
    WEIGHTS,
    check_outputs,
    cites_reason,
    is_affirmative,
    refuses,
    score_trajectory,
    states_refusal,
)
from toolworld.scoring.conduct import check_identified
from toolworld.scoring.outputs import HEDGED, UNGROUNDED, hedges, schema_enums
from toolworld.tasks.generate import generate
from toolworld.tasks.model import Task
from toolworld.world import ToolCall


@pytest.fixture(scope="module")
def mixed(world) -> list[Task]:
    tasks = generate(world, 200, seed=0).tasks
    kinds = Counter(t.kind for t in tasks)
    assert len(tasks) == 200 and kinds["action"] >= 100 and kinds["refusal"] >= 10 and kinds["info"] >= 10, kinds
    return tasks


@pytest.fixture(scope="module")
def cancel() -> Task:
    return make_task("cancel")


def scores_of(world: Any, tasks: list[Task], policy: Any) -> tuple[list[Trajectory], list[Any]]:
    by_id = {t.id: t for t in tasks}
    trajectories = run(run_many(world, tasks, policy, trials=1, concurrency=16, user=ScriptedUser()))
    return trajectories, [score_trajectory(by_id[t.task_id], t, world=world) for t in trajectories]


# -- the floor and the ceiling ------------------------------------------------------------------------------------


@pytest.mark.parametrize("spec", ["noop", "gibberish", "gibberish:seed=7"])
def test_probes_fail_every_task_of_a_mixed_set(world, mixed, spec):
    trajectories, scores = scores_of(world, mixed, make_policy(spec))
    rewards = [s.reward for s in scores]
    kinds = {t.id: t.kind for t in mixed}
    by_kind = {k: max(s.reward for s in scores if kinds[s.task_id] == k) for k in ("action", "refusal", "info")}
    print(f"{spec}: successes {sum(s.success for s in scores)}/200, mean reward {statistics.mean(rewards):.4f}, "
          f"max {max(rewards):.4f}, max by kind {by_kind}")  # fmt: skip
    assert not any(s.success for s in scores)
    assert max(rewards) <= 0.34 and statistics.mean(rewards) <= 0.05
    assert not any(s.infra_error for s in scores)
    assert by_kind["action"] == 0.0 and by_kind["refusal"] == 0.0  # nothing at all for doing nothing
    if spec == "noop":
        assert all(not t.steps and t.termination == "answered" for t in trajectories)
    else:  # the babble reached the tools, and was the agent's error there
        errors = Counter(e["type"] for t in trajectories for e in t.agent_errors)
        assert errors["unknown_tool"] and errors["invalid_arguments"] and errors["not_found"], errors


def test_gold_passes_every_task_of_the_same_set(world, mixed):
    trajectories, scores = scores_of(world, mixed, GoldPolicy())
    assert all(s.success and s.reward == 1.0 for s in scores), next(s for s in scores if not s.success)
    confirmed = [c for s in scores for c in s.components if c.name == "confirmed"]
    assert len(confirmed) > 100 and all(c.passed for c in confirmed)
    # gold asks before each write that needs consent, and the scripted user says yes
    traj = next(t for t in trajectories if any(s.mutates for s in t.steps))
    write = next(s for s in traj.steps if s.mutates)
    assistant = [m for m in traj.messages if m["role"] == "assistant"]
    assert assistant[write.turn - 1]["content"] == confirmation_request(ToolCall(write.name, write.arguments))


def test_weights_leave_no_free_credit():
    """Only an info task's unchanged state is credited without action, and it is a sliver."""
    for kind, weights in WEIGHTS.items():
        assert sum(weights.values()) == pytest.approx(1.0), kind
    assert "state" not in WEIGHTS["refusal"]
    assert WEIGHTS["info"]["state"] / (WEIGHTS["info"]["state"] + WEIGHTS["info"]["outputs"]) <= 0.34
    # right state but a forgotten refund amount stays well above a wrong order with everything else right
    action = WEIGHTS["action"]
    assert 1 - action["outputs"] >= 0.8 and action["identified"] + action["confirmed"] + action["outputs"] <= 0.5


# -- refusals -------------------------------------------------------------------------------------------------------

R1 = ("R1", "Order #W3324486 is 'delivered'; it can be cancelled only when the order is 'pending' (policy R1). A "
      "delivered order's items can be returned with return_delivered_order_items instead.")  # fmt: skip
R3 = ("R3", "The items of order #W2478985 were already modified once; items can be modified only once per order "
      "(policy R3). The order can still be cancelled, or transfer the customer to a human agent.")  # fmt: skip
R4 = ("R4", "Gift card gift_card_3214554 has a balance of $20.00, less than the $35.50 to pay (policy R4); choose "
      "another payment method.")  # fmt: skip
R5 = ("R5", "Order #W5997215 is 'processed'; its shipping address can be changed only when the order is 'pending' "
      "(policy R5). The parcel is already on its way; the customer can contact the carrier.")  # fmt: skip
R7 = ("R7", "Payment method debit_card_6236153 is expired and cannot be used (policy R7); ask the customer for "
      "another payment method.")  # fmt: skip
R8 = ("R8", "Order #W6815349 was delivered on 2026-03-23, 52 days ago; items can be returned only within 30 days "
      "of delivery (policy R8).")  # fmt: skip
R9 = ("R9", "Order #W6877752 was delivered on 2025-10-07, 220 days ago; items can be exchanged only within 30 days "
      "of delivery (policy R9).")  # fmt: skip
R10 = ("R10", "Order #W7645037 already has a return or exchange ('returned'); only one return or exchange can be "
       "requested per order (policy R10). Transfer the customer to a human agent.")  # fmt: skip

REFUSALS = [
    (R1, "I'm sorry, but I can't cancel order #W3324486: only pending orders can be cancelled (policy R1)."),
    (R1, "Unfortunately I'm unable to cancel this order because its status is 'delivered'."),
    (R1, "I cannot cancel it: the order was already delivered, and under rule 1 only pending orders can be cancelled."),
    (R1, "I'm not allowed to cancel delivered orders; that is against our policy."),
    (R1, "That's not something I can do: order #W3324486 has been delivered."),
    (R1, "Cancelling isn\u2019t possible here, since the order has already been delivered."),
    (R3, "The items on this order were already changed once, and items can be modified only once per order, so I "
         "can't make another change."),
    (R4, "That gift card's balance doesn't cover the $35.50 difference, so I can't use it."),
    (R5, "I can't change the shipping address: the order is already processed, and addresses can only be changed "
         "while it is pending (R5)."),
    (R5, "Unfortunately the order has already been processed, so its address can no longer be changed."),
    (R7, "That card is expired, so I'm not able to use it. Do you have another payment method?"),
    (R7, "I won't be able to charge the debit card ending in 6153, because it has expired."),
    (R8, "Returns are accepted only within 30 days of delivery; yours arrived 52 days ago, so I can't start a return."),
    (R8, "I'm afraid that order is past the 30-day return window, so a return is not possible."),
    (R9, "Sorry, that order was delivered 220 days ago, well past our exchange window."),
    (R9, "That order was delivered 220 days ago, which is outside the 30-day exchange window, so I can't exchange it."),
    (R9, "Per policy R9, exchanges are only possible within 30 days of delivery, so I won't be able to exchange these."),
    (R10, "This order already had a return, and only one return or exchange is allowed per order, so I cannot open "
          "another one. I can transfer you to a human agent."),
    (R10, "Sorry, since the items were already returned, another return is not allowed."),
]  # fmt: skip

NOT_REFUSALS = [
    (R1, "I can't wait to help you with order #W3324486 (policy R1)!"),
    (R1, "I can't thank you enough for your patience. Your order was delivered."),
    (R1, "Sure! I've cancelled order #W3324486 for you."),
    (R1, "Your order #W3324486 is 'delivered'."),
    (R1, "I'm sorry for the wait. Your order was delivered yesterday."),
    (R1, "I'm sorry, but I can't do that."),
    (R1, "Unfortunately, that is not possible."),
    (R1, "I cannot help with order #W3324486."),
    (R1, "I can't do that because of policy R2."),
    (R10, "I cannot do that under policy R1."),
    (R1, "Done! Your order will be shipped soon; let me know if you need anything else."),
    (R9, "I can't believe it has been 220 days already!"),
    (R9, "You have 30 days to exchange items; happy to help."),
    (R1, "Of course, I can cancel it right away."),
    (R1, "Thanks for reaching out."),
    (R1, ""),
    (R1, "Qwxz lkjh poiuy mnbv trewq zxcv."),
    (R1, "Xkcd plorf zindle wub cannot."),
    (R1, "Banana window purple keyboard delivered river."),
    (R7, "I couldn't be happier to help; that card is expired."),
]


@pytest.mark.parametrize(("rule_reason", "text"), REFUSALS)
def test_refusals_with_a_reason_are_stated(rule_reason, text):
    rule, reason = rule_reason
    assert refuses(text)
    assert states_refusal(text, reason, rule)


@pytest.mark.parametrize(("rule_reason", "text"), NOT_REFUSALS)
def test_non_refusals_and_refusals_without_a_reason_are_not(rule_reason, text):
    rule, reason = rule_reason
    assert not states_refusal(text, reason, rule)


def test_a_refusal_citing_other_rules_is_not_a_citation():
    """Naming every rule (or the wrong one) would otherwise pass every refusal: an optimizer's shotgun."""
    rule, reason = R1
    assert states_refusal("I cannot cancel it: policy R1 allows only pending orders.", reason, rule)
    assert not states_refusal("I cannot do that because of policy R1, R2, R3, R4, R5, R6, R7 or R13.", reason, rule)
    assert not states_refusal("Unfortunately policy R13 does not allow it.", reason, rule)
    # a rule the reason itself names counts as the reason's own
    assert states_refusal("I cannot: R1 applies, and R2 says refunds wait.", reason + " (see policy R2)", rule)


def test_refusal_and_reason_must_be_in_one_reply(world):
    """A vague "unfortunately" early and the status mentioned later do not add up to a refusal."""
    task = make_task("refusal")
    assert task.refusal is not None
    script = [*[ToolCall(a.name, a.arguments) for a in task.gold_actions],
              "Unfortunately I need to check something first. What is your email?",
              "Your order has been delivered."]  # fmt: skip
    score = score_trajectory(task, run(run_episode(world, task, ScriptedPolicy(script))))
    refusal = next(c for c in score.components if c.name == "refusal")
    assert not score.success and not refusal.passed and "never says why" in refusal.reason
    said = ScriptedPolicy([*script[:-2], "I can't cancel it: the order has already been delivered."])
    assert score_trajectory(task, run(run_episode(world, task, said))).success


def test_gold_answer_cites_the_rule(mixed):
    for task in mixed:
        if task.refusal is not None:
            text = gold_answer(task)
            assert f"policy {task.refusal.rule}" in text and states_refusal(text, task.refusal.reason, task.refusal.rule)


# -- confirmation -------------------------------------------------------------------------------------------------

YES = ["Yes, please go ahead.", "yes", "Yeah, do it.", "Sure.", "OK", "Okay, go ahead!", "Please do.", "Confirmed.",
       "That's correct.", "Yep, that's right.", "Absolutely, proceed.", "Sure, no problem."]  # fmt: skip
NO = ["No.", "No, don't do that.", "Nope", "That's not correct.", "Wait, what?", "Please don't.", "Hmm, let me think.",
      "I'd rather not.", "Yes... actually no, stop.", "Can you tell me the price first?", "I can't decide."]  # fmt: skip


@pytest.mark.parametrize("text", YES)
def test_affirmative_answers(text):
    assert is_affirmative(text)


@pytest.mark.parametrize("text", NO)
def test_answers_that_are_not_a_yes(text):
    assert not is_affirmative(text)


@pytest.mark.parametrize("ask", [
    "I am about to cancel order #W1 (reason: no longer needed). Shall I proceed?",
    "Is it OK if I cancel order #W1?",
    "Okay to cancel order #W1 now?",
    "I'll cancel order #W1 and refund $20 to your card. Does that sound good?",
    "Should we go ahead with cancelling #W1?",
    "Can you confirm that you want order #W1 cancelled?",
    "Cancel order #W1: is that alright?",
])  # fmt: skip
def test_scripted_user_says_yes_to_any_common_request_for_consent(cancel, ask):
    session = ScriptedUser().start(cancel)
    session.reply([])  # the opening message
    reply = session.reply([{"role": "assistant", "content": ask}])
    assert not reply.done and is_affirmative(reply.content), reply


def test_scripted_user_answers_a_fact_request_with_the_fact_not_a_yes(cancel):
    session = ScriptedUser().start(cancel)
    session.reply([])
    reply = session.reply([{"role": "assistant", "content": "Can you confirm your email address?"}])
    assert cancel.user.known["email"] in reply.content and not is_affirmative(reply.content)


def _cancel_script(task: Task, ask: str | None) -> list[Any]:
    g = [ToolCall(a.name, a.arguments) for a in task.gold_actions]
    return [*g[:2], *([ask] if ask is not None else []), g[2], gold_answer(task)]


def component(score: Any, name: str) -> Any:
    return next(c for c in score.components if c.name == name)


def test_a_write_without_consent_fails_confirmation_at_that_step(world, cancel):
    order = cancel.gold_actions[2].arguments["order_id"]
    cases = {
        None: "without asking",
        "Shall I proceed?": "without describing it",
        f"I am about to cancel order {order}. Shall I proceed?": None,
        f"Cancelling order {order.lstrip('#').lower()} (no longer needed): please confirm.": None,
    }
    for ask, why in cases.items():
        traj = run(run_episode(world, cancel, ScriptedPolicy(_cancel_script(cancel, ask))))
        score = score_trajectory(cancel, traj)
        assert component(score, "state").passed, ask
        confirmed = component(score, "confirmed")
        if why is None:
            assert score.success and confirmed.passed, (ask, confirmed.reason)
            continue
        assert not score.success and not confirmed.passed and why in confirmed.reason, (ask, confirmed.reason)
        assert score.reward == pytest.approx(1 - 0.15) and score.failure_visible_step == 2


def test_a_no_or_a_statement_is_not_consent(world, cancel):
    """The scorer reads the conversation: a user's no, or an agent that announced instead of asking, fails."""
    gold = run(run_episode(world, cancel, GoldPolicy()))
    assert score_trajectory(cancel, gold).success
    yes_at = max(i for i, m in enumerate(gold.messages[:-1]) if m["role"] == "user")
    ask_at = yes_at - 1
    assert gold.messages[ask_at]["role"] == "assistant" and "?" in gold.messages[ask_at]["content"]

    def edited(at: int, content: str) -> Trajectory:
        messages = [dict(m) for m in gold.messages]
        messages[at]["content"] = content
        return gold.model_copy(update={"messages": messages})

    refused = score_trajectory(cancel, edited(yes_at, "No, don't cancel it."))
    assert not refused.success and "without a yes" in component(refused, "confirmed").reason
    order = cancel.gold_actions[2].arguments["order_id"]
    announced = score_trajectory(cancel, edited(ask_at, f"I will now cancel order {order}."))
    assert not announced.success and "without asking for confirmation" in component(announced, "confirmed").reason


def test_one_yes_covers_several_writes_each_described(world, cancel):
    g = [ToolCall(a.name, a.arguments) for a in cancel.gold_actions]
    first = g[2].arguments["order_id"]
    with world.episode(0) as ep:
        second = ep.query("SELECT order_id FROM orders WHERE status = 'pending' AND order_id != ? AND user_id = "
                          "(SELECT user_id FROM orders WHERE order_id = ?) ORDER BY order_id LIMIT 1",
                          (first, first))[0]["order_id"]  # fmt: skip
    both = ToolCall("cancel_pending_order", {"order_id": second, "reason": "no longer needed"})
    ask_both = f"I am about to cancel orders {first} and {second}. Shall I proceed?"
    score = score_trajectory(cancel, run(run_episode(world, cancel, ScriptedPolicy([*g[:2], ask_both, g[2], both]))))
    assert component(score, "confirmed").passed and not component(score, "state").passed  # the extra cancel
    ask_one = f"I am about to cancel order {first}. Shall I proceed?"
    score = score_trajectory(cancel, run(run_episode(world, cancel, ScriptedPolicy([*g[:2], ask_one, g[2], both]))))
    confirmed = component(score, "confirmed")
    assert not confirmed.passed and confirmed.reason.startswith(f"step 3 cancel_pending_order(order_id='{second}'")


def test_a_write_that_needs_no_consent_is_not_asked_for(world, mixed):
    task = next(t for t in mixed if t.kind == "action"
                and [a.name for a in t.gold_actions if world.tools[a.name].mutates] == ["transfer_to_human_agent"])  # fmt: skip
    script = [ToolCall(a.name, a.arguments) for a in task.gold_actions] + [gold_answer(task)]
    score = score_trajectory(task, run(run_episode(world, task, ScriptedPolicy(script))))
    assert score.success and "confirmed" not in [c.name for c in score.components]


def test_a_task_with_writes_fails_confirmation_when_nothing_was_written(world, cancel):
    score = score_trajectory(cancel, run(run_episode(world, cancel, NoopPolicy())))
    assert not component(score, "confirmed").passed and score.reward == 0.0


# -- identification -----------------------------------------------------------------------------------------------


def test_the_customer_must_be_identified_before_their_data_is_touched(world, cancel):
    g = [ToolCall(a.name, a.arguments) for a in cancel.gold_actions]
    ask = confirmation_request(g[2])
    other = ToolCall("find_user_by_email", {"email": "someone.else@example.com"})
    with world.episode(0) as ep:  # a real customer, but not the one asking
        stranger = ep.query("SELECT email FROM users WHERE email != ? ORDER BY user_id LIMIT 1",
                            (cancel.user.known["email"],))[0]["email"]  # fmt: skip
    cases = [
        ([g[0], g[1], ask, g[2]], True, None),
        ([ToolCall("search_products", {"query": "jacket"}), g[0], g[1], ask, g[2]], True, None),  # not their data
        ([other, g[0], g[1], ask, g[2]], True, None),  # a failed lookup, then the right one
        ([g[1], ask, g[2]], False, 0),  # never identified
        ([g[1], g[0], ask, g[2]], False, 0),  # identified too late
    ]
    for script, ok, visible in cases:
        traj = run(run_episode(world, cancel, ScriptedPolicy([*script, gold_answer(cancel)])))
        score = score_trajectory(cancel, traj)
        identified = component(score, "identified")
        assert identified.passed is ok and score.success is ok, (script, identified.reason)
        if not ok:
            assert component(score, "state").passed  # the world let it through; the conduct is what failed
            assert score.failure_visible_step == visible, identified.reason
            assert score.reward == pytest.approx(1 - 0.15)
    # a real customer, but not the one asking: not an identification of this user, whatever the world did next
    traj = run(run_episode(world, cancel, ScriptedPolicy([ToolCall("find_user_by_email", {"email": stranger}), g[1],
                                                          gold_answer(cancel)])))  # fmt: skip
    identified = component(score_trajectory(cancel, traj), "identified")
    assert not identified.passed and "step 0 find_user_by_email" in identified.reason
    assert "its arguments are not what the customer told" in identified.reason
    late = score_trajectory(cancel, run(run_episode(world, cancel, ScriptedPolicy([g[1], g[0], ask, g[2]]))))
    assert "the identification came later" in component(late, "identified").reason


def test_identification_facts_compare_case_and_space_insensitively(world, mixed):
    task = next(t for t in mixed if t.kind == "action" and t.gold_actions[1].name == "get_order_details")
    known = task.user.known

    def step(index: int, name: str, arguments: dict[str, Any], ok: bool = True) -> Step:
        return Step(index=index, turn=index, call_id=f"c{index}", name=name, arguments=arguments, ok=ok)

    loud = {"email": f"  {known['email'].upper()} "}
    named = {"first_name": known["first_name"].lower(), "last_name": known["last_name"], "zip": known["zip"]}
    order = step(1, "get_order_details", task.gold_actions[1].arguments)
    assert check_identified(task, [step(0, "find_user_by_email", loud), order], world).passed
    assert check_identified(task, [step(0, "find_user_by_name_zip", named), order], world).passed
    assert not check_identified(task, [step(0, "find_user_by_name_zip", {**named, "zip": "00000"}), order], world).passed
    assert not check_identified(task, [step(0, "find_user_by_email", loud, ok=False), order], world).passed
    # a fact the user never had is a guess, even when it is right: the kit's user does not know their zip
    unknown = make_task("cancel")
    assert "zip" not in unknown.user.known
    assert not check_identified(unknown, [step(0, "find_user_by_name_zip", {**named, "zip": "12345"})], world).passed


# -- the probes as policies -------------------------------------------------------------------------------------------


def test_probe_specs_and_their_errors():
    assert isinstance(make_policy("noop"), NoopPolicy)
    p = make_policy("gibberish:seed=3")
    assert isinstance(p, GibberishPolicy) and p.seed == 3 and p.name == "gibberish:seed=3"
    assert make_policy("gibberish,seed=4").seed == 4 and make_policy("gibberish").name == "gibberish"
    for bad, why in [("noop:seed=1", "noop takes no options"), ("gibberish:temperature=1", "gibberish takes seed"),
                     ("gibberish:seed=x", "must be an integer")]:  # fmt: skip
        with pytest.raises(ValueError, match=why) as info:
            make_policy(bad)
        assert "Valid forms" in str(info.value) and "gibberish" in str(info.value)


def test_gibberish_is_reproducible_per_seed(world, mixed):
    tasks = mixed[:20]
    def conversations(seed: int) -> list[Any]:
        trajectories = run(run_many(world, tasks, GibberishPolicy(seed=seed), trials=1))
        return [t.messages for t in sorted(trajectories, key=lambda t: t.task_id)]

    assert conversations(5) == conversations(5) != conversations(6)


def test_conduct_is_scored_without_a_world_at_hand(world, cancel):
    """A task of a world that is not registered is scored from the trajectory alone, with the default declarations
    (identification tools named find_user..., user/order/payment_method ids are customer data, writes need a yes)."""
    alone = cancel.model_copy(update={"world": "not-registered"})
    gold = run(run_episode(world, cancel, GoldPolicy()))
    score = score_trajectory(alone, gold)
    assert score.success and [c.name for c in score.components] == ["state", "outputs", "identified", "confirmed"]
    g = [ToolCall(a.name, a.arguments) for a in cancel.gold_actions]
    careless = run(run_episode(world, cancel, ScriptedPolicy([g[1], g[2], gold_answer(cancel)])))
    score = score_trajectory(alone, careless)
    failed = {c.name for c in score.components if not c.passed}
    assert failed == {"identified", "confirmed"} and score.failure_visible_step == 0


# -- answers that were never looked up, refusals about another object, rule lists -----------------------------------

ORDER_STATUSES = ("pending", "processed", "delivered", "cancelled", "return requested", "exchange requested",
                  "returned", "exchanged")  # fmt: skip


def test_an_answer_listing_every_possible_value_is_a_guess_not_an_output(world):
    """Listing every status passes the matcher, but the agent never read the order: it told the user nothing."""
    task = make_task("info")
    status = task.expected_outputs[0].value
    assert status in ORDER_STATUSES
    g = [ToolCall(a.name, a.arguments) for a in task.gold_actions]
    shotgun = "Your order is one of: " + ", ".join(ORDER_STATUSES) + "."
    guessed = score_trajectory(task, run(run_episode(world, task, ScriptedPolicy([g[0], shotgun]))))
    outputs = component(guessed, "outputs")
    assert not guessed.success and not outputs.passed and "before any tool result" in outputs.reason
    assert guessed.outputs[0]["found"] is False and guessed.outputs[0]["why"] == UNGROUNDED
    assert component(guessed, "identified").passed and component(guessed, "state").passed  # only the guess failed
    # said first and looked up afterwards is still a guess; looked up first, the same words are an answer
    late = score_trajectory(task, run(run_episode(world, task, ScriptedPolicy([g[0], shotgun, g[1], "Done."]))))
    assert not component(late, "outputs").passed
    looked = score_trajectory(task, run(run_episode(world, task, ScriptedPolicy([*g, f"It is {status}."]))))
    assert looked.success and looked.outputs == [{"label": "order_status", "value": status, "found": True}]


def test_grounding_follows_the_conversation_order_and_the_value_kind():
    count = [{"label": "count", "value": "37"}]
    listed = "There are 37 issues."
    before = [{"role": "tool", "content": '{"total": 37}'}, {"role": "assistant", "content": listed}]
    after = [{"role": "assistant", "content": listed}, {"role": "tool", "content": '{"total": 37}'}]
    assert check_outputs_found(count, before) == [True]
    assert check_outputs_found(count, after) == [False]
    # a number is grounded as a number (37.0 shows 37), an id only verbatim (W123 does not show #W1234)
    assert check_outputs_found(count, [{"role": "tool", "content": '{"n": 37.0}'}, after[0]]) == [True]
    order = [{"label": "order_id", "value": "#W1234"}]
    said = {"role": "assistant", "content": "It is #W1234."}
    assert check_outputs_found(order, [{"role": "tool", "content": '{"id": "#W12345"}'}, said]) == [False]
    assert check_outputs_found(order, [{"role": "tool", "content": '{"id": "#W1234"}'}, said]) == [True]
    # "unassigned" is what an empty assignee field shows, and only that field
    nobody = [{"label": "assignee", "value": "unassigned"}]
    told = {"role": "assistant", "content": "The issue is unassigned."}
    assert check_outputs_found(nobody, [{"role": "tool", "content": '{"assignee": null}'}, told]) == [True]
    assert check_outputs_found(nobody, [{"role": "tool", "content": '{"reporter": null}'}, told]) == [False]


def test_a_call_outside_the_conversation_grounds_what_is_said_after_its_turn():
    steps = [Step(index=0, turn=0, call_id="x", name="get_order_details", arguments={}, ok=True,
                  output={"status": "delivered"})]  # fmt: skip
    status = [{"label": "status", "value": "delivered"}]
    turns = [{"role": "assistant", "content": "It is delivered."}, {"role": "assistant", "content": "Delivered."}]
    assert [o["found"] for o in check_outputs(status, turns[:1], steps)] == [False]  # said in the calling turn
    assert [o["found"] for o in check_outputs(status, turns, steps)] == [True]


def check_outputs_found(expected: list[dict[str, str]], messages: list[dict[str, Any]]) -> list[bool]:
    return [o["found"] for o in check_outputs(expected, messages)]


def _refusal_with_another_closed_order(world: Any) -> tuple[Task, str]:
    """A refusal task whose customer has another non-pending order (cancelling it breaks the same rule), and it."""
    for index in range(20):
        task = make_task("refusal", index=index)
        order = task.refusal.forbidden.arguments["order_id"]  # type: ignore[union-attr]
        with world.episode(0) as ep:
            rows = ep.query("SELECT order_id FROM orders WHERE status = 'delivered' AND order_id != ? AND user_id = "
                            "(SELECT user_id FROM orders WHERE order_id = ?) ORDER BY order_id", (order, order))  # fmt: skip
        if rows:
            return task, rows[0]["order_id"]
    raise AssertionError("no customer with two delivered orders among the first 20 refusal tasks")


def test_a_refusal_about_another_object_is_not_the_refusal_asked_for(world):
    """Asked to cancel order A, the agent tries order B, gets the same rule's error and relays it: it cited R1,
    but never looked at A. Looking at A (a read or the refused call), or naming it, is what makes it this refusal."""
    task, other = _refusal_with_another_closed_order(world)
    order = task.refusal.forbidden.arguments["order_id"]  # type: ignore[union-attr]
    identify = ToolCall(task.gold_actions[0].name, task.gold_actions[0].arguments)
    wrong = ToolCall("cancel_pending_order", {"order_id": other, "reason": "ordered by mistake"})
    relay = f"I'm sorry, I can't cancel order {other}: only pending orders can be cancelled (policy R1)."
    score = score_trajectory(task, run(run_episode(world, task, ScriptedPolicy([identify, wrong, relay]))))
    refusal = component(score, "refusal")
    assert not score.success and not refusal.passed and order in refusal.reason and "looked at" in refusal.reason
    right = ToolCall("cancel_pending_order", {"order_id": order, "reason": "ordered by mistake"})
    tried = score_trajectory(task, run(run_episode(world, task, ScriptedPolicy([identify, right, relay]))))
    assert tried.success  # the refused call on the task's own order is looking at it
    named = relay.replace(other, order)
    assert score_trajectory(task, run(run_episode(world, task, ScriptedPolicy([identify, wrong, named])))).success


def test_a_refusal_object_named_only_by_the_users_words_is_seen_when_the_reply_says_them(world):
    """A reason that names the object as the user did, not by id, is satisfied by a reply saying the same words."""
    task = make_task("refusal", index=1)
    order = task.refusal.forbidden.arguments["order_id"]  # type: ignore[union-attr]
    reason = "The 'blue winter jacket' order is 'delivered'; only pending orders can be cancelled (policy R1)."
    worded = task.model_copy(update={
        "instruction": "Please cancel the blue winter jacket order; I ordered it by mistake.",
        "refusal": task.refusal.model_copy(update={"reason": reason}),  # type: ignore[union-attr]
        "gold_actions": task.gold_actions[:1]})  # fmt: skip
    identify = ToolCall(task.gold_actions[0].name, task.gold_actions[0].arguments)
    vague = "I'm sorry, I can't cancel that order: it was delivered (policy R1)."
    score = score_trajectory(worded, run(run_episode(world, worded, ScriptedPolicy([identify, vague]))))
    assert not component(score, "refusal").passed and order in component(score, "refusal").reason
    said = vague.replace("that order", "the blue winter jacket order")
    assert score_trajectory(worded, run(run_episode(world, worded, ScriptedPolicy([identify, said])))).success


def test_a_refusal_whose_reason_names_no_object_needs_none_looked_at(world):
    """A reason about the customer or the request itself (no id, no words of the user's) has no object: the
    refusal is judged on its wording and citation alone, so gold passes without a look-up it does not need."""
    task = make_task("refusal", index=1)
    reason = "This account is on hold, so no order of it can be cancelled (policy R1)."
    plain = task.model_copy(update={"refusal": task.refusal.model_copy(update={"reason": reason}),  # type: ignore[union-attr]
                                    "gold_actions": task.gold_actions[:1]})  # fmt: skip
    identify = ToolCall(task.gold_actions[0].name, task.gold_actions[0].arguments)
    reply = "I'm sorry, I can't cancel it: the account is on hold (policy R1)."
    assert score_trajectory(plain, run(run_episode(world, plain, ScriptedPolicy([identify, reply])))).success


@pytest.mark.parametrize("text", [
    "I cannot do that: r1 r2 r3 r4 r5 r6 r7 r8 r9 r10 r11.",
    "I cannot do that under rule 1, rule 2, rule 3, rule 4, rule 5, rule 6, rule 7, rule 8, rule 9, rule 10 or rule 11.",
    "I cannot do that (policy #1, policy #2, policy #3).",
    "I cannot do that: see rule 1, 2, 3 and 11.",
    "I cannot do that: policy 1-11 applies.",
    "Unfortunately rule 13 does not allow it, nor does r1.",
])  # fmt: skip
def test_a_refusal_listing_rules_in_any_citation_form_is_not_a_citation(text):
    rule, reason = R1
    assert refuses(text) and cites_reason(text, rule, reason)  # each would cite R1 on its own
    assert not states_refusal(text, reason, rule)


def test_the_rule_forms_the_reason_names_and_dates_are_not_other_rules():
    rule, reason = R1
    assert states_refusal("I cannot: r1 applies, and rule 2 says refunds wait.", reason + " (see policy r2)", rule)
    assert states_refusal("I cannot cancel it under rule 1, 2026-03-23 being its delivery date.", reason, rule)
    assert states_refusal("I CANNOT CANCEL IT: POLICY R1.", reason, rule)


def test_a_value_read_and_then_hedged_in_a_list_of_candidates_is_not_stated(world):
    """Having read the order, listing several statuses still tells the user nothing: a hedge is not an answer."""
    task = make_task("info")
    status = task.expected_outputs[0].value
    g = [ToolCall(a.name, a.arguments) for a in task.gold_actions]
    others = [s for s in ORDER_STATUSES if s != status][:2]
    hedge = f"Your order is {others[0]}, {status} or {others[1]}."
    score = score_trajectory(task, run(run_episode(world, task, ScriptedPolicy([*g, hedge]))))
    assert not score.success and score.outputs[0]["why"] == HEDGED
    plain = f"Your order is {status}; it is not {others[0]}."  # prose naming another status is no list
    assert score_trajectory(task, run(run_episode(world, task, ScriptedPolicy([*g, plain])))).success


def test_hedges_are_lists_of_candidates_of_the_values_kind(world):
    enums = schema_enums(world.schema)
    assert any({"pending", "delivered", "cancelled"} <= e for e in enums)
    assert all(len(e) >= 3 for e in enums)
    assert hedges("status", "delivered", "It is pending / delivered / cancelled.", enums=enums)
    assert hedges("status", "delivered", "Either:\n- pending\n- delivered\n- returned", enums=enums)
    assert not hedges("status", "delivered", "It is delivered.", enums=enums)
    assert not hedges("status", "delivered", "It is pending, delivered or cancelled.")  # no value set known
    # the task's other expected values may stand beside it
    assert not hedges("status", "delivered", "delivered, pending", enums=enums, others=["pending"])
    count = "There are " + ", ".join(str(n) for n in range(61)) + " issues."
    assert hedges("count", "37", count) and hedges("count", "37", "37, 38 or 39?")
    assert not hedges("count", "37", "Issues PRJ-36, PRJ-37, PRJ-38: 37 in all, the last on 2026-03-23.")
    assert not hedges("count", "5", "Here is what you asked for: business days: 5; days available: 12.5, 14.",
                      others=["12.5", "14"])  # fmt: skip
    assert not hedges("tracking_number", "1Z99", "1Z98, 1Z99, 1Z90")  # an id is matched verbatim, not hedged
