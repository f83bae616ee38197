"""``Episode``: errors through ``call``, atomic writes, change capture, forks, snapshots and hashes."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from typing import Annotated, Any

import pytest

import sdkworld
from toolworld.world import (
    ChangeSet,
    Ctx,
    Entity,
    Episode,
    RowChange,
    ToolCall,
    ToolError,
    ToolResult,
    extract_path,
    tool,
)

TABLES = ("books", "fines", "loans", "members")


@pytest.fixture
def ep() -> Iterator[Episode]:
    with sdkworld.world.episode(0) as episode:
        yield episode


def dump(ep: Episode) -> dict[str, list[dict[str, Any]]]:
    """Every row of every table, in primary-key order (the ground truth the hashes summarise)."""
    keys = sdkworld.world.table_keys
    return {t: ep.query(f"SELECT * FROM {t} ORDER BY {', '.join(keys[t])}") for t in TABLES}


def available_books(ep: Episode) -> list[str]:
    return [r["book_id"] for r in ep.query("SELECT book_id FROM books WHERE available = 1 ORDER BY book_id")]


def lent_books(ep: Episode) -> list[str]:
    return [r["book_id"] for r in ep.query("SELECT book_id FROM loans WHERE returned = 0 ORDER BY loan_id")]


def member(ep: Episode, member_id: str) -> dict[str, Any]:
    return ep.query("SELECT * FROM members WHERE member_id = ?", (member_id,))[0]


def assert_untouched(ep: Episode) -> None:
    _, base_hash = sdkworld.world.seed_image(ep.seed)
    assert len(ep.changes()) == 0
    assert ep.changes().to_dict() == {}
    assert ep.state_hash() == base_hash
    assert ep.content_hash() == base_hash
    with sdkworld.world.episode(ep.seed) as fresh:
        assert dump(ep) == dump(fresh)


def test_seed_structure(ep):
    # the library's fixed structure, which the rest of this file relies on
    assert [r["member_id"] for r in ep.query("SELECT member_id FROM members ORDER BY 1")] == [
        "M001",
        "M002",
        "M003",
        "M004",
        "M005",
        "M006",
    ]
    assert [r["loan_id"] for r in ep.query("SELECT loan_id FROM loans ORDER BY 1")] == [
        "L0001",
        "L0002",
        "L0003",
        "L0004",
    ]
    assert len(available_books(ep)) == 8 and len(lent_books(ep)) == 4
    assert member(ep, "M002")["tier"] == "premium"
    assert_untouched(ep)


# -- every error type through call ----------------------------------------------------------------------------
def test_unknown_tool_suggests_close_matches(ep):
    r = ep.call("borow_book", {"member_id": "M001"})
    assert not r.ok and r.error.type == "unknown_tool"
    assert r.error.message.startswith("No tool named 'borow_book'. Did you mean borrow_book? Available tools: ")
    assert "get_member" in r.error.message and "buggy_upgrade_member" in r.error.message
    assert r.mutates is False
    assert r.call == ToolCall("borow_book", {"member_id": "M001"})
    far = ep.call("zzzz")
    assert far.error.type == "unknown_tool"
    assert "Did you mean" not in far.error.message
    assert [h.call.name for h in ep.history] == ["borow_book", "zzzz"]


def test_missing_argument_names_it_with_its_description(ep):
    r = ep.call("borrow_book", {"member_id": "M003"})
    assert r.error.type == "invalid_arguments"
    assert r.error.message == (
        "Invalid arguments for borrow_book: missing required argument 'book_id' (the book to lend.). "
        "It takes: member_id, book_id, days?."
    )
    assert r.mutates is True


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        ({"member_id": "M003", "book_id": "B001", "colour": "red"}, "unexpected argument 'colour'"),
        ({"member_id": "M003", "book_id": "B001", "days": "many"}, "argument 'days': Input should be a valid integer"),
        (
            {"member_id": "M003", "book_id": "B001", "days": 29},
            "argument 'days': Input should be less than or equal to 28",
        ),
        ({"member_id": 3, "book_id": "B001"}, "argument 'member_id': Input should be a valid string (got 3)"),
        ("[1, 2]", "arguments must be a JSON object"),
        ("null", "arguments must be a JSON object"),
        ('"M003"', "arguments must be a JSON object"),
    ],
)
def test_invalid_arguments(ep, args, fragment):
    r = ep.call("borrow_book", args)
    assert r.error is not None and r.error.type == "invalid_arguments"
    assert r.error.message.startswith("Invalid arguments for borrow_book: ")
    assert fragment in r.error.message
    assert_untouched(ep)


def test_non_object_json_is_kept_raw_in_the_call(ep):
    r = ep.call("borrow_book", "[1, 2]")
    assert r.call.arguments == {"_raw": [1, 2]}


def test_bad_json_string(ep):
    raw = '{"member_id": "M003", "book_id": '
    r = ep.call("borrow_book", raw, call_id="c7")
    assert r.error.type == "invalid_arguments"
    assert r.error.message.startswith("Arguments for borrow_book are not valid JSON (Expecting value at char 33)")
    assert r.call == ToolCall("borrow_book", {"_raw": raw}, "c7")
    assert r.mutates is True
    assert ep.history == [r]
    assert_untouched(ep)


def test_json_string_arguments_and_empty_arguments(ep):
    r = ep.call("get_member", '{"member_id": "M003"}')
    assert r.ok and r.output["member_id"] == "M003"
    assert r.call.arguments == {"member_id": "M003"}
    for empty in (None, "", "   ", {}):
        out = ep.call("search_books", empty)
        assert out.ok, out.error
        assert out.output["total"] == 12 and len(out.output["books"]) == 5


def test_not_found_for_entity_params(ep):
    r = ep.call("get_member", {"member_id": "M999"})
    assert r.error.type == "not_found"
    assert r.error.message == (
        "No member with member_id 'M999' exists. Check the value, or look it up with a tool that returns member ids."
    )
    r = ep.call("borrow_book", {"member_id": "M003", "book_id": "B999"})
    assert r.error.type == "not_found" and "No book with book_id 'B999' exists" in r.error.message
    assert_untouched(ep)


def test_not_found_inside_a_list(ep):
    r = ep.call("get_books", {"book_ids": ["B001", "B002", "B404"]})
    assert r.error.type == "not_found"
    assert r.error.message.startswith("No book with book_id 'B404' exists.")
    ok = ep.call("get_books", {"book_ids": ["B002", "B001"]})
    assert [b["book_id"] for b in ok.output] == ["B002", "B001"]
    assert ep.call("get_books", {"book_ids": []}).output == []


def test_optional_entity_is_checked_only_when_given(ep):
    assert "can_borrow" not in ep.call("get_book", {"book_id": "B001"}).output
    assert "can_borrow" not in ep.call("get_book", {"book_id": "B001", "member_id": None}).output
    free = available_books(ep)[0]
    assert ep.call("get_book", {"book_id": free, "member_id": "M003"}).output["can_borrow"] is True
    assert ep.call("get_book", {"book_id": free, "member_id": "M001"}).output["can_borrow"] is False  # at the limit
    r = ep.call("get_book", {"book_id": "B001", "member_id": "M404"})
    assert r.error.type == "not_found" and "No member with member_id 'M404'" in r.error.message


def test_entity_kind_without_a_table_is_not_checked(ep):
    # "email" maps to None: Episode.call does no existence check, the tool answers for itself
    email = member(ep, "M004")["email"]
    assert ep.call("find_member_by_email", {"email": email.upper()}).output == {"member_id": "M004"}
    r = ep.call("find_member_by_email", {"email": "nobody@example.com"})
    assert r.error.type == "not_found"
    assert r.error.message == "No member has email 'nobody@example.com'. Ask the member to spell it again."


def test_policy_violation(ep):
    book = available_books(ep)[0]
    r = ep.call("borrow_book", {"member_id": "M001", "book_id": book})
    assert r.error.type == "policy_violation"
    assert r.error.message == "Member M001 already holds 3 active loans, the maximum for their tier."
    assert r.content == json.dumps({"error": {"type": "policy_violation", "message": r.error.message}})
    assert_untouched(ep)
    # a premium member has a higher limit
    assert ep.call("borrow_book", {"member_id": "M002", "book_id": book}).ok


def test_conflict(ep):
    lent = lent_books(ep)[0]
    r = ep.call("borrow_book", {"member_id": "M003", "book_id": lent})
    assert r.error.type == "conflict"
    assert r.error.message == f"Book {lent} is out on loan; pick another book or wait for its return."
    name = member(ep, "M003")["name"]
    assert ep.call("rename_member", {"member_id": "M003", "name": name}).error.type == "conflict"
    assert_untouched(ep)


def test_internal_error_is_rolled_back_and_marked_infra(ep):
    before = dump(ep)
    r = ep.call("buggy_upgrade_member", {"member_id": "M003"})
    assert r.error.type == "internal_error"
    assert r.error.message == "buggy_upgrade_member crashed: KeyError: 'gold'"
    assert r.error.is_infra
    assert isinstance(r.error.__cause__, KeyError)
    assert r.mutates is True
    assert dump(ep) == before
    assert_untouched(ep)
    with pytest.raises(ToolError) as info:
        r.unwrap()
    assert info.value is r.error


def test_result_shapes(ep):
    r = ep.call("get_member", {"member_id": "M002"}, call_id="call-1")
    assert r.ok and r.error is None and r.mutates is False
    assert r.unwrap() is r.output
    assert json.loads(r.content) == r.output
    assert r.to_dict() == {
        "call": {"name": "get_member", "arguments": {"member_id": "M002"}, "id": "call-1"},
        "mutates": False,
        "output": r.output,
    }
    loans = ep.query("SELECT loan_id, book_id, due FROM loans WHERE member_id = 'M002'")
    assert r.output == {**member(ep, "M002"), "loans": loans}
    bad = ep.call("get_member", {})
    assert bad.to_dict() == {
        "call": {"name": "get_member", "arguments": {}},
        "mutates": False,
        "error": {
            "type": "invalid_arguments",
            "message": bad.error.message,
            "details": {"errors": [{"type": "missing", "loc": ("member_id",), "msg": "Field required"}]},
        },
    }
    assert ToolResult(ToolCall("x"), output="plain text").content == "plain text"
    assert ToolResult(ToolCall("x"), output={"ü": 1}).content == '{"ü": 1}'


def test_yields_paths_point_at_existing_entities(ep):
    for spec_tool, args in [
        (sdkworld.get_member, {"member_id": "M001"}),
        (sdkworld.find_member_by_email, {"email": member(ep, "M002")["email"]}),
        (sdkworld.search_books, {"genre": None, "limit": 20}),
        (sdkworld.get_books, {"book_ids": ["B003", "B004"]}),
        (sdkworld.borrow_book, {"member_id": "M005", "book_id": available_books(ep)[0]}),
    ]:
        out = ep.call(spec_tool.name, args).unwrap()
        for kind, path in spec_tool.spec.yields.items():
            ids = extract_path(out, path)
            assert ids, (spec_tool.name, kind)
            ref = sdkworld.world.entities[kind]
            for value in ids:
                assert ep.query(f"SELECT 1 FROM {ref.table} WHERE {ref.column} = ?", (value,)), (kind, value)
    m1 = ep.call("get_member", {"member_id": "M001"}).output
    assert extract_path(m1, "loans[].loan_id") == ["L0001", "L0002", "L0003"]
    assert extract_path(ep.call("search_books", {"limit": 20}).output, "books[].book_id") == [
        f"B{i:03d}" for i in range(1, 13)
    ]


# -- atomicity ---------------------------------------------------------------------------------------------------
def test_tool_error_after_writes_to_two_tables_is_rolled_back(ep):
    before = dump(ep)
    r = ep.call("return_book", {"loan_id": "L0001", "condition": "lost"})
    assert r.error.type == "policy_violation"
    assert r.error.message == "Loan L0001: a lost book cannot be returned; report it lost instead."
    assert dump(ep) == before
    assert_untouched(ep)


def test_failing_write_keeps_earlier_successful_writes(ep):
    assert ep.call("rename_member", {"member_id": "M003", "name": "Ada Byron"}).ok
    after_rename = ep.changes()
    state, content = ep.state_hash(), ep.content_hash()
    snapshot_rows = dump(ep)
    assert ep.call("return_book", {"loan_id": "L0002", "condition": "lost"}).error.type == "policy_violation"
    assert ep.call("buggy_upgrade_member", {"member_id": "M003"}).error.type == "internal_error"
    assert ep.changes() == after_rename
    assert (ep.state_hash(), ep.content_hash()) == (state, content)
    assert dump(ep) == snapshot_rows
    # the episode is still usable: the savepoint was released, a later write commits normally
    assert ep.call("return_book", {"loan_id": "L0002"}).ok
    assert ep.changes().summary() == {
        "books": {"inserted": 0, "updated": 1, "deleted": 0},
        "loans": {"inserted": 0, "updated": 1, "deleted": 0},
        "members": {"inserted": 0, "updated": 1, "deleted": 0},
    }


def test_sqlite_errors_inside_a_write_are_internal_errors_and_rolled_back():
    @tool(mutates=True)
    def double_insert(ctx: Ctx, member_id: Annotated[str, Entity("member")]) -> None:
        """Insert the same fine twice (the second insert breaks the primary key)."""
        ctx.execute("UPDATE members SET name = 'X' WHERE member_id = ?", (member_id,))
        ctx.execute("INSERT INTO fines VALUES (?, 'L0001', 1)", (member_id,))
        ctx.execute("INSERT INTO fines VALUES (?, 'L0001', 1)", (member_id,))

    world = sdkworld.make_world("library_integrity", tools=[double_insert])
    with world.episode(0) as e:
        r = e.call("double_insert", {"member_id": "M003"})
        assert r.error.type == "internal_error"
        assert r.error.message.startswith("double_insert crashed: IntegrityError: UNIQUE constraint failed")
        assert len(e.changes()) == 0
        assert e.query("SELECT count(*) AS n FROM fines") == [{"n": 0}]
        assert e.state_hash() == e.content_hash() == world.seed_image(0)[1]


# -- change capture ---------------------------------------------------------------------------------------------
def test_update_is_one_row_change_with_before_and_after(ep):
    old = member(ep, "M003")
    ep.call("rename_member", {"member_id": "M003", "name": "Ada Byron"}).unwrap()
    (change,) = ep.changes()
    assert change == RowChange("members", ("M003",), old, {**old, "name": "Ada Byron"})
    assert change.op == "update"
    assert change.changed == {"name": (old["name"], "Ada Byron")}
    assert ep.changes().to_dict() == {
        "members": {
            "inserted": [],
            "updated": [{"key": ["M003"], "changed": {"name": [old["name"], "Ada Byron"]}}],
            "deleted": [],
        }
    }


def test_update_back_to_the_original_is_no_change(ep):
    old = member(ep, "M003")["name"]
    ep.call("rename_member", {"member_id": "M003", "name": "Tmp"}).unwrap()
    ep.call("rename_member", {"member_id": "M003", "name": "Tmp 2"}).unwrap()
    assert len(ep.changes()) == 1
    ep.call("rename_member", {"member_id": "M003", "name": old}).unwrap()
    assert_untouched(ep)


def test_insert_then_delete_is_no_change(ep):
    book = available_books(ep)[0]
    out = ep.call("borrow_book", {"member_id": "M003", "book_id": book, "days": 3}).unwrap()
    assert out == {"loan_id": "L0005", "due": "2026-01-04"}
    changes = ep.changes()
    assert changes.summary() == {
        "books": {"inserted": 0, "updated": 1, "deleted": 0},
        "loans": {"inserted": 1, "updated": 0, "deleted": 0},
    }
    insert = changes.for_table("loans")[0]
    assert insert.op == "insert" and insert.before is None and insert.changed == {}
    assert insert.after == {
        "loan_id": "L0005",
        "member_id": "M003",
        "book_id": book,
        "due": "2026-01-04",
        "returned": 0,
    }
    assert changes.for_table("books")[0].changed == {"available": (1, 0)}
    ep.call("delete_loan", {"loan_id": "L0005"}).unwrap()
    assert_untouched(ep)


def test_delete_is_recorded_with_the_full_row(ep):
    row = ep.query("SELECT * FROM loans WHERE loan_id = 'L0001'")[0]
    ep.call("delete_loan", {"loan_id": "L0001"}).unwrap()
    loans = ep.changes().for_table("loans")
    assert loans == [RowChange("loans", ("L0001",), row, None)]
    assert loans[0].op == "delete"
    assert ep.changes().to_dict()["loans"] == {"inserted": [], "updated": [], "deleted": [row]}
    assert ep.changes().to_dict()["books"]["updated"] == [{"key": [row["book_id"]], "changed": {"available": [0, 1]}}]


def test_primary_key_change_is_a_delete_plus_an_insert(ep):
    old = member(ep, "M003")
    ep.call("change_member_id", {"member_id": "M003", "new_member_id": "M100"}).unwrap()
    changes = ep.changes()
    assert list(changes) == [
        RowChange("members", ("M003",), old, None),
        RowChange("members", ("M100",), None, {**old, "member_id": "M100"}),
    ]
    assert changes.summary() == {"members": {"inserted": 1, "updated": 0, "deleted": 1}}
    # and back again: nothing changed after all
    ep.call("change_member_id", {"member_id": "M100", "new_member_id": "M003"}).unwrap()
    assert_untouched(ep)


def test_composite_keys_and_multi_table_changes(ep):
    ep.call("return_book", {"loan_id": "L0002", "condition": "damaged"}).unwrap()
    fine = ep.changes().for_table("fines")
    assert fine == [
        RowChange("fines", ("M001", "L0002"), None, {"member_id": "M001", "loan_id": "L0002", "amount": 500})
    ]
    ep.call("change_member_id", {"member_id": "M001", "new_member_id": "M000"}).unwrap()
    cs = ep.changes()
    assert cs.summary() == {
        "books": {"inserted": 0, "updated": 1, "deleted": 0},
        "fines": {"inserted": 1, "updated": 0, "deleted": 0},  # the fine never existed under M001 at the start
        "loans": {"inserted": 0, "updated": 3, "deleted": 0},
        "members": {"inserted": 1, "updated": 0, "deleted": 1},
    }
    assert [c.key for c in cs.for_table("fines")] == [("M000", "L0002")]
    assert [c.key for c in cs.for_table("loans")] == [("L0001",), ("L0002",), ("L0003",)]
    assert cs.for_table("loans")[1].changed == {"member_id": ("M001", "M000"), "returned": (0, 1)}
    assert cs.tables() == ["books", "fines", "loans", "members"]
    assert [c.table for c in cs] == ["books", "fines", "loans", "loans", "loans", "members", "members"]
    assert [c.key for c in cs.for_table("members")] == [("M000",), ("M001",)]  # sorted by key, not by time


def test_changeset_equality_hash_digest_and_repr(ep):
    other = sdkworld.world.episode(0)
    for e in (ep, other):
        e.call("rename_member", {"member_id": "M004", "name": "Zed"}).unwrap()
    assert ep.changes() == other.changes()
    assert hash(ep.changes()) == hash(other.changes())
    assert ep.changes().digest() == other.changes().digest()
    assert len(ep.changes().digest()) == 64
    other.call("rename_member", {"member_id": "M004", "name": "Zed 2"}).unwrap()
    assert ep.changes() != other.changes()
    assert ep.changes().digest() != other.changes().digest()
    assert ep.changes() != ep.changes().to_dict()
    assert repr(ep.changes()) == "ChangeSet({'members': {'inserted': 0, 'updated': 1, 'deleted': 0}})"
    assert ChangeSet([]) == ChangeSet([]) and ChangeSet([]).to_dict() == {} and ChangeSet([]).summary() == {}
    a = RowChange("t", ("2",), None, {"k": "2"})
    b = RowChange("t", ("1",), None, {"k": "1"})
    assert list(ChangeSet([a, b])) == [b, a] and ChangeSet([a, b]) == ChangeSet([b, a])
    other.close()


def test_changes_are_cached_but_never_stale(ep):
    first = ep.changes()
    assert ep.changes() is first
    ep.call("rename_member", {"member_id": "M004", "name": "Zed"}).unwrap()
    second = ep.changes()
    assert second is not first and len(second) == 1
    ep.call("return_book", {"loan_id": "L0001", "condition": "lost"})  # rolled back
    assert ep.changes() == second


# -- forks -------------------------------------------------------------------------------------------------------
def test_fork_isolation_both_ways(ep):
    ep.call("rename_member", {"member_id": "M003", "name": "Parent Before"}).unwrap()
    parent_before = dump(ep)
    child = ep.fork()
    assert dump(child) == parent_before
    assert child.changes() == ep.changes() and child.state_hash() == ep.state_hash()

    child.call("rename_member", {"member_id": "M004", "name": "Child Only"}).unwrap()
    child.call("delete_loan", {"loan_id": "L0004"}).unwrap()
    assert dump(ep) == parent_before
    assert len(ep.changes()) == 1

    ep.call("rename_member", {"member_id": "M005", "name": "Parent After"}).unwrap()
    assert member(child, "M005")["name"] != "Parent After"
    assert member(ep, "M004")["name"] != "Child Only"
    assert {c.key for c in child.changes()} == {("M003",), ("M004",), ("L0004",), (lent_books(ep)[-1],)}
    assert {c.key for c in ep.changes()} == {("M003",), ("M005",)}
    assert ep.state_hash() != child.state_hash()

    grandchild = child.fork()
    grandchild.call("rename_member", {"member_id": "M004", "name": "Grandchild"}).unwrap()
    assert member(child, "M004")["name"] == "Child Only"
    child.close()
    # closing a fork does not affect its parent or its own fork
    assert member(grandchild, "M004")["name"] == "Grandchild"
    assert member(ep, "M003")["name"] == "Parent Before"
    grandchild.close()


def test_fork_of_a_fresh_episode_and_history(ep):
    ep.call("get_member", {"member_id": "M001"})
    ep.call("nope")
    child = ep.fork()
    assert child.history == ep.history and child.history is not ep.history
    child.call("get_book", {"book_id": "B001"})
    assert [h.call.name for h in ep.history] == ["get_member", "nope"]
    assert [h.call.name for h in child.history] == ["get_member", "nope", "get_book"]
    assert child.seed == ep.seed == 0
    assert repr(child) == "<Episode library seed=0 calls=3>"
    child.close()


def test_history_records_every_call_in_order(ep):
    calls = [
        ("get_member", {"member_id": "M001"}),
        ("borrow_book", {"member_id": "M001", "book_id": available_books(ep)[0]}),  # policy_violation
        ("borrow_book", "{oops"),  # bad JSON
        ("unknown", {}),
        ("buggy_upgrade_member", {"member_id": "M002"}),  # internal_error
        ("rename_member", {"member_id": "M002", "name": "New"}),
    ]
    results = [ep.call(name, args) for name, args in calls]
    assert ep.history == results
    assert [r.error.type if r.error else None for r in ep.history] == [
        None,
        "policy_violation",
        "invalid_arguments",
        "unknown_tool",
        "internal_error",
        None,
    ]
    assert [r.mutates for r in ep.history] == [False, True, True, False, True, True]


# -- snapshots and hashes -----------------------------------------------------------------------------------------
def test_snapshot_restore_roundtrip(ep):
    ep.call("return_book", {"loan_id": "L0003", "condition": "damaged"}).unwrap()
    ep.call("rename_member", {"member_id": "M006", "name": "Snap"}).unwrap()
    snap = ep.snapshot()
    assert isinstance(snap, bytes)
    restored = sdkworld.world.episode(0, snapshot=snap)
    assert dump(restored) == dump(ep)
    assert restored.changes() == ep.changes()
    assert restored.state_hash() == ep.state_hash()
    assert restored.content_hash() == ep.content_hash()
    assert restored.history == []  # a snapshot is state only
    restored.call("rename_member", {"member_id": "M006", "name": "Only restored"}).unwrap()
    assert member(ep, "M006")["name"] == "Snap"
    ep.call("rename_member", {"member_id": "M005", "name": "Only original"}).unwrap()
    assert member(restored, "M005")["name"] != "Only original"
    restored.close()


def test_state_hash_of_a_fresh_episode_is_the_seed_content_hash(ep):
    _, digest = sdkworld.world.seed_image(0)
    assert ep.state_hash() == ep.content_hash() == digest
    with sdkworld.world.episode(1) as other_seed:
        assert other_seed.state_hash() != digest


def test_state_hash_depends_only_on_content():
    world = sdkworld.world
    paths = {
        "a_then_b": [
            ("rename_member", {"member_id": "M003", "name": "X"}),
            ("rename_member", {"member_id": "M004", "name": "Y"}),
        ],
        "b_then_a": [
            ("rename_member", {"member_id": "M004", "name": "Y"}),
            ("rename_member", {"member_id": "M003", "name": "X"}),
        ],
        "detour": [
            ("rename_member", {"member_id": "M003", "name": "W"}),
            ("borrow_book", '{"member_id": "M005", "book_id": "B001"}'),
            ("rename_member", {"member_id": "M004", "name": "Y"}),
            ("delete_loan", {"loan_id": "L0005"}),
            ("buggy_upgrade_member", {"member_id": "M003"}),
            ("rename_member", {"member_id": "M003", "name": "X"}),
        ],
        "only_a": [("rename_member", {"member_id": "M003", "name": "X"})],
        "a_other_b": [
            ("rename_member", {"member_id": "M003", "name": "X"}),
            ("rename_member", {"member_id": "M004", "name": "Z"}),
        ],
        "nothing": [],
        "there_and_back": [
            ("change_member_id", {"member_id": "M003", "new_member_id": "M009"}),
            ("change_member_id", {"member_id": "M009", "new_member_id": "M003"}),
        ],
    }
    hashes: dict[str, tuple[str, str]] = {}
    for name, calls in paths.items():
        with world.episode(0) as e:
            for tool_name, args in calls:
                e.call(tool_name, args)
            hashes[name] = (e.state_hash(), e.content_hash())
    assert hashes["a_then_b"] == hashes["b_then_a"] == hashes["detour"]
    assert hashes["nothing"] == hashes["there_and_back"]
    distinct = {hashes[n][0] for n in ("a_then_b", "only_a", "a_other_b", "nothing")}
    assert len(distinct) == 4
    for x in hashes.values():
        for y in hashes.values():
            assert (x[0] == y[0]) == (x[1] == y[1])


def test_query_and_close():
    e = sdkworld.world.episode(0)
    assert e.query("SELECT count(*) AS n FROM books WHERE genre = ?", ("nonexistent",)) == [{"n": 0}]
    e.close()
    with pytest.raises(sqlite3.ProgrammingError):
        e.query("SELECT 1")
    with sdkworld.world.episode(0) as inner:
        assert inner.query("SELECT 1 AS one") == [{"one": 1}]
    with pytest.raises(sqlite3.ProgrammingError):
        inner.query("SELECT 1")


def test_ctx_helpers():
    db = sqlite3.connect(":memory:", isolation_level=None)
    db.execute("CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT)")
    ctx = Ctx(db, sdkworld.world)
    assert ctx.now == sdkworld.CLOCK and ctx.world is sdkworld.world and ctx.db is db
    ctx.execute("INSERT INTO t VALUES (?, ?), (?, ?)", (1, "a", 2, "b"))
    assert ctx.one("SELECT * FROM t WHERE k = ?", (2,)) == {"k": 2, "v": "b"}
    assert ctx.one("SELECT * FROM t WHERE k = 9") is None
    assert ctx.all("SELECT v, k FROM t ORDER BY k DESC") == [{"v": "b", "k": 2}, {"v": "a", "k": 1}]
    assert ctx.all("SELECT * FROM t WHERE k > 5") == []
    assert ctx.value("SELECT max(k) FROM t") == 2
    assert ctx.value("SELECT k FROM t WHERE k = 9") is None


# -- a bug: INSERT OR REPLACE bypasses change capture -------------------------------------------------------------------
@tool(mutates=True)
def replace_member_name(ctx: Ctx, member_id: Annotated[str, Entity("member")], name: str) -> None:
    """Rewrite a member's row with INSERT OR REPLACE (a common SQLite upsert idiom)."""
    row = ctx.one("SELECT * FROM members WHERE member_id = ?", (member_id,))
    assert row is not None
    ctx.execute("INSERT OR REPLACE INTO members VALUES (?, ?, ?, ?)", (member_id, name, row["email"], row["tier"]))


