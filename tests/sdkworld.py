"""A small library world built with the World SDK, used only by the ``tests/test_sdk_*.py`` suite.

Members borrow books; loans are returned (possibly damaged, which adds a fine) or deleted. The tools cover
what the SDK has to handle: entity parameters (single, list, optional), an entity kind with no table, a
``Literal`` enum, an int with bounds, defaults, ``yields`` paths with ``[]``, read and write tools, policy
and conflict errors, a write that fails *after* writing (rollback) and one that crashes (internal_error).

Importing this module points ``TOOLWORLD_CACHE`` at a fresh temporary folder so that tests never read or
write the user's real cache.
"""

from __future__ import annotations

import atexit
import os
import shutil
import sqlite3
import tempfile
from collections.abc import Callable
from datetime import date, timedelta
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field

from toolworld.world import Ctx, Entity, Rng, ToolError, World, tool

_CACHE = tempfile.mkdtemp(prefix="toolworld-sdk-tests-")
os.environ["TOOLWORLD_CACHE"] = _CACHE
atexit.register(shutil.rmtree, _CACHE, ignore_errors=True)

CLOCK = "2026-01-01T00:00:00Z"
#: Active loans a member may hold at once, by tier.
MAX_LOANS = {"basic": 3, "premium": 5}
DAMAGE_FINE_CENTS = 500
GENRES = ("fiction", "history", "science", "poetry")
N_MEMBERS = 6
N_BOOKS = 12

SCHEMA = """
CREATE TABLE members (
    member_id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    email TEXT NOT NULL UNIQUE,
    tier TEXT NOT NULL CHECK (tier IN ('basic', 'premium'))
);
CREATE TABLE books (
    book_id TEXT PRIMARY KEY,
    title TEXT NOT NULL,
    author TEXT NOT NULL,
    genre TEXT NOT NULL,
    year INTEGER NOT NULL,
    available INTEGER NOT NULL
);
CREATE TABLE loans (
    loan_id TEXT PRIMARY KEY,
    member_id TEXT NOT NULL,
    book_id TEXT NOT NULL,
    due TEXT NOT NULL,
    returned INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE fines (
    member_id TEXT NOT NULL,
    loan_id TEXT NOT NULL,
    amount INTEGER NOT NULL,
    PRIMARY KEY (member_id, loan_id)
);
"""

POLICY = f"""\
- A basic member may hold at most {MAX_LOANS["basic"]} active loans, a premium member {MAX_LOANS["premium"]}.
- A book that is out on loan cannot be borrowed.
- Returning a damaged book adds a fine of {DAMAGE_FINE_CENTS} cents; lost books are not returned.
"""

ENTITIES: dict[str, str | None] = {
    "member": "members.member_id",
    "book": "books.book_id",
    "loan": "loans.loan_id",
    "email": None,
}

MemberId = Annotated[str, Entity("member")]
BookId = Annotated[str, Entity("book")]
LoanId = Annotated[str, Entity("loan")]

_FIRST = ("Ada", "Grace", "Alan", "Edsger", "Barbara", "Donald", "Frances", "Ken", "Radia", "John")
_LAST = ("Lovelace", "Hopper", "Turing", "Dijkstra", "Liskov", "Knuth", "Allen", "Thompson", "Perlman")
_WORDS = ("Silent", "River", "Glass", "Empire", "Winter", "Atlas", "Lantern", "Orbit", "Garden", "Cipher")


# -- seed data ---------------------------------------------------------------------------------------------
def seed_library(db: sqlite3.Connection, rng: Rng) -> None:
    """Members, books and a few loans, all drawn from ``rng`` (the structure is fixed, the values are not).

    Member M001 (basic) holds exactly the basic maximum of active loans; M002 is premium with one; the
    other members have none, so the policy and conflict paths are reachable on every seed.
    """
    people = rng.child("members")
    for i in range(1, N_MEMBERS + 1):
        first, last = people.choice(_FIRST), people.choice(_LAST)
        tier = "premium" if i == 2 else "basic"
        db.execute(
            "INSERT INTO members VALUES (?, ?, ?, ?)",
            (f"M{i:03d}", f"{first} {last}", f"{first.lower()}.{last.lower()}{i}@example.com", tier),
        )
    shelf = rng.child("books")
    for i in range(1, N_BOOKS + 1):
        title = " ".join(shelf.sample(_WORDS, 2))
        db.execute(
            "INSERT INTO books VALUES (?, ?, ?, ?, ?, 1)",
            (f"B{i:03d}", title, shelf.choice(_LAST), shelf.choice(GENRES), shelf.randint(1900, 2025)),
        )
    lending = rng.child("loans")
    book_ids = lending.sample([f"B{i:03d}" for i in range(1, N_BOOKS + 1)], 4)
    for n, (member, book) in enumerate(zip(["M001", "M001", "M001", "M002"], book_ids, strict=True), start=1):
        due = date(2025, 12, 1) + timedelta(days=lending.below(60))
        db.execute("INSERT INTO loans VALUES (?, ?, ?, ?, 0)", (f"L{n:04d}", member, book, due.isoformat()))
        db.execute("UPDATE books SET available = 0 WHERE book_id = ?", (book,))


