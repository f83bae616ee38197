"""The crm world's tools. Each write tool enforces the numbered rules of ``policy.md`` and cites them.

Every write takes ``user_id``, the rep or manager the agent acts for: the episode checks it is the person
identified with ``find_user_by_email`` and the tools check that person's rights (owner, manager, role).
Error messages are written for the agent: which rule blocked the call and what to do instead. Money is integer
cents in the database and decimal dollars in every result.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from toolworld.world import Ctx, Entity, ToolError, tool
from toolworld.worlds.shared.arith import calculate
from toolworld.worlds.shared.people import display_name as _name
from toolworld.worlds.shared.records import next_id

from .common import (
    CLOSED_STAGES,
    DAY,
    DISCOUNT_LIMITS,
    LOSS_REASONS,
    NOW,
    OPEN_STAGES,
    OUTREACH_KINDS,
    QUOTE_VALID_DAYS,
    STAGE_PROBABILITY,
    TODAY,
    after,
    dollars,
    norm_company,
    norm_email,
)

UserId = Annotated[str, Entity("user"), Field(description="The user id of the rep or manager you act for, e.g. 'u_1004' "
                                              "(from find_user_by_email).")]  # fmt: skip
RepId = Annotated[str, Entity("rep"), Field(description="A user id of the sales team, e.g. 'u_1012'.")]
AccountId = Annotated[str, Entity("account"), Field(description="The account id, e.g. 'ACC-10042'.")]
ContactId = Annotated[str, Entity("contact"), Field(description="The contact id, e.g. 'CON-20417'.")]
LeadId = Annotated[str, Entity("lead"), Field(description="The lead id, e.g. 'LEAD-30112'.")]
OpportunityId = Annotated[str, Entity("opportunity"), Field(description="The opportunity id, e.g. 'OPP-40213'.")]
QuoteId = Annotated[str, Entity("quote"), Field(description="The quote id, e.g. 'Q-50231' (printed on the quote).")]
ProductId = Annotated[str, Entity("product"), Field(description="The product id, e.g. 'PRD-104' (see list_products).")]
TerritoryId = Annotated[str, Entity("territory"), Field(description="The territory id, e.g. 'T-WEST'.")]
Stage = Literal["prospecting", "qualification", "proposal", "negotiation", "closed_won", "closed_lost"]
Percent = Annotated[int, Field(ge=0, le=100, description="Discount in whole percent, e.g. 10.")]

# -- shared views and checks -------------------------------------------------------------------------------------


def _user(ctx: Ctx, user_id: str) -> dict[str, Any]:
    row = ctx.one("SELECT * FROM users WHERE user_id = ?", (user_id,))
    assert row is not None  # existence is checked by Episode.call before the tool runs
    return row



def _territory_of_state(ctx: Ctx, state: str) -> str:
    return str(ctx.value("SELECT territory_id FROM territory_states WHERE state = ?", (state,)))


def _may_change_opportunity(ctx: Ctx, user_id: str, opp: dict[str, Any], action: str) -> dict[str, Any]:
    """The acting user, if they may change ``opp``: its owner, the owner's manager, or an admin (rule R6)."""
    me = _user(ctx, user_id)
    owner = _user(ctx, opp["owner_id"])
    if me["role"] == "admin" or opp["owner_id"] == user_id or owner["manager_id"] == user_id:
        return me
    raise ToolError(
        "policy_violation",
        f"Opportunity {opp['opportunity_id']} belongs to {_name(owner)} ({owner['user_id']}); only its owner or the "
        f"owner's manager may {action} (policy R6). Ask {_name(owner)} or their manager to do it.",
    )


def _opp(ctx: Ctx, opportunity_id: str) -> dict[str, Any]:
    row = ctx.one("SELECT * FROM opportunities WHERE opportunity_id = ?", (opportunity_id,))
    assert row is not None
    return row


def _require_open(opp: dict[str, Any], action: str) -> None:
    if opp["stage"] in CLOSED_STAGES:
        raise ToolError(
            "policy_violation",
            f"Opportunity {opp['opportunity_id']} is {opp['stage']}; a closed opportunity is final and {action} "
            "(policy R11). Tell the user, and ask whether an open deal of the account is meant instead.",
        )


def _quote_expired(q: dict[str, Any]) -> bool:
    return q["expires_at"] <= NOW


def _quote_view(ctx: Ctx, quote_id: str) -> dict[str, Any]:
    q = ctx.one("SELECT * FROM quotes WHERE quote_id = ?", (quote_id,))
    assert q is not None
    lines = ctx.all(
        "SELECT l.line_no, l.product_id, p.name, l.quantity, l.unit_price_cents, l.discount_percent FROM quote_lines l "
        "JOIN products p ON p.product_id = l.product_id WHERE l.quote_id = ? ORDER BY l.line_no",
        (quote_id,),
    )
    total = 0
    out_lines = []
    for ln in lines:
        gross = ln["unit_price_cents"] * ln["quantity"]
        net = gross * (100 - ln["discount_percent"]) // 100
        total += net
        out_lines.append({"line_no": ln["line_no"], "product_id": ln["product_id"], "product": ln["name"],
                          "quantity": ln["quantity"], "unit_price": dollars(ln["unit_price_cents"]),
                          "discount_percent": ln["discount_percent"], "line_total": dollars(net)})  # fmt: skip
    account_id = str(ctx.value("SELECT account_id FROM opportunities WHERE opportunity_id = ?", (q["opportunity_id"],)))
    return {"quote_id": q["quote_id"], "opportunity_id": q["opportunity_id"], "status": q["status"],
            "created_at": q["created_at"], "expires_at": q["expires_at"], "expired": _quote_expired(q),
            "sent_to_contact_id": q["sent_to_contact_id"], "lines": out_lines, "total": dollars(total),
            "account_contacts": _account_contacts(ctx, account_id)}  # fmt: skip


