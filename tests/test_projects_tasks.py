"""Projects tasks: generated tasks replay, the gold policy solves them all, the literal probe does not, and requests
speak only of what a teammate knows (issue and project keys, names, sprint names), never internal ids."""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rollout_kit import run
from toolworld import get_world
from toolworld.cli import app
from toolworld.env.user import ScriptedUser
from toolworld.rollout.backends import GoldPolicy
from toolworld.rollout.loop import run_episode
from toolworld.scoring import Score, score_trajectory
from toolworld.tasks import Task
from toolworld.tasks.generate import generate
from toolworld.tasks.model import Action
from toolworld.tasks.verify import verify_task
from toolworld.world import World
from world_kit import probe_scores

PROJECTS = get_world("projects")
runner = CliRunner()



def scripted_score(world: World, task: Task, actions: list[Action]) -> Score:
    """The score of an agent that makes ``actions`` (gold's conduct: identify, describe, confirm) on ``task``."""
    played = task.model_copy(update={"gold_actions": actions})
    return score_trajectory(task, run(run_episode(world, played, GoldPolicy(), user=ScriptedUser())), world=world)


@pytest.fixture(scope="module")
def tasks() -> list[Task]:
    return generate(PROJECTS, 40, seed=0).tasks


def test_tasks_replay_and_are_deterministic(tasks: list[Task]) -> None:
    assert len(tasks) == 40 and len({t.id for t in tasks}) == 40
    assert [f for t in tasks if (f := verify_task(t, PROJECTS)) is not None] == []
    assert [t.to_json() for t in generate(PROJECTS, 12, seed=0).tasks] == [t.to_json() for t in tasks[:12]]


def test_tasks_identify_the_person_first_and_hide_internal_ids(tasks: list[Task]) -> None:
    ep = PROJECTS.episode(0)
    sprint_ids = {str(r["sprint_id"]) for r in ep.query("SELECT sprint_id FROM sprints")}
    for t in tasks:
        assert t.gold_actions[0].name == "find_user_by_email"
        assert not re.search(r"\bu_\d{4}\b", t.instruction), t.instruction
        spoken = re.sub(r"\b[A-Z]+-\d+\b", "", t.instruction)  # issue keys are what people say
        assert not set(re.findall(r"\b\d{3}\b", spoken)) & sprint_ids, t.instruction
    assert {"action", "refusal", "info"} <= {t.kind for t in tasks}


def test_every_write_tool_is_a_target_somewhere() -> None:
    # Refusals count too: a request the policy forbids (a member closing a sprint) is a target of its own.
    targets = {name for t in generate(PROJECTS, 300, seed=1).tasks for name in t.provenance.targets}
    writes = {name for name, tool in PROJECTS.tools.items() if tool.mutates}
    assert writes <= targets, f"never a target: {sorted(writes - targets)}"


def _run(tasks: list[Task], policy: str, tmp_path: Path) -> dict:
    path = tmp_path / "tasks.jsonl"
    path.write_text("".join(t.to_json() + "\n" for t in tasks), encoding="utf-8")
    out = tmp_path / policy
    result = runner.invoke(app, ["run", "projects", "--tasks", str(path), "--policy", policy, "--out", str(out)])
    assert result.exit_code == 0, result.output
    return json.loads((out / "summary.json").read_text())


def test_gold_solves_every_task_and_the_literal_probe_does_not(tasks: list[Task], tmp_path: Path) -> None:
    gold = _run(tasks[:30], "gold", tmp_path)
    assert gold["success_rate"] == 1.0 and gold["infra_errors"] == 0
    literal = _run(tasks[:30], "literal", tmp_path)
    assert literal["success_rate"] < 0.2  # 0.0 at seed 0; 0.013 over 1,000 tasks


@pytest.mark.parametrize("spec", ["noop", "gibberish"])
def test_probes_that_do_nothing_or_babble_earn_nothing(tasks: list[Task], spec: str) -> None:
    scores = probe_scores(PROJECTS, tasks, spec)
    assert not any(s.success for s in scores)
    assert max(s.reward for s in scores) <= 0.34 and statistics.mean(s.reward for s in scores) <= 0.05
    kinds = {t.id: t.kind for t in tasks}
    assert all(s.reward == 0.0 for s in scores if kinds[s.task_id] in ("action", "refusal"))


def test_a_comment_is_scored_by_its_dictated_words(tasks: list[Task]) -> None:
    """The person dictates the comment in quotes; posting the whole request as the comment is a wrong change."""
    task = next(t for t in generate(PROJECTS, 60, seed=0).tasks if t.kind == "action"
                and [a.name for a in t.gold_actions if PROJECTS.tools[a.name].mutates] == ["add_comment"])  # fmt: skip
    assert "comments.body" not in task.ignore_columns
    gold = next(a for a in task.gold_actions if a.name == "add_comment")
    assert f'"{gold.arguments["body"]}"' in task.instruction
    pasted = [a if a.name != "add_comment" else a.model_copy(update={"arguments": {**a.arguments,
              "body": task.instruction}}) for a in task.gold_actions]  # fmt: skip
    right, wrong = (scripted_score(PROJECTS, task, actions) for actions in (task.gold_actions, pasted))
    assert right.success and not wrong.success