# -- tools -----------------------------------------------------------------------------------------------
@tool(yields={"member": "member_id"})
def find_member_by_email(ctx: Ctx, email: Annotated[str, Entity("email")]) -> dict[str, Any]:
    """Look up a member by email address.

    Args:
        email: the member's email address, e.g. ada.lovelace1@example.com.
    """
    row = ctx.one("SELECT member_id FROM members WHERE email = ?", (email.strip().lower(),))
    if row is None:
        raise ToolError("not_found", f"No member has email {email!r}. Ask the member to spell it again.")
    return row


@tool(yields={"member": "member_id", "loan": "loans[].loan_id", "book": "loans[].book_id"})
def get_member(ctx: Ctx, member_id: MemberId) -> dict[str, Any]:
    """Get a member's profile with their active loans.

    Args:
        member_id: the member's id, such as M001.
    """
    member = ctx.one("SELECT * FROM members WHERE member_id = ?", (member_id,))
    assert member is not None  # Episode.call has checked that the member exists
    member["loans"] = ctx.all(
        "SELECT loan_id, book_id, due FROM loans WHERE member_id = ? AND returned = 0 ORDER BY loan_id", (member_id,)
    )
    return member


@tool(yields={"book": "book_id"})
def get_book(ctx: Ctx, book_id: BookId, member_id: MemberId | None = None) -> dict[str, Any]:
    """Get a book's details.

    Args:
        book_id (str): the book's id, such as B001.
        member_id (str, optional): when given, the answer also says
            whether this member may borrow the book now.
    """
    book = ctx.one("SELECT * FROM books WHERE book_id = ?", (book_id,))
    assert book is not None
    book["available"] = bool(book["available"])
    if member_id is not None:
        book["can_borrow"] = book["available"] and _active_loans(ctx, member_id) < _limit(ctx, member_id)
    return book


@tool(yields={"book": "[].book_id"})
def get_books(ctx: Ctx, book_ids: list[BookId]) -> list[dict[str, Any]]:
    """Get several books at once, in the order asked.

    Args:
        book_ids: the books' ids.
    """
    return [ctx.one("SELECT book_id, title, available FROM books WHERE book_id = ?", (b,)) for b in book_ids]


@tool(yields={"book": "books[].book_id"})
def search_books(
    ctx: Ctx,
    genre: Literal["fiction", "history", "science", "poetry"] | None = None,
    author: str | None = None,
    limit: Annotated[int, Field(ge=1, le=20)] = 5,
) -> dict[str, Any]:
    """Search the catalogue.

    Books are listed by id; filters combine with AND.

    Args:
        genre: only books of this genre.
        author: only books by this author (exact surname).
        limit: at most this many books.

    Returns:
        {"books": [...], "total": n} where total counts
        every match, not only those listed.
    """
    where, params = ["1 = 1"], []
    if genre is not None:
        where.append("genre = ?")
        params.append(genre)
    if author is not None:
        where.append("author = ?")
        params.append(author)
    rows = ctx.all(f"SELECT book_id, title, author FROM books WHERE {' AND '.join(where)} ORDER BY book_id", params)
    return {"books": rows[:limit], "total": len(rows)}


@tool(mutates=True, yields={"loan": "loan_id"})
def borrow_book(
    ctx: Ctx, member_id: MemberId, book_id: BookId, days: Annotated[int, Field(ge=1, le=28)] = 14
) -> dict[str, Any]:
    """Lend a book to a member.

    Args:
        member_id: the borrowing member.
        book_id: the book to lend.
        days: loan length in days (1-28).
    """
    if not ctx.value("SELECT available FROM books WHERE book_id = ?", (book_id,)):
        raise ToolError("conflict", f"Book {book_id} is out on loan; pick another book or wait for its return.")
    limit = _limit(ctx, member_id)
    if _active_loans(ctx, member_id) >= limit:
        raise ToolError(
            "policy_violation", f"Member {member_id} already holds {limit} active loans, the maximum for their tier."
        )
    loan_id = next_loan_id(ctx.value("SELECT max(loan_id) FROM loans"))
    due = (date.fromisoformat(ctx.now[:10]) + timedelta(days=days)).isoformat()
    ctx.execute("INSERT INTO loans VALUES (?, ?, ?, ?, 0)", (loan_id, member_id, book_id, due))
    ctx.execute("UPDATE books SET available = 0 WHERE book_id = ?", (book_id,))
    return {"loan_id": loan_id, "due": due}


