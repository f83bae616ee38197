"""``World``: a stateful app (schema, seed data, tools, policy) that episodes are made from.

A world's seeded database is built once per (world, seed): generated into memory, instrumented with
change-capture triggers, hashed, and cached on disk as a SQLite image. Episodes deserialize that image into
their own in-memory connection, so starting one costs a memory copy. The cache key includes a fingerprint of
the world's source files, so editing a generator or the schema can never serve a stale image.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import sqlite3
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ..core.files import atomic_write_bytes
from ..core.paths import cache_dir
from .episode import CHANGE_LOG, Episode, ToolCall, connect_memory, content_hash
from .errors import WorldError
from .rng import Rng
from .tool import Tool, ToolSpec

META = "_tw_meta"
#: Connections of closed episodes kept for reuse per world: parked on a tiny image, each costs ~30 KB (mostly
#: its parsed schema), and saves the next episode ~0.7 ms of schema parsing.
SPARE_CONNECTIONS = 1024


def _parking_image() -> bytes:
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE parked (x)")
    image = db.serialize()
    db.close()
    return image


_PARKED = _parking_image()
#: Seeds data into a fresh database that already has the schema; must be deterministic in ``rng``.
SeedFn = Callable[[sqlite3.Connection, Rng], None]


@dataclass(frozen=True, slots=True)
class TourStep:
    """One step of a world's scripted tour (``toolworld tour``): a tool call, or a fork of the episode."""

    note: str
    call: ToolCall | None = None
    kind: Literal["call", "fork"] = "call"


@dataclass(frozen=True, slots=True)
class EntityRef:
    """Where ids of an entity kind live (``table.column``), so calls can be checked for existence."""

    table: str
    column: str


