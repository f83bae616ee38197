"""The scripted tour of the projects world (``toolworld tour projects``).

It picks its person and issues from the seeded state (nothing hard-coded), so it works at any seed.
"""

from __future__ import annotations

from collections.abc import Iterator

from toolworld.world import Episode, ToolCall, TourStep

from .common import TODAY


def tour(ep: Episode) -> Iterator[TourStep]:
    """Identify a teammate, inspect an issue, move it on, try a refused move, and show the fork isolation."""
    row = ep.query(
        "SELECT u.email, u.user_id, i.issue_key FROM issues i JOIN users u ON u.user_id = i.assignee_id "
        "WHERE i.status = 'todo' AND u.active = 1 AND i.issue_type != 'epic' AND i.project_key IN "
        "(SELECT p.project_key FROM projects p WHERE p.wip_in_progress > (SELECT COUNT(*) FROM issues x WHERE "
        "x.project_key = p.project_key AND x.status = 'in_progress' AND x.issue_type != 'epic')) "
        "ORDER BY i.issue_key LIMIT 1"
    )[0]
    yield TourStep("A teammate writes in. Find them by their work email.", ToolCall("find_user_by_email", {"email": row["email"]}))
    yield TourStep("Their profile: role and projects.", ToolCall("get_user", {"user_id": row["user_id"]}))
    yield TourStep("Look at the issue they mean: its workflow says where it can go.",
                   ToolCall("get_issue", {"issue_key": row["issue_key"]}))  # fmt: skip
    mate = ep.query("SELECT u.full_name FROM users u JOIN project_members m ON m.user_id = u.user_id WHERE "
                    "m.project_key = (SELECT project_key FROM issues WHERE issue_key = ?) AND u.user_id != ? "
                    "AND u.active = 1 ORDER BY u.user_id LIMIT 1", (row["issue_key"], row["user_id"]))[0]["full_name"]
    kind = ep.query("SELECT issue_type FROM issues WHERE issue_key = ?", (row["issue_key"],))[0]["issue_type"]
    yield TourStep("The workflow of its type: which moves exist and what each target status requires.",
                   ToolCall("get_workflow", {"issue_type": kind}))  # fmt: skip
    yield TourStep("Teammates are named, never numbered: find one by (part of) their name.",
                   ToolCall("find_teammate", {"name": mate.split(" ")[-1]}))  # fmt: skip
    yield TourStep("How much time they have logged today (at most 24 hours a day, policy R7).",
                   ToolCall("get_daily_time", {"user_id": row["user_id"], "day": TODAY}))  # fmt: skip
    yield TourStep("Arithmetic goes through the calculator, e.g. hours to minutes.",
                   ToolCall("calculate", {"expression": "2.5 * 60"}))  # fmt: skip
    yield TourStep("Fork the episode: a what-if copy that the next writes will not touch.", kind="fork")
    yield TourStep("Start work on it (policy R1 workflow, R2 WIP limit, R3 assignee).",
                   ToolCall("transition_issue", {"user_id": row["user_id"], "issue_key": row["issue_key"],
                                                 "to_status": "in_progress"}))  # fmt: skip
    yield TourStep("Try to jump straight to done: the workflow refuses and says which steps are allowed (policy R1).",
                   ToolCall("transition_issue", {"user_id": row["user_id"], "issue_key": row["issue_key"],
                                                 "to_status": "done", "resolution": "fixed"}))  # fmt: skip
    yield TourStep("Log time in the future: refused (policy R7).",
                   ToolCall("log_time", {"user_id": row["user_id"], "issue_key": row["issue_key"], "minutes": 60,
                                         "day": "2026-07-01"}))  # fmt: skip
    yield TourStep("A mistyped issue key: a structured not_found error, nothing changes.",
                   ToolCall("get_issue", {"issue_key": "APP-99999"}))  # fmt: skip
