"""The hr world's tools. Each write tool enforces the numbered rules of ``policy.md`` and cites them.

Every write takes the id of the employee writing in (``employee_id`` / ``manager_id``): the episode checks it is
the identified employee (policy R11), and the tool checks what that person may do to whom (a manager approves
their reports' leave, HR may do more). Error messages say which rule blocked the call and what to do instead.
Money is integer cents in the database and decimal dollars in every result.
"""

from __future__ import annotations

import re
from datetime import date, timedelta
from typing import Annotated, Any, Literal

from pydantic import Field

from toolworld.world import Ctx, Entity, ToolError, tool
from toolworld.worlds.shared.arith import calculate
from toolworld.worlds.shared.clock import add_business_days
from toolworld.worlds.shared.money import cents, dollars
from toolworld.worlds.shared.people import display_name as _name
from toolworld.worlds.shared.records import next_id

from .common import (
    CARRY_EXPIRY,
    HOLIDAY_DATES,
    HR_ONLY_CHANGE_PCT,
    LEAVE_TYPES,
    RELATIONSHIPS,
    TODAY,
    YEAR,
    available_for,
    balance,
    leave_days,
)
from .data import OFFBOARDING

EmployeeId = Annotated[
    str, Entity("employee"), Field(description="Your own employee id (the person writing in), e.g. 'E10482'.")
]
ManagerId = Annotated[
    str, Entity("employee"), Field(description="Your own employee id, as the manager (or HR) acting, e.g. 'E10482'.")
]
ColleagueId = Annotated[
    str, Entity("colleague"), Field(description="The employee id of the colleague acted on or looked up, e.g. 'E23917'.")
]
LeaveRequestId = Annotated[str, Entity("leave_request"), Field(description="A leave request id, e.g. 'LR-482019'.")]
ChangeId = Annotated[str, Entity("comp_change"), Field(description="A compensation change id, e.g. 'CC-48201'.")]
ItemId = Annotated[str, Entity("checklist_item"), Field(description="A checklist item id, e.g. 'CI-582013'.")]
DocumentId = Annotated[str, Entity("document"), Field(description="A document id, e.g. 'DOC-193820'.")]
LeaveType = Literal["vacation", "sick", "parental", "unpaid"]
Day = Annotated[str, Field(description="A date as YYYY-MM-DD, e.g. '2026-04-13'.")]

# -- shared views and checks -------------------------------------------------------------------------------


def _emp(ctx: Ctx, employee_id: str) -> dict[str, Any]:
    row = ctx.one("SELECT * FROM employees WHERE employee_id = ?", (employee_id,))
    assert row is not None  # existence is checked by Episode.call before the tool runs
    return row



def _is_hr(row: dict[str, Any]) -> bool:
    return row["role"] == "hr" and row["status"] != "terminated"


def _date(value: str, what: str) -> date:
    try:
        return date.fromisoformat(value.strip())
    except ValueError:
        raise ToolError("invalid_arguments", f"{what} {value!r} is not a date; write it as YYYY-MM-DD, e.g. "
                        f"'{(TODAY + timedelta(days=7)).isoformat()}'.") from None  # fmt: skip



def _booked(ctx: Ctx, employee_id: str, leave_type: str, exclude: str | None = None) -> list[dict[str, Any]]:
    return ctx.all(
        "SELECT request_id, end_date, business_days FROM leave_requests WHERE employee_id = ? AND leave_type = ? "
        "AND status IN ('pending', 'approved') AND substr(start_date, 1, 4) = ? AND request_id != ?",
        (employee_id, leave_type, str(YEAR), exclude or ""),
    )


def _balance(ctx: Ctx, employee_id: str, leave_type: str, exclude: str | None = None) -> dict[str, int] | None:
    row = ctx.one("SELECT * FROM leave_balances WHERE employee_id = ? AND leave_type = ? AND year = ?",
                  (employee_id, leave_type, YEAR))  # fmt: skip
    if row is None:
        return None
    out = balance(row["allowance_days"], row["carried_over_days"], _booked(ctx, employee_id, leave_type, exclude))
    return {"allowance": row["allowance_days"], "carried_over": row["carried_over_days"], **out}


def _request_view(ctx: Ctx, request_id: str) -> dict[str, Any]:
    q = ctx.one("SELECT r.*, e.first_name, e.last_name FROM leave_requests r JOIN employees e "
                "ON e.employee_id = r.employee_id WHERE r.request_id = ?", (request_id,))  # fmt: skip
    assert q is not None
    out = {"request_id": q["request_id"], "employee_id": q["employee_id"], "employee_name": _name(q),
           "leave_type": q["leave_type"], "start_date": q["start_date"], "end_date": q["end_date"],
           "business_days": q["business_days"], "status": q["status"], "submitted_at": q["submitted_at"]}  # fmt: skip
    if q["decided_by"]:
        out.update(decided_by=q["decided_by"], decided_at=q["decided_at"])
    if q["note"]:
        out["note"] = q["note"]
    return out


def _leave_approver_problem(ctx: Ctx, approver: dict[str, Any], employee: dict[str, Any]) -> str | None:
    """Why ``approver`` may not decide ``employee``'s leave (policy R1), or None when they may."""
    if approver["employee_id"] == employee["employee_id"]:
        return "nobody decides their own leave"
    manager = ctx.one("SELECT * FROM employees WHERE employee_id = ?", (employee["manager_id"],)) \
        if employee["manager_id"] else None  # fmt: skip
    if manager is None:
        return None if _is_hr(approver) else f"{_name(employee)} has no manager, so only HR decides their leave"
    if manager["status"] == "on_leave":
        if approver["employee_id"] == manager["manager_id"]:
            return None
        return (f"{_name(employee)}'s manager {_name(manager)} is on leave, so their manager's manager "
                f"({manager['manager_id']}) decides")  # fmt: skip
    if approver["employee_id"] == manager["employee_id"]:
        return None
    return f"only {_name(employee)}'s direct manager, {_name(manager)} ({manager['employee_id']}), decides their leave"


