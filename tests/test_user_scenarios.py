"""Users who do not know every fact, give facts one at a time, or change their mind when asked to confirm: the
scripted user plays them deterministically, the LLM user is told to, and the gold conversation handles them the
way a careful agent would (and still scores 1.0), while an agent that ignores the change of mind fails."""

from __future__ import annotations

import re
from typing import Any

import pytest

from rollout_kit import make_task, run
from toolworld.env.user import LLMUser, ScriptedUser, UserReply, answer_facts, persona_prompt
from toolworld.records.trajectory import Trajectory
from toolworld.rollout.backends import GoldPolicy, ScriptedPolicy, confirmation_request, gold_answer, make_policy
from toolworld.rollout.loop import run_episode
from toolworld.scoring import score_trajectory
from toolworld.scoring.conduct import check_identified, is_affirmative
from toolworld.tasks.model import Action, Revision, Task
from toolworld.world import ToolCall

UNKNOWN_ORDER = "I don't have the order number at hand, sorry."
UNKNOWN_EMAIL = "I don't remember which email I used."
FIRST_ADDRESS = {"line1": "48 Oak Avenue", "city": "Portland", "state": "OR", "zip": "97201"}
REVISION = "Actually, wait: please ship it to 12 Main Street, Springfield, IL 62704 instead. Can you do that?"


def with_user(task: Task, **update: Any) -> Task:
    """``task`` with its user changed (the plain features reset first, so only ``update`` is in play)."""
    base = {"unknown": {}, "behaviour": [], "revision": None}
    return task.model_copy(update={"user": task.user.model_copy(update={**base, **update})})


def by_name_zip(world: Any, task: Task) -> Task:
    """``task`` with the customer identified by first name, last name and zip instead of the email."""
    first = task.gold_actions[0]
    with world.episode(task.seed) as ep:
        user_id = ep.call(first.name, first.arguments).unwrap()["user_id"]
        row = ep.query("SELECT first_name, last_name FROM users WHERE user_id = ?", (user_id,))[0]
        zips = ep.query("SELECT ship_zip FROM orders WHERE user_id = ? ORDER BY order_id", (user_id,))
        args = {"first_name": row["first_name"], "last_name": row["last_name"], "zip": zips[0]["ship_zip"]}
        assert ep.call("find_user_by_name_zip", args).unwrap()["user_id"] == user_id
    known = {**task.user.known, "zip": args["zip"]}
    return task.model_copy(update={"gold_actions": [Action(name="find_user_by_name_zip", arguments=args),
                                                    *task.gold_actions[1:]],
                                   "user": task.user.model_copy(update={"known": known})})  # fmt: skip


@pytest.fixture(scope="module")
def address(world) -> Task:
    """Ship a pending order to 12 Main Street (gold: find_user_by_email, get_order_details, the write)."""
    return make_task("address", world=world)


@pytest.fixture(scope="module")
def revised(address) -> Task:
    """The customer first asks for Portland, and at the confirmation asks for 12 Main Street (gold's address)."""
    write = address.gold_actions[-1]
    assert write.name == "modify_pending_order_address"
    initial = Action(name=write.name, arguments={**write.arguments, **FIRST_ADDRESS})
    order = write.arguments["order_id"]
    task = address.model_copy(update={"instruction": f"Please ship order {order} to 48 Oak Avenue, Portland, OR "
                                                     "97201 instead."})  # fmt: skip
    return with_user(task, revision=Revision(message=REVISION, initial=[initial]))


def session(task: Task) -> Any:
    s = ScriptedUser().start(task)
    assert s.reply([]).content == task.instruction
    return s


def ask(s: Any, text: str) -> UserReply:
    return s.reply([{"role": "user", "content": "..."}, {"role": "assistant", "content": text}])


def score(world: Any, task: Task, traj: Trajectory) -> Any:
    return score_trajectory(task, traj, world=world)


def components(result: Any) -> dict[str, bool]:
    return {c.name: c.passed for c in result.components}


def texts(traj: Trajectory, role: str) -> list[str]:
    return [m.get("content") or "" for m in traj.messages if m["role"] == role and m.get("content")]


# -- the scripted user ------------------------------------------------------------------------------------------


