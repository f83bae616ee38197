"""Phrasing: many templates per tool that all fill under the slot contract, requests that keep every fact they
record (and nothing of who asks when the user is piecemeal), contingency and change-of-mind phrasing, and
``rephrase``: a model's rewrite is kept only with every fact, and a failing model never loses a task."""

from __future__ import annotations

import json
import re
import string
from typing import Any

import pytest
from typer.testing import CliRunner

import sdkworld
from toolworld.cli import app
from toolworld.core.errors import ToolworldError
from toolworld.records.messages import AssistantTurn
from toolworld.rollout.backends import POLICIES, policy
from toolworld.tasks.kit import TaskKit
from toolworld.tasks.model import Action, Difficulty, Provenance, Scenario, Task, UserProfile
from toolworld.tasks.phrasing import Phrased, PhrasingError, missing_facts, phrase, rephrase
from toolworld.tasks.sampling import Draft, Drop, Speech, Step, Synthesizer, Target
from toolworld.world import Rng
from toolworld.worlds.retail import phrases

WRITE_TOOLS = ("cancel_pending_order", "modify_pending_order_items", "modify_pending_order_address",
               "modify_pending_order_payment", "return_delivered_order_items", "exchange_delivered_order_items",
               "modify_user_address", "transfer_to_human_agent")  # fmt: skip
INFO_TOOLS = ("track_order", "get_order_details")

PLAIN = {"order": "order #W1234567", "order_id": "#W1234567", "items": "the Desk Lamp (black)",
         "new_items": "the Desk Lamp (white)", "payment": "my Visa credit card ending in 4242",
         "address": "12 Elm St, Apt 3, Austin, TX 78701", "reason": "I ordered it by mistake",
         "Reason": "I ordered it by mistake", "summary": "The package arrived damaged and I want someone to look at it.",
         "first_choice": "the Desk Lamp (white)", "second_choice": "the Desk Lamp (green)"}  # fmt: skip
NEEDS = {**PLAIN, "order": "my order with the Desk Lamp", "new_items": "the same one a size up",
         "payment": "the card I paid with", "items": "the Desk Lamp (black) and the Mug (blue)"}  # fmt: skip


def _fields(template: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(template) if name}


def _all_templates() -> list[tuple[str, str]]:
    out = []
    for group in (phrases.INTENTS, phrases.CONTINGENCIES, phrases.REVISIONS, phrases.IDENTITY):
        out += [(name, t) for name, templates in group.items() for t in templates]
    return out + [("opener", t) for t in phrases.OPENERS]


# -- the templates ----------------------------------------------------------------------------------------------


def test_template_counts() -> None:
    assert set(phrases.INTENTS) == {*WRITE_TOOLS, *INFO_TOOLS}
    assert all(len(phrases.INTENTS[t]) >= 15 for t in phrases.INTENTS), {t: len(v) for t, v in phrases.INTENTS.items()}
    assert sum(len(v) for v in phrases.INTENTS.values()) >= 160
    assert {k: len(v) >= 6 for k, v in phrases.CONTINGENCIES.items()} == {"cancel_or_return": True, "swap_fallback": True}
    assert all(len(v) >= 6 for v in phrases.IDENTITY.values()) and len(phrases.OPENERS) >= 8
    # per write tool, at least four ways to change each value that can change
    by_slot: dict[tuple[str, str], int] = {}
    for tool, templates in phrases.REVISIONS.items():
        for t in templates:
            for slot in {f.lower() for f in _fields(t)} - {"order"}:  # {Reason} is {reason} capitalised
                by_slot[tool, slot] = by_slot.get((tool, slot), 0) + 1
    assert set(phrases.REVISIONS) == set(WRITE_TOOLS) - {"transfer_to_human_agent"}
    assert min(by_slot.values()) >= 4, by_slot
    texts = [t for _, t in _all_templates()]
    assert len(texts) == len(set(texts)), "every template is distinct"


@pytest.mark.parametrize("slots", [PLAIN, NEEDS], ids=["plain", "needs"])
def test_every_template_fills_and_reads_well(slots: dict[str, str]) -> None:
    for name, template in _all_templates():
        text = template.format_map({**slots, "email": "a@b.example", "first_name": "Mia", "last_name": "Lopez",
                                    "zip": "78701"})  # fmt: skip
        assert "{" not in text and "}" not in text, (name, template)
        low = text.lower()
        for doubled in ("my my ", "the the ", "the my ", "my the ", "your my ", "a my ", "an order order"):
            assert doubled not in low, (name, text)
    for name, template in _all_templates():
        # a slot that starts lowercase ("order #W…", "my Visa…", "the card…") never opens a later sentence
        assert not re.search(r"[.!?]\s+\{(?!Reason\}|summary\})", template), (name, template)