class World:
    """A world definition. Built-in worlds live in ``toolworld.worlds``; others register through the
    ``toolworld.worlds`` entry-point group.

    Args:
        name: short identifier used on the CLI.
        description: one paragraph on what the world simulates.
        policy: the rules an agent must follow (markdown); the write tools enforce them.
        schema: SQL DDL; every table needs a primary key and no BLOB columns (change capture stores JSON).
        seed_data: deterministic generator filling the schema from an :class:`Rng`.
        tools: the world's tools (see :func:`~toolworld.world.tool`).
        entities: entity kind -> ``"table.column"`` where its ids live (or None for facts such as a
            name or a zip code that have no single table).
        clock: the world's fixed "now" (ISO 8601), so rules about dates are deterministic.
        version: bump to invalidate cached seed images when nothing in the source files changed.
        source_files: files whose bytes key the cache (default: the seed generator's folder).
        tour: optional script for ``toolworld tour``: given a fresh episode, the steps to show.
        synthesis: optional task-synthesis hints for ``toolworld.tasks`` (a ``TaskKit``, a factory taking
            the world, or ``"module:attr"`` naming one, imported only when tasks are generated). The SDK
            itself never looks inside it.
        customer: the entity kind of the person the agent serves (``"user"``). Once a tool declared with
            ``@tool(identifies=True)`` succeeds, the episode acts for the customer it found
            (:attr:`Episode.customer`).
        owners: entity kind -> ``"table.column"`` holding the id of the customer who owns it, in the table of
            that kind, e.g. ``{"order": "orders.user_id"}``. After identification a write tool refuses, with
            ``policy_violation``, any argument of the customer kind other than the identified customer and
            any argument of an owned kind that belongs to someone else. Before identification nothing is
            checked, so a world without identification tools behaves exactly as before.
        ownership_rule: the policy rule id that refusal cites, e.g. ``"R13"``.

    Ownership is enforced by the episode rather than by each tool so that no write tool can forget it, and
    so that any world gets it by declaring its owners: a real back office would not let an agent serving one
    customer touch another's orders however the request is phrased.
    """

    def __init__(
        self,
        name: str,
        *,
        description: str,
        policy: str,
        schema: str,
        seed_data: SeedFn,
        tools: Iterable[Tool],
        entities: Mapping[str, str | None],
        clock: str = "2026-01-01T00:00:00Z",
        version: str = "1",
        source_files: Sequence[Path] | None = None,
        tour: Callable[[Episode], Iterable[TourStep]] | None = None,
        synthesis: Any = None,
        customer: str | None = None,
        owners: Mapping[str, str] | None = None,
        ownership_rule: str | None = None,
    ) -> None:
        self.name = name
        self.description = description
        self.policy = policy
        self.schema = schema
        self.seed_data = seed_data
        self.clock = clock
        self.version = version
        self.tour = tour
        self.synthesis = synthesis
        self.tools: dict[str, Tool] = {}
        for t in tools:
            if not isinstance(t, Tool):
                raise WorldError(f"world {name!r}: {t!r} is not a @tool")
            if t.name in self.tools:
                raise WorldError(f"world {name!r}: two tools named {t.name!r}")
            self.tools[t.name] = t
        self.entities: dict[str, EntityRef | None] = {}
        for kind, ref in entities.items():
            if ref is None:
                self.entities[kind] = None
                continue
            table, _, column = ref.partition(".")
            if not column:
                raise WorldError(f"world {name!r}: entity {kind!r} must map to 'table.column', got {ref!r}")
            self.entities[kind] = EntityRef(table, column)
        self._source_files = list(source_files) if source_files is not None else None
        self._lock = threading.Lock()
        self._spare: list[sqlite3.Connection] = []
        self._spare_lock = threading.Lock()
        self._images: dict[int, tuple[bytes, str]] = {}
        self._fingerprint: str | None = None
        self.table_keys: dict[str, list[str]] = {}
        self.table_columns: dict[str, list[str]] = {}
        self._introspect()
        self._check_entities()
        self.customer = customer
        self.owners: dict[str, EntityRef] = {}
        self.ownership_rule = ownership_rule
        self._check_ownership(dict(owners or {}))
        #: tool name -> (path of the customer id in its result, whether the path is a plain key), for the tools
        #: that identify the customer; a plain key is read directly (the common case, and a hot one)
        self._identify_paths: dict[str, tuple[str, bool]] = {
            t.name: (t.spec.yields[customer], bool(t.spec.yields[customer]) and not any(
                c in t.spec.yields[customer] for c in ".[]"))
            for t in self.tools.values() if t.identifies and customer is not None
        }  # fmt: skip
        #: write tool name -> (param, kind, many, owner SQL or None for the customer kind itself), only for
        #: write tools with such parameters: the one place Episode.call looks after identification
        self._owner_checks: dict[str, tuple[tuple[str, str, bool, str | None], ...]] = {}
        for t in self.tools.values():
            if not t.mutates:
                continue
            checks = []
            for p in t.spec.entity_params:
                if p.kind == customer:
                    checks.append((p.param, p.kind, p.many, None))
                elif p.kind in self.owners:
                    ref, owner = self.entities[p.kind], self.owners[p.kind]
                    assert ref is not None
                    sql = f'SELECT "{owner.column}" FROM "{ref.table}" WHERE "{ref.column}" = ?'
                    checks.append((p.param, p.kind, p.many, sql))
            if checks:
                self._owner_checks[t.name] = tuple(checks)
        self._exists_checks: dict[str, list[tuple[str, str, bool]]] = {}
        self._entity_param_kind: dict[str, dict[str, str]] = {}
        for t in self.tools.values():
            checks = []
            for p in t.spec.entity_params:
                ref = self.entities.get(p.kind)
                if ref is not None:
                    checks.append((f'SELECT 1 FROM "{ref.table}" WHERE "{ref.column}" = ? LIMIT 1', p.param, p.many))
            self._exists_checks[t.name] = checks
            self._entity_param_kind[t.name] = {p.param: p.kind for p in t.spec.entity_params}

    # -- tools and their graph ------------------------------------------------------------------------
    @property
    def customer_kinds(self) -> frozenset[str]:
        """Entity kinds that belong to one customer: the customer kind itself and every owned kind."""
        if self.customer is None:
            return frozenset()
        return frozenset({self.customer, *self.owners})

    @property
    def identification_tools(self) -> tuple[str, ...]:
        """Names of the tools that identify the customer, in the world's tool order."""
        return tuple(self._identify_paths)

    def specs(self) -> list[ToolSpec]:
        return [t.spec for t in self.tools.values()]

    def openai_tools(self) -> list[dict[str, Any]]:
        """Tool specs in OpenAI function-tool format, ready for a chat-completions request."""
        return [t.spec.to_openai() for t in self.tools.values()]

    def tools_consuming(self, kind: str) -> list[ToolSpec]:
        return [s for s in self.specs() if kind in s.consumes]

    def tools_yielding(self, kind: str) -> list[ToolSpec]:
        return [s for s in self.specs() if kind in s.produces]

    # -- state ------------------------------------------------------------------------------------------
    def episode(self, seed: int = 0, *, snapshot: bytes | None = None) -> Episode:
        """A fresh episode at ``seed`` (or restored from ``Episode.snapshot()`` bytes)."""
        image, base_hash = self.seed_image(seed)
        return Episode(self, seed, self._open(snapshot if snapshot is not None else image), base_hash)

    def seed_image(self, seed: int) -> tuple[bytes, str]:
        """(SQLite image, content hash) of the seeded state; built once, then from memory or disk."""
        hit = self._images.get(seed)
        if hit is not None:
            return hit
        with self._lock:
            hit = self._images.get(seed)
            if hit is None:
                hit = self._load_cached(seed) or self._build_and_cache(seed)
                self._images[seed] = hit
        return hit

    def build_image(self, seed: int) -> tuple[bytes, str]:
        """Generate the seeded state from scratch (no cache): the naive path the cache avoids."""
        db = sqlite3.connect(":memory:", isolation_level=None)
        try:
            db.executescript(self.schema)
            db.execute("BEGIN")
            self.seed_data(db, Rng(seed).child(self.name))
            db.execute("COMMIT")
            digest = content_hash(db, self.table_keys)
            db.executescript(_instrument(self.table_columns, self.table_keys))
            db.execute(f"INSERT INTO {META} VALUES ('content_hash', ?), ('fingerprint', ?), ('seed', ?)",
                       (digest, self.fingerprint(), str(seed)))
            db.execute("VACUUM")
            return db.serialize(), digest
        finally:
            db.close()

    def stats(self, seed: int = 0) -> dict[str, Any]:
        """Counts for listings: tools (read/write), tables and rows at ``seed``."""
        with self.episode(seed) as ep:
            rows = {t: ep.query(f'SELECT count(*) AS n FROM "{t}"')[0]["n"] for t in sorted(self.table_keys)}
        writes = sum(t.mutates for t in self.tools.values())
        return {
            "name": self.name,
            "description": self.description,
            "tools": len(self.tools),
            "write_tools": writes,
            "read_tools": len(self.tools) - writes,
            "tables": len(self.table_keys),
            "rows": sum(rows.values()),
            "rows_by_table": rows,
        }

    def fingerprint(self) -> str:
        """Hash of everything the seed image depends on: version, schema and the world's source files."""
        if self._fingerprint is None:
            h = hashlib.sha256(f"{self.name}\0{self.version}\0{self.schema}".encode())
            for path in sorted(self._fingerprint_files()):
                h.update(path.name.encode() + b"\0" + path.read_bytes())
            self._fingerprint = h.hexdigest()
        return self._fingerprint

    # -- internals ----------------------------------------------------------------------------------------
    def _open(self, image: bytes) -> sqlite3.Connection:
        # A recycled connection keeps the schema it parsed last: SQLite re-parses only when the image's schema
        # cookie differs from the parsed one, and every image of one world has the same schema and cookie. The
        # parking image in between is never queried, so it does not replace the parsed schema.
        with self._spare_lock:
            db = self._spare.pop() if self._spare else None
        if db is None:
            db = connect_memory()
        db.deserialize(image)
        return db

    def _recycle(self, db: sqlite3.Connection) -> None:
        """Take back a closed episode's connection for the next episode (or close it when enough are spare)."""
        if db.in_transaction:
            db.close()
            return
        with self._spare_lock:
            if len(self._spare) < SPARE_CONNECTIONS:
                db.deserialize(_PARKED)  # frees the episode's state now rather than at the next reuse
                self._spare.append(db)
                return
        db.close()

    def _fingerprint_files(self) -> list[Path]:
        if self._source_files is not None:
            return [Path(p) for p in self._source_files]
        src = inspect.getsourcefile(self.seed_data)
        if src is None:
            return []
        # the world's own folder, and the pieces every world may draw its data from (``toolworld.worlds.shared``)
        shared = Path(__file__).resolve().parent.parent / "worlds" / "shared"
        files: list[Path] = []
        for folder in (Path(src).parent, shared):
            if folder.is_dir():
                files += [p for p in folder.iterdir() if p.suffix in (".py", ".sql", ".json", ".txt", ".md") and p.is_file()]
        return files

    def _cache_path(self, seed: int) -> Path:
        return cache_dir() / "worlds" / f"{self.name}-{self.fingerprint()[:16]}-seed{seed}.sqlite"

    def _load_cached(self, seed: int) -> tuple[bytes, str] | None:
        path = self._cache_path(seed)
        try:
            image = path.read_bytes()
            db = self._open(image)
            try:
                meta = dict(db.execute(f"SELECT key, value FROM {META}").fetchall())
            finally:
                db.close()
        except Exception:  # missing, truncated or garbage (deserialize(b"") raises MemoryError): rebuild
            return None
        if meta.get("fingerprint") != self.fingerprint() or "content_hash" not in meta:
            return None
        return image, meta["content_hash"]

    def _build_and_cache(self, seed: int) -> tuple[bytes, str]:
        image, digest = self.build_image(seed)
        path = self._cache_path(seed)
        with contextlib.suppress(OSError):  # a read-only cache only costs a rebuild next time
            atomic_write_bytes(path, image)  # concurrent builders never see a half-written image
        return image, digest

    def _introspect(self) -> None:
        db = sqlite3.connect(":memory:")
        try:
            try:
                db.executescript(self.schema)
            except sqlite3.Error as exc:
                raise WorldError(f"world {self.name!r}: schema does not execute: {exc}") from exc
            tables = [r[0] for r in db.execute(
                "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%' ORDER BY name")]
            for table in tables:
                if table.startswith("_tw_"):
                    raise WorldError(f"world {self.name!r}: table names starting with _tw_ are reserved")
                info = db.execute(f'PRAGMA table_info("{table}")').fetchall()
                cols = [r[1] for r in info]
                keys = [r[1] for r in sorted((r for r in info if r[5]), key=lambda r: r[5])]
                if not keys:
                    raise WorldError(f"world {self.name!r}: table {table!r} needs a PRIMARY KEY (change capture keys rows by it)")
                if any("BLOB" in (r[2] or "").upper() for r in info):  # SQLite's rule for BLOB affinity
                    raise WorldError(f"world {self.name!r}: table {table!r} has a BLOB column; store text or numbers "
                                     "(change capture records rows as JSON)")
                self.table_columns[table] = cols
                self.table_keys[table] = keys
        finally:
            db.close()

    def _check_entities(self) -> None:
        for kind, ref in self.entities.items():
            if ref is None:
                continue
            if ref.table not in self.table_columns or ref.column not in self.table_columns[ref.table]:
                raise WorldError(f"world {self.name!r}: entity {kind!r} points at missing column {ref.table}.{ref.column}")
        for t in self.tools.values():
            for kind in sorted(t.spec.consumes | t.spec.produces):
                if kind not in self.entities:
                    raise WorldError(
                        f"world {self.name!r}: tool {t.name!r} uses entity kind {kind!r}, which the world does not "
                        f"declare; add it to entities= (known: {sorted(self.entities)})")

    def _check_ownership(self, owners: dict[str, str]) -> None:
        customer = self.customer
        if customer is None:
            if owners:
                raise WorldError(f"world {self.name!r}: owners= needs customer= (the entity kind that owns them)")
            identifying = [t.name for t in self.tools.values() if t.identifies]
            if identifying:
                raise WorldError(
                    f"world {self.name!r}: tools {identifying} identify a customer, but the world declares no "
                    "customer= entity kind")
            return
        if self.entities.get(customer) is None:
            raise WorldError(
                f"world {self.name!r}: customer kind {customer!r} must be an entity with a table column "
                f"(known: {sorted(k for k, v in self.entities.items() if v is not None)})")
        for kind, spec in owners.items():
            ref = self.entities.get(kind)
            if ref is None:
                raise WorldError(f"world {self.name!r}: owned kind {kind!r} must be an entity with a table column")
            if kind == customer:
                raise WorldError(f"world {self.name!r}: the customer kind {kind!r} cannot also be owned")
            table, _, column = spec.partition(".") if isinstance(spec, str) else ("", "", "")
            if table != ref.table or column not in self.table_columns.get(table, ()):
                raise WorldError(
                    f"world {self.name!r}: owners[{kind!r}] must be a column of {ref.table!r} (where {kind} ids "
                    f"live) holding the owner's {customer} id, e.g. '{ref.table}.{customer}_id'; got {spec!r}")
            self.owners[kind] = EntityRef(table, column)
        for t in self.tools.values():
            if t.identifies and customer not in t.spec.yields:
                raise WorldError(
                    f"world {self.name!r}: tool {t.name!r} identifies the customer but yields no {customer!r} "
                    f"(add yields={{{customer!r}: 'path.to.id'}})")

    def __repr__(self) -> str:
        return f"<World {self.name}: {len(self.tools)} tools, {len(self.table_keys)} tables>"


