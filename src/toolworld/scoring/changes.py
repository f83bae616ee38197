"""Change-set comparison: the agent's net changes against the gold change-set, named row by row and column by
column.

Both sides are ``ChangeSet.to_dict()`` documents (per table ``inserted`` / ``updated`` / ``deleted``), made from
the same seed state, so rows that existed before the episode have the same keys on both sides and updates and
deletes are matched by key. Inserted rows are different: a table whose primary key is a single ``INTEGER``
column (SQLite's rowid alias, e.g. ``payments.payment_id``) numbers new rows itself, so an agent that writes in
another order, or writes one extra row first, gets other ids for the very same rows. Inserted rows are therefore
matched by content with such surrogate keys left out; rows left unmatched are then paired by key (natural keys)
or by likeness (surrogate keys, most columns equal), so that "the refund went to the wrong card" is one wrong
value rather than one missing and one extra row.

Timestamps are compared like any other column. Worlds run on a fixed clock (``World.clock``, handed to tools as
``ctx.now``), so a timestamp a tool writes (``payments.created_at``, ``tickets.created_at``) is the same in every
episode; a difference means the agent changed a row gold did not change, which must not be hidden. Free-text
columns a world lists in ``Task.ignore_columns`` (``tickets.summary``: the agent's own words) are skipped.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from ..core.jsonutil import canonical_json

Row = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Tables:
    """What the comparison needs to know about a world's tables: primary keys and surrogate (rowid) keys."""

    keys: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    surrogate: Mapping[str, str] = field(default_factory=dict)

    def key_columns(self, table: str, row: Mapping[str, Any]) -> tuple[str, ...]:
        known = self.keys.get(table)
        if known:
            return known
        guess = self.surrogate_column(table, row)
        return (guess,) if guess else ()

    def surrogate_column(self, table: str, row: Mapping[str, Any]) -> str | None:
        if self.keys:
            return self.surrogate.get(table)
        # No schema at hand: an integer "id" / "<singular table>_id" column is taken to be the rowid alias.
        for name in ("id", f"{table.removesuffix('s')}_id", f"{table}_id"):
            if isinstance(row.get(name), int) and not isinstance(row.get(name), bool):
                return name
        return None


@lru_cache(maxsize=32)
def tables_from_schema(schema: str) -> Tables:
    """Primary keys and rowid-alias keys of a schema (an ``INTEGER PRIMARY KEY`` column is SQLite-numbered)."""
    db = sqlite3.connect(":memory:")
    try:
        db.executescript(schema)
        keys: dict[str, tuple[str, ...]] = {}
        surrogate: dict[str, str] = {}
        for (table,) in db.execute("SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%'"):
            info = db.execute(f'PRAGMA table_info("{table}")').fetchall()
            pk = sorted((r for r in info if r[5]), key=lambda r: r[5])
            keys[table] = tuple(r[1] for r in pk)
            if len(pk) == 1 and (pk[0][2] or "").strip().upper() == "INTEGER":
                surrogate[table] = pk[0][1]
        return Tables(keys, surrogate)
    finally:
        db.close()


@dataclass(slots=True)
class Diff:
    """The three ways a change-set can differ from gold, each entry naming table, operation and key."""

    missing: list[dict[str, Any]] = field(default_factory=list)
    wrong: list[dict[str, Any]] = field(default_factory=list)
    extra: list[dict[str, Any]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.missing or self.wrong or self.extra)


def parse_ignore(columns: Iterable[str]) -> set[tuple[str, str]]:
    """``"table.column"`` strings as pairs (a bare column name applies to every table: table ``"*"``)."""
    out = set()
    for spec in columns:
        table, _, column = spec.partition(".")
        out.add((table, column) if column else ("*", table))
    return out


def compare_changes(expected: Mapping[str, Any], actual: Mapping[str, Any], *, tables: Tables | None = None,
                    ignore: Iterable[str] = ()) -> Diff:  # fmt: skip
    """Name every difference between the gold change-set ``expected`` and the agent's ``actual``.

    ``missing`` entries are ``{table, op, key, changed: {column: [before, expected]}}``; ``wrong`` entries
    ``{table, op, key, column, expected, got}``; ``extra`` entries ``{table, op, key, changed: {column:
    [before, after]}}`` (``before`` is None for an inserted row, ``after`` None for a deleted one). For inserted
    rows the key of ``missing`` is gold's, that of ``wrong`` and ``extra`` the agent's (the row that exists).
    """
    tables = tables or Tables()
    skip = parse_ignore(ignore)
    diff = Diff()
    for table in sorted(set(expected) | set(actual)):
        gold = expected.get(table) or {}
        got = actual.get(table) or {}
        ignored = {c for t, c in skip if t in (table, "*")}
        _updates(table, gold.get("updated", []), got.get("updated", []), ignored, diff)
        _inserts(table, gold.get("inserted", []), got.get("inserted", []), ignored, tables, diff)
        _deletes(table, gold.get("deleted", []), got.get("deleted", []), ignored, tables, diff)
    return diff