def _quote_for_change(ctx: Ctx, user_id: str, quote_id: str, action: str) -> tuple[dict[str, Any], dict[str, Any],
                                                                                    dict[str, Any]]:  # fmt: skip
    """The quote, its opportunity and the acting user, once R6 (rights) and R11 (open deal) allow ``action``."""
    q = ctx.one("SELECT * FROM quotes WHERE quote_id = ?", (quote_id,))
    assert q is not None
    opp = _opp(ctx, q["opportunity_id"])
    me = _may_change_opportunity(ctx, user_id, opp, action)
    _require_open(opp, "its quotes cannot be changed, sent or accepted")
    return q, opp, me


def _require_draft(q: dict[str, Any]) -> None:
    if q["status"] != "draft":
        raise ToolError("conflict", f"Quote {q['quote_id']} is '{q['status']}'; only a draft quote can be edited. "
                        "Create a new quote with create_quote for changes.")  # fmt: skip
    if _quote_expired(q):
        raise ToolError(
            "policy_violation",
            f"Quote {q['quote_id']} expired on {q['expires_at'][:10]} and can no longer be edited (policy R8): quotes "
            f"are valid {QUOTE_VALID_DAYS} days. Create a new quote with create_quote.",
        )


def _check_discount(me: dict[str, Any], percent: int) -> None:
    limit = DISCOUNT_LIMITS[me["role"]]
    if percent > limit:
        raise ToolError(
            "policy_violation",
            f"A {me['role']} may give at most {limit}% discount; {percent}% needs "
            f"{'a manager' if me['role'] == 'rep' and percent <= DISCOUNT_LIMITS['manager'] else 'an admin'} "
            "(policy R5). Offer a discount within the limit, or escalate with escalate_to_sales_ops.",
        )


def _account_contacts(ctx: Ctx, account_id: str) -> list[dict[str, Any]]:
    """The people of an account a deal or quote can involve, as pickers list them (do-not-contact flagged)."""
    return [{"contact_id": c["contact_id"], "name": _name(c), "email": c["email"], "title": c["title"],
             "do_not_contact": bool(c["do_not_contact"])} for c in ctx.all(
        "SELECT * FROM contacts WHERE account_id = ? ORDER BY contact_id", (account_id,))]  # fmt: skip


def _opp_view(ctx: Ctx, opp: dict[str, Any]) -> dict[str, Any]:
    account = ctx.one("SELECT name FROM accounts WHERE account_id = ?", (opp["account_id"],))
    owner = _user(ctx, opp["owner_id"])
    quotes = ctx.all("SELECT quote_id, status, expires_at FROM quotes WHERE opportunity_id = ? ORDER BY quote_id",
                     (opp["opportunity_id"],))  # fmt: skip
    out = {"opportunity_id": opp["opportunity_id"], "name": opp["name"], "account_id": opp["account_id"],
           "account_name": account["name"] if account else None, "owner_id": opp["owner_id"],
           "owner_name": _name(owner), "stage": opp["stage"], "amount": dollars(opp["amount_cents"]),
           "close_date": opp["close_date"], "probability": opp["probability"], "contact_id": opp["contact_id"],
           "quotes": [{"quote_id": q["quote_id"], "status": q["status"], "expires_at": q["expires_at"],
                       "expired": _quote_expired(q)} for q in quotes],
           "account_contacts": _account_contacts(ctx, opp["account_id"])}  # fmt: skip
    if opp["stage"] in OPEN_STAGES and opp["close_date"] < TODAY:
        out["overdue"] = True
    if opp["loss_reason"]:
        out["loss_reason"] = opp["loss_reason"]
    return out


def _lead_view(lead: dict[str, Any]) -> dict[str, Any]:
    return {k: lead[k] for k in ("lead_id", "first_name", "last_name", "email", "company", "title", "state", "source",
                                 "status", "owner_id", "created_at", "merged_into", "converted_contact_id")}


def _lead(ctx: Ctx, lead_id: str) -> dict[str, Any]:
    row = ctx.one("SELECT * FROM leads WHERE lead_id = ?", (lead_id,))
    assert row is not None
    return row


def _own_lead(ctx: Ctx, user_id: str, lead_id: str) -> dict[str, Any]:
    """The lead, if ``user_id`` owns it (rule R10). The episode refuses another person's lead once the user is
    identified; checking here too keeps the rule whole for a call made before (or without) identification."""
    lead = _lead(ctx, lead_id)
    if lead["owner_id"] != user_id:
        owner = _user(ctx, lead["owner_id"])
        raise ToolError(
            "policy_violation",
            f"Lead {lead_id} belongs to {_name(owner)}; only its owner works a lead (policy R10). Ask "
            f"{_name(owner)} to do it, or work one of the user's own leads (list_leads).",
        )
    return lead



# -- read tools ---------------------------------------------------------------------------------------------------


@tool(yields={"user": "user_id"}, identifies=True)
def find_user_by_email(ctx: Ctx, email: Annotated[str, Entity("email")]) -> dict[str, Any]:
    """Identify the rep or manager writing in from their work e-mail. Call it first: every change is made as them.

    Args:
        email: Their work e-mail, e.g. 'dana.lee@corvid.example.com'.
    """
    row = ctx.one("SELECT * FROM users WHERE email = ?", (norm_email(email),))
    if row is None:
        raise ToolError("not_found", f"No user of the sales team has the e-mail {email!r}. Ask them to check it.")
    return {"user_id": row["user_id"], "name": _name(row), "role": row["role"], "territory_id": row["territory_id"],
            "active": bool(row["active"])}  # fmt: skip


