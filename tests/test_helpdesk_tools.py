"""Helpdesk read tools: they never write, hide what customers must not see, and their errors say what to do."""

from __future__ import annotations

import pytest

from toolworld import Episode
from toolworld.world import get_world
from world_kit import ok


@pytest.fixture
def ep() -> Episode:
    with get_world("helpdesk").episode(0) as e:
        yield e


def test_reads_leave_the_state_untouched(ep):
    before = ep.state_hash()
    t = ep.query("SELECT ticket_id, org_id FROM tickets ORDER BY ticket_id LIMIT 1")[0]
    inv = ep.query("SELECT invoice_id FROM invoices ORDER BY invoice_id LIMIT 1")[0]["invoice_id"]
    ok(ep, "get_ticket", {"ticket_id": t["ticket_id"]})
    ok(ep, "list_org_tickets", {"org_id": t["org_id"], "status": "open"})
    ok(ep, "get_organization", {"org_id": t["org_id"]})
    ok(ep, "list_org_invoices", {"org_id": t["org_id"]})
    ok(ep, "get_invoice", {"invoice_id": inv})
    ok(ep, "search_kb", {"query": "SAML Okta"})
    ok(ep, "list_macros", {})
    assert ep.state_hash() == before


def test_search_kb_shows_only_published_articles(ep):
    drafts = {r["article_id"] for r in ep.query("SELECT article_id FROM kb_articles WHERE status = 'draft'")}
    found = ok(ep, "search_kb", {"query": "the settings involved step by step"})
    assert found and not drafts & {a["article_id"] for a in found}
    sso = ok(ep, "search_kb", {"query": "SAML", "product_area": "sso"})
    assert sso and all(a["product_area"] == "sso" for a in sso)
    draft = sorted(drafts)[0]
    assert ok(ep, "get_kb_article", {"article_id": draft})["status"] == "draft"


def test_list_org_tickets_filters_by_status_and_sorts_newest_first(ep):
    org = ep.query("SELECT org_id FROM tickets GROUP BY org_id ORDER BY count(*) DESC LIMIT 1")[0]["org_id"]
    rows = ok(ep, "list_org_tickets", {"org_id": org})
    assert [r["created_at"] for r in rows] == sorted((r["created_at"] for r in rows), reverse=True)
    closed = ok(ep, "list_org_tickets", {"org_id": org, "status": "closed"})
    assert closed and all(r["status"] == "closed" for r in closed)


def test_organization_shows_its_sla(ep):
    org = ep.query("SELECT org_id FROM organizations WHERE plan = 'enterprise' LIMIT 1")[0]["org_id"]
    out = ok(ep, "get_organization", {"org_id": org})
    assert out["sla"]["urgent"] == {"first_response_hours": 1, "resolution_hours": 4}
    assert out["account_manager"]["agent_id"].startswith("AG-")


def test_name_lookup_refuses_to_guess_between_two_active_records(ep):
    twin = ep.query("SELECT a.first_name, a.last_name, o.name FROM contacts a JOIN contacts b ON b.org_id = a.org_id "
                    "AND b.first_name = a.first_name AND b.last_name = a.last_name AND b.contact_id > a.contact_id "
                    "JOIN organizations o ON o.org_id = a.org_id WHERE a.active = 1 AND b.active = 1 LIMIT 1")
    assert twin, "seed data should hold a person with two active records"
    r = ep.call("find_contact_by_name_and_org", {"first_name": twin[0]["first_name"],
                                                 "last_name": twin[0]["last_name"], "org_name": twin[0]["name"]})
    assert r.error.type == "conflict" and "find_contact_by_email" in r.error.message
    r = ep.call("find_contact_by_name_and_org", {"first_name": "Nobody", "last_name": "Here", "org_name": "Nowhere"})
    assert r.error.type == "not_found" and "find_contact_by_email" in r.error.message