def _updates(table: str, gold: list[dict[str, Any]], got: list[dict[str, Any]], ignored: set[str], diff: Diff) -> None:
    theirs = {canonical_json(u["key"]): u for u in got}
    seen = set()
    for u in gold:
        k = canonical_json(u["key"])
        seen.add(k)
        want = {c: v for c, v in u["changed"].items() if c not in ignored}
        have = theirs[k]["changed"] if k in theirs else {}
        missing = {}
        for column, (before, after) in sorted(want.items()):
            if column not in have:
                missing[column] = [before, after]
            elif not same(have[column][1], after):
                diff.wrong.append({"table": table, "op": "update", "key": list(u["key"]), "column": column,
                                   "expected": after, "got": have[column][1]})  # fmt: skip
        if missing:
            diff.missing.append({"table": table, "op": "update", "key": list(u["key"]), "changed": missing})
        extra = {c: list(v) for c, v in sorted(have.items()) if c not in want and c not in ignored}
        if extra:
            diff.extra.append({"table": table, "op": "update", "key": list(u["key"]), "changed": extra})
    for u in got:
        if canonical_json(u["key"]) in seen:
            continue
        extra = {c: list(v) for c, v in sorted(u["changed"].items()) if c not in ignored}
        if extra:
            diff.extra.append({"table": table, "op": "update", "key": list(u["key"]), "changed": extra})


def _inserts(table: str, gold: list[Row], got: list[Row], ignored: set[str], tables: Tables, diff: Diff) -> None:
    if not gold and not got:
        return
    sample = (gold or got)[0]
    surrogate = tables.surrogate_column(table, sample)
    keys = tables.key_columns(table, sample)
    natural = [k for k in keys if k != surrogate]
    skip = set(ignored) | ({surrogate} if surrogate else set())

    def content(row: Row) -> str:
        return canonical_json({c: _plain(v) for c, v in row.items() if c not in skip})

    # 1. the same content (surrogate ids and free text aside): the same row, whatever id it got
    pool: dict[str, list[Row]] = {}
    for row in got:
        pool.setdefault(content(row), []).append(row)
    left_gold = []
    for row in gold:
        bucket = pool.get(content(row))
        if bucket:
            bucket.pop(0)
        else:
            left_gold.append(row)
    left_got = [row for bucket in pool.values() for row in bucket]
    # 2. pair what is left: the same natural key, else (surrogate keys) most compared columns equal
    pairs: list[tuple[Row, Row]] = []
    if natural:
        by_key = {}
        for row in left_got:
            by_key.setdefault(canonical_json([row.get(k) for k in natural]), []).append(row)
        rest = []
        for row in left_gold:
            bucket = by_key.get(canonical_json([row.get(k) for k in natural]))
            if bucket:
                pairs.append((row, bucket.pop(0)))
            else:
                rest.append(row)
        left_gold, left_got = rest, [row for bucket in by_key.values() for row in bucket]
    else:
        columns = sorted({c for row in (*left_gold, *left_got) for c in row} - skip)
        scored = sorted(((sum(same(g.get(c), a.get(c)) for c in columns), i, j)
                         for i, g in enumerate(left_gold) for j, a in enumerate(left_got)),
                        key=lambda t: (-t[0], t[1], t[2]))  # fmt: skip
        used_g: set[int] = set()
        used_a: set[int] = set()
        for equal, i, j in scored:
            if 2 * equal <= len(columns) or i in used_g or j in used_a:
                continue
            used_g.add(i)
            used_a.add(j)
            pairs.append((left_gold[i], left_got[j]))
        left_gold = [g for i, g in enumerate(left_gold) if i not in used_g]
        left_got = [a for j, a in enumerate(left_got) if j not in used_a]
    for g, a in pairs:
        for column in sorted((set(g) | set(a)) - skip):
            if not same(g.get(column), a.get(column)):
                diff.wrong.append({"table": table, "op": "insert", "key": _key(a, keys), "column": column,
                                   "expected": g.get(column), "got": a.get(column)})  # fmt: skip
    for row in left_gold:
        diff.missing.append({"table": table, "op": "insert", "key": _key(row, keys),
                             "changed": {c: [None, v] for c, v in sorted(row.items()) if c != surrogate}})  # fmt: skip
    for row in left_got:
        diff.extra.append({"table": table, "op": "insert", "key": _key(row, keys),
                           "changed": {c: [None, v] for c, v in sorted(row.items()) if c != surrogate}})  # fmt: skip


