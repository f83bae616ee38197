"""The projects world's tools. Each write tool enforces the numbered rules of ``policy.md`` and cites them.

Every write takes ``user_id``: the person writing in, on whose behalf the change is made. Rules about who may
do what (close an issue, change an active sprint) are checked against that person, and the episode refuses a
``user_id`` other than the identified one (policy R12), so an agent cannot act as someone else.
Error messages are written for the agent: which rule blocked the call and what to do instead.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import Field

from toolworld.world import Ctx, Entity, ToolError, tool
from toolworld.worlds.shared.arith import calculate

from .common import FINISHED, MAX_MINUTES_PER_DAY, TODAY, WIP_STATUSES, allowed, is_reopen

UserId = Annotated[str, Entity("user"), Field(description="Your user id: the person writing in, from "
                                                          "find_user_by_email, e.g. 'u_4821'.")]  # fmt: skip
TeammateId = Annotated[str, Entity("teammate"), Field(description="A teammate's user id, e.g. 'u_1234' (from "
                                                                  "get_project's members or find_teammate).")]  # fmt: skip
ProjectKey = Annotated[str, Entity("project"), Field(description="The project key, e.g. 'APP'.")]
IssueKey = Annotated[str, Entity("issue"), Field(description="The issue key, e.g. 'APP-123'.")]
SprintId = Annotated[int, Entity("sprint"), Field(description="The sprint id (from list_sprints), e.g. 104.")]
TimeLogId = Annotated[int, Entity("time_log"), Field(description="The time log id (from list_time_logs).")]
IssueType = Literal["bug", "story", "task", "epic"]
Status = Literal["backlog", "todo", "in_progress", "in_review", "done", "closed"]
Priority = Literal["lowest", "low", "medium", "high", "highest"]
Resolution = Literal["fixed", "done", "wont_do", "cannot_reproduce"]
Day = Annotated[str, Field(description="A day as YYYY-MM-DD, e.g. '2026-06-11'.")]

_DAY_RE = re.compile(r"^\d{4}-\d{2}-\d{2}$")

# -- shared views and checks ---------------------------------------------------------------------------------


def _person(ctx: Ctx, user_id: str | None) -> dict[str, Any] | None:
    if user_id is None:
        return None
    u = ctx.one("SELECT user_id, full_name, active FROM users WHERE user_id = ?", (user_id,))
    assert u is not None
    return {"user_id": u["user_id"], "full_name": u["full_name"], "active": bool(u["active"])}


def _issue_row(ctx: Ctx, issue_key: str) -> dict[str, Any]:
    row = ctx.one("SELECT * FROM issues WHERE issue_key = ?", (issue_key,))
    assert row is not None  # existence is checked by Episode.call before the tool runs
    return row


def _issue_view(ctx: Ctx, issue_key: str) -> dict[str, Any]:
    """The issue as an agent sees it (also returned by every issue-changing tool)."""
    i = _issue_row(ctx, issue_key)
    sprint = ctx.one("SELECT sprint_id, name, state FROM sprints WHERE sprint_id = ?", (i["sprint_id"],)) \
        if i["sprint_id"] is not None else None  # fmt: skip
    out: dict[str, Any] = {
        "issue_key": i["issue_key"], "project_key": i["project_key"], "issue_type": i["issue_type"],
        "summary": i["summary"], "status": i["status"], "priority": i["priority"],
        "reporter": _person(ctx, i["reporter_id"]), "assignee": _person(ctx, i["assignee_id"]),
        "story_points": i["story_points"], "sprint": sprint, "epic_key": i["epic_key"],
        "component": ctx.value("SELECT name FROM components WHERE component_id = ?", (i["component_id"],)),
        "resolution": i["resolution"], "duplicate_of": i["duplicate_of"], "due_date": i["due_date"],
        "created_at": i["created_at"], "updated_at": i["updated_at"],
        "labels": [r["label"] for r in ctx.all("SELECT label FROM labels WHERE issue_key = ? ORDER BY label", (issue_key,))],
        "allowed_transitions": allowed(i["issue_type"], i["status"]),
        "time_logged_minutes": ctx.value("SELECT COALESCE(SUM(minutes), 0) FROM time_logs WHERE issue_key = ?",
                                         (issue_key,)),
    }
    if i["issue_type"] == "epic":
        out["children"] = [r["issue_key"] for r in ctx.all(
            "SELECT issue_key FROM issues WHERE epic_key = ? ORDER BY number", (issue_key,))]  # fmt: skip
    comments = ctx.all("SELECT c.comment_id, u.full_name AS author, c.body, c.created_at FROM comments c "
                       "JOIN users u ON u.user_id = c.author_id WHERE c.issue_key = ? ORDER BY c.comment_id DESC "
                       "LIMIT 5", (issue_key,))  # fmt: skip
    out["recent_comments"] = list(reversed(comments))
    return out


def _touch(ctx: Ctx, issue_key: str) -> None:
    ctx.execute("UPDATE issues SET updated_at = ? WHERE issue_key = ?", (ctx.now, issue_key))


def _user(ctx: Ctx, user_id: str) -> dict[str, Any]:
    u = ctx.one("SELECT * FROM users WHERE user_id = ?", (user_id,))
    assert u is not None
    return u


def _is_member(ctx: Ctx, project_key: str, user_id: str) -> bool:
    return ctx.value("SELECT 1 FROM project_members WHERE project_key = ? AND user_id = ?",
                     (project_key, user_id)) is not None  # fmt: skip


def _lead_of(ctx: Ctx, project_key: str) -> str:
    return str(ctx.value("SELECT lead_id FROM projects WHERE project_key = ?", (project_key,)))


def _require_member(ctx: Ctx, project_key: str, user_id: str, action: str) -> dict[str, Any]:
    """The acting person, if they may change things in ``project_key`` (rule R10)."""
    u = _user(ctx, user_id)
    if u["role"] != "admin" and not _is_member(ctx, project_key, user_id):
        raise ToolError(
            "policy_violation",
            f"{u['full_name']} is not a member of project {project_key}, so they cannot {action} there (policy R10). "
            f"Ask the project lead ({_lead_name(ctx, project_key)}) to add them, or to make the change.",
        )
    return u


def _lead_name(ctx: Ctx, project_key: str) -> str:
    return str(ctx.value("SELECT full_name FROM users WHERE user_id = ?", (_lead_of(ctx, project_key),)))


def _require_lead(ctx: Ctx, project_key: str, user_id: str, action: str, rule: str) -> None:
    """Only the project's lead or an admin may ``action`` (rules R5 and R11)."""
    u = _user(ctx, user_id)
    if u["role"] != "admin" and _lead_of(ctx, project_key) != user_id:
        raise ToolError(
            "policy_violation",
            f"Only the lead of project {project_key} ({_lead_name(ctx, project_key)}) or an admin can {action} "
            f"(policy {rule}). Ask {_lead_name(ctx, project_key)} to do it.",
        )