def test_templates_hold_no_internal_ids() -> None:
    for name, template in _all_templates():
        literal = re.sub(r"\{\w+\}", "", template)
        assert not re.search(r"#W|\d|_id\b|\w_\w", literal), (name, template)


# -- phrasing drafts ----------------------------------------------------------------------------------------------


def _draws(world: Any, n: int = 30) -> list[Draft]:
    synth = Synthesizer(world, 0)
    out = []
    for i in range(n):
        for sampler in ("target", "compose", "info", "refusal"):
            try:
                out.append(synth.draw(i, sampler))
            except Drop:
                continue
    return out


def _said(p: Phrased) -> str:
    return " ".join(p.text.split()).lower()


def test_real_drafts_keep_every_fact_and_name_their_templates(world: Any) -> None:
    kit = Synthesizer(world, 0).kit
    used = set()
    for i, draft in enumerate(_draws(world)):
        with world.episode(0) as ep:
            p = phrase(draft, kit, ep, Rng(f"test/{i}"))
        assert isinstance(p, str) and str(p) == p.text and p.revision is None
        assert p.facts and not missing_facts(p.text, p.facts), (p.text, missing_facts(p.text, p.facts))
        # the identity facts and every order number the targets name are among the recorded facts
        assert {str(v) for v in draft.identity.arguments.values()} <= set(p.facts)
        assert {t.arguments["order_id"] for t in draft.targets if "order_id" in t.arguments} <= set(p.facts)
        for template_id in p.templates:
            world_name, group, *rest = template_id.split(":")
            assert world_name == "retail"
            table = {"intent": phrases.INTENTS, "identity": phrases.IDENTITY}[group]
            assert 0 <= int(rest[1]) < len(table[rest[0]])
            used.add(template_id)
        assert sum(t.startswith("retail:intent:") for t in p.templates) == len(draft.targets)
        # the Task model stores the phrased text as a plain string
        assert type(Task.model_validate({**_task(p.text).model_dump(), "instruction": p}).instruction) is str
    assert len(used) >= 40, "draws spread over many templates"


def test_a_piecemeal_request_says_nothing_of_who_asks(world: Any) -> None:
    kit = Synthesizer(world, 0).kit
    for i, draft in enumerate(_draws(world, 12)):
        draft.speech = Speech(identity=False)
        with world.episode(0) as ep:
            p = phrase(draft, kit, ep, Rng(f"piecemeal/{i}"))
        known = draft.profile.known
        for value in (known["email"], known["first_name"], known["last_name"], known["zip"]):
            assert not re.search(rf"\b{re.escape(str(value))}\b", p.text, re.I), (value, p.text)
            assert str(value) not in p.facts
        assert p.templates[0].startswith("retail:opener:")
        assert not any(":identity:" in t for t in p.templates)
        assert not missing_facts(p.text, p.facts)


def _one(world: Any, tool: str, sampler: str = "target") -> Draft:
    synth = Synthesizer(world, 0)
    for i in range(200):
        try:
            draft = synth.draw(i, sampler)
        except Drop:
            continue
        if [t.tool for t in draft.targets] == [tool]:
            return draft
    raise AssertionError(f"no draft of {tool}")


def test_target_slots_replace_the_plain_ones_and_their_facts(world: Any) -> None:
    kit = Synthesizer(world, 0).kit
    draft = _one(world, "exchange_delivered_order_items")
    target = draft.targets[0]
    target.slots = {"order": "my order with the Desk Lamp", "new_items": "the same one, just one size up",
                    "payment": "the card I paid with"}  # fmt: skip
    with world.episode(0) as ep:
        p = phrase(draft, kit, ep, Rng("needs"))
    assert target.arguments["order_id"] not in p.text and target.arguments["order_id"] not in p.facts
    for text in ("order with the Desk Lamp", "same one, just one size up", "card I paid with"):
        assert text in p.facts and text.lower() in p.text.lower()
    assert not re.search(r"(credit|debit) card ending in", p.text), "the plain payment text is replaced"