def _pending_request(ctx: Ctx, manager_id: str, request_id: str, action: str) -> tuple[dict[str, Any], dict[str, Any]]:
    q = ctx.one("SELECT * FROM leave_requests WHERE request_id = ?", (request_id,))
    assert q is not None
    employee = _emp(ctx, q["employee_id"])
    problem = _leave_approver_problem(ctx, _emp(ctx, manager_id), employee)
    if problem:
        raise ToolError("policy_violation", f"You cannot {action} request {request_id}: {problem} (policy R1). The "
                        "employee should ask the right approver, or transfer the case to an HR partner.")  # fmt: skip
    if q["status"] != "pending":
        raise ToolError("policy_violation", f"Request {request_id} is already {q['status']}; only pending requests "
                        f"can be approved or rejected (policy R1). Check it with get_leave_request.")  # fmt: skip
    return q, employee


def _manages(ctx: Ctx, actor: dict[str, Any], subject: dict[str, Any]) -> bool:
    return subject["manager_id"] == actor["employee_id"]


def _salary(ctx: Ctx, employee_id: str) -> int | None:
    return ctx.value("SELECT salary_cents FROM compensation WHERE employee_id = ? AND effective_date <= ? "
                     "ORDER BY effective_date DESC, comp_id DESC LIMIT 1", (employee_id, TODAY.isoformat()))  # fmt: skip


def _change_view(ctx: Ctx, change_id: str) -> dict[str, Any]:
    c = ctx.one("SELECT c.*, e.first_name, e.last_name FROM comp_change_requests c JOIN employees e "
                "ON e.employee_id = c.employee_id WHERE c.change_id = ?", (change_id,))  # fmt: skip
    assert c is not None
    now, new = c["current_salary_cents"], c["proposed_salary_cents"]
    out = {"change_id": c["change_id"], "employee_id": c["employee_id"], "employee_name": _name(c),
           "proposed_by": c["proposed_by"], "current_salary": dollars(now), "proposed_salary": dollars(new),
           "change_percent": round((new - now) * 100 / now, 2), "reason": c["reason"], "status": c["status"],
           "created_at": c["created_at"]}  # fmt: skip
    if c["approved_by"]:
        out.update(decided_by=c["approved_by"], decided_at=c["decided_at"])
    out["needs_hr_approval"] = abs(new - now) * 100 > HR_ONLY_CHANGE_PCT * now
    return out


def _may_see(ctx: Ctx, viewer: dict[str, Any], subject: dict[str, Any], what: str) -> str:
    """How ``viewer`` may see ``subject``'s records (policy R8): 'self', 'hr' or 'manager'; else refused."""
    if viewer["employee_id"] == subject["employee_id"]:
        return "self"
    if _is_hr(viewer):
        return "hr"
    if _manages(ctx, viewer, subject):
        return "manager"
    raise ToolError("policy_violation", f"You may not see {_name(subject)}'s {what}: employees see only their own, "
                    "managers their direct reports' (policy R8). Ask the employee, or an HR partner.")  # fmt: skip


# -- finding people ----------------------------------------------------------------------------------------


