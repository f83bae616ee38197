"""The scripted tour of the hr world (``toolworld tour hr``).

It picks its manager, report and request from the seeded state (nothing hard-coded), so it works at any seed.
"""

from __future__ import annotations

from collections.abc import Iterator

from toolworld.world import Episode, ToolCall, TourStep


def tour(ep: Episode) -> Iterator[TourStep]:
    """Identify a manager, review a report's pending leave, approve it, try a refused write, show fork isolation."""
    row = ep.query(
        "SELECT m.email, m.employee_id AS manager_id, r.request_id, r.employee_id FROM leave_requests r "
        "JOIN employees e ON e.employee_id = r.employee_id JOIN employees m ON m.employee_id = e.manager_id "
        "WHERE r.status = 'pending' AND r.start_date > '2026-03-31' AND m.status = 'active' "
        "ORDER BY r.request_id LIMIT 1"
    )[0]
    stale = ep.query(
        "SELECT r.request_id FROM leave_requests r JOIN employees e ON e.employee_id = r.employee_id "
        "WHERE r.status = 'pending' AND r.start_date < '2026-01-01' AND e.manager_id = ? ORDER BY r.request_id",
        (row["manager_id"],),
    )
    yield TourStep("A manager writes in. Identify them by work email.",
                   ToolCall("find_employee_by_email", {"email": row["email"]}))  # fmt: skip
    yield TourStep("List the leave requests waiting for their decision.",
                   ToolCall("list_team_leave_requests", {"manager_id": row["manager_id"]}))  # fmt: skip
    yield TourStep("Fork the episode: a what-if copy that the next writes will not touch.", kind="fork")
    yield TourStep("Approve a report's request: the tool checks the approver (R1) and the balance (R2).",
                   ToolCall("approve_leave_request", {"manager_id": row["manager_id"],
                                                      "request_id": row["request_id"]}))  # fmt: skip
    if stale:
        yield TourStep("Approve a stale request from last year: refused, it can only be rejected (R1).",
                       ToolCall("approve_leave_request", {"manager_id": row["manager_id"],
                                                          "request_id": stale[0]["request_id"]}))  # fmt: skip
    yield TourStep("Ask for leave in the past: refused by the policy with what to do instead (R4).",
                   ToolCall("submit_leave_request", {"employee_id": row["manager_id"], "leave_type": "vacation",
                                                     "start_date": "2026-02-02", "end_date": "2026-02-03"}))  # fmt: skip
    yield TourStep("A mistyped request id: a structured not_found error, nothing changes.",
                   ToolCall("get_leave_request", {"request_id": "LR-0"}))  # fmt: skip
    change = ep.query(
        "SELECT c.change_id, s.email, s.employee_id AS skip FROM comp_change_requests c JOIN employees e "
        "ON e.employee_id = c.employee_id JOIN employees m ON m.employee_id = e.manager_id JOIN employees s "
        "ON s.employee_id = m.manager_id WHERE c.status = 'pending' AND s.status = 'active' ORDER BY c.change_id LIMIT 1"
    )
    if change:
        c = change[0]
        yield TourStep("A skip-level manager writes in about a pay change awaiting their approval.",
                       ToolCall("find_employee_by_email", {"email": c["email"]}))  # fmt: skip
        yield TourStep("They may see it (R8): the proposed salary, the percent change and whether HR must approve.",
                       ToolCall("get_compensation_change", {"employee_id": c["skip"],
                                                            "change_id": c["change_id"]}))  # fmt: skip