def test_insert_or_replace_is_captured_as_an_update():
    """Regression: REPLACE deletes the old row without firing DELETE triggers unless recursive_triggers is on,
    which made an unchanged rewrite read as an insert (state_hash != seed hash with equal content)."""
    world = sdkworld.make_world("library_replace", tools=[*sdkworld.TOOLS, replace_member_name])
    with world.episode(0) as same, world.episode(0) as via_replace, world.episode(0) as via_update:
        original = member(same, "M003")
        same.call("replace_member_name", {"member_id": "M003", "name": original["name"]}).unwrap()
        via_replace.call("replace_member_name", {"member_id": "M003", "name": "New Name"}).unwrap()
        via_update.call("rename_member", {"member_id": "M003", "name": "New Name"}).unwrap()
        assert via_replace.content_hash() == via_update.content_hash()  # same data either way
        assert same.content_hash() == world.seed_image(0)[1]
        assert same.changes().to_dict() == {}
        assert same.state_hash() == world.seed_image(0)[1]
        assert via_replace.changes() == via_update.changes()
        assert via_replace.state_hash() == via_update.state_hash()


@tool(mutates=True)
def merge_member_into(
    ctx: Ctx, member_id: Annotated[str, Entity("member")], into_member_id: Annotated[str, Entity("member")]
) -> None:
    """Move a member onto another member's id, replacing that row (UPDATE OR REPLACE on the primary key)."""
    ctx.execute("UPDATE OR REPLACE members SET member_id = ? WHERE member_id = ?", (into_member_id, member_id))


