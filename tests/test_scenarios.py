"""Scenario tasks: what the user does not know, needs, contingencies, changes of mind, alternatives, and the
generator's guarantees (coherent, minimal gold with the checks a careful agent makes, one task per user,
target and end state)."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from toolworld.core.dates import MONTHS
from toolworld.tasks.generate import TaskBuilder, generate
from toolworld.tasks.kit import kit_for
from toolworld.tasks.quality import coherence_problems, missing_checks, purposeless_reads
from toolworld.tasks.sampling import DEFAULT_MIX, Synthesizer
from toolworld.tasks.verify import verify_task
from toolworld.world import Rng
from toolworld.worlds.retail import scenarios

REASONING = {"unknown_fact", "need", "contingency"}


@pytest.fixture(scope="module")
def mix(world):  # type: ignore[no-untyped-def]
    """The default mix, as `toolworld tasks generate` makes it."""
    return generate(world, 400, seed=0).tasks


def test_default_mix_is_verified_coherent_and_minimal(world, mix) -> None:  # type: ignore[no-untyped-def]
    kit = kit_for(world)
    assert len(mix) == 400
    for task in mix:
        assert verify_task(task, world) is None, task.id
        assert coherence_problems(task, world, kit) == [], task.id
        assert purposeless_reads(task, world, kit) == [], (task.id, [a.name for a in task.gold_actions])
        assert missing_checks(task, world, kit) == [], task.id


def test_default_mix_asks_for_reasoning(mix) -> None:  # type: ignore[no-untyped-def]
    share = sum(bool(REASONING & set(t.scenario.demands)) for t in mix) / len(mix)
    assert share >= 0.4, share
    demands = Counter(d for t in mix for d in t.scenario.demands)
    assert {"unknown_fact", "need", "contingency", "change_of_mind", "piecemeal"} <= set(demands), demands
    assert Counter(t.provenance.sampler for t in mix)["contingency"] > 0


def test_one_task_per_user_target_and_end_state(mix) -> None:  # type: ignore[no-untyped-def]
    seen = set()
    for t in mix:
        forbidden = t.refusal.forbidden.model_dump_json() if t.refusal else None
        calls = [a.model_dump_json(exclude={"output_digest"}) for a in t.gold_actions if a.name in t.provenance.targets]
        key = (t.user.name, t.user.known.get("zip"), tuple(calls), forbidden, json.dumps(t.expected_changes, sort_keys=True))
        assert key not in seen, t.id
        seen.add(key)
    users = Counter((t.user.name, t.user.known.get("zip")) for t in mix)
    # Spread over many customers (600 at seed 0), not a few reworded: random picks would give ~290 distinct users
    # for 400 tasks and some with 6; every customer is asked once before any comes back, bar retries.
    assert len(users) >= 0.75 * len(mix) and max(users.values()) <= 3, users.most_common(3)


def test_unknown_order_is_found_by_tools_not_quoted(mix) -> None:  # type: ignore[no-untyped-def]
    tasks = [t for t in mix if "order_id" in t.user.unknown]
    assert tasks
    for t in tasks:
        needs = [n for n in t.scenario.needs if n.slot == "order"]
        assert needs, t.id
        for need in needs:
            assert need.value not in t.instruction
            assert need.value not in t.user.known.get("order_ids", [])
            first_use = next(i for i, a in enumerate(t.gold_actions) if a.arguments.get("order_id") == need.value)
            # The order is found from the user's own list, which shows the dates and statuses it is described by,
            # before it is used; and that read is one of the scenario's.
            listed = [i for i, a in enumerate(t.gold_actions[:first_use]) if a.name == "list_user_orders"]
            assert listed and listed[0] in t.scenario.reads, t.id


def test_needs_resolve_to_exactly_one_value(world) -> None:  # type: ignore[no-untyped-def]
    ep = world.episode(0)
    try:
        users = [r["user_id"] for r in ep.query("SELECT user_id FROM orders GROUP BY user_id HAVING count(*) >= 3 "
                                                "ORDER BY 1 LIMIT 40")]  # fmt: skip
        described = 0
        for user in users:
            orders = scenarios.user_orders(ep, user)
            for o in orders:
                said = scenarios.describe_order(ep, user, o["order_id"], Rng(f"{user}/{o['order_id']}"))
                if said is None:
                    continue
                described += 1
                matches = [x["order_id"] for x in orders if _order_matches(ep, said, x, orders)]
                assert matches == [o["order_id"]], (said, matches)
        assert described > 20
    finally:
        ep.close()


def _order_matches(ep, said: str, order: dict, orders: list[dict]) -> bool:  # type: ignore[no-untyped-def]
    """An independent reading of an order description: what a careful agent would check."""
    if "recent" in said or "last order" in said:
        return order["placed_at"] == max(o["placed_at"] for o in orders)
    if said.startswith(("the order I placed on ", "my order from ")):
        month, day = said.rsplit(" ", 2)[-2:]
        return order["placed_at"][5:10] == f"{MONTHS.index(month) + 1:02d}-{int(day):02d}"
    status = next(st for st, phrases in scenarios.STATUS_PHRASES.items() if said in phrases)
    return order["status"] == status


def test_new_item_needs_pick_one_variant(world) -> None:  # type: ignore[no-untyped-def]
    ep = world.episode(0)
    try:
        rows = ep.query("SELECT oi.item_id, v.product_id FROM order_items oi JOIN variants v ON v.item_id = oi.item_id "
                        "ORDER BY oi.order_id LIMIT 300")  # fmt: skip
        found = Counter()
        for r in rows:
            for v in scenarios.siblings(ep, r["product_id"]):
                if v["item_id"] == r["item_id"] or not v["stock"]:
                    continue
                said = scenarios.describe_new_item(ep, r["item_id"], v["item_id"], Rng(v["item_id"]))
                if said is None:
                    continue
                old = scenarios.variant(ep, r["item_id"])
                pool = [s for s in scenarios.siblings(ep, r["product_id"]) if s["item_id"] != r["item_id"] and s["stock"]]
                if "cheapest" in said:
                    if said.startswith("the cheapest "):
                        value = said.removeprefix("the cheapest ").removesuffix(f" {old['name']} you have in stock")
                    else:
                        value = said.removeprefix("whichever ").removesuffix(" one in stock is the cheapest")
                    cands = [s for s in pool if value in s["options"].values()]
                    best = min(s["price_cents"] for s in cands)
                    assert [s["item_id"] for s in cands if s["price_cents"] == best] == [v["item_id"]], said
                    found["cheapest"] += 1
                else:
                    same = [s for s in pool if sum(s["options"][k] != old["options"][k] for k in old["options"]) == 1
                            and any("size" in k and s["options"][k] != old["options"][k] for k in old["options"])]
                    way = 1 if "up" in said else -1
                    dims = [k for k in old["options"] if "size" in k]
                    hits = []
                    for s in same:
                        k = next(k for k in dims if s["options"][k] != old["options"][k])
                        order = scenarios.option_order(old["name"], k)
                        if order.index(s["options"][k]) - order.index(old["options"][k]) == way:
                            hits.append(s["item_id"])
                    assert hits == [v["item_id"]], said
                    found["size"] += 1
        assert found["cheapest"] and found["size"], found
    finally:
        ep.close()


def test_contingency_takes_the_branch_the_state_decides(world, mix) -> None:  # type: ignore[no-untyped-def]
    tasks = [t for t in mix if t.scenario.contingency is not None]
    assert len(tasks) >= 20
    ep = world.episode(0)
    try:
        kinds = Counter()
        for t in tasks:
            c = t.scenario.contingency
            assert c is not None
            write = next(a for a in t.gold_actions if a.name == c.taken)
            status = ep.query("SELECT status FROM orders WHERE order_id = ?", (write.arguments["order_id"],))[0]["status"]
            if {c.taken, c.other} == {"cancel_pending_order", "return_delivered_order_items"}:
                assert (c.taken == "cancel_pending_order") == (status == "pending") == c.holds
            else:
                assert c.taken == c.other  # swap with a fallback: the same tool, another variant
                stock = ep.query("SELECT stock FROM variants WHERE item_id = ?", (write.arguments["new_item_ids"][0],))
                assert stock[0]["stock"] > 0
            kinds[(c.taken, c.holds)] += 1
        assert len(kinds) >= 3, kinds  # both branches are taken
    finally:
        ep.close()


def test_change_of_mind_first_wish_is_valid_and_different(world, mix) -> None:  # type: ignore[no-untyped-def]
    tasks = [t for t in mix if t.user.revision is not None]
    assert tasks
    for t in tasks:
        first = t.user.revision.initial[0]
        final = next(a for a in t.gold_actions if a.name == first.name)
        assert first.arguments != final.arguments
        assert t.user.revision.message and "change_of_mind" in t.scenario.demands
        ep = world.episode(t.seed)
        try:
            for a in t.gold_actions:
                call = first if a is final else a
                assert ep.call(call.name, call.arguments).ok  # an agent that ignores the change of mind succeeds...
            assert ep.changes().to_dict() != t.expected_changes  # ...at the wrong end state
        finally:
            ep.close()


def test_refusals_list_their_compliant_alternatives(world) -> None:  # type: ignore[no-untyped-def]
    tasks = generate(world, 150, seed=4, sampler="refusal").tasks
    with_alt = [t for t in tasks if t.alternatives]
    assert with_alt
    labels = Counter(a.label for t in with_alt for a in t.alternatives)
    assert any("modify" in label or "exchange" in label for label in labels), labels
    for t in tasks:
        assert verify_task(t, world) is None
        forbidden = t.refusal.forbidden
        ep = world.episode(0)
        try:
            status = ep.query("SELECT status FROM orders WHERE order_id = ?", (forbidden.arguments.get("order_id"),))
        finally:
            ep.close()
        if forbidden.name == "exchange_delivered_order_items" and status and status[0]["status"] == "pending":
            assert any(a.gold_actions[-1].name == "modify_pending_order_items" for a in t.alternatives) or \
                t.refusal.rule != "R9", t.id  # fmt: skip
        assert not (status and status[0]["status"] == "cancelled"), "nobody asks about an order they cancelled"


def test_coherence_rules_drop_incoherent_drafts(world) -> None:  # type: ignore[no-untyped-def]
    """Compose never hands off, and never writes twice to one order."""
    tasks = generate(world, 80, seed=6, sampler="compose").tasks
    for t in tasks:
        assert "transfer_to_human_agent" not in [a.name for a in t.gold_actions]
        orders = [a.arguments.get("order_id") for a in t.gold_actions if a.name in t.provenance.targets
                  and a.arguments.get("order_id")]  # fmt: skip
        assert len(orders) == len(set(orders)), t.id


def test_default_mix_covers_every_sampler(world) -> None:  # type: ignore[no-untyped-def]
    synth = Synthesizer(world, 0)
    assert all(synth.usable(name) for name in DEFAULT_MIX)
    assert TaskBuilder(world, 0).kit.has_contingencies()


def test_generation_is_byte_identical_across_processes_hash_seeds_and_workers(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The same seed gives the same file in a fresh interpreter with another hash seed, and with workers: nothing
    in generation may depend on set or dict-of-set iteration order."""
    import os
    import subprocess
    import sys

    code = ("import hashlib, sys; from toolworld.tasks.generate import generate; "
            "r = generate('retail', 80, seed=5, workers=int(sys.argv[1])); "
            "print(hashlib.sha256('\\n'.join(r.lines).encode()).hexdigest())")  # fmt: skip
    digests = set()
    for hash_seed, workers in (("1", "1"), ("2", "1"), ("3", "2")):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        out = subprocess.run([sys.executable, "-c", code, workers], env=env, capture_output=True, text=True,
                             check=True, timeout=300)  # fmt: skip
        digests.add(out.stdout.strip())
    assert len(digests) == 1, digests
