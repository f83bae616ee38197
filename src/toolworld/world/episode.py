"""``Episode``: one isolated copy of a world's state, the Gymnasium ``Env`` of toolworld.

The contract is deliberately small: ``call``, ``fork``, ``changes``, ``state_hash``, ``close``. State is an
in-memory SQLite database deserialized from the world's cached seed image, so starting and forking an
episode is a memory copy, not a rebuild. Every write is captured by triggers into a change log inside the
same database (so forks and rollbacks carry it along for free), and verification compares change-sets, not
whole databases.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from .errors import ToolError

if TYPE_CHECKING:
    from .world import World

CHANGE_LOG = "_tw_changes"


def canonical_json(value: Any) -> str:
    """The one JSON spelling used wherever bytes are hashed or compared (sorted keys, no spaces)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def connect_memory() -> sqlite3.Connection:
    """A connection for an episode: autocommit (``Episode.call`` owns transactions), usable from any thread.

    ``recursive_triggers`` makes ``INSERT OR REPLACE`` fire the delete trigger for the row it replaces, so
    the change log sees a replacement as the update it is.
    """
    db = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
    db.execute("PRAGMA recursive_triggers = ON")
    return db


_CLOSED = sqlite3.connect(":memory:", check_same_thread=False)
_CLOSED.close()  # stands in for the connection of a closed episode: every use raises ProgrammingError


