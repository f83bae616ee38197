"""The helpdesk world's deterministic seed data: agents, customer organisations, contacts, tickets and billing.

Every draw comes from the ``Rng`` passed in (one child stream per part), times are whole seconds before the
world's clock and money is integer cents, so a seed gives byte-identical rows everywhere. Sets are used for
membership tests only; everything iterated is a list.

The data carries the mess a real desk has, each kept consistent with the rules the tools enforce
(``policy.md``): the same person twice (a deactivated older record whose e-mail differs in case, or a typo
record), the same issue filed twice (tickets to merge), tickets pending for months, deactivated contacts,
organisations whose plan expired, tickets nobody is assigned to, drafts in the knowledge base, void invoices.
"""

from __future__ import annotations

import sqlite3

from toolworld.world.rng import Rng
from toolworld.worlds.shared.clock import DAY, HOUR, MINUTE
from toolworld.worlds.shared.companies import INDUSTRIES, company_domain, company_name, work_email
from toolworld.worlds.shared.draw import fresh, pct, weighted
from toolworld.worlds.shared.people import FIRST_NAMES, LAST_NAMES, phone

from . import vocab
from .common import (
    AUTO_CLOSE_DAYS,
    CREDIT_REASONS,
    NOW,
    OUTAGE_TAG,
    PRODUCT_AREAS,
    SLA_HOURS,
    URGENT_PLANS,
    after,
    before,
    sla_due,
)

N_AGENTS = 40
N_ORGS = 320
PLAN_WEIGHTS = (("free", 25), ("team", 35), ("business", 25), ("enterprise", 15))
#: Monthly price per seat in cents, by plan (free pays nothing and gets no invoices).
SEAT_PRICE = {"free": 0, "team": 1200, "business": 2500, "enterprise": 4500}
REGIONS = (("us-east", 40), ("us-west", 25), ("eu-central", 25), ("ap-southeast", 10))
AREA_CODES = ("212", "415", "512", "617", "206", "312", "303", "404", "503", "718")
STATUS_WEIGHTS = (("new", 8), ("open", 22), ("pending", 14), ("on_hold", 5), ("solved", 16), ("closed", 35))
INVOICE_MONTHS = ("2025-09", "2025-10", "2025-11", "2025-12", "2026-01", "2026-02")


def _ts(age_s: int) -> str:
    """The ISO time ``age_s`` seconds before the world's clock."""
    return before(NOW, age_s)


def _typo(local: str, rng: Rng) -> str:
    """A one-letter slip in an e-mail local part (two neighbours swapped, or a letter doubled)."""
    i = rng.below(max(1, len(local) - 1))
    if rng.below(2) and len(local) > 2 and local[i] != local[i + 1]:
        return local[:i] + local[i + 1] + local[i] + local[i + 2:]
    return local[: i + 1] + local[i] + local[i + 1:]


