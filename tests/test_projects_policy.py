"""Every numbered rule of the projects policy.md has a test here proving that the tools enforce it.

Test names carry the rule id (``test_R3_...``); ``test_every_policy_rule_is_tested`` fails when a rule is added
to policy.md without a test. Rows are picked from the seeded state, never hard-coded.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from toolworld import Episode
from toolworld.world import get_world
from toolworld.worlds.projects.common import TODAY, day_offset
from world_kit import assert_every_rule_tested, ok, one, violation


@pytest.fixture(scope="module")
def pworld():
    return get_world("projects")


@pytest.fixture
def ep(pworld) -> Iterator[Episode]:
    with pworld.episode(0) as e:
        yield e


def lead(ep: Episode, project: str) -> str:
    return one(ep, "SELECT lead_id FROM projects WHERE project_key = ?", (project,))["lead_id"]


def plain_member(ep: Episode, project: str) -> str:
    """An active member of ``project`` who is neither its lead nor an admin."""
    return one(ep, "SELECT u.user_id FROM project_members m JOIN users u ON u.user_id = m.user_id "
                   "WHERE m.project_key = ? AND u.active = 1 AND u.role != 'admin' AND u.user_id != "
                   "(SELECT lead_id FROM projects WHERE project_key = ?) ORDER BY u.user_id", (project, project))["user_id"]  # fmt: skip


def wip_room(ep: Episode) -> str:
    """A project whose in-progress count is below its limit."""
    return one(ep, "SELECT p.project_key FROM projects p WHERE p.wip_in_progress > (SELECT COUNT(*) FROM issues i "
                   "WHERE i.project_key = p.project_key AND i.status = 'in_progress' AND i.issue_type != 'epic') "
                   "ORDER BY p.project_key")["project_key"]  # fmt: skip


def todo_issue(ep: Episode, project: str, extra: str = "") -> dict[str, Any]:
    return one(ep, "SELECT * FROM issues WHERE project_key = ? AND status = 'todo' AND issue_type IN ('bug', 'task') "
                   f"{extra} ORDER BY number", (project,))  # fmt: skip


def test_R1_only_workflow_transitions(ep):
    project = wip_room(ep)
    issue = todo_issue(ep, project, "AND assignee_id IS NOT NULL")
    me = lead(ep, project)
    msg = violation(ep, "transition_issue", {"user_id": me, "issue_key": issue["issue_key"], "to_status": "in_review"}, "R1")
    assert "'in_progress'" in msg  # the refusal names the allowed next steps
    out = ok(ep, "transition_issue", {"user_id": me, "issue_key": issue["issue_key"], "to_status": "in_progress"})
    assert out["status"] == "in_progress" and "in_review" in out["allowed_transitions"]


def test_R1_tasks_skip_review_but_bugs_do_not(ep):
    task = one(ep, "SELECT issue_key, project_key FROM issues WHERE issue_type = 'task' AND status = 'in_progress' "
                   "ORDER BY issue_key")  # fmt: skip
    ok(ep, "transition_issue", {"user_id": lead(ep, task["project_key"]), "issue_key": task["issue_key"],
                                "to_status": "done", "resolution": "done"})  # fmt: skip
    bug = one(ep, "SELECT issue_key, project_key FROM issues WHERE issue_type = 'bug' AND status = 'in_progress' "
                  "ORDER BY issue_key")  # fmt: skip
    violation(ep, "transition_issue", {"user_id": lead(ep, bug["project_key"]), "issue_key": bug["issue_key"],
                                       "to_status": "done", "resolution": "fixed"}, "R1")  # fmt: skip


def test_R2_wip_limit_blocks_one_more_in_progress(ep):
    full = one(ep, "SELECT p.project_key FROM projects p WHERE p.wip_in_progress = (SELECT COUNT(*) FROM issues i "
                   "WHERE i.project_key = p.project_key AND i.status = 'in_progress' AND i.issue_type != 'epic') "
                   "ORDER BY p.project_key")["project_key"]  # fmt: skip
    issue = todo_issue(ep, full, "AND assignee_id IS NOT NULL")
    me = lead(ep, full)
    msg = violation(ep, "transition_issue", {"user_id": me, "issue_key": issue["issue_key"], "to_status": "in_progress"},
                    "R2")  # fmt: skip
    assert "limit" in msg
    # Once one issue leaves in_progress, there is room again.
    busy = one(ep, "SELECT issue_key FROM issues WHERE project_key = ? AND status = 'in_progress' AND issue_type != 'epic' "
                   "ORDER BY number", (full,))["issue_key"]  # fmt: skip
    ok(ep, "transition_issue", {"user_id": me, "issue_key": busy, "to_status": "todo"})
    ok(ep, "transition_issue", {"user_id": me, "issue_key": issue["issue_key"], "to_status": "in_progress"})


def test_R3_in_progress_needs_an_assignee(ep):
    project = wip_room(ep)
    issue = todo_issue(ep, project, "AND assignee_id IS NULL")
    me = lead(ep, project)
    violation(ep, "transition_issue", {"user_id": me, "issue_key": issue["issue_key"], "to_status": "in_progress"}, "R3")
    busy = one(ep, "SELECT issue_key FROM issues WHERE status = 'in_progress' AND project_key = ?", (project,))
    violation(ep, "assign_issue", {"user_id": me, "issue_key": busy["issue_key"], "assignee_id": None}, "R3")


def test_R3_done_needs_a_resolution(ep):
    task = one(ep, "SELECT issue_key, project_key FROM issues WHERE issue_type = 'task' AND status = 'in_progress' "
                   "ORDER BY issue_key")  # fmt: skip
    me = lead(ep, task["project_key"])
    violation(ep, "transition_issue", {"user_id": me, "issue_key": task["issue_key"], "to_status": "done"}, "R3")
    out = ok(ep, "transition_issue", {"user_id": me, "issue_key": task["issue_key"], "to_status": "done",
                                      "resolution": "done"})  # fmt: skip
    assert out["resolution"] == "done"


def test_R3_story_needs_points_to_enter_a_sprint(ep):
    story = one(ep, "SELECT i.issue_key, i.project_key FROM issues i WHERE i.issue_type = 'story' AND i.story_points IS NULL "
                    "AND i.status IN ('backlog', 'todo') ORDER BY i.issue_key")  # fmt: skip
    sprint = one(ep, "SELECT sprint_id FROM sprints WHERE project_key = ? AND state = 'planned' ORDER BY sprint_id DESC",
                 (story["project_key"],))["sprint_id"]  # fmt: skip
    me = lead(ep, story["project_key"])
    violation(ep, "add_issue_to_sprint", {"user_id": me, "issue_key": story["issue_key"], "sprint_id": sprint}, "R3")
    ok(ep, "update_issue", {"user_id": me, "issue_key": story["issue_key"], "story_points": 3})
    ok(ep, "add_issue_to_sprint", {"user_id": me, "issue_key": story["issue_key"], "sprint_id": sprint})


def test_R4_only_reporter_lead_or_admin_closes(ep):
    issue = one(ep, "SELECT i.issue_key, i.project_key, i.reporter_id FROM issues i WHERE i.status = 'done' "
                    "AND i.issue_type != 'epic' ORDER BY i.issue_key")  # fmt: skip
    other = one(ep, "SELECT u.user_id FROM project_members m JOIN users u ON u.user_id = m.user_id WHERE m.project_key = ? "
                    "AND u.role = 'member' AND u.active = 1 AND u.user_id != ? ORDER BY u.user_id",
                (issue["project_key"], issue["reporter_id"]))["user_id"]  # fmt: skip
    violation(ep, "transition_issue", {"user_id": other, "issue_key": issue["issue_key"], "to_status": "closed"}, "R4")
    violation(ep, "transition_issue", {"user_id": other, "issue_key": issue["issue_key"], "to_status": "todo"}, "R4")
    out = ok(ep, "transition_issue", {"user_id": issue["reporter_id"], "issue_key": issue["issue_key"], "to_status": "closed"})
    assert out["status"] == "closed" and out["resolution"] is not None
    reopened = ok(ep, "transition_issue", {"user_id": lead(ep, issue["project_key"]), "issue_key": issue["issue_key"],
                                           "to_status": "todo"})  # fmt: skip
    assert reopened["resolution"] is None


def test_R5_active_sprint_scope_change_needs_the_lead(ep):
    sprint = one(ep, "SELECT sprint_id, project_key FROM sprints WHERE state = 'active' ORDER BY sprint_id")
    project = sprint["project_key"]
    issue = one(ep, "SELECT issue_key FROM issues WHERE project_key = ? AND sprint_id IS NULL AND status = 'todo' "
                    "AND issue_type IN ('bug', 'task') AND story_points IS NULL ORDER BY number", (project,))["issue_key"]  # fmt: skip
    member = plain_member(ep, project)
    violation(ep, "add_issue_to_sprint", {"user_id": member, "issue_key": issue, "sprint_id": sprint["sprint_id"]}, "R5")
    inside = one(ep, "SELECT issue_key FROM issues WHERE sprint_id = ? ORDER BY number", (sprint["sprint_id"],))["issue_key"]
    violation(ep, "remove_issue_from_sprint", {"user_id": member, "issue_key": inside}, "R5")
    ok(ep, "add_issue_to_sprint", {"user_id": lead(ep, project), "issue_key": issue, "sprint_id": sprint["sprint_id"]})
    # A planned sprint is open to every member.
    planned = one(ep, "SELECT sprint_id FROM sprints WHERE project_key = ? AND state = 'planned' ORDER BY sprint_id",
                  (project,))["sprint_id"]  # fmt: skip
    other = one(ep, "SELECT issue_key FROM issues WHERE project_key = ? AND sprint_id IS NULL AND status = 'todo' "
                    "AND issue_type IN ('bug', 'task') ORDER BY number DESC", (project,))["issue_key"]  # fmt: skip
    ok(ep, "add_issue_to_sprint", {"user_id": member, "issue_key": other, "sprint_id": planned})


def test_R6_sprint_capacity_cannot_be_exceeded(ep):
    sprint = one(ep, "SELECT s.sprint_id, s.project_key, s.capacity_points - COALESCE((SELECT SUM(story_points) FROM issues "
                     "WHERE sprint_id = s.sprint_id), 0) AS room FROM sprints s WHERE s.state = 'planned' "
                     "ORDER BY room, s.sprint_id")  # fmt: skip
    project, room = sprint["project_key"], sprint["room"]
    me = lead(ep, project)
    big = one(ep, "SELECT issue_key FROM issues WHERE project_key = ? AND sprint_id IS NULL AND status IN ('backlog', 'todo') "
                  "AND issue_type = 'task' ORDER BY number", (project,))["issue_key"]  # fmt: skip
    ok(ep, "update_issue", {"user_id": me, "issue_key": big, "story_points": room + 1})
    msg = violation(ep, "add_issue_to_sprint", {"user_id": me, "issue_key": big, "sprint_id": sprint["sprint_id"]}, "R6")
    assert "capacity" in msg
    ok(ep, "update_issue", {"user_id": me, "issue_key": big, "story_points": room})
    ok(ep, "add_issue_to_sprint", {"user_id": me, "issue_key": big, "sprint_id": sprint["sprint_id"]})
    # Growing an estimate inside the now-full sprint is refused too.
    violation(ep, "update_issue", {"user_id": me, "issue_key": big, "story_points": room + 1}, "R6")


def test_R6_carrying_unfinished_work_over_must_fit_the_next_sprint(ep):
    active = one(ep, "SELECT sprint_id, project_key FROM sprints WHERE state = 'active' ORDER BY sprint_id")
    project, me = active["project_key"], lead(ep, active["project_key"])
    planned = one(ep, "SELECT sprint_id FROM sprints WHERE project_key = ? AND state = 'planned' ORDER BY start_date",
                  (project,))["sprint_id"]  # fmt: skip
    close = {"user_id": me, "sprint_id": active["sprint_id"], "move_unfinished_to": "next_sprint"}
    msg = violation(ep, "close_sprint", close, "R6")
    assert "move_unfinished_to='backlog'" in msg
    # Make room in the planned sprint (open to planning), and the carry-over fits.
    for row in ep.query("SELECT issue_key FROM issues WHERE sprint_id = ? ORDER BY number", (planned,)):
        ok(ep, "remove_issue_from_sprint", {"user_id": me, "issue_key": row["issue_key"]})
    unfinished = [r["issue_key"] for r in ep.query("SELECT issue_key FROM issues WHERE sprint_id = ? AND status NOT IN "
                                                   "('done', 'closed') ORDER BY number", (active["sprint_id"],))]  # fmt: skip
    out = ok(ep, "close_sprint", close)
    assert out["moved_unfinished"] == unfinished and out["moved_to"] == planned


def test_R7_time_only_by_members_not_in_the_future_and_at_most_a_day(ep):
    log = one(ep, "SELECT t.user_id, t.issue_key FROM time_logs t JOIN users u ON u.user_id = t.user_id WHERE u.active = 1 "
                  "ORDER BY t.time_log_id")  # fmt: skip
    me, issue = log["user_id"], log["issue_key"]
    violation(ep, "log_time", {"user_id": me, "issue_key": issue, "minutes": 60, "day": day_offset(TODAY, 1)}, "R7")
    heavy = one(ep, "SELECT user_id, day, SUM(minutes) AS m FROM time_logs GROUP BY user_id, day ORDER BY m DESC, user_id")
    heavy_issue = one(ep, "SELECT issue_key FROM time_logs WHERE user_id = ? ORDER BY time_log_id", (heavy["user_id"],))
    room = 1440 - heavy["m"]
    args = {"user_id": heavy["user_id"], "issue_key": heavy_issue["issue_key"], "day": heavy["day"]}
    violation(ep, "log_time", {**args, "minutes": room + 15}, "R7")
    out = ok(ep, "log_time", {**args, "minutes": room})
    assert out["day_total_minutes"] == 1440
    outsider = one(ep, "SELECT u.user_id FROM users u WHERE u.active = 1 AND NOT EXISTS (SELECT 1 FROM project_members m "
                       "WHERE m.user_id = u.user_id AND m.project_key = (SELECT project_key FROM issues WHERE issue_key = ?)) "
                       "ORDER BY u.user_id", (issue,))["user_id"]  # fmt: skip
    violation(ep, "log_time", {"user_id": outsider, "issue_key": issue, "minutes": 30, "day": TODAY}, "R7")


def test_R8_assignees_are_active_project_members(ep):
    gone = one(ep, "SELECT m.user_id, m.project_key FROM project_members m JOIN users u ON u.user_id = m.user_id "
                   "WHERE u.active = 0 ORDER BY m.user_id")  # fmt: skip
    project = gone["project_key"]
    issue = one(ep, "SELECT issue_key FROM issues WHERE project_key = ? AND status IN ('backlog', 'todo') ORDER BY number",
                (project,))["issue_key"]  # fmt: skip
    me = lead(ep, project)
    msg = violation(ep, "assign_issue", {"user_id": me, "issue_key": issue, "assignee_id": gone["user_id"]}, "R8")
    assert "no longer active" in msg
    stranger = one(ep, "SELECT u.user_id FROM users u WHERE u.active = 1 AND NOT EXISTS (SELECT 1 FROM project_members m "
                       "WHERE m.user_id = u.user_id AND m.project_key = ?) ORDER BY u.user_id", (project,))["user_id"]  # fmt: skip
    violation(ep, "assign_issue", {"user_id": me, "issue_key": issue, "assignee_id": stranger}, "R8")
    violation(ep, "create_issue", {"user_id": me, "project_key": project, "issue_type": "bug", "summary": "Broken link",
                                   "assignee_id": stranger}, "R8")  # fmt: skip
    mate = plain_member(ep, project)
    assert ok(ep, "assign_issue", {"user_id": me, "issue_key": issue, "assignee_id": mate})["assignee"]["user_id"] == mate


def test_R9_duplicates_same_project_and_open_original(ep):
    pair = one(ep, "SELECT d.issue_key AS dup, o.issue_key AS original, d.project_key FROM issues d JOIN issues o "
                   "ON o.project_key = d.project_key AND o.summary = d.summary AND o.number < d.number "
                   "WHERE d.status = 'backlog' AND o.status != 'closed' ORDER BY d.issue_key")  # fmt: skip
    me = lead(ep, pair["project_key"])
    foreign = one(ep, "SELECT issue_key FROM issues WHERE project_key != ? AND status != 'closed' ORDER BY issue_key",
                  (pair["project_key"],))["issue_key"]  # fmt: skip
    violation(ep, "link_duplicate", {"user_id": me, "issue_key": pair["dup"], "original_key": foreign}, "R9")
    closed = one(ep, "SELECT issue_key FROM issues WHERE project_key = ? AND status = 'closed' ORDER BY number",
                 (pair["project_key"],))["issue_key"]  # fmt: skip
    violation(ep, "link_duplicate", {"user_id": me, "issue_key": pair["dup"], "original_key": closed}, "R9")
    out = ok(ep, "link_duplicate", {"user_id": me, "issue_key": pair["dup"], "original_key": pair["original"]})
    assert (out["status"], out["resolution"], out["duplicate_of"]) == ("closed", "duplicate", pair["original"])


def test_R4_marking_a_duplicate_closes_it_so_only_reporter_lead_or_admin_may(ep):
    pair = one(ep, "SELECT d.issue_key AS dup, o.issue_key AS original, d.project_key, d.reporter_id, d.sprint_id "
                   "FROM issues d JOIN issues o ON o.project_key = d.project_key AND o.summary = d.summary AND "
                   "o.number < d.number JOIN projects p ON p.project_key = d.project_key WHERE d.status NOT IN "
                   "('done', 'closed') AND o.status != 'closed' AND d.reporter_id != p.lead_id ORDER BY d.issue_key")  # fmt: skip
    member = one(ep, "SELECT m.user_id FROM project_members m JOIN users u ON u.user_id = m.user_id JOIN projects p "
                     "ON p.project_key = m.project_key WHERE m.project_key = ? AND u.role != 'admin' AND u.active = 1 "
                     "AND m.user_id NOT IN (p.lead_id, ?) ORDER BY m.user_id",
                 (pair["project_key"], pair["reporter_id"]))["user_id"]  # fmt: skip
    args = {"issue_key": pair["dup"], "original_key": pair["original"]}
    msg = violation(ep, "link_duplicate", {"user_id": member, **args}, "R4")
    assert pair["dup"] in msg and "comment" in msg
    out = ok(ep, "link_duplicate", {"user_id": pair["reporter_id"], **args})
    assert out["status"] == "closed" and (out["sprint"] or {}).get("sprint_id") == pair["sprint_id"]


def test_R10_only_members_change_a_project(ep):
    project = "APP"
    outsider = one(ep, "SELECT u.user_id FROM users u WHERE u.active = 1 AND u.role != 'admin' AND NOT EXISTS "
                       "(SELECT 1 FROM project_members m WHERE m.user_id = u.user_id AND m.project_key = ?) ORDER BY u.user_id",
                   (project,))["user_id"]  # fmt: skip
    issue = todo_issue(ep, project)["issue_key"]
    violation(ep, "create_issue", {"user_id": outsider, "project_key": project, "issue_type": "task", "summary": "x"}, "R10")
    violation(ep, "add_comment", {"user_id": outsider, "issue_key": issue, "body": "Looks fixed."}, "R10")
    violation(ep, "update_issue", {"user_id": outsider, "issue_key": issue, "priority": "highest"}, "R10")
    admin = one(ep, "SELECT user_id FROM users WHERE role = 'admin' ORDER BY user_id")["user_id"]
    ok(ep, "add_comment", {"user_id": admin, "issue_key": issue, "body": "Looks fixed."})


def test_R11_sprint_lifecycle(ep):
    active = one(ep, "SELECT sprint_id, project_key FROM sprints WHERE state = 'active' ORDER BY sprint_id")
    project = active["project_key"]
    planned = one(ep, "SELECT sprint_id FROM sprints WHERE project_key = ? AND state = 'planned' ORDER BY start_date",
                  (project,))["sprint_id"]  # fmt: skip
    closed = one(ep, "SELECT sprint_id FROM sprints WHERE project_key = ? AND state = 'closed' ORDER BY sprint_id",
                 (project,))["sprint_id"]  # fmt: skip
    me, member = lead(ep, project), plain_member(ep, project)
    violation(ep, "close_sprint", {"user_id": member, "sprint_id": active["sprint_id"]}, "R11")
    violation(ep, "start_sprint", {"user_id": me, "sprint_id": planned}, "R11")  # another sprint is still active
    violation(ep, "close_sprint", {"user_id": me, "sprint_id": planned}, "R11")
    issue = todo_issue(ep, project, "AND sprint_id IS NULL")["issue_key"]
    violation(ep, "add_issue_to_sprint", {"user_id": me, "issue_key": issue, "sprint_id": closed}, "R11")
    unfinished = [r["issue_key"] for r in ep.query("SELECT issue_key FROM issues WHERE sprint_id = ? AND status NOT IN "
                                                   "('done', 'closed') ORDER BY number", (active["sprint_id"],))]  # fmt: skip
    out = ok(ep, "close_sprint", {"user_id": me, "sprint_id": active["sprint_id"], "move_unfinished_to": "backlog"})
    assert out["moved_unfinished"] == unfinished and out["moved_to"] == "backlog"
    assert ok(ep, "start_sprint", {"user_id": me, "sprint_id": planned})["state"] == "active"


def test_R12_acting_as_someone_else_is_refused_after_identification(ep):
    mine = one(ep, "SELECT t.time_log_id, t.user_id, u.email FROM time_logs t JOIN users u ON u.user_id = t.user_id "
                   "WHERE u.active = 1 ORDER BY t.time_log_id")  # fmt: skip
    theirs = one(ep, "SELECT time_log_id, user_id FROM time_logs WHERE user_id != ? ORDER BY time_log_id", (mine["user_id"],))
    ok(ep, "find_user_by_email", {"email": mine["email"]})
    assert ep.customer == mine["user_id"]
    violation(ep, "delete_time_log", {"user_id": theirs["user_id"], "time_log_id": theirs["time_log_id"]}, "R12")
    violation(ep, "delete_time_log", {"user_id": mine["user_id"], "time_log_id": theirs["time_log_id"]}, "R12")
    assert ok(ep, "delete_time_log", {"user_id": mine["user_id"], "time_log_id": mine["time_log_id"]})["deleted"] == \
        mine["time_log_id"]  # fmt: skip


def test_R13_escalation_needs_a_summary(ep):
    me = one(ep, "SELECT user_id FROM users WHERE active = 1 ORDER BY user_id")["user_id"]
    violation(ep, "escalate_to_admin", {"user_id": me, "summary": "   "}, "R13")
    out = ok(ep, "escalate_to_admin", {"user_id": me, "summary": "Please reactivate an account."})
    assert out["status"] == "open"
    assert ep.query("SELECT COUNT(*) AS n FROM admin_requests")[0]["n"] == 1


def test_every_policy_rule_is_tested():
    assert_every_rule_tested("projects", globals(), minimum=8)


def test_read_tools_never_write(ep, pworld):
    issue = one(ep, "SELECT issue_key, project_key, sprint_id FROM issues WHERE sprint_id IS NOT NULL ORDER BY issue_key")
    user = one(ep, "SELECT user_id, email FROM users ORDER BY user_id")
    before = ep.state_hash()
    calls = {"find_user_by_email": {"email": user["email"]}, "get_user": {"user_id": user["user_id"]},
             "find_teammate": {"name": "a"}, "list_projects": {}, "get_project": {"project_key": issue["project_key"]},
             "search_issues": {"project_key": issue["project_key"], "status": "todo"},
             "get_issue": {"issue_key": issue["issue_key"]}, "list_sprints": {"project_key": issue["project_key"]},
             "get_sprint": {"sprint_id": issue["sprint_id"]}, "get_workflow": {"issue_type": "bug"},
             "list_time_logs": {"issue_key": issue["issue_key"]},
             "get_daily_time": {"user_id": user["user_id"], "day": TODAY}, "calculate": {"expression": "1+2"}}  # fmt: skip
    reads = {t.name for t in pworld.tools.values() if not t.mutates}
    assert reads == set(calls)
    for name, args in calls.items():
        ok(ep, name, args)
    assert ep.state_hash() == before
