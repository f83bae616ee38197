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

from ..core.jsonutil import canonical_json
from .errors import ToolError
from .tool import extract_path

if TYPE_CHECKING:
    from .world import World

CHANGE_LOG = "_tw_changes"


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
    #: Set by a tool-call parser when the model's text held a call it could not read (cut-off JSON, an unclosed
    #: tag, no name): the diagnosis the model gets back as a ``malformed_call`` error instead of a run.
    problem: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "arguments": self.arguments}
        if self.id is not None:
            out["id"] = self.id
        if self.problem is not None:
            out["problem"] = self.problem
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
        self._customer: str | None = None
        #: Every call made on this episode, in order (a fork starts with a copy of its parent's).
        self.history: list[ToolResult] = []

    @property
    def customer(self) -> str | None:
        """The id of the customer identified last by a successful identification tool, or None.

        It is conversation state, not world state: it is not part of :meth:`changes` or :meth:`state_hash`.
        While it is set, write tools refuse objects of other customers (see ``World(owners=...)``).
        """
        return self._customer

    # -- the contract -------------------------------------------------------------------------------
    def call(self, name: str, arguments: Mapping[str, Any] | str | None = None, *, call_id: str | None = None) -> ToolResult:
        """Run tool ``name``; never raises, returns a result with ``error`` instead.

        ``arguments`` may be a dict or a JSON object string (as models emit them). Whatever the agent sends
        (lone surrogates, JSON nested thousands deep, integers of 5,000 digits, 50 kB strings) ends in an
        agent error type with a bounded message; only a crash of the tool itself (or of this method) is an
        ``internal_error``.
        """
        if not isinstance(name, str):  # a model's JSON can put a number or a list where the name goes
            name = "" if name is None else _as_name(name)
        try:
            result = self._call(name, arguments, call_id)
        except Exception as exc:  # our own bug in reading the call: the world's fault, never raised at the agent
            err = ToolError("internal_error", _clip(f"calling {name!r} failed: {type(exc).__name__}: {exc}"))
            err.__cause__ = exc
            tool = self.world.tools.get(name)
            return self._fail(name, {"_raw": _safe_raw(arguments)}, err, bool(tool and tool.mutates), call_id)
        if result.error is not None and _oversized(result.error):
            result.error = _bounded(result.error)
        return result

    def _call(self, name: str, arguments: Mapping[str, Any] | str | None, call_id: str | None) -> ToolResult:
        args: Any = {} if arguments is None else arguments
        if type(args) is not dict and isinstance(args, Mapping):  # the ABC check only for the rare non-dict
            args = dict(args)
        tool = self.world.tools.get(name)
        if tool is None:
            raw = args if isinstance(args, dict) else {"_raw": args}
            return self._fail(name, raw, self._unknown_tool(name), False, call_id)
        if isinstance(args, str):
            try:
                args = _loads_arguments(args) if args.strip() else {}
            except ToolError as err:
                err.message = f"Arguments for {name} {err.message}"
                err.args = (err.message,)
                return self._fail(name, {"_raw": args}, err, tool.mutates, call_id)
        call = ToolCall(name, args if isinstance(args, dict) else {"_raw": args}, call_id)
        refused = unreadable_arguments(args) if isinstance(args, dict) else None
        if refused is not None:
            return self._fail(name, call.arguments, ToolError(
                "invalid_arguments", f"Invalid arguments for {name}: {refused}."), tool.mutates, call_id)
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
                            f"No {kind} with {param.removesuffix('s') if many else param} {_short(v)} exists. "
                            f"Check the value, or look it up with a tool that returns {kind} ids.",
                        )
            if self._customer is not None and tool.mutates:
                owned = self.world._owner_checks.get(name)
                if owned is not None:
                    self._check_owner(owned, values)
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
            err = ToolError("internal_error", _clip(f"{name} crashed: {type(exc).__name__}: {exc}"))
            err.__cause__ = exc
            result = ToolResult(call, error=err, mutates=tool.mutates)
        else:
            result = ToolResult(call, output=output, mutates=tool.mutates)
            identifies = self.world._identify_paths.get(name)
            if identifies is not None:
                self._identify(output, *identifies)
        self.history.append(result)
        return result

    def _identify(self, output: Any, path: str, plain: bool) -> None:
        """Record the customer an identification tool found (its first id at ``path``; none found: no change)."""
        if plain:
            value = output.get(path) if isinstance(output, dict) else None
        else:
            value = next((v for v in extract_path(output, path) if isinstance(v, str)), None)
        if isinstance(value, str):
            self._customer = value

    def _check_owner(self, owned: tuple[tuple[str, str, bool, str | None], ...], values: Mapping[str, Any]) -> None:
        """Refuse a write on anything that is not the identified customer's (one indexed lookup per id)."""
        customer = self._customer
        world = self.world
        for param, kind, many, sql in owned:
            value = values[param]
            if value is None:
                continue
            for v in value if many else (value,):
                if sql is None:
                    if v == customer:
                        continue
                    what = f"{kind} {v!r} is not the identified customer {customer!r}"
                else:
                    row = self._db.execute(sql, (v,)).fetchone()
                    if row is None or row[0] == customer:
                        continue
                    what = f"{kind.replace('_', ' ')} {v!r} belongs to another customer, not to {customer!r}"
                rule = f" (policy {world.ownership_rule})" if world.ownership_rule else ""
                finders = " or ".join(world.identification_tools) or "an identification tool"
                raise ToolError(
                    "policy_violation",
                    f"The {what}{rule}. Act only for the identified customer, on their own objects; if the person "
                    f"asking is that other customer, identify them first with {finders}.",
                )

    def probe(self, name: str, arguments: Mapping[str, Any] | str | None = None) -> ToolResult:
        """What would this call do? Runs it, then undoes it: state, change log and history stay as they were.

        Much cheaper than ``fork().call()`` (no copy of the database), which is what task synthesis needs to
        try many candidate calls per draw.
        """
        db = self._db
        customer = self._customer
        db.execute("SAVEPOINT tw_probe")
        try:
            return self.call(name, arguments)
        finally:
            db.execute("ROLLBACK TO tw_probe")
            db.execute("RELEASE tw_probe")
            self.history.pop()
            self._customer = customer

    def fork(self) -> Episode:
        """An independent copy of this episode's current state (and history): nothing leaks either way."""
        # The backup API copies page by page into the new connection: no intermediate 1.6 MB bytes object,
        # whose allocate/free cycle made glibc trim and re-fault the heap on every fork.
        db = connect_memory()
        self._db.backup(db)
        child = Episode(self.world, self.seed, db, self._base_hash)
        child.history = list(self.history)
        child._changes_cache = self._changes_cache
        child._customer = self._customer
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
        available = f"Available tools: {', '.join(names)}."
        if not name.strip():
            return ToolError("unknown_tool", f"The tool call has no tool name. Put one of the tools in 'name'. {available}")
        # difflib is quadratic in the name's length: a 200 kB "name" gets no suggestions rather than a stall.
        close = difflib.get_close_matches(name, names, n=3) if len(name) <= 2 * _NAME_LIMIT else []
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        return ToolError("unknown_tool", f"No tool named {_short(name)}.{hint} {available}")


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


