"""crm tools beyond the policy rules: schemas, lookups by the facts a rep knows, scoping of lists, the tour."""

from __future__ import annotations

import pytest

from toolworld import Episode
from toolworld.world import get_world
from world_kit import one

CRM = get_world("crm")


@pytest.fixture
def ep() -> Episode:
    with CRM.episode(0) as e:
        yield e


def test_tools_are_typed_and_described():
    specs = CRM.specs()
    assert len(specs) >= 15 and "calculate" in CRM.tools and "escalate_to_sales_ops" in CRM.tools
    assert sum(s.mutates for s in specs) >= 10
    assert CRM.identification_tools == ("find_user_by_email",)
    for s in specs:
        assert len(s.description) >= 20, s.name
        for name, schema in s.parameters.get("properties", {}).items():
            assert schema.get("description") or schema.get("enum") or schema.get("anyOf"), (s.name, name)


def test_find_user_by_email_ignores_case_and_identifies(ep):
    u = one(ep, "SELECT * FROM users WHERE role = 'rep' AND active = 1 ORDER BY user_id")
    out = ep.call("find_user_by_email", {"email": "  " + u["email"].upper()}).output
    assert out["user_id"] == u["user_id"] and out["role"] == "rep"
    assert ep.customer == u["user_id"]


def test_list_accounts_is_the_users_book_of_business(ep):
    rep = one(ep, "SELECT * FROM users WHERE role = 'rep' AND active = 1 ORDER BY user_id")
    accounts = ep.call("list_accounts", {"user_id": rep["user_id"]}).output["accounts"]
    assert accounts and all(a["owner_id"] in (rep["user_id"], None) for a in accounts)
    unowned_elsewhere = one(ep, "SELECT a.account_id FROM accounts a JOIN territory_states t USING (state) "
                            "WHERE a.owner_id IS NULL AND t.territory_id != ?", (rep["territory_id"],))  # fmt: skip
    assert unowned_elsewhere["account_id"] not in {a["account_id"] for a in accounts}
    manager = ep.call("list_accounts", {"user_id": rep["manager_id"]}).output["accounts"]
    assert {a["account_id"] for a in accounts if a["owner_id"]} <= {a["account_id"] for a in manager}


def test_search_leads_finds_duplicates_in_any_case_and_the_contact(ep):
    lead = one(ep, "SELECT l.* FROM leads l JOIN contacts c ON LOWER(c.email) = LOWER(l.email) "
               "WHERE l.email != LOWER(l.email) ORDER BY l.lead_id")  # fmt: skip
    out = ep.call("search_leads", {"query": lead["email"].lower()}).output
    assert lead["lead_id"] in {x["lead_id"] for x in out["leads"]}
    assert out["contacts"], "the contact with that e-mail is found too"


def test_quote_totals_apply_line_discounts_in_cents(ep):
    q = one(ep, "SELECT quote_id FROM quote_lines WHERE discount_percent > 0 ORDER BY quote_id")
    view = ep.call("get_quote", {"quote_id": q["quote_id"]}).output
    lines = ep.query("SELECT quantity, unit_price_cents, discount_percent FROM quote_lines WHERE quote_id = ?",
                     (q["quote_id"],))  # fmt: skip
    cents = sum(ln["quantity"] * ln["unit_price_cents"] * (100 - ln["discount_percent"]) // 100 for ln in lines)
    assert view["total"] == round(cents / 100, 2)


def test_escalation_records_a_summary_and_needs_no_confirmation(ep):
    u = one(ep, "SELECT * FROM users WHERE role = 'rep' AND active = 1 ORDER BY user_id")
    ep.call("find_user_by_email", {"email": u["email"]})
    bad = ep.call("escalate_to_sales_ops", {"user_id": u["user_id"], "summary": "  "})
    assert not bad.ok and bad.error.type == "invalid_arguments"
    out = ep.call("escalate_to_sales_ops", {"user_id": u["user_id"], "summary": "Needs a 30% discount approved."})
    assert out.ok and out.output["status"] == "open"
    assert not CRM.tools["escalate_to_sales_ops"].spec.confirm and CRM.tools["reassign_account"].spec.confirm


def test_retired_products_cannot_be_quoted(ep):
    q = one(ep, "SELECT q.quote_id, o.owner_id FROM quotes q JOIN opportunities o USING (opportunity_id) "
            "WHERE q.status = 'draft' AND q.expires_at > '2026-03-16T09:00:00Z' AND o.stage = 'proposal' "
            "ORDER BY q.quote_id")  # fmt: skip
    retired = one(ep, "SELECT product_id FROM products WHERE active = 0")["product_id"]
    ep.call("find_user_by_email", {"email": one(ep, "SELECT email FROM users WHERE user_id = ?",
                                                (q["owner_id"],))["email"]})  # fmt: skip
    r = ep.call("add_quote_line", {"user_id": q["owner_id"], "quote_id": q["quote_id"], "product_id": retired,
                                   "quantity": 1})  # fmt: skip
    assert not r.ok and r.error.type == "conflict" and "list_products" in r.error.message


def test_tour_writes_refuses_and_forks(ep):
    steps = list(CRM.tour(ep))
    assert any(s.kind == "fork" for s in steps)
    results = [ep.call(s.call.name, dict(s.call.arguments)) for s in steps if s.call is not None]
    assert any(not r.ok and r.error.type == "policy_violation" for r in results)
    assert any(r.ok and r.mutates for r in results)


def test_create_lead_trims_text_and_stores_a_blank_title_as_none(ep):
    rep = one(ep, "SELECT user_id, email FROM users WHERE role = 'rep' AND active = 1 ORDER BY user_id")
    assert ep.call("find_user_by_email", {"email": rep["email"]}).ok
    r = ep.call("create_lead", {"user_id": rep["user_id"], "first_name": " Ines ", "last_name": "Okafor ",
                                "email": " Ines.Okafor@Example.org ", "company": " Larkspur Analytics ", "state": "tx",
                                "source": "web", "title": "   "})  # fmt: skip
    assert r.ok, r.error.to_dict()
    row = one(ep, "SELECT first_name, last_name, email, company, title, state FROM leads WHERE lead_id = ?",
              (r.output["lead_id"],))  # fmt: skip
    assert row == {"first_name": "Ines", "last_name": "Okafor", "email": "ines.okafor@example.org",
                   "company": "Larkspur Analytics", "title": None, "state": "TX"}  # fmt: skip
    r = ep.call("create_lead", {"user_id": rep["user_id"], "first_name": "  ", "last_name": "Okafor",
                                "email": "someone.else@example.org", "company": "Larkspur", "state": "TX",
                                "source": "web"})  # fmt: skip
    assert not r.ok and r.error.type == "invalid_arguments" and "first_name" in r.error.message