def _deletes(table: str, gold: list[Row], got: list[Row], ignored: set[str], tables: Tables, diff: Diff) -> None:
    if not gold and not got:
        return
    keys = tables.key_columns(table, (gold or got)[0])

    def ident(row: Row) -> str:  # rows deleted existed at the start: same key (or same content) on both sides
        if keys:
            return canonical_json([row.get(k) for k in keys])
        return canonical_json({c: _plain(v) for c, v in row.items() if c not in ignored})

    theirs: dict[str, list[Row]] = {}
    for row in got:
        theirs.setdefault(ident(row), []).append(row)
    for row in gold:
        bucket = theirs.get(ident(row))
        if bucket:
            bucket.pop(0)
        else:
            diff.missing.append({"table": table, "op": "delete", "key": _key(row, keys),
                                 "changed": {c: [v, None] for c, v in sorted(row.items())}})  # fmt: skip
    for bucket in theirs.values():
        for row in bucket:
            diff.extra.append({"table": table, "op": "delete", "key": _key(row, keys),
                               "changed": {c: [v, None] for c, v in sorted(row.items())}})  # fmt: skip


def _key(row: Row, keys: tuple[str, ...]) -> list[Any]:
    return [row.get(k) for k in keys]


def _plain(value: Any) -> Any:
    """A float holding a whole number compares as the integer (SQLite may hand either back for a REAL)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def same(a: Any, b: Any) -> bool:
    """Value equality as the database means it (1 == 1.0, but True is not 1 and "1" is not 1)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    return canonical_json(_plain(a)) == canonical_json(_plain(b))


# -- one-line descriptions ----------------------------------------------------------------------------------


def describe_key(entry: Mapping[str, Any]) -> str:
    key = entry.get("key") or []
    return f"{entry['table']} " + ("/".join(str(k) for k in key) if key else "(new row)")


def short(value: Any, limit: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _describe_entry(label: str, entry: dict[str, Any], value: Callable[[Any], str]) -> str:
    if entry["op"] == "update":
        sep = "=" if label == "missing" else " "
        return f"{label}: {describe_key(entry)} " + ", ".join(f"{c}{sep}{value(v)}" for c, v in entry["changed"].items())
    if entry["op"] == "insert":
        return f"{label}: new {entry['table']} row {_row_hint(entry['changed'])}"
    return f"{label}: deletion of {describe_key(entry)}"


def describe(diff: Diff, limit: int = 3) -> str:
    """A compact, actionable list of the first few differences of each kind."""
    parts = []
    for entry in diff.missing[:limit]:
        parts.append(_describe_entry("missing", entry, lambda v: short(v[1])))
    for entry in diff.wrong[:limit]:
        parts.append(f"wrong: {describe_key(entry)} {entry['column']} expected {short(entry['expected'])}, "
                     f"got {short(entry['got'])}")  # fmt: skip
    for entry in diff.extra[:limit]:
        parts.append(_describe_entry("extra", entry, lambda v: f"{short(v[0])}->{short(v[1])}"))
    hidden = sum(max(0, len(x) - limit) for x in (diff.missing, diff.wrong, diff.extra))
    if hidden:
        parts.append(f"and {hidden} more")
    return "; ".join(parts)


_ID_LIKE = re.compile(r"(^id$|_id$)")


def _row_hint(changed: Mapping[str, Any], limit: int = 4) -> str:
    """The identifying columns of a row first (ids), so a reader can find it."""
    cols = sorted(changed, key=lambda c: (not _ID_LIKE.search(c), c))[:limit]
    return "(" + ", ".join(f"{c}={short(changed[c][1] if changed[c][1] is not None else changed[c][0], 28)}"
                           for c in cols) + (", ...)" if len(changed) > limit else ")")  # fmt: skip
