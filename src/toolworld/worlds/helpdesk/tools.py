"""The helpdesk world's tools. Each write tool enforces the numbered rules of ``policy.md`` and cites them.

The person writing in is a contact at a customer organisation; every write names that contact as
``contact_id`` (the one identified with ``find_contact_by_email`` or ``find_contact_by_name_and_org``), so the
tool can check what this contact may do: their role, whether their record is active, and that the ticket or
invoice belongs to their organisation. Error messages say which rule blocked the call and what to do instead.
Money is integer cents in the database and decimal dollars in every result.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import Field

from toolworld.world import Ctx, Entity, ToolError, tool
from toolworld.worlds.shared.arith import calculate
from toolworld.worlds.shared.records import required_text

from .common import (
    CREDIT_APPROVAL_CENTS,
    NOW,
    OPEN_STATUSES,
    OUTAGE_TAG,
    REOPEN_DAYS,
    URGENT_PLANS,
    cents,
    dollars,
    parse_time,
    sla_due,
)

ContactId = Annotated[str, Entity("contact"), Field(description="The contact's id, e.g. 'CT-104382' (from a find_contact tool).")]
OrgId = Annotated[str, Entity("org"), Field(description="The organisation's id, e.g. 'ORG-20417'.")]
TicketId = Annotated[int, Entity("ticket"), Field(description="The ticket number, e.g. 40213.")]
InvoiceId = Annotated[str, Entity("invoice"), Field(description="The invoice id as printed, e.g. 'INV-2026-004211'.")]
ArticleId = Annotated[str, Entity("article"), Field(description="The knowledge-base article id, e.g. 'KB-1042'.")]
ProductArea = Literal["billing", "sso", "api", "integrations", "reporting", "data-import", "mobile-app",
                      "notifications", "permissions", "performance"]  # fmt: skip
Priority = Literal["low", "normal", "high", "urgent"]
TicketStatus = Literal["new", "open", "pending", "on_hold", "solved", "closed"]
CreditReason = Literal["service outage", "billing error", "unused seats", "goodwill"]

# -- shared views and checks -------------------------------------------------------------------------------


def _days_since(ts: str) -> float:
    return (parse_time(NOW) - parse_time(ts)).total_seconds() / 86400


def _tags(ctx: Ctx, ticket_id: int) -> list[str]:
    return [r["name"] for r in ctx.all("SELECT t.name FROM ticket_tags tt JOIN tags t ON t.tag_id = tt.tag_id "
                                       "WHERE tt.ticket_id = ? ORDER BY t.name", (ticket_id,))]  # fmt: skip


def _ticket_row(ctx: Ctx, ticket_id: int) -> dict[str, Any]:
    row = ctx.one("SELECT * FROM tickets WHERE ticket_id = ?", (ticket_id,))
    assert row is not None  # existence is checked by Episode.call before the tool runs
    return row


def _sla_state(t: dict[str, Any]) -> dict[str, Any]:
    """Whether the ticket's first-response and resolution due times have passed unmet (what R2 turns on)."""
    open_ = t["status"] in OPEN_STATUSES
    return {
        "first_response_due": t["first_response_due"],
        "first_response_at": t["first_response_at"],
        "first_response_breached": (t["first_response_at"] is None and open_ and t["first_response_due"] < NOW)
        or (t["first_response_at"] is not None and t["first_response_at"] > t["first_response_due"]),
        "resolution_due": t["resolution_due"],
        "resolution_breached": open_ and t["resolution_due"] < NOW,
    }


def _ticket_view(ctx: Ctx, ticket_id: int, *, comments: bool = True) -> dict[str, Any]:
    """The ticket as an agent sees it (also returned by every ticket-changing tool)."""
    t = _ticket_row(ctx, ticket_id)
    requester = ctx.one("SELECT first_name, last_name, email FROM contacts WHERE contact_id = ?", (t["requester_id"],))
    assert requester is not None
    out: dict[str, Any] = {
        "ticket_id": t["ticket_id"], "org_id": t["org_id"], "requester_id": t["requester_id"],
        "requester_name": f"{requester['first_name']} {requester['last_name']}", "subject": t["subject"],
        "product_area": t["product_area"], "status": t["status"], "priority": t["priority"], "channel": t["channel"],
        "tier": t["tier"], "assignee_id": t["assignee_id"], "created_at": t["created_at"],
        "updated_at": t["updated_at"], "sla": _sla_state(t), "tags": _tags(ctx, ticket_id),
    }  # fmt: skip
    for key in ("solved_at", "closed_at", "merged_into", "follow_up_of"):
        if t[key] is not None:
            out[key] = t[key]
    if comments:
        out["comments"] = ctx.all(
            "SELECT author_kind, author_id, public, body, created_at FROM ticket_comments WHERE ticket_id = ? "
            "ORDER BY comment_id", (ticket_id,))  # fmt: skip
        for c in out["comments"]:
            c["public"] = bool(c["public"])
    return out