@tool(yields={"rep": "user_id", "territory": "territory_id"})
def get_user(ctx: Ctx, user_id: RepId) -> dict[str, Any]:
    """A user of the sales team: role, territory, manager and, for a manager, their team."""
    row = _user(ctx, user_id)
    out = {"user_id": row["user_id"], "name": _name(row), "email": row["email"], "role": row["role"],
           "territory_id": row["territory_id"], "manager_id": row["manager_id"], "active": bool(row["active"]),
           "discount_limit_percent": DISCOUNT_LIMITS[row["role"]]}  # fmt: skip
    if row["role"] == "manager":
        out["team"] = [{"user_id": r["user_id"], "name": _name(r), "active": bool(r["active"])} for r in ctx.all(
            "SELECT * FROM users WHERE manager_id = ? ORDER BY user_id", (user_id,))]  # fmt: skip
    return out


@tool(yields={"rep": "reps[].user_id"})
def list_territory_reps(ctx: Ctx, territory_id: TerritoryId) -> dict[str, Any]:
    """The reps and managers of a territory and the states it covers (who can own accounts there, policy R7)."""
    states = [r["state"] for r in ctx.all("SELECT state FROM territory_states WHERE territory_id = ? ORDER BY state",
                                          (territory_id,))]  # fmt: skip
    reps = ctx.all("SELECT * FROM users WHERE territory_id = ? ORDER BY user_id", (territory_id,))
    return {"territory_id": territory_id, "states": states,
            "reps": [{"user_id": r["user_id"], "name": _name(r), "role": r["role"], "active": bool(r["active"])}
                     for r in reps]}  # fmt: skip


@tool(yields={"account": "accounts[].account_id"})
def list_accounts(ctx: Ctx, user_id: UserId) -> dict[str, Any]:
    """The accounts a user works with: their own, their team's (for a manager), and unowned accounts in their
    territory. Use it to find an account the user names."""
    me = _user(ctx, user_id)
    rows = ctx.all(
        "SELECT a.* FROM accounts a LEFT JOIN users o ON o.user_id = a.owner_id "
        "JOIN territory_states t ON t.state = a.state "
        "WHERE a.owner_id = ? OR o.manager_id = ? OR (a.owner_id IS NULL AND t.territory_id = ?) "
        "OR ? = 'admin' ORDER BY a.name",
        (user_id, user_id, me["territory_id"], me["role"]),
    )
    return {"accounts": [{"account_id": a["account_id"], "name": a["name"], "state": a["state"],
                          "owner_id": a["owner_id"]} for a in rows]}  # fmt: skip


@tool(yields={"account": "accounts[].account_id"})
def search_accounts(ctx: Ctx, query: Annotated[str, Field(description="Part of the company name, e.g. 'Northwind'.")]
                    ) -> dict[str, Any]:  # fmt: skip
    """Search all accounts by company name (case-insensitive, up to 20 results)."""
    q = query.strip()
    if len(q) < 2:
        raise ToolError("invalid_arguments", "query needs at least two characters of the company name.")
    rows = ctx.all("SELECT * FROM accounts WHERE name LIKE ? ORDER BY name LIMIT 20", (f"%{q}%",))
    return {"accounts": [{"account_id": a["account_id"], "name": a["name"], "state": a["state"],
                          "owner_id": a["owner_id"]} for a in rows]}  # fmt: skip


@tool(yields={"contact": "contacts[].contact_id", "opportunity": "opportunities[].opportunity_id",
              "territory": "territory_id", "rep": "territory_team[].user_id"})  # fmt: skip
def get_account(ctx: Ctx, account_id: AccountId) -> dict[str, Any]:
    """An account: company details, owner, territory and its team (who may own it, policy R7), its contacts and
    its opportunities."""
    a = ctx.one("SELECT * FROM accounts WHERE account_id = ?", (account_id,))
    assert a is not None
    owner = ctx.one("SELECT * FROM users WHERE user_id = ?", (a["owner_id"],)) if a["owner_id"] else None
    contacts = ctx.all("SELECT * FROM contacts WHERE account_id = ? ORDER BY contact_id", (account_id,))
    opps = ctx.all("SELECT * FROM opportunities WHERE account_id = ? ORDER BY opportunity_id", (account_id,))
    territory = _territory_of_state(ctx, a["state"])
    team = ctx.all("SELECT * FROM users WHERE territory_id = ? ORDER BY user_id", (territory,))
    return {"account_id": account_id, "name": a["name"], "industry": a["industry"], "size": a["size"],
            "city": a["city"], "state": a["state"], "territory_id": territory,
            "territory_team": [{"user_id": u["user_id"], "name": _name(u), "role": u["role"],
                                "active": bool(u["active"])} for u in team],
            "domain": a["domain"], "owner_id": a["owner_id"],
            "owner_name": _name(owner) if owner else None, "owner_active": bool(owner["active"]) if owner else None,
            "contacts": [{"contact_id": c["contact_id"], "name": _name(c), "title": c["title"],
                          "do_not_contact": bool(c["do_not_contact"])} for c in contacts],
            "opportunities": [{"opportunity_id": o["opportunity_id"], "name": o["name"], "stage": o["stage"]}
                              for o in opps]}  # fmt: skip


@tool(yields={"contact": "contacts[].contact_id"})
def list_contacts(ctx: Ctx, account_id: AccountId) -> dict[str, Any]:
    """The contacts of an account with their title, e-mail, phone and do-not-contact flag."""
    rows = ctx.all("SELECT * FROM contacts WHERE account_id = ? ORDER BY contact_id", (account_id,))
    return {"account_id": account_id, "contacts": [
        {"contact_id": c["contact_id"], "name": _name(c), "title": c["title"], "email": c["email"], "phone": c["phone"],
         "do_not_contact": bool(c["do_not_contact"])} for c in rows]}  # fmt: skip


@tool(yields={"account": "account_id"})
def get_contact(ctx: Ctx, contact_id: ContactId) -> dict[str, Any]:
    """One contact: account, title, e-mail, phone (None when unknown) and do-not-contact flag."""
    c = ctx.one("SELECT * FROM contacts WHERE contact_id = ?", (contact_id,))
    assert c is not None
    return {"contact_id": contact_id, "account_id": c["account_id"], "first_name": c["first_name"],
            "last_name": c["last_name"], "title": c["title"], "email": c["email"], "phone": c["phone"],
            "do_not_contact": bool(c["do_not_contact"])}  # fmt: skip


