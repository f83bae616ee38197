"""``--policy literal``: the literal-minded probe passes plain commands (retail and a world it has never seen),
fails what needs more than taking the user at their word, and reads nothing of the task but its world."""

from __future__ import annotations

import json
import types
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import sdkworld
from rollout_kit import make_task, run
from toolworld.cli import app
from toolworld.rollout.backends import make_policy
from toolworld.rollout.backends.literal import LiteralPolicy, LiteralSession, extract
from toolworld.rollout.loop import run_episode
from toolworld.scoring.verify import score_trajectory
from toolworld.tasks.model import Action, ExpectedOutput, Scenario, Task, write_jsonl


def episode(world: Any, task: Task, policy: Any = None) -> Any:
    return run(run_episode(world, task, policy or LiteralPolicy()))


def writes(world: Any, traj: Any) -> list[Any]:
    return [s for s in traj.steps if world.tools[s.name].mutates]


def hand_task(world: Any, instruction: str, gold: list[dict[str, Any]], *, kind: str = "action",
              known: dict[str, Any] | None = None, refusal: dict[str, Any] | None = None,
              unknown: dict[str, str] | None = None) -> Task:  # fmt: skip
    """A task whose expected changes come from executing ``gold`` (a refusal's gold changes nothing)."""
    with world.episode(0) as ep:
        for action in gold:
            ep.call(action["name"], action["arguments"]).unwrap()
        changes = ep.changes().to_dict()
    return Task.model_validate({
        "id": Task.content_id(world.name, 0, instruction, changes), "world": world.name, "seed": 0, "kind": kind,
        "instruction": instruction,
        "user": {"name": "A User", "persona": "brief", "known": known or {}, "unknown": unknown or {}},
        "gold_actions": gold, "expected_changes": changes, "refusal": refusal,
        "difficulty": {"path_length": len(gold), "writes": sum(world.tools[a["name"]].mutates for a in gold),
                       "tools": [a["name"] for a in gold], "level": "easy"},
        "provenance": {"sampler": "test", "targets": [gold[-1]["name"]], "generator_version": "test", "index": 0},
    })  # fmt: skip


def customer_with_orders(world: Any, status: str, at_least: int) -> dict[str, Any]:
    """A customer with ``at_least`` orders of ``status`` (their email and those order ids)."""
    with world.episode(0) as ep:
        rows = ep.query("SELECT u.user_id, u.email, group_concat(o.order_id) AS ids FROM users u JOIN orders o "
                        "ON o.user_id = u.user_id WHERE o.status = ? GROUP BY u.user_id HAVING count(*) >= ? "
                        "ORDER BY u.user_id LIMIT 1", (status, at_least))  # fmt: skip
    row = rows[0]
    return {"user_id": row["user_id"], "email": row["email"], "orders": sorted(row["ids"].split(","))}


# -- reading the request ---------------------------------------------------------------------------------------------


def test_extract_reads_literal_values_and_not_units():
    ex = extract("Hi, I'm Ada Lovelace, zip 12345. Swap the Monitor (1080p, 144Hz, 24-inch) in order #W1234567 "
                 'for the 4K one; card ending in 5218. Ticket TKT-1042, name "Ada King". Send it to 12 Main St, '
                 "Apt 4, Springfield, IL 62704. Mail: ada.l1@example.com")  # fmt: skip
    assert [t for t, _ in ex.ids] == ["#W1234567", "TKT-1042"]
    assert ex.emails == ["ada.l1@example.com"] and ex.names == [("Ada", "Lovelace")] and ex.quoted == ["Ada King"]
    assert ex.address == {"line1": "12 Main St", "line2": "Apt 4", "city": "Springfield", "state": "IL", "zip": "62704"}


# -- what it passes --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["cancel", "address", "info", "refusal"])
def test_plain_commands_pass_asking_for_the_email_when_the_request_lacks_it(world, kind):
    """The request names the order and what to do, not who asks: it asks for the email, then does it. A refusal
    the tool enforces is relayed with the tool's reason."""
    task = make_task(kind, world=world)
    traj = episode(world, task)
    score = score_trajectory(task, traj, world=world)
    assert score.success, score.divergence
    assert traj.messages[2]["content"] == "To find your account, please give me your email."
    assert traj.steps[0].name == "find_user_by_email" and traj.steps[0].ok
    if kind == "refusal":
        assert task.refusal is not None and task.refusal.reason in (traj.final_answer or "")