def _actor(ctx: Ctx, contact_id: str, action: str) -> dict[str, Any]:
    """The acting contact with their organisation; a deactivated contact cannot act (policy R7)."""
    c = ctx.one("SELECT c.*, o.plan, o.plan_status, o.name AS org_name FROM contacts c "
                "JOIN organizations o ON o.org_id = c.org_id WHERE c.contact_id = ?", (contact_id,))  # fmt: skip
    assert c is not None
    if not c["active"]:
        raise ToolError(
            "policy_violation",
            f"Contact {contact_id} is deactivated and cannot {action} (policy R7). Ask the person to have an admin "
            f"of {c['org_name']} reactivate their user, or to write in from an active account.",
        )
    return c


def _own_ticket(ctx: Ctx, actor: dict[str, Any], ticket_id: int) -> dict[str, Any]:
    """The ticket, if it belongs to the acting contact's organisation (policy R6)."""
    t = _ticket_row(ctx, ticket_id)
    if t["org_id"] != actor["org_id"]:
        raise ToolError(
            "policy_violation",
            f"Ticket {ticket_id} belongs to another organisation, not to {actor['org_name']} (policy R6). A contact "
            "can act only on their own organisation's tickets; ask the person to check the ticket number.",
        )
    return t


def _require_open(t: dict[str, Any], action: str, rule: str, instead: str) -> None:
    if t["status"] not in OPEN_STATUSES:
        raise ToolError(
            "policy_violation",
            f"Ticket {t['ticket_id']} is '{t['status']}'; {action} only while a ticket is new, open, pending or on "
            f"hold (policy {rule}). {instead}",
        )


def _comment(ctx: Ctx, ticket_id: int, kind: str, author: str | None, public: bool, body: str) -> None:
    ctx.execute("INSERT INTO ticket_comments (ticket_id, author_kind, author_id, public, body, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?)", (ticket_id, kind, author, int(public), body, ctx.now))  # fmt: skip


def _check_priority(ctx: Ctx, actor: dict[str, Any], priority: str, ticket_id: int | None) -> None:
    """Urgent only for business and enterprise plans, or a ticket tagged as an outage (policy R1)."""
    if priority != "urgent" or (actor["plan"] in URGENT_PLANS and actor["plan_status"] == "active"):
        return
    if ticket_id is not None and OUTAGE_TAG in _tags(ctx, ticket_id):
        return
    raise ToolError(
        "policy_violation",
        f"{actor['org_name']} is on the {actor['plan']} plan ({actor['plan_status']}); 'urgent' priority is only for "
        "active business and enterprise plans, or for a ticket tagged 'outage' (policy R1). Use 'high' instead, "
        "if the customer agrees.",
    )


# -- identification ----------------------------------------------------------------------------------------


def _pick_contact(rows: list[dict[str, Any]], what: str, instead: str) -> dict[str, str]:
    """One contact among rows that match a lookup: the only one, or the only active one (an older duplicate
    record of the same person is deactivated); two active matches cannot be told apart."""
    if not rows:
        raise ToolError("not_found", f"No contact has {what}. {instead}")
    if len(rows) > 1:
        active = [r for r in rows if r["active"]]
        if len(active) != 1:
            raise ToolError(
                "conflict",
                f"{len(rows)} contact records match {what}; ask for the exact e-mail address the person signs in "
                "with and use find_contact_by_email.",
            )
        rows = active
    return {"contact_id": rows[0]["contact_id"], "org_id": rows[0]["org_id"]}


@tool(yields={"contact": "contact_id", "org": "org_id"}, identifies=True)
def find_contact_by_email(ctx: Ctx, email: Annotated[str, Entity("email")]) -> dict[str, str]:
    """Find the contact writing in (and their organisation) from their e-mail address; the match ignores case.

    Args:
        email: The contact's e-mail address, e.g. 'olivia.martin@cedaranalytics.example.com'.
    """
    # COLLATE NOCASE (not lower() on both sides) so the lookup uses the contacts_email index
    rows = ctx.all("SELECT contact_id, org_id, active FROM contacts WHERE email = ? COLLATE NOCASE ORDER BY contact_id",
                   (email.strip(),))  # fmt: skip
    return _pick_contact(rows, f"the e-mail {email!r}",
                         "Ask the person to check it, or find them by name and organisation with "
                         "find_contact_by_name_and_org.")


