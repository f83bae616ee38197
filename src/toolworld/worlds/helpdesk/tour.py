"""The scripted tour of the helpdesk world (``toolworld tour helpdesk``).

It picks its contact and tickets from the seeded state (nothing hard-coded), so it works at any seed.
"""

from __future__ import annotations

from collections.abc import Iterator

from toolworld.world import Episode, ToolCall, TourStep


def tour(ep: Episode) -> Iterator[TourStep]:
    """Identify a contact, read a ticket, escalate an overdue one, try a refused reopen, show fork isolation."""
    row = ep.query(
        "SELECT c.email, c.contact_id, c.org_id, t.ticket_id FROM contacts c JOIN tickets t ON t.requester_id = "
        "c.contact_id WHERE c.active = 1 AND t.status = 'new' AND t.first_response_due < ? AND EXISTS (SELECT 1 "
        "FROM tickets d WHERE d.requester_id = c.contact_id AND d.status = 'closed') ORDER BY t.ticket_id LIMIT 1",
        (ep.world.clock,),
    )[0]
    closed = ep.query("SELECT ticket_id FROM tickets WHERE requester_id = ? AND status = 'closed' ORDER BY ticket_id "
                      "LIMIT 1", (row["contact_id"],))[0]["ticket_id"]  # fmt: skip
    yield TourStep("A contact writes in. Find them by e-mail.", ToolCall("find_contact_by_email", {"email": row["email"]}))
    yield TourStep("Look up their organisation: plan, SLA, account manager.",
                   ToolCall("get_organization", {"org_id": row["org_id"]}))  # fmt: skip
    yield TourStep("Read their new ticket: its first response is overdue.",
                   ToolCall("get_ticket", {"ticket_id": row["ticket_id"]}))  # fmt: skip
    yield TourStep("Fork the episode: a what-if copy that the next writes will not touch.", kind="fork")
    yield TourStep("Escalate it: the first-response due time has passed (policy R2).",
                   ToolCall("escalate_ticket", {"contact_id": row["contact_id"], "ticket_id": row["ticket_id"],
                                                "reason": "No reply yet and the team is blocked."}))  # fmt: skip
    yield TourStep("Try to reopen a closed ticket: the tool refuses and says to open a follow-up (policy R3).",
                   ToolCall("reopen_ticket", {"contact_id": row["contact_id"], "ticket_id": closed,
                                              "reason": "It is happening again."}))  # fmt: skip
    yield TourStep("A mistyped ticket number: a structured not_found error, nothing changes.",
                   ToolCall("get_ticket", {"ticket_id": 1}))  # fmt: skip

