"""The scripted tour of the crm world (``toolworld tour crm``).

It picks its rep and records from the seeded state (nothing hard-coded), so it works at any seed.
"""

from __future__ import annotations

from collections.abc import Iterator

from toolworld.world import Episode, ToolCall, TourStep


def tour(ep: Episode) -> Iterator[TourStep]:
    """Identify a rep, inspect a deal, set its contact, try a stage jump the policy refuses, and fork."""
    row = ep.query(
        "SELECT u.email, u.user_id, o.opportunity_id, o.account_id FROM users u "
        "JOIN opportunities o ON o.owner_id = u.user_id WHERE o.stage = 'qualification' "
        "AND EXISTS (SELECT 1 FROM contacts c WHERE c.account_id = o.account_id AND c.contact_id != "
        "COALESCE(o.contact_id, '')) ORDER BY o.opportunity_id LIMIT 1"
    )[0]
    contact = ep.query(
        "SELECT c.contact_id FROM contacts c JOIN opportunities o ON o.account_id = c.account_id "
        "WHERE o.opportunity_id = ? AND c.contact_id != COALESCE(o.contact_id, '') ORDER BY c.contact_id LIMIT 1",
        (row["opportunity_id"],),
    )[0]["contact_id"]
    me, opp = row["user_id"], row["opportunity_id"]
    yield TourStep("A rep writes in. Identify them by work e-mail.", ToolCall("find_user_by_email", {"email": row["email"]}))
    yield TourStep("List their pipeline.", ToolCall("list_opportunities", {"user_id": me, "stage": "qualification"}))
    yield TourStep("Inspect one deal: stage, contact role, quotes.", ToolCall("get_opportunity", {"opportunity_id": opp}))
    yield TourStep("Try to jump straight to negotiation: stages move one step at a time (policy R4).",
                   ToolCall("update_opportunity_stage", {"user_id": me, "opportunity_id": opp, "stage": "negotiation"}))
    yield TourStep("Fork the episode: a what-if copy that the next writes will not touch.", kind="fork")
    yield TourStep("Give the deal a primary contact, which a proposal needs (policy R3).",
                   ToolCall("set_opportunity_contact", {"user_id": me, "opportunity_id": opp, "contact_id": contact}))
    yield TourStep("Now the deal can move to proposal.",
                   ToolCall("update_opportunity_stage", {"user_id": me, "opportunity_id": opp, "stage": "proposal"}))
    yield TourStep("A mistyped id: a structured not_found error, nothing changes.",
                   ToolCall("get_opportunity", {"opportunity_id": "OPP-00000"}))