@tool(yields={"lead": "leads[].lead_id"})
def list_leads(ctx: Ctx, user_id: UserId,
               status: Literal["new", "working", "qualified", "disqualified", "converted", "merged"] | None = None
               ) -> dict[str, Any]:  # fmt: skip
    """The leads a user owns, optionally of one status."""
    rows = ctx.all("SELECT * FROM leads WHERE owner_id = ? AND (? IS NULL OR status = ?) ORDER BY lead_id",
                   (user_id, status, status))  # fmt: skip
    return {"leads": [{"lead_id": x["lead_id"], "name": _name(x), "email": x["email"], "company": x["company"],
                       "status": x["status"]} for x in rows]}  # fmt: skip


@tool(yields={"lead": "leads[].lead_id", "contact": "contacts[].contact_id"})
def search_leads(ctx: Ctx, query: Annotated[str, Field(description="An e-mail, a name or a company, e.g. "
                                                        "'jo.park@acme.example.com' or 'Park'.")]) -> dict[str, Any]:  # fmt: skip
    """Search leads and contacts by e-mail (case-insensitive), name or company, to find duplicates (policy R1)."""
    q = query.strip()
    if len(q) < 2:
        raise ToolError("invalid_arguments", "query needs at least two characters.")
    like = f"%{q}%"
    leads = ctx.all(
        "SELECT * FROM leads WHERE email LIKE ? OR first_name || ' ' || last_name LIKE ? OR company LIKE ? "
        "ORDER BY lead_id LIMIT 20", (like, like, like))  # fmt: skip
    contacts = ctx.all(
        "SELECT * FROM contacts WHERE email LIKE ? OR first_name || ' ' || last_name LIKE ? ORDER BY contact_id "
        "LIMIT 20", (like, like))  # fmt: skip
    return {"leads": [{"lead_id": x["lead_id"], "name": _name(x), "email": x["email"], "company": x["company"],
                       "status": x["status"], "owner_id": x["owner_id"]} for x in leads],
            "contacts": [{"contact_id": c["contact_id"], "name": _name(c), "email": c["email"],
                          "account_id": c["account_id"]} for c in contacts]}  # fmt: skip


@tool
def get_lead(ctx: Ctx, lead_id: LeadId) -> dict[str, Any]:
    """One lead with its status, owner and, when merged or converted, where it went."""
    return _lead_view(_lead(ctx, lead_id))


@tool(yields={"opportunity": "opportunities[].opportunity_id"})
def list_opportunities(ctx: Ctx, user_id: UserId, stage: Stage | None = None) -> dict[str, Any]:
    """The opportunities a user owns or that are on accounts they own (a colleague's deal there shows its
    owner_id), and for a manager their team's; optionally of one stage."""
    rows = ctx.all(
        "SELECT o.* FROM opportunities o JOIN users u ON u.user_id = o.owner_id "
        "JOIN accounts a ON a.account_id = o.account_id "
        "WHERE (o.owner_id = ? OR u.manager_id = ? OR a.owner_id = ?) AND (? IS NULL OR o.stage = ?) ORDER BY o.name",
        (user_id, user_id, user_id, stage, stage),
    )
    return {"opportunities": [{"opportunity_id": o["opportunity_id"], "name": o["name"], "stage": o["stage"],
                               "amount": dollars(o["amount_cents"]), "close_date": o["close_date"],
                               "owner_id": o["owner_id"]} for o in rows]}  # fmt: skip


@tool(yields={"quote": "quotes[].quote_id", "account": "account_id", "contact": "account_contacts[].contact_id",
              "rep": "owner_id"})  # fmt: skip
def get_opportunity(ctx: Ctx, opportunity_id: OpportunityId) -> dict[str, Any]:
    """One opportunity: stage, amount, close date, owner, primary contact (contact_id), its quotes, and the
    contacts of its account."""
    return _opp_view(ctx, _opp(ctx, opportunity_id))


@tool(yields={"opportunity": "opportunity_id", "contact": "account_contacts[].contact_id"})
def get_quote(ctx: Ctx, quote_id: QuoteId) -> dict[str, Any]:
    """One quote: status, expiry, lines with discounts, the total in dollars, and the contacts of the account it
    can be sent to."""
    return _quote_view(ctx, quote_id)


@tool(yields={"product": "products[].product_id"})
def list_products(ctx: Ctx, user_id: UserId) -> dict[str, Any]:
    """The price book as the user may quote it: every product with its family, list price per unit (dollars) and
    whether it can be quoted, and the largest discount the user's role may give (policy R5)."""
    me = _user(ctx, user_id)
    rows = ctx.all("SELECT * FROM products ORDER BY product_id")
    return {"discount_limit_percent": DISCOUNT_LIMITS[me["role"]], "products": [{"product_id": p["product_id"], "name": p["name"], "family": p["family"],
                          "list_price": dollars(p["list_price_cents"]), "active": bool(p["active"])}
                         for p in rows]}  # fmt: skip


# -- write tools --------------------------------------------------------------------------------------------------