@tool(yields={"contact": "contact_id", "org": "org_id"}, identifies=True)
def find_contact_by_name_and_org(
    ctx: Ctx,
    first_name: Annotated[str, Entity("first_name")],
    last_name: Annotated[str, Entity("last_name")],
    org_name: Annotated[str, Entity("org_name")],
) -> dict[str, str]:
    """Find the contact writing in from their first and last name and their organisation's name.

    Args:
        first_name: The contact's first name, e.g. 'Olivia'.
        last_name: The contact's last name, e.g. 'Martin'.
        org_name: The organisation's name as the customer says it, e.g. 'Cedar Analytics' (case is ignored).
    """
    org = ctx.one("SELECT org_id FROM organizations WHERE lower(name) = lower(?) OR lower(legal_name) = lower(?)",
                  (org_name.strip(), org_name.strip()))  # fmt: skip
    if org is None:
        raise ToolError("not_found", f"No organisation is called {org_name!r}. Ask for the exact company name, or "
                                     "find the contact by e-mail with find_contact_by_email.")  # fmt: skip
    rows = ctx.all("SELECT contact_id, org_id, active FROM contacts WHERE org_id = ? AND lower(first_name) = lower(?) "
                   "AND lower(last_name) = lower(?) ORDER BY contact_id",
                   (org["org_id"], first_name.strip(), last_name.strip()))  # fmt: skip
    return _pick_contact(rows, f"the name {first_name} {last_name} at {org_name}",
                         "Ask the person to check the spelling, or find them by e-mail with find_contact_by_email.")


# -- read tools ----------------------------------------------------------------------------------------------


@tool(yields={"org": "org_id"})
def get_contact(ctx: Ctx, contact_id: ContactId) -> dict[str, Any]:
    """Get a contact's profile: name, e-mail, role in their organisation (admin, member, billing), active flag."""
    c = ctx.one("SELECT c.*, o.name AS org_name FROM contacts c JOIN organizations o ON o.org_id = c.org_id "
                "WHERE c.contact_id = ?", (contact_id,))  # fmt: skip
    assert c is not None
    return {"contact_id": c["contact_id"], "org_id": c["org_id"], "org_name": c["org_name"],
            "first_name": c["first_name"], "last_name": c["last_name"], "email": c["email"], "phone": c["phone"],
            "role": c["role"], "active": bool(c["active"]), "created_at": c["created_at"]}  # fmt: skip


@tool(yields={"agent": "account_manager.agent_id"})
def get_organization(ctx: Ctx, org_id: OrgId) -> dict[str, Any]:
    """Get an organisation's account: plan and whether it is active or expired, renewal date, seats, region, its
    SLA (first-response and resolution hours per priority) and its account manager."""
    o = ctx.one("SELECT * FROM organizations WHERE org_id = ?", (org_id,))
    assert o is not None
    sla = {r["priority"]: {"first_response_hours": r["first_response_hours"], "resolution_hours": r["resolution_hours"]}
           for r in ctx.all("SELECT * FROM sla_policies WHERE plan = ? ORDER BY first_response_hours DESC",
                            (o["plan"],))}  # fmt: skip
    am = ctx.one("SELECT agent_id, name, email FROM agents WHERE agent_id = ?", (o["account_manager_id"],)) \
        if o["account_manager_id"] else None  # fmt: skip
    return {"org_id": o["org_id"], "name": o["name"], "legal_name": o["legal_name"], "domain": o["domain"],
            "plan": o["plan"], "plan_status": o["plan_status"], "plan_renews_at": o["plan_renews_at"],
            "seats": o["seats"], "region": o["region"], "industry": o["industry"], "sla": sla,
            "account_manager": am}  # fmt: skip


@tool(yields={"ticket": "[].ticket_id"})
def list_org_tickets(ctx: Ctx, org_id: OrgId, status: TicketStatus | None = None) -> list[dict[str, Any]]:
    """List an organisation's tickets (newest first): number, subject, status, priority, requester, dates.

    Use it to find a ticket the customer describes without its number, or tickets filed twice for one issue.

    Args:
        status: Only tickets with this status (optional).
    """
    sql = ("SELECT t.ticket_id, t.subject, t.product_area, t.status, t.priority, t.requester_id, "
           "c.first_name || ' ' || c.last_name AS requester_name, t.created_at, t.solved_at, t.merged_into "
           "FROM tickets t JOIN contacts c ON c.contact_id = t.requester_id WHERE t.org_id = ?")  # fmt: skip
    params: list[Any] = [org_id]
    if status is not None:
        sql += " AND t.status = ?"
        params.append(status)
    rows = ctx.all(sql + " ORDER BY t.created_at DESC, t.ticket_id DESC", params)
    return [{k: v for k, v in r.items() if v is not None} for r in rows]


@tool(yields={"org": "org_id", "contact": "requester_id"})
def get_ticket(ctx: Ctx, ticket_id: TicketId) -> dict[str, Any]:
    """Get a ticket: status, priority, tier, assignee, SLA due times and whether they were missed, tags, and the
    whole comment thread (public replies and internal notes)."""
    return _ticket_view(ctx, ticket_id)