def test_a_contingency_is_one_conditional_request(world: Any) -> None:
    kit = Synthesizer(world, 0).kit
    draft = _one(world, "cancel_pending_order")
    order = draft.targets[0].arguments["order_id"]
    draft.speech.contingency = "cancel_or_return"
    draft.speech.contingency_slots = {"items": "the Desk Lamp (black) and the Mug (blue)",
                                      "payment": "my Visa credit card ending in 4242"}  # fmt: skip
    with world.episode(0) as ep:
        p = phrase(draft, kit, ep, Rng("contingency"))
    [request] = [t for t in p.templates if not t.startswith("retail:identity:")]
    assert request.startswith("retail:contingency:cancel_or_return:")
    template = phrases.CONTINGENCIES["cancel_or_return"][int(request.rsplit(":", 1)[1])]
    assert template.split("{")[0] in p.text
    assert {order, "Desk Lamp", "black", "Mug", "blue", "Visa", "4242"} <= set(p.facts)
    assert not missing_facts(p.text, p.facts)

    draft.speech.contingency = "cancel_or_teleport"
    with world.episode(0) as ep, pytest.raises(ToolworldError, match=r"'cancel_or_teleport'.*cancel_or_return") as info:
        phrase(draft, kit, ep, Rng("contingency"))
    assert info.value.kind == "unknown_contingency"
    with pytest.raises(ToolworldError, match="no contingency templates of kind 'swap_fallback'"):
        TaskKit(world).contingency_templates("swap_fallback")


def test_a_hand_built_swap_with_a_fallback(world: Any) -> None:
    kit = Synthesizer(world, 0).kit
    with world.episode(0) as ep:
        line = ep.query("SELECT o.order_id, o.user_id, i.item_id, v.product_id FROM orders o JOIN order_items i ON "
                        "i.order_id = o.order_id JOIN variants v ON v.item_id = i.item_id WHERE o.status = 'pending' "
                        "ORDER BY o.order_id LIMIT 1")[0]  # fmt: skip
        others = [r["item_id"] for r in ep.query("SELECT item_id FROM variants WHERE product_id = ? AND item_id != ? "
                                                  "ORDER BY item_id", (line["product_id"], line["item_id"]))]  # fmt: skip
        user = ep.query("SELECT * FROM users WHERE user_id = ?", (line["user_id"],))[0]
        pm = ep.query("SELECT payment_method_id FROM payment_methods WHERE user_id = ? ORDER BY 1",
                      (line["user_id"],))[0]["payment_method_id"]  # fmt: skip
        profile = UserProfile(name="x", persona="terse", known={"email": user["email"]})
        args = {"order_id": line["order_id"], "item_ids": [line["item_id"]], "new_item_ids": [others[0]],
                "payment_method_id": pm}  # fmt: skip
        first, second = kit.item(ep, others[0], "the "), kit.item(ep, others[1], "the ")
        draft = Draft(kind="action", sampler="contingency", principal=line["user_id"], profile=profile,
                      identity=Step("find_user_by_email", {"email": user["email"]}, "identify"), steps=[],
                      targets=[Target("modify_pending_order_items", args)],
                      speech=Speech(contingency="swap_fallback",
                                    contingency_slots={"first_choice": first, "second_choice": second}))  # fmt: skip
        p = phrase(draft, kit, ep, Rng("swap"))
    assert p.templates[1].startswith("retail:contingency:swap_fallback:")
    assert first in p.text and second in p.text and line["order_id"] in p.facts and user["email"] in p.facts
    assert not missing_facts(p.text, p.facts)
    # the fallback's options are facts: a rewrite that loses which variant comes second is rejected
    assert missing_facts(p.text.replace(second, "the other one"), p.facts)


def test_a_change_of_mind_is_said_in_the_request_and_revised_on_confirmation(world: Any) -> None:
    kit = Synthesizer(world, 0).kit
    draft = _one(world, "modify_pending_order_address")
    target = draft.targets[0]
    first = {**target.arguments, "line1": "77 Wrong Way", "line2": "", "city": "Boise", "state": "ID", "zip": "83702"}
    target.said = first
    draft.speech.revision = target.tool
    with world.episode(0) as ep:
        p = phrase(draft, kit, ep, Rng("revision"))
    assert "77 Wrong Way" in p.text and target.arguments["line1"] not in p.text
    assert p.revision is not None and target.arguments["line1"] in p.revision and "77 Wrong Way" not in p.revision
    assert p.templates[-1].startswith("retail:revision:modify_pending_order_address:")
    assert "77 Wrong Way" in p.facts and target.arguments["line1"] not in p.facts

    # a return whose refund method changed is revised by a template that speaks of the payment
    draft = _one(world, "return_delivered_order_items")
    target = draft.targets[0]
    target.said = {**target.arguments, "payment_method_id": "no_such_method"}
    draft.speech.revision = target.tool
    with world.episode(0) as ep:
        p = phrase(draft, kit, ep, Rng("revision-return"))
        final = kit.slots(target.tool, ep, target.arguments, draft.profile)["payment"]
    index = int(p.templates[-1].rsplit(":", 1)[1])
    assert "{payment}" in phrases.REVISIONS["return_delivered_order_items"][index]
    assert p.revision is not None and final in p.revision

    draft.speech.revision = "cancel_pending_order"  # a tool the draft does not target
    with world.episode(0) as ep, pytest.raises(PhrasingError, match="no target of that tool"):
        phrase(draft, kit, ep, Rng("revision"))