@tool(mutates=True, yields={"lead": "lead_id"})
def create_lead(
    ctx: Ctx,
    user_id: UserId,
    first_name: Annotated[str, Field(description="The person's first name.")],
    last_name: Annotated[str, Field(description="The person's last name.")],
    email: Annotated[str, Field(description="The person's e-mail.")],
    company: Annotated[str, Field(description="Their company's name.")],
    state: Annotated[str, Field(description="Two-letter US state of the company, e.g. 'TX'.")],
    source: Literal["web", "referral", "event", "partner", "outbound", "import"],
    title: Annotated[str | None, Field(description="Their job title, if known.")] = None,
) -> dict[str, Any]:
    """Create a new lead owned by the user. Refused when the e-mail is already a lead or a contact (policy R1)."""
    st = state.strip().upper()
    if ctx.value("SELECT 1 FROM territory_states WHERE state = ?", (st,)) is None:
        raise ToolError("invalid_arguments", f"state {state!r} is not a two-letter US state code such as 'TX'.")
    if not first_name.strip() or not last_name.strip() or not company.strip() or "@" not in email:
        raise ToolError("invalid_arguments", "first_name, last_name, company and a valid email are all required.")
    key = norm_email(email)
    dup = ctx.one("SELECT lead_id, status FROM leads WHERE LOWER(TRIM(email)) = ? AND status != 'merged' "
                  "ORDER BY lead_id", (key,))  # fmt: skip
    if dup is not None:
        raise ToolError(
            "policy_violation",
            f"{email} is already lead {dup['lead_id']} ({dup['status']}); duplicate leads are not created (policy "
            "R1). Work that lead instead, or merge duplicates with merge_leads.",
        )
    contact = ctx.one("SELECT contact_id, account_id FROM contacts WHERE LOWER(TRIM(email)) = ?", (key,))
    if contact is not None:
        raise ToolError(
            "policy_violation",
            f"{email} is already contact {contact['contact_id']} of account {contact['account_id']}; a known contact "
            "is not entered again as a lead (policy R1). Log activity on the contact instead.",
        )
    lead_id = next_id(ctx, "leads", "lead_id", "LEAD-")
    ctx.execute(
        "INSERT INTO leads (lead_id, first_name, last_name, email, company, title, state, source, status, owner_id, "
        "created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'new', ?, ?)",
        # A title of only spaces is no title: stored as NULL like a lead entered without one.
        (lead_id, first_name.strip(), last_name.strip(), key, company.strip(), (title or "").strip() or None, st,
         source, user_id, ctx.now),
    )
    return _lead_view(_lead(ctx, lead_id))


@tool(mutates=True)
def update_lead_status(ctx: Ctx, user_id: UserId, lead_id: LeadId,
                       status: Literal["working", "qualified", "disqualified"]) -> dict[str, Any]:  # fmt: skip
    """Move one of the user's leads to working, qualified or disqualified."""
    lead = _own_lead(ctx, user_id, lead_id)
    if lead["status"] in ("converted", "merged"):
        raise ToolError("conflict", f"Lead {lead_id} is {lead['status']} and can no longer change; see get_lead.")
    if lead["status"] == status:
        raise ToolError("conflict", f"Lead {lead_id} is already {status}; nothing to change.")
    ctx.execute("UPDATE leads SET status = ? WHERE lead_id = ?", (status, lead_id))
    return _lead_view(_lead(ctx, lead_id))


@tool(mutates=True)
def merge_leads(ctx: Ctx, user_id: UserId, primary_lead_id: LeadId, duplicate_lead_id: LeadId) -> dict[str, Any]:
    """Merge a duplicate lead of the same person into the lead to keep: the duplicate becomes 'merged'.

    Args:
        primary_lead_id: The lead to keep (usually the older one).
        duplicate_lead_id: The copy to retire.
    """
    if primary_lead_id == duplicate_lead_id:
        raise ToolError("invalid_arguments", "primary_lead_id and duplicate_lead_id are the same lead.")
    keep, dup = _own_lead(ctx, user_id, primary_lead_id), _own_lead(ctx, user_id, duplicate_lead_id)
    for x in (keep, dup):
        if x["status"] in ("converted", "merged"):
            raise ToolError("conflict", f"Lead {x['lead_id']} is already {x['status']}; merge only open leads.")
    if (norm_company(keep["first_name"] + " " + keep["last_name"]) != norm_company(dup["first_name"] + " "
            + dup["last_name"])) or norm_company(keep["company"]) != norm_company(dup["company"]):  # fmt: skip
        raise ToolError(
            "policy_violation",
            f"Leads {primary_lead_id} and {duplicate_lead_id} are not the same person at the same company; only "
            "duplicates are merged (policy R1). Check both with get_lead.",
        )
    ctx.execute("UPDATE leads SET status = 'merged', merged_into = ? WHERE lead_id = ?",
                (primary_lead_id, duplicate_lead_id))  # fmt: skip
    return {"kept": _lead_view(_lead(ctx, primary_lead_id)), "merged": _lead_view(_lead(ctx, duplicate_lead_id))}


@tool(mutates=True, yields={"contact": "contact_id", "account": "account_id"})
def convert_lead(ctx: Ctx, user_id: UserId, lead_id: LeadId, account_id: AccountId | None = None) -> dict[str, Any]:
    """Convert a qualified lead into a contact: into the existing account of its company (give account_id), or
    into a new account owned by the user when no account has that company's name.

    Args:
        account_id: The existing account of the lead's company; leave it out only when there is none.
    """
    lead = _own_lead(ctx, user_id, lead_id)
    if lead["status"] != "qualified":
        raise ToolError(
            "policy_violation",
            f"Lead {lead_id} is '{lead['status']}'; only a qualified lead can be converted (policy R2). Qualify it "
            "first with update_lead_status if the user confirms it is qualified.",
        )
    match = ctx.one("SELECT account_id, name FROM accounts WHERE LOWER(name) = ? ORDER BY account_id",
                    (norm_company(lead["company"]),))  # fmt: skip
    if match is not None and account_id != match["account_id"]:
        raise ToolError(
            "policy_violation",
            f"The lead's company {lead['company']!r} is already account {match['account_id']}; convert it into that "
            "account (policy R2): use that account_id and call convert_lead again.",
        )
    if match is None and account_id is not None:
        name = ctx.value("SELECT name FROM accounts WHERE account_id = ?", (account_id,))
        raise ToolError(
            "policy_violation",
            f"Account {account_id} is {name!r}, not the lead's company {lead['company']!r} (policy R2); leave "
            "account_id out instead to create the company's account.",
        )
    created = False
    if account_id is None:
        account_id = next_id(ctx, "accounts", "account_id", "ACC-")
        domain = lead["email"].split("@", 1)[1].lower()
        ctx.execute(
            "INSERT INTO accounts (account_id, name, industry, size, city, state, domain, owner_id, created_at) "
            "VALUES (?, ?, 'unspecified', 'unknown', '', ?, ?, ?, ?)",
            (account_id, lead["company"], lead["state"], domain, user_id, ctx.now),
        )
        created = True
    email = norm_email(lead["email"])
    contact = ctx.one("SELECT contact_id FROM contacts WHERE account_id = ? AND LOWER(TRIM(email)) = ?",
                      (account_id, email))  # fmt: skip
    if contact is not None:
        contact_id = contact["contact_id"]
    else:
        contact_id = next_id(ctx, "contacts", "contact_id", "CON-")
        ctx.execute(
            "INSERT INTO contacts (contact_id, account_id, first_name, last_name, title, email, phone, do_not_contact) "
            "VALUES (?, ?, ?, ?, ?, ?, NULL, 0)",
            (contact_id, account_id, lead["first_name"], lead["last_name"], lead["title"], email),
        )
    ctx.execute("UPDATE leads SET status = 'converted', converted_contact_id = ? WHERE lead_id = ?",
                (contact_id, lead_id))  # fmt: skip
    return {"lead_id": lead_id, "status": "converted", "contact_id": contact_id, "account_id": account_id,
            "account_created": created}  # fmt: skip