def _current_of(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """A rehire has two records: the current one wins over the old, terminated one."""
    live = [r for r in rows if r["status"] != "terminated"]
    return live[0] if len(live) == 1 else None


@tool(yields={"employee": "employee_id"}, identifies=True)
def find_employee_by_email(ctx: Ctx, email: Annotated[str, Entity("email")]) -> dict[str, Any]:
    """Identify the employee writing in from their work email (use this first).

    Args:
        email: The employee's work email, e.g. 'ava.chen@brightwater.example.com'.
    """
    rows = ctx.all("SELECT employee_id, first_name, last_name, status FROM employees WHERE email = ? "
                   "ORDER BY hire_date DESC", (email.strip().lower(),))  # fmt: skip
    if not rows:
        raise ToolError("not_found", f"No employee has the email {email!r}. Ask them to check it, or find them by "
                        "name and department with find_employee_by_name_and_department.")  # fmt: skip
    row = _current_of(rows)
    if row is None:
        raise ToolError("not_found", f"{email!r} belongs to a former employee only; former employees are helped by "
                        "an HR partner: transfer the case with transfer_to_hr_partner.")  # fmt: skip
    return {"employee_id": row["employee_id"], "name": _name(row)}


@tool(yields={"employee": "employee_id"}, identifies=True)
def find_employee_by_name_and_department(
    ctx: Ctx,
    first_name: Annotated[str, Entity("first_name")],
    last_name: Annotated[str, Entity("last_name")],
    department: Annotated[str, Entity("department")],
) -> dict[str, Any]:
    """Identify the employee writing in from their first name, last name and department.

    Args:
        first_name: e.g. 'Ava'.
        last_name: e.g. 'Chen'.
        department: The department's name, e.g. 'Engineering'.
    """
    rows = ctx.all(
        "SELECT e.employee_id, e.first_name, e.last_name, e.status FROM employees e JOIN departments d "
        "ON d.department_id = e.department_id WHERE lower(e.first_name) = ? AND lower(e.last_name) = ? "
        "AND lower(d.name) = ? ORDER BY e.hire_date DESC",
        (first_name.strip().lower(), last_name.strip().lower(), department.strip().lower()),
    )
    row = _current_of(rows)
    if row is None:
        depts = ", ".join(r["name"] for r in ctx.all("SELECT name FROM departments ORDER BY name"))
        raise ToolError("not_found", f"No current employee {first_name} {last_name} in {department!r} (departments: "
                        f"{depts}). Ask them to check, or for their work email (find_employee_by_email).")  # fmt: skip
    return {"employee_id": row["employee_id"], "name": _name(row)}


@tool(yields={"colleague": "manager.employee_id"})
def get_employee(ctx: Ctx, employee_id: EmployeeId) -> dict[str, Any]:
    """Your own HR record: job, manager, status, hire date, phone and emergency contacts."""
    e = _emp(ctx, employee_id)
    dept = ctx.value("SELECT name FROM departments WHERE department_id = ?", (e["department_id"],))
    out: dict[str, Any] = {
        "employee_id": e["employee_id"], "name": _name(e), "email": e["email"], "phone": e["phone"],
        "department": dept, "title": e["title"], "level": e["level"], "location": e["location"],
        "employment_type": e["employment_type"], "role": e["role"], "status": e["status"], "hire_date": e["hire_date"],
    }  # fmt: skip
    if e["termination_date"]:
        out["termination_date"] = e["termination_date"]
    if e["manager_id"]:
        m = _emp(ctx, e["manager_id"])
        out["manager"] = {"employee_id": m["employee_id"], "name": _name(m), "status": m["status"]}
    else:
        out["manager"] = None
    if e["rehire_of"]:
        out["previous_record"] = e["rehire_of"]
    out["emergency_contacts"] = ctx.all("SELECT name, relationship, phone FROM emergency_contacts "
                                        "WHERE employee_id = ? ORDER BY contact_id", (employee_id,))  # fmt: skip
    return out


@tool
def get_directory_entry(ctx: Ctx, employee_id: ColleagueId) -> dict[str, Any]:
    """A colleague's public directory entry: name, title, department, location, status and manager."""
    e = _emp(ctx, employee_id)
    dept = ctx.value("SELECT name FROM departments WHERE department_id = ?", (e["department_id"],))
    return {"employee_id": e["employee_id"], "name": _name(e), "email": e["email"], "title": e["title"],
            "department": dept, "location": e["location"], "employment_type": e["employment_type"],
            "status": e["status"], "manager_id": e["manager_id"]}  # fmt: skip


@tool(yields={"colleague": "reports[].employee_id"})
def list_direct_reports(ctx: Ctx, manager_id: ManagerId) -> dict[str, Any]:
    """The people who report directly to you (current staff), with their status."""
    rows = ctx.all("SELECT employee_id, first_name, last_name, title, status, employment_type FROM employees "
                   "WHERE manager_id = ? AND status != 'terminated' ORDER BY last_name, first_name",
                   (manager_id,))  # fmt: skip
    return {"manager_id": manager_id, "reports": [
        {"employee_id": r["employee_id"], "name": _name(r), "title": r["title"], "status": r["status"],
         "employment_type": r["employment_type"]} for r in rows]}  # fmt: skip


# -- leave -------------------------------------------------------------------------------------------------


@tool
def get_leave_balance(ctx: Ctx, employee_id: EmployeeId) -> dict[str, Any]:
    """Your leave balances for this year, per leave type, in business days.

    "available_until_march_31" counts carried-over days (they expire on March 31); "available_after_march_31"
    is what leave ending later may use. Pending and approved requests are already deducted.
    """
    out = []
    for leave_type in LEAVE_TYPES:
        b = _balance(ctx, employee_id, leave_type)
        if b is None:
            continue
        if leave_type == "unpaid":
            out.append({"leave_type": "unpaid", "booked": b["booked"], "note": "no allowance and no limit"})
            continue
        out.append({"leave_type": leave_type, "allowance": b["allowance"], "carried_over": b["carried_over"],
                    "booked": b["booked"], "available_until_march_31": b["allowance_left"] + b["carry_over_left"],
                    "available_after_march_31": b["allowance_left"]})  # fmt: skip
    if not out:
        raise ToolError("not_found", f"{employee_id} has no leave balances: contractors take leave through their "
                        "agency, not this system.")  # fmt: skip
    return {"employee_id": employee_id, "year": YEAR, "carry_over_expires": CARRY_EXPIRY.isoformat(), "balances": out}


@tool(yields={"leave_request": "requests[].request_id"})
def list_leave_requests(ctx: Ctx, employee_id: EmployeeId) -> dict[str, Any]:
    """Your own leave requests (this year and last), newest first, with their status."""
    ids = [r["request_id"] for r in ctx.all("SELECT request_id FROM leave_requests WHERE employee_id = ? "
                                            "ORDER BY start_date DESC", (employee_id,))]  # fmt: skip
    return {"employee_id": employee_id, "requests": [_request_view(ctx, i) for i in ids]}


@tool(yields={"leave_request": "requests[].request_id"})
def list_team_leave_requests(ctx: Ctx, manager_id: ManagerId) -> dict[str, Any]:
    """Pending leave requests you are the approver for: your direct reports', those of reports whose manager
    (one of yours) is on leave, and, for HR, those of employees without a manager."""
    me = _emp(ctx, manager_id)
    rows = ctx.all(
        "SELECT r.request_id, r.employee_id FROM leave_requests r JOIN employees e ON e.employee_id = r.employee_id "
        "LEFT JOIN employees m ON m.employee_id = e.manager_id WHERE r.status = 'pending' AND e.status != 'terminated' "
        "AND ((e.manager_id = ? AND m.status != 'on_leave') OR (m.status = 'on_leave' AND m.manager_id = ?) "
        "OR (e.manager_id IS NULL AND ?)) ORDER BY r.start_date, r.request_id",
        (manager_id, manager_id, int(_is_hr(me))),
    )
    return {"manager_id": manager_id, "requests": [_request_view(ctx, r["request_id"]) for r in rows]}


@tool
def get_leave_request(ctx: Ctx, request_id: LeaveRequestId) -> dict[str, Any]:
    """One leave request: employee, type, dates, business days and status."""
    return _request_view(ctx, request_id)


@tool
def list_holidays(ctx: Ctx, year: Annotated[int, Field(description="Calendar year, e.g. 2026.")] = YEAR) -> dict[str, Any]:
    """The company holidays of a year (they are not counted as leave days)."""
    rows = ctx.all("SELECT date, name FROM holidays WHERE substr(date, 1, 4) = ? ORDER BY date", (str(year),))
    return {"year": year, "holidays": rows}


@tool(mutates=True, yields={"leave_request": "request_id"})
def submit_leave_request(
    ctx: Ctx,
    employee_id: EmployeeId,
    leave_type: LeaveType,
    start_date: Day,
    end_date: Day,
    note: Annotated[str, Field(description="Optional note for the approver.")] = "",
) -> dict[str, Any]:
    """Ask for leave from start_date to end_date (both included); the business days are counted for you, without
    weekends and company holidays. The request waits, pending, for the approver (your manager)."""
    e = _emp(ctx, employee_id)
    start, end = _date(start_date, "start_date"), _date(end_date, "end_date")
    if e["employment_type"] == "contractor" or e["status"] == "terminated":
        raise ToolError("policy_violation", "Only current employees request leave here; contractors arrange time off "
                        "with their agency (policy R4); ask them to contact it.")  # fmt: skip
    if end < start:
        raise ToolError("invalid_arguments", f"end_date {end} is before start_date {start}; swap or correct them.")
    if start < TODAY:
        raise ToolError("policy_violation", f"Leave cannot start in the past ({start} is before today, {TODAY}) "
                        "(policy R4). Ask the employee for future dates.")  # fmt: skip
    if start.year != YEAR or end.year != YEAR:
        raise ToolError("policy_violation", f"Leave is requested within the current year, {YEAR} (policy R4); ask to split "
                        "leave that crosses into next year and request the rest next year.")  # fmt: skip
    days = leave_days(start, end)
    if days == 0:
        raise ToolError("policy_violation", f"{start} to {end} has no business days (weekends and company holidays "
                        "are not leave days) (policy R4); ask for dates with a working day.")  # fmt: skip
    clash = ctx.one("SELECT request_id, start_date, end_date, status FROM leave_requests WHERE employee_id = ? AND "
                    "status IN ('pending', 'approved') AND start_date <= ? AND end_date >= ? ORDER BY start_date",
                    (employee_id, end.isoformat(), start.isoformat()))  # fmt: skip
    if clash:
        raise ToolError("policy_violation", f"These dates overlap request {clash['request_id']} ({clash['start_date']} "
                        f"to {clash['end_date']}, {clash['status']}) (policy R4). Ask for other dates, or cancel that "
                        "request first with cancel_leave_request.")  # fmt: skip
    if leave_type != "unpaid":
        b = _balance(ctx, employee_id, leave_type)
        assert b is not None
        left = available_for(b, end)
        if days > left:
            if end > CARRY_EXPIRY and days <= left + b["carry_over_left"]:
                raise ToolError("policy_violation", f"{days} business days of {leave_type} ending {end} need "
                                f"{b['carry_over_left']} carried-over days, but carried-over days expire on "
                                f"{CARRY_EXPIRY} and only cover leave ending by then; {left} days are available after "
                                "it (policy R3). Ask for shorter or earlier leave, or use unpaid leave.")  # fmt: skip
            raise ToolError("policy_violation", f"{days} business days of {leave_type} exceed the {left} days available "
                            "(policy R2). Ask for fewer days, or use unpaid leave for the rest.")  # fmt: skip
    request_id = next_id(ctx, "leave_requests", "request_id", "LR-")
    ctx.execute("INSERT INTO leave_requests (request_id, employee_id, leave_type, start_date, end_date, business_days, "
                "status, submitted_at, note) VALUES (?, ?, ?, ?, ?, ?, 'pending', ?, ?)",
                (request_id, employee_id, leave_type, start.isoformat(), end.isoformat(), days, ctx.now,
                 note.strip()))  # fmt: skip
    return _request_view(ctx, request_id)


@tool(mutates=True)
def cancel_leave_request(ctx: Ctx, employee_id: EmployeeId, request_id: LeaveRequestId) -> dict[str, Any]:
    """Withdraw one of your own leave requests: a pending one, or an approved one that has not started yet."""
    q = ctx.one("SELECT * FROM leave_requests WHERE request_id = ?", (request_id,))
    assert q is not None
    if q["employee_id"] != employee_id:
        raise ToolError("policy_violation", f"Request {request_id} is not yours; only the employee who made a request "
                        "can cancel it (policy R11). A manager declines a report's request with "
                        "reject_leave_request.")  # fmt: skip
    start = date.fromisoformat(q["start_date"])
    if q["status"] == "pending" or (q["status"] == "approved" and start > TODAY):
        ctx.execute("UPDATE leave_requests SET status = 'cancelled' WHERE request_id = ?", (request_id,))
        return _request_view(ctx, request_id)
    why = "has already started or been taken" if q["status"] == "approved" else f"is {q['status']}"
    raise ToolError("policy_violation", f"Request {request_id} {why}; only pending requests and approved leave that "
                    "has not started can be cancelled (policy R5). For a change to leave already taken, transfer the "
                    "case to an HR partner.")  # fmt: skip


@tool(mutates=True)
def approve_leave_request(ctx: Ctx, manager_id: ManagerId, request_id: LeaveRequestId) -> dict[str, Any]:
    """Approve a pending leave request of someone whose leave you decide (see list_team_leave_requests)."""
    q, employee = _pending_request(ctx, manager_id, request_id, "approve")
    if date.fromisoformat(q["start_date"]) < TODAY:
        raise ToolError("policy_violation", f"Request {request_id} was for leave starting {q['start_date']}, which has "
                        "passed; a stale request can only be rejected (policy R1): use reject_leave_request instead.")  # fmt: skip
    if q["leave_type"] != "unpaid":
        b = _balance(ctx, q["employee_id"], q["leave_type"], exclude=request_id)
        assert b is not None
        left = available_for(b, date.fromisoformat(q["end_date"]))
        if q["business_days"] > left:
            raise ToolError("policy_violation", f"{_name(employee)} has {left} {q['leave_type']} days available, fewer "
                            f"than the {q['business_days']} requested (policy R2); reject it instead.")  # fmt: skip
    ctx.execute("UPDATE leave_requests SET status = 'approved', decided_by = ?, decided_at = ? WHERE request_id = ?",
                (manager_id, ctx.now, request_id))  # fmt: skip
    return _request_view(ctx, request_id)


@tool(mutates=True)
def reject_leave_request(
    ctx: Ctx,
    manager_id: ManagerId,
    request_id: LeaveRequestId,
    reason: Annotated[str, Field(description="Why, for the employee (one sentence).")] = "",
) -> dict[str, Any]:
    """Reject a pending leave request of someone whose leave you decide (also how stale requests are closed)."""
    _pending_request(ctx, manager_id, request_id, "reject")
    ctx.execute("UPDATE leave_requests SET status = 'rejected', decided_by = ?, decided_at = ?, "
                "note = CASE WHEN ? = '' THEN note ELSE ? END WHERE request_id = ?",
                (manager_id, ctx.now, reason.strip(), reason.strip(), request_id))  # fmt: skip
    return _request_view(ctx, request_id)


# -- compensation ----------------------------------------------------------------------------------------


@tool
def get_compensation(ctx: Ctx, employee_id: EmployeeId, subject_id: ColleagueId | None = None) -> dict[str, Any]:
    """Current base salary and its history: your own, or (for a manager) a direct report's, or (for HR) anyone's.

    Args:
        subject_id: Whose pay to show; leave it out for your own.
    """
    viewer = _emp(ctx, employee_id)
    subject = _emp(ctx, subject_id or employee_id)
    _may_see(ctx, viewer, subject, "compensation")
    history = ctx.all("SELECT salary_cents, effective_date, reason FROM compensation WHERE employee_id = ? "
                      "ORDER BY effective_date, comp_id", (subject["employee_id"],))  # fmt: skip
    if not history:
        raise ToolError("not_found", f"{_name(subject)} has no salary on file (contractors are paid through their "
                        "agency).")  # fmt: skip
    now = _salary(ctx, subject["employee_id"])
    return {"employee_id": subject["employee_id"], "name": _name(subject), "annual_salary": dollars(now),
            "currency": "USD", "history": [{"annual_salary": dollars(h["salary_cents"]),
                                            "effective_date": h["effective_date"], "reason": h["reason"]}
                                           for h in history]}  # fmt: skip


@tool(yields={"comp_change": "awaiting_your_approval[].change_id"})
def list_compensation_changes(ctx: Ctx, employee_id: EmployeeId) -> dict[str, Any]:
    """Compensation changes awaiting your approval (your skip-level reports', or anyone's for HR), and the ones
    you proposed."""
    me = _emp(ctx, employee_id)
    awaiting = ctx.all(
        "SELECT c.change_id FROM comp_change_requests c JOIN employees e ON e.employee_id = c.employee_id "
        "LEFT JOIN employees m ON m.employee_id = e.manager_id WHERE c.status = 'pending' AND c.proposed_by != ? "
        "AND c.employee_id != ? AND (m.manager_id = ? OR ?) ORDER BY c.created_at, c.change_id",
        (employee_id, employee_id, employee_id, int(_is_hr(me))),
    )
    mine = ctx.all("SELECT change_id FROM comp_change_requests WHERE proposed_by = ? ORDER BY created_at, change_id",
                   (employee_id,))  # fmt: skip
    return {"employee_id": employee_id,
            "awaiting_your_approval": [_change_view(ctx, r["change_id"]) for r in awaiting],
            "proposed_by_you": [_change_view(ctx, r["change_id"]) for r in mine]}  # fmt: skip


@tool
def get_compensation_change(ctx: Ctx, employee_id: EmployeeId, change_id: ChangeId) -> dict[str, Any]:
    """One compensation change (employee, current and proposed salary, percent change, status), for the employee
    whose pay it is, whoever proposed it, their manager's manager or HR."""
    me = _emp(ctx, employee_id)
    c = ctx.one("SELECT employee_id, proposed_by FROM comp_change_requests WHERE change_id = ?", (change_id,))
    assert c is not None
    subject = _emp(ctx, c["employee_id"])
    # The salaries in it are private (policy R8): only the people who decide on the change, or whose pay it is.
    skip = ctx.value("SELECT manager_id FROM employees WHERE employee_id = ?", (subject["manager_id"],)) \
        if subject["manager_id"] else None  # fmt: skip
    if employee_id not in (c["employee_id"], c["proposed_by"], skip) and not _is_hr(me):
        raise ToolError("policy_violation", f"You may not see change {change_id}: pay changes are shown only to the "
                        "employee, whoever proposed it, their manager's manager and HR (policy R8). Use "
                        "list_compensation_changes for the changes you may see.")  # fmt: skip
    return _change_view(ctx, change_id)


@tool(mutates=True, yields={"comp_change": "change_id"})
def request_compensation_change(
    ctx: Ctx,
    employee_id: ManagerId,
    colleague_id: ColleagueId,
    new_salary: Annotated[float, Field(description="The proposed annual base salary in dollars, e.g. 104500.")],
    reason: Annotated[str, Field(description="Why, e.g. 'promotion' or 'market adjustment'.")],
) -> dict[str, Any]:
    """Propose a new base salary for a direct report (HR: for anyone). It waits for approval by the report's
    manager's manager, or HR (changes above 15% need HR)."""
    me, subject = _emp(ctx, employee_id), _emp(ctx, colleague_id)
    if subject["employee_id"] == employee_id or not (_manages(ctx, me, subject) or _is_hr(me)):
        raise ToolError("policy_violation", f"Only {_name(subject)}'s direct manager or HR can propose a change to their "
                        "pay (policy R6). Ask their manager, or transfer the case to an HR partner.")  # fmt: skip
    if subject["status"] == "terminated" or subject["employment_type"] != "employee":
        raise ToolError("policy_violation", f"{_name(subject)} is not a current employee on payroll ("
                        f"{subject['status']}, {subject['employment_type']}); their pay cannot be changed (policy R6). Check get_directory_entry.")
    if not reason.strip():
        raise ToolError("invalid_arguments", "reason is empty; say why the change is proposed.")
    pending = ctx.value("SELECT change_id FROM comp_change_requests WHERE employee_id = ? AND status = 'pending'",
                        (colleague_id,))  # fmt: skip
    if pending:
        raise ToolError("policy_violation", f"{_name(subject)} already has a pending change ({pending}); one change at "
                        "a time (policy R6). Check it with list_compensation_changes.")  # fmt: skip
    now, new = _salary(ctx, colleague_id), cents(new_salary)
    assert now is not None
    if new <= 0 or new == now:
        raise ToolError("invalid_arguments", f"new_salary must be a positive amount different from the current "
                        f"${dollars(now):,.2f}.")  # fmt: skip
    change_id = next_id(ctx, "comp_change_requests", "change_id", "CC-")
    ctx.execute("INSERT INTO comp_change_requests (change_id, employee_id, proposed_by, current_salary_cents, "
                "proposed_salary_cents, reason, status, created_at) VALUES (?, ?, ?, ?, ?, ?, 'pending', ?)",
                (change_id, colleague_id, employee_id, now, new, reason.strip(), ctx.now))  # fmt: skip
    return _change_view(ctx, change_id)


@tool(mutates=True)
def approve_compensation_change(ctx: Ctx, employee_id: ManagerId, change_id: ChangeId) -> dict[str, Any]:
    """Approve a pending compensation change; the new salary takes effect on the first of next month."""
    me = _emp(ctx, employee_id)
    c = ctx.one("SELECT * FROM comp_change_requests WHERE change_id = ?", (change_id,))
    assert c is not None
    subject = _emp(ctx, c["employee_id"])
    if c["status"] != "pending":
        raise ToolError("policy_violation", f"Change {change_id} is already {c['status']} (policy R7). Check get_compensation_change.")
    if employee_id in (c["proposed_by"], c["employee_id"]):
        raise ToolError("policy_violation", "Nobody approves a change they proposed or their own pay (policy R7). Ask a skip-level manager or HR.")
    skip = ctx.value("SELECT manager_id FROM employees WHERE employee_id = ?", (subject["manager_id"],)) \
        if subject["manager_id"] else None  # fmt: skip
    if not (_is_hr(me) or skip == employee_id):
        raise ToolError("policy_violation", f"Only {_name(subject)}'s manager's manager or HR can approve this change "
                        "(policy R7). Ask them, or transfer the case to an HR partner.")  # fmt: skip
    view = _change_view(ctx, change_id)
    if view["needs_hr_approval"] and not _is_hr(me):
        raise ToolError("policy_violation", f"Change {change_id} is {view['change_percent']}%, above "
                        f"{HR_ONLY_CHANGE_PCT}%: only HR can approve it (policy R7). Transfer it to an HR partner.")
    effective = date(YEAR + (TODAY.month == 12), TODAY.month % 12 + 1, 1)
    ctx.execute("UPDATE comp_change_requests SET status = 'approved', approved_by = ?, decided_at = ? WHERE change_id = ?",
                (employee_id, ctx.now, change_id))  # fmt: skip
    ctx.execute("INSERT INTO compensation (employee_id, salary_cents, effective_date, reason) VALUES (?, ?, ?, ?)",
                (c["employee_id"], c["proposed_salary_cents"], effective.isoformat(), c["reason"]))  # fmt: skip
    return {**_change_view(ctx, change_id), "effective_date": effective.isoformat()}


# -- checklists ------------------------------------------------------------------------------------------


def _item_view(row: dict[str, Any]) -> dict[str, Any]:
    return {"item_id": row["item_id"], "title": row["title"], "owner_id": row["owner_id"], "due_date": row["due_date"],
            "depends_on": row["depends_on"], "done": row["done_at"] is not None}  # fmt: skip


@tool(yields={"checklist_item": "checklists[].items[].item_id"})
def get_checklist(ctx: Ctx, employee_id: EmployeeId) -> dict[str, Any]:
    """Open onboarding/offboarding checklists you are on: your own, and others' with items you own."""
    lists = ctx.all(
        "SELECT DISTINCT c.checklist_id, c.employee_id, c.kind, c.status FROM checklists c JOIN checklist_items i "
        "ON i.checklist_id = c.checklist_id WHERE c.status = 'open' AND (c.employee_id = ? OR i.owner_id = ?) "
        "ORDER BY c.checklist_id", (employee_id, employee_id))  # fmt: skip
    out = []
    for c in lists:
        items = ctx.all("SELECT * FROM checklist_items WHERE checklist_id = ? ORDER BY seq", (c["checklist_id"],))
        who = _emp(ctx, c["employee_id"])
        out.append({"checklist_id": c["checklist_id"], "kind": c["kind"], "for": _name(who),
                    "employee_id": c["employee_id"], "items": [_item_view(i) for i in items]})  # fmt: skip
    return {"employee_id": employee_id, "checklists": out}


@tool(mutates=True)
def complete_checklist_item(ctx: Ctx, employee_id: EmployeeId, item_id: ItemId) -> dict[str, Any]:
    """Mark a checklist item done. Only its owner can, and only after the item it depends on."""
    i = ctx.one("SELECT * FROM checklist_items WHERE item_id = ?", (item_id,))
    assert i is not None
    if i["owner_id"] != employee_id:
        owner = _emp(ctx, i["owner_id"])
        raise ToolError("policy_violation", f"'{i['title']}' belongs to {_name(owner)} ({owner['employee_id']}); only "
                        "an item's owner can complete it (policy R9). Ask them to do it.")  # fmt: skip
    if i["done_at"] is not None:
        raise ToolError("conflict", f"'{i['title']}' is already done; nothing to change.")
    if i["depends_on"]:
        dep = ctx.one("SELECT * FROM checklist_items WHERE item_id = ?", (i["depends_on"],))
        assert dep is not None
        if dep["done_at"] is None:
            raise ToolError("policy_violation", f"'{i['title']}' depends on '{dep['title']}' ({dep['item_id']}), which "
                            "is not done yet; items are completed in order (policy R9). Ask its owner to finish it first.")  # fmt: skip
    ctx.execute("UPDATE checklist_items SET done_at = ? WHERE item_id = ?", (ctx.now, item_id))
    left = ctx.value("SELECT count(*) FROM checklist_items WHERE checklist_id = ? AND done_at IS NULL",
                     (i["checklist_id"],))  # fmt: skip
    if left == 0:
        ctx.execute("UPDATE checklists SET status = 'complete' WHERE checklist_id = ?", (i["checklist_id"],))
    row = ctx.one("SELECT * FROM checklist_items WHERE item_id = ?", (item_id,))
    assert row is not None
    return {**_item_view(row), "checklist_id": i["checklist_id"], "items_left": left}


@tool(mutates=True, yields={"checklist_item": "items[].item_id"})
def start_offboarding(
    ctx: Ctx,
    employee_id: ManagerId,
    colleague_id: ColleagueId,
    last_day: Annotated[str, Field(description="The colleague's last working day, YYYY-MM-DD.")],
) -> dict[str, Any]:
    """Start offboarding a direct report (HR: anyone) who is leaving: records their last day and opens the
    offboarding checklist."""
    me, subject = _emp(ctx, employee_id), _emp(ctx, colleague_id)
    if subject["employee_id"] == employee_id or not (_manages(ctx, me, subject) or _is_hr(me)):
        raise ToolError("policy_violation", f"Only {_name(subject)}'s direct manager or HR can start their offboarding "
                        "(policy R10). For your own resignation, transfer the case to an HR partner.")
    if subject["status"] != "active":
        raise ToolError("policy_violation", f"{_name(subject)} is {subject['status']}; offboarding starts only for "
                        "active employees (policy R10). For someone on leave, transfer the case to an HR partner.")
    if ctx.value("SELECT 1 FROM checklists WHERE employee_id = ? AND kind = 'offboarding' AND status = 'open'",
                 (colleague_id,)):  # fmt: skip
        raise ToolError("policy_violation", f"{_name(subject)} is already being offboarded (policy R10). Check get_checklist.")
    day = _date(last_day, "last_day")
    if day < TODAY:
        raise ToolError("policy_violation", f"The last day {day} is in the past (policy R10); ask for today or a "
                        "later business day.")  # fmt: skip
    if day.weekday() >= 5 or day in HOLIDAY_DATES:
        raise ToolError("policy_violation", f"{day} is not a business day (policy R10); ask for the business day "
                        "before or after it.")  # fmt: skip
    checklist_id = next_id(ctx, "checklists", "checklist_id", "CL-")
    ctx.execute("INSERT INTO checklists VALUES (?, ?, 'offboarding', 'open', ?)", (checklist_id, colleague_id, ctx.now))
    it = ctx.value("SELECT employee_id FROM employees WHERE title = 'IT Support Specialist' AND status = 'active' "
                   "ORDER BY employee_id LIMIT 1")  # fmt: skip
    hr = employee_id if _is_hr(me) else ctx.value("SELECT employee_id FROM employees WHERE role = 'hr' AND status = "
                                                  "'active' ORDER BY employee_id LIMIT 1")  # fmt: skip
    owners = {"self": colleague_id, "manager": subject["manager_id"] or hr, "it": it, "hr": hr}
    ids: list[str] = []
    for seq, (title, owner, dep) in enumerate(OFFBOARDING, start=1):
        item_id = next_id(ctx, "checklist_items", "item_id", "CI-")
        ids.append(item_id)
        due = min(add_business_days(TODAY, seq, HOLIDAY_DATES), day)
        ctx.execute("INSERT INTO checklist_items VALUES (?, ?, ?, ?, ?, ?, ?, NULL)",
                    (item_id, checklist_id, seq, title, owners[owner], due.isoformat(),
                     ids[dep] if dep is not None else None))  # fmt: skip
    ctx.execute("UPDATE employees SET termination_date = ? WHERE employee_id = ?", (day.isoformat(), colleague_id))
    items = ctx.all("SELECT * FROM checklist_items WHERE checklist_id = ? ORDER BY seq", (checklist_id,))
    return {"checklist_id": checklist_id, "employee_id": colleague_id, "name": _name(subject),
            "last_day": day.isoformat(), "items": [_item_view(i) for i in items]}  # fmt: skip


# -- documents and contacts ------------------------------------------------------------------------------


def _doc_view(row: dict[str, Any]) -> dict[str, Any]:
    return {"document_id": row["document_id"], "employee_id": row["employee_id"], "type": row["doc_type"],
            "title": row["title"], "confidential": bool(row["confidential"]), "created_at": row["created_at"]}


@tool(yields={"document": "documents[].document_id"})
def list_documents(ctx: Ctx, employee_id: EmployeeId, subject_id: ColleagueId | None = None) -> dict[str, Any]:
    """Documents on file (contracts, payslips, reviews, ID copies): your own, or a direct report's non-confidential
    ones, or (for HR) anyone's.

    Args:
        subject_id: Whose documents; leave it out for your own.
    """
    viewer, subject = _emp(ctx, employee_id), _emp(ctx, subject_id or employee_id)
    access = _may_see(ctx, viewer, subject, "documents")
    rows = ctx.all("SELECT * FROM documents WHERE employee_id = ? AND (confidential = 0 OR ?) ORDER BY created_at, "
                   "document_id", (subject["employee_id"], int(access != "manager")))  # fmt: skip
    return {"employee_id": subject["employee_id"], "documents": [_doc_view(r) for r in rows]}


@tool
def get_document(ctx: Ctx, document_id: DocumentId) -> dict[str, Any]:
    """A document's details (type, title, owner, confidentiality); request_document_copy sends the file."""
    row = ctx.one("SELECT * FROM documents WHERE document_id = ?", (document_id,))
    assert row is not None
    return _doc_view(row)


@tool(mutates=True)
def request_document_copy(ctx: Ctx, employee_id: EmployeeId, document_id: DocumentId) -> dict[str, Any]:
    """Email a copy of a document to your work address: your own documents, a direct report's non-confidential
    ones, or (for HR) anyone's."""
    me = _emp(ctx, employee_id)
    doc = ctx.one("SELECT * FROM documents WHERE document_id = ?", (document_id,))
    assert doc is not None
    access = _may_see(ctx, me, _emp(ctx, doc["employee_id"]), "documents")
    if access == "manager" and doc["confidential"]:
        raise ToolError("policy_violation", f"'{doc['title']}' is confidential; a manager gets only a report's "
                        "non-confidential documents (policy R8). Ask the employee to request it themselves.")  # fmt: skip
    cur = ctx.execute("INSERT INTO document_requests (document_id, requested_by, sent_to, created_at) VALUES (?, ?, ?, ?)",
                      (document_id, employee_id, me["email"], ctx.now))  # fmt: skip
    return {"request_id": cur.lastrowid, "document": _doc_view(doc), "sent_to": me["email"]}


_PHONE = re.compile(r"^\+?1?[-. (]*(\d{3})[-. )]*(\d{3})[-. ]*(\d{4})$")


@tool(mutates=True)
def update_emergency_contact(
    ctx: Ctx,
    employee_id: EmployeeId,
    name: Annotated[str, Field(description="The contact's full name, e.g. 'Maria Chen'.")],
    relationship: Literal["spouse", "partner", "parent", "sibling", "child", "friend", "other"],
    phone: Annotated[str, Field(description="A US phone number, e.g. '+1-512-555-0147'.")],
) -> dict[str, Any]:
    """Add an emergency contact, or update the one with the same name (relationship and phone)."""
    match = _PHONE.match(phone.strip())
    if not name.strip() or len(name.split()) < 2:
        raise ToolError("invalid_arguments", "name must be the contact's full name (first and last); ask for it.")
    if match is None:
        raise ToolError("invalid_arguments", f"phone {phone!r} is not a US number with area code; ask for all ten "
                        "digits, e.g. '+1-512-555-0147'.")  # fmt: skip
    assert relationship in RELATIONSHIPS
    number = f"+1-{match[1]}-{match[2]}-{match[3]}"
    existing = ctx.one("SELECT * FROM emergency_contacts WHERE employee_id = ? AND lower(name) = ?",
                       (employee_id, name.strip().lower()))  # fmt: skip
    if existing:
        if existing["relationship"] == relationship and existing["phone"] == number:
            raise ToolError("conflict", f"{name} is already on file with that relationship and phone; nothing to change.")
        ctx.execute("UPDATE emergency_contacts SET relationship = ?, phone = ?, updated_at = ? WHERE contact_id = ?",
                    (relationship, number, ctx.now, existing["contact_id"]))  # fmt: skip
    else:
        ctx.execute("INSERT INTO emergency_contacts (employee_id, name, relationship, phone, updated_at) "
                    "VALUES (?, ?, ?, ?, ?)", (employee_id, name.strip(), relationship, number, ctx.now))  # fmt: skip
    contacts = ctx.all("SELECT name, relationship, phone FROM emergency_contacts WHERE employee_id = ? "
                       "ORDER BY contact_id", (employee_id,))  # fmt: skip
    return {"employee_id": employee_id, "emergency_contacts": contacts}


@tool(mutates=True, yields={"hr_case": "case_id"}, confirm=False)
def transfer_to_hr_partner(
    ctx: Ctx,
    employee_id: EmployeeId,
    summary: Annotated[str, Field(description="What the employee needs and what was tried (one or two sentences).")],
) -> dict[str, Any]:
    """Hand the case to a human HR partner by opening an HR case with a summary.

    Use it only for what the tools and the policy cannot handle (payroll errors, complaints, your own
    resignation, leave already taken)."""
    if not summary.strip():
        raise ToolError("policy_violation", "A transfer needs a summary of the employee's request (policy R12); write one and try again.")
    cur = ctx.execute("INSERT INTO hr_cases (employee_id, summary, status, created_at) VALUES (?, ?, 'open', ?)",
                      (employee_id, summary.strip(), ctx.now))  # fmt: skip
    return {"case_id": cur.lastrowid, "status": "open",
            "message": "Transferred: an HR partner will contact the employee. Tell them and end the chat."}


TOOLS = [
    find_employee_by_email,
    find_employee_by_name_and_department,
    get_employee,
    get_directory_entry,
    list_direct_reports,
    get_leave_balance,
    list_leave_requests,
    list_team_leave_requests,
    get_leave_request,
    list_holidays,
    get_compensation,
    list_compensation_changes,
    get_compensation_change,
    get_checklist,
    list_documents,
    get_document,
    calculate,
    submit_leave_request,
    cancel_leave_request,
    approve_leave_request,
    reject_leave_request,
    request_compensation_change,
    approve_compensation_change,
    complete_checklist_item,
    start_offboarding,
    request_document_copy,
    update_emergency_contact,
    transfer_to_hr_partner,
]