def test_a_world_without_templates_still_phrases() -> None:
    world = sdkworld.world
    synth = Synthesizer(world, 0)
    done = 0
    for i in range(6):
        for sampler in ("target", "greedy", "walk"):
            try:
                draft = synth.draw(i, sampler)
            except Drop:
                continue
            target = draft.targets[0]
            with world.episode(0) as ep:
                p = phrase(draft, synth.kit, ep, Rng(f"sdk/{i}"))
                assert p.templates[0].startswith(f"{world.name}:identity:") and p.facts
                assert not missing_facts(p.text, p.facts)
                key = next(iter(target.arguments))
                target.said = {**target.arguments, key: "Something Else"}
                draft.speech = Speech(identity=False, revision=target.tool)
                revised = phrase(draft, synth.kit, ep, Rng(f"sdk/{i}"))
            assert revised.templates[0].startswith(f"{world.name}:opener:")
            assert "Something Else" in revised.text and revised.revision and "Something Else" not in revised.revision
            done += 1
    assert done >= 3


# -- the fact checker and rephrase ---------------------------------------------------------------------------------


def test_missing_facts_ignores_case_and_spacing_but_not_word_edges() -> None:
    text = "Please  cancel ORDER #w1234567\nfor MIA lopez, zip 78701."
    assert missing_facts(text, ["#W1234567", "Mia Lopez", "78701"]) == []
    assert missing_facts(text, ["7870", "#W123456", "Mia  Lopez", "Desk Lamp"]) == ["7870", "#W123456", "Desk Lamp"]


def _task(instruction: str, facts: list[str] | None = None) -> Task:
    changes = {"orders": {"updated": [{"order_id": "#W1234567", "status": "cancelled"}]}}
    return Task(
        id=Task.content_id("retail", 0, instruction, changes), world="retail", seed=0, kind="action",
        instruction=instruction, user=UserProfile(name="Mia Lopez", persona="terse", known={"email": "mia@x.example"}),
        gold_actions=[Action(name="cancel_pending_order", arguments={"order_id": "#W1234567"})],
        expected_changes=changes, scenario=Scenario(facts=facts if facts is not None else ["mia@x.example", "#W1234567"]),
        difficulty=Difficulty(path_length=1, writes=1, tools=["cancel_pending_order"], level="easy"),
        provenance=Provenance(sampler="target", targets=["cancel_pending_order"], generator_version="test", index=0),
    )  # fmt: skip


class _RewriteSession:
    def __init__(self, mode: str) -> None:
        self.mode = mode

    async def respond(self, messages: list[dict[str, Any]]) -> AssistantTurn:
        message = messages[-1]["content"].split("Message:\n", 1)[1]
        if self.mode == "shout":  # a reasoning model: its thoughts are not the rewrite
            return AssistantTurn(content=f"<think>Keep {message}</think>\n{message.upper()}")
        if self.mode == "raise" or (self.mode == "mixed" and "RAISE" in message):
            raise RuntimeError("model server down")
        if self.mode == "drop" or (self.mode == "mixed" and "DROP" in message):
            return AssistantTurn(content="Hey, cancel my order please, my email is mia@x.example.")
        # faithful: other words, other case and spacing, every fact kept
        return AssistantTurn(content=f'"Hello!  I want to  call off ORDER {message.split("order ")[1].split()[0]} '
                                     f'- reach me at MIA@x.example"')  # fmt: skip

    async def aclose(self) -> None:
        return None


class _Rewriter:
    def __init__(self, mode: str) -> None:
        self.mode, self.name = mode, f"rewriter:mode={mode}"

    def start(self, *, tools: list[dict[str, Any]], task: Any = None, seed: int = 0) -> _RewriteSession:
        return _RewriteSession(self.mode)


@pytest.fixture
def rewriter():
    with POLICIES.isolated():
        policy("rewriter", usage="rewriter[:mode=faithful|drop|raise|mixed]", options=("mode",))(
            lambda *, mode="faithful": _Rewriter(str(mode)))  # fmt: skip
        yield


