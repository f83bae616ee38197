"""Every numbered rule of the helpdesk policy.md has a test here proving that the tools enforce it.

Test names carry the rule id (``test_R3_...``); ``test_every_policy_rule_is_tested`` fails when a rule is added
to policy.md without a test. Rows are picked from the seed state by what they are, never by a hard-coded id.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from toolworld import Episode
from toolworld.world import get_world
from toolworld.worlds.helpdesk.common import NOW, REOPEN_DAYS, before
from world_kit import assert_every_rule_tested, ok, one, violation

OPEN = "('new', 'open', 'pending', 'on_hold')"
WINDOW_START = before(NOW, REOPEN_DAYS * 86400)


@pytest.fixture(scope="module")
def hd():
    return get_world("helpdesk")


@pytest.fixture
def ep(hd) -> Episode:
    with hd.episode(0) as e:
        yield e


def ticket_of(ep: Episode, where: str, params: tuple[Any, ...] = ()) -> dict[str, Any]:
    """A ticket (with its requester's role and the organisation's plan) whose requester is active."""
    return one(ep, "SELECT t.*, c.role, o.plan, o.plan_status FROM tickets t JOIN contacts c ON c.contact_id = "
                   f"t.requester_id JOIN organizations o ON o.org_id = t.org_id WHERE c.active = 1 AND {where} "
                   "ORDER BY t.ticket_id", params)  # fmt: skip


def contact_of(ep: Episode, where: str, params: tuple[Any, ...] = ()) -> dict[str, Any]:
    return one(ep, "SELECT c.*, o.plan, o.plan_status FROM contacts c JOIN organizations o ON o.org_id = c.org_id "
                   f"WHERE {where} ORDER BY c.contact_id", params)  # fmt: skip


def tags(ep: Episode, ticket_id: int) -> list[str]:
    return [r["name"] for r in ep.query("SELECT g.name FROM ticket_tags tt JOIN tags g ON g.tag_id = tt.tag_id "
                                        "WHERE tt.ticket_id = ?", (ticket_id,))]  # fmt: skip


NO_OUTAGE = "NOT EXISTS (SELECT 1 FROM ticket_tags tt JOIN tags g ON g.tag_id = tt.tag_id WHERE tt.ticket_id = " \
            "t.ticket_id AND g.name = 'outage')"  # fmt: skip


def test_R1_urgent_only_for_business_plans_or_outages(ep):
    small = ticket_of(ep, f"t.status IN {OPEN} AND o.plan = 'team' AND o.plan_status = 'active' AND t.priority != "
                          f"'urgent' AND {NO_OUTAGE}")  # fmt: skip
    msg = violation(ep, "set_priority", {"contact_id": small["requester_id"], "ticket_id": small["ticket_id"],
                                         "priority": "urgent"}, "R1")  # fmt: skip
    assert "'high'" in msg  # says what to offer instead
    big = ticket_of(ep, f"t.status IN {OPEN} AND o.plan = 'enterprise' AND o.plan_status = 'active' AND t.priority "
                        "= 'low'")  # fmt: skip
    out = ok(ep, "set_priority", {"contact_id": big["requester_id"], "ticket_id": big["ticket_id"], "priority": "urgent"})
    assert out["priority"] == "urgent"
    # The SLA due times follow the new priority (enterprise urgent: first response within 1 hour of creation).
    assert out["sla"]["first_response_due"] < big["first_response_due"]
    outage = ticket_of(ep, f"t.status IN {OPEN} AND o.plan IN ('free', 'team') AND NOT {NO_OUTAGE} "
                           "AND t.priority != 'urgent'")  # fmt: skip
    assert "outage" in tags(ep, outage["ticket_id"])
    ok(ep, "set_priority", {"contact_id": outage["requester_id"], "ticket_id": outage["ticket_id"], "priority": "urgent"})
    free = contact_of(ep, "o.plan = 'free' AND c.active = 1 AND c.role != 'billing'")
    violation(ep, "create_ticket", {"contact_id": free["contact_id"], "subject": "Down", "description": "All down.",
                                    "product_area": "api", "priority": "urgent"}, "R1")  # fmt: skip


def test_R2_escalation_only_past_due_or_urgent(ep):
    # Within its SLA (both due times ahead, first reply on time) and not urgent: refused.
    fine = ticket_of(ep, f"t.status IN {OPEN} AND t.priority != 'urgent' AND t.resolution_due > ? AND "
                         "t.first_response_at IS NOT NULL AND t.first_response_at <= t.first_response_due AND t.tier < 3",
                     (NOW,))  # fmt: skip
    msg = violation(ep, "escalate_ticket", {"contact_id": fine["requester_id"], "ticket_id": fine["ticket_id"],
                                            "reason": "Faster please."}, "R2")  # fmt: skip
    assert fine["resolution_due"] in msg
    late = ticket_of(ep, f"t.status IN {OPEN} AND t.priority != 'urgent' AND t.resolution_due < ? AND t.tier = 1",
                     (NOW,))  # fmt: skip
    out = ok(ep, "escalate_ticket", {"contact_id": late["requester_id"], "ticket_id": late["ticket_id"],
                                     "reason": "Blocked for days."})  # fmt: skip
    assert out["tier"] == 2 and out["sla"]["resolution_breached"]
    done = ticket_of(ep, "t.status = 'closed' AND t.resolution_due < ?", (NOW,))
    violation(ep, "escalate_ticket", {"contact_id": done["requester_id"], "ticket_id": done["ticket_id"],
                                      "reason": "Again."}, "R2")  # fmt: skip


def test_R3_reopen_only_recently_solved_by_requester_or_admin(ep):
    solved = ticket_of(ep, "t.status = 'solved' AND t.solved_at >= ? AND EXISTS (SELECT 1 FROM contacts m WHERE "
                           "m.org_id = t.org_id AND m.role = 'member' AND m.active = 1 AND m.contact_id != "
                           "t.requester_id)", (WINDOW_START,))  # fmt: skip
    member = contact_of(ep, "c.org_id = ? AND c.role = 'member' AND c.active = 1 AND c.contact_id != ?",
                        (solved["org_id"], solved["requester_id"]))  # fmt: skip
    violation(ep, "reopen_ticket", {"contact_id": member["contact_id"], "ticket_id": solved["ticket_id"],
                                    "reason": "Back again."}, "R3")  # fmt: skip
    out = ok(ep, "reopen_ticket", {"contact_id": solved["requester_id"], "ticket_id": solved["ticket_id"],
                                   "reason": "Back again."})  # fmt: skip
    assert out["status"] == "open" and "solved_at" not in out
    stale = ticket_of(ep, "t.status = 'solved' AND t.solved_at < ?", (WINDOW_START,))
    violation(ep, "reopen_ticket", {"contact_id": stale["requester_id"], "ticket_id": stale["ticket_id"],
                                    "reason": "Back."}, "R3")  # fmt: skip
    closed = ticket_of(ep, "t.status = 'closed' AND t.merged_into IS NULL AND (o.plan_status = 'active' OR "
                           "t.product_area = 'billing') AND (c.role != 'billing' OR t.product_area = 'billing')")
    msg = violation(ep, "reopen_ticket", {"contact_id": closed["requester_id"], "ticket_id": closed["ticket_id"],
                                          "reason": "Back."}, "R3")  # fmt: skip
    assert "create_follow_up_ticket" in msg
    violation(ep, "add_comment", {"contact_id": closed["requester_id"], "ticket_id": closed["ticket_id"],
                                  "body": "Still broken."}, "R3")  # fmt: skip
    follow = ok(ep, "create_follow_up_ticket", {"contact_id": closed["requester_id"], "ticket_id": closed["ticket_id"],
                                                "description": "It is back."})  # fmt: skip
    assert follow["follow_up_of"] == closed["ticket_id"] and follow["product_area"] == closed["product_area"]
    assert follow["status"] == "new" and follow["subject"].endswith(closed["subject"])
    still_open = ticket_of(ep, f"t.status IN {OPEN}")
    violation(ep, "create_follow_up_ticket", {"contact_id": still_open["requester_id"],
                                              "ticket_id": still_open["ticket_id"], "description": "x"}, "R3")


def _duplicate_pair(ep: Episode) -> tuple[dict[str, Any], dict[str, Any]]:
    row = one(ep, "SELECT a.ticket_id AS older, b.ticket_id AS newer FROM tickets a JOIN tickets b ON b.org_id = "
                  "a.org_id AND b.subject = a.subject AND (b.created_at, b.ticket_id) > (a.created_at, a.ticket_id) "
                  "JOIN contacts c ON c.contact_id = b.requester_id WHERE a.status IN ('new', 'open') AND b.status "
                  "IN ('new', 'open') AND c.active = 1 ORDER BY a.ticket_id")  # fmt: skip
    older = one(ep, "SELECT * FROM tickets WHERE ticket_id = ?", (row["older"],))
    newer = one(ep, "SELECT * FROM tickets WHERE ticket_id = ?", (row["newer"],))
    return older, newer


def test_R4_merge_newer_into_older_same_org_not_closed(ep):
    older, newer = _duplicate_pair(ep)
    who = newer["requester_id"]
    msg = violation(ep, "merge_tickets", {"contact_id": who, "ticket_id": older["ticket_id"],
                                          "into_ticket_id": newer["ticket_id"]}, "R4")  # fmt: skip
    assert "Swap" in msg
    closed = ticket_of(ep, "t.status = 'closed' AND t.org_id = ?", (older["org_id"],)) if ep.query(
        "SELECT 1 FROM tickets WHERE status = 'closed' AND org_id = ?", (older["org_id"],)) else None
    if closed is not None:
        violation(ep, "merge_tickets", {"contact_id": who, "ticket_id": newer["ticket_id"],
                                        "into_ticket_id": closed["ticket_id"]}, "R4")  # fmt: skip
    foreign = ticket_of(ep, f"t.status IN {OPEN} AND t.org_id != ? AND t.created_at < ?",
                        (older["org_id"], newer["created_at"]))  # fmt: skip
    violation(ep, "merge_tickets", {"contact_id": who, "ticket_id": newer["ticket_id"],
                                    "into_ticket_id": foreign["ticket_id"]}, "R4")  # fmt: skip
    out = ok(ep, "merge_tickets", {"contact_id": who, "ticket_id": newer["ticket_id"],
                                   "into_ticket_id": older["ticket_id"]})  # fmt: skip
    assert out["ticket_id"] == older["ticket_id"]
    gone = one(ep, "SELECT status, merged_into FROM tickets WHERE ticket_id = ?", (newer["ticket_id"],))
    assert gone == {"status": "closed", "merged_into": older["ticket_id"]}


def _payer(ep: Episode, not_org: str = "") -> tuple[dict[str, Any], dict[str, Any]]:
    """An active admin and a paid invoice of their organisation with nothing credited yet (not of ``not_org``)."""
    inv = one(ep, "SELECT i.* FROM invoices i WHERE i.status = 'paid' AND i.amount_cents > 120000 AND NOT EXISTS "
                  "(SELECT 1 FROM credits k WHERE k.invoice_id = i.invoice_id) AND EXISTS (SELECT 1 FROM contacts c "
                  "WHERE c.org_id = i.org_id AND c.role = 'admin' AND c.active = 1) AND i.org_id != ? "
                  "ORDER BY i.invoice_id", (not_org,))  # fmt: skip
    admin = contact_of(ep, "c.org_id = ? AND c.role = 'admin' AND c.active = 1", (inv["org_id"],))
    return admin, inv


def test_R5_credits_above_500_go_to_a_human_and_never_exceed_the_invoice(ep):
    admin, inv = _payer(ep)
    base = {"contact_id": admin["contact_id"], "invoice_id": inv["invoice_id"], "reason": "service outage"}
    msg = violation(ep, "request_credit", {**base, "amount": 500.01}, "R5")
    assert "transfer_to_human_agent" in msg
    # The account manager get_organization names is no way round: the agent cannot record an approval at all.
    manager = ok(ep, "get_organization", {"org_id": admin["org_id"]})["account_manager"]
    assert manager is not None
    violation(ep, "request_credit", {**base, "amount": 600.0, "approved_by": manager["agent_id"]}, None,
              error_type="invalid_arguments")  # fmt: skip
    out = ok(ep, "request_credit", {**base, "amount": 500.0})
    assert out["credited"] == 500.0 and out["invoice"]["credited"] == 500.0
    row = one(ep, "SELECT amount_cents, approved_by FROM credits WHERE credit_id = ?", (out["credit_id"],))
    assert row == {"amount_cents": 50000, "approved_by": None}
    left = (inv["amount_cents"] - 50000) / 100
    small = ok(ep, "request_credit", {**base, "amount": 120.5})
    assert small["invoice"]["creditable"] == round(left - 120.5, 2)
    unpaid = one(ep, "SELECT i.invoice_id, c.contact_id FROM invoices i JOIN contacts c ON c.org_id = i.org_id AND "
                     "c.role = 'admin' AND c.active = 1 WHERE i.status IN ('open', 'void')")  # fmt: skip
    violation(ep, "request_credit", {"contact_id": unpaid["contact_id"], "invoice_id": unpaid["invoice_id"],
                                     "amount": 10.0, "reason": "goodwill"}, "R5")  # fmt: skip


def test_R5_all_credits_on_an_invoice_stay_within_its_amount(ep):
    admin, inv = _payer(ep)
    base = {"contact_id": admin["contact_id"], "invoice_id": inv["invoice_id"], "reason": "goodwill"}
    credited = 0
    while inv["amount_cents"] - credited > 50000:
        credited += round(ok(ep, "request_credit", {**base, "amount": 500.0})["credited"] * 100)
    left = (inv["amount_cents"] - credited) / 100
    msg = violation(ep, "request_credit", {**base, "amount": left + 0.01}, "R5")
    assert f"{left:.2f}" in msg
    assert ok(ep, "request_credit", {**base, "amount": left})["invoice"]["creditable"] == 0


def test_R6_only_the_contacts_own_organisation(ep):
    mine = ticket_of(ep, f"t.status IN {OPEN}")
    stranger = contact_of(ep, "c.org_id != ? AND c.active = 1 AND c.role = 'admin'", (mine["org_id"],))
    violation(ep, "add_comment", {"contact_id": stranger["contact_id"], "ticket_id": mine["ticket_id"],
                                  "body": "Hello"}, "R6")  # fmt: skip
    _, inv = _payer(ep, not_org=stranger["org_id"])
    violation(ep, "request_credit", {"contact_id": stranger["contact_id"], "invoice_id": inv["invoice_id"],
                                     "amount": 10.0, "reason": "goodwill"}, "R6")  # fmt: skip
    violation(ep, "transfer_to_human_agent", {"summary": "Wants a call.", "contact_id": stranger["contact_id"],
                                              "ticket_id": mine["ticket_id"]}, "R6")  # fmt: skip
    violation(ep, "transfer_to_human_agent", {"summary": "Wants a call.", "ticket_id": mine["ticket_id"]}, None,
              "invalid_arguments")  # fmt: skip
    # Once a contact is identified, acting as anyone else is refused by the episode itself.
    email = one(ep, "SELECT email FROM contacts WHERE contact_id = ?", (mine["requester_id"],))["email"]
    ok(ep, "find_contact_by_email", {"email": email})
    violation(ep, "add_comment", {"contact_id": stranger["contact_id"], "ticket_id": mine["ticket_id"],
                                  "body": "Hello"}, "R6")  # fmt: skip
    ok(ep, "add_comment", {"contact_id": mine["requester_id"], "ticket_id": mine["ticket_id"], "body": "Hello"})


def test_R7_deactivated_contacts_cannot_act(ep):
    gone = contact_of(ep, "c.active = 0 AND o.plan_status = 'active' AND c.role != 'billing'")
    msg = violation(ep, "create_ticket", {"contact_id": gone["contact_id"], "subject": "Help", "description": "Help.",
                                          "product_area": "api"}, "R7")  # fmt: skip
    assert "reactivate" in msg
    t = ep.query("SELECT ticket_id FROM tickets WHERE requester_id = ? LIMIT 1", (gone["contact_id"],))
    if t:
        violation(ep, "add_comment", {"contact_id": gone["contact_id"], "ticket_id": t[0]["ticket_id"], "body": "x"},
                  "R7")  # fmt: skip
    twin = contact_of(ep, "c.active = 1 AND o.plan_status = 'active' AND c.role != 'billing'")
    out = ok(ep, "create_ticket", {"contact_id": twin["contact_id"], "subject": "Help", "description": "Help.",
                                   "product_area": "api"})  # fmt: skip
    assert out["status"] == "new" and out["requester_id"] == twin["contact_id"]


def test_R8_solving_needs_a_public_reply_and_an_unsolved_ticket(ep):
    t = ticket_of(ep, f"t.status IN {OPEN}")
    base = {"contact_id": t["requester_id"], "ticket_id": t["ticket_id"]}
    violation(ep, "solve_ticket", {**base, "public_reply": "   "}, "R8")
    out = ok(ep, "solve_ticket", {**base, "public_reply": "Confirmed fixed."})
    assert out["status"] == "solved" and out["solved_at"] == NOW
    last = one(ep, "SELECT public, body FROM ticket_comments WHERE ticket_id = ? ORDER BY comment_id DESC",
               (t["ticket_id"],))  # fmt: skip
    assert last == {"public": 1, "body": "Confirmed fixed."}
    violation(ep, "solve_ticket", {**base, "public_reply": "Again."}, "R8")


def test_R9_billing_contacts_and_credit_requesters(ep):
    billing = contact_of(ep, "c.role = 'billing' AND c.active = 1 AND o.plan_status = 'active'")
    args = {"contact_id": billing["contact_id"], "subject": "SSO broken", "description": "SSO broken."}
    violation(ep, "create_ticket", {**args, "product_area": "sso"}, "R9")
    assert ok(ep, "create_ticket", {**args, "product_area": "billing"})["product_area"] == "billing"
    inv = one(ep, "SELECT i.invoice_id, c.contact_id FROM invoices i JOIN contacts c ON c.org_id = i.org_id AND "
                  "c.role = 'member' AND c.active = 1 WHERE i.status = 'paid'")  # fmt: skip
    violation(ep, "request_credit", {"contact_id": inv["contact_id"], "invoice_id": inv["invoice_id"], "amount": 10.0,
                                     "reason": "goodwill"}, "R9")  # fmt: skip


def test_R10_expired_plans_open_only_billing_tickets(ep):
    lapsed = contact_of(ep, "o.plan_status = 'expired' AND c.active = 1 AND c.role = 'admin'")
    args = {"contact_id": lapsed["contact_id"], "subject": "Renewal", "description": "We want to renew."}
    msg = violation(ep, "create_ticket", {**args, "product_area": "reporting"}, "R10")
    assert "billing" in msg
    assert ok(ep, "create_ticket", {**args, "product_area": "billing"})["status"] == "new"


def test_R11_transfers_need_a_summary(ep):
    violation(ep, "transfer_to_human_agent", {"summary": "  "}, "R11")
    out = ok(ep, "transfer_to_human_agent", {"summary": "Wants a manager to approve a $900 credit."})
    assert ep.query("SELECT summary FROM handoffs WHERE handoff_id = ?", (out["handoff_id"],))


def test_identification_prefers_the_active_record_of_a_duplicated_person(ep):
    pair = one(ep, "SELECT a.contact_id AS active_id, a.email, b.email AS old_email FROM contacts a JOIN contacts b "
                   "ON lower(b.email) = lower(a.email) AND b.contact_id != a.contact_id WHERE a.active = 1 AND "
                   "b.active = 0")  # fmt: skip
    assert ok(ep, "find_contact_by_email", {"email": pair["old_email"]})["contact_id"] == pair["active_id"]
    assert ok(ep, "find_contact_by_email", {"email": pair["email"].upper()})["contact_id"] == pair["active_id"]
    r = ep.call("find_contact_by_email", {"email": "nobody@example.com"})
    assert r.error.type == "not_found" and "find_contact_by_name_and_org" in r.error.message


def test_every_policy_rule_is_tested():
    assert_every_rule_tested("helpdesk", globals(), minimum=8)


def test_error_messages_are_json_observations(ep):
    gone = contact_of(ep, "c.active = 0")
    r = ep.call("create_ticket", {"contact_id": gone["contact_id"], "subject": "x", "description": "x",
                                  "product_area": "billing"})  # fmt: skip
    assert json.loads(r.content)["error"]["type"] == "policy_violation"