@tool(mutates=True)
def update_opportunity_stage(ctx: Ctx, user_id: UserId, opportunity_id: OpportunityId, stage: Stage,
                             loss_reason: Literal["price", "lost to competitor", "no budget", "no decision",
                                                  "timing"] | None = None) -> dict[str, Any]:  # fmt: skip
    """Move an opportunity to its next stage, or close it as lost (with a loss_reason) from any open stage.

    Args:
        loss_reason: Why the deal was lost; required for closed_lost, and only for it.
    """
    opp = _opp(ctx, opportunity_id)
    _may_change_opportunity(ctx, user_id, opp, "change its stage")
    current = opp["stage"]
    if current in CLOSED_STAGES:
        raise ToolError("policy_violation", f"Opportunity {opportunity_id} is {current}; a closed opportunity is final "
                        "(policy R4). Tell the user, and ask whether an open deal is meant instead.")  # fmt: skip
    if stage == current:
        raise ToolError("conflict", f"Opportunity {opportunity_id} is already in {stage}; nothing to change.")
    if stage == "closed_lost":
        if loss_reason is None:
            raise ToolError("policy_violation", "Closing an opportunity as lost needs a loss_reason, one of "
                            f"{', '.join(LOSS_REASONS)} (policy R4); ask the user why it was lost.")  # fmt: skip
    else:
        if loss_reason is not None:
            raise ToolError("invalid_arguments", "loss_reason is only for stage 'closed_lost'; leave it out.")
        nxt = OPEN_STAGES[OPEN_STAGES.index(current) + 1] if current != "negotiation" else "closed_won"
        if stage != nxt:
            raise ToolError(
                "policy_violation",
                f"Opportunity {opportunity_id} is in {current}; stages move one step forward at a time, so the next "
                f"stage is {nxt} (policy R4). Move it to {nxt} first if the user confirms, or ask the user.",
            )
        quotes = ctx.all("SELECT * FROM quotes WHERE opportunity_id = ?", (opportunity_id,))
        if stage == "proposal" and opp["contact_id"] is None:
            raise ToolError("policy_violation", f"Opportunity {opportunity_id} has no primary contact; a proposal needs "
                            "one (policy R3). Set it first with set_opportunity_contact.")  # fmt: skip
        if stage == "negotiation" and not any(q["status"] == "sent" and not _quote_expired(q) for q in quotes):
            raise ToolError("policy_violation", f"Opportunity {opportunity_id} has no sent, unexpired quote; "
                            "negotiation needs one (policy R3). Create and send a quote first (create_quote, send_quote).")  # fmt: skip
        if stage == "closed_won" and not any(q["status"] == "accepted" for q in quotes):
            # Worded without "closed": a refusal that merely says some deal is closed must not pass for citing this.
            raise ToolError("policy_violation", f"Opportunity {opportunity_id} has no accepted quote; a deal is won "
                            "only with one (policy R3). Record the customer's acceptance with accept_quote first.")  # fmt: skip
    closing = stage in CLOSED_STAGES
    ctx.execute(
        "UPDATE opportunities SET stage = ?, probability = ?, loss_reason = ?, close_date = CASE WHEN ? THEN ? "
        "ELSE close_date END WHERE opportunity_id = ?",
        (stage, STAGE_PROBABILITY[stage], loss_reason, closing, TODAY, opportunity_id),
    )
    return _opp_view(ctx, _opp(ctx, opportunity_id))


@tool(mutates=True)
def set_opportunity_contact(ctx: Ctx, user_id: UserId, opportunity_id: OpportunityId,
                            contact_id: ContactId) -> dict[str, Any]:  # fmt: skip
    """Make a contact of the opportunity's account its primary contact (the contact role a proposal needs)."""
    opp = _opp(ctx, opportunity_id)
    _may_change_opportunity(ctx, user_id, opp, "change its contact")
    _require_open(opp, "its contact cannot change")
    c = ctx.one("SELECT * FROM contacts WHERE contact_id = ?", (contact_id,))
    assert c is not None
    if c["account_id"] != opp["account_id"]:
        raise ToolError("invalid_arguments", f"Contact {contact_id} is at account {c['account_id']}, not at the "
                        f"opportunity's account {opp['account_id']}; pick one of its contacts (list_contacts).")  # fmt: skip
    if opp["contact_id"] == contact_id:
        raise ToolError("conflict", f"{contact_id} is already the primary contact; nothing to change.")
    ctx.execute("UPDATE opportunities SET contact_id = ? WHERE opportunity_id = ?", (contact_id, opportunity_id))
    return _opp_view(ctx, _opp(ctx, opportunity_id))


