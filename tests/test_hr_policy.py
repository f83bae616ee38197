"""Every numbered rule of the hr policy.md has a test here proving that the tools enforce it.

Test names carry the rule id (``test_R3_...``); ``test_every_policy_rule_is_tested`` fails when a rule is added
to policy.md without a test. Each test first identifies the person writing in, as an agent must, so the
episode's ownership check (rule R11) is live throughout.
"""

from __future__ import annotations

from typing import Any

import pytest

from toolworld import Episode
from toolworld.world import get_world
from toolworld.worlds.hr.common import CARRY_EXPIRY, TODAY
from world_kit import assert_every_rule_tested, ok, one, violation


@pytest.fixture(scope="module")
def hr():
    return get_world("hr")


@pytest.fixture
def ep(hr) -> Episode:
    with hr.episode(0) as e:
        yield e


def login(ep: Episode, employee_id: str) -> str:
    email = one(ep, "SELECT email FROM employees WHERE employee_id = ?", (employee_id,))["email"]
    r = ep.call("find_employee_by_email", {"email": email})
    assert r.ok and r.output["employee_id"] == employee_id, r.output
    return employee_id


ACTIVE_MANAGER = "m.status = 'active' AND m.role = 'manager'"


def pending_of_report(ep: Episode, when: str) -> dict[str, Any]:
    """A pending request of someone whose active manager decides it; ``when``: 'future' or 'stale'."""
    cond = "r.start_date > '2026-03-31'" if when == "future" else "r.start_date < '2026-01-01'"
    return one(ep, "SELECT r.request_id, r.employee_id, e.manager_id FROM leave_requests r JOIN employees e "
               "ON e.employee_id = r.employee_id JOIN employees m ON m.employee_id = e.manager_id "
               f"WHERE r.status = 'pending' AND {cond} AND {ACTIVE_MANAGER} ORDER BY r.request_id")  # fmt: skip


def plain_employee(ep: Episode, extra: str = "") -> str:
    return one(ep, "SELECT employee_id FROM employees WHERE status = 'active' AND role = 'employee' AND "
               f"employment_type = 'employee' {extra} ORDER BY employee_id")["employee_id"]  # fmt: skip


def free_weekdays(ep: Episode, employee_id: str, start: str, n: int) -> tuple[str, str]:
    """``n`` business days from the first free Monday on or after ``start`` (no clash with their requests)."""
    from datetime import date, timedelta

    from toolworld.worlds.hr.common import HOLIDAY_DATES
    from toolworld.worlds.shared.clock import add_business_days

    d = date.fromisoformat(start)
    while True:
        d += timedelta(days=(7 - d.weekday()) % 7)
        end = add_business_days(d, n - 1, HOLIDAY_DATES)
        clash = ep.query("SELECT 1 FROM leave_requests WHERE employee_id = ? AND status IN ('pending', 'approved') "
                         "AND start_date <= ? AND end_date >= ?", (employee_id, end.isoformat(), d.isoformat()))
        if not clash and d not in HOLIDAY_DATES:
            return d.isoformat(), end.isoformat()
        d += timedelta(days=7)


# -- R1 ------------------------------------------------------------------------------------------------------


def test_R1_only_the_direct_manager_decides_leave(ep):
    q = pending_of_report(ep, "future")
    peer = one(ep, "SELECT employee_id FROM employees WHERE role = 'manager' AND status = 'active' AND employee_id "
               "!= ? ORDER BY employee_id", (q["manager_id"],))["employee_id"]  # fmt: skip
    login(ep, peer)
    msg = violation(ep, "approve_leave_request", {"manager_id": peer, "request_id": q["request_id"]}, "R1")
    assert q["manager_id"] in msg  # says who the approver is
    login(ep, q["manager_id"])
    out = ok(ep, "approve_leave_request", {"manager_id": q["manager_id"], "request_id": q["request_id"]})
    assert out["status"] == "approved" and out["decided_by"] == q["manager_id"]
    violation(ep, "approve_leave_request", {"manager_id": q["manager_id"], "request_id": q["request_id"]}, "R1")


def test_R1_stale_requests_can_only_be_rejected(ep):
    q = pending_of_report(ep, "stale")
    login(ep, q["manager_id"])
    violation(ep, "approve_leave_request", {"manager_id": q["manager_id"], "request_id": q["request_id"]}, "R1")
    out = ok(ep, "reject_leave_request", {"manager_id": q["manager_id"], "request_id": q["request_id"],
                                          "reason": "It is out of date."})  # fmt: skip
    assert out["status"] == "rejected"


