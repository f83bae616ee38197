"""Helpdesk tasks: generated tasks replay, the gold policy solves them all, and they speak only of what the contact
knows (never an internal id) and never quote a ticket number the agent has not opened yet."""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path

import pytest
from typer.testing import CliRunner

from toolworld import get_world
from toolworld.cli import app
from toolworld.tasks import Task
from toolworld.tasks.generate import generate
from toolworld.tasks.verify import verify_task
from world_kit import probe_scores

HELPDESK = get_world("helpdesk")
runner = CliRunner()


@pytest.fixture(scope="module")
def tasks() -> list[Task]:
    return generate(HELPDESK, 40, seed=0).tasks


def test_tasks_replay_and_are_deterministic(tasks: list[Task]) -> None:
    assert len(tasks) == 40 and len({t.id for t in tasks}) == 40
    assert [f for t in tasks if (f := verify_task(t, HELPDESK)) is not None] == []
    assert [t.to_json() for t in generate(HELPDESK, 12, seed=0).tasks] == [t.to_json() for t in tasks[:12]]


def test_tasks_identify_the_contact_first_and_hide_internal_ids(tasks: list[Task]) -> None:
    for t in tasks:
        assert t.gold_actions[0].name in ("find_contact_by_email", "find_contact_by_name_and_org")
        assert not re.search(r"\b(CT|ORG|AG)-\d+", t.instruction), t.instruction
    kinds = {t.kind for t in tasks}
    assert {"action", "info"} <= kinds


def test_new_ticket_numbers_are_never_quoted_by_the_user() -> None:
    """A ticket the agent opens mid-chat gets the next number; the user cannot have known it beforehand."""
    first_new = HELPDESK.episode(0).query("SELECT max(ticket_id) + 1 AS n FROM tickets")[0]["n"]
    for t in generate(HELPDESK, 80, seed=2).tasks:
        assert f"#{first_new}" not in t.instruction, t.instruction


def test_gold_solves_every_task(tasks: list[Task], tmp_path: Path) -> None:
    path = tmp_path / "tasks.jsonl"
    path.write_text("".join(t.to_json() + "\n" for t in tasks[:30]), encoding="utf-8")
    result = runner.invoke(app, ["run", "helpdesk", "--tasks", str(path), "--policy", "gold", "--out",
                                 str(tmp_path / "gold")])  # fmt: skip
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "gold" / "summary.json").read_text())
    assert summary["success_rate"] == 1.0 and summary["infra_errors"] == 0


# -- probes: no free pass ------------------------------------------------------------------------------------------



@pytest.fixture(scope="module")
def mixed() -> list[Task]:
    tasks = generate(HELPDESK, 60, seed=3).tasks
    kinds = {t.kind for t in tasks}
    assert kinds == {"action", "refusal", "info"}, kinds
    return tasks


@pytest.mark.parametrize("spec", ["noop", "gibberish"])
def test_doing_nothing_or_babbling_earns_nothing(mixed: list[Task], spec: str) -> None:
    scores = probe_scores(HELPDESK, mixed, spec)
    kinds = {t.id: t.kind for t in mixed}
    assert not any(s.success for s in scores)
    assert max(s.reward for s in scores) <= 0.34 and statistics.mean(s.reward for s in scores) <= 0.05
    assert all(s.reward == 0.0 for s in scores if kinds[s.task_id] in ("action", "refusal"))


def test_the_literal_probe_passes_only_plain_commands(mixed: list[Task]) -> None:
    """Taking the user at their word solves a one-step command (or relays the tool's own refusal of one); it never
    answers a question, and fails most of the set."""
    scores = probe_scores(HELPDESK, mixed, "literal")
    by_id = {t.id: t for t in mixed}
    passed = [by_id[s.task_id] for s in scores if s.success]
    assert len(passed) <= 0.35 * len(mixed), len(passed)
    for t in passed:
        assert t.kind != "info", t.instruction
        writes = [a.name for a in t.gold_actions if HELPDESK.tools[a.name].mutates]
        assert len(writes) <= 1 and not t.scenario.contingency, (t.instruction, writes)