def _check_assignee(ctx: Ctx, project_key: str, assignee_id: str) -> None:
    """An assignee must be an active member of the issue's project (rule R8)."""
    u = _user(ctx, assignee_id)
    if not u["active"]:
        raise ToolError(
            "policy_violation",
            f"{u['full_name']} is no longer active and cannot be assigned work (policy R8). Choose an active member "
            f"of {project_key} (see get_project).",
        )
    if not _is_member(ctx, project_key, assignee_id):
        raise ToolError(
            "policy_violation",
            f"{u['full_name']} is not a member of project {project_key} and cannot be assigned its issues "
            f"(policy R8). Choose a member of {project_key} (see get_project), or ask the lead to add them.",
        )


def _committed(ctx: Ctx, sprint_id: int, excluding: str | None = None) -> int:
    return int(ctx.value("SELECT COALESCE(SUM(story_points), 0) FROM issues WHERE sprint_id = ? AND issue_key != ?",
                         (sprint_id, excluding or "")))  # fmt: skip


def _sprint(ctx: Ctx, sprint_id: int) -> dict[str, Any]:
    s = ctx.one("SELECT * FROM sprints WHERE sprint_id = ?", (sprint_id,))
    assert s is not None
    return s


def _sprint_view(ctx: Ctx, sprint_id: int, *, with_issues: bool = True) -> dict[str, Any]:
    s = _sprint(ctx, sprint_id)
    committed = _committed(ctx, sprint_id)
    out: dict[str, Any] = {
        "sprint_id": s["sprint_id"], "project_key": s["project_key"], "name": s["name"], "state": s["state"],
        "start_date": s["start_date"], "end_date": s["end_date"], "goal": s["goal"],
        "capacity_points": s["capacity_points"], "committed_points": committed,
        "remaining_capacity": s["capacity_points"] - committed,
    }
    if with_issues:
        rows = ctx.all("SELECT i.issue_key, i.issue_type, i.summary, i.status, i.story_points, u.full_name AS assignee "
                       "FROM issues i LEFT JOIN users u ON u.user_id = i.assignee_id WHERE i.sprint_id = ? "
                       "ORDER BY i.number", (sprint_id,))  # fmt: skip
        out["issues"] = rows
        out["unfinished"] = sum(r["status"] not in FINISHED for r in rows)
    return out


def _check_day(day: str) -> str:
    day = day.strip()
    if not _DAY_RE.match(day):
        raise ToolError("invalid_arguments", f"day {day!r} is not a date as YYYY-MM-DD, e.g. '{TODAY}'.")
    return day


# -- read tools --------------------------------------------------------------------------------------------


@tool(yields={"user": "user_id"}, identifies=True)
def find_user_by_email(ctx: Ctx, email: Annotated[str, Entity("email")]) -> dict[str, Any]:
    """Find the person writing in by their work email; do this first, before any change.

    Args:
        email: Their work email, e.g. 'maya.patel@brightloop.example.com'.
    """
    u = ctx.one("SELECT user_id, full_name, role, active FROM users WHERE email = ?", (email.strip().lower(),))
    if u is None:
        raise ToolError("not_found", f"No one in the tracker has the email {email!r}. Ask the person to check it.")
    return {"user_id": u["user_id"], "full_name": u["full_name"], "role": u["role"], "active": bool(u["active"])}


@tool(yields={"project": "projects[].project_key"})
def get_user(ctx: Ctx, user_id: UserId) -> dict[str, Any]:
    """Get a person's profile: role, whether they are active, and the projects they belong to (and lead)."""
    u = _user(ctx, user_id)
    projects = ctx.all("SELECT p.project_key, p.name, p.lead_id = ? AS is_lead FROM project_members m "
                       "JOIN projects p ON p.project_key = m.project_key WHERE m.user_id = ? ORDER BY p.project_key",
                       (user_id, user_id))  # fmt: skip
    open_count = ctx.value("SELECT COUNT(*) FROM issues WHERE assignee_id = ? AND status NOT IN ('done', 'closed')",
                           (user_id,))  # fmt: skip
    return {"user_id": u["user_id"], "full_name": u["full_name"], "email": u["email"], "role": u["role"],
            "title": u["title"], "active": bool(u["active"]),
            "projects": [{**p, "is_lead": bool(p["is_lead"])} for p in projects],
            "open_assigned_issues": open_count}  # fmt: skip


