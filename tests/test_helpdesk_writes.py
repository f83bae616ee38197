"""Helpdesk write tools: free text that is blank once trimmed is refused (not stored as ''), and a hand-off is
scored on whom and which ticket it is for, not only on being there."""

from __future__ import annotations

from typing import Any

import pytest

from toolworld import Episode
from toolworld.scoring.changes import compare_changes
from toolworld.world import get_world
from toolworld.worlds.helpdesk.kit import HelpdeskKit
from world_kit import ok, one, violation

BLANK = " \t\n "


@pytest.fixture
def ep() -> Episode:
    with get_world("helpdesk").episode(0) as e:
        yield e


def _ticket(ep: Episode, status_sql: str) -> dict[str, Any]:
    """A ticket in ``status_sql`` requested by an active admin on an active plan (so only the text can fail)."""
    return one(ep, "SELECT t.ticket_id, t.requester_id FROM tickets t JOIN contacts c ON c.contact_id = "
                   "t.requester_id JOIN organizations o ON o.org_id = t.org_id WHERE c.active = 1 AND c.role = 'admin' "
                   f"AND o.plan_status = 'active' AND t.merged_into IS NULL AND {status_sql} ORDER BY t.ticket_id")


@pytest.mark.parametrize(("tool", "field"), [
    ("create_ticket", "subject"), ("create_ticket", "description"), ("create_follow_up_ticket", "description"),
    ("add_comment", "body"), ("escalate_ticket", "reason"), ("reopen_ticket", "reason"),
])  # fmt: skip
def test_blank_text_is_refused_and_says_what_to_send(ep, tool, field):
    if tool == "create_ticket":
        t = _ticket(ep, "1")
        args = {"contact_id": t["requester_id"], "subject": "Exports time out", "description": "Since Monday.",
                "product_area": "billing"}  # fmt: skip
    elif tool == "create_follow_up_ticket":
        t = _ticket(ep, "t.status = 'closed'")
        args = {"contact_id": t["requester_id"], "ticket_id": t["ticket_id"], "description": "It is back."}
    else:
        t = _ticket(ep, "t.status = 'solved'" if tool == "reopen_ticket" else "t.status IN ('new', 'open')")
        args = {"contact_id": t["requester_id"], "ticket_id": t["ticket_id"], field: "Still broken."}
    msg = violation(ep, tool, {**args, field: BLANK}, None, error_type="invalid_arguments")
    assert msg.startswith(f"{field} is blank; send ")


def test_text_is_stored_trimmed(ep):
    t = _ticket(ep, "t.status IN ('new', 'open')")
    ok(ep, "add_comment", {"contact_id": t["requester_id"], "ticket_id": t["ticket_id"], "body": "  Still broken. \n"})
    body = one(ep, "SELECT body FROM ticket_comments WHERE ticket_id = ? ORDER BY comment_id DESC",
               (t["ticket_id"],))["body"]  # fmt: skip
    assert body == "Still broken."


def _handoff(contact_id: str, ticket_id: int | None, summary: str) -> dict[str, Any]:
    with get_world("helpdesk").episode(0) as e:
        ok(e, "transfer_to_human_agent", {"summary": summary, "contact_id": contact_id, "ticket_id": ticket_id})
        return e.changes().to_dict()


def test_a_handoff_for_another_contact_or_ticket_does_not_match_the_gold(ep):
    a = _ticket(ep, "t.status IN ('new', 'open')")
    org = one(ep, "SELECT org_id FROM tickets WHERE ticket_id = ?", (a["ticket_id"],))["org_id"]
    b = one(ep, "SELECT t.ticket_id, t.requester_id FROM tickets t JOIN contacts c ON c.contact_id = t.requester_id "
                "WHERE t.org_id != ? AND c.active = 1 ORDER BY t.ticket_id", (org,))  # fmt: skip
    other = one(ep, "SELECT ticket_id FROM tickets WHERE org_id = ? AND ticket_id != ?", (org, a["ticket_id"]))
    ignore = HelpdeskKit.ignore_columns
    gold = _handoff(a["requester_id"], a["ticket_id"], "Wants a manager to approve a $900 credit.")
    # The summary is the agent's own words: a different one still matches.
    assert compare_changes(gold, _handoff(a["requester_id"], a["ticket_id"], "Credit above $500."), ignore=ignore).ok
    assert not compare_changes(gold, _handoff(b["requester_id"], b["ticket_id"], "x"), ignore=ignore).ok
    assert not compare_changes(gold, _handoff(a["requester_id"], other["ticket_id"], "x"), ignore=ignore).ok
    assert not compare_changes(gold, _handoff(a["requester_id"], None, "x"), ignore=ignore).ok
