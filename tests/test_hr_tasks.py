"""hr tasks: generation is deterministic, every task replays, the gold policy solves them all and the literal
probe does not, and requests speak as employees do (dates and names, never internal ids)."""

from __future__ import annotations

import re
import statistics
from pathlib import Path

import pytest

from toolworld import pipeline
from toolworld.tasks import Task
from toolworld.tasks.generate import generate
from toolworld.tasks.verify import verify_task
from toolworld.world import get_world
from world_kit import probe_scores

HR = get_world("hr")
N = 30


@pytest.fixture(scope="module")
def report():
    return generate(HR, N, seed=0)


@pytest.fixture(scope="module")
def task_file(tmp_path_factory: pytest.TempPathFactory, report) -> Path:
    path = tmp_path_factory.mktemp("hr") / "tasks.jsonl"
    path.write_text("\n".join(report.lines) + "\n", encoding="utf-8")
    return path


def test_generation_is_deterministic(report):
    again = generate(HR, N, seed=0)
    assert [t.to_json() for t in report.tasks] == [t.to_json() for t in again.tasks]
    assert [t.to_json() for t in report.tasks] != [t.to_json() for t in generate(HR, N, seed=1).tasks]


def test_every_task_replays_and_starts_by_identifying_the_employee(report):
    tasks: list[Task] = report.tasks
    assert len(tasks) == N and len({t.id for t in tasks}) == N
    assert [f for t in tasks if (f := verify_task(t, HR)) is not None] == []
    for t in tasks:
        assert t.gold_actions[0].name in ("find_employee_by_email", "find_employee_by_name_and_department")
    assert {t.kind for t in tasks} == {"action", "refusal", "info"}


def test_requests_never_quote_internal_ids(report):
    for t in report.tasks:
        assert not re.search(r"\b(E\d{5}|LR-\d+|CC-\d+|CI-\d+|DOC-\d+)\b", t.instruction), t.instruction


def test_refusals_cite_a_policy_rule(report):
    refusals = [t for t in report.tasks if t.kind == "refusal"]
    assert refusals
    for t in refusals:
        assert t.refusal is not None and re.fullmatch(r"R\d+", t.refusal.rule or ""), t.refusal
        assert not any(HR.tools[a.name].spec.mutates for a in t.gold_actions)


def test_gold_solves_every_task_and_literal_does_not(tmp_path: Path, task_file: Path):
    gold = pipeline.run("hr", task_file, "gold", out=tmp_path / "gold", trials=1, concurrency=2)
    assert gold.summary.success_rate == 1.0 and gold.summary.infra_errors == 0
    literal = pipeline.run("hr", task_file, "literal", out=tmp_path / "literal", trials=1, concurrency=2)
    assert literal.summary.success_rate < 0.6


def test_one_request_per_colleague_rule(report):
    from toolworld.tasks.kit import kit_for

    rule = kit_for(HR).coherence_rules()["one_request_per_colleague"]
    base = next(t for t in report.tasks if t.kind == "action")
    with HR.episode(0) as ep:
        r = ep.query("SELECT employee_id, manager_id FROM employees WHERE status = 'active' AND manager_id IS NOT NULL "
                     "ORDER BY employee_id LIMIT 1")[0]  # fmt: skip
        raise_ = {"name": "request_compensation_change", "arguments": {
            "employee_id": r["manager_id"], "colleague_id": r["employee_id"], "new_salary": 90000.0, "reason": "x"}}
        leave = {"name": "start_offboarding", "arguments": {
            "employee_id": r["manager_id"], "colleague_id": r["employee_id"], "last_day": "2026-04-10"}}
        data = base.model_dump(mode="json")
        assert rule(type(base).model_validate({**data, "gold_actions": [raise_]}), ep) is None
        problem = rule(type(base).model_validate({**data, "gold_actions": [raise_, leave]}), ep)
        assert problem is not None and r["employee_id"] in problem


def test_refusals_that_point_to_hr_accept_the_hand_off():
    tasks = generate(HR, 40, seed=0, sampler="refusal").tasks
    pointed = [t for t in tasks if t.refusal is not None and "transfer" in t.refusal.reason.lower()]
    assert pointed, "no refusal in the sample points to an HR partner"
    for t in pointed:
        assert any(a.gold_actions[-1].name == "transfer_to_hr_partner" for a in t.alternatives), t.id


# -- probes: no free pass ------------------------------------------------------------------------------------------



@pytest.fixture(scope="module")
def mixed() -> list[Task]:
    tasks = generate(HR, 60, seed=3).tasks
    kinds = {t.kind for t in tasks}
    assert kinds == {"action", "refusal", "info"}, kinds
    return tasks


@pytest.mark.parametrize("spec", ["noop", "gibberish"])
def test_doing_nothing_or_babbling_earns_nothing(mixed: list[Task], spec: str) -> None:
    scores = probe_scores(HR, mixed, spec)
    kinds = {t.id: t.kind for t in mixed}
    assert not any(s.success for s in scores)
    assert max(s.reward for s in scores) <= 0.34 and statistics.mean(s.reward for s in scores) <= 0.05
    assert all(s.reward == 0.0 for s in scores if kinds[s.task_id] in ("action", "refusal"))


def test_the_literal_probe_passes_only_plain_commands(mixed: list[Task]) -> None:
    """Taking the employee at their word solves a one-step command (or relays the tool's own refusal of one); it
    never answers a question, and fails most of the set."""
    scores = probe_scores(HR, mixed, "literal")
    by_id = {t.id: t for t in mixed}
    passed = [by_id[s.task_id] for s in scores if s.success]
    assert len(passed) <= 0.25 * len(mixed), len(passed)
    for t in passed:
        assert t.kind != "info", t.instruction
        writes = [a.name for a in t.gold_actions if HR.tools[a.name].mutates]
        assert len(writes) <= 1 and not t.scenario.contingency, (t.instruction, writes)