@tool(yields={"teammate": "matches[].user_id"})
def find_teammate(ctx: Ctx, name: Annotated[str, Field(description="Full or partial name, e.g. 'Priya Shah'.")]) -> dict[str, Any]:
    """Find teammates by name (case-insensitive, partial match) to get their user id, e.g. to assign an issue."""
    if not name.strip():
        raise ToolError("invalid_arguments", "name is empty; give at least part of the teammate's name.")
    rows = ctx.all("SELECT user_id, full_name, email, title, active FROM users WHERE full_name LIKE ? "
                   "ORDER BY full_name LIMIT 10", (f"%{name.strip()}%",))  # fmt: skip
    return {"matches": [{**r, "active": bool(r["active"])} for r in rows]}


@tool(yields={"project": "projects[].project_key"})
def list_projects(ctx: Ctx) -> dict[str, Any]:
    """List every project with its key, name and lead."""
    rows = ctx.all("SELECT p.project_key, p.name, u.full_name AS lead FROM projects p JOIN users u "
                   "ON u.user_id = p.lead_id ORDER BY p.project_key")  # fmt: skip
    return {"projects": rows}


@tool(yields={"teammate": "members[].user_id", "sprint": "active_sprint.sprint_id"})
def get_project(ctx: Ctx, project_key: ProjectKey) -> dict[str, Any]:
    """Get a project: its lead, members (with whether each is active), components, the active sprint and the
    work-in-progress limits with the current counts."""
    p = ctx.one("SELECT * FROM projects WHERE project_key = ?", (project_key,))
    assert p is not None
    members = ctx.all("SELECT u.user_id, u.full_name, u.role, u.title, u.active FROM project_members m "
                      "JOIN users u ON u.user_id = m.user_id WHERE m.project_key = ? ORDER BY u.full_name",
                      (project_key,))  # fmt: skip
    counts = {s: ctx.value("SELECT COUNT(*) FROM issues WHERE project_key = ? AND status = ? AND issue_type != 'epic'",
                           (project_key, s)) for s in WIP_STATUSES}  # fmt: skip
    active = ctx.one("SELECT sprint_id, name, end_date FROM sprints WHERE project_key = ? AND state = 'active'",
                     (project_key,))  # fmt: skip
    return {
        "project_key": p["project_key"], "name": p["name"], "description": p["description"],
        "lead": _person(ctx, p["lead_id"]),
        "wip_limits": {"in_progress": p["wip_in_progress"], "in_review": p["wip_in_review"]},
        "wip_counts": counts,
        "components": [r["name"] for r in ctx.all("SELECT name FROM components WHERE project_key = ? ORDER BY name",
                                                  (project_key,))],
        "active_sprint": active,
        "members": [{**m, "active": bool(m["active"])} for m in members],
    }


@tool(yields={"issue": "issues[].issue_key"})
def search_issues(
    ctx: Ctx,
    project_key: ProjectKey,
    status: Status | None = None,
    issue_type: IssueType | None = None,
    assignee_id: Annotated[str | None, Entity("teammate"), Field(description="Only issues assigned to this user id.")] = None,
    unassigned: Annotated[bool, Field(description="Only issues with no assignee.")] = False,
    text: Annotated[str | None, Field(description="Words that must appear in the summary (case-insensitive).")] = None,
    limit: Annotated[int, Field(ge=1, le=50, description="Most issues to return (newest first).")] = 20,
) -> dict[str, Any]:
    """Search a project's issues by status, type, assignee and summary text; newest first."""
    where, params = ["project_key = ?"], [project_key]
    if status:
        where.append("status = ?")
        params.append(status)
    if issue_type:
        where.append("issue_type = ?")
        params.append(issue_type)
    if assignee_id:
        where.append("assignee_id = ?")
        params.append(assignee_id)
    if unassigned:
        where.append("assignee_id IS NULL")
    if text and text.strip():
        where.append("LOWER(summary) LIKE ?")
        params.append(f"%{text.strip().lower()}%")
    clause = " AND ".join(where)
    total = ctx.value(f"SELECT COUNT(*) FROM issues WHERE {clause}", params)
    rows = ctx.all(f"SELECT i.issue_key, i.issue_type, i.summary, i.status, i.priority, u.full_name AS assignee, "
                   f"i.story_points, i.sprint_id, i.updated_at FROM issues i LEFT JOIN users u ON u.user_id = i.assignee_id "
                   f"WHERE {clause.replace('project_key', 'i.project_key')} ORDER BY i.number DESC LIMIT ?",
                   [*params, limit])  # fmt: skip
    return {"total": total, "issues": rows}


@tool(yields={"sprint": "sprint.sprint_id", "project": "project_key"})
def get_issue(ctx: Ctx, issue_key: IssueKey) -> dict[str, Any]:
    """Get an issue: status, allowed next statuses, assignee, reporter, points, sprint, resolution, duplicate link,
    time logged and recent comments. Look at an issue before changing it."""
    return _issue_view(ctx, issue_key)