@tool(yields={"article": "[].article_id"})
def search_kb(
    ctx: Ctx,
    query: Annotated[str, Field(min_length=1, description="Words to look for in titles and bodies, e.g. 'SAML Okta'.")],
    product_area: ProductArea | None = None,
) -> list[dict[str, Any]]:
    """Search published knowledge-base articles (drafts are not shown to customers) by words in title or body.

    Returns up to 10 articles, those matching the most words first.
    """
    words = [w for w in query.lower().split() if len(w) > 1]
    sql = "SELECT article_id, title, body, product_area FROM kb_articles WHERE status = 'published'"
    params: list[Any] = []
    if product_area is not None:
        sql += " AND product_area = ?"
        params.append(product_area)
    scored = []
    for a in ctx.all(sql + " ORDER BY article_id", params):
        text = f"{a['title']} {a['body']}".lower()
        hits = sum(w in text for w in words)
        if hits:
            scored.append((-hits, a["article_id"], a))
    return [{"article_id": a["article_id"], "title": a["title"], "product_area": a["product_area"]}
            for _, _, a in sorted(scored, key=lambda s: (s[0], s[1]))[:10]]  # fmt: skip


@tool
def get_kb_article(ctx: Ctx, article_id: ArticleId) -> dict[str, Any]:
    """Get one knowledge-base article; a draft is not ready to share with a customer (its status says so)."""
    a = ctx.one("SELECT * FROM kb_articles WHERE article_id = ?", (article_id,))
    assert a is not None
    return dict(a)


@tool
def list_macros(ctx: Ctx) -> list[dict[str, Any]]:
    """List the desk's active macros (canned replies and ticket updates) with their actions, for reference."""
    return [{"macro_id": m["macro_id"], "name": m["name"], "actions": json.loads(m["actions"])}
            for m in ctx.all("SELECT * FROM macros WHERE active = 1 ORDER BY macro_id")]  # fmt: skip


def _invoice_view(ctx: Ctx, inv: dict[str, Any]) -> dict[str, Any]:
    credits = ctx.all("SELECT credit_id, amount_cents, reason, approved_by, created_at FROM credits "
                      "WHERE invoice_id = ? ORDER BY credit_id", (inv["invoice_id"],))  # fmt: skip
    credited = sum(c["amount_cents"] for c in credits)
    return {"invoice_id": inv["invoice_id"], "org_id": inv["org_id"], "period": inv["period"],
            "amount": dollars(inv["amount_cents"]), "status": inv["status"], "issued_at": inv["issued_at"],
            "due_at": inv["due_at"], "credited": dollars(credited),
            "creditable": dollars(inv["amount_cents"] - credited) if inv["status"] == "paid" else 0.0,
            "credits": [{"credit_id": c["credit_id"], "amount": dollars(c["amount_cents"]), "reason": c["reason"],
                         "approved_by": c["approved_by"], "created_at": c["created_at"]} for c in credits]}  # fmt: skip


@tool(yields={"invoice": "[].invoice_id"})
def list_org_invoices(ctx: Ctx, org_id: OrgId) -> list[dict[str, Any]]:
    """List an organisation's invoices (newest first) with amount, status and what has been credited on each."""
    rows = ctx.all("SELECT * FROM invoices WHERE org_id = ? ORDER BY issued_at DESC, invoice_id DESC", (org_id,))
    return [_invoice_view(ctx, r) for r in rows]


@tool(yields={"org": "org_id"})
def get_invoice(ctx: Ctx, invoice_id: InvoiceId) -> dict[str, Any]:
    """Get one invoice: period, amount, status (paid, open, void), credits already given and what is creditable."""
    inv = ctx.one("SELECT * FROM invoices WHERE invoice_id = ?", (invoice_id,))
    assert inv is not None
    return _invoice_view(ctx, inv)


# -- write tools ---------------------------------------------------------------------------------------------


def _new_ticket(ctx: Ctx, actor: dict[str, Any], subject: str, description: str, area: str, priority: str,
                follow_up_of: int | None) -> int:
    due_first, due_resolve = sla_due(ctx.now, actor["plan"], priority)
    cur = ctx.execute(
        "INSERT INTO tickets (org_id, requester_id, subject, description, product_area, status, priority, channel, "
        "tier, assignee_id, created_at, updated_at, first_response_due, first_response_at, resolution_due, "
        "follow_up_of) VALUES (?, ?, ?, ?, ?, 'new', ?, 'chat', 1, NULL, ?, ?, ?, NULL, ?, ?)",
        (actor["org_id"], actor["contact_id"], subject.strip(), description.strip(), area, priority, ctx.now, ctx.now,
         due_first, due_resolve, follow_up_of),
    )  # fmt: skip
    ticket_id = int(cur.lastrowid or 0)
    _comment(ctx, ticket_id, "contact", actor["contact_id"], True, description.strip())
    return ticket_id