def test_R1_skip_level_decides_when_the_manager_is_on_leave(ep):
    q = one(ep, "SELECT r.request_id, m.employee_id AS manager_id, m.manager_id AS skip FROM leave_requests r "
            "JOIN employees e ON e.employee_id = r.employee_id JOIN employees m ON m.employee_id = e.manager_id "
            "WHERE r.status = 'pending' AND r.start_date > ? AND m.status = 'on_leave' AND m.manager_id IS NOT NULL "
            "ORDER BY r.request_id", (TODAY.isoformat(),))  # fmt: skip
    login(ep, q["manager_id"])
    violation(ep, "approve_leave_request", {"manager_id": q["manager_id"], "request_id": q["request_id"]}, "R1")
    login(ep, q["skip"])
    listed = ok(ep, "list_team_leave_requests", {"manager_id": q["skip"]})
    assert q["request_id"] in [r["request_id"] for r in listed["requests"]]
    assert ok(ep, "approve_leave_request", {"manager_id": q["skip"], "request_id": q["request_id"]})["status"] == "approved"


# -- R2 / R3 / R4 ----------------------------------------------------------------------------------------------


def test_R2_request_cannot_exceed_the_balance_but_unpaid_can(ep):
    me = login(ep, plain_employee(ep))
    bal = ok(ep, "get_leave_balance", {"employee_id": me})["balances"]
    sick = next(b for b in bal if b["leave_type"] == "sick")
    start, end = free_weekdays(ep, me, "2026-06-01", sick["available_after_march_31"] + 1)
    msg = violation(ep, "submit_leave_request", {"employee_id": me, "leave_type": "sick", "start_date": start,
                                                 "end_date": end}, "R2")  # fmt: skip
    assert str(sick["available_after_march_31"]) in msg
    out = ok(ep, "submit_leave_request", {"employee_id": me, "leave_type": "unpaid", "start_date": start,
                                          "end_date": end})  # fmt: skip
    assert out["status"] == "pending" and out["business_days"] == sick["available_after_march_31"] + 1


def test_R3_carried_over_days_only_cover_leave_ending_by_march_31(ep):
    me = one(ep, "SELECT b.employee_id FROM leave_balances b JOIN employees e ON e.employee_id = b.employee_id "
             "WHERE b.year = 2026 AND b.leave_type = 'vacation' AND b.carried_over_days >= 3 AND e.status = 'active' "
             "AND NOT EXISTS (SELECT 1 FROM leave_requests r WHERE r.employee_id = b.employee_id AND r.start_date >= "
             "'2026-01-01' AND r.status IN ('pending', 'approved')) ORDER BY b.employee_id")["employee_id"]  # fmt: skip
    login(ep, me)
    vac = next(b for b in ok(ep, "get_leave_balance", {"employee_id": me})["balances"] if b["leave_type"] == "vacation")
    assert vac["available_until_march_31"] == vac["available_after_march_31"] + vac["carried_over"]
    n = vac["available_after_march_31"] + 2  # needs two carried-over days
    late = free_weekdays(ep, me, "2026-06-01", n)
    violation(ep, "submit_leave_request", {"employee_id": me, "leave_type": "vacation", "start_date": late[0],
                                           "end_date": late[1]}, "R3")  # fmt: skip
    # A short request before the expiry may use them.
    early = free_weekdays(ep, me, "2026-03-16", 3)
    assert early[1] <= CARRY_EXPIRY.isoformat()
    ok(ep, "submit_leave_request", {"employee_id": me, "leave_type": "vacation", "start_date": early[0],
                                    "end_date": early[1]})  # fmt: skip