@tool(yields={"sprint": "sprints[].sprint_id"})
def list_sprints(ctx: Ctx, project_key: ProjectKey) -> dict[str, Any]:
    """List a project's sprints (planned, active, closed) with dates, capacity and committed points."""
    ids = [r["sprint_id"] for r in ctx.all("SELECT sprint_id FROM sprints WHERE project_key = ? ORDER BY start_date",
                                           (project_key,))]  # fmt: skip
    return {"project_key": project_key, "sprints": [_sprint_view(ctx, s, with_issues=False) for s in ids]}


@tool(yields={"issue": "issues[].issue_key"})
def get_sprint(ctx: Ctx, sprint_id: SprintId) -> dict[str, Any]:
    """Get a sprint with its issues, committed points and remaining capacity."""
    return _sprint_view(ctx, sprint_id)


@tool
def get_workflow(ctx: Ctx, issue_type: IssueType) -> dict[str, Any]:
    """Show which status changes an issue type allows and what each target status requires."""
    rows = ctx.all("SELECT from_status, to_status FROM workflows WHERE issue_type = ? ORDER BY from_status, to_status",
                   (issue_type,))  # fmt: skip
    reqs = ctx.all("SELECT to_status, requirement, description FROM transition_requirements ORDER BY to_status")
    return {"issue_type": issue_type, "transitions": rows, "requirements": reqs}


@tool(yields={"time_log": "logs[].time_log_id"})
def list_time_logs(ctx: Ctx, issue_key: IssueKey) -> dict[str, Any]:
    """List the time logged on an issue: who, which day, how many minutes."""
    logs = ctx.all("SELECT t.time_log_id, t.user_id, u.full_name, t.day, t.minutes, t.note FROM time_logs t "
                   "JOIN users u ON u.user_id = t.user_id WHERE t.issue_key = ? ORDER BY t.day, t.time_log_id",
                   (issue_key,))  # fmt: skip
    return {"issue_key": issue_key, "total_minutes": sum(r["minutes"] for r in logs), "logs": logs}


@tool
def get_daily_time(ctx: Ctx, user_id: UserId, day: Day) -> dict[str, Any]:
    """How much time a person has logged on one day, all issues together (at most 24 hours are allowed)."""
    day = _check_day(day)
    logs = ctx.all("SELECT time_log_id, issue_key, minutes, note FROM time_logs WHERE user_id = ? AND day = ? "
                   "ORDER BY time_log_id", (user_id, day))  # fmt: skip
    total = sum(r["minutes"] for r in logs)
    return {"user_id": user_id, "day": day, "total_minutes": total, "remaining_minutes": MAX_MINUTES_PER_DAY - total,
            "logs": logs}  # fmt: skip


# -- write tools -------------------------------------------------------------------------------------------


@tool(mutates=True, yields={"issue": "issue_key"})
def create_issue(
    ctx: Ctx,
    user_id: UserId,
    project_key: ProjectKey,
    issue_type: IssueType,
    summary: Annotated[str, Field(description="One line on what is wrong or wanted.")],
    priority: Priority = "medium",
    story_points: Annotated[int | None, Field(ge=0, le=100, description="Estimate (optional).")] = None,
    assignee_id: Annotated[str | None, Entity("teammate"), Field(description="Who works on it (optional).")] = None,
) -> dict[str, Any]:
    """Create an issue in a project's backlog, reported by the person writing in."""
    _require_member(ctx, project_key, user_id, "create issues")
    if not summary.strip():
        raise ToolError("invalid_arguments", "summary is empty; ask the person for a one-line summary.")
    if assignee_id is not None:
        _check_assignee(ctx, project_key, assignee_id)
    number = int(ctx.value("SELECT COALESCE(MAX(number), 0) + 1 FROM issues WHERE project_key = ?", (project_key,)))
    key = f"{project_key}-{number}"
    ctx.execute(
        "INSERT INTO issues (issue_key, project_key, number, issue_type, summary, status, priority, reporter_id, "
        "assignee_id, story_points, created_at, updated_at) VALUES (?, ?, ?, ?, ?, 'backlog', ?, ?, ?, ?, ?, ?)",
        (key, project_key, number, issue_type, summary.strip(), priority, user_id, assignee_id, story_points,
         ctx.now, ctx.now),
    )  # fmt: skip
    ctx.execute("INSERT INTO watchers VALUES (?, ?)", (key, user_id))
    return _issue_view(ctx, key)