def test_scripted_user_says_the_line_of_an_unknown_fact(address):
    known = {k: v for k, v in address.user.known.items() if k != "order_ids"}
    task = with_user(address, known=known, unknown={"order_id": UNKNOWN_ORDER})
    s = session(task)
    assert ask(s, "What is your order number?").content == UNKNOWN_ORDER
    # known and unknown asked together: the known fact, then the line
    assert ask(s, "What is your email and the order number?").content == \
        f"My email is {known['email']}. {UNKNOWN_ORDER}"  # fmt: skip
    # nothing the user knows or knows they do not know: the fallback restates the request
    assert ask(s, "What colour would you like?").content.startswith("Sorry, I don't know that.")


def test_two_unknown_keys_asked_with_one_word_are_answered_once():
    said = answer_facts("Which order is it?", {}, {"order_id": UNKNOWN_ORDER, "order_ids": UNKNOWN_ORDER})
    assert said == UNKNOWN_ORDER


def test_piecemeal_user_gives_one_fact_per_reply(world, address):
    task = by_name_zip(world, address)
    known = task.user.known
    question = "Could you give me your zip code and your first and last name?"
    plain = ask(session(task), question).content
    assert plain == f"My first name is {known['first_name']}. My last name is {known['last_name']}. " \
                    f"My zip code is {known['zip']}."  # fmt: skip
    s = session(with_user(task, behaviour=["piecemeal"], unknown={"email": UNKNOWN_EMAIL}))
    assert ask(s, question).content == f"My zip code is {known['zip']}."  # the first asked, only
    assert ask(s, "And your last name and first name?").content == f"My last name is {known['last_name']}."
    assert ask(s, "Could you give me your first name?").content == f"My first name is {known['first_name']}."
    # an unknown line is said beside the one fact (not knowing gives nothing away), and an unknown fact is not
    # told even though the task's known facts still list it
    assert ask(s, "Your email, or your first name?").content == f"My first name is {known['first_name']}. " \
                                                                f"{UNKNOWN_EMAIL}"  # fmt: skip


def test_revision_is_said_once_at_the_first_confirmation(revised):
    s = session(revised)
    assert ask(s, "Could you give me your email?").content == f"My email is {revised.user.known['email']}."
    initial = revised.user.revision.initial[0]
    assert ask(s, confirmation_request(ToolCall(initial.name, initial.arguments))).content == REVISION
    assert not is_affirmative(REVISION)
    assert ask(s, "Should I ship it to 12 Main Street then?").content == "Yes, please go ahead."
    assert ask(s, "Shall I proceed?").content == "Yes, please go ahead."


def test_without_a_revision_the_first_confirmation_gets_a_yes(address):
    assert ask(session(address), "Shall I proceed?").content == "Yes, please go ahead."


# -- gold on such tasks -----------------------------------------------------------------------------------------


def test_gold_asks_for_the_first_wish_then_the_revised_one_and_passes(world, revised):
    traj = run(run_episode(world, revised, GoldPolicy()))
    result = score(world, revised, traj)
    assert result.success and result.reward == 1.0, result.model_dump()
    assert components(result) == {"state": True, "outputs": True, "identified": True, "confirmed": True}
    initial, final = revised.user.revision.initial[0], revised.gold_actions[-1]
    conversation = [(m["role"], m.get("content") or "", [c["function"]["name"] for c in m.get("tool_calls", [])])
                    for m in traj.messages if m["role"] in ("user", "assistant")]  # fmt: skip
    at = conversation.index(("assistant", confirmation_request(ToolCall(initial.name, initial.arguments)), []))
    assert conversation[at + 1:at + 5] == [
        ("user", REVISION, []),
        ("assistant", "Understood. " + confirmation_request(ToolCall(final.name, final.arguments)), []),
        ("user", "Yes, please go ahead.", []),
        ("assistant", "", [final.name]),
    ]
    assert texts(traj, "user").count(REVISION) == 1
    assert [s.name for s in traj.steps] == [a.name for a in revised.gold_actions]