@tool(mutates=True, yields={"quote": "quote_id"})
def create_quote(ctx: Ctx, user_id: UserId, opportunity_id: OpportunityId) -> dict[str, Any]:
    """Create an empty draft quote on an open opportunity; it is valid for 30 days. Add lines with add_quote_line."""
    opp = _opp(ctx, opportunity_id)
    _may_change_opportunity(ctx, user_id, opp, "quote it")
    _require_open(opp, "it cannot get new quotes")
    quote_id = next_id(ctx, "quotes", "quote_id", "Q-")
    ctx.execute(
        "INSERT INTO quotes (quote_id, opportunity_id, status, created_at, expires_at) VALUES (?, ?, 'draft', ?, ?)",
        (quote_id, opportunity_id, ctx.now, after(ctx.now, QUOTE_VALID_DAYS * DAY)),
    )
    return _quote_view(ctx, quote_id)


@tool(mutates=True)
def add_quote_line(ctx: Ctx, user_id: UserId, quote_id: QuoteId, product_id: ProductId,
                   quantity: Annotated[int, Field(ge=1, le=10000, description="Units (seats, days, packages).")],
                   discount_percent: Percent = 0) -> dict[str, Any]:  # fmt: skip
    """Add a product to a draft quote at its list price, with an optional discount within the user's limit (R5).

    Returns the quote with its new total (dollars).
    """
    q, _, me = _quote_for_change(ctx, user_id, quote_id, "change its quotes")
    _require_draft(q)
    p = ctx.one("SELECT * FROM products WHERE product_id = ?", (product_id,))
    assert p is not None
    if not p["active"]:
        raise ToolError("conflict", f"{p['name']} ({product_id}) is retired and cannot be quoted; pick an active "
                        "product from list_products.")  # fmt: skip
    _check_discount(me, discount_percent)
    n = int(ctx.value("SELECT COALESCE(MAX(line_no), 0) FROM quote_lines WHERE quote_id = ?", (quote_id,))) + 1
    ctx.execute("INSERT INTO quote_lines (quote_id, line_no, product_id, quantity, unit_price_cents, discount_percent) "
                "VALUES (?, ?, ?, ?, ?, ?)", (quote_id, n, product_id, quantity, p["list_price_cents"],
                                              discount_percent))  # fmt: skip
    return _quote_view(ctx, quote_id)


@tool(mutates=True)
def set_quote_discount(ctx: Ctx, user_id: UserId, quote_id: QuoteId, discount_percent: Percent) -> dict[str, Any]:
    """Set one discount on every line of a draft quote, within the user's limit (rep 10%, manager 25%, policy R5).

    Returns the quote with its new total (dollars).
    """
    q, _, me = _quote_for_change(ctx, user_id, quote_id, "change its quotes")
    _require_draft(q)
    if not ctx.value("SELECT COUNT(*) FROM quote_lines WHERE quote_id = ?", (quote_id,)):
        raise ToolError("conflict", f"Quote {quote_id} has no lines yet; add them with add_quote_line first.")
    _check_discount(me, discount_percent)
    ctx.execute("UPDATE quote_lines SET discount_percent = ? WHERE quote_id = ?", (discount_percent, quote_id))
    return _quote_view(ctx, quote_id)


@tool(mutates=True)
def send_quote(ctx: Ctx, user_id: UserId, quote_id: QuoteId, contact_id: ContactId) -> dict[str, Any]:
    """Send a draft quote to a contact of the opportunity's account (by e-mail). Refused once the quote expired
    (R8) or for a do-not-contact contact (R9)."""
    q, opp, _ = _quote_for_change(ctx, user_id, quote_id, "send its quotes")
    if q["status"] != "draft":
        raise ToolError("conflict", f"Quote {quote_id} is '{q['status']}'; only a draft quote can be sent.")
    if _quote_expired(q):
        raise ToolError("policy_violation", f"Quote {quote_id} expired on {q['expires_at'][:10]} and cannot be sent "
                        "(policy R8); create a new quote with create_quote.")  # fmt: skip
    if not ctx.value("SELECT COUNT(*) FROM quote_lines WHERE quote_id = ?", (quote_id,)):
        raise ToolError("conflict", f"Quote {quote_id} has no lines; add them with add_quote_line before sending.")
    c = ctx.one("SELECT * FROM contacts WHERE contact_id = ?", (contact_id,))
    assert c is not None
    if c["account_id"] != opp["account_id"]:
        raise ToolError("invalid_arguments", f"Contact {contact_id} is not at the opportunity's account "
                        f"{opp['account_id']}; send to one of its contacts (list_contacts).")  # fmt: skip
    if c["do_not_contact"]:
        raise ToolError("policy_violation", f"{_name(c)} ({contact_id}) is marked do-not-contact; no e-mail, call or "
                        "quote may be sent to them (policy R9). Send it to another contact of the account.")  # fmt: skip
    ctx.execute("UPDATE quotes SET status = 'sent', sent_to_contact_id = ? WHERE quote_id = ?", (contact_id, quote_id))
    return _quote_view(ctx, quote_id)


@tool(mutates=True)
def accept_quote(ctx: Ctx, user_id: UserId, quote_id: QuoteId) -> dict[str, Any]:
    """Record that the customer accepted a sent quote (before it expired, policy R8); the opportunity amount becomes
    the quote total. The deal can then be closed as won."""
    q, opp, _ = _quote_for_change(ctx, user_id, quote_id, "accept its quotes")
    if q["status"] != "sent":
        raise ToolError("conflict", f"Quote {quote_id} is '{q['status']}'; only a sent quote can be accepted.")
    if _quote_expired(q):
        raise ToolError("policy_violation", f"Quote {quote_id} expired on {q['expires_at'][:10]} and cannot be "
                        "accepted (policy R8); create and send a new quote.")  # fmt: skip
    ctx.execute("UPDATE quotes SET status = 'accepted' WHERE quote_id = ?", (quote_id,))
    view = _quote_view(ctx, quote_id)
    ctx.execute("UPDATE opportunities SET amount_cents = ? WHERE opportunity_id = ?",
                (round(view["total"] * 100), opp["opportunity_id"]))  # fmt: skip
    return view