@tool(mutates=True)
def update_issue(
    ctx: Ctx,
    user_id: UserId,
    issue_key: IssueKey,
    priority: Priority | None = None,
    story_points: Annotated[int | None, Field(ge=0, le=100, description="New estimate.")] = None,
    due_date: Annotated[str | None, Field(description="New due date, YYYY-MM-DD.")] = None,
    summary: Annotated[str | None, Field(description="New one-line summary.")] = None,
) -> dict[str, Any]:
    """Change an issue's priority, estimate (story points), due date or summary; give only what changes."""
    issue = _issue_row(ctx, issue_key)
    _require_member(ctx, issue["project_key"], user_id, "edit issues")
    changes: dict[str, Any] = {}
    if priority is not None and priority != issue["priority"]:
        changes["priority"] = priority
    if story_points is not None and story_points != issue["story_points"]:
        if issue["sprint_id"] is not None:
            s = _sprint(ctx, issue["sprint_id"])
            if s["state"] != "closed" and _committed(ctx, s["sprint_id"], issue_key) + story_points > s["capacity_points"]:
                raise ToolError(
                    "policy_violation",
                    f"{issue_key} is in {s['name']}, which has {s['capacity_points']} points of capacity and "
                    f"{_committed(ctx, s['sprint_id'], issue_key)} committed by its other issues; {story_points} points "
                    "would exceed it (policy R6). Remove something from the sprint first, or keep the estimate.",
                )
        changes["story_points"] = story_points
    if due_date is not None and due_date != issue["due_date"]:
        changes["due_date"] = _check_day(due_date)
    if summary is not None and not summary.strip():
        # Blank would otherwise read as "no change" and the call would report success for nothing asked.
        raise ToolError("invalid_arguments", "summary is blank; leave it out to keep the current summary, or send "
                        "the new one-line summary.")  # fmt: skip
    if summary is not None and summary.strip() != issue["summary"]:
        changes["summary"] = summary.strip()
    if not changes:
        raise ToolError("conflict", f"Nothing to change on {issue_key}: give at least one field with a new value.")
    sets = ", ".join(f"{k} = ?" for k in changes)
    ctx.execute(f"UPDATE issues SET {sets} WHERE issue_key = ?", [*changes.values(), issue_key])
    _touch(ctx, issue_key)
    return _issue_view(ctx, issue_key)


@tool(mutates=True)
def assign_issue(
    ctx: Ctx,
    user_id: UserId,
    issue_key: IssueKey,
    assignee_id: Annotated[str | None, Entity("teammate"),
                           Field(description="The new assignee's user id; null to unassign.")],
) -> dict[str, Any]:
    """Assign an issue to an active member of its project, or unassign it (assignee_id null)."""
    issue = _issue_row(ctx, issue_key)
    _require_member(ctx, issue["project_key"], user_id, "assign issues")
    if assignee_id == issue["assignee_id"]:
        raise ToolError("conflict", f"{issue_key} is already {'unassigned' if assignee_id is None else 'assigned to them'}.")
    if assignee_id is None:
        if issue["status"] == "in_progress":
            raise ToolError(
                "policy_violation",
                f"{issue_key} is in progress and must keep an assignee (policy R3). Assign someone else instead, or "
                "move it back to todo first.",
            )
    else:
        _check_assignee(ctx, issue["project_key"], assignee_id)
    ctx.execute("UPDATE issues SET assignee_id = ? WHERE issue_key = ?", (assignee_id, issue_key))
    if assignee_id is not None:
        ctx.execute("INSERT OR IGNORE INTO watchers VALUES (?, ?)", (issue_key, assignee_id))
    _touch(ctx, issue_key)
    return _issue_view(ctx, issue_key)


@tool(mutates=True)
def transition_issue(
    ctx: Ctx,
    user_id: UserId,
    issue_key: IssueKey,
    to_status: Status,
    resolution: Annotated[Resolution | None, Field(description="Needed to enter done or closed (unless already set).")] = None,
) -> dict[str, Any]:
    """Move an issue to another status along its type's workflow (see get_issue's allowed_transitions)."""
    issue = _issue_row(ctx, issue_key)
    project = issue["project_key"]
    actor = _require_member(ctx, project, user_id, "change issue statuses")
    old = issue["status"]
    if to_status == old:
        raise ToolError("conflict", f"{issue_key} is already '{old}'.")
    options = allowed(issue["issue_type"], old)
    if to_status not in options:
        raise ToolError(
            "policy_violation",
            f"{'An' if issue['issue_type'] == 'epic' else 'A'} {issue['issue_type']} cannot go from '{old}' to '{to_status}' (policy R1); from '{old}' it can go to "
            f"{', '.join(repr(s) for s in options) or 'nothing'}. Move it step by step.",
        )
    closing = to_status == "closed" or is_reopen(old, to_status)
    if closing and actor["role"] != "admin" and user_id not in (issue["reporter_id"], _lead_of(ctx, project)):
        verb = "close" if to_status == "closed" else "reopen"
        raise ToolError(
            "policy_violation",
            f"Only the reporter of {issue_key}, the lead of {project} ({_lead_name(ctx, project)}) or an admin can "
            f"{verb} it (policy R4). Ask one of them to do it.",
        )
    if to_status == "in_progress" and issue["assignee_id"] is None:
        raise ToolError(
            "policy_violation",
            f"{issue_key} has no assignee; an issue needs one to be in progress (policy R3). Assign it first "
            "(assign_issue).",
        )
    if to_status in FINISHED and resolution is None and issue["resolution"] is None:
        raise ToolError(
            "policy_violation",
            f"Moving {issue_key} to '{to_status}' needs a resolution (policy R3): ask whether it was fixed, done, "
            "won't do or cannot be reproduced.",
        )
    if to_status in WIP_STATUSES and issue["issue_type"] != "epic":
        limit = ctx.value(f"SELECT wip_{to_status} FROM projects WHERE project_key = ?", (project,))
        count = ctx.value("SELECT COUNT(*) FROM issues WHERE project_key = ? AND status = ? AND issue_type != 'epic'",
                          (project, to_status))  # fmt: skip
        if count >= limit:
            raise ToolError(
                "policy_violation",
                f"Project {project} already has {count} issues '{to_status}', its limit (policy R2). Finish or move "
                f"one of them before starting another.",
            )
    new_resolution = None if to_status not in FINISHED else (resolution or issue["resolution"])
    ctx.execute("UPDATE issues SET status = ?, resolution = ? WHERE issue_key = ?", (to_status, new_resolution, issue_key))
    _touch(ctx, issue_key)
    return _issue_view(ctx, issue_key)