def test_R4_leave_dates(ep):
    me = login(ep, plain_employee(ep))
    base = {"employee_id": me, "leave_type": "unpaid"}
    violation(ep, "submit_leave_request", {**base, "start_date": "2026-03-02", "end_date": "2026-03-03"}, "R4")
    violation(ep, "submit_leave_request", {**base, "start_date": "2026-12-28", "end_date": "2027-01-04"}, "R4")
    violation(ep, "submit_leave_request", {**base, "start_date": "2026-03-14", "end_date": "2026-03-15"}, "R4")
    violation(ep, "submit_leave_request", {**base, "start_date": "2026-03-20", "end_date": "2026-03-19"}, None,
              "invalid_arguments")  # fmt: skip
    # Holidays are not leave days: Thursday, the Spring Company Day (Friday April 3) and Monday make 2 days.
    out = ok(ep, "submit_leave_request", {**base, "start_date": "2026-04-02", "end_date": "2026-04-06"})
    assert out["business_days"] == 2
    violation(ep, "submit_leave_request", {**base, "start_date": "2026-04-06", "end_date": "2026-04-07"}, "R4")
    contractor = login(ep, one(ep, "SELECT employee_id FROM employees WHERE employment_type = 'contractor' AND "
                               "status = 'active' ORDER BY employee_id")["employee_id"])  # fmt: skip
    violation(ep, "submit_leave_request", {**base, "employee_id": contractor, "start_date": "2026-05-04",
                                           "end_date": "2026-05-05"}, "R4")  # fmt: skip


# -- R5 ------------------------------------------------------------------------------------------------------


def test_R5_only_pending_or_future_approved_leave_is_cancelled(ep):
    past = one(ep, "SELECT request_id, employee_id FROM leave_requests WHERE status = 'approved' AND start_date < ? "
               "AND start_date >= '2026-01-01' ORDER BY request_id", (TODAY.isoformat(),))  # fmt: skip
    login(ep, past["employee_id"])
    violation(ep, "cancel_leave_request", {"employee_id": past["employee_id"], "request_id": past["request_id"]}, "R5")
    future = one(ep, "SELECT request_id, employee_id FROM leave_requests WHERE status = 'approved' AND start_date > ? "
                 "ORDER BY request_id", (TODAY.isoformat(),))  # fmt: skip
    login(ep, future["employee_id"])
    out = ok(ep, "cancel_leave_request", {"employee_id": future["employee_id"], "request_id": future["request_id"]})
    assert out["status"] == "cancelled"
    violation(ep, "cancel_leave_request", {"employee_id": future["employee_id"], "request_id": future["request_id"]},
              "R5")  # fmt: skip


# -- R6 / R7 ---------------------------------------------------------------------------------------------------


def report_without_pending_change(ep: Episode) -> dict[str, Any]:
    return one(ep, "SELECT e.employee_id, e.manager_id FROM employees e JOIN employees m ON m.employee_id = "
               "e.manager_id WHERE e.status = 'active' AND e.employment_type = 'employee' AND m.role = 'manager' AND "
               "m.status = 'active' AND m.manager_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM comp_change_requests c "
               "WHERE c.employee_id = e.employee_id AND c.status = 'pending') ORDER BY e.employee_id")  # fmt: skip


def test_R6_only_the_manager_or_hr_proposes_a_pay_change(ep):
    r = report_without_pending_change(ep)
    peer = login(ep, plain_employee(ep, f"AND employee_id != '{r['employee_id']}'"))
    args = {"colleague_id": r["employee_id"], "new_salary": 99000.0, "reason": "promotion"}
    violation(ep, "request_compensation_change", {"employee_id": peer, **args}, "R6")
    login(ep, r["manager_id"])
    out = ok(ep, "request_compensation_change", {"employee_id": r["manager_id"], **args})
    assert out["status"] == "pending" and out["proposed_salary"] == 99000.0
    violation(ep, "request_compensation_change", {"employee_id": r["manager_id"], **args}, "R6")  # one at a time


def test_R7_approval_by_skip_level_or_hr_and_above_15_percent_hr_only(ep):
    big = one(ep, "SELECT c.change_id, c.proposed_by, m.manager_id AS skip FROM comp_change_requests c JOIN employees e "
              "ON e.employee_id = c.employee_id JOIN employees m ON m.employee_id = e.manager_id JOIN employees s "
              "ON s.employee_id = m.manager_id WHERE c.status = 'pending' AND s.role = 'manager' AND "
              "c.proposed_salary_cents * 100 > 115 * c.current_salary_cents ORDER BY c.change_id")  # fmt: skip
    login(ep, big["proposed_by"])
    violation(ep, "approve_compensation_change", {"employee_id": big["proposed_by"], "change_id": big["change_id"]}, "R7")
    login(ep, big["skip"])
    violation(ep, "approve_compensation_change", {"employee_id": big["skip"], "change_id": big["change_id"]}, "R7")
    hr = login(ep, one(ep, "SELECT employee_id FROM employees WHERE role = 'hr' AND status = 'active' "
                       "ORDER BY employee_id")["employee_id"])  # fmt: skip
    out = ok(ep, "approve_compensation_change", {"employee_id": hr, "change_id": big["change_id"]})
    assert out["status"] == "approved" and out["effective_date"] == "2026-04-01"
    small = one(ep, "SELECT c.change_id, c.employee_id, m.manager_id AS skip FROM comp_change_requests c JOIN employees e "
                "ON e.employee_id = c.employee_id JOIN employees m ON m.employee_id = e.manager_id WHERE c.status = "
                "'pending' AND c.proposed_salary_cents * 100 <= 115 * c.current_salary_cents AND m.manager_id != "
                "c.proposed_by ORDER BY c.change_id")  # fmt: skip
    login(ep, small["skip"])
    ok(ep, "approve_compensation_change", {"employee_id": small["skip"], "change_id": small["change_id"]})
    latest = ep.query("SELECT effective_date FROM compensation WHERE employee_id = ? ORDER BY comp_id DESC LIMIT 1",
                      (small["employee_id"],))[0]  # fmt: skip
    assert latest["effective_date"] == "2026-04-01"