def test_update_or_replace_onto_an_existing_key_records_the_replaced_row():
    world = sdkworld.make_world("library_replace", tools=[*sdkworld.TOOLS, replace_member_name, merge_member_into])
    with world.episode(0) as e:
        m3, m4 = member(e, "M003"), member(e, "M004")
        e.call("merge_member_into", {"member_id": "M003", "into_member_id": "M004"}).unwrap()
        assert e.query("SELECT member_id FROM members WHERE member_id IN ('M003', 'M004')") == [{"member_id": "M004"}]
        assert list(e.changes()) == [
            RowChange("members", ("M003",), m3, None),
            RowChange("members", ("M004",), m4, {**m3, "member_id": "M004"}),
        ]


def test_a_read_only_tool_that_writes_is_undone_and_reported():
    @tool
    def sneaky_lookup(ctx: Ctx, member_id: Annotated[str, Entity("member")]) -> dict[str, Any]:
        """Look a member up (but, by mistake, also rename them)."""
        ctx.execute("UPDATE members SET name = 'Oops' WHERE member_id = ?", (member_id,))
        return {"member_id": member_id}

    world = sdkworld.make_world("library_readonly", tools=[sneaky_lookup])
    with world.episode(0) as e:
        r = e.call("sneaky_lookup", {"member_id": "M003"})
        assert r.error.type == "internal_error" and r.error.is_infra
        assert "declared read-only but wrote" in r.error.message and "mutates=True" in r.error.message
        assert len(e.changes()) == 0
        assert e.query("SELECT name FROM members WHERE member_id = 'M003'")[0]["name"] != "Oops"