@tool(mutates=True)
def add_comment(
    ctx: Ctx,
    user_id: UserId,
    issue_key: IssueKey,
    body: Annotated[str, Field(description="The comment text, in the person's words.")],
) -> dict[str, Any]:
    """Add a comment to an issue as the person writing in."""
    issue = _issue_row(ctx, issue_key)
    _require_member(ctx, issue["project_key"], user_id, "comment on issues")
    if not body.strip():
        raise ToolError("invalid_arguments", "The comment is empty; ask the person what to write.")
    cur = ctx.execute("INSERT INTO comments (issue_key, author_id, body, created_at) VALUES (?, ?, ?, ?)",
                      (issue_key, user_id, body.strip(), ctx.now))  # fmt: skip
    _touch(ctx, issue_key)
    return {"comment_id": cur.lastrowid, "issue_key": issue_key, "body": body.strip()}


@tool(mutates=True)
def log_time(
    ctx: Ctx,
    user_id: UserId,
    issue_key: IssueKey,
    minutes: Annotated[int, Field(ge=1, le=1440, description="Minutes worked, e.g. 90 for an hour and a half.")],
    day: Day,
    note: Annotated[str, Field(description="What the time was spent on (optional).")] = "",
) -> dict[str, Any]:
    """Log time the person writing in worked on an issue on a given day."""
    issue = _issue_row(ctx, issue_key)
    u = _user(ctx, user_id)
    if not _is_member(ctx, issue["project_key"], user_id):
        raise ToolError(
            "policy_violation",
            f"{u['full_name']} is not a member of project {issue['project_key']}; only its members log time on its "
            f"issues (policy R7). Ask the project lead ({_lead_name(ctx, issue['project_key'])}) to add them, or log "
            "the time on an issue of one of their own projects.",
        )
    day = _check_day(day)
    if day > TODAY:
        raise ToolError("policy_violation", f"{day} is in the future (today is {TODAY}); time is logged only for days "
                                            "already worked (policy R7). Ask which past day the work was done.")  # fmt: skip
    have = int(ctx.value("SELECT COALESCE(SUM(minutes), 0) FROM time_logs WHERE user_id = ? AND day = ?", (user_id, day)))
    if have + minutes > MAX_MINUTES_PER_DAY:
        raise ToolError(
            "policy_violation",
            f"{u['full_name']} already has {have} minutes logged on {day}; {minutes} more would pass 24 hours "
            f"(1440 minutes) for the day (policy R7). At most {MAX_MINUTES_PER_DAY - have} more minutes fit.",
        )
    cur = ctx.execute("INSERT INTO time_logs (issue_key, user_id, day, minutes, note, created_at) VALUES (?, ?, ?, ?, ?, ?)",
                      (issue_key, user_id, day, minutes, note.strip(), ctx.now))  # fmt: skip
    return {"time_log_id": cur.lastrowid, "issue_key": issue_key, "day": day, "minutes": minutes,
            "day_total_minutes": have + minutes,
            "issue_total_minutes": ctx.value("SELECT SUM(minutes) FROM time_logs WHERE issue_key = ?", (issue_key,))}  # fmt: skip


@tool(mutates=True)
def delete_time_log(ctx: Ctx, user_id: UserId, time_log_id: TimeLogId) -> dict[str, Any]:
    """Delete a time log the person writing in made by mistake (people remove only their own logs)."""
    log = ctx.one("SELECT * FROM time_logs WHERE time_log_id = ?", (time_log_id,))
    assert log is not None
    if log["user_id"] != user_id:
        raise ToolError("policy_violation", f"Time log {time_log_id} was logged by someone else; people delete only "
                                            "their own time logs (policy R12). Ask its author to remove it.")  # fmt: skip
    ctx.execute("DELETE FROM time_logs WHERE time_log_id = ?", (time_log_id,))
    return {"deleted": time_log_id, "issue_key": log["issue_key"], "day": log["day"], "minutes": log["minutes"]}


def _scope_change(ctx: Ctx, sprint: dict[str, Any], user_id: str, action: str) -> None:
    if sprint["state"] == "active":
        _require_lead(ctx, sprint["project_key"], user_id, f"{action} the active sprint {sprint['name']}", "R5")