def test_a_command_with_everything_in_it_is_one_confirmed_write(world):
    base = make_task("cancel", world=world)
    order = base.gold_actions[-1].arguments["order_id"]
    email = base.user.known["email"]
    task = base.model_copy(update={"instruction": f"Cancel order {order} because I no longer need it; my email is "
                                                  f"{email}."})  # fmt: skip
    traj = episode(world, task)
    assert score_trajectory(task, traj, world=world).success
    assistant = [m for m in traj.messages if m["role"] == "assistant"]
    calls = [m["tool_calls"][0]["function"]["name"] for m in assistant if m.get("tool_calls")]
    assert calls == ["find_user_by_email", "cancel_pending_order"]  # nothing to look up: no reads
    ask = next(m["content"] for m in assistant if not m.get("tool_calls"))
    assert order in ask and "no longer needed" in ask and ask.endswith("Shall I proceed?")
    assert "cancelled" in (traj.final_answer or "") and "?" not in (traj.final_answer or "")


def test_ids_the_user_cannot_know_are_looked_up_and_matched_literally(world):
    """A return names the item by its name and options and the card by its ending: the order's rows and the
    customer's payment methods are read and the rows the request names picked."""
    with world.episode(0) as ep:  # a recent delivered order of several items, paid by a card
        for row in ep.query("SELECT o.order_id, u.email, u.user_id FROM orders o JOIN users u ON u.user_id = "
                            "o.user_id WHERE o.status = 'delivered' AND o.delivered_at >= '2026-04-20' ORDER BY "
                            "o.order_id"):  # fmt: skip
            order = ep.call("get_order_details", {"order_id": row["order_id"]}).unwrap()
            user = ep.call("get_user_details", {"user_id": row["user_id"]}).unwrap()
            paid = {p["payment_method_id"] for p in order["payments"]}
            cards = [p for p in user["payment_methods"] if p["payment_method_id"] in paid and p.get("last_four")]
            if cards and len(order["items"]) > 1:
                break
    item, card = order["items"][-1], cards[0]
    options = ", ".join(f"{k} {v}" for k, v in item["options"].items())
    instruction = (f"My email is {row['email']}. Please return the {item['name']} ({options}) from order "
                   f"{row['order_id']}; refund it to my {card['brand']} card ending in {card['last_four']}.")  # fmt: skip
    gold = [{"name": "find_user_by_email", "arguments": {"email": row["email"]}},
            {"name": "return_delivered_order_items", "arguments": {
                "order_id": row["order_id"], "item_ids": [item["item_id"]],
                "payment_method_id": card["payment_method_id"]}}]  # fmt: skip
    task = hand_task(world, instruction, gold, known={"email": row["email"]})
    traj = episode(world, task)
    assert [s.name for s in traj.steps] == ["find_user_by_email", "get_order_details", "get_user_details",
                                            "return_delivered_order_items"]  # fmt: skip
    assert traj.steps[-1].arguments == gold[-1]["arguments"] and traj.changes == task.expected_changes


def test_it_works_in_a_world_it_has_never_seen():
    """The SDK's library world: no identification tool, ids such as L0001, an enum and a quoted name."""
    world = sdkworld.make_world()
    with world.episode(0) as ep:
        loan = ep.query("SELECT loan_id FROM loans WHERE returned = 0 ORDER BY loan_id LIMIT 1")[0]["loan_id"]
    policy = LiteralPolicy(world=world)
    cases = [
        (f"Please return loan {loan}; the book came back damaged.",
         {"name": "return_book", "arguments": {"loan_id": loan, "condition": "damaged"}}),
        ('Rename member M003 to "Ada King", please.',
         {"name": "rename_member", "arguments": {"member_id": "M003", "name": "Ada King"}}),
    ]  # fmt: skip
    for instruction, gold in cases:
        task = hand_task(world, instruction, [gold])
        traj = episode(world, task, policy)
        assert [(s.name, s.arguments) for s in traj.steps] == [(gold["name"], gold["arguments"])]
        assert score_trajectory(task, traj, world=world).success


# -- what it fails ---------------------------------------------------------------------------------------------------


def test_it_fails_when_the_request_lacks_the_order_number(world):
    who = customer_with_orders(world, "pending", 2)
    order = who["orders"][0]
    gold = [{"name": "find_user_by_email", "arguments": {"email": who["email"]}},
            {"name": "cancel_pending_order", "arguments": {"order_id": order, "reason": "no longer needed"}}]  # fmt: skip
    task = hand_task(world, f"My email is {who['email']}. Please cancel my order, I no longer need it.", gold,
                     known={"email": who["email"]}, unknown={"order_id": "I don't have the order number at hand."})  # fmt: skip
    traj = episode(world, task)
    assert not score_trajectory(task, traj, world=world).success
    assert not writes(world, traj) and traj.changes == {}
    assert "order id" in (traj.final_answer or "") and "can't" in (traj.final_answer or "")