def test_unknown_tool_wins_over_bad_json(ep):
    r = ep.call("no_such_tool", "{not json")
    assert r.error.type == "unknown_tool"
    assert r.call.arguments == {"_raw": "{not json"}


def test_a_hint_naming_a_local_type_is_a_world_error():
    from toolworld.world import WorldError

    class Local:
        pass

    def uses_local(ctx: Ctx, x: Local) -> None:  # "Local" cannot be resolved at module level
        """Doc."""

    with pytest.raises(WorldError, match="module level"):
        tool(uses_local)


def test_a_closed_episodes_connection_is_reused_cleanly_and_the_closed_episode_cannot_touch_it():
    world = sdkworld.world
    first = world.episode(0)
    assert first.call("rename_member", {"member_id": "M003", "name": "Ada Byron"}).ok
    db = first._db
    first.close()
    with pytest.raises(sqlite3.ProgrammingError):
        first.query("SELECT 1")
    assert not first.call("rename_member", {"member_id": "M001", "name": "X"}).ok
    second = world.episode(0)
    try:
        assert second._db is db  # the same connection, with a fresh image: no trace of the first episode
        assert_untouched(second)
        assert second.call("rename_member", {"member_id": "M001", "name": "Grace"}).ok
        assert [c.table for c in second.changes()] == ["members"]  # change capture works on the reused schema
        assert member(second, "M003")["name"] != "Ada Byron"
    finally:
        second.close()