@tool(mutates=True, yields={"ticket": "ticket_id"})
def create_ticket(
    ctx: Ctx,
    contact_id: ContactId,
    subject: Annotated[str, Field(min_length=1, description="A one-line summary of the problem.")],
    description: Annotated[str, Field(min_length=1, description="The problem in the customer's words.")],
    product_area: Annotated[ProductArea, Field(description="The product area the problem is about.")],
    priority: Priority = "normal",
) -> dict[str, Any]:
    """Open a new ticket for the contact, with its SLA due times set from their organisation's plan.

    For a problem that comes back after its ticket was closed, use create_follow_up_ticket instead.
    """
    subject = required_text(subject, "subject", "a one-line summary of the problem, e.g. 'CSV import fails'")
    description = required_text(description, "description", "the problem in the customer's words")
    actor = _actor(ctx, contact_id, "open tickets")
    if actor["plan_status"] == "expired" and product_area != "billing":
        raise ToolError(
            "policy_violation",
            f"The {actor['plan']} plan of {actor['org_name']} has expired; until it is renewed only billing tickets "
            "can be opened (policy R10). Ask the customer whether to open a billing ticket about renewing instead.",
        )
    if actor["role"] == "billing" and product_area != "billing":
        raise ToolError(
            "policy_violation",
            f"Contact {contact_id} is a billing contact and can open only billing tickets (policy R9). Ask an admin "
            "or member of the organisation to report this problem.",
        )
    _check_priority(ctx, actor, priority, None)
    ticket_id = _new_ticket(ctx, actor, subject, description, product_area, priority, None)
    return _ticket_view(ctx, ticket_id, comments=False)


@tool(mutates=True, yields={"ticket": "ticket_id"})
def create_follow_up_ticket(
    ctx: Ctx,
    contact_id: ContactId,
    ticket_id: Annotated[TicketId, Field(description="The closed ticket the problem came back from.")],
    description: Annotated[str, Field(min_length=1, description="What happened since, in the customer's words.")],
) -> dict[str, Any]:
    """Open a follow-up of a closed ticket (or of a solved one past the reopen window): same subject, product
    area and priority, linked to the original."""
    description = required_text(description, "description", "what happened since, in the customer's words")
    actor = _actor(ctx, contact_id, "open tickets")
    t = _own_ticket(ctx, actor, ticket_id)
    reopenable = t["status"] == "solved" and _days_since(t["solved_at"]) <= REOPEN_DAYS
    if t["status"] in OPEN_STATUSES or reopenable or t["merged_into"] is not None:
        raise ToolError(
            "policy_violation",
            f"Ticket {ticket_id} is '{t['status']}'" + (f" and merged into {t['merged_into']}" if t["merged_into"] else "")
            + "; a follow-up is only for a closed ticket or one solved more than "
            f"{REOPEN_DAYS} days ago (policy R3). " + ("Reopen it with reopen_ticket instead." if reopenable else
                                                       "Add a comment to the open ticket instead."),
        )  # fmt: skip
    if actor["plan_status"] == "expired" and t["product_area"] != "billing":
        raise ToolError("policy_violation", f"The plan of {actor['org_name']} has expired; only billing tickets can be "
                                            "opened until it is renewed (policy R10). Ask the customer whether to open a "
                                            "billing ticket about renewing instead.")  # fmt: skip
    if actor["role"] == "billing" and t["product_area"] != "billing":
        raise ToolError("policy_violation", f"Contact {contact_id} is a billing contact and can open only billing "
                                            "tickets (policy R9). Ask an admin or member of the organisation to write in "
                                            "instead.")  # fmt: skip
    priority = t["priority"]
    if priority == "urgent" and (actor["plan"] not in URGENT_PLANS or actor["plan_status"] != "active"):
        priority = "high"  # the outage tag stays on the original ticket, so urgency does not carry over (R1)
    new_id = _new_ticket(ctx, actor, f"Follow-up: {t['subject']}", description, t["product_area"], priority, ticket_id)
    return _ticket_view(ctx, new_id, comments=False)


@tool(mutates=True)
def add_comment(
    ctx: Ctx,
    contact_id: ContactId,
    ticket_id: TicketId,
    body: Annotated[str, Field(min_length=1, description="The customer's message, as it should appear on the ticket.")],
) -> dict[str, Any]:
    """Add the customer's message to their ticket as a public comment; a pending ticket goes back to open."""
    body = required_text(body, "body", "the customer's message as it should appear on the ticket")
    actor = _actor(ctx, contact_id, "comment on tickets")
    t = _own_ticket(ctx, actor, ticket_id)
    if t["status"] == "closed":
        raise ToolError(
            "policy_violation",
            f"Ticket {ticket_id} is closed and takes no more comments (policy R3). Open a follow-up with "
            "create_follow_up_ticket instead.",
        )
    if t["status"] == "solved":
        raise ToolError(
            "policy_violation",
            f"Ticket {ticket_id} is solved; a comment would not reach anyone (policy R3). Reopen it with "
            "reopen_ticket if the problem is back.",
        )
    _comment(ctx, ticket_id, "contact", contact_id, True, body)
    status = "open" if t["status"] == "pending" else t["status"]
    ctx.execute("UPDATE tickets SET status = ?, updated_at = ? WHERE ticket_id = ?", (status, ctx.now, ticket_id))
    return _ticket_view(ctx, ticket_id, comments=False)


