"""The crm world's deterministic seed data: a sales team, its accounts and contacts, leads, deals and quotes.

Every draw comes from the ``Rng`` passed in (one child stream per part), money is integer cents and times are
whole days or seconds before the world's clock, so a seed gives byte-identical rows on every machine. Lists
and dicts in insertion order are iterated, never sets.

The rows follow the rules the tools enforce (``policy.md``) where a live CRM would, and break them where a
real one is messy: duplicate leads of one person (e-mail in another case or with a typo), leads of people who
are already contacts, open deals whose close date has passed, accounts nobody owns, contacts without a phone
or title, quotes past their expiry, and lost deals that still have an open quote.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from toolworld.world.rng import Rng
from toolworld.worlds.shared.companies import INDUSTRIES, SIZES, company_domain, company_name, work_email
from toolworld.worlds.shared.draw import pct, weighted
from toolworld.worlds.shared.people import FIRST_NAMES, LAST_NAMES, phone
from toolworld.worlds.shared.places import CITIES

from .common import (
    DAY,
    LEAD_SOURCES,
    LOSS_REASONS,
    NOW,
    QUOTE_VALID_DAYS,
    STAGE_PROBABILITY,
    TERRITORIES,
    after,
    days_before_now,
)

N_ACCOUNTS = 900
N_LEADS = 1400
N_DUPLICATE_LEADS = 90
N_CONTACT_LEADS = 60
N_ACTIVITIES = 2400
REPS_PER_TERRITORY = 10
COMPANY_DOMAIN = "corvid.example.com"
TITLES = ("CTO", "VP Engineering", "IT Director", "Head of Operations", "CFO", "Procurement Manager",
          "Engineering Manager", "Data Lead", "COO", "Security Officer")  # fmt: skip
#: The price book: (name, family, list price per unit in cents).
PRODUCTS: tuple[tuple[str, str, int], ...] = (
    ("Analytics Suite", "license", 120000), ("Analytics Suite Enterprise", "license", 340000),
    ("Data Pipeline", "license", 90000), ("Data Pipeline Pro", "license", 210000),
    ("Secure Gateway", "license", 75000), ("Workflow Automation", "license", 60000),
    ("Reporting Add-on", "license", 25000), ("Mobile Access", "license", 15000),
    ("Identity Connector", "license", 40000), ("Audit Vault", "license", 55000),
    ("Onboarding Package", "service", 500000), ("Implementation Day", "service", 180000),
    ("Custom Integration", "service", 950000), ("Training Workshop", "service", 240000),
    ("Health Check", "service", 150000), ("Data Migration", "service", 720000),
    ("Standard Support", "support", 30000), ("Premium Support", "support", 80000),
    ("Dedicated Success Manager", "support", 1500000), ("Extended Hours Support", "support", 45000),
    ("Legacy Connector", "license", 20000), ("Classic Reports", "license", 10000),
)  # fmt: skip
#: Retired products stay in the price book (old quotes refer to them) but cannot be quoted.
RETIRED = ("Legacy Connector", "Classic Reports")
STAGE_COUNTS: tuple[tuple[str, int], ...] = (
    ("prospecting", 230), ("qualification", 210), ("proposal", 220), ("negotiation", 170), ("closed_won", 300),
    ("closed_lost", 270),
)  # fmt: skip
LEAD_STATUS: tuple[tuple[str, int], ...] = (("new", 30), ("working", 27), ("qualified", 18), ("disqualified", 14),
                                            ("converted", 11))  # fmt: skip


def _date(days_from_now: int) -> str:
    return after(NOW, days_from_now * DAY)[:10]


def _insert(db: sqlite3.Connection, table: str, rows: list[dict[str, Any]]) -> None:
    if not rows:
        return
    cols = list(rows[0])
    db.executemany(f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({', '.join('?' for _ in cols)})",
                   [tuple(r[c] for c in cols) for r in rows])  # fmt: skip


def _typo(rng: Rng, email: str) -> str:
    """The same address as a person typed it again: other case, or one letter of the local part doubled."""
    local, _, domain = email.partition("@")
    if pct(rng, 50):
        return local.capitalize() + "@" + domain.upper() if pct(rng, 50) else email.upper()
    i = rng.below(len(local))
    return local[: i + 1] + local[i] + local[i + 1 :] + "@" + domain


def seed_data(db: sqlite3.Connection, rng: Rng) -> None:
    """Fill the crm schema for ``rng``'s seed (about 11,000 rows)."""
    territories = [{"territory_id": t, "name": n} for t, n, _ in TERRITORIES]
    _insert(db, "territories", territories)
    _insert(db, "territory_states", [{"state": s, "territory_id": t} for t, _, states in TERRITORIES for s in states])
    territory_of = {s: t for t, _, states in TERRITORIES for s in states}

    # -- the sales team ----------------------------------------------------------------------------------------
    r = rng.child("users")
    users: list[dict[str, Any]] = []
    names: list[tuple[str, str]] = []

    def person() -> tuple[str, str]:
        while True:
            name = (r.choice(FIRST_NAMES), r.choice(LAST_NAMES))
            if name not in names:
                names.append(name)
                return name

    def add_user(role: str, territory: str | None, manager: str | None, active: int = 1) -> dict[str, Any]:
        first, last = person()
        u = {"user_id": f"u_{1001 + len(users)}", "first_name": first, "last_name": last,
             "email": work_email(first, last, COMPANY_DOMAIN), "role": role, "territory_id": territory,
             "manager_id": manager, "active": active}  # fmt: skip
        users.append(u)
        return u

    add_user("admin", None, None)
    reps: dict[str, list[str]] = {}
    for t, _, _ in TERRITORIES:
        mgr = add_user("manager", t, None)
        reps[t] = [add_user("rep", t, mgr["user_id"])["user_id"] for _ in range(REPS_PER_TERRITORY)]
        add_user("rep", t, mgr["user_id"], active=0)  # left the company; still owns old records
    _insert(db, "users", users)
    inactive = {u["territory_id"]: u["user_id"] for u in users if not u["active"]}

    # -- the price book ----------------------------------------------------------------------------------------
    products = [{"product_id": f"PRD-{101 + i}", "name": n, "family": f, "list_price_cents": p,
                 "active": 0 if n in RETIRED else 1} for i, (n, f, p) in enumerate(PRODUCTS)]  # fmt: skip
    _insert(db, "products", products)
    sellable = [p for p in products if p["active"]]

    # -- accounts and contacts ---------------------------------------------------------------------------------
    r = rng.child("accounts")
    accounts: list[dict[str, Any]] = []
    contacts: list[dict[str, Any]] = []
    shorts: list[str] = []
    by_account: dict[str, list[dict[str, Any]]] = {}
    for i in range(N_ACCOUNTS):
        while True:
            short, full = company_name(r)
            if short not in shorts:
                shorts.append(short)
                break
        city = r.choice(CITIES)
        t = territory_of[city.state]
        roll = r.below(100)
        owner = None if roll < 8 else inactive[t] if roll < 12 else r.choice(reps[t])
        domain = company_domain(short, r)
        a = {"account_id": f"ACC-{10001 + i}", "name": full, "industry": r.choice(INDUSTRIES),
             "size": weighted(r, SIZES), "city": city.name, "state": city.state, "domain": domain,
             "owner_id": owner, "created_at": days_before_now(r.randint(40, 2200))}  # fmt: skip
        accounts.append(a)
        people: list[dict[str, Any]] = []
        used: list[str] = []
        for _ in range(r.randint(1, 5)):
            first, last = r.choice(FIRST_NAMES), r.choice(LAST_NAMES)
            email = work_email(first, last, domain, r.below(3))
            if email in used:
                continue
            used.append(email)
            c = {"contact_id": f"CON-{20001 + len(contacts)}", "account_id": a["account_id"], "first_name": first,
                 "last_name": last, "title": None if pct(r, 12) else r.choice(TITLES), "email": email,
                 "phone": None if pct(r, 15) else phone(r, city.area_code),
                 "do_not_contact": 1 if pct(r, 7) else 0}  # fmt: skip
            contacts.append(c)
            people.append(c)
        by_account[a["account_id"]] = people
    _insert(db, "accounts", accounts)
    _insert(db, "contacts", contacts)

    # -- opportunities and their quotes -----------------------------------------------------------------------
    r = rng.child("opportunities")
    owned = [a for a in accounts if a["owner_id"] is not None]
    opps: list[dict[str, Any]] = []
    quotes: list[dict[str, Any]] = []
    lines: list[dict[str, Any]] = []
    opp_names: list[str] = []
    stages = [s for s, n in STAGE_COUNTS for _ in range(n)]
    r.shuffle(stages)
    for stage in stages:
        a = r.choice(owned)
        # Deals of a departed rep moved to an active colleague; the account itself may still show the old owner.
        # A few deals on an account belong to a colleague of the territory (a specialist who sourced them).
        t = territory_of[a["state"]]
        owner = a["owner_id"] if a["owner_id"] != inactive[t] and not pct(r, 6) else r.choice(reps[t])
        main = r.choice(sellable[:10])
        short = a["name"].rsplit(" ", 1)[0]
        year = 2025 if stage in ("closed_won", "closed_lost") and pct(r, 60) else 2026
        name = f"{short} - {main['name']} {year}"
        k = 2
        while name in opp_names:
            name = f"{short} - {main['name']} {year} ({k})"
            k += 1
        opp_names.append(name)
        people = by_account[a["account_id"]]
        closed = stage in ("closed_won", "closed_lost")
        if closed:
            close = _date(-r.randint(1, 400))
        elif pct(r, 18):
            close = _date(-r.randint(1, 90))  # stale: the close date passed and nobody updated the deal
        else:
            close = _date(r.randint(5, 180))
        needs_contact = stage not in ("prospecting", "qualification") or pct(r, 45)
        o = {"opportunity_id": f"OPP-{40001 + len(opps)}", "account_id": a["account_id"], "owner_id": owner,
             "name": name, "stage": stage, "amount_cents": 0, "close_date": close,
             "probability": STAGE_PROBABILITY[stage],
             "contact_id": r.choice(people)["contact_id"] if needs_contact and people else None,
             "loss_reason": r.choice(LOSS_REASONS) if stage == "closed_lost" else None,
             "created_at": days_before_now(r.randint(20, 500))}  # fmt: skip
        opps.append(o)
        # Quotes by stage: a proposal may have a draft; negotiation has a sent one (some expired since); a won
        # deal an accepted one; a lost deal sometimes still an open one that nobody withdrew.
        status, age = None, 0
        if stage == "proposal" and pct(r, 55):
            status, age = "draft", r.randint(1, 26) if pct(r, 75) else r.randint(31, 60)
        elif stage == "negotiation":
            status, age = "sent", r.randint(2, 28) if pct(r, 75) else r.randint(31, 80)
        elif stage == "closed_won":
            status, age = "accepted", r.randint(20, 400)
        elif stage == "closed_lost" and pct(r, 30):
            status, age = r.choice(("sent", "draft")), r.randint(5, 120)
        elif stage == "closed_lost" and pct(r, 30):
            status, age = "rejected", r.randint(20, 300)
        total = 0
        if status is not None:
            qid = f"Q-{50001 + len(quotes)}"
            created = days_before_now(age)
            contact = o["contact_id"] if status in ("sent", "accepted", "rejected") else None
            quotes.append({"quote_id": qid, "opportunity_id": o["opportunity_id"], "status": status,
                           "created_at": created, "expires_at": after(created, QUOTE_VALID_DAYS * DAY),
                           "sent_to_contact_id": contact})  # fmt: skip
            picks = [main] + [p for p in r.sample(sellable, r.randint(0, 2)) if p is not main]
            for n, p in enumerate(picks, 1):
                qty = r.randint(1, 40) if p["family"] == "license" else r.randint(1, 5)
                disc = r.choice((0, 0, 0, 5, 10)) if pct(r, 85) else r.choice((15, 20, 25))
                lines.append({"quote_id": qid, "line_no": n, "product_id": p["product_id"], "quantity": qty,
                              "unit_price_cents": p["list_price_cents"], "discount_percent": disc})  # fmt: skip
                total += p["list_price_cents"] * qty * (100 - disc) // 100
        o["amount_cents"] = total or main["list_price_cents"] * r.randint(1, 30)
    _insert(db, "opportunities", opps)
    _insert(db, "quotes", quotes)
    _insert(db, "quote_lines", lines)

    # -- leads ---------------------------------------------------------------------------------------------------
    r = rng.child("leads")
    leads: list[dict[str, Any]] = []

    def add_lead(**row: Any) -> dict[str, Any]:
        lead = {"lead_id": f"LEAD-{30001 + len(leads)}", "merged_into": None, "converted_contact_id": None, **row}
        leads.append(lead)
        return lead

    for _ in range(N_LEADS):
        first, last = r.choice(FIRST_NAMES), r.choice(LAST_NAMES)
        city = r.choice(CITIES)
        if pct(r, 30):  # someone at a company that is already an account
            a = r.choice(accounts)
            company, domain, state = a["name"], a["domain"], a["state"]
        else:
            short, company = company_name(r)
            domain, state = company_domain(short, r), city.state
        add_lead(first_name=first, last_name=last, email=work_email(first, last, domain, r.below(3)), company=company,
                 title=None if pct(r, 25) else r.choice(TITLES), state=state, source=r.choice(LEAD_SOURCES),
                 status=weighted(r, LEAD_STATUS), owner_id=r.choice(reps[territory_of[state]]),
                 created_at=days_before_now(r.randint(1, 300)))  # fmt: skip
    # Converted leads point at the contact they became: the same person, now a contact of the account with that
    # company's name. A lead converted into an account that has been renamed since keeps no link (partial data).
    account_of = {a["name"]: a for a in accounts}
    became: list[dict[str, Any]] = []
    for lead in leads:
        a = account_of.get(lead["company"])
        if lead["status"] != "converted" or a is None:
            continue
        c = {"contact_id": f"CON-{20001 + len(contacts) + len(became)}", "account_id": a["account_id"],
             "first_name": lead["first_name"], "last_name": lead["last_name"], "title": lead["title"],
             "email": lead["email"].lower(), "phone": None, "do_not_contact": 0}  # fmt: skip
        became.append(c)
        lead["converted_contact_id"] = c["contact_id"]
    _insert(db, "contacts", became)
    # The same person entered twice: the copy has the e-mail in another case or with a typo, the same owner.
    open_leads = [lead for lead in leads if lead["status"] in ("new", "working", "qualified")]
    for original in r.sample(open_leads, N_DUPLICATE_LEADS):
        add_lead(**{**{k: original[k] for k in ("first_name", "last_name", "company", "title", "state", "owner_id")},
                    "email": _typo(r, original["email"]), "source": r.choice(LEAD_SOURCES),
                    "status": r.choice(("new", "working")), "created_at": days_before_now(r.randint(1, 60))})
    # Old merges: the copy points at the lead it was merged into.
    for original in r.sample([lead for lead in open_leads if lead not in leads[N_LEADS:]], 40):
        add_lead(**{**{k: original[k] for k in ("first_name", "last_name", "company", "title", "state", "owner_id")},
                    "email": _typo(r, original["email"]), "source": "import", "status": "merged",
                    "created_at": days_before_now(r.randint(60, 300))}, )
        leads[-1]["merged_into"] = original["lead_id"]
    # People who are already contacts, entered again as leads (a list import, a web form).
    for c in r.sample(contacts, N_CONTACT_LEADS):
        a = next(x for x in accounts if x["account_id"] == c["account_id"])
        add_lead(first_name=c["first_name"], last_name=c["last_name"],
                 email=c["email"].upper() if pct(r, 40) else c["email"], company=a["name"], title=c["title"],
                 state=a["state"], source=r.choice(("import", "web", "event")), status=r.choice(("new", "working")),
                 owner_id=r.choice(reps[territory_of[a["state"]]]), created_at=days_before_now(r.randint(1, 90)))
    _insert(db, "leads", leads)

    # -- activities ----------------------------------------------------------------------------------------------
    r = rng.child("activities")
    acts: list[dict[str, Any]] = []
    for i in range(N_ACTIVITIES):
        o = r.choice(opps)
        people = by_account[o["account_id"]]
        c = r.choice(people) if people else None
        kind = r.choice(("call", "email", "meeting", "note")) if c and not c["do_not_contact"] else r.choice(
            ("meeting", "note"))
        topic = r.choice(("intro", "discovery", "demo", "pricing", "follow-up", "renewal", "security review"))
        acts.append({"activity_id": i + 1, "kind": kind, "subject": f"{kind.capitalize()}: {topic}",
                     "contact_id": c["contact_id"] if c else None, "account_id": o["account_id"],
                     "opportunity_id": o["opportunity_id"], "user_id": o["owner_id"],
                     "created_at": days_before_now(r.randint(1, 300))})  # fmt: skip
    _insert(db, "activities", acts)
