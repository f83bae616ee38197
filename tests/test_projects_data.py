"""The projects seed data is a pure function of the seed, obeys the rules the tools rely on, and carries the mess
a real tracker has (duplicates, stale and unestimated issues, people who left, unfinished closed sprints)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from toolworld.world import Rng, get_world
from toolworld.worlds.projects.common import MAX_MINUTES_PER_DAY, NOW, TODAY, WORKFLOWS
from toolworld.worlds.projects.data import seed_data

SCHEMA = (Path(__file__).resolve().parents[1] / "src/toolworld/worlds/projects/schema.sql").read_text(encoding="utf-8")


def build(seed: int) -> sqlite3.Connection:
    db = sqlite3.connect(":memory:", isolation_level=None)
    db.executescript(SCHEMA)
    db.execute("PRAGMA foreign_keys = ON")
    db.execute("BEGIN")
    seed_data(db, Rng(seed).child("projects"))
    db.execute("COMMIT")
    return db


def dump(db: sqlite3.Connection) -> list[str]:
    return list(db.iterdump())


@pytest.fixture(scope="module")
def db() -> sqlite3.Connection:
    return build(0)


def n(db: sqlite3.Connection, sql: str, params: tuple[object, ...] = ()) -> int:
    return int(db.execute(sql, params).fetchone()[0])


def test_same_seed_same_bytes_and_other_seed_differs():
    assert dump(build(3)) == dump(build(3))
    assert dump(build(3)) != dump(build(4))


def test_world_reports_enough_rows_and_tables():
    stats = get_world("projects").stats(0)
    assert stats["rows"] >= 5000 and stats["tables"] >= 10 and stats["tools"] >= 15


def test_foreign_keys_hold(db):
    assert db.execute("PRAGMA foreign_key_check").fetchall() == []


def test_dates_are_before_the_clock(db):
    for table, col in (("issues", "created_at"), ("issues", "updated_at"), ("comments", "created_at"),
                       ("users", "created_at"), ("time_logs", "created_at")):  # fmt: skip
        assert n(db, f"SELECT COUNT(*) FROM {table} WHERE {col} > ?", (NOW,)) == 0, (table, col)
    assert n(db, "SELECT COUNT(*) FROM time_logs WHERE day > ?", (TODAY,)) == 0
    assert n(db, "SELECT COUNT(*) FROM issues WHERE updated_at < created_at") == 0


def test_rules_hold_in_the_seed(db):
    # R3: in-progress work has an (active) assignee; finished work has a resolution.
    assert n(db, "SELECT COUNT(*) FROM issues i LEFT JOIN users u ON u.user_id = i.assignee_id "
                 "WHERE i.status = 'in_progress' AND (u.user_id IS NULL OR u.active = 0)") == 0  # fmt: skip
    assert n(db, "SELECT COUNT(*) FROM issues WHERE status IN ('done', 'closed') AND resolution IS NULL") == 0
    assert n(db, "SELECT COUNT(*) FROM issues WHERE status NOT IN ('done', 'closed') AND resolution IS NOT NULL") == 0
    # R2: no project is over its WIP limits; some are exactly at it (so the limit shows up in tasks).
    over = n(db, "SELECT COUNT(*) FROM projects p WHERE wip_in_progress < (SELECT COUNT(*) FROM issues i WHERE "
                 "i.project_key = p.project_key AND i.status = 'in_progress' AND i.issue_type != 'epic')")  # fmt: skip
    at = n(db, "SELECT COUNT(*) FROM projects p WHERE wip_in_progress = (SELECT COUNT(*) FROM issues i WHERE "
               "i.project_key = p.project_key AND i.status = 'in_progress' AND i.issue_type != 'epic')")  # fmt: skip
    assert over == 0 and at >= 2
    # R6: open sprints are within capacity; R11: at most one active sprint per project.
    assert n(db, "SELECT COUNT(*) FROM sprints s WHERE s.state != 'closed' AND s.capacity_points < "
                 "(SELECT COALESCE(SUM(story_points), 0) FROM issues WHERE sprint_id = s.sprint_id)") == 0  # fmt: skip
    assert n(db, "SELECT COUNT(*) FROM (SELECT project_key FROM sprints WHERE state = 'active' GROUP BY 1 "
                 "HAVING COUNT(*) > 1)") == 0  # fmt: skip
    # R7: nobody has more than 24 hours on a day.
    assert n(db, f"SELECT COUNT(*) FROM (SELECT 1 FROM time_logs GROUP BY user_id, day HAVING SUM(minutes) > "
                 f"{MAX_MINUTES_PER_DAY})") == 0  # fmt: skip
    # R8: every assignee belongs to the project; stories in open sprints are estimated (R3).
    assert n(db, "SELECT COUNT(*) FROM issues i WHERE assignee_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM "
                 "project_members m WHERE m.project_key = i.project_key AND m.user_id = i.assignee_id)") == 0  # fmt: skip
    assert n(db, "SELECT COUNT(*) FROM issues i JOIN sprints s ON s.sprint_id = i.sprint_id WHERE s.state != 'closed' "
                 "AND i.issue_type = 'story' AND i.story_points IS NULL") == 0  # fmt: skip
    # Project leads are active members of their own projects.
    assert n(db, "SELECT COUNT(*) FROM projects p JOIN users u ON u.user_id = p.lead_id WHERE u.active = 0 OR NOT EXISTS "
                 "(SELECT 1 FROM project_members m WHERE m.project_key = p.project_key AND m.user_id = p.lead_id)") == 0  # fmt: skip


def test_workflow_table_matches_the_rules(db):
    rows = sorted(db.execute("SELECT issue_type, from_status, to_status FROM workflows").fetchall())
    assert rows == sorted((t, a, b) for t, flow in WORKFLOWS.items() for a, b in flow)


def test_the_mess_is_there(db):
    # The same bug reported twice: open duplicates, and some already linked.
    assert n(db, "SELECT COUNT(*) FROM issues d JOIN issues o ON o.project_key = d.project_key AND o.summary = d.summary "
                 "AND o.number < d.number WHERE d.status = 'backlog'") >= 20  # fmt: skip
    assert n(db, "SELECT COUNT(*) FROM issues WHERE duplicate_of IS NOT NULL AND resolution = 'duplicate'") >= 10
    # Stale backlog issues untouched for 90+ days, unassigned and unestimated issues.
    assert n(db, "SELECT COUNT(*) FROM issues WHERE status IN ('backlog', 'todo') AND updated_at < ?",
             ("2026-03-14T00:00:00Z",)) >= 100  # fmt: skip
    assert n(db, "SELECT COUNT(*) FROM issues WHERE assignee_id IS NULL AND status != 'closed'") >= 200
    assert n(db, "SELECT COUNT(*) FROM issues WHERE story_points IS NULL AND issue_type != 'epic'") >= 200
    # People who left, still assigned to open work.
    assert n(db, "SELECT COUNT(*) FROM issues i JOIN users u ON u.user_id = i.assignee_id WHERE u.active = 0 "
                 "AND i.status NOT IN ('done', 'closed')") >= 10  # fmt: skip
    # Closed sprints with unfinished issues; epics with no children; crunch days near the 24-hour cap.
    assert n(db, "SELECT COUNT(*) FROM issues i JOIN sprints s ON s.sprint_id = i.sprint_id WHERE s.state = 'closed' "
                 "AND i.status NOT IN ('done', 'closed')") >= 10  # fmt: skip
    assert n(db, "SELECT COUNT(*) FROM issues e WHERE e.issue_type = 'epic' AND NOT EXISTS (SELECT 1 FROM issues c "
                 "WHERE c.epic_key = e.issue_key)") >= 10  # fmt: skip
    assert n(db, "SELECT COUNT(*) FROM (SELECT 1 FROM time_logs GROUP BY user_id, day HAVING SUM(minutes) >= 1140)") >= 10
    # A project between sprints (its planned sprint can be started) and one with an active sprint.
    assert n(db, "SELECT COUNT(*) FROM projects p WHERE NOT EXISTS (SELECT 1 FROM sprints s WHERE "
                 "s.project_key = p.project_key AND s.state = 'active')") >= 1  # fmt: skip


def test_emails_and_names_are_unique_and_fictional(db):
    emails = [r[0] for r in db.execute("SELECT email FROM users")]
    assert len(set(emails)) == len(emails)
    assert all(e.endswith((".example.com", ".example.net", ".example.org")) for e in emails)
    names = [r[0] for r in db.execute("SELECT full_name FROM users")]
    assert len(set(names)) == len(names)