def test_it_fails_a_refusal_no_tool_enforces(world):
    """A reason the policy does not accept, on an order that can be cancelled: it cancels anyway with the enum
    value nearest the request's words, where a careful agent refuses."""
    base = make_task("cancel", world=world)
    order, email = base.gold_actions[-1].arguments["order_id"], base.user.known["email"]
    forbidden = {"name": "cancel_pending_order", "arguments": {"order_id": order, "reason": "no longer needed"}}
    task = hand_task(world, f"Cancel order {order}, I found a better price elsewhere. My email is {email}.",
                     [{"name": "find_user_by_email", "arguments": {"email": email}}], kind="refusal",
                     known={"email": email},
                     refusal={"rule": "R1", "reason": "the reason must be 'no longer needed' or 'ordered by mistake'",
                              "forbidden": forbidden})  # fmt: skip
    traj = episode(world, task)
    assert [s.name for s in writes(world, traj)] == ["cancel_pending_order"] and traj.steps[-1].ok
    assert not score_trajectory(task, traj, world=world).success


def test_it_makes_one_write_where_the_request_asks_for_two(world):
    who = customer_with_orders(world, "pending", 2)
    first, second = who["orders"][:2]
    gold = [{"name": "find_user_by_email", "arguments": {"email": who["email"]}},
            *({"name": "cancel_pending_order", "arguments": {"order_id": o, "reason": "no longer needed"}}
              for o in (first, second))]  # fmt: skip
    task = hand_task(world, f"Please cancel my orders {first} and {second}, I no longer need them. My email is "
                            f"{who['email']}.", gold, known={"email": who["email"]})  # fmt: skip
    traj = episode(world, task)
    assert [(s.name, s.arguments["order_id"]) for s in writes(world, traj)] == [("cancel_pending_order", first)]
    assert not score_trajectory(task, traj, world=world).success


# -- it reads nothing of the task but its world ----------------------------------------------------------------------


def test_the_task_beyond_its_world_does_not_change_what_it_does(world):
    task = make_task("cancel", world=world)
    nonsense = task.model_copy(update={
        "gold_actions": [Action(name="calculate", arguments={"expression": "1+1"})], "expected_changes": {},
        "expected_outputs": [ExpectedOutput(label="x", value="42", step=0)], "kind": "info",
        "scenario": Scenario(demands=["need"], facts=["#W0000000"]),
    })  # fmt: skip

    class WorldOnly(LiteralPolicy):
        def start(self, *, tools: list[dict[str, Any]], task: Any = None, seed: int = 0) -> LiteralSession:
            return super().start(tools=tools, task=types.SimpleNamespace(world=task.world), seed=seed)

    runs = [episode(world, t, p) for t, p in ((task, LiteralPolicy()), (nonsense, LiteralPolicy()),
                                              (task, WorldOnly()))]  # fmt: skip
    assert runs[0].messages == runs[1].messages == runs[2].messages
    assert [s.name for s in runs[0].steps] == ["find_user_by_email", "cancel_pending_order"]


# -- the spec and the CLI --------------------------------------------------------------------------------------------


def test_spec_and_cli(world, tmp_path: Path):
    assert isinstance(make_policy("literal"), LiteralPolicy) and make_policy("literal").name == "literal"
    with pytest.raises(ValueError, match="literal takes no options"):
        make_policy("literal:seed=1")
    cli = CliRunner()
    listed = {k["kind"]: k for k in json.loads(cli.invoke(app, ["policies", "--json"], catch_exceptions=False).output)}
    assert listed["literal"]["origin"] == "toolworld.rollout.backends.literal" and listed["literal"]["options"] == []
    tasks = [make_task("cancel", 0), make_task("address", 1), make_task("refusal", 0)]
    write_jsonl(tmp_path / "tasks.jsonl", tasks)
    out = tmp_path / "run"
    res = cli.invoke(app, ["run", "retail", "--tasks", str(tmp_path / "tasks.jsonl"), "--policy", "literal", "--out",
                           str(out)], catch_exceptions=False)  # fmt: skip
    assert res.exit_code == 0, res.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["episodes"] == 3 and summary["infra_errors"] == 0 and summary["success_rate"] == 1.0
