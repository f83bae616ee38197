"""What every world's policy tests share: a seeded row, a refused call that must leave the state untouched, an
accepted call, and the check that every numbered rule of a world's ``policy.md`` has a test named after it."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from toolworld import Episode

WORLDS = Path(__file__).parents[1] / "src" / "toolworld" / "worlds"


def one(ep: Episode, sql: str, params: tuple[Any, ...] = ()) -> dict[str, Any]:
    """The first row of ``sql``; fails (naming the query) when the seed data has none."""
    rows = ep.query(sql + " LIMIT 1", params)
    assert rows, f"seed data has no row for: {sql} {params}"
    return rows[0]


def violation(ep: Episode, tool: str, args: dict[str, Any], rule: str | None, error_type: str = "policy_violation") -> str:
    """The call must fail with ``error_type`` (citing ``rule`` as "policy Rn" when given) and leave the state
    untouched; returns the error message for further checks."""
    before = ep.state_hash()
    r = ep.call(tool, args)
    assert not r.ok, f"{tool} should have been refused: {r.output}"
    assert r.error.type == error_type, r.error.to_dict()
    if rule is not None:
        assert re.search(rf"policy {rule}\b", r.error.message), r.error.message
    assert ep.state_hash() == before, "a refused call changed the state"
    return r.error.message


def ok(ep: Episode, tool: str, args: dict[str, Any]) -> Any:
    """The call must succeed; returns its output."""
    r = ep.call(tool, args)
    assert r.ok, r.error.to_dict()
    return r.output


def policy_rules(world: str) -> set[str]:
    """The numbered rules (``**R7 Title.**``) of a built-in world's ``policy.md``."""
    return set(re.findall(r"\*\*(R\d+) ", (WORLDS / world / "policy.md").read_text(encoding="utf-8")))


def assert_every_rule_tested(world: str, test_names: Iterable[str], minimum: int = 8) -> None:
    """Every rule of ``world``'s policy has a test named ``test_Rn_...`` among ``test_names`` (pass
    ``globals()``), and the policy has at least ``minimum`` rules."""
    rules = policy_rules(world)
    assert len(rules) >= minimum, f"{world}: only {len(rules)} numbered rules"
    tested = {m.group(1) for name in test_names if (m := re.match(r"test_(R\d+)_", name))}
    assert rules <= tested, f"{world}: rules without a test: {sorted(rules - tested, key=lambda r: int(r[1:]))}"


def probe_scores(world: Any, tasks: list[Any], spec: str) -> list[Any]:
    """Scores of the policy ``spec`` (a probe such as noop, gibberish or literal) on ``tasks``, one trial each,
    with the scripted user: what the no-free-pass tests of every world assert on."""
    from rollout_kit import run
    from toolworld.env.user import ScriptedUser
    from toolworld.rollout.backends import make_policy
    from toolworld.rollout.loop import run_many
    from toolworld.scoring import score_trajectory

    by_id = {t.id: t for t in tasks}
    trajectories = run(run_many(world, tasks, make_policy(spec), trials=1, concurrency=8, user=ScriptedUser()))
    return [score_trajectory(by_id[t.task_id], t, world=world) for t in trajectories]