def test_an_agent_that_makes_the_first_wish_fails(world, revised):
    g = [ToolCall(a.name, dict(a.arguments)) for a in revised.gold_actions]
    initial = revised.user.revision.initial[0]
    first = ToolCall(initial.name, dict(initial.arguments))
    # it asks, hears the change of mind, asks again about the first wish (and hears it again: the user never
    # consents to the wish they withdrew), and makes it anyway
    stubborn = run(run_episode(world, revised, ScriptedPolicy([*g[:2], confirmation_request(first),
                                                                confirmation_request(first), first,
                                                                gold_answer(revised)])))  # fmt: skip
    result = score(world, revised, stubborn)
    assert not result.success and result.reward < 1.0
    assert components(result)["state"] is False and components(result)["confirmed"] is False
    assert texts(stubborn, "user").count(revised.user.revision.message) == 2
    assert result.wrong_values
    # it writes right after the change of mind: the state is wrong and the write was never said yes to
    hasty = run(run_episode(world, revised, ScriptedPolicy([*g[:2], confirmation_request(first), first,
                                                            gold_answer(revised)])))  # fmt: skip
    result = score(world, revised, hasty)
    assert not result.success and components(result)["state"] is False and components(result)["confirmed"] is False


def test_gold_asks_a_piecemeal_customer_for_each_fact_before_the_lookup(world, address):
    for task in (with_user(address, behaviour=["piecemeal"]),
                 with_user(by_name_zip(world, address), behaviour=["piecemeal"])):  # fmt: skip
        traj = run(run_episode(world, task, GoldPolicy()))
        result = score(world, task, traj)
        assert result.success and result.reward == 1.0, result.model_dump()
        verdict = check_identified(task, traj.steps, world)
        assert verdict is not None and verdict.passed
        params = list(task.gold_actions[0].arguments)
        before = traj.messages[2:traj.messages.index(next(m for m in traj.messages if m.get("tool_calls")))]
        asked = [m["content"] for m in before if m["role"] == "assistant"]
        answers = [m["content"] for m in before if m["role"] == "user"]
        assert len(asked) == len(answers) == len(params)
        for param, question, answer in zip(params, asked, answers, strict=True):
            assert param.replace("_", " ") in question and question.endswith("?")
            assert answer == f"My {'zip code' if param == 'zip' else param.replace('_', ' ')} is " \
                             f"{task.gold_actions[0].arguments[param]}."  # fmt: skip


def test_gold_does_not_ask_a_customer_who_is_not_piecemeal(world, address):
    traj = run(run_episode(world, address, GoldPolicy()))
    assert traj.messages[2].get("tool_calls")  # the first turn is the lookup


def test_gold_passes_a_task_with_unknown_facts(world, address):
    known = {k: v for k, v in address.user.known.items() if k != "order_ids"}
    task = with_user(address, known=known, unknown={"order_id": UNKNOWN_ORDER}, behaviour=["piecemeal"])
    traj = run(run_episode(world, task, GoldPolicy()))
    result = score(world, task, traj)
    assert result.success and result.reward == 1.0, result.model_dump()


@pytest.mark.parametrize("which", ["revised", "piecemeal", "unknown"])
def test_noop_fails_such_tasks(world, address, revised, which):
    task = {"revised": revised, "piecemeal": with_user(address, behaviour=["piecemeal"]),
            "unknown": with_user(address, unknown={"zip": "I'm not sure of my zip."})}[which]  # fmt: skip
    traj = run(run_episode(world, task, make_policy("noop"), user=ScriptedUser()))
    result = score(world, task, traj)
    assert not result.success and result.reward == 0.0


class _Hesitant:
    """A user who answers the first ``doubts`` confirmation requests without a yes, then says yes."""

    name = "hesitant"

    def __init__(self, doubts: int) -> None:
        self.doubts = doubts

    def start(self, task: Task, *, seed: int = 0) -> Any:
        outer = self

        class Session:
            asked = 0

            async def respond(self, messages: list[Any]) -> UserReply:
                if len(messages) <= 1:
                    return UserReply(task.instruction)
                text = messages[-1].get("content") or ""
                if "?" not in text:
                    return UserReply(done=True, reason="answered")
                self.asked += 1
                return UserReply("Hmm, which order is that?" if self.asked <= outer.doubts else "Yes, do it.")

            async def aclose(self) -> None:
                return None

        return Session()


