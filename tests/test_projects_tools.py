"""What the projects tools return and change beyond the rules: the views an agent reads, and the side effects a
write has (numbering, watchers, sprint moves), picked from the seeded state."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from toolworld import Episode
from toolworld.world import get_world
from toolworld.worlds.projects.common import TODAY, WORKFLOWS, allowed
from world_kit import ok, one


@pytest.fixture
def ep() -> Iterator[Episode]:
    with get_world("projects").episode(0) as e:
        yield e


def lead(ep: Episode, project: str) -> str:
    return one(ep, "SELECT lead_id FROM projects WHERE project_key = ?", (project,))["lead_id"]


def test_find_user_by_email_ignores_case_and_explains_a_miss(ep):
    u = one(ep, "SELECT user_id, email FROM users ORDER BY user_id")
    assert ok(ep, "find_user_by_email", {"email": u["email"].upper()})["user_id"] == u["user_id"]
    r = ep.call("find_user_by_email", {"email": "nobody@example.org"})
    assert r.error.type == "not_found" and "check" in r.error.message


def test_get_issue_shows_the_workflow_and_an_unknown_key_is_not_found(ep):
    issue = one(ep, "SELECT issue_key, issue_type, status FROM issues WHERE status = 'todo' ORDER BY issue_key")
    view = ok(ep, "get_issue", {"issue_key": issue["issue_key"]})
    assert view["allowed_transitions"] == allowed(issue["issue_type"], issue["status"])
    assert ep.call("get_issue", {"issue_key": "NOPE-1"}).error.type == "not_found"
    flow = ok(ep, "get_workflow", {"issue_type": "task"})
    assert {(t["from_status"], t["to_status"]) for t in flow["transitions"]} == set(WORKFLOWS["task"])


def test_get_project_counts_work_in_progress_against_its_limits(ep):
    view = ok(ep, "get_project", {"project_key": "APP"})
    in_progress = one(ep, "SELECT COUNT(*) AS n FROM issues WHERE project_key = 'APP' AND status = 'in_progress' "
                          "AND issue_type != 'epic'")["n"]  # fmt: skip
    assert view["wip_counts"]["in_progress"] == in_progress
    assert view["wip_limits"]["in_progress"] >= in_progress
    # People who left stay listed, marked inactive, so the agent can explain why they cannot take work.
    members = [m for p in ("APP", "API", "MOB", "DATA", "OPS") for m in ok(ep, "get_project", {"project_key": p})["members"]]
    assert any(not m["active"] for m in members) and any(m["active"] for m in members)


def test_search_issues_filters_and_counts(ep):
    out = ok(ep, "search_issues", {"project_key": "API", "status": "backlog", "unassigned": True, "limit": 50})
    assert out["issues"] and all(i["assignee"] is None and i["status"] == "backlog" for i in out["issues"])
    total = one(ep, "SELECT COUNT(*) AS n FROM issues WHERE project_key = 'API' AND status = 'backlog' "
                    "AND assignee_id IS NULL")["n"]  # fmt: skip
    assert out["total"] == total
    summary = one(ep, "SELECT summary FROM issues WHERE project_key = 'API' ORDER BY number")["summary"]
    found = ok(ep, "search_issues", {"project_key": "API", "text": summary.upper()})
    assert all(summary.lower() in i["summary"].lower() for i in found["issues"]) and found["total"] >= 1


def test_create_issue_numbers_it_next_and_makes_the_reporter_watch_it(ep):
    me = lead(ep, "DATA")
    top = one(ep, "SELECT MAX(number) AS n FROM issues WHERE project_key = 'DATA'")["n"]
    out = ok(ep, "create_issue", {"user_id": me, "project_key": "DATA", "issue_type": "bug", "summary": " Slow export "})
    assert out["issue_key"] == f"DATA-{top + 1}" and out["status"] == "backlog" and out["summary"] == "Slow export"
    assert out["reporter"]["user_id"] == me
    assert ep.query("SELECT 1 FROM watchers WHERE issue_key = ? AND user_id = ?", (out["issue_key"], me))


def test_log_time_then_delete_it(ep):
    log = one(ep, "SELECT t.user_id, t.issue_key FROM time_logs t JOIN users u ON u.user_id = t.user_id "
                  "WHERE u.active = 1 ORDER BY t.time_log_id")  # fmt: skip
    before = ok(ep, "get_daily_time", {"user_id": log["user_id"], "day": TODAY})["total_minutes"]
    out = ok(ep, "log_time", {"user_id": log["user_id"], "issue_key": log["issue_key"], "minutes": 45, "day": TODAY})
    assert out["day_total_minutes"] == before + 45
    ok(ep, "delete_time_log", {"user_id": log["user_id"], "time_log_id": out["time_log_id"]})
    assert ok(ep, "get_daily_time", {"user_id": log["user_id"], "day": TODAY})["total_minutes"] == before
    assert ep.call("log_time", {"user_id": log["user_id"], "issue_key": log["issue_key"], "minutes": 30,
                                "day": "June 3"}).error.type == "invalid_arguments"  # fmt: skip


def test_close_sprint_sends_unfinished_work_to_the_backlog(ep):
    sprint = one(ep, "SELECT sprint_id, project_key FROM sprints WHERE state = 'active' ORDER BY sprint_id DESC")
    done = {r["issue_key"] for r in ep.query("SELECT issue_key FROM issues WHERE sprint_id = ? AND status IN "
                                             "('done', 'closed')", (sprint["sprint_id"],))}  # fmt: skip
    out = ok(ep, "close_sprint", {"user_id": lead(ep, sprint["project_key"]), "sprint_id": sprint["sprint_id"]})
    assert out["state"] == "closed" and out["moved_to"] == "backlog" and out["unfinished"] == 0
    assert {i["issue_key"] for i in out["issues"]} == done
    for key in out["moved_unfinished"]:
        assert ok(ep, "get_issue", {"issue_key": key})["sprint"] is None


def test_link_duplicate_moves_watchers_to_the_original(ep):
    pair = one(ep, "SELECT d.issue_key AS dup, o.issue_key AS original, d.project_key FROM issues d JOIN issues o "
                   "ON o.project_key = d.project_key AND o.summary = d.summary AND o.number < d.number "
                   "WHERE d.status = 'backlog' AND o.status != 'closed' ORDER BY d.issue_key")  # fmt: skip
    watchers = {r["user_id"] for r in ep.query("SELECT user_id FROM watchers WHERE issue_key = ?", (pair["dup"],))}
    ok(ep, "link_duplicate", {"user_id": lead(ep, pair["project_key"]), "issue_key": pair["dup"],
                              "original_key": pair["original"]})  # fmt: skip
    after = {r["user_id"] for r in ep.query("SELECT user_id FROM watchers WHERE issue_key = ?", (pair["original"],))}
    assert watchers <= after
    again = ep.call("link_duplicate", {"user_id": lead(ep, pair["project_key"]), "issue_key": pair["dup"],
                                       "original_key": pair["original"]})  # fmt: skip
    assert again.error.type == "conflict"


def test_update_issue_refuses_a_blank_summary_instead_of_ignoring_it(ep):
    me = lead(ep, "DATA")
    issue = one(ep, "SELECT issue_key, priority, summary FROM issues WHERE project_key = 'DATA' AND sprint_id IS NULL "
                    "ORDER BY number")  # fmt: skip
    other = "low" if issue["priority"] != "low" else "high"
    before = ep.state_hash()
    r = ep.call("update_issue", {"user_id": me, "issue_key": issue["issue_key"], "priority": other, "summary": "  "})
    assert not r.ok and r.error.type == "invalid_arguments" and "leave it out" in r.error.message
    assert ep.state_hash() == before
    out = ok(ep, "update_issue", {"user_id": me, "issue_key": issue["issue_key"], "summary": " Export is slow "})
    assert out["summary"] == "Export is slow"