@tool(mutates=True)
def return_book(ctx: Ctx, loan_id: LoanId, condition: Literal["good", "damaged", "lost"] = "good") -> dict[str, Any]:
    """Take a borrowed book back.

    Args:
        loan_id: the loan being closed.
        condition: the state the book comes back in; damaged adds a fine.
    """
    loan = ctx.one("SELECT * FROM loans WHERE loan_id = ?", (loan_id,))
    assert loan is not None
    if loan["returned"]:
        raise ToolError("conflict", f"Loan {loan_id} was already returned.")
    ctx.execute("UPDATE books SET available = 1 WHERE book_id = ?", (loan["book_id"],))
    ctx.execute("UPDATE loans SET returned = 1 WHERE loan_id = ?", (loan_id,))
    if condition == "damaged":
        ctx.execute("INSERT INTO fines VALUES (?, ?, ?)", (loan["member_id"], loan_id, DAMAGE_FINE_CENTS))
    # Deliberately checked *after* writing to two tables: the episode must roll those writes back.
    if condition == "lost":
        raise ToolError("policy_violation", f"Loan {loan_id}: a lost book cannot be returned; report it lost instead.")
    return {"loan_id": loan_id, "fine": DAMAGE_FINE_CENTS if condition == "damaged" else 0}


@tool(mutates=True)
def rename_member(ctx: Ctx, member_id: MemberId, name: str) -> dict[str, Any]:
    """Change a member's name.

    Args:
        member_id: the member to rename.
        name: the new full name.
    """
    if ctx.value("SELECT name FROM members WHERE member_id = ?", (member_id,)) == name:
        raise ToolError("conflict", f"Member {member_id} is already named {name!r}.")
    ctx.execute("UPDATE members SET name = ? WHERE member_id = ?", (name, member_id))
    return {"member_id": member_id, "name": name}


@tool(mutates=True, yields={"member": "member_id"})
def change_member_id(ctx: Ctx, member_id: MemberId, new_member_id: str) -> dict[str, Any]:
    """Give a member a new id (their loans and fines move with them).

    Args:
        member_id: the member's current id.
        new_member_id: the id to move them to.
    """
    if ctx.value("SELECT 1 FROM members WHERE member_id = ?", (new_member_id,)):
        raise ToolError("conflict", f"Member id {new_member_id} is taken.")
    for table in ("members", "loans", "fines"):
        ctx.execute(f"UPDATE {table} SET member_id = ? WHERE member_id = ?", (new_member_id, member_id))
    return {"member_id": new_member_id}


@tool(mutates=True)
def delete_loan(ctx: Ctx, loan_id: LoanId) -> dict[str, Any]:
    """Delete a loan record (and its fine); an active loan's book goes back on the shelf.

    Args:
        loan_id: the loan to delete.
    """
    loan = ctx.one("SELECT * FROM loans WHERE loan_id = ?", (loan_id,))
    assert loan is not None
    if not loan["returned"]:
        ctx.execute("UPDATE books SET available = 1 WHERE book_id = ?", (loan["book_id"],))
    ctx.execute("DELETE FROM fines WHERE loan_id = ?", (loan_id,))
    ctx.execute("DELETE FROM loans WHERE loan_id = ?", (loan_id,))
    return {"deleted": loan_id}


@tool(mutates=True)
def buggy_upgrade_member(ctx: Ctx, member_id: MemberId) -> dict[str, Any]:
    """Upgrade a member to premium (this tool has a bug: it crashes after writing).

    Args:
        member_id: the member to upgrade.
    """
    ctx.execute("UPDATE members SET tier = 'premium' WHERE member_id = ?", (member_id,))
    ctx.execute("UPDATE books SET available = 1 - available")
    return {"member_id": member_id, "max_loans": MAX_LOANS["gold"]}  # the bug: KeyError, always


TOOLS = [
    find_member_by_email,
    get_member,
    get_book,
    get_books,
    search_books,
    borrow_book,
    return_book,
    rename_member,
    change_member_id,
    delete_loan,
    buggy_upgrade_member,
]


# -- helpers shared by the tools and the tests' model -------------------------------------------------------
def next_loan_id(current_max: str | None) -> str:
    """``L0001`` after nothing, else one more than the highest id in use."""
    return f"L{(int(current_max[1:]) if current_max else 0) + 1:04d}"


def _limit(ctx: Ctx, member_id: str) -> int:
    return MAX_LOANS[ctx.value("SELECT tier FROM members WHERE member_id = ?", (member_id,))]


def _active_loans(ctx: Ctx, member_id: str) -> int:
    return ctx.value("SELECT count(*) FROM loans WHERE member_id = ? AND returned = 0", (member_id,))


def make_world(
    name: str = "library",
    *,
    version: str = "1",
    seed_data: Callable[[sqlite3.Connection, Rng], None] = seed_library,
    tools: list[Any] | None = None,
    schema: str = SCHEMA,
    entities: dict[str, str | None] | None = None,
    source_files: list[Path] | None = None,
) -> World:
    """A fresh :class:`World` object for the library (tests build several to exercise the caches)."""
    return World(
        name,
        description="A lending library: members borrow, return and are fined for books.",
        policy=POLICY,
        schema=schema,
        seed_data=seed_data,
        tools=TOOLS if tools is None else tools,
        entities=ENTITIES if entities is None else entities,
        clock=CLOCK,
        version=version,
        source_files=[Path(__file__)] if source_files is None else source_files,
    )


world = make_world()