# -- reading what an agent sends ----------------------------------------------------------------------------
#: Arguments nested deeper than this are refused before validation: no tool takes such a shape, and
#: validating, printing or storing one runs into Python's recursion limit.
MAX_ARGUMENT_DEPTH = 32
#: The longest error message an agent gets back: a message that quotes a 50 kB argument would flood the
#: model's context (and every stored trajectory) with its own junk.
MAX_ERROR_CHARS = 1_000
_NAME_LIMIT = 80  # longest value quoted inside a message
# CPython refuses to print integers over 4,300 digits (``sys.set_int_max_str_digits``), so every message, log
# or store that prints one fails. 14,000 bits is about 4,200 digits; no tool takes a number anywhere near it.
_MAX_INT_BITS = 14_000


def _short(value: Any) -> str:
    """``repr`` of a value for a message, cut to a few dozen characters (and safe for any integer)."""
    if isinstance(value, str) and len(value) > _NAME_LIMIT:
        return f"{value[:_NAME_LIMIT]!r}... ({len(value):,} characters)"
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        return f"<an integer of {len(str(value)) if value.bit_length() < _MAX_INT_BITS else 'over 4,000'} digits>"
    try:
        text = repr(value)
    except Exception:  # a value that cannot even print itself (a huge integer inside a list)
        return f"<a {type(value).__name__}>"
    return text if len(text) <= _NAME_LIMIT else f"{text[:_NAME_LIMIT]}... ({len(text):,} characters)"


def _as_name(name: Any) -> str:
    return name.decode("utf-8", "replace") if isinstance(name, bytes) else _short(name)


def _clip(text: str, limit: int = MAX_ERROR_CHARS) -> str:
    return text if len(text) <= limit else f"{text[:limit]}... [{len(text) - limit:,} more characters]"


def _safe_raw(arguments: Any) -> Any:
    return arguments if isinstance(arguments, str | dict) or arguments is None else _short(arguments)