# -- R8 --------------------------------------------------------------------------------------------------------


def test_R8_who_sees_compensation_and_documents(ep):
    r = one(ep, "SELECT e.employee_id, e.manager_id FROM employees e JOIN employees m ON m.employee_id = e.manager_id "
            "WHERE e.status = 'active' AND m.status = 'active' AND m.role = 'manager' AND EXISTS (SELECT 1 FROM "
            "documents d WHERE d.employee_id = e.employee_id AND d.confidential = 1) ORDER BY e.employee_id")  # fmt: skip
    peer = login(ep, plain_employee(ep, f"AND employee_id != '{r['employee_id']}' AND manager_id != "
                                        f"'{r['employee_id']}'"))  # fmt: skip
    r_pay = ep.call("get_compensation", {"employee_id": peer, "subject_id": r["employee_id"]})
    assert not r_pay.ok and r_pay.error.type == "policy_violation" and "policy R8" in r_pay.error.message
    secret = one(ep, "SELECT document_id FROM documents WHERE employee_id = ? AND confidential = 1",
                 (r["employee_id"],))["document_id"]  # fmt: skip
    violation(ep, "request_document_copy", {"employee_id": peer, "document_id": secret}, "R8")
    mgr = login(ep, r["manager_id"])
    assert ok(ep, "get_compensation", {"employee_id": mgr, "subject_id": r["employee_id"]})["annual_salary"] > 0
    docs = ok(ep, "list_documents", {"employee_id": mgr, "subject_id": r["employee_id"]})["documents"]
    assert docs and not any(d["confidential"] for d in docs)
    violation(ep, "request_document_copy", {"employee_id": mgr, "document_id": secret}, "R8")
    me = login(ep, r["employee_id"])
    assert ok(ep, "request_document_copy", {"employee_id": me, "document_id": secret})["sent_to"].endswith("example.com")


# -- R9 / R10 -----------------------------------------------------------------------------------------------------


def test_R9_checklist_items_by_their_owner_in_order(ep):
    blocked = one(ep, "SELECT i.item_id, i.owner_id, i.depends_on, d.owner_id AS dep_owner FROM checklist_items i "
                  "JOIN checklist_items d ON d.item_id = i.depends_on JOIN checklists c ON c.checklist_id = "
                  "i.checklist_id WHERE c.status = 'open' AND i.done_at IS NULL AND d.done_at IS NULL "
                  "ORDER BY i.item_id")  # fmt: skip
    owner = login(ep, blocked["owner_id"])
    violation(ep, "complete_checklist_item", {"employee_id": owner, "item_id": blocked["item_id"]}, "R9")
    if blocked["dep_owner"] != owner:
        violation(ep, "complete_checklist_item", {"employee_id": owner, "item_id": blocked["depends_on"]}, "R9")
    dep_owner = login(ep, blocked["dep_owner"])
    ok(ep, "complete_checklist_item", {"employee_id": dep_owner, "item_id": blocked["depends_on"]})
    login(ep, owner)
    assert ok(ep, "complete_checklist_item", {"employee_id": owner, "item_id": blocked["item_id"]})["done"] is True


