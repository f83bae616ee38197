"""The pieces every world draws on (``toolworld.worlds.shared``): business days, money rounding, company names,
people and places that stay fictional and consistent, fresh ids, the ``calculate`` tool."""

from __future__ import annotations

import sqlite3
from datetime import date
from types import SimpleNamespace

import pytest

from toolworld.tasks.model import UserProfile
from toolworld.tasks.sampling import Draft, Step, Target
from toolworld.world import Ctx, Rng, ToolError
from toolworld.worlds.shared.arith import calculate
from toolworld.worlds.shared.clock import add_business_days, after, before, business_days_between
from toolworld.worlds.shared.companies import company_domain, company_name, work_email
from toolworld.worlds.shared.draw import digits, fresh, pct, slug
from toolworld.worlds.shared.kitparts import add_need
from toolworld.worlds.shared.money import cents, dollars, percent_of
from toolworld.worlds.shared.people import AREA_CODES, display_name, email, full_name, phone
from toolworld.worlds.shared.places import CITIES, US_STATES, street
from toolworld.worlds.shared.records import next_id, required_text

FRIDAY = date(2026, 3, 6)
HOLIDAY = frozenset({date(2026, 3, 9)})  # the Monday after


def test_business_days_skip_weekends_and_holidays():
    assert add_business_days(FRIDAY, 1) == date(2026, 3, 9)
    assert add_business_days(FRIDAY, 1, HOLIDAY) == date(2026, 3, 10)
    assert add_business_days(date(2026, 3, 10), -1, HOLIDAY) == FRIDAY
    assert business_days_between(FRIDAY, date(2026, 3, 13)) == 5
    assert business_days_between(FRIDAY, date(2026, 3, 13), HOLIDAY) == 4
    assert business_days_between(date(2026, 3, 13), FRIDAY, HOLIDAY) == -4
    assert business_days_between(date(2026, 3, 7), date(2026, 3, 8)) == 0  # a weekend


def test_clock_offsets_are_exact_seconds():
    assert after("2026-02-28T23:00:00Z", 3600) == "2026-03-01T00:00:00Z"
    assert before("2026-03-01T00:00:00Z", 1) == "2026-02-28T23:59:59Z"


def test_money_rounds_half_away_from_zero():
    assert cents(12.345) == 1235 and cents(-12.345) == -1235 and cents(0.1 + 0.2) == 30
    assert dollars(1999) == 19.99 and dollars(None) is None
    assert percent_of(999, 50) == 500 and percent_of(-999, 50) == -500 and percent_of(1000, 12.5) == 125


def test_company_names_are_deterministic_for_a_seed():
    def draw(seed: int) -> list[tuple[str, str, str]]:
        rng = Rng(seed)
        out = []
        for _ in range(5):
            short, legal = company_name(rng)
            out.append((short, legal, company_domain(short, rng)))
        return out

    assert draw(7) == draw(7) and draw(7) != draw(8)
    short, legal, domain = draw(7)[0]
    assert legal.startswith(short) and domain.split(".", 1)[1] in ("example.com", "example.net", "example.org")
    assert work_email("Ada", "O'Neil", "cedar.example.com", style=1) == "aoneil@cedar.example.com"


def test_calculate_does_arithmetic_and_nothing_else():
    assert calculate("(54.99 + 12.50) * 2 - 10") == 124.98
    for bad in ("__import__('os').system('true')", "2 ** 10", "abs(-1)", "1 / 0", "1e308 * 10", "True + 1"):
        with pytest.raises(ToolError) as exc:
            calculate(bad)
        assert exc.value.type == "invalid_arguments"


def test_people_are_fictional_and_reachable_only_at_example_domains():
    rng = Rng(3)
    for _ in range(300):
        first, last = full_name(rng)
        address = email(rng, first, last)
        assert address.rsplit("@", 1)[1].split(".")[-2:] in (["example", "com"], ["example", "net"], ["example", "org"])
        number = phone(rng, rng.choice(AREA_CODES))
        assert number[:3] == "+1-" and number[6:13] == "-555-01"  # the block reserved for fiction


def test_every_city_is_consistent_and_addresses_have_a_street_number():
    assert len({(c.name, c.state) for c in CITIES}) == len(CITIES)
    for city in CITIES:
        assert city.state in US_STATES and city.zip_lo <= city.zip_hi and len(city.area_code) == 3, city
    line1, line2 = street(Rng(5))
    assert line1.split()[0].isdigit() and (line2 == "" or line2.split()[0] in ("Apt", "Suite", "Unit"))


def test_draws_are_integer_chances_and_fresh_ids_never_repeat():
    rng = Rng(11)
    assert not pct(rng, 0) and pct(rng, 100)
    used: set[str] = set()
    ids = [fresh(rng, used, lambda r: digits(r, 2)) for _ in range(60)]
    assert len(set(ids)) == 60 and all(len(i) == 2 and i[0] != "0" for i in ids)
    assert slug("O'Brien-Smith 2") == "obriensmith2"


def test_next_id_is_one_above_the_largest_numeric_suffix_not_the_latest_or_the_count():
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE t (id TEXT)")
    ctx = Ctx(db, SimpleNamespace(clock="2026-03-06T09:00:00Z"))  # type: ignore[arg-type]
    assert next_id(ctx, "t", "id", "LR-") == "LR-1"  # an empty series starts at 1
    db.executemany("INSERT INTO t VALUES (?)", [("LR-9",), ("LR-1040",), ("LR-200",)])
    assert next_id(ctx, "t", "id", "LR-") == "LR-1041"  # numeric, so LR-9 does not sort above LR-1040


def test_required_text_trims_and_refuses_blank_with_what_to_send():
    assert required_text("  Still broken.\n", "body", "the message") == "Still broken."
    with pytest.raises(ToolError) as err:
        required_text(" \t\n", "body", "the customer's message")
    assert err.value.kind == "invalid_arguments"
    assert err.value.message == "body is blank; send the customer's message."


def test_display_name_is_first_then_last():
    assert display_name({"first_name": "Ines", "last_name": "Okafor", "email": "x@example.org"}) == "Ines Okafor"


def test_add_need_speaks_of_the_value_and_adds_each_read_once():
    step = Step("find_user_by_email", {"email": "ines@example.org"}, "identify")
    target = Target("send_quote", {"contact_id": "CON-7"})
    profile = UserProfile(name="Ines Okafor", persona="A rep.", known={})
    draft = Draft(kind="action", sampler="single", principal="U-1", profile=profile, identity=step, steps=[],
                  targets=[target], reads=[("get_quote", {"quote_id": "Q-3"})])  # fmt: skip
    add_need(draft, target, "contact", "the deal's primary contact", "CON-7", ("get_quote", {"quote_id": "Q-3"}),
             ("get_opportunity", {"opportunity_id": "OPP-2"}))  # fmt: skip
    assert target.slots == {"contact": "the deal's primary contact"}
    assert [(n.slot, n.phrase, n.value) for n in draft.needs] == [("contact", "the deal's primary contact", "CON-7")]
    assert draft.reads == [("get_quote", {"quote_id": "Q-3"}), ("get_opportunity", {"opportunity_id": "OPP-2"})]
    assert draft.demands == ["need"]

