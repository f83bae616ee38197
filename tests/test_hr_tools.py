"""The hr read tools show what the policy turns on (balances, approvers, access), never write, and name the next
tool in their errors; write results carry what the agent must tell the employee."""

from __future__ import annotations

from typing import Any

import pytest

from toolworld import Episode
from toolworld.world import get_world
from toolworld.worlds.hr.common import HOLIDAYS, YEAR
from world_kit import ok, one


@pytest.fixture(scope="module")
def hr():
    return get_world("hr")


@pytest.fixture
def ep(hr) -> Episode:
    with hr.episode(0) as e:
        yield e


def call(ep: Episode, tool: str, **args: Any) -> Any:
    """``ok`` with the arguments as keywords."""
    return ok(ep, tool, args)


def test_read_tools_never_change_the_state(ep, hr):
    mgr = one(ep, "SELECT employee_id FROM employees WHERE role = 'hr' AND status = 'active' ORDER BY employee_id")
    me = mgr["employee_id"]
    before = ep.state_hash()
    for tool, args in [("get_employee", {"employee_id": me}), ("list_direct_reports", {"manager_id": me}),
                       ("get_leave_balance", {"employee_id": me}), ("list_leave_requests", {"employee_id": me}),
                       ("list_team_leave_requests", {"manager_id": me}), ("list_holidays", {}),
                       ("get_compensation", {"employee_id": me}), ("list_compensation_changes", {"employee_id": me}),
                       ("get_checklist", {"employee_id": me}), ("list_documents", {"employee_id": me})]:  # fmt: skip
        assert not hr.tools[tool].spec.mutates
        call(ep, tool, **args)
    assert ep.state_hash() == before


def test_balance_separates_carry_over_from_the_allowance(ep):
    b = one(ep, "SELECT employee_id, allowance_days, carried_over_days FROM leave_balances b WHERE year = ? AND "
            "leave_type = 'vacation' AND carried_over_days > 0 AND NOT EXISTS (SELECT 1 FROM leave_requests r WHERE "
            "r.employee_id = b.employee_id AND r.leave_type = 'vacation' AND r.start_date >= '2026-01-01' AND "
            "r.status IN ('pending', 'approved')) ORDER BY employee_id", (YEAR,))  # fmt: skip
    vac = next(x for x in call(ep, "get_leave_balance", employee_id=b["employee_id"])["balances"]
               if x["leave_type"] == "vacation")  # fmt: skip
    assert vac["booked"] == 0 and vac["carried_over"] == b["carried_over_days"]
    assert vac["available_after_march_31"] == b["allowance_days"]
    assert vac["available_until_march_31"] == b["allowance_days"] + b["carried_over_days"]


def test_holidays_and_contractors(ep):
    assert len(call(ep, "list_holidays", year=YEAR)["holidays"]) == sum(d.startswith(str(YEAR)) for d, _ in HOLIDAYS)
    contractor = one(ep, "SELECT employee_id FROM employees WHERE employment_type = 'contractor' ORDER BY employee_id")
    r = ep.call("get_leave_balance", {"employee_id": contractor["employee_id"]})
    assert not r.ok and r.error.type == "not_found" and "agency" in r.error.message


def test_skip_level_sees_the_changes_it_approves(ep):
    c = one(ep, "SELECT c.change_id, m.manager_id AS skip FROM comp_change_requests c JOIN employees e ON e.employee_id "
            "= c.employee_id JOIN employees m ON m.employee_id = e.manager_id WHERE c.status = 'pending' "
            "ORDER BY c.change_id")  # fmt: skip
    listed = call(ep, "list_compensation_changes", employee_id=c["skip"])["awaiting_your_approval"]
    assert c["change_id"] in [x["change_id"] for x in listed]
    change = call(ep, "get_compensation_change", employee_id=c["skip"], change_id=c["change_id"])
    assert change["needs_hr_approval"] == (abs(change["change_percent"]) > 15)
    # a colleague who neither proposed nor approves it does not see the salaries in it (policy R8)
    other = one(ep, "SELECT e.employee_id FROM employees e JOIN comp_change_requests c ON c.change_id = ? WHERE "
                "e.role != 'hr' AND e.status = 'active' AND e.employee_id NOT IN (c.employee_id, c.proposed_by, ?) "
                "ORDER BY e.employee_id", (c["change_id"], c["skip"]))  # fmt: skip
    r = ep.call("get_compensation_change", {"employee_id": other["employee_id"], "change_id": c["change_id"]})
    assert not r.ok and r.error.type == "policy_violation" and "policy R8" in r.error.message


def test_employee_record_shows_manager_contacts_and_previous_record(ep):
    e = one(ep, "SELECT employee_id, manager_id FROM employees WHERE rehire_of IS NOT NULL ORDER BY employee_id")
    out = call(ep, "get_employee", employee_id=e["employee_id"])
    assert out["previous_record"] and (out["manager"] or {}).get("employee_id") == e["manager_id"]
    ceo = one(ep, "SELECT employee_id FROM employees WHERE title = 'Chief Executive Officer'")
    assert call(ep, "get_employee", employee_id=ceo["employee_id"])["manager"] is None


def test_submit_reports_business_days_and_emergency_contact_is_normalized(ep):
    me = one(ep, "SELECT e.employee_id FROM employees e WHERE status = 'active' AND employment_type = 'employee' AND "
             "NOT EXISTS (SELECT 1 FROM leave_requests r WHERE r.employee_id = e.employee_id AND r.start_date >= "
             "'2026-05-01' AND r.start_date <= '2026-05-31') ORDER BY employee_id")["employee_id"]  # fmt: skip
    out = call(ep, "submit_leave_request", employee_id=me, leave_type="vacation", start_date="2026-05-21",
               end_date="2026-05-26")  # fmt: skip
    assert out["business_days"] == 3 and out["status"] == "pending"  # Thu, Fri, (Memorial Day), Tue
    contacts = call(ep, "update_emergency_contact", employee_id=me, name="Rosa Diaz", relationship="sibling",
                    phone="(512) 555 0142")["emergency_contacts"]  # fmt: skip
    assert {"name": "Rosa Diaz", "relationship": "sibling", "phone": "+1-512-555-0142"} in contacts
    r = ep.call("update_emergency_contact", {"employee_id": me, "name": "Rosa Diaz", "relationship": "sibling",
                                             "phone": "555-0142"})  # fmt: skip
    assert not r.ok and r.error.type == "invalid_arguments"