@tool(mutates=True)
def add_issue_to_sprint(ctx: Ctx, user_id: UserId, issue_key: IssueKey, sprint_id: SprintId) -> dict[str, Any]:
    """Put an issue into a planned or active sprint of its project (moving it out of any other sprint)."""
    issue = _issue_row(ctx, issue_key)
    sprint = _sprint(ctx, sprint_id)
    _require_member(ctx, issue["project_key"], user_id, "plan sprints")
    if sprint["project_key"] != issue["project_key"]:
        raise ToolError("invalid_arguments", f"{sprint['name']} belongs to project {sprint['project_key']}, not "
                                             f"{issue['project_key']}; use a sprint of the issue's project (list_sprints).")  # fmt: skip
    if issue["sprint_id"] == sprint_id:
        raise ToolError("conflict", f"{issue_key} is already in {sprint['name']}.")
    if sprint["state"] == "closed":
        raise ToolError("policy_violation", f"{sprint['name']} is closed; nothing can be added to a closed sprint "
                                            "(policy R11). Use a planned or the active sprint.")  # fmt: skip
    if issue["status"] in FINISHED or issue["issue_type"] == "epic":
        raise ToolError("invalid_arguments", f"{issue_key} is {'an epic' if issue['issue_type'] == 'epic' else 'finished'}; "
                                             "only open bugs, stories and tasks go into sprints.")  # fmt: skip
    if issue["issue_type"] == "story" and issue["story_points"] is None:
        raise ToolError("policy_violation", f"{issue_key} is a story with no estimate; stories need story points "
                                            "before they enter a sprint (policy R3). Ask for an estimate and set it "
                                            "with update_issue first.")  # fmt: skip
    _scope_change(ctx, sprint, user_id, "add issues to")
    if issue["sprint_id"] is not None:
        _scope_change(ctx, _sprint(ctx, issue["sprint_id"]), user_id, "remove issues from")
    points = issue["story_points"] or 0
    committed = _committed(ctx, sprint_id)
    if committed + points > sprint["capacity_points"]:
        raise ToolError(
            "policy_violation",
            f"{sprint['name']} has {sprint['capacity_points']} points of capacity and {committed} committed; "
            f"{issue_key} ({points} points) does not fit (policy R6). Remove something first, or plan it for a later "
            "sprint.",
        )
    ctx.execute("UPDATE issues SET sprint_id = ?, status = CASE WHEN status = 'backlog' THEN 'todo' ELSE status END "
                "WHERE issue_key = ?", (sprint_id, issue_key))  # fmt: skip
    _touch(ctx, issue_key)
    return {"issue": _issue_view(ctx, issue_key), "sprint": _sprint_view(ctx, sprint_id, with_issues=False)}


@tool(mutates=True)
def remove_issue_from_sprint(ctx: Ctx, user_id: UserId, issue_key: IssueKey) -> dict[str, Any]:
    """Take an issue out of its sprint, back to the backlog (its status stays)."""
    issue = _issue_row(ctx, issue_key)
    _require_member(ctx, issue["project_key"], user_id, "plan sprints")
    if issue["sprint_id"] is None:
        raise ToolError("conflict", f"{issue_key} is not in a sprint.")
    sprint = _sprint(ctx, issue["sprint_id"])
    if sprint["state"] == "closed":
        raise ToolError("policy_violation", f"{sprint['name']} is closed; its record stays as it ended (policy R11). "
                                            "Add the issue to a planned sprint instead to move it on.")  # fmt: skip
    _scope_change(ctx, sprint, user_id, "remove issues from")
    ctx.execute("UPDATE issues SET sprint_id = NULL WHERE issue_key = ?", (issue_key,))
    _touch(ctx, issue_key)
    return {"issue": _issue_view(ctx, issue_key), "sprint": _sprint_view(ctx, sprint["sprint_id"], with_issues=False)}


@tool(mutates=True)
def start_sprint(ctx: Ctx, user_id: UserId, sprint_id: SprintId) -> dict[str, Any]:
    """Start a planned sprint (the project lead or an admin; one active sprint per project)."""
    sprint = _sprint(ctx, sprint_id)
    _require_lead(ctx, sprint["project_key"], user_id, "start sprints", "R11")
    if sprint["state"] != "planned":
        raise ToolError("policy_violation", f"{sprint['name']} is {sprint['state']}; only a planned sprint can be "
                                            "started (policy R11). Pick a planned sprint (list_sprints).")  # fmt: skip
    active = ctx.one("SELECT name FROM sprints WHERE project_key = ? AND state = 'active'", (sprint["project_key"],))
    if active is not None:
        raise ToolError("policy_violation", f"{active['name']} is still active; a project has one active sprint at a "
                                            "time (policy R11). Close it first (close_sprint).")  # fmt: skip
    ctx.execute("UPDATE sprints SET state = 'active' WHERE sprint_id = ?", (sprint_id,))
    return _sprint_view(ctx, sprint_id)


@tool(mutates=True)
def close_sprint(
    ctx: Ctx,
    user_id: UserId,
    sprint_id: SprintId,
    move_unfinished_to: Annotated[Literal["backlog", "next_sprint"], Field(
        description="Where unfinished issues go: the backlog, or the project's next planned sprint.")] = "backlog",
) -> dict[str, Any]:
    """Close the active sprint (the project lead or an admin); unfinished issues move to the backlog or the next
    planned sprint."""
    sprint = _sprint(ctx, sprint_id)
    _require_lead(ctx, sprint["project_key"], user_id, "close sprints", "R11")
    if sprint["state"] != "active":
        raise ToolError("policy_violation", f"{sprint['name']} is {sprint['state']}; only the active sprint can be "
                                            "closed (policy R11). get_project shows the active sprint, if any.")  # fmt: skip
    unfinished = [r["issue_key"] for r in ctx.all(
        "SELECT issue_key FROM issues WHERE sprint_id = ? AND status NOT IN ('done', 'closed') ORDER BY number",
        (sprint_id,))]  # fmt: skip
    target = None
    if move_unfinished_to == "next_sprint":
        nxt = ctx.one("SELECT sprint_id, name FROM sprints WHERE project_key = ? AND state = 'planned' "
                      "ORDER BY start_date LIMIT 1", (sprint["project_key"],))  # fmt: skip
        if nxt is None:
            raise ToolError("conflict", f"Project {sprint['project_key']} has no planned sprint; move unfinished issues "
                                        "to the backlog instead.")  # fmt: skip
        target = nxt["sprint_id"]
        moving = int(ctx.value("SELECT COALESCE(SUM(story_points), 0) FROM issues WHERE sprint_id = ? AND status NOT IN "
                               "('done', 'closed')", (sprint_id,)))  # fmt: skip
        planned = _sprint(ctx, target)
        committed = _committed(ctx, target)
        if committed + moving > planned["capacity_points"]:
            raise ToolError(
                "policy_violation",
                f"{planned['name']} has {planned['capacity_points']} points of capacity and {committed} committed; the "
                f"{moving} unfinished points of {sprint['name']} do not fit (policy R6). Close it with "
                "move_unfinished_to='backlog' instead, then plan the issues into the next sprint one by one.",
            )
    ctx.execute("UPDATE issues SET sprint_id = ? WHERE sprint_id = ? AND status NOT IN ('done', 'closed')",
                (target, sprint_id))  # fmt: skip
    ctx.execute("UPDATE sprints SET state = 'closed' WHERE sprint_id = ?", (sprint_id,))
    return {**_sprint_view(ctx, sprint_id), "moved_unfinished": unfinished, "moved_to": target or "backlog"}