class Ctx:
    """What a tool function gets as ``ctx``: the episode's database and the world's clock.

    Helpers return plain dicts so tool results are JSON-ready; ``execute`` is for writes and runs inside
    the call's transaction.
    """

    __slots__ = ("db", "now", "world")

    def __init__(self, db: sqlite3.Connection, world: World) -> None:
        self.db = db
        self.world = world
        self.now: str = world.clock

    def one(self, sql: str, params: Sequence[Any] = ()) -> dict[str, Any] | None:
        cur = self.db.execute(sql, params)
        row = cur.fetchone()
        if row is None:
            return None
        return dict(zip([d[0] for d in cur.description], row, strict=True))

    def all(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        cur = self.db.execute(sql, params)
        names = [d[0] for d in cur.description]
        return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]

    def value(self, sql: str, params: Sequence[Any] = ()) -> Any:
        row = self.db.execute(sql, params).fetchone()
        return None if row is None else row[0]

    def execute(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Cursor:
        return self.db.execute(sql, params)


@dataclass(slots=True)
class ToolCall:
    """A request to run a tool: what a policy emits and what gold actions are made of."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "arguments": self.arguments}
        if self.id is not None:
            out["id"] = self.id
        return out


@dataclass(slots=True)
class ToolResult:
    """The outcome of a call: ``output`` on success, ``error`` (never raised) on failure."""

    call: ToolCall
    output: Any = None
    error: ToolError | None = None
    mutates: bool = False

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def content(self) -> str:
        """The observation text an agent reads: the output as JSON, or ``{"error": {...}}``."""
        if self.error is not None:
            return json.dumps({"error": self.error.to_dict()}, ensure_ascii=False)
        if isinstance(self.output, str):
            return self.output
        return json.dumps(self.output, ensure_ascii=False)

    def unwrap(self) -> Any:
        """The output, or raise the ``ToolError`` (handy in scripts and gold execution)."""
        if self.error is not None:
            raise self.error
        return self.output

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"call": self.call.to_dict(), "mutates": self.mutates}
        if self.error is not None:
            out["error"] = self.error.to_dict()
        else:
            out["output"] = self.output
        return out


@dataclass(frozen=True, slots=True)
class RowChange:
    """The net change of one row: ``before`` is None for an insert, ``after`` is None for a delete."""

    table: str
    key: tuple[Any, ...]
    before: dict[str, Any] | None
    after: dict[str, Any] | None

    @property
    def op(self) -> Literal["insert", "update", "delete"]:
        if self.before is None:
            return "insert"
        if self.after is None:
            return "delete"
        return "update"

    @property
    def changed(self) -> dict[str, tuple[Any, Any]]:
        """For updates: column -> (before, after), only the columns whose value changed."""
        if self.before is None or self.after is None:
            return {}
        return {c: (self.before.get(c), v) for c, v in self.after.items() if self.before.get(c) != v}


class ChangeSet(Sequence[RowChange]):
    """Net row changes since an episode began, ordered by (table, key) so equal states compare equal."""

    def __init__(self, changes: Sequence[RowChange]) -> None:
        self._changes = sorted(changes, key=_row_order)
        self._digest: str | None = None

    def __getitem__(self, i: Any) -> Any:
        return self._changes[i]

    def __len__(self) -> int:
        return len(self._changes)

    def __iter__(self) -> Iterator[RowChange]:
        return iter(self._changes)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ChangeSet) and self.to_dict() == other.to_dict()

    def __hash__(self) -> int:
        return hash(self.digest())

    def __repr__(self) -> str:
        return f"ChangeSet({self.summary()})"

    def tables(self) -> list[str]:
        return sorted({c.table for c in self._changes})

    def for_table(self, table: str) -> list[RowChange]:
        return [c for c in self._changes if c.table == table]

    def summary(self) -> dict[str, dict[str, int]]:
        """Counts per table: ``{"orders": {"inserted": 0, "updated": 1, "deleted": 0}}``."""
        out: dict[str, dict[str, int]] = {}
        for c in self._changes:
            counts = out.setdefault(c.table, {"inserted": 0, "updated": 0, "deleted": 0})
            counts[{"insert": "inserted", "update": "updated", "delete": "deleted"}[c.op]] += 1
        return out

    def to_dict(self) -> dict[str, dict[str, list[Any]]]:
        """Canonical JSON-ready form: inserted/deleted rows in full, updates as ``{key, changed}``.

        This is the form stored as a task's expected changes and compared by verifiers.
        """
        out: dict[str, dict[str, list[Any]]] = {}
        for c in self._changes:
            t = out.setdefault(c.table, {"inserted": [], "updated": [], "deleted": []})
            if c.op == "insert":
                t["inserted"].append(c.after)
            elif c.op == "delete":
                t["deleted"].append(c.before)
            else:
                t["updated"].append(
                    {"key": list(c.key), "changed": {k: [b, a] for k, (b, a) in sorted(c.changed.items())}}
                )
        return out

    def digest(self) -> str:
        """SHA-256 of the canonical form: equal digests mean equal net changes."""
        if self._digest is None:
            self._digest = hashlib.sha256(canonical_json(self.to_dict()).encode()).hexdigest()
        return self._digest


def _row_order(change: RowChange) -> tuple[Any, ...]:
    """Sort key for rows: by table, then key values compared type-safely (None < numbers < text)."""
    return (change.table, tuple((0, 0) if v is None else (1, v) if isinstance(v, int | float) else (2, str(v))
                                for v in change.key))


class Episode:
    """An isolated, forkable copy of a world's state at a seed.

    Create one with ``world.episode(seed)``. Tools run through :meth:`call`, which validates arguments,
    checks that referenced entities exist, and runs write tools atomically: a failing write leaves no
    trace, not even in :meth:`changes`.
    """

    def __init__(self, world: World, seed: int, db: sqlite3.Connection, base_hash: str) -> None:
        self.world = world
        self.seed = seed
        self._db = db
        self._ctx = Ctx(db, world)
        self._base_hash = base_hash
        self._changes_cache: tuple[int, ChangeSet] | None = None
        #: Every call made on this episode, in order (a fork starts with a copy of its parent's).
        self.history: list[ToolResult] = []

    # -- the contract -------------------------------------------------------------------------------
    def call(self, name: str, arguments: Mapping[str, Any] | str | None = None, *, call_id: str | None = None) -> ToolResult:
        """Run tool ``name``; never raises for the agent's mistakes, returns a result with ``error``.

        ``arguments`` may be a dict or a JSON object string (as models emit them).
        """
        args: Any = {} if arguments is None else arguments
        tool = self.world.tools.get(name)
        if tool is None:
            raw = args if isinstance(args, dict) else {"_raw": args}
            return self._fail(name, raw, self._unknown_tool(name), False, call_id)
        if isinstance(args, str):
            try:
                args = json.loads(args) if args.strip() else {}
            except json.JSONDecodeError as exc:
                return self._fail(name, {"_raw": args}, ToolError(
                    "invalid_arguments", f"Arguments for {name} are not valid JSON ({exc.msg} at char {exc.pos}); "
                    "send a JSON object such as {\"order_id\": \"#W1234567\"}."), tool.mutates, call_id)
        call = ToolCall(name, args if isinstance(args, dict) else {"_raw": args}, call_id)
        db = self._db
        try:
            values = tool.validate(args)
            for sql, param, many in self.world._exists_checks[name]:
                value = values[param]
                if value is None:
                    continue
                for v in value if many else (value,):
                    if db.execute(sql, (v,)).fetchone() is None:
                        kind = self.world._entity_param_kind[name][param]
                        raise ToolError(
                            "not_found",
                            f"No {kind} with {param.removesuffix('s') if many else param} {v!r} exists. "
                            f"Check the value, or look it up with a tool that returns {kind} ids.",
                        )
            # Every call runs in a savepoint (about 1 µs): a write tool's failure leaves no trace, and a tool
            # declared read-only that writes anyway is caught and undone instead of corrupting the episode.
            db.execute("SAVEPOINT tw_call")
            written = db.total_changes
            try:
                output = tool.run(self._ctx, values)
                if not tool.mutates and db.total_changes != written:
                    raise ToolError("internal_error", f"{name} is declared read-only but wrote to the database; "
                                    "declare it with @tool(mutates=True)")
            except BaseException:
                db.execute("ROLLBACK TO tw_call")
                db.execute("RELEASE tw_call")
                raise
            db.execute("RELEASE tw_call")
        except ToolError as err:
            result = ToolResult(call, error=err, mutates=tool.mutates)
        except Exception as exc:  # a bug in the tool: rolled back above, reported as the world's fault
            err = ToolError("internal_error", f"{name} crashed: {type(exc).__name__}: {exc}")
            err.__cause__ = exc
            result = ToolResult(call, error=err, mutates=tool.mutates)
        else:
            result = ToolResult(call, output=output, mutates=tool.mutates)
        self.history.append(result)
        return result

    def probe(self, name: str, arguments: Mapping[str, Any] | str | None = None) -> ToolResult:
        """What would this call do? Runs it, then undoes it: state, change log and history stay as they were.

        Much cheaper than ``fork().call()`` (no copy of the database), which is what task synthesis needs to
        try many candidate calls per draw.
        """
        db = self._db
        db.execute("SAVEPOINT tw_probe")
        try:
            return self.call(name, arguments)
        finally:
            db.execute("ROLLBACK TO tw_probe")
            db.execute("RELEASE tw_probe")
            self.history.pop()

    def fork(self) -> Episode:
        """An independent copy of this episode's current state (and history): nothing leaks either way."""
        # The backup API copies page by page into the new connection: no intermediate 1.6 MB bytes object,
        # whose allocate/free cycle made glibc trim and re-fault the heap on every fork.
        db = connect_memory()
        self._db.backup(db)
        child = Episode(self.world, self.seed, db, self._base_hash)
        child.history = list(self.history)
        child._changes_cache = self._changes_cache
        return child

    def changes(self) -> ChangeSet:
        """Net row changes since the episode began (an insert then delete of the same row is no change)."""
        last = self._db.execute(f"SELECT max(seq) FROM {CHANGE_LOG}").fetchone()[0] or 0
        cached = self._changes_cache
        if cached is not None and cached[0] == last:
            return cached[1]
        # Net per row (first "old", last "new"), then parse every surviving row image with a single
        # json.loads of one joined document: per-call parser overhead dominated when parsed one by one.
        net: dict[tuple[str, str], list[Any]] = {}
        for tbl, key, old, new in self._db.execute(f"SELECT tbl, key, old, new FROM {CHANGE_LOG} ORDER BY seq"):
            entry = net.get((tbl, key))
            if entry is None:
                net[(tbl, key)] = [old, new]
            else:
                entry[1] = new
        kept = [(tbl, key, old, new) for (tbl, key), (old, new) in net.items() if old != new]
        parts = []
        for _, key, old, new in kept:
            parts += (key, old or "null", new or "null")
        values = json.loads("[" + ",".join(parts) + "]")
        out = []
        for i, (tbl, _, _, _) in enumerate(kept):
            key, before, after = values[3 * i : 3 * i + 3]
            if before != after:
                out.append(RowChange(tbl, tuple(key), before, after))
        cs = ChangeSet(out)
        self._changes_cache = (last, cs)
        return cs

    def state_hash(self) -> str:
        """A hash of the current state, stable across processes and machines.

        It is the seed image's content hash combined with the net change-set, which identifies the state
        exactly (two episodes of one seed hold equal data iff their net changes are equal) at the cost of
        the change-set, not of a full scan. :meth:`content_hash` is the full-scan equivalent.
        """
        cs = self.changes()
        if not cs:
            return self._base_hash
        return hashlib.sha256(f"{self._base_hash}:{cs.digest()}".encode()).hexdigest()

    def content_hash(self) -> str:
        """Hash of every row of every world table (a full scan; used to build and audit seed images)."""
        return content_hash(self._db, self.world.table_keys)

    def close(self) -> None:
        """Release the state. The connection goes back to the world for reuse, so this episode must not touch
        it again: it is swapped for a closed one and any later use raises ``sqlite3.ProgrammingError``."""
        db, self._db = self._db, _CLOSED
        self._ctx = Ctx(_CLOSED, self.world)
        self._changes_cache = None
        if db is not _CLOSED:
            self.world._recycle(db)

    # -- conveniences -------------------------------------------------------------------------------
    def query(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        """Read the state directly (for verifiers, tests and task synthesis; agents use tools)."""
        return self._ctx.all(sql, params)

    def snapshot(self) -> bytes:
        """The state as a SQLite database image; ``world.episode(seed, snapshot=...)`` restores it."""
        return self._db.serialize()

    def __enter__(self) -> Episode:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Episode {self.world.name} seed={self.seed} calls={len(self.history)}>"

    def _fail(self, name: str, args: dict[str, Any], err: ToolError, mutates: bool, call_id: str | None) -> ToolResult:
        result = ToolResult(ToolCall(name, args, call_id), error=err, mutates=mutates)
        self.history.append(result)
        return result

    def _unknown_tool(self, name: str) -> ToolError:
        names = list(self.world.tools)
        close = difflib.get_close_matches(name, names, n=3)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        return ToolError("unknown_tool", f"No tool named {name!r}.{hint} Available tools: {', '.join(names)}.")


def content_hash(db: sqlite3.Connection, table_keys: Mapping[str, Sequence[str]]) -> str:
    """Order-independent hash of table contents: tables by name, rows by primary key, canonical JSON."""
    h = hashlib.sha256()
    for table in sorted(table_keys):
        order = ", ".join(f'"{k}"' for k in table_keys[table])
        cur = db.execute(f'SELECT * FROM "{table}" ORDER BY {order}')
        h.update(canonical_json([table, [d[0] for d in cur.description]]).encode())
        for row in cur:
            h.update(b"\n")
            h.update(canonical_json(list(row)).encode())
        h.update(b"\x00")
    return h.hexdigest()
