"""Customer identification and ownership: ``@tool(identifies=, confirm=)``, ``World(customer=, owners=)`` and the
refusal ``Episode.call`` gives a write on another customer's objects once a customer is identified.

The library world of ``sdkworld`` plays the part of any world: members are the customers and own their loans.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Any

import pytest

import sdkworld
from toolworld.world import Ctx, Entity, Episode, ToolError, World, WorldError, tool

LoanId = Annotated[str, Entity("loan")]


@tool(yields={"member": "member_id"}, identifies=True)
def identify_member(ctx: Ctx, email: Annotated[str, Entity("email")]) -> dict[str, Any]:
    """Identify the member one is talking to by their email address.

    Args:
        email: the member's email address.
    """
    row = ctx.one("SELECT member_id FROM members WHERE email = ?", (email.strip().lower(),))
    if row is None:
        raise ToolError("not_found", f"No member has email {email!r}.")
    return row


@tool(yields={"member": "matches[].member_id"}, identifies=True)
def identify_member_by_name(ctx: Ctx, name: str) -> dict[str, Any]:
    """Identify a member by their full name; the first match counts.

    Args:
        name: the member's full name.
    """
    return {"matches": ctx.all("SELECT member_id FROM members WHERE name = ? ORDER BY member_id", (name,))}


@tool(mutates=True)
def renew_loans(ctx: Ctx, loan_ids: list[LoanId]) -> dict[str, Any]:
    """Push the due date of several loans back by one week.

    Args:
        loan_ids: the loans to renew.
    """
    for loan_id in loan_ids:
        ctx.execute("UPDATE loans SET due = date(due, '+7 days') WHERE loan_id = ?", (loan_id,))
    return {"renewed": loan_ids}


@tool(mutates=True, confirm=False)
def leave_note(ctx: Ctx, text: str, member_id: sdkworld.MemberId | None = None) -> dict[str, Any]:
    """Record a note for the staff, about a member when one is given.

    Args:
        text: the note.
        member_id: the member it is about, if any.
    """
    ctx.execute("INSERT INTO fines VALUES (?, ?, 0)", (member_id or "-", f"note:{text}"))
    return {"noted": text}


TOOLS = [identify_member, identify_member_by_name, renew_loans, leave_note, *sdkworld.TOOLS]


def make_world(name: str = "library-owned", **overrides: Any) -> World:
    kwargs: dict[str, Any] = {
        "customer": "member",
        "owners": {"loan": "loans.member_id"},
        "ownership_rule": "L9",
        "tools": TOOLS,
    }
    kwargs.update(overrides)
    return World(
        name,
        description="A lending library whose desk serves one identified member at a time.",
        policy=sdkworld.POLICY,
        schema=sdkworld.SCHEMA,
        seed_data=sdkworld.seed_library,
        entities=sdkworld.ENTITIES,
        clock=sdkworld.CLOCK,
        source_files=[sdkworld.__file__],
        **kwargs,
    )


WORLD = make_world()


@pytest.fixture
def ep() -> Iterator[Episode]:
    with WORLD.episode(0) as episode:
        yield episode


def email(ep: Episode, member_id: str) -> str:
    return ep.query("SELECT email FROM members WHERE member_id = ?", (member_id,))[0]["email"]


def identify(ep: Episode, member_id: str) -> None:
    assert ep.call("identify_member", {"email": email(ep, member_id)}).unwrap() == {"member_id": member_id}


def loans_of(ep: Episode, member_id: str) -> list[str]:
    return [r["loan_id"] for r in ep.query("SELECT loan_id FROM loans WHERE member_id = ? ORDER BY loan_id", (member_id,))]


def refused(ep: Episode, name: str, args: dict[str, Any]) -> str:
    before, changes = ep.state_hash(), ep.changes().to_dict()
    r = ep.call(name, args)
    assert not r.ok and r.error.type == "policy_violation", r.to_dict()
    assert ep.state_hash() == before and ep.changes().to_dict() == changes
    return r.error.message


# -- declarations ---------------------------------------------------------------------------------------------


def test_tool_flags_default_from_mutates():
    assert (identify_member.identifies, identify_member.confirm) == (True, False)
    assert (renew_loans.identifies, renew_loans.confirm) == (False, True)
    assert (leave_note.spec.confirm, leave_note.mutates) == (False, True)
    assert sdkworld.get_member.spec.identifies is False and sdkworld.get_member.spec.confirm is False
    assert "confirm" not in leave_note.spec.to_openai()["function"]  # the model sees the schema only


def test_tool_flag_misuse_is_a_world_error():
    def read(ctx: Ctx) -> dict[str, Any]:
        """Read something."""
        return {}

    with pytest.raises(WorldError, match="confirm=True applies to write tools"):
        tool(confirm=True)(read)
    with pytest.raises(WorldError, match="identifies=True needs yields="):
        tool(identifies=True)(read)


def test_world_declares_customer_kinds_and_identification_tools():
    assert WORLD.customer == "member" and WORLD.ownership_rule == "L9"
    assert WORLD.customer_kinds == frozenset({"member", "loan"})
    assert WORLD.identification_tools == ("identify_member", "identify_member_by_name")
    plain = sdkworld.world
    assert plain.customer is None and plain.customer_kinds == frozenset() and plain.identification_tools == ()


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"customer": None}, "owners= needs customer="),
        ({"customer": None, "owners": {}}, "identify a customer, but the world declares no customer="),
        ({"customer": "email"}, "customer kind 'email' must be an entity with a table column"),
        ({"customer": "reader"}, "customer kind 'reader' must be an entity"),
        ({"owners": {"email": "members.email"}}, "owned kind 'email' must be an entity with a table column"),
        ({"owners": {"member": "members.member_id"}}, "cannot also be owned"),
        ({"owners": {"loan": "fines.member_id"}}, r"owners\['loan'\] must be a column of 'loans'"),
        ({"owners": {"loan": "loans.owner"}}, r"owners\['loan'\] must be a column of 'loans'"),
        ({"owners": {"loan": "member_id"}}, r"owners\['loan'\] must be a column of 'loans'"),
        ({"customer": "book", "owners": {}}, "identifies the customer but yields no 'book'"),
    ],
)
def test_bad_ownership_declarations(overrides, message):
    with pytest.raises(WorldError, match=message):
        make_world(**overrides)


# -- identification -------------------------------------------------------------------------------------------


def test_identification_sets_the_customer_and_the_last_one_wins(ep):
    assert ep.customer is None
    identify(ep, "M001")
    assert ep.customer == "M001"
    assert not ep.call("identify_member", {"email": "nobody@example.invalid"}).ok
    assert ep.customer == "M001"  # a failed identification changes nothing
    identify(ep, "M002")
    assert ep.customer == "M002"


def test_identification_reads_the_id_at_a_nested_path(ep):
    name = ep.query("SELECT name FROM members WHERE member_id = 'M003'")[0]["name"]
    first = ep.query("SELECT min(member_id) AS m FROM members WHERE name = ?", (name,))[0]["m"]
    assert ep.call("identify_member_by_name", {"name": name}).ok
    assert ep.customer == first
    # a successful call that finds no one identifies no one (and keeps whoever was identified)
    assert ep.call("identify_member_by_name", {"name": "Nobody At All"}).ok
    assert ep.customer == first


def test_identification_is_conversation_state_not_world_state(ep):
    base = ep.state_hash()
    identify(ep, "M001")
    assert ep.state_hash() == base and len(ep.changes()) == 0
    with ep.fork() as child:
        assert child.customer == "M001"
        identify(child, "M002")
        assert (child.customer, ep.customer) == ("M002", "M001")  # nothing leaks back from the fork


def test_a_probe_leaves_no_identification_behind(ep):
    assert ep.probe("identify_member", {"email": email(ep, "M002")}).ok
    assert ep.customer is None
    identify(ep, "M001")
    assert ep.probe("identify_member", {"email": email(ep, "M002")}).ok
    assert ep.customer == "M001"
    # a probed write for someone else is refused exactly as the real call would be
    assert ep.probe("renew_loans", {"loan_ids": loans_of(ep, "M002")}).error.type == "policy_violation"


# -- enforcement --------------------------------------------------------------------------------------------


def test_before_identification_nothing_is_checked(ep):
    assert ep.call("renew_loans", {"loan_ids": loans_of(ep, "M002")}).ok
    assert ep.call("rename_member", {"member_id": "M003", "name": "Someone Else"}).ok


def test_writes_on_another_customers_objects_are_refused(ep):
    identify(ep, "M001")
    theirs = loans_of(ep, "M002")
    msg = refused(ep, "return_book", {"loan_id": theirs[0]})
    assert f"loan {theirs[0]!r} belongs to another customer, not to 'M001' (policy L9)" in msg
    assert "identify them first with identify_member or identify_member_by_name" in msg
    msg = refused(ep, "rename_member", {"member_id": "M002", "name": "X"})
    assert "member 'M002' is not the identified customer 'M001' (policy L9)" in msg
    # one foreign id in a list is enough, wherever it sits
    refused(ep, "renew_loans", {"loan_ids": [*loans_of(ep, "M001"), theirs[0]]})
    refused(ep, "borrow_book", {"member_id": "M003", "book_id": "B001"})


def test_the_same_writes_are_allowed_for_the_identified_customer(ep):
    identify(ep, "M002")
    mine = loans_of(ep, "M002")
    assert ep.call("renew_loans", {"loan_ids": mine}).ok
    assert ep.call("return_book", {"loan_id": mine[0]}).ok
    assert ep.call("rename_member", {"member_id": "M002", "name": "New Name"}).ok


def test_optional_owned_parameters_are_checked_only_when_given(ep):
    identify(ep, "M001")
    assert ep.call("leave_note", {"text": "general"}).ok
    assert ep.call("leave_note", {"text": "mine", "member_id": "M001"}).ok
    refused(ep, "leave_note", {"text": "theirs", "member_id": "M002"})


def test_reads_are_not_refused(ep):
    identify(ep, "M001")
    assert ep.call("get_member", {"member_id": "M002"}).ok


def test_not_found_comes_before_ownership(ep):
    identify(ep, "M001")
    r = ep.call("return_book", {"loan_id": "L9999"})
    assert r.error.type == "not_found"


def test_a_world_without_a_rule_id_still_explains_the_refusal():
    world = make_world("library-owned-norule", ownership_rule=None)
    with world.episode(0) as ep:
        identify(ep, "M001")
        msg = refused(ep, "return_book", {"loan_id": loans_of(ep, "M002")[0]})
        assert "belongs to another customer" in msg and "policy" not in msg
