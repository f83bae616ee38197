"""The helpdesk seed data is a pure function of the seed, large enough, messy in the documented ways, and
consistent with the rules the tools enforce."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from toolworld.world import Rng, get_world
from toolworld.worlds.helpdesk.common import NOW, OUTAGE_TAG, SLA_HOURS, URGENT_PLANS, sla_due
from toolworld.worlds.helpdesk.data import seed_data

SCHEMA = (Path(__file__).resolve().parents[1] / "src/toolworld/worlds/helpdesk/schema.sql").read_text(encoding="utf-8")


def build(seed: int) -> sqlite3.Connection:
    db = sqlite3.connect(":memory:", isolation_level=None)
    db.executescript(SCHEMA)
    db.execute("PRAGMA foreign_keys = ON")
    db.execute("BEGIN")
    seed_data(db, Rng(seed).child("helpdesk"))
    db.execute("COMMIT")
    db.row_factory = sqlite3.Row
    return db


@pytest.fixture(scope="module")
def db() -> sqlite3.Connection:
    return build(0)


def n(db: sqlite3.Connection, sql: str, params: tuple[object, ...] = ()) -> int:
    return int(db.execute(sql, params).fetchone()[0])


def test_same_seed_same_bytes_other_seed_other_data():
    a, b, c = build(3), build(3), build(4)
    assert a.serialize() == b.serialize()
    assert a.serialize() != c.serialize()
    assert not a.execute("PRAGMA foreign_key_check").fetchall()


def test_world_lists_enough_rows_and_tables():
    stats = get_world("helpdesk").stats(0)
    assert stats["rows"] >= 5000 and stats["tables"] >= 12 and stats["tools"] >= 15
    assert stats["rows_by_table"]["tickets"] >= 1500 and stats["rows_by_table"]["handoffs"] == 0


def test_everything_happened_before_the_clock(db):
    for table, column in (("tickets", "created_at"), ("tickets", "solved_at"), ("tickets", "closed_at"),
                          ("tickets", "first_response_at"), ("ticket_comments", "created_at"),
                          ("contacts", "created_at"), ("credits", "created_at"), ("invoices", "issued_at")):  # fmt: skip
        assert n(db, f"SELECT count(*) FROM {table} WHERE {column} > ?", (NOW,)) == 0, (table, column)
    assert n(db, "SELECT count(*) FROM tickets WHERE solved_at < created_at OR closed_at < solved_at") == 0


def test_sla_due_times_follow_plan_and_priority(db):
    rows = db.execute("SELECT t.created_at, t.priority, t.first_response_due, t.resolution_due, o.plan FROM tickets t "
                      "JOIN organizations o ON o.org_id = t.org_id").fetchall()  # fmt: skip
    assert len(db.execute("SELECT * FROM sla_policies").fetchall()) == len(SLA_HOURS)
    for r in rows:
        assert sla_due(r["created_at"], r["plan"], r["priority"]) == (r["first_response_due"], r["resolution_due"])


def test_urgent_only_where_policy_R1_allows(db):
    bad = db.execute(
        "SELECT t.ticket_id FROM tickets t JOIN organizations o ON o.org_id = t.org_id WHERE t.priority = 'urgent' "
        f"AND o.plan NOT IN {URGENT_PLANS!r} AND NOT EXISTS (SELECT 1 FROM ticket_tags tt JOIN tags g ON g.tag_id = "
        f"tt.tag_id WHERE tt.ticket_id = t.ticket_id AND g.name = '{OUTAGE_TAG}')").fetchall()  # fmt: skip
    assert not bad


def test_requesters_and_merges_stay_inside_the_organisation(db):
    assert n(db, "SELECT count(*) FROM tickets t JOIN contacts c ON c.contact_id = t.requester_id "
                 "WHERE c.org_id != t.org_id") == 0  # fmt: skip
    merged = db.execute("SELECT d.status, d.org_id, k.org_id AS keep_org FROM tickets d JOIN tickets k ON "
                        "k.ticket_id = d.merged_into").fetchall()  # fmt: skip
    assert merged and all(r["status"] == "closed" and r["org_id"] == r["keep_org"] for r in merged)


def test_credits_never_exceed_their_invoice(db):
    assert n(db, "SELECT count(*) FROM (SELECT i.invoice_id FROM invoices i JOIN credits k ON k.invoice_id = "
                 "i.invoice_id GROUP BY i.invoice_id HAVING sum(k.amount_cents) > max(i.amount_cents))") == 0
    assert n(db, "SELECT count(*) FROM credits k JOIN invoices i ON i.invoice_id = k.invoice_id "
                 "WHERE i.status != 'paid'") == 0  # fmt: skip
    assert n(db, "SELECT count(*) FROM credits k LEFT JOIN agents a ON a.agent_id = k.approved_by "
                 "WHERE k.amount_cents > 50000 AND coalesce(a.is_manager, 0) = 0") == 0  # fmt: skip


def test_the_mess_is_there(db):
    # the same person twice: an old deactivated record whose address differs only in case, or a typo record
    assert n(db, "SELECT count(*) FROM contacts a JOIN contacts b ON lower(a.email) = lower(b.email) AND "
                 "a.contact_id < b.contact_id") >= 5  # fmt: skip
    assert n(db, "SELECT count(*) FROM contacts a JOIN contacts b ON a.org_id = b.org_id AND a.first_name = "
                 "b.first_name AND a.last_name = b.last_name AND a.contact_id < b.contact_id") >= 15  # fmt: skip
    # the same issue filed twice, still open: tickets to merge
    assert n(db, "SELECT count(*) FROM tickets a JOIN tickets b ON a.org_id = b.org_id AND a.subject = b.subject AND "
                 "a.ticket_id < b.ticket_id WHERE a.status IN ('new', 'open') AND b.status IN ('new', 'open')") >= 20
    assert n(db, "SELECT count(*) FROM tickets WHERE status = 'pending' AND updated_at < ?",
             ("2026-01-01T00:00:00Z",)) >= 20  # stale: waiting for months  # fmt: skip
    assert n(db, "SELECT count(*) FROM contacts WHERE active = 0") >= 30
    assert n(db, "SELECT count(*) FROM organizations WHERE plan_status = 'expired'") >= 10
    assert n(db, "SELECT count(*) FROM tickets WHERE assignee_id IS NULL AND status != 'new'") >= 30
    assert n(db, "SELECT count(*) FROM kb_articles WHERE status = 'draft'") >= 5
    assert n(db, "SELECT count(*) FROM invoices WHERE status = 'void'") >= 5
    assert n(db, "SELECT count(*) FROM contacts WHERE phone IS NULL") >= 100  # partial data
    # enough of each state for tasks: overdue and on-time open tickets, recently and long-ago solved ones
    assert n(db, "SELECT count(*) FROM tickets WHERE status IN ('new', 'open') AND resolution_due < ?", (NOW,)) >= 50
    assert n(db, "SELECT count(*) FROM tickets WHERE status IN ('new', 'open') AND resolution_due > ?", (NOW,)) >= 50
    assert n(db, "SELECT count(*) FROM tickets WHERE status = 'solved' AND solved_at < '2026-02-24T15:00:00Z'") >= 5


def test_contact_emails_use_reserved_domains(db):
    for (email,) in db.execute("SELECT email FROM contacts"):
        assert email.lower().split("@")[1].endswith(("example.com", "example.net", "example.org")), email
