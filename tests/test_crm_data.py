"""The crm seed data is a pure function of the seed, is big enough, and carries the mess tasks rely on."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from toolworld.world import Rng
from toolworld.worlds.crm.common import NOW, QUOTE_VALID_DAYS, STAGE_PROBABILITY, TERRITORIES, after
from toolworld.worlds.crm.data import seed_data

SCHEMA = (Path(__file__).resolve().parents[1] / "src/toolworld/worlds/crm/schema.sql").read_text(encoding="utf-8")


def build(seed: int) -> sqlite3.Connection:
    db = sqlite3.connect(":memory:", isolation_level=None)
    db.executescript(SCHEMA)
    db.execute("PRAGMA foreign_keys = ON")
    db.execute("BEGIN")
    seed_data(db, Rng(seed).child("crm"))
    db.execute("COMMIT")
    return db


@pytest.fixture(scope="module")
def db() -> sqlite3.Connection:
    return build(0)


def count(db: sqlite3.Connection, sql: str, params: tuple = ()) -> int:
    return int(db.execute(sql, params).fetchone()[0])


def test_same_seed_same_bytes_other_seed_other_rows(db):
    assert build(0).serialize() == db.serialize()
    other = build(1)
    assert other.execute("SELECT name FROM accounts ORDER BY account_id LIMIT 5").fetchall() != \
        db.execute("SELECT name FROM accounts ORDER BY account_id LIMIT 5").fetchall()  # fmt: skip


def test_row_counts_and_integrity(db):
    tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    total = sum(count(db, f'SELECT COUNT(*) FROM "{t}"') for t in tables)
    assert total >= 5000
    assert count(db, "SELECT COUNT(*) FROM accounts") == 900
    assert db.execute("PRAGMA foreign_key_check").fetchall() == []
    # every state is in exactly one territory
    assert count(db, "SELECT COUNT(*) FROM territory_states") == sum(len(s) for _, _, s in TERRITORIES)


def test_rows_follow_the_rules_where_a_live_crm_would(db):
    # Stage probabilities match the stage; proposal and later always have a primary contact.
    for stage, p in STAGE_PROBABILITY.items():
        assert count(db, "SELECT COUNT(*) FROM opportunities WHERE stage = ? AND probability != ?", (stage, p)) == 0
    assert count(db, "SELECT COUNT(*) FROM opportunities WHERE stage IN ('proposal', 'negotiation', 'closed_won') "
                     "AND contact_id IS NULL") == 0  # fmt: skip
    # Quotes expire 30 days after creation; won deals have an accepted quote.
    for created, expires in db.execute("SELECT created_at, expires_at FROM quotes"):
        assert expires == after(created, QUOTE_VALID_DAYS * 86400) and created < NOW
    assert count(db, "SELECT COUNT(*) FROM opportunities o WHERE stage = 'closed_won' AND NOT EXISTS "
                     "(SELECT 1 FROM quotes q WHERE q.opportunity_id = o.opportunity_id AND q.status = 'accepted')") == 0
    # Lost deals have a reason, others none; a rep's manager is a manager of the same territory.
    assert count(db, "SELECT COUNT(*) FROM opportunities WHERE (stage = 'closed_lost') != (loss_reason IS NOT NULL)") == 0
    assert count(db, "SELECT COUNT(*) FROM users r JOIN users m ON m.user_id = r.manager_id "
                     "WHERE m.role != 'manager' OR m.territory_id != r.territory_id") == 0  # fmt: skip
    # Deals are owned by active users.
    assert count(db, "SELECT COUNT(*) FROM opportunities o JOIN users u ON u.user_id = o.owner_id WHERE u.active = 0") == 0
    # A converted lead's contact is the same person, at the account of the lead's company.
    assert count(db, "SELECT COUNT(*) FROM leads WHERE status = 'converted' AND converted_contact_id IS NOT NULL") > 20
    assert count(db, "SELECT COUNT(*) FROM leads l JOIN contacts c ON c.contact_id = l.converted_contact_id JOIN "
                     "accounts a ON a.account_id = c.account_id WHERE c.first_name != l.first_name OR c.last_name != "
                     "l.last_name OR c.email != LOWER(l.email) OR a.name != l.company") == 0  # fmt: skip


def test_the_mess_is_there(db):
    # duplicate leads of one person: the same name and company, e-mails equal but for case or one typo
    dups = count(db, "SELECT COUNT(*) FROM leads a JOIN leads b ON a.first_name = b.first_name AND a.last_name = "
                     "b.last_name AND a.company = b.company AND a.lead_id < b.lead_id AND a.email != b.email "
                     "AND a.status != 'merged' AND b.status != 'merged'")  # fmt: skip
    assert dups >= 50
    assert count(db, "SELECT COUNT(*) FROM leads a JOIN leads b ON LOWER(a.email) = LOWER(b.email) "
                     "AND a.email != b.email") >= 10  # fmt: skip
    assert count(db, "SELECT COUNT(*) FROM leads WHERE status = 'merged' AND merged_into IS NOT NULL") >= 20
    # leads of people who are already contacts
    assert count(db, "SELECT COUNT(*) FROM leads l JOIN contacts c ON LOWER(c.email) = LOWER(l.email) "
                     "WHERE l.status IN ('new', 'working')") >= 30  # fmt: skip
    # stale open deals, accounts without an owner or with a departed one, partial contacts
    assert count(db, "SELECT COUNT(*) FROM opportunities WHERE stage NOT LIKE 'closed%' AND close_date < ?",
                 (NOW[:10],)) >= 50  # fmt: skip
    assert count(db, "SELECT COUNT(*) FROM accounts WHERE owner_id IS NULL") >= 30
    assert count(db, "SELECT COUNT(*) FROM accounts a JOIN users u ON u.user_id = a.owner_id WHERE u.active = 0") >= 10
    assert count(db, "SELECT COUNT(*) FROM contacts WHERE phone IS NULL") >= 100
    assert count(db, "SELECT COUNT(*) FROM contacts WHERE title IS NULL") >= 100
    assert count(db, "SELECT COUNT(*) FROM contacts WHERE do_not_contact = 1") >= 100
    # expired open quotes, and lost deals that still have an open quote
    assert count(db, "SELECT COUNT(*) FROM quotes WHERE status IN ('draft', 'sent') AND expires_at <= ?", (NOW,)) >= 30
    assert count(db, "SELECT COUNT(*) FROM quotes q JOIN opportunities o USING (opportunity_id) "
                     "WHERE o.stage = 'closed_lost' AND q.status IN ('draft', 'sent')") >= 20  # fmt: skip
    assert count(db, "SELECT COUNT(*) FROM products WHERE active = 0") >= 1


def test_world_builds_fast_and_reports_rows():
    import time

    from toolworld.world import get_world

    start = time.perf_counter()
    build(3)
    assert time.perf_counter() - start < 5
    assert get_world("crm").episode(0).query("SELECT COUNT(*) AS n FROM leads")[0]["n"] > 1000
