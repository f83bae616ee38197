"""The hr world's deterministic seed data: an org chart of ~800 people with leave, pay, checklists and documents.

Every draw comes from the ``Rng`` passed in (a child stream per part), dates are whole days before or after
the world's clock, money is integer cents, and everything iterated is a list, so a seed gives byte-identical
rows everywhere.

The rows follow the rules the tools enforce (``policy.md``): no employee's requests overlap, this year's
pending and approved leave fits the balance, carry-over never exceeds its cap. The mess an HR desk really
has is there on purpose: rehires with an old terminated record under the same email, pending requests from
last year nobody decided, people without a manager (the CEO, contractors), missing phones and emergency
contacts, onboarding checklists half done for people who already started.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from datetime import date, timedelta

from toolworld.world.rng import Rng
from toolworld.worlds.shared.clock import add_business_days
from toolworld.worlds.shared.draw import fresh, pct, weighted
from toolworld.worlds.shared.people import FIRST_NAMES, LAST_NAMES
from toolworld.worlds.shared.people import phone as _phone

from .common import (
    DOMAIN,
    HOLIDAY_DATES,
    HOLIDAYS,
    LEAVE_TYPES,
    RELATIONSHIPS,
    TODAY,
    YEAR,
    available_for,
    balance,
    leave_days,
)

#: (department, headcount of current staff, title stem); "People" is HR.
DEPARTMENTS: tuple[tuple[str, int, str], ...] = (
    ("Executive", 4, "Chief of Staff"), ("Engineering", 230, "Software Engineer"), ("Product", 45, "Product Manager"),
    ("Sales", 130, "Account Executive"), ("Marketing", 55, "Marketing Specialist"),
    ("Customer Success", 95, "Customer Success Manager"), ("Finance", 40, "Financial Analyst"),
    ("People", 16, "HR Business Partner"), ("Operations", 55, "Operations Specialist"), ("Legal", 14, "Counsel"),
)  # fmt: skip
LOCATIONS = (("Austin, TX", 35), ("Denver, CO", 25), ("Chicago, IL", 20), ("Remote", 20))
AREA_CODES = ("512", "720", "312", "206", "617", "415")
LEVEL_SALARY = {"L1": 62_000, "L2": 78_000, "L3": 96_000, "L4": 118_000, "L5": 142_000, "L6": 170_000,
                "L7": 205_000, "L8": 260_000}  # fmt: skip
N_CONTRACTORS = 30
N_TERMINATED = 70
N_REHIRES = 14
N_IT = 4

ONBOARDING: tuple[tuple[str, str, int | None], ...] = (
    # (title, owner: 'self' | 'manager' | 'it' | 'hr', index of the item it depends on)
    ("Sign the employment contract", "self", None),
    ("Set up laptop and accounts", "it", 0),
    ("Complete benefits enrollment", "self", 0),
    ("Confirm payroll and tax details", "hr", 0),
    ("Complete security awareness training", "self", 1),
    ("Hold a 30-day goals meeting", "manager", None),
    ("Assign an onboarding buddy", "manager", None),
)  # fmt: skip
OFFBOARDING: tuple[tuple[str, str, int | None], ...] = (
    ("Confirm the last working day", "manager", None),
    ("Return laptop and badge", "self", 0),
    ("Revoke system access", "it", 1),
    ("Process final pay and unused vacation", "hr", 0),
    ("Hold the exit interview", "hr", None),
)  # fmt: skip


@dataclass(slots=True)
class _Person:
    employee_id: str
    first: str
    last: str
    email: str
    dept: str
    manager: _Person | None
    title: str
    level: str
    location: str
    kind: str = "employee"
    role: str = "employee"
    status: str = "active"
    hire: date = TODAY
    term: date | None = None
    rehire_of: str | None = None
    reports: list[_Person] = field(default_factory=list)


def _day(d: date) -> str:
    return d.isoformat()


def _stamp(d: date, rng: Rng) -> str:
    return f"{d.isoformat()}T{rng.randint(8, 18):02d}:{rng.randint(0, 59):02d}:00Z"


def _business(d: date) -> date:
    """The first business day on or after ``d``."""
    while d.weekday() >= 5 or d in HOLIDAY_DATES:
        d += timedelta(days=1)
    return d


# -- people ------------------------------------------------------------------------------------------------


class _Org:
    """Builds the org chart: unique (first, last, department) and unique emails among current staff."""

    def __init__(self, rng: Rng) -> None:
        self.rng = rng
        self.people: list[_Person] = []
        self.used_ids: set[str] = set()
        self.emails: set[str] = set()
        self.names: set[tuple[str, str, str]] = set()

    def new_id(self) -> str:
        return fresh(self.rng, self.used_ids, lambda r: f"E{r.randint(10000, 99999)}")

    def person(self, dept: str, manager: _Person | None, title: str, level: str, *, name_free: bool = True) -> _Person:
        r = self.rng
        while True:
            first, last = r.choice(FIRST_NAMES), r.choice(LAST_NAMES)
            if (first, last, dept) not in self.names or not name_free:
                break
        self.names.add((first, last, dept))
        base = f"{''.join(c for c in first.lower() if c.isalnum())}.{''.join(c for c in last.lower() if c.isalnum())}"
        email, n = f"{base}@{DOMAIN}", 2
        while email in self.emails:
            email, n = f"{base}{n}@{DOMAIN}", n + 1
        self.emails.add(email)
        p = _Person(self.new_id(), first, last, email, dept, manager, title, level, weighted(r, LOCATIONS))
        if manager is not None:
            manager.reports.append(p)
        self.people.append(p)
        return p


def _org(rng: Rng) -> _Org:
    org = _Org(rng)
    r = rng
    ceo = org.person("Executive", None, "Chief Executive Officer", "L8")
    ceo.role = "manager"
    heads: dict[str, _Person] = {}
    for dept, size, stem in DEPARTMENTS:
        if dept == "Executive":
            heads[dept] = ceo
            for _ in range(size - 1):
                org.person(dept, ceo, stem, "L6")
            continue
        head = org.person(dept, ceo, f"VP, {dept}" if dept != "People" else "VP, People", "L7")
        head.role = "hr" if dept == "People" else "manager"
        heads[dept] = head
        n_managers = max(1, size // 9)
        managers = []
        for _ in range(n_managers):
            m = org.person(dept, head, f"{stem} Manager" if dept != "People" else "HR Manager", "L6")
            m.role = "hr" if dept == "People" else "manager"
            managers.append(m)
        for i in range(size - 1 - n_managers):
            level = weighted(r, (("L1", 8), ("L2", 22), ("L3", 30), ("L4", 24), ("L5", 16)))
            senior = {"L4": "Senior ", "L5": "Staff "}.get(level, "")
            title = "IT Support Specialist" if dept == "Operations" and i < N_IT else f"{senior}{stem}"
            p = org.person(dept, managers[r.below(len(managers))], title, level)
            if dept == "People":
                p.role = "hr"
    for _ in range(N_CONTRACTORS):
        dept = r.choice([d for d, _, _ in DEPARTMENTS if d not in ("Executive", "People")])
        # Most contractors report to nobody in the HR system; a few were attached to the department head.
        manager = heads[dept] if pct(r, 20) else None
        p = org.person(dept, manager, "Contractor", "L3")
        p.kind = "contractor"
    for p in org.people:
        age = r.randint(20, 11 * 365) if p is not ceo else 12 * 365
        if pct(r, 4) and p is not ceo:
            age = r.randint(5, 45)  # recent hires: onboarding under way
        p.hire = _business(TODAY - timedelta(days=age))
        if p.kind == "employee" and p is not ceo and pct(r, 4):
            p.status = "on_leave"
    return org


def _leavers(org: _Org) -> None:
    """Former employees (terminated, some long ago) and rehires whose old record is still on file."""
    r = org.rng
    current = [p for p in org.people if p.kind == "employee" and p.role != "hr" and p.manager is not None]
    for _ in range(N_TERMINATED):
        boss = r.choice([p for p in current if p.role == "manager"])
        p = org.person(boss.dept, boss, r.choice(("Software Engineer", "Account Executive", "Analyst", "Associate")),
                       weighted(r, (("L1", 20), ("L2", 40), ("L3", 40))), name_free=False)  # fmt: skip
        boss.reports.remove(p)
        p.status = "terminated"
        p.term = _business(TODAY - timedelta(days=r.randint(30, 5 * 365)))
        p.hire = _business(p.term - timedelta(days=r.randint(120, 4 * 365)))
    # Rehires: the new record is current; the old one, same name, department and email, was terminated.
    rehired = r.sample([p for p in current if p.hire > TODAY - timedelta(days=3 * 365)], N_REHIRES)
    for p in rehired:
        old = _Person(org.new_id(), p.first, p.last, p.email, p.dept, p.manager, p.title, p.level, p.location)
        old.status = "terminated"
        old.term = _business(p.hire - timedelta(days=r.randint(200, 900)))
        old.hire = _business(old.term - timedelta(days=r.randint(300, 1500)))
        p.rehire_of = old.employee_id
        org.people.insert(org.people.index(p), old)  # the old record first: the new one refers to it


# -- leave -------------------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Leave:
    employee: _Person
    leave_type: str
    start: date
    end: date
    days: int
    status: str
    decided_by: str | None = None
    note: str = ""


def _approver(p: _Person, hr: list[_Person], rng: Rng) -> str:
    if p.manager is None:
        return rng.choice(hr).employee_id
    if p.manager.status == "on_leave" and p.manager.manager is not None:
        return p.manager.manager.employee_id
    return p.manager.employee_id


def _leave(rng: Rng, people: list[_Person]) -> tuple[list[_Leave], list[tuple[object, ...]]]:
    """Leave requests and balances for the current staff (contractors take no leave in this system)."""
    hr = [p for p in people if p.role == "hr" and p.status == "active"]
    staff = [p for p in people if p.status != "terminated" and p.kind == "employee"]
    requests: list[_Leave] = []
    balances: list[tuple[object, ...]] = []
    for p in staff:
        taken: list[tuple[date, date]] = []

        def place(lo: date, hi: date, max_days: int, p: _Person = p,
                  taken: list[tuple[date, date]] = taken) -> tuple[date, date, int] | None:  # fmt: skip
            for _ in range(12):
                start = _business(lo + timedelta(days=rng.below(max(1, (hi - lo).days))))
                end = add_business_days(start, rng.randint(0, max_days - 1), HOLIDAY_DATES)
                if start < max(lo, p.hire) or end > hi or end.year != start.year:
                    continue
                if any(not (end < a or start > b) for a, b in taken):
                    continue
                taken.append((start, end))
                return start, end, leave_days(start, end)
            return None

        # Last year: vacation and sick days taken, a few refused or withdrawn, and now and then a request that
        # nobody ever decided (it still says pending).
        used_2025 = 0
        allowance_2025 = LEAVE_TYPES["vacation"][1]
        for _ in range(rng.randint(0, 4)):
            spot = place(date(YEAR - 1, 1, 6), date(YEAR - 1, 12, 19), 5)
            if spot is None:
                continue
            status = weighted(rng, (("approved", 80), ("rejected", 8), ("cancelled", 7), ("pending", 5)))
            if status == "approved" and used_2025 + spot[2] > allowance_2025:
                status = "rejected"
            if status == "approved":
                used_2025 += spot[2]
            decider = _approver(p, hr, rng) if status in ("approved", "rejected") else None
            requests.append(_Leave(p, "vacation", *spot, status, decider))
        for _ in range(rng.weighted([0, 1, 2], [45, 40, 15])):
            spot = place(date(YEAR - 1, 1, 6), date(YEAR - 1, 12, 19), 2)
            if spot is not None:
                requests.append(_Leave(p, "sick", *spot, "approved", _approver(p, hr, rng)))
        carried = min(LEAVE_TYPES["vacation"][2], allowance_2025 - used_2025) if p.hire.year < YEAR else 0

        # This year: some leave already taken, some approved ahead, some waiting for a decision.
        allowance = LEAVE_TYPES["vacation"][1]
        if p.hire.year == YEAR:  # pro-rated by whole months left
            allowance = allowance * (12 - p.hire.month + 1) // 12
        booked: list[dict[str, object]] = []
        plan = [("approved", date(YEAR, 1, 5), TODAY - timedelta(days=1)) for _ in range(rng.weighted([0, 1, 2], [40, 45, 15]))]
        plan += [("approved", TODAY + timedelta(days=3), date(YEAR, 11, 20))
                 for _ in range(rng.weighted([0, 1, 2], [50, 38, 12]))]
        plan += [("pending", TODAY + timedelta(days=2), date(YEAR, 10, 30))
                 for _ in range(rng.weighted([0, 1, 2], [55, 35, 10]))]
        for status, lo, hi in plan:
            spot = place(lo, hi, 5)
            if spot is None:
                continue
            bal = balance(allowance, carried, booked)
            if spot[2] > available_for(bal, spot[1]):
                taken.pop()
                continue
            booked.append({"end_date": _day(spot[1]), "business_days": spot[2]})
            decider = _approver(p, hr, rng) if status == "approved" else None
            requests.append(_Leave(p, "vacation", *spot, status, decider))
        if pct(rng, 30):
            spot = place(date(YEAR, 1, 5), TODAY - timedelta(days=1), 2)
            if spot is not None:
                requests.append(_Leave(p, "sick", *spot, "approved", _approver(p, hr, rng)))
        for leave_type, (_, yearly, _, _) in LEAVE_TYPES.items():
            balances.append((p.employee_id, leave_type, YEAR - 1, yearly, 0))
            this_year = allowance if leave_type == "vacation" else yearly
            balances.append((p.employee_id, leave_type, YEAR, this_year, carried if leave_type == "vacation" else 0))
    return requests, balances


def _leave_rows(rng: Rng, requests: list[_Leave]) -> list[tuple[object, ...]]:
    notes = ("", "", "", "Family trip", "Moving house", "Wedding", "Long weekend", "Medical appointment")
    ids: set[str] = set()
    rows = []
    ordered = sorted(requests, key=lambda q: (q.start, q.employee.employee_id))
    for q in ordered:
        rid = fresh(rng, ids, lambda r: f"LR-{r.randint(100000, 999999)}")
        lead = rng.randint(3, 40)
        submitted = min(q.start - timedelta(days=lead), TODAY - timedelta(days=1))
        submitted = max(submitted, q.employee.hire - timedelta(days=1))
        decided_at = None
        if q.decided_by is not None:
            decided_at = _stamp(min(submitted + timedelta(days=rng.randint(0, 3)), TODAY - timedelta(days=1)), rng)
        rows.append((rid, q.employee.employee_id, q.leave_type, _day(q.start), _day(q.end), q.days, q.status,
                     _stamp(submitted, rng), q.decided_by, decided_at,
                     rng.choice(notes) if q.leave_type == "vacation" else ""))  # fmt: skip
    return rows


# -- pay ---------------------------------------------------------------------------------------------------


def _pay(rng: Rng, people: list[_Person]) -> tuple[list[tuple[object, ...]], dict[str, int]]:
    """Salary history (hire, then yearly reviews) and comp change requests; returns the current salaries."""
    rows: list[tuple[object, ...]] = []
    current: dict[str, int] = {}
    for p in people:
        if p.kind == "contractor":
            continue
        base = LEVEL_SALARY[p.level] * 100
        salary = base - base * rng.randint(0, 12) // 100
        salary -= salary % 10000  # whole hundreds of dollars
        day = p.hire
        rows.append((len(rows) + 1, p.employee_id, salary, _day(day), "hire"))
        end = p.term or TODAY
        review = date(day.year + 1, 3, 1)
        while review <= end:
            raise_pct = rng.randint(2, 6)
            salary += salary * raise_pct // 100
            salary -= salary % 10000
            reason = "annual review" if pct(rng, 85) else "promotion adjustment"
            rows.append((len(rows) + 1, p.employee_id, salary, _day(review), reason))
            review = date(review.year + 1, 3, 1)
        current[p.employee_id] = salary
    return rows, current


def _comp_changes(rng: Rng, people: list[_Person], salary: dict[str, int], hr: list[_Person]) -> list[tuple[object, ...]]:
    """Pending proposals waiting on a skip-level manager or HR, plus decided ones from the last review cycle."""
    rows: list[tuple[object, ...]] = []
    ids: set[str] = set()
    candidates = [p for p in people if p.status == "active" and p.kind == "employee" and p.manager is not None
                  and p.manager.manager is not None and p.employee_id in salary]  # fmt: skip
    for p in rng.sample(candidates, 90):
        status = weighted(rng, (("pending", 45), ("approved", 40), ("rejected", 15)))
        pct_up = weighted(rng, (("3", 20), ("5", 25), ("8", 20), ("10", 15), ("12", 8), ("18", 7), ("25", 5)))
        now = salary[p.employee_id]
        proposed = now + now * int(pct_up) // 100
        proposed -= proposed % 10000
        assert p.manager is not None and p.manager.manager is not None
        skip = p.manager.manager
        created = TODAY - timedelta(days=rng.randint(2, 40) if status == "pending" else rng.randint(60, 300))
        approver = decided = None
        if status != "pending":
            approver = (rng.choice(hr) if int(pct_up) > 15 else skip).employee_id
            decided = _stamp(created + timedelta(days=rng.randint(1, 10)), rng)
        reason = rng.choice(("market adjustment", "promotion", "retention", "expanded scope", "performance"))
        rows.append((fresh(rng, ids, lambda r: f"CC-{r.randint(10000, 99999)}"), p.employee_id,
                     p.manager.employee_id, now, proposed, reason, status, approver, _stamp(created, rng), decided))
    rows.sort(key=lambda row: str(row[8]))
    return rows


# -- checklists and documents ----------------------------------------------------------------------------


def _checklists(rng: Rng, people: list[_Person]) -> tuple[list[tuple[object, ...]], list[tuple[object, ...]]]:
    it = [p for p in people if p.title == "IT Support Specialist" and p.status == "active"]
    hr = [p for p in people if p.role == "hr" and p.status == "active"]
    lists: list[tuple[object, ...]] = []
    items: list[tuple[object, ...]] = []
    list_ids: set[str] = set()
    item_ids: set[str] = set()

    def build(p: _Person, kind: str, start: date, done_until: date | None) -> None:
        template = ONBOARDING if kind == "onboarding" else OFFBOARDING
        cid = fresh(rng, list_ids, lambda r: f"CL-{r.randint(10000, 99999)}")
        ids: list[str] = []
        owners = {"self": p.employee_id, "it": rng.choice(it).employee_id, "hr": rng.choice(hr).employee_id,
                  "manager": (p.manager or rng.choice(hr)).employee_id}  # fmt: skip
        all_done = True
        for seq, (title, owner, dep) in enumerate(template, start=1):
            iid = fresh(rng, item_ids, lambda r: f"CI-{r.randint(100000, 999999)}")
            ids.append(iid)
            due = add_business_days(start, 2 + seq, HOLIDAY_DATES)
            done = None
            dep_done = dep is None or items[-(seq - 1 - dep)][7] is not None
            if done_until is not None and dep_done and due <= done_until + timedelta(days=rng.randint(-3, 6)):
                done = _stamp(min(due, TODAY - timedelta(days=1)), rng)
            all_done = all_done and done is not None
            items.append((iid, cid, seq, title, owners[owner], _day(due), ids[dep] if dep is not None else None, done))
        lists.append((cid, p.employee_id, kind, "complete" if all_done else "open", _stamp(start, rng)))

    for p in people:
        if p.kind != "employee":
            continue
        if p.status != "terminated" and p.hire >= date(YEAR - 1, 7, 1):
            recent = p.hire > TODAY - timedelta(days=60)
            # Recent starters: a half-done checklist; older ones mostly finished, some left with loose ends.
            until = TODAY - timedelta(days=rng.randint(0, 20)) if recent or pct(rng, 10) else date(YEAR + 1, 1, 1)
            build(p, "onboarding", p.hire - timedelta(days=7), until)
        elif p.status == "terminated" and p.term is not None and p.term >= date(YEAR - 1, 1, 1):
            build(p, "offboarding", p.term - timedelta(days=14), date(YEAR + 1, 1, 1))
    return lists, items


def _documents(rng: Rng, people: list[_Person]) -> list[tuple[object, ...]]:
    """Contracts and reviews (visible to the manager) and payslips and ID copies (confidential)."""
    rows: list[tuple[object, ...]] = []
    ids: set[str] = set()

    def add(p: _Person, doc_type: str, title: str, conf: int, day: date) -> None:
        rows.append((fresh(rng, ids, lambda r: f"DOC-{r.randint(100000, 999999)}"), p.employee_id, doc_type, title,
                     conf, _stamp(day, rng)))  # fmt: skip

    for p in people:
        if p.status == "terminated":
            if pct(rng, 50):
                add(p, "contract", f"Employment contract ({p.hire.year})", 0, p.hire - timedelta(days=10))
            continue
        kind = "Contractor agreement" if p.kind == "contractor" else "Employment contract"
        add(p, "contract", f"{kind} ({p.hire.year})", 0, p.hire - timedelta(days=10))
        if p.kind == "contractor":
            continue
        if pct(rng, 70):
            add(p, "id", "Identity document copy", 1, p.hire - timedelta(days=5))
        if p.hire < date(YEAR - 1, 10, 1):
            add(p, "review", f"Performance review {YEAR - 1}", 0, date(YEAR - 1, 12, rng.randint(1, 19)))
        for month in (12, 1, 2):
            day = date(YEAR - 1 if month == 12 else YEAR, month, 28 if month == 2 else 31)
            if day >= p.hire:
                add(p, "payslip", f"Payslip {day.strftime('%B %Y')}", 1, day)
    return rows


# -- entry point -------------------------------------------------------------------------------------------


def seed_data(db: sqlite3.Connection, rng: Rng) -> None:
    """Fill the hr schema (already created, inside the caller's transaction) with the world at ``rng``."""
    org = _org(rng.child("org"))
    _leavers(org)
    people = org.people
    r_misc = rng.child("contacts")
    heads = {p.dept: p.employee_id for p in people if p.title.startswith("VP,")}
    dept_ids = {name: f"D{i + 1:02d}" for i, (name, _, _) in enumerate(DEPARTMENTS)}
    heads["Executive"] = people[0].employee_id
    db.executemany("INSERT INTO departments VALUES (?, ?, ?)",
                   [(dept_ids[d], d, heads.get(d)) for d, _, _ in DEPARTMENTS])  # fmt: skip
    emp_rows, contact_rows = [], []
    for p in people:
        area = r_misc.choice(AREA_CODES)
        phone = None if pct(r_misc, 6) else _phone(r_misc, area)
        emp_rows.append((p.employee_id, p.first, p.last, p.email, phone, dept_ids[p.dept],
                         p.manager.employee_id if p.manager else None, p.title, p.level, p.location, p.kind, p.role,
                         p.status, _day(p.hire), _day(p.term) if p.term else None, p.rehire_of))  # fmt: skip
        if p.status == "terminated" or pct(r_misc, 14):  # some never filled in an emergency contact
            continue
        for _ in range(r_misc.weighted([1, 2], [75, 25])):
            first, last = r_misc.choice(FIRST_NAMES), r_misc.choice((p.last, r_misc.choice(LAST_NAMES)))
            contact_rows.append((len(contact_rows) + 1, p.employee_id, f"{first} {last}", r_misc.choice(RELATIONSHIPS),
                                 _phone(r_misc, r_misc.choice(AREA_CODES)),
                                 _stamp(p.hire + timedelta(days=r_misc.randint(0, 30)), r_misc)))  # fmt: skip
    db.executemany("INSERT INTO employees VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", emp_rows)
    db.executemany("INSERT INTO emergency_contacts VALUES (?, ?, ?, ?, ?, ?)", contact_rows)
    db.executemany("INSERT INTO leave_types VALUES (?, ?, ?, ?, ?)",
                   [(k, *v) for k, v in LEAVE_TYPES.items()])  # fmt: skip
    db.executemany("INSERT INTO holidays VALUES (?, ?)", HOLIDAYS)
    requests, balances = _leave(rng.child("leave"), people)
    db.executemany("INSERT INTO leave_balances VALUES (?, ?, ?, ?, ?)", balances)
    db.executemany("INSERT INTO leave_requests VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                   _leave_rows(rng.child("leave_ids"), requests))  # fmt: skip
    comp_rows, salary = _pay(rng.child("pay"), people)
    db.executemany("INSERT INTO compensation VALUES (?, ?, ?, ?, ?)", comp_rows)
    hr = [p for p in people if p.role == "hr" and p.status == "active"]
    db.executemany("INSERT INTO comp_change_requests VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                   _comp_changes(rng.child("changes"), people, salary, hr))  # fmt: skip
    lists, items = _checklists(rng.child("checklists"), people)
    db.executemany("INSERT INTO checklists VALUES (?, ?, ?, ?, ?)", lists)
    db.executemany("INSERT INTO checklist_items VALUES (?, ?, ?, ?, ?, ?, ?, ?)", items)
    db.executemany("INSERT INTO documents VALUES (?, ?, ?, ?, ?, ?)", _documents(rng.child("documents"), people))
    cases = [(1, people[5].employee_id, "Asked why the January payslip showed the old tax withholding; corrected.",
              "closed", "2026-02-03T10:12:00Z")]  # fmt: skip
    db.executemany("INSERT INTO hr_cases VALUES (?, ?, ?, ?, ?)", cases)