def test_gold_asks_again_while_the_answer_is_not_a_yes(world, address):
    write = address.gold_actions[-1]
    request = confirmation_request(ToolCall(write.name, write.arguments))
    traj = run(run_episode(world, address, GoldPolicy(), user=_Hesitant(2)))
    assert texts(traj, "assistant").count(request) == 1
    assert texts(traj, "assistant").count("Understood. " + request) == 2
    result = score(world, address, traj)
    assert result.success and components(result)["confirmed"], result.model_dump()
    # never a yes: three requests, then no write at all
    traj = run(run_episode(world, address, GoldPolicy(), user=_Hesitant(10)))
    assert sum(request in t for t in texts(traj, "assistant")) == 3
    assert not any(s.mutates for s in traj.steps) and traj.changes == {}


# -- the LLM user is told -----------------------------------------------------------------------------------------


def test_persona_prompt_tells_the_unknown_facts_the_piecemeal_behaviour_and_the_revision(revised):
    task = with_user(revised, unknown={"order_id": UNKNOWN_ORDER}, behaviour=["piecemeal"],
                     revision=revised.user.revision)  # fmt: skip
    prompt = persona_prompt(task)
    assert "do NOT know" in prompt and "order id" in prompt and UNKNOWN_ORDER in prompt
    assert "one fact per message" in prompt.lower()
    assert REVISION in prompt and re.search(r"first time the agent asks you to confirm", prompt)
    plain = persona_prompt(with_user(revised))
    assert "do NOT know" not in plain and "one fact per message" not in plain.lower() and REVISION not in plain
    assert "confirm what you asked for, say yes" in plain


def test_llm_user_sees_the_prompt_with_the_revision(world, revised):
    seen: list[list[dict[str, Any]]] = []

    def customer(messages: list[dict[str, Any]], task: Any) -> str:
        seen.append(messages)
        return "###STOP###"

    run(run_episode(world, revised, ScriptedPolicy(["Hello, how can I help?"]),
                    user=LLMUser(ScriptedPolicy(customer, name="customer"))))  # fmt: skip
    assert REVISION in seen[0][0]["content"]


# -- on generated tasks -----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def generated(world) -> list[Task]:
    from toolworld.tasks.generate import generate

    return generate(world, 30, seed=5).tasks


def test_gold_passes_every_generated_task_with_a_piecemeal_customer(world, generated):
    for plain in generated:
        task = with_user(plain, behaviour=["piecemeal"], unknown={"phone": "I'd rather not give my phone number."})
        traj = run(run_episode(world, task, GoldPolicy()))
        result = score(world, task, traj)
        assert result.success and result.reward == 1.0, (task.id, result.model_dump())
        assert components(result).get("identified") is not False
        if world.tools[task.gold_actions[0].name].identifies:  # gold asked for each fact before the lookup
            first = next(i for i, m in enumerate(traj.messages) if m.get("tool_calls"))
            asked = len(task.gold_actions[0].arguments) + len(task.scenario.withheld)  # and what the request left out
            assert sum(m["role"] == "user" for m in traj.messages[2:first]) == asked


def test_a_generated_change_of_mind_passes_gold_and_fails_the_first_wish(world, generated):
    consent = {n for n, t in world.tools.items() if t.mutates and t.confirm}
    plain = next(t for t in generated if [a.name for a in t.gold_actions if a.name in consent]
                 == ["modify_pending_order_address"])  # fmt: skip
    write = plain.gold_actions[[a.name for a in plain.gold_actions].index("modify_pending_order_address")]
    initial = Action(name=write.name, arguments={**write.arguments, **FIRST_ADDRESS})
    message = f"Actually, wait: please ship it to {write.arguments['line1']}, {write.arguments['city']} instead."
    task = with_user(plain, revision=Revision(message=message, initial=[initial]))
    gold = run(run_episode(world, task, GoldPolicy()))
    result = score(world, task, gold)
    assert result.success and result.reward == 1.0, result.model_dump()
    assert texts(gold, "user").count(message) == 1
    first = ToolCall(initial.name, dict(initial.arguments))
    script: list[Any] = []
    for a in plain.gold_actions:
        if a is write:
            script += [confirmation_request(first), confirmation_request(first), first]
        else:
            call = ToolCall(a.name, dict(a.arguments))
            script += [confirmation_request(call), call] if a.name in consent else [call]
    stubborn = run(run_episode(world, task, ScriptedPolicy([*script, gold_answer(task)])))
    result = score(world, task, stubborn)
    assert not result.success and components(result)["state"] is False