@tool(mutates=True)
def set_priority(ctx: Ctx, contact_id: ContactId, ticket_id: TicketId, priority: Priority) -> dict[str, Any]:
    """Change an open ticket's priority; its SLA due times are recomputed from its creation time."""
    actor = _actor(ctx, contact_id, "change tickets")
    t = _own_ticket(ctx, actor, ticket_id)
    _require_open(t, "its priority can be changed", "R1", "Use reopen_ticket first if the problem is back.")
    if t["priority"] == priority:
        raise ToolError("conflict", f"Ticket {ticket_id} already has priority '{priority}'; nothing to change.")
    _check_priority(ctx, actor, priority, ticket_id)
    first, resolve = sla_due(t["created_at"], actor["plan"], priority)
    ctx.execute("UPDATE tickets SET priority = ?, first_response_due = ?, resolution_due = ?, updated_at = ? "
                "WHERE ticket_id = ?", (priority, first, resolve, ctx.now, ticket_id))  # fmt: skip
    return _ticket_view(ctx, ticket_id, comments=False)


@tool(mutates=True)
def escalate_ticket(
    ctx: Ctx,
    contact_id: ContactId,
    ticket_id: TicketId,
    reason: Annotated[str, Field(min_length=1, description="Why the customer wants it escalated (one sentence).")],
) -> dict[str, Any]:
    """Escalate an open ticket to the next support tier (1 -> 2 -> 3), with an internal note of the reason.

    Allowed only when the ticket's first-response or resolution due time has passed unmet, or it is urgent.
    """
    reason = required_text(reason, "reason", "why the customer wants it escalated, in one sentence")
    actor = _actor(ctx, contact_id, "escalate tickets")
    t = _own_ticket(ctx, actor, ticket_id)
    _require_open(t, "it can be escalated", "R2", "Use reopen_ticket first if the problem is back.")
    sla = _sla_state(t)
    if not (sla["first_response_breached"] or sla["resolution_breached"] or t["priority"] == "urgent"):
        raise ToolError(
            "policy_violation",
            f"Ticket {ticket_id} is within its SLA (first response due {t['first_response_due']}, resolution due "
            f"{t['resolution_due']}) and is not urgent; escalation is only for a missed due time or an urgent ticket "
            "(policy R2). Instead, tell the customer when a reply is due.",
        )
    if t["tier"] >= 3:
        raise ToolError("conflict", f"Ticket {ticket_id} is already with tier 3, the highest; transfer the customer "
                                    "to a human agent if they need more.")  # fmt: skip
    ctx.execute("UPDATE tickets SET tier = ?, assignee_id = NULL, status = 'open', updated_at = ? WHERE ticket_id = ?",
                (t["tier"] + 1, ctx.now, ticket_id))  # fmt: skip
    _comment(ctx, ticket_id, "system", None, False, f"Escalated to tier {t['tier'] + 1}: {reason}")
    return _ticket_view(ctx, ticket_id, comments=False)


@tool(mutates=True)
def reopen_ticket(
    ctx: Ctx,
    contact_id: ContactId,
    ticket_id: TicketId,
    reason: Annotated[str, Field(min_length=1, description="Why the problem is back, in the customer's words.")],
) -> dict[str, Any]:
    """Reopen a solved ticket whose problem came back (within 14 days of solving; by its requester or an admin)."""
    reason = required_text(reason, "reason", "why the problem is back, in the customer's words")
    actor = _actor(ctx, contact_id, "reopen tickets")
    t = _own_ticket(ctx, actor, ticket_id)
    if t["requester_id"] != contact_id and actor["role"] != "admin":
        raise ToolError(
            "policy_violation",
            f"Only the ticket's requester or an admin of {actor['org_name']} can reopen ticket {ticket_id}; contact "
            f"{contact_id} is a {actor['role']} who did not request it (policy R3). Ask the requester or an admin "
            "to write in, or open a new ticket with create_ticket.",
        )
    if t["status"] != "solved" or _days_since(t["solved_at"]) > REOPEN_DAYS:
        when = f", solved on {t['solved_at'][:10]}" if t["solved_at"] else ""
        instead = ("It is still open: add a comment with add_comment instead." if t["status"] in OPEN_STATUSES else
                   "Open a follow-up with create_follow_up_ticket instead.")  # fmt: skip
        raise ToolError(
            "policy_violation",
            f"Ticket {ticket_id} is '{t['status']}'{when}; only a solved ticket can be reopened, within "
            f"{REOPEN_DAYS} days of solving (policy R3). {instead}",
        )
    ctx.execute("UPDATE tickets SET status = 'open', solved_at = NULL, updated_at = ? WHERE ticket_id = ?",
                (ctx.now, ticket_id))  # fmt: skip
    _comment(ctx, ticket_id, "contact", contact_id, True, reason)
    return _ticket_view(ctx, ticket_id, comments=False)