def test_R10_offboarding(ep):
    r = one(ep, "SELECT e.employee_id, e.manager_id FROM employees e JOIN employees m ON m.employee_id = e.manager_id "
            "WHERE e.status = 'active' AND m.status = 'active' AND e.termination_date IS NULL ORDER BY e.employee_id")
    away = one(ep, "SELECT e.employee_id, e.manager_id FROM employees e JOIN employees m ON m.employee_id = "
               "e.manager_id WHERE e.status = 'on_leave' AND m.status = 'active' ORDER BY e.employee_id")  # fmt: skip
    peer = login(ep, plain_employee(ep, f"AND employee_id != '{r['employee_id']}'"))
    violation(ep, "start_offboarding", {"employee_id": peer, "colleague_id": r["employee_id"],
                                        "last_day": "2026-04-10"}, "R10")  # fmt: skip
    mgr = login(ep, r["manager_id"])
    for day in ("2026-03-02", "2026-04-11", "2026-04-03"):  # past, a Saturday, a company holiday
        violation(ep, "start_offboarding", {"employee_id": mgr, "colleague_id": r["employee_id"], "last_day": day}, "R10")
    out = ok(ep, "start_offboarding", {"employee_id": mgr, "colleague_id": r["employee_id"], "last_day": "2026-04-10"})
    assert len(out["items"]) == 5 and out["last_day"] == "2026-04-10"
    assert ep.query("SELECT termination_date FROM employees WHERE employee_id = ?",
                    (r["employee_id"],))[0]["termination_date"] == "2026-04-10"  # fmt: skip
    violation(ep, "start_offboarding", {"employee_id": mgr, "colleague_id": r["employee_id"], "last_day": "2026-04-17"},
              "R10")  # fmt: skip
    boss = login(ep, away["manager_id"])
    violation(ep, "start_offboarding", {"employee_id": boss, "colleague_id": away["employee_id"],
                                        "last_day": "2026-04-10"}, "R10")  # fmt: skip


# -- R11 / R12 -----------------------------------------------------------------------------------------------------


def test_R11_act_only_as_the_identified_employee(ep):
    a = login(ep, plain_employee(ep))
    other = one(ep, "SELECT request_id, employee_id FROM leave_requests WHERE status = 'pending' AND start_date > ? "
                "AND employee_id != ? ORDER BY request_id", (TODAY.isoformat(), a))  # fmt: skip
    violation(ep, "cancel_leave_request", {"employee_id": other["employee_id"], "request_id": other["request_id"]},
              "R11")  # fmt: skip
    violation(ep, "cancel_leave_request", {"employee_id": a, "request_id": other["request_id"]}, "R11")
    violation(ep, "update_emergency_contact", {"employee_id": other["employee_id"], "name": "Ana Costa",
                                               "relationship": "friend", "phone": "+1-512-555-0100"}, "R11")  # fmt: skip


def test_R12_transfer_needs_a_summary(ep):
    me = login(ep, plain_employee(ep))
    violation(ep, "transfer_to_hr_partner", {"employee_id": me, "summary": "   "}, "R12")
    out = ok(ep, "transfer_to_hr_partner", {"employee_id": me, "summary": "My payslip is missing overtime."})
    assert out["status"] == "open"


# -- lookups ------------------------------------------------------------------------------------------------------


def test_rehire_lookup_finds_the_current_record(ep):
    row = one(ep, "SELECT n.employee_id, n.email, n.first_name, n.last_name, d.name AS dept FROM employees n "
              "JOIN departments d ON d.department_id = n.department_id WHERE n.rehire_of IS NOT NULL "
              "ORDER BY n.employee_id")  # fmt: skip
    assert ok(ep, "find_employee_by_email", {"email": row["email"].upper()})["employee_id"] == row["employee_id"]
    found = ok(ep, "find_employee_by_name_and_department", {"first_name": row["first_name"], "last_name":
                                                            row["last_name"], "department": row["dept"]})  # fmt: skip
    assert found["employee_id"] == row["employee_id"]
    assert ok(ep, "get_employee", {"employee_id": row["employee_id"]})["previous_record"]


def test_former_employee_email_is_not_identified(ep):
    row = one(ep, "SELECT email FROM employees e WHERE status = 'terminated' AND NOT EXISTS (SELECT 1 FROM employees n "
              "WHERE n.email = e.email AND n.status != 'terminated') ORDER BY email")  # fmt: skip
    r = ep.call("find_employee_by_email", {"email": row["email"]})
    assert not r.ok and "transfer_to_hr_partner" in r.error.message


def test_every_policy_rule_is_tested():
    assert_every_rule_tested("hr", globals(), minimum=8)