def seed_data(db: sqlite3.Connection, rng: Rng) -> None:
    """Fill every table of ``schema.sql`` from ``rng`` (see the module docstring for what is in it)."""
    r_agents, r_orgs, r_contacts = rng.child("agents"), rng.child("organizations"), rng.child("contacts")
    r_tickets, r_comments, r_billing, r_kb = (rng.child("tickets"), rng.child("comments"), rng.child("billing"),
                                              rng.child("kb"))  # fmt: skip

    db.executemany("INSERT INTO sla_policies VALUES (?, ?, ?, ?)",
                   [(plan, prio, f, r) for (plan, prio), (f, r) in SLA_HOURS.items()])  # fmt: skip

    # -- agents: tier 1 most, a few managers -----------------------------------------------------------------
    agents: list[tuple[str, str, str, int, int]] = []
    used_agent_ids: set[str] = set()
    used_agent_emails: set[str] = set()
    for i in range(N_AGENTS):
        first, last = r_agents.choice(FIRST_NAMES), r_agents.choice(LAST_NAMES)
        agent_id = fresh(r_agents, used_agent_ids, lambda r: f"AG-{r.randint(100, 999)}")
        mail = fresh(r_agents, used_agent_emails,
                     lambda r, f=first, la=last: work_email(f, la, "support.lumencloud.example.com", r.below(3)))
        tier = 1 if i < 20 else 2 if i < 32 else 3
        agents.append((agent_id, f"{first} {last}", mail, tier, int(i % 7 == 3)))
    db.executemany("INSERT INTO agents VALUES (?, ?, ?, ?, ?)", agents)
    managers = [a[0] for a in agents if a[4]]
    by_tier = {t: [a[0] for a in agents if a[3] == t] for t in (1, 2, 3)}

    # -- organisations ------------------------------------------------------------------------------------------
    orgs: list[dict[str, object]] = []
    used_names: set[str] = set()
    used_org_ids: set[str] = set()
    for _ in range(N_ORGS):
        while True:
            short, legal = company_name(r_orgs)
            if short not in used_names:
                used_names.add(short)
                break
        org_id = fresh(r_orgs, used_org_ids, lambda r: f"ORG-{r.randint(10000, 99999)}")
        plan = weighted(r_orgs, PLAN_WEIGHTS)
        expired = plan != "free" and pct(r_orgs, 9)
        renews = _ts(r_orgs.randint(5 * DAY, 120 * DAY)) if expired else after(NOW, r_orgs.randint(3 * DAY, 360 * DAY))
        seats = {"free": r_orgs.randint(1, 5), "team": r_orgs.randint(5, 40), "business": r_orgs.randint(25, 250),
                 "enterprise": r_orgs.randint(200, 2500)}[plan]  # fmt: skip
        orgs.append({
            "org_id": org_id, "name": short, "legal": legal, "domain": company_domain(short, r_orgs), "plan": plan,
            "status": "expired" if expired else "active", "renews": renews, "seats": seats,
            "region": weighted(r_orgs, REGIONS), "industry": r_orgs.choice(INDUSTRIES),
            "am": None if plan == "free" else r_orgs.choice(by_tier[2] + by_tier[3]),
            "created_age": r_orgs.randint(200 * DAY, 2200 * DAY),
        })  # fmt: skip
    db.executemany(
        "INSERT INTO organizations VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [(o["org_id"], o["name"], o["legal"], o["domain"], o["plan"], o["status"], o["renews"], o["seats"],
          o["region"], o["industry"], o["am"], _ts(int(o["created_age"]))) for o in orgs],  # type: ignore[arg-type]
    )  # fmt: skip

    # -- contacts: an admin first, then members and billing contacts; duplicates and leavers ---------------------
    contact_rows: list[tuple[object, ...]] = []
    contacts_of: dict[str, list[tuple[str, str, int, int]]] = {}  # org -> (contact_id, role, active, created_age)
    used_contact_ids: set[str] = set()
    used_emails: set[str] = set()  # lower-cased
    used_names_in_org: set[tuple[str, str, str]] = set()
    for o in orgs:
        org_id, domain = str(o["org_id"]), str(o["domain"])
        style = r_contacts.below(3)
        n = r_contacts.weighted([2, 3, 4, 5, 6, 8], [15, 25, 25, 15, 12, 8])
        people = contacts_of.setdefault(org_id, [])
        for i in range(n):
            for _ in range(50):
                first, last = r_contacts.choice(FIRST_NAMES), r_contacts.choice(LAST_NAMES)
                mail = work_email(first, last, domain, style)
                if (org_id, first, last) not in used_names_in_org and mail not in used_emails:
                    break
            else:  # pragma: no cover - 50 draws always find a free name in a small organisation
                raise RuntimeError(f"no free contact name in {org_id}")
            used_names_in_org.add((org_id, first, last))
            used_emails.add(mail)
            role = "admin" if i == 0 else weighted(r_contacts, (("member", 70), ("admin", 12), ("billing", 18)))
            active = 0 if i > 0 and pct(r_contacts, 8) else 1
            age = r_contacts.randint(60 * DAY, int(o["created_age"]))  # type: ignore[call-overload]
            cid = fresh(r_contacts, used_contact_ids, lambda r: f"CT-{r.randint(100000, 999999)}")
            tel = phone(r_contacts, r_contacts.choice(AREA_CODES)) if pct(r_contacts, 70) else None
            contact_rows.append((cid, org_id, first, last, mail, tel, role, active, _ts(age)))
            people.append((cid, role, active, age))
            if active and pct(r_contacts, 5):
                # The same person signed up again: an older deactivated record whose address differs only in
                # case, or a record with a typo in the address (left active by whoever created it).
                local, host = mail.split("@")
                if pct(r_contacts, 60):
                    dup_mail, dup_active = f"{local[0].upper()}{local[1:]}@{host.upper()}", 0
                else:
                    dup_mail, dup_active = f"{_typo(local, r_contacts)}@{host}", int(pct(r_contacts, 50))
                if dup_mail != dup_mail.lower() and dup_mail.lower() == mail:
                    pass  # the case variant of the person's own address: the UNIQUE column tells them apart
                elif dup_mail in used_emails:
                    continue
                used_emails.add(dup_mail)
                dup_id = fresh(r_contacts, used_contact_ids, lambda r: f"CT-{r.randint(100000, 999999)}")
                dup_age = age + r_contacts.randint(DAY, 90 * DAY)
                contact_rows.append((dup_id, org_id, first, last, dup_mail, None, "member", dup_active, _ts(dup_age)))
                people.append((dup_id, "member", dup_active, dup_age))
    db.executemany("INSERT INTO contacts VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", contact_rows)

    # -- tags, macros, knowledge base ------------------------------------------------------------------------------
    db.executemany("INSERT INTO tags VALUES (?, ?)", [(i + 1, t) for i, t in enumerate(vocab.TAGS)])
    tag_id = {t: i + 1 for i, t in enumerate(vocab.TAGS)}
    db.executemany("INSERT INTO macros VALUES (?, ?, ?, ?)",
                   [(i + 1, name, actions, int(i != 14)) for i, (name, actions) in enumerate(vocab.MACROS)])
    kb_rows = []
    n_kb = 1000
    for area in PRODUCT_AREAS:
        for title in vocab.KB_TOPICS[area]:
            for version in range(2 if pct(r_kb, 40) else 1):
                n_kb += r_kb.randint(1, 9)
                status = "draft" if version == 1 or pct(r_kb, 10) else "published"
                body = (f"{title}. This article explains {title.lower()} step by step for workspace admins, "
                        f"with the settings involved and the most common problems.")
                kb_rows.append((f"KB-{n_kb}", title if version == 0 else f"{title} (updated)", body, area, status,
                                _ts(r_kb.randint(DAY, 700 * DAY))))  # fmt: skip
    db.executemany("INSERT INTO kb_articles VALUES (?, ?, ?, ?, ?, ?)", kb_rows)

    # -- tickets ---------------------------------------------------------------------------------------------------
    ticket_rows: list[tuple[object, ...]] = []
    comment_rows: list[tuple[object, ...]] = []
    tag_rows: list[tuple[int, int]] = []
    next_ticket = 40000 + r_tickets.randint(0, 999)

    def add_ticket(o: dict[str, object], requester: str, area: str, subject: str, status: str, prio: str,
                   created_age: int, merged_into: int | None = None) -> int:
        nonlocal next_ticket
        next_ticket += r_tickets.randint(1, 7)
        tid = next_ticket
        plan = str(o["plan"])
        created = _ts(created_age)
        fr_due, res_due = sla_due(created, plan, prio)
        fr_hours = SLA_HOURS[(plan, prio)][0]
        # Most first replies land inside the SLA; some come late, and new tickets have none yet.
        first_response = None
        if status != "new":
            late = pct(r_tickets, 15)
            reply_s = r_tickets.randint(fr_hours * HOUR, 3 * fr_hours * HOUR) if late else \
                r_tickets.randint(5 * MINUTE, fr_hours * HOUR)  # fmt: skip
            first_response = after(created, min(reply_s, max(created_age - MINUTE, MINUTE)))
        solved = closed = None
        if status in ("solved", "closed"):
            span = max(HOUR, min(created_age - HOUR, r_tickets.randint(2 * HOUR, 20 * DAY)))
            solved_age = created_age - span
            if status == "solved":
                solved_age = min(solved_age, r_tickets.randint(HOUR, (AUTO_CLOSE_DAYS - 1) * DAY))
            elif solved_age < AUTO_CLOSE_DAYS * DAY:  # closed: solved long enough ago to have auto-closed
                solved_age = AUTO_CLOSE_DAYS * DAY + r_tickets.randint(HOUR, 5 * DAY)
            solved_age = min(solved_age, created_age - MINUTE)
            solved = _ts(solved_age)
            if status == "closed":
                closed = after(solved, AUTO_CLOSE_DAYS * DAY) if merged_into is None else solved
        tier = 1 if status == "new" else r_tickets.weighted([1, 2, 3], [80, 15, 5])
        assignee = None
        if status != "new" and not pct(r_tickets, 10 if status in ("open", "pending") else 2):
            assignee = r_tickets.choice(by_tier[tier])
        updated = solved if status == "solved" else closed if status == "closed" else \
            _ts(r_tickets.randint(0, created_age))  # fmt: skip
        channel = weighted(r_tickets, (("email", 45), ("web", 30), ("chat", 15), ("phone", 5), ("api", 5)))
        desc = f"{subject}. We noticed this on {created[:10]}; it affects {r_tickets.randint(1, 40)} of our users."
        ticket_rows.append((tid, o["org_id"], requester, subject, desc, area, status, prio, channel, tier, assignee,
                            created, updated, fr_due, first_response, res_due, solved, closed, merged_into, None))
        comment_rows.append((tid, "contact", requester, 1, desc, created))
        if first_response is not None:
            comment_rows.append((tid, "agent", assignee, 1, r_comments.choice(vocab.COMMENT_REPLIES), first_response))
            if pct(r_comments, 35):
                comment_rows.append((tid, "agent", assignee, 0, r_comments.choice(vocab.INTERNAL_NOTES),
                                     min(NOW, after(first_response, r_comments.randint(MINUTE, HOUR)))))  # fmt: skip
            if pct(r_comments, 40):
                comment_rows.append((tid, "contact", requester, 1, r_comments.choice(vocab.CUSTOMER_FOLLOWUPS),
                                     min(NOW, after(first_response, r_comments.randint(HOUR, 2 * HOUR)))))  # fmt: skip
        if merged_into is not None:
            comment_rows.append((tid, "system", None, 1, f"Merged into ticket #{merged_into}.", closed))
        tags = [t for t in r_tickets.sample(list(vocab.TAGS[1:]), r_tickets.below(3))]
        if area in ("billing", "sso", "api", "performance") and area not in tags and pct(r_tickets, 50):
            tags.append(area)
        if prio == "urgent" and (str(o["plan"]) not in URGENT_PLANS or pct(r_tickets, 20)):
            tags.append(OUTAGE_TAG)  # urgent on a smaller plan only with an outage (policy R1)
        elif pct(r_tickets, 5):
            tags.append(OUTAGE_TAG)  # tagged during an incident, priority not raised (yet)
        for t in sorted(set(tags)):
            tag_rows.append((tid, tag_id[t]))
        return tid

    for o in orgs:
        people = contacts_of[str(o["org_id"])]
        n = r_tickets.weighted([2, 4, 6, 9, 14], [20, 30, 25, 15, 10])
        for _ in range(n):
            cid, role, active, c_age = r_tickets.choice(people)
            status = weighted(r_tickets, STATUS_WEIGHTS)
            if not active and status not in ("closed", "solved"):
                status = "closed"  # leavers' tickets were wrapped up
            area = "billing" if role == "billing" else r_tickets.choice(PRODUCT_AREAS)
            subject = r_tickets.choice(vocab.SUBJECTS[area])
            prio = weighted(r_tickets, (("low", 20), ("normal", 50), ("high", 22), ("urgent", 8)))
            if prio == "urgent" and str(o["plan"]) not in URGENT_PLANS and pct(r_tickets, 70):
                prio = "high"  # smaller plans are urgent only during an outage (policy R1)
            if status in ("new",):
                age = r_tickets.randint(10 * MINUTE, 4 * DAY)
            elif status == "pending" and pct(r_tickets, 30):
                age = r_tickets.randint(60 * DAY, 240 * DAY)  # stale: waiting on the customer for months
            elif status in ("open", "pending", "on_hold"):
                age = r_tickets.randint(HOUR, 3 * DAY) if pct(r_tickets, 60) else r_tickets.randint(HOUR, 25 * DAY)
            elif status == "solved":
                age = r_tickets.randint(2 * DAY, 40 * DAY)
            else:
                age = r_tickets.randint(25 * DAY, 600 * DAY)
            age = min(age, c_age - HOUR)
            if status == "solved" and age < 2 * HOUR:
                status = "open"
            tid = add_ticket(o, cid, area, subject, status, prio, age)
            if status in ("new", "open") and pct(r_tickets, 14):
                # The same issue filed again by a colleague (or the same person) a little later: one to merge.
                # (a billing contact files only billing tickets, policy R9)
                other = r_tickets.choice([p for p in people if p[2] and (area == "billing" or p[1] != "billing")])
                add_ticket(o, other[0], area, subject, r_tickets.choice(("new", "open")), prio,
                           max(5 * MINUTE, age - r_tickets.randint(10 * MINUTE, 2 * DAY)))  # fmt: skip
            elif status == "closed" and pct(r_tickets, 6):
                # An older duplicate merged into this one long ago: closed, pointing at the survivor.
                add_ticket(o, cid, area, subject, "closed", prio, age + r_tickets.randint(HOUR, 3 * DAY),
                           merged_into=tid)  # fmt: skip
    db.executemany("INSERT INTO tickets VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                   ticket_rows)
    db.executemany("INSERT INTO ticket_comments (ticket_id, author_kind, author_id, public, body, created_at) "
                   "VALUES (?, ?, ?, ?, ?, ?)", sorted(comment_rows, key=lambda c: (c[5], c[0])))  # type: ignore[arg-type]
    db.executemany("INSERT INTO ticket_tags VALUES (?, ?)", tag_rows)

    # -- invoices and credits ------------------------------------------------------------------------------------
    invoice_rows: list[tuple[object, ...]] = []
    credit_rows: list[tuple[object, ...]] = []
    n_inv = 4000
    for o in orgs:
        if o["plan"] == "free":
            continue
        people = [p for p in contacts_of[str(o["org_id"])] if p[1] in ("admin", "billing")]
        months = INVOICE_MONTHS[-1:] if o["status"] == "expired" and pct(r_billing, 30) else INVOICE_MONTHS
        for k, month in enumerate(months):
            n_inv += r_billing.randint(1, 40)
            inv_id = f"INV-{month[:4]}-{n_inv:06d}"
            seats = int(o["seats"])  # type: ignore[call-overload]
            amount = seats * SEAT_PRICE[str(o["plan"])] + (r_billing.randint(1, 9) * 1000 if pct(r_billing, 20) else 0)
            year, mon = int(month[:4]), int(month[5:])
            issued = f"{year + mon // 12}-{mon % 12 + 1:02d}-01T08:00:00Z"
            due = f"{year + mon // 12}-{mon % 12 + 1:02d}-15T23:59:59Z"
            last = k == len(months) - 1
            status = "void" if pct(r_billing, 3) else "open" if last and (o["status"] == "expired" or pct(r_billing, 30)) \
                else "paid"  # fmt: skip
            invoice_rows.append((inv_id, o["org_id"], month, amount, status, issued, due))
            if status == "paid" and people and pct(r_billing, 9):
                share = r_billing.randint(5, 40)
                credit = max(1000, amount * share // 100 // 100 * 100)
                approver = r_billing.choice(managers) if credit > 50_000 else None
                credit_rows.append((o["org_id"], inv_id, credit, r_billing.choice(CREDIT_REASONS),
                                    r_billing.choice(people)[0], approver,
                                    min(NOW, after(issued, r_billing.randint(DAY, 20 * DAY)))))
    db.executemany("INSERT INTO invoices VALUES (?, ?, ?, ?, ?, ?, ?)", invoice_rows)
    db.executemany("INSERT INTO credits (org_id, invoice_id, amount_cents, reason, requested_by, approved_by, "
                   "created_at) VALUES (?, ?, ?, ?, ?, ?, ?)", credit_rows)
