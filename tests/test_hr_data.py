"""The hr seed data is a pure function of the seed, big enough, obeys the rules the tools enforce, and carries
the mess an HR desk really has (rehires, stale requests, missing contacts, half-done checklists)."""

from __future__ import annotations

import itertools
import sqlite3
import time
from collections import Counter, defaultdict
from datetime import date
from pathlib import Path

import pytest

from toolworld.world import Rng, get_world
from toolworld.worlds.hr.common import CARRY_EXPIRY, LEAVE_TYPES, TODAY, YEAR, available_for, balance, leave_days
from toolworld.worlds.hr.data import seed_data

SCHEMA = (Path(__file__).resolve().parents[1] / "src/toolworld/worlds/hr/schema.sql").read_text(encoding="utf-8")


def build(seed: int) -> sqlite3.Connection:
    db = sqlite3.connect(":memory:", isolation_level=None)
    db.executescript(SCHEMA)
    db.execute("PRAGMA foreign_keys = ON")
    db.execute("BEGIN")
    seed_data(db, Rng(seed).child("hr"))
    db.execute("COMMIT")
    db.row_factory = sqlite3.Row
    return db


@pytest.fixture(scope="module")
def db() -> sqlite3.Connection:
    return build(0)


def dump(db: sqlite3.Connection) -> list[str]:
    return list(db.iterdump())


def test_same_seed_same_bytes_other_seed_other_data():
    a, b, c = build(3), build(3), build(4)
    assert dump(a) == dump(b)
    assert dump(a) != dump(c)


def test_size_and_build_time(db):
    tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    rows = sum(db.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0] for t in tables)
    assert rows >= 5000
    assert 600 <= db.execute("SELECT count(*) FROM employees WHERE status != 'terminated'").fetchone()[0] <= 900
    started = time.perf_counter()
    build(1)
    assert time.perf_counter() - started < 5
    assert get_world("hr").stats(0)["rows"] == rows


def test_foreign_keys_hold(db):
    assert db.execute("PRAGMA foreign_key_check").fetchall() == []


def test_people_can_be_identified(db):
    current = db.execute("SELECT e.email, e.first_name, e.last_name, d.name FROM employees e JOIN departments d "
                         "ON d.department_id = e.department_id WHERE e.status != 'terminated'").fetchall()
    assert len({r["email"] for r in current}) == len(current)
    assert len({(r["first_name"], r["last_name"], r["name"]) for r in current}) == len(current)
    assert all(r["email"].endswith(".example.com") for r in current)


def test_org_chart_is_a_tree_with_a_ceo(db):
    managers = dict(db.execute("SELECT employee_id, manager_id FROM employees").fetchall())
    for start in managers:
        seen, node = set(), start
        while node is not None:
            assert node not in seen, f"manager cycle at {start}"
            seen.add(node)
            node = managers[node]
    no_manager = db.execute("SELECT employment_type, title FROM employees WHERE manager_id IS NULL").fetchall()
    assert sum(r["title"] == "Chief Executive Officer" for r in no_manager) == 1
    assert sum(r["employment_type"] == "contractor" for r in no_manager) >= 10


def test_leave_requests_count_business_days_and_never_overlap(db):
    by_person: dict[str, list[tuple[date, date]]] = defaultdict(list)
    for r in db.execute("SELECT * FROM leave_requests"):
        start, end = date.fromisoformat(r["start_date"]), date.fromisoformat(r["end_date"])
        assert r["business_days"] == leave_days(start, end)
        assert (r["decided_by"] is not None) == (r["status"] in ("approved", "rejected"))
        if r["status"] in ("pending", "approved"):
            by_person[r["employee_id"]].append((start, end))
    for spans in by_person.values():
        spans.sort()
        assert all(a[1] < b[0] for a, b in itertools.pairwise(spans))


def test_this_years_leave_fits_the_balance_and_carry_over_is_capped(db):
    cap = LEAVE_TYPES["vacation"][2]
    for b in db.execute("SELECT * FROM leave_balances WHERE year = ? AND leave_type = 'vacation'", (YEAR,)):
        assert 0 <= b["carried_over_days"] <= cap
        booked = [dict(r) for r in db.execute(
            "SELECT end_date, business_days FROM leave_requests WHERE employee_id = ? AND leave_type = 'vacation' "
            "AND status IN ('pending', 'approved') AND start_date >= ?", (b["employee_id"], f"{YEAR}-01-01"))]
        left = balance(b["allowance_days"], b["carried_over_days"], booked)
        assert left["allowance_left"] >= 0 and available_for(left, CARRY_EXPIRY) >= 0


def test_the_mess_is_there(db):
    # Rehires: an old terminated record with the same email as the current one.
    rehires = db.execute("SELECT n.email, o.email AS old_email, o.status FROM employees n JOIN employees o "
                         "ON o.employee_id = n.rehire_of").fetchall()
    assert len(rehires) >= 10 and all(r["email"] == r["old_email"] and r["status"] == "terminated" for r in rehires)
    # Pending requests from last year nobody decided.
    assert db.execute("SELECT count(*) FROM leave_requests WHERE status = 'pending' AND start_date < ?",
                      (f"{YEAR}-01-01",)).fetchone()[0] >= 20  # fmt: skip
    # Current staff without an emergency contact, and without a phone.
    assert db.execute("SELECT count(*) FROM employees e WHERE status != 'terminated' AND NOT EXISTS (SELECT 1 FROM "
                      "emergency_contacts c WHERE c.employee_id = e.employee_id)").fetchone()[0] >= 50
    assert db.execute("SELECT count(*) FROM employees WHERE phone IS NULL").fetchone()[0] >= 20
    # Carry-over leftovers still usable until March 31.
    assert db.execute("SELECT count(*) FROM leave_balances WHERE year = ? AND carried_over_days > 0",
                      (YEAR,)).fetchone()[0] >= 100  # fmt: skip
    # Onboarding checklists still open for people who already started.
    open_started = db.execute("SELECT count(*) FROM checklists c JOIN employees e ON e.employee_id = c.employee_id "
                              "WHERE c.kind = 'onboarding' AND c.status = 'open' AND e.hire_date < ?",
                              (TODAY.isoformat(),)).fetchone()[0]  # fmt: skip
    assert open_started >= 10
    statuses = Counter(r[0] for r in db.execute("SELECT status FROM employees"))
    assert statuses["on_leave"] >= 10 and statuses["terminated"] >= 50
    # Pay changes: some within the 15% a skip-level may approve, some above it.
    pending = db.execute("SELECT current_salary_cents AS a, proposed_salary_cents AS b FROM comp_change_requests "
                         "WHERE status = 'pending'").fetchall()
    assert any(r["b"] * 100 > 115 * r["a"] for r in pending) and any(r["b"] * 100 <= 115 * r["a"] for r in pending)


def test_checklist_dependencies_are_respected(db):
    for r in db.execute("SELECT i.done_at, d.done_at AS dep_done FROM checklist_items i JOIN checklist_items d "
                        "ON d.item_id = i.depends_on"):
        assert r["done_at"] is None or r["dep_done"] is not None
    for c in db.execute("SELECT c.status, count(i.item_id) AS n, count(i.done_at) AS done FROM checklists c "
                        "JOIN checklist_items i ON i.checklist_id = c.checklist_id GROUP BY c.checklist_id"):
        assert (c["status"] == "complete") == (c["n"] == c["done"])