@tool(mutates=True, yields={})
def log_activity(ctx: Ctx, user_id: UserId, contact_id: ContactId, kind: Literal["call", "email", "meeting", "note"],
                 subject: Annotated[str, Field(description="One line on what happened, e.g. 'Demo of the suite'.")],
                 opportunity_id: OpportunityId | None = None) -> dict[str, Any]:  # fmt: skip
    """Record a call, e-mail, meeting or note with a contact (optionally on one of the account's opportunities)."""
    c = ctx.one("SELECT * FROM contacts WHERE contact_id = ?", (contact_id,))
    assert c is not None
    if kind in OUTREACH_KINDS and c["do_not_contact"]:
        raise ToolError("policy_violation", f"{_name(c)} ({contact_id}) is marked do-not-contact; no {kind} may be "
                        "logged with them (policy R9). Log a meeting they asked for or a note instead, or ask the user about "
                        "another contact.")  # fmt: skip
    if not subject.strip():
        raise ToolError("invalid_arguments", "subject is empty; say in one line what happened.")
    if opportunity_id is not None:
        opp = _opp(ctx, opportunity_id)
        if opp["account_id"] != c["account_id"]:
            raise ToolError("invalid_arguments", f"Opportunity {opportunity_id} is not at the contact's account "
                            f"{c['account_id']}; leave it out or pick one of that account's.")  # fmt: skip
    cur = ctx.execute("INSERT INTO activities (kind, subject, contact_id, account_id, opportunity_id, user_id, "
                      "created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                      (kind, subject.strip(), contact_id, c["account_id"], opportunity_id, user_id, ctx.now))  # fmt: skip
    return {"activity_id": cur.lastrowid, "kind": kind, "contact_id": contact_id, "account_id": c["account_id"],
            "opportunity_id": opportunity_id, "subject": subject.strip(), "created_at": ctx.now}  # fmt: skip


@tool(mutates=True)
def reassign_account(ctx: Ctx, user_id: UserId, account_id: AccountId, new_owner_id: RepId) -> dict[str, Any]:
    """Give an account a new owner: an active rep of the account's territory (policy R7).

    Who may: the current owner, a manager of the account's territory, or an admin; a rep of the territory may
    also take an account nobody owns.
    """
    a = ctx.one("SELECT * FROM accounts WHERE account_id = ?", (account_id,))
    assert a is not None
    me = _user(ctx, user_id)
    territory = _territory_of_state(ctx, a["state"])
    allowed = (me["role"] == "admin" or a["owner_id"] == user_id
               or (me["role"] == "manager" and me["territory_id"] == territory)
               or (a["owner_id"] is None and me["territory_id"] == territory and new_owner_id == user_id))  # fmt: skip
    if not allowed:
        raise ToolError("policy_violation", f"Only the owner of account {account_id}, a manager of its territory "
                        f"{territory} or an admin may reassign it (policy R7); ask the territory's manager.")  # fmt: skip
    new = _user(ctx, new_owner_id)
    if new["role"] != "rep" or not new["active"] or new["territory_id"] != territory:
        why = ("is not active" if not new["active"] else f"is a {new['role']}, not a rep" if new["role"] != "rep"
               else f"works territory {new['territory_id']}")  # fmt: skip
        raise ToolError("policy_violation", f"{_name(new)} ({new_owner_id}) {why}; an account in {a['state']} can go "
                        f"only to an active rep of territory {territory} (policy R7). See list_territory_reps.")  # fmt: skip
    if a["owner_id"] == new_owner_id:
        raise ToolError("conflict", f"{_name(new)} already owns account {account_id}; nothing to change.")
    ctx.execute("UPDATE accounts SET owner_id = ? WHERE account_id = ?", (new_owner_id, account_id))
    return {"account_id": account_id, "name": a["name"], "previous_owner_id": a["owner_id"],
            "owner_id": new_owner_id, "owner_name": _name(new)}  # fmt: skip


@tool(mutates=True, yields={}, confirm=False)
def escalate_to_sales_ops(ctx: Ctx, user_id: UserId,
                          summary: Annotated[str, Field(description="What is needed and why (one or two sentences).")],
                          opportunity_id: OpportunityId | None = None) -> dict[str, Any]:  # fmt: skip
    """Hand a request the tools and policy cannot grant (a discount above the user's limit, say) to sales
    operations, who can approve it. Use only when no tool can do it."""
    if not summary.strip():
        raise ToolError("invalid_arguments", "summary is empty; say what the user needs and why.")
    cur = ctx.execute("INSERT INTO escalations (user_id, summary, opportunity_id, status, created_at) "
                      "VALUES (?, ?, ?, 'open', ?)", (user_id, summary.strip(), opportunity_id, ctx.now))  # fmt: skip
    return {"escalation_id": cur.lastrowid, "status": "open",
            "message": "Sales operations will follow up with the user. Tell them and end the conversation."}


TOOLS = [
    find_user_by_email,
    get_user,
    list_territory_reps,
    list_accounts,
    search_accounts,
    get_account,
    list_contacts,
    get_contact,
    list_leads,
    search_leads,
    get_lead,
    list_opportunities,
    get_opportunity,
    get_quote,
    list_products,
    calculate,
    create_lead,
    update_lead_status,
    merge_leads,
    convert_lead,
    update_opportunity_stage,
    set_opportunity_contact,
    create_quote,
    add_quote_line,
    set_quote_discount,
    send_quote,
    accept_quote,
    log_activity,
    reassign_account,
    escalate_to_sales_ops,
]
