"""Task synthesis: generation is deterministic and replay-verified, covers every write tool, speaks only of
what the user knows, and verification pins a corrupted gold action to its task and step."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

import sdkworld
from toolworld import get_world
from toolworld.cli import app
from toolworld.tasks import Task, TaskSet
from toolworld.tasks.generate import TaskBuilder, generate, parse_mix
from toolworld.tasks.graph import ToolGraph
from toolworld.tasks.model import export_parquet
from toolworld.tasks.stats import task_stats
from toolworld.tasks.verify import verify_task

RETAIL = get_world("retail")
runner = CliRunner()


@pytest.fixture(scope="module")
def retail_tasks() -> list[Task]:
    return generate(RETAIL, 400, seed=0).tasks


def test_generation_is_deterministic_and_independent_of_workers() -> None:
    one = [t.to_json() for t in generate(RETAIL, 60, seed=3).tasks]
    again = [t.to_json() for t in generate(RETAIL, 60, seed=3).tasks]
    parallel = [t.to_json() for t in generate(RETAIL, 60, seed=3, workers=2, chunk=8).tasks]
    assert one == again == parallel
    assert one != [t.to_json() for t in generate(RETAIL, 60, seed=4).tasks]


def test_every_generated_task_replays(retail_tasks: list[Task]) -> None:
    assert len(retail_tasks) == 400
    failures = [f for t in retail_tasks if (f := verify_task(t, RETAIL)) is not None]
    assert failures == []
    assert len({t.id for t in retail_tasks}) == 400, "duplicates must be removed"
    for t in retail_tasks:
        assert all(a.output_digest for a in t.gold_actions)
        assert t.gold_actions[0].name in ("find_user_by_email", "find_user_by_name_zip"), "identify the user first"


def test_coverage_refusals_and_kinds(retail_tasks: list[Task]) -> None:
    stats = task_stats(retail_tasks)
    writes = {n for n, tool in RETAIL.tools.items() if tool.spec.mutates}
    assert writes <= set(stats["targets"]), f"never a target: {writes - set(stats['targets'])}"
    assert stats["refusal_share"] >= 0.05
    assert set(stats["kinds"]) == {"action", "refusal", "info"}
    assert set(stats["samplers"]) == {"target", "greedy", "walk", "compose", "refusal", "info", "contingency"}
    assert max(stats["writes"]) >= 2, "compositions chain several writes"


def test_refusal_tasks_change_nothing_and_name_the_rule(retail_tasks: list[Task]) -> None:
    refusals = [t for t in retail_tasks if t.kind == "refusal"]
    assert refusals
    for t in refusals:
        assert t.expected_changes == {}
        assert t.refusal is not None and re.fullmatch(r"R\d+", t.refusal.rule)
        assert f"(policy {t.refusal.rule})" in t.refusal.reason
        assert not any(RETAIL.tools[a.name].spec.mutates for a in t.gold_actions)
        with RETAIL.episode(t.seed) as ep:
            for a in t.gold_actions:
                ep.call(a.name, a.arguments).unwrap()
            denied = ep.call(t.refusal.forbidden.name, t.refusal.forbidden.arguments)
        assert denied.error is not None and denied.error.type == "policy_violation"
    assert len({t.refusal.rule for t in refusals if t.refusal}) >= 3, "refusals span several rules"


def test_instructions_hold_no_internal_ids(retail_tasks: list[Task]) -> None:
    internal = {"user", "item", "product", "payment_method", "address", "ticket"}
    for t in retail_tasks:
        actions = [*t.gold_actions, *([t.refusal.forbidden] if t.refusal else [])]
        for a in actions:
            kinds = {p.param: p.kind for p in RETAIL.tools[a.name].spec.entity_params}
            for param, value in a.arguments.items():
                if kinds.get(param) in internal:
                    for v in value if isinstance(value, list) else [value]:
                        assert str(v) not in t.instruction, (t.id, param, v, t.instruction)
        # Order numbers in the request are the user's own (printed on receipts) and recorded as known.
        for number in re.findall(r"#W\d{7}", t.instruction):
            assert number in t.user.known.get("order_ids", []), (t.id, number)
        # The facts the first call used are in the request, unless the user gives them only when asked.
        if "piecemeal" not in t.user.behaviour:
            for value in t.gold_actions[0].arguments.values():
                assert str(value) in t.instruction
        else:
            for value in t.gold_actions[0].arguments.values():
                assert not re.search(rf"\b{re.escape(str(value))}\b", t.instruction, re.I)


def test_expected_outputs_match_the_recorded_money(retail_tasks: list[Task]) -> None:
    cancels = [t for t in retail_tasks if t.provenance.targets == ["cancel_pending_order"] and t.kind == "action"]
    assert cancels
    for t in cancels:
        refunds = [r for r in t.expected_changes["payments"]["inserted"] if r["kind"] == "refund"]
        outputs = {o.label: o.value for o in t.expected_outputs}
        assert outputs["refund_amount"] == f"{sum(r['amount_cents'] for r in refunds) / 100:.2f}"
    tracks = [t for t in retail_tasks if t.provenance.targets == ["track_order"]]
    assert tracks and all({o.label for o in t.expected_outputs} == {"carrier", "tracking_number"} for t in tracks)


def test_single_samplers_and_bad_sampler_spec() -> None:
    for name in ("target", "greedy", "walk", "compose", "refusal", "info"):
        tasks = generate(RETAIL, 6, seed=1, sampler=name).tasks
        assert len(tasks) == 6 and {t.provenance.sampler for t in tasks} == {name}
    assert parse_mix("target=3,refusal=1") == {"target": 3, "refusal": 1}
    with pytest.raises(ValueError, match="unknown sampler"):
        parse_mix("telepathy")
    with pytest.raises(ValueError, match="integer"):
        parse_mix("target=lots")


def test_a_world_without_a_kit_still_gets_verified_tasks() -> None:
    world = sdkworld.world
    report = generate(world, 20, seed=0)
    assert len(report.tasks) == 20
    assert all(verify_task(t, world) is None for t in report.tasks)
    assert all(t.gold_actions[0].name == "find_member_by_email" for t in report.tasks)


def test_tool_graph_edges_come_from_entity_types() -> None:
    graph = ToolGraph(RETAIL, {"email", "first_name", "last_name", "zip", "order"})
    g = graph.graph
    assert g.has_edge("fact:email", "find_user_by_email")
    assert g.edges["find_user_by_email", "get_user_details"]["kinds"] == {"user"}
    assert "item" in g.edges["get_order_details", "return_delivered_order_items"]["kinds"]
    assert not g.has_edge("calculate", "get_order_details")
    assert graph.path_to_kind("item") == ["get_order_details"]
    assert graph.path_to_kind("payment_method") == ["get_order_details"]
    assert graph.path_to_kind("order") == []
    assert graph.distance_to("get_user_details", "cancel_pending_order") == 1  # it yields the user's orders
    assert graph.distance_to("get_order_details", "cancel_pending_order") == 2  # via the user it yields


def test_episode_probe_leaves_no_trace() -> None:
    with RETAIL.episode(0) as ep:
        order = ep.query("SELECT order_id FROM orders WHERE status = 'pending' ORDER BY order_id LIMIT 1")[0]["order_id"]
        before = ep.state_hash()
        result = ep.probe("cancel_pending_order", {"order_id": order, "reason": "no longer needed"})
        assert result.ok and result.output["status"] == "cancelled"
        assert ep.state_hash() == before and len(ep.changes()) == 0 and ep.history == []
        assert ep.call("cancel_pending_order", {"order_id": order, "reason": "no longer needed"}).ok


# -- files and the CLI -------------------------------------------------------------------------------------------


def test_verify_names_exactly_the_edited_task_and_step(tmp_path: Path, retail_tasks: list[Task]) -> None:
    tasks = retail_tasks[:30]
    victim = next(i for i, t in enumerate(tasks) if t.kind == "action" and len(t.gold_actions) >= 3)
    lines = [t.to_json() for t in tasks]
    data = json.loads(lines[victim])
    step = len(data["gold_actions"]) - 1
    args = data["gold_actions"][step]["arguments"]
    key = "order_id" if "order_id" in args else next(iter(args))
    others = [t for t in retail_tasks if t.user.known.get("order_ids")]
    args[key] = next(o for t in others for o in t.user.known["order_ids"] if o != args[key]) if key == "order_id" else "x"
    lines[victim] = json.dumps(data)
    path = tmp_path / "edited.jsonl"
    path.write_text("\n".join(lines) + "\n")
    result = runner.invoke(app, ["tasks", "verify", str(path)])
    assert result.exit_code == 1
    failed = [line for line in result.stdout.splitlines() if line.startswith("FAILED")]
    assert failed == [line for line in failed if tasks[victim].id in line] and len(failed) == 1
    assert f"line {victim + 1}, step {step})" in failed[0]
    assert result.stdout.strip().splitlines()[-1] == "29 verified, 1 failed"


def test_verify_reports_an_edited_read_at_its_step(retail_tasks: list[Task]) -> None:
    task = next(t for t in retail_tasks if t.gold_actions[1].name == "get_order_details")
    other = next(o for t in retail_tasks for o in t.user.known.get("order_ids", [])
                 if o != task.gold_actions[1].arguments["order_id"])  # fmt: skip
    edited = task.model_copy(deep=True)
    edited.gold_actions[1].arguments["order_id"] = other
    failure = verify_task(edited, RETAIL)
    assert failure is not None and failure.step == 1 and "different result" in failure.message


def test_verify_of_a_task_from_another_generator_version_says_to_regenerate(retail_tasks: list[Task]) -> None:
    task = next(t for t in retail_tasks if t.gold_actions[1].name == "get_order_details")
    stale = task.model_copy(deep=True)
    stale.gold_actions[1].output_digest = "0" * 12  # what an older world answered
    assert "regenerate" not in verify_task(stale, RETAIL).message  # same version: a real difference to debug
    stale.provenance.generator_version = "toolworld-tasks/0"
    failure = verify_task(stale, RETAIL)
    assert failure is not None and failure.step == 1
    assert "made by toolworld-tasks/0" in failure.message and "regenerate the task file" in failure.message
    assert verify_task(task.model_copy(update={"provenance": stale.provenance}), RETAIL) is None  # replays: fine


def test_corrupted_task_file_reports_each_line_and_keeps_the_rest(tmp_path: Path, retail_tasks: list[Task]) -> None:
    good = retail_tasks[:3]
    unknown_world = json.loads(good[0].to_json()) | {"world": "atlantis"}
    unknown_tool = json.loads(good[1].to_json())
    unknown_tool["gold_actions"][0]["name"] = "teleport"
    missing = json.loads(good[2].to_json())
    del missing["instruction"]
    lines = [good[0].to_json(), "{not json", json.dumps(unknown_world), json.dumps(unknown_tool), json.dumps(missing),
             "[1, 2]", good[1].to_json(), good[2].to_json()]  # fmt: skip
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines) + "\n")
    before = path.read_bytes()
    ts = TaskSet.load(path)
    assert [e.line for e in ts.errors] == [2, 5, 6]
    assert "not valid JSON" in str(ts.errors[0]) and "instruction" in str(ts.errors[1])
    assert ts.lines == [1, 3, 4, 7, 8]
    result = runner.invoke(app, ["tasks", "verify", str(path)])
    assert result.exit_code == 1
    out = result.stdout
    assert "line 3, end state" in out and "atlantis" in out
    assert "line 4, step 0" in out and "teleport" in out
    assert out.strip().splitlines()[-1] == "3 verified, 5 failed"
    assert path.read_bytes() == before, "verify never rewrites the file"


def test_cli_generate_stats_and_export(tmp_path: Path) -> None:
    out = tmp_path / "t.jsonl"
    result = runner.invoke(app, ["tasks", "generate", "retail", "-n", "40", "--seed", "2", "-o", str(out),
                                 "--parquet", str(tmp_path / "t.parquet")])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert len(out.read_text().splitlines()) == 40
    first = out.read_bytes()
    assert runner.invoke(app, ["tasks", "generate", "retail", "-n", "40", "--seed", "2", "-o", str(out)]).exit_code == 0
    assert out.read_bytes() == first
    verify = runner.invoke(app, ["tasks", "verify", str(out)])
    assert verify.exit_code == 0 and verify.stdout.strip().splitlines()[-1] == "40 verified, 0 failed"
    stats = json.loads(runner.invoke(app, ["tasks", "stats", str(out), "--json"]).stdout)
    assert stats["tasks"] == 40 and sum(stats["kinds"].values()) == 40
    pq = pytest.importorskip("pyarrow.parquet")
    table = pq.read_table(tmp_path / "t.parquet")
    assert table.num_rows == 40 and json.loads(table.column("gold_actions")[0].as_py())[0]["name"].startswith("find_")


def test_cli_errors_are_structured(tmp_path: Path) -> None:
    for args, kind in ((["tasks", "generate", "atlantis", "-o", str(tmp_path / "x.jsonl")], "unknown_world"),
                       (["tasks", "generate", "retail", "--sampler", "nope", "-o", str(tmp_path / "x.jsonl")], "invalid_option"),
                       (["tasks", "verify", str(tmp_path / "missing.jsonl")], "file_not_found"),
                       (["tasks", "stats", str(tmp_path)], "invalid_file")):  # fmt: skip
        result = runner.invoke(app, args)
        assert result.exit_code == 1
        assert json.loads(result.stdout.strip().splitlines()[-1])["error"]["type"] == kind


def test_parquet_export_keeps_every_task(tmp_path: Path, retail_tasks: list[Task]) -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    assert export_parquet(retail_tasks[:50], tmp_path / "x.parquet") == 50
    table = pq.read_table(tmp_path / "x.parquet")
    assert table.column("id").to_pylist() == [t.id for t in retail_tasks[:50]]
    assert Counter(table.column("kind").to_pylist()) == Counter(t.kind for t in retail_tasks[:50])


def test_builder_drops_a_draw_whose_gold_no_longer_replays() -> None:
    builder = TaskBuilder(RETAIL, 0)
    draft = builder.synth.draw(5, "target")
    draft.steps[-1].arguments = {**draft.steps[-1].arguments, "order_id": "#W0000000"}
    from toolworld.tasks.sampling import Drop

    with pytest.raises(Drop, match="replay_error"):
        builder.finish(draft, 5)


def test_a_task_file_never_repeats_an_id(monkeypatch):
    """Ids hash the request and the end state, not the user; should two drawn tasks still share one, the later is
    dropped as a duplicate, since runs, resumes and reports key trials by task id."""
    monkeypatch.setattr(Task, "content_id", staticmethod(lambda world, seed, text, changes: f"t_{len(text) % 3}"))
    report = generate("retail", 6, seed=0, max_draws=40)
    assert len(report.ids) == len(set(report.ids)) <= 3
    assert report.drops["duplicate"] > 0