def _loads_arguments(text: str) -> Any:
    """``json.loads`` whose every failure is a ``ToolError`` naming what is wrong and where.

    Besides syntax errors, Python's decoder raises ``RecursionError`` on ``[[[[...`` a few thousand deep
    and ``ValueError`` on integers over 4,300 digits; both are the sender's problem, not ours.
    """
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        end = len(text.rstrip())
        cut = exc.pos >= end or exc.msg.startswith("Unterminated string")
        where = f"; the text is cut off at char {end}" if cut else ""
        raise ToolError("invalid_arguments", f"are not valid JSON ({exc.msg} at char {exc.pos}){where}; send a "
                        "JSON object such as {\"order_id\": \"#W1234567\"}.") from None  # fmt: skip
    except RecursionError:
        raise ToolError("invalid_arguments", "are nested too deeply to read as JSON; send a flat JSON object "
                        "such as {\"order_id\": \"#W1234567\"}.") from None  # fmt: skip
    except ValueError:  # the integer digit limit
        raise ToolError("invalid_arguments", "hold a number with more than 4,300 digits, which no tool takes; "
                        "send the value as the tool's schema describes.") from None  # fmt: skip


def _surrogate_at(text: str) -> int:
    """Index of the first lone UTF-16 surrogate in ``text`` (which SQLite and UTF-8 cannot hold), or -1."""
    if text.isascii():
        return -1
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return exc.start
    return -1


def unreadable_arguments(args: dict[str, Any]) -> str | None:
    """Why these arguments cannot even be validated, or None: lone surrogates, absurd nesting, huge integers.

    Walked with an explicit stack (a recursive walk would itself hit the recursion limit), cheap for the
    few flat values a normal call carries.
    """
    for key, value in args.items():  # fast path: the flat ASCII arguments of nearly every call
        kind = type(value)
        if type(key) is not str or not key.isascii():
            break
        if kind is str:
            if not value.isascii():
                break
        elif kind is int:
            if value.bit_length() > _MAX_INT_BITS:
                break
        elif value is not None and kind is not bool and kind is not float:
            break
    else:
        return None
    stack: list[tuple[Any, str, int]] = [(args, "", 0)]
    while stack:
        value, path, depth = stack.pop()
        where = f"'{path[:_NAME_LIMIT]}'" if path else "arguments"
        if isinstance(value, str):
            at = _surrogate_at(value)
            if at >= 0:
                return (f"argument {where} contains a lone UTF-16 surrogate ({ord(value[at]):#06x} at index {at}), "
                        "which is not valid Unicode text; send the text without that \\u escape")  # fmt: skip
        elif isinstance(value, int) and not isinstance(value, bool):
            if value.bit_length() > _MAX_INT_BITS:
                return f"argument {where} is an integer with over 4,000 digits; no tool takes a number that large"
        elif isinstance(value, dict | list | tuple):
            if depth >= MAX_ARGUMENT_DEPTH:
                return (f"argument {where} is nested more than {MAX_ARGUMENT_DEPTH} levels deep; send values "
                        "shaped as the tool's schema describes")  # fmt: skip
            items = value.items() if isinstance(value, dict) else enumerate(value)
            for key, item in items:
                if isinstance(key, str):
                    if _surrogate_at(key) >= 0:
                        return "an argument name contains a lone UTF-16 surrogate, which is not valid Unicode text"
                    child = f"{path}.{key}" if path else key
                else:
                    child = f"{path}[{key}]" if isinstance(key, int) and not isinstance(key, bool) else path
                stack.append((item, child, depth + 1))
    return None


def _oversized(err: ToolError) -> bool:
    if len(err.message) > MAX_ERROR_CHARS:
        return True
    if not err.details:
        return False
    try:
        return len(json.dumps(err.details, default=str)) > MAX_ERROR_CHARS
    except Exception:
        return True


def _bounded(err: ToolError) -> ToolError:
    """The same error with a message and details of bounded size (validation of 10,000 unexpected keys named
    each one; a tool may quote a 50 kB argument back)."""
    details = dict(err.details)
    errors = details.get("errors")
    if isinstance(errors, list):
        details["errors"] = [
            {**e, "loc": [_short(x) if isinstance(x, str) and len(x) > _NAME_LIMIT else x for x in e.get("loc", ())]}
            if isinstance(e, dict) else _short(e) for e in errors[:10]
        ]  # fmt: skip
        if len(errors) > 10:
            details["errors_left_out"] = len(errors) - 10
    try:
        if len(json.dumps(details, default=str)) > MAX_ERROR_CHARS:
            details = {"left_out": "details too large to show"}
    except Exception:
        details = {"left_out": "details that cannot be shown as JSON"}
    out = ToolError(err.type, _clip(err.message), **details)  # type: ignore[arg-type]
    out.__cause__ = err.__cause__
    return out