@tool(mutates=True)
def merge_tickets(
    ctx: Ctx,
    contact_id: ContactId,
    ticket_id: Annotated[TicketId, Field(description="The duplicate ticket to merge away (the newer one).")],
    into_ticket_id: Annotated[TicketId, Field(description="The ticket to keep (the older one).")],
) -> dict[str, Any]:
    """Merge a duplicate ticket into the older ticket about the same issue: the duplicate is closed and points at
    the one kept, which gets a note. Both must be the organisation's and neither closed."""
    actor = _actor(ctx, contact_id, "change tickets")
    if ticket_id == into_ticket_id:
        raise ToolError("invalid_arguments", "ticket_id and into_ticket_id are the same ticket; name two tickets.")
    dup = _own_ticket(ctx, actor, ticket_id)
    keep = _ticket_row(ctx, into_ticket_id)
    if keep["org_id"] != dup["org_id"]:
        raise ToolError("policy_violation", f"Tickets {ticket_id} and {into_ticket_id} belong to different "
                                            "organisations and cannot be merged (policy R4, R6). Ask the customer to "
                                            "check the ticket numbers.")  # fmt: skip
    for t in (dup, keep):
        if t["status"] == "closed":
            raise ToolError(
                "policy_violation",
                f"Ticket {t['ticket_id']} is closed; only tickets that are not closed can be merged (policy R4). "
                "Use add_comment on the open ticket instead.",
            )
    if (keep["created_at"], keep["ticket_id"]) > (dup["created_at"], dup["ticket_id"]):
        raise ToolError(
            "policy_violation",
            f"Ticket {into_ticket_id} (created {keep['created_at']}) is newer than ticket {ticket_id} (created "
            f"{dup['created_at']}); a duplicate is merged into the older ticket (policy R4). Swap the two: merge "
            f"{into_ticket_id} into {ticket_id}.",
        )
    ctx.execute("UPDATE tickets SET status = 'closed', merged_into = ?, closed_at = ?, updated_at = ? "
                "WHERE ticket_id = ?", (into_ticket_id, ctx.now, ctx.now, ticket_id))  # fmt: skip
    _comment(ctx, ticket_id, "system", None, True, f"Merged into ticket #{into_ticket_id}.")
    _comment(ctx, into_ticket_id, "system", None, True, f"Ticket #{ticket_id} was merged into this ticket.")
    ctx.execute("UPDATE tickets SET updated_at = ? WHERE ticket_id = ?", (ctx.now, into_ticket_id))
    return _ticket_view(ctx, into_ticket_id, comments=False)


@tool(mutates=True)
def solve_ticket(
    ctx: Ctx,
    contact_id: ContactId,
    ticket_id: TicketId,
    public_reply: Annotated[str, Field(description="The reply the customer sees on the ticket, saying why it is solved.")],
) -> dict[str, Any]:
    """Mark a ticket solved when the customer confirms the problem is gone; posts ``public_reply`` on it first."""
    actor = _actor(ctx, contact_id, "change tickets")
    t = _own_ticket(ctx, actor, ticket_id)
    if not public_reply.strip():
        raise ToolError("policy_violation", "A ticket is solved only with a public reply to the customer (policy R8); "
                                            "write one in public_reply.")  # fmt: skip
    _require_open(t, "it can be solved", "R8", "Check its status with get_ticket and tell the customer instead.")
    _comment(ctx, ticket_id, "agent", None, True, public_reply.strip())
    ctx.execute("UPDATE tickets SET status = 'solved', solved_at = ?, updated_at = ? WHERE ticket_id = ?",
                (ctx.now, ctx.now, ticket_id))  # fmt: skip
    return _ticket_view(ctx, ticket_id, comments=False)