def test_rephrase_keeps_faithful_rewrites_and_the_template_otherwise(rewriter: None) -> None:
    tasks = [_task("My email is mia@x.example. Please cancel order #W1234567, I ordered it by mistake."),
             _task("My email is mia@x.example. DROP order #W1234567 please."),
             _task("My email is mia@x.example. RAISE order #W1234567 now."),
             _task("No facts recorded: order #W1234567.", facts=[])]  # fmt: skip
    seen = []
    out, stats = rephrase(tasks, "rewriter:mode=mixed", on_progress=lambda done, s: seen.append(done))
    assert stats.as_dict() == {"kept": 1, "rejected": 1, "failed": 1, "skipped": 1}
    assert seen == [1, 2, 3, 4] and "model server down" in stats.errors[0]
    kept = out[0]
    assert kept.instruction == "Hello!  I want to  call off ORDER #W1234567, - reach me at MIA@x.example"
    assert kept.id == Task.content_id("retail", 0, kept.instruction, kept.expected_changes) != tasks[0].id
    assert kept.scenario.templates[-1] == "rewrite:rewriter:mode=mixed"
    assert out[1:] == tasks[1:], "a rejected, failed or unchecked rewrite leaves the task as it was"

    for mode, expected in (("faithful", "kept"), ("drop", "rejected"), ("raise", "failed")):
        out, stats = rephrase(tasks[:1], f"rewriter:mode={mode}")
        assert getattr(stats, expected) == 1 and len(out) == 1
        assert (out[0].instruction != tasks[0].instruction) == (mode == "faithful")
    with pytest.raises(ValueError, match="unknown policy kind 'nope'"):
        rephrase(tasks, "nope")


def test_generate_phrasing_option(rewriter: None, tmp_path) -> None:
    runner = CliRunner()
    out = tmp_path / "tasks.jsonl"
    res = runner.invoke(app, ["tasks", "generate", "retail", "-n", "3", "-o", str(out), "--phrasing", "llm:nope"])
    assert res.exit_code == 1 and "invalid_option" in res.output and "unknown policy kind 'nope'" in res.output
    assert not out.exists(), "a bad SPEC fails before generating"
    res = runner.invoke(app, ["tasks", "generate", "retail", "-n", "3", "-o", str(out), "--phrasing", "gpt"])
    assert res.exit_code == 1 and "template or llm:SPEC" in res.output
    # target draws: no conditional requests, which keep their template text (skipped)
    res = runner.invoke(app, ["tasks", "generate", "retail", "-n", "3", "-o", str(out), "--sampler", "target",
                              "--phrasing", "llm:rewriter:mode=raise"], catch_exceptions=False)  # fmt: skip
    said = " ".join(res.output.split())
    assert res.exit_code == 0, res.output
    assert "reworded by rewriter:mode=raise: kept 0, rejected 0 (a fact missing), failed 3 (model errors)" in said
    template_text = [json.loads(line)["instruction"] for line in out.read_text().splitlines()]
    assert len(template_text) == 3, "a failing model keeps every task"

    res = runner.invoke(app, ["tasks", "generate", "retail", "-n", "3", "-o", str(out), "--sampler", "target",
                              "--phrasing", "llm:rewriter:mode=shout"], catch_exceptions=False)  # fmt: skip
    assert res.exit_code == 0 and "kept 3, rejected 0" in " ".join(res.output.split()), res.output
    tasks = [Task.model_validate_json(line) for line in out.read_text().splitlines()]
    assert [t.instruction for t in tasks] == [t.upper() for t in template_text]
    assert all(t.id == Task.content_id(t.world, t.seed, t.instruction, t.expected_changes) for t in tasks)


def test_rephrase_leaves_conditional_requests_alone(rewriter: None) -> None:
    """A rewrite can keep every fact and still swap which branch goes with which condition: a conditional
    request keeps its template text (counted as skipped), the others are reworded."""
    from toolworld.tasks.generate import generate

    conditional = generate("retail", 3, seed=0, sampler="contingency").tasks
    plain = generate("retail", 2, seed=0, sampler="target").tasks
    out, stats = rephrase([*conditional, *plain], "rewriter:mode=shout")
    assert stats.skipped == 3 and stats.kept == 2
    assert [t.instruction for t in out[:3]] == [t.instruction for t in conditional]
    assert [t.instruction for t in out[3:]] == [t.instruction.upper() for t in plain]