def _instrument(columns: Mapping[str, list[str]], keys: Mapping[str, list[str]]) -> str:
    """SQL that creates the change log and its triggers (an update logs old-key/old-row and new-key/new-row,
    so a primary-key change reads as a delete plus an insert after netting)."""
    parts = [
        f"CREATE TABLE {META} (key TEXT PRIMARY KEY, value TEXT);",
        f"CREATE TABLE {CHANGE_LOG} (seq INTEGER PRIMARY KEY, tbl TEXT NOT NULL, key TEXT NOT NULL, old TEXT, new TEXT);",
    ]
    for table, cols in columns.items():
        def row(alias: str, cols: list[str] = cols) -> str:
            return "json_object(" + ", ".join(f"'{c}', {alias}.\"{c}\"" for c in cols) + ")"

        def key(alias: str, table: str = table) -> str:
            return "json_array(" + ", ".join(f'{alias}."{k}"' for k in keys[table]) + ")"

        log = f"INSERT INTO {CHANGE_LOG}(tbl, key, old, new) VALUES ('{table}', "
        parts.append(
            f'CREATE TRIGGER "_tw_ins_{table}" AFTER INSERT ON "{table}" BEGIN '
            f"{log}{key('NEW')}, NULL, {row('NEW')}); END;"
        )
        parts.append(
            f'CREATE TRIGGER "_tw_upd_{table}" AFTER UPDATE ON "{table}" BEGIN '
            f"{log}{key('OLD')}, {row('OLD')}, NULL); {log}{key('NEW')}, NULL, {row('NEW')}); END;"
        )
        parts.append(
            f'CREATE TRIGGER "_tw_del_{table}" AFTER DELETE ON "{table}" BEGIN '
            f"{log}{key('OLD')}, {row('OLD')}, NULL); END;"
        )
    return "\n".join(parts)