@tool(mutates=True)
def request_credit(
    ctx: Ctx,
    contact_id: ContactId,
    invoice_id: InvoiceId,
    amount: Annotated[float, Field(gt=0, description="The credit in dollars, e.g. 120.5.")],
    reason: CreditReason,
) -> dict[str, Any]:
    """Issue a credit note of up to $500 against a paid invoice of the contact's organisation (admins and billing
    contacts only); all credits on an invoice together never exceed its amount.

    A larger credit needs a manager's approval, which only a human agent can get: transfer_to_human_agent.
    """
    actor = _actor(ctx, contact_id, "request credits")
    if actor["role"] not in ("admin", "billing"):
        raise ToolError(
            "policy_violation",
            f"Contact {contact_id} is a {actor['role']}; only admins and billing contacts can request credits "
            "(policy R9). Ask an admin or the billing contact of the organisation to write in.",
        )
    inv = ctx.one("SELECT * FROM invoices WHERE invoice_id = ?", (invoice_id,))
    assert inv is not None
    if inv["org_id"] != actor["org_id"]:
        raise ToolError("policy_violation", f"Invoice {invoice_id} belongs to another organisation, not to "
                                            f"{actor['org_name']} (policy R6). Ask the person to check the invoice id.")
    if inv["status"] != "paid":
        raise ToolError("policy_violation", f"Invoice {invoice_id} is '{inv['status']}'; credits are issued only "
                                            "against paid invoices (policy R5). Ask the customer which paid invoice "
                                            "the credit is for.")  # fmt: skip
    amount_cents = cents(amount)
    credited = int(ctx.value("SELECT coalesce(sum(amount_cents), 0) FROM credits WHERE invoice_id = ?", (invoice_id,)))
    left = inv["amount_cents"] - credited
    if amount_cents > left:
        raise ToolError(
            "policy_violation",
            f"Invoice {invoice_id} is for ${dollars(inv['amount_cents']):.2f} with ${dollars(credited):.2f} already "
            f"credited, so at most ${dollars(left):.2f} can be credited (policy R5). Ask the customer whether a "
            "smaller credit would do instead.",
        )
    if amount_cents > CREDIT_APPROVAL_CENTS:
        # The agent cannot approve: an approval it could name itself (an account manager's id from
        # get_organization, say) would let it grant any credit. Managers approve with the human agent instead.
        raise ToolError(
            "policy_violation",
            f"A credit of ${dollars(amount_cents):.2f} is above $500 and needs a manager's approval, which you cannot "
            "give or record (policy R5). Transfer the customer with transfer_to_human_agent instead, naming the "
            "contact and putting the invoice and amount in the summary.",
        )
    cur = ctx.execute("INSERT INTO credits (org_id, invoice_id, amount_cents, reason, requested_by, approved_by, "
                      "created_at) VALUES (?, ?, ?, ?, ?, NULL, ?)",
                      (actor["org_id"], invoice_id, amount_cents, reason, contact_id, ctx.now))  # fmt: skip
    return {"credit_id": cur.lastrowid, "invoice_id": invoice_id, "credited": dollars(amount_cents), "reason": reason,
            "invoice": _invoice_view(ctx, {**inv})}  # fmt: skip


@tool(mutates=True, confirm=False)
def transfer_to_human_agent(
    ctx: Ctx,
    summary: Annotated[str, Field(description="What the customer needs and what was tried (one or two sentences).")],
    contact_id: ContactId | None = None,
    ticket_id: TicketId | None = None,
) -> dict[str, Any]:
    """Hand the conversation to a human agent with a summary of the case.

    Use it only when the request cannot be handled with the other tools and the policy (for example a credit that
    needs a manager's approval). Once the contact is identified, name them (contact_id), and the ticket only when
    the case is about one of their tickets.
    """
    if not summary.strip():
        raise ToolError("policy_violation", "A transfer needs a summary of the customer's problem (policy R11); "
                                            "write what they need and what was tried, then call it again.")
    if ticket_id is not None:
        # A hand-off names a ticket only of the contact's own organisation (policy R6).
        if contact_id is None:
            raise ToolError("invalid_arguments", "A transfer that names a ticket also names the contact (contact_id) "
                                                 "it is for; add it, or leave ticket_id out.")  # fmt: skip
        org = ctx.value("SELECT org_id FROM contacts WHERE contact_id = ?", (contact_id,))
        if _ticket_row(ctx, ticket_id)["org_id"] != org:
            raise ToolError("policy_violation", f"Ticket {ticket_id} belongs to another organisation (policy R6); "
                                                "ask the contact for their own ticket number, or leave ticket_id "
                                                "out.")  # fmt: skip
    cur = ctx.execute("INSERT INTO handoffs (contact_id, ticket_id, summary, created_at) VALUES (?, ?, ?, ?)",
                      (contact_id, ticket_id, summary.strip(), ctx.now))  # fmt: skip
    return {"handoff_id": cur.lastrowid,
            "message": "Transferred: a human agent will take over. Tell the customer and end the chat."}  # fmt: skip


TOOLS = [
    find_contact_by_email,
    find_contact_by_name_and_org,
    get_contact,
    get_organization,
    list_org_tickets,
    get_ticket,
    search_kb,
    get_kb_article,
    list_macros,
    list_org_invoices,
    get_invoice,
    calculate,
    create_ticket,
    create_follow_up_ticket,
    add_comment,
    set_priority,
    escalate_ticket,
    reopen_ticket,
    merge_tickets,
    solve_ticket,
    request_credit,
    transfer_to_human_agent,
]