@tool(mutates=True)
def link_duplicate(
    ctx: Ctx,
    user_id: UserId,
    issue_key: IssueKey,
    original_key: Annotated[str, Entity("issue"), Field(description="The issue it duplicates, which stays open.")],
) -> dict[str, Any]:
    """Mark an issue as a duplicate of another one: it is closed with resolution 'duplicate' and linked."""
    issue = _issue_row(ctx, issue_key)
    original = _issue_row(ctx, original_key)
    _require_member(ctx, issue["project_key"], user_id, "mark duplicates")
    if issue_key == original_key:
        raise ToolError("invalid_arguments", "An issue cannot duplicate itself; give the key of the other report.")
    if original["project_key"] != issue["project_key"]:
        raise ToolError("policy_violation", f"{original_key} is in project {original['project_key']}, {issue_key} in "
                                            f"{issue['project_key']}; duplicates are linked only within one project "
                                            "(policy R9). Comment with a link instead.")  # fmt: skip
    if original["status"] == "closed":
        raise ToolError("policy_violation", f"{original_key} is closed, so it cannot be the original (policy R9). "
                                            "Keep the open report, or reopen the original first.")  # fmt: skip
    if issue["status"] in FINISHED:
        raise ToolError("conflict", f"{issue_key} is already {issue['status']} (resolution {issue['resolution']}).")
    # Marking a duplicate closes the issue, so the rule on who closes applies here as on transition_issue.
    actor = _user(ctx, user_id)
    if actor["role"] != "admin" and user_id not in (issue["reporter_id"], _lead_of(ctx, issue["project_key"])):
        raise ToolError(
            "policy_violation",
            f"Marking {issue_key} a duplicate closes it, and only its reporter, the lead of {issue['project_key']} "
            f"({_lead_name(ctx, issue['project_key'])}) or an admin can close it (policy R4). Ask one of them, or add "
            f"a comment on {issue_key} that points to {original_key}.",
        )
    # The issue keeps its sprint, as a finished issue does: taking it out of an active sprint is the lead's call
    # (policy R5), and a closed sprint's record does not change (policy R11).
    ctx.execute("UPDATE issues SET status = 'closed', resolution = 'duplicate', duplicate_of = ? WHERE issue_key = ?",
                (original_key, issue_key))  # fmt: skip
    ctx.execute("INSERT OR IGNORE INTO watchers SELECT ?, user_id FROM watchers WHERE issue_key = ?",
                (original_key, issue_key))  # fmt: skip
    _touch(ctx, issue_key)
    return _issue_view(ctx, issue_key)


@tool(mutates=True, yields={}, confirm=False)
def escalate_to_admin(
    ctx: Ctx,
    user_id: UserId,
    summary: Annotated[str, Field(description="What the person needs and why the tools cannot do it.")],
    issue_key: Annotated[str | None, Entity("issue"), Field(description="The issue concerned, if any.")] = None,
) -> dict[str, Any]:
    """Hand a request to a tracker administrator (reactivating an account, moving an issue to another project,
    restoring deleted work). Use it only when the tools and the policy cannot do what is asked."""
    if not summary.strip():
        raise ToolError("policy_violation", "An escalation needs a summary of the request (policy R13); "
                                            "write what the person needs in it.")
    cur = ctx.execute("INSERT INTO admin_requests (user_id, issue_key, summary, status, created_at) "
                      "VALUES (?, ?, ?, 'open', ?)", (user_id, issue_key, summary.strip(), ctx.now))  # fmt: skip
    return {"request_id": cur.lastrowid, "status": "open",
            "message": "An administrator will pick this up. Tell the person and end the conversation."}  # fmt: skip


TOOLS = [
    find_user_by_email,
    get_user,
    find_teammate,
    list_projects,
    get_project,
    search_issues,
    get_issue,
    list_sprints,
    get_sprint,
    get_workflow,
    list_time_logs,
    get_daily_time,
    calculate,
    create_issue,
    update_issue,
    assign_issue,
    transition_issue,
    add_comment,
    log_time,
    delete_time_log,
    add_issue_to_sprint,
    remove_issue_from_sprint,
    start_sprint,
    close_sprint,
    link_duplicate,
    escalate_to_admin,
]
