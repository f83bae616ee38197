"""``RunStore``: one run's configuration, tasks, trajectories and scores in ``DIR/run.db``.

Why SQLite in WAL mode: every finished (task, trial) is committed in its own transaction the moment it ends, so
a run killed at any instant (SIGKILL, a lost machine) keeps every trial that finished and nothing half-written;
readers (``toolworld report`` on a live run) never block the writer. ``synchronous=NORMAL`` is enough for that:
in WAL mode a killed *process* loses nothing committed, only an OS crash can drop the last transactions.

Trajectories are stored as zlib-compressed JSON (they are mostly repetitive text and token ids, ~5-10x smaller);
scores as plain JSON so that SQL can reach into them. A trial that ended on an infra error is stored too (it is
evidence), with ``status = 'infra_error'``; resuming re-runs it and replaces the row, counting ``attempts``.

What keeps one bad trajectory from costing a run or a folder:

- **Writing never fails on a value.** NaN and infinite floats are stored as JSON's ``NaN``/``Infinity`` (read
  back as the same floats, where a plain dump would write ``null`` and make the row unreadable), lone surrogates
  as ``\\udcXX`` escapes (read back exactly), and objects JSON cannot hold as a ``<unserialisable ...>`` text.
  A trajectory that cannot be serialised at all is stored as an infra-errored stub, which ``--resume`` re-runs.
- **Reading skips what is damaged.** Rows are listed from the primary-key index (a few pages, apart from the
  row data) and fetched one by one, so a torn page, a corrupt blob or bad JSON costs only the rows it holds:
  each is reported once, in one line naming the task and trial, to the ``on_damage`` callback, and skipped.
- **One writer per folder.** A writer (``create``, ``open(writer=True)``) holds an exclusive ``flock`` on
  ``DIR/run.lock`` until it closes; the OS drops it when the process dies, so ``kill -9`` then ``--resume`` works.
- **Creation is atomic.** The store is built in a temporary file and renamed to ``run.db``, so a crash while
  creating leaves no half store for ``--resume`` to misread.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import sqlite3
import warnings
import zlib
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, ValidationError

from ..core.errors import ToolworldError

try:  # POSIX; where it is missing (Windows) the lock is a no-op and one writer per folder is up to the user
    import fcntl
except ImportError:  # pragma: no cover - platform dependent
    fcntl = None  # type: ignore[assignment]

if TYPE_CHECKING:
    from ..records.trajectory import Trajectory
    from ..scoring import Score
    from ..tasks.model import Task

M = TypeVar("M", bound=BaseModel)

DB_NAME = "run.db"
LOCK_NAME = "run.lock"
SCHEMA_VERSION = 1

#: Receives one line per damaged row (or table) a read had to skip.
DamageHandler = Callable[[str], None]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS tasks (
    id TEXT PRIMARY KEY,
    position INTEGER NOT NULL,
    data BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS trials (
    task_id TEXT NOT NULL REFERENCES tasks(id),
    trial INTEGER NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('done', 'infra_error')),
    termination TEXT NOT NULL,
    success INTEGER,
    reward REAL,
    attempts INTEGER NOT NULL DEFAULT 1,
    finished_at TEXT NOT NULL,
    trajectory BLOB NOT NULL,
    score TEXT,
    PRIMARY KEY (task_id, trial)
);
"""


class StoreError(ToolworldError):
    """The run folder cannot be used as asked (no run there, another run's configuration, a damaged file, a
    folder another process is writing)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message, kind=kind)


class DamagedRowWarning(UserWarning):
    """A stored row could not be read and was skipped (the default ``on_damage`` of a store)."""


def _warn_damage(message: str) -> None:
    warnings.warn(message, DamagedRowWarning, stacklevel=3)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


# -- values in and out ----------------------------------------------------------------------------------------


def _safe_repr(value: Any, limit: int = 200) -> str:
    try:
        text = repr(value)
    except Exception:  # a broken __repr__ must not cost the trajectory
        text = object.__repr__(value)
    return text if len(text) <= limit else text[:limit] + "..."


def _unknown(value: Any) -> Any:
    """``json.dumps``'s ``default``: what JSON has no type for, kept as readable data rather than a failure."""
    if isinstance(value, set | frozenset):
        return sorted(value, key=repr)
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8", "backslashreplace")
    if isinstance(value, BaseModel):
        return value.model_dump(mode="python", warnings=False)
    if isinstance(value, os.PathLike | datetime):
        return str(value)
    return f"<unserialisable {type(value).__qualname__}: {_safe_repr(value)}>"


def _plain(value: Any, depth: int = 0) -> Any:
    """A JSON-ready copy of ``value`` for what ``json.dumps`` refuses even with ``default``: non-string dict
    keys, reference cycles, nesting deeper than the parser allows."""
    if depth > 200:
        return f"<nested deeper than 200 levels: {type(value).__qualname__}>"
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, dict):
        return {k if isinstance(k, str) else _safe_repr(k): _plain(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v, depth + 1) for v in value]
    converted = _unknown(value)
    return converted if isinstance(converted, str) else _plain(converted, depth + 1)


def encode_json(data: Any) -> str:
    """JSON text for any value, never raising on what is inside (see the module docstring for how it escapes).

    Non-ASCII text stays as it is; only a value holding a lone surrogate (which UTF-8 cannot hold) is written
    with ``\\uXXXX`` escapes throughout, which ``json.loads`` reads back to the same string.
    """
    try:
        text = json.dumps(data, ensure_ascii=False, allow_nan=True, default=_unknown, separators=(",", ":"))
    except (TypeError, ValueError, RecursionError):  # odd keys, a cycle, deep nesting: copy to plain data first
        text = json.dumps(_plain(data), ensure_ascii=False, allow_nan=True, default=_unknown, separators=(",", ":"))
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = json.dumps(json.loads(text), ensure_ascii=True, allow_nan=True, separators=(",", ":"))
    return text


def encode_model(model: BaseModel) -> str:
    """A pydantic model as JSON that reads back to an equal model, whatever its ``Any`` fields hold."""
    with warnings.catch_warnings():  # a field holding an unexpected type is escaped below, not a warning
        warnings.simplefilter("ignore")
        data = model.model_dump(mode="python", warnings=False)
    return encode_json(data)


def decode_model(cls: type[M], text: str) -> M:
    """Read what :func:`encode_model` wrote (and what ``model_dump_json`` wrote before it)."""
    try:
        return cls.model_validate_json(text)
    except ValidationError:
        # pydantic's JSON parser refuses lone-surrogate escapes; Python's reads them back exactly.
        return cls.model_validate(json.loads(text))


def _pack(text: str) -> bytes:
    return zlib.compress(text.encode("utf-8"), 6)


def _unpack(blob: Any) -> str:
    if not isinstance(blob, bytes):
        raise ValueError(f"stored a {type(blob).__name__}, not a compressed blob")
    return zlib.decompress(blob).decode("utf-8")


def _why(exc: BaseException) -> str:
    """One line on why a stored value could not be read."""
    if isinstance(exc, zlib.error):
        return f"the blob is not zlib data ({exc})"
    if isinstance(exc, UnicodeDecodeError):
        return f"the blob is not UTF-8 text ({exc.reason} at byte {exc.start})"
    if isinstance(exc, json.JSONDecodeError):
        return f"not valid JSON ({exc.msg} at char {exc.pos})"
    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ())) or "top level"
        return f"{exc.error_count()} invalid field(s), first {where}: {first.get('msg', '')}"
    if isinstance(exc, sqlite3.DatabaseError):
        return f"unreadable page ({exc})"
    return f"{type(exc).__name__}: {exc}"


def _is_corruption(exc: sqlite3.DatabaseError) -> bool:
    """A write failed on a damaged file (as opposed to a busy, full or read-only one, which must stop the caller:
    no later trial could be kept either)."""
    return not isinstance(exc, sqlite3.OperationalError | sqlite3.IntegrityError | sqlite3.ProgrammingError)


def _unreadable(exc: sqlite3.DatabaseError) -> bool:
    """A read failed on what is stored (a torn page, text that is not UTF-8), not on a busy database."""
    text = str(exc).lower()
    return not isinstance(exc, sqlite3.ProgrammingError) and "locked" not in text and "busy" not in text


def _text(value: Any) -> str:
    """A text column read as bytes (so that bytes that are not UTF-8 fail here, per row, not inside sqlite3)."""
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if isinstance(value, str):
        return value
    raise ValueError(f"stored a {type(value).__name__} where text belongs")


# -- the lock -------------------------------------------------------------------------------------------------


class RunLock:
    """An exclusive advisory lock on a run folder (``DIR/run.lock``), holding the writer's pid.

    ``flock`` locks belong to the open file and the OS releases them when the process dies, however it dies,
    so a stale lock cannot outlive its writer and nothing needs cleaning up after ``kill -9``.
    """

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        self.path = self.folder / LOCK_NAME
        self._fd: int | None = None

    def acquire(self) -> RunLock:
        """Take the lock or raise ``StoreError('run_locked')`` naming the folder and the holder's pid."""
        if fcntl is None:  # pragma: no cover - platform dependent
            return self
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise StoreError("unwritable_output", f"cannot create the lock file {self.path}: {exc}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
            os.close(fd)
            raise StoreError("run_locked", f"{self.folder} is being written by another toolworld process (pid "
                             f"{holder}); one process writes a run folder at a time. Wait for it to finish or stop "
                             "it, then try again (a stopped or killed process frees the folder).") from None  # fmt: skip
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # closing the only descriptor drops the flock

    @property
    def held(self) -> bool:
        return self._fd is not None

    def __del__(self) -> None:  # a store dropped without close() must not keep its folder locked
        self.release()

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def _remove_db_files(path: Path) -> None:
    for suffix in ("", "-wal", "-shm", "-journal"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


def _fsync(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # some platforms cannot open a folder; the rename is still atomic there
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# -- the store ------------------------------------------------------------------------------------------------


class RunStore:
    """The store of one run folder. Open with :meth:`create` (new run) or :meth:`open` (existing run).

    One process writes (the run, holding the folder's lock); others may read at the same time. Not
    thread-safe: use it from one thread. ``on_damage`` gets one line per unreadable row a read skips
    (default: a ``DamagedRowWarning``); each row is reported once per store.
    """

    def __init__(self, path: Path, conn: sqlite3.Connection, *, lock: RunLock | None = None,
                 on_damage: DamageHandler | None = None) -> None:  # fmt: skip
        self.path = path
        self._conn = conn
        self._lock = lock
        self._on_damage = on_damage or _warn_damage
        self._reported: set[str] = set()
        self._tasks: list[Task] | None = None

    # -- opening ----------------------------------------------------------------------------------------------

    @staticmethod
    def exists(out_dir: str | Path) -> bool:
        """True when ``out_dir`` holds a run store."""
        return (Path(out_dir) / DB_NAME).is_file()

    @classmethod
    def _connect(cls, path: Path) -> sqlite3.Connection:
        conn = sqlite3.connect(path, timeout=30.0, isolation_level=None)
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA foreign_keys=ON")
        except BaseException:
            conn.close()
            raise
        return conn

    @classmethod
    def create(cls, out_dir: str | Path, config: dict[str, Any], tasks: Iterable[Task], *,
               on_damage: DamageHandler | None = None) -> RunStore:  # fmt: skip
        """Start a new run in ``out_dir`` (created if needed) and hold its lock until :meth:`close`.

        Refuses a folder that already holds a run (``output_exists``) or that another process is writing
        (``run_locked``). The store is complete before it appears under its name (see the module docstring).
        """
        folder = Path(out_dir)
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError("unwritable_output", f"cannot create the run folder {folder}: {exc}") from exc
        lock = RunLock(folder).acquire()
        path = folder / DB_NAME
        tmp = folder / f".{DB_NAME}.tmp"
        try:
            if path.exists():
                raise StoreError("output_exists", f"{folder} already holds a run ({DB_NAME}); pass --resume to "
                                 "continue it, or choose another --out")  # fmt: skip
            # We hold the lock, so these are leftovers: a crashed create, or the journal of a deleted run.db that
            # SQLite would otherwise replay into the new file.
            _remove_db_files(tmp)
            for suffix in ("-wal", "-shm", "-journal"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)
            meta = {"schema_version": str(SCHEMA_VERSION), "created_at": _now(), "config": encode_json(config)}
            _build(tmp, meta, [(t.id, i, _pack(encode_model(t))) for i, t in enumerate(tasks)], [])
            os.replace(tmp, path)
            _fsync(folder)
            conn = cls._connect(path)
        except BaseException as exc:
            _remove_db_files(tmp)
            lock.release()
            if isinstance(exc, sqlite3.Error | OSError):
                raise StoreError("unwritable_output", f"cannot create a run store in {folder}: {exc}") from exc
            raise
        return cls(path, conn, lock=lock, on_damage=on_damage)

    @classmethod
    def open(cls, out_dir: str | Path, *, writer: bool = False, on_damage: DamageHandler | None = None) -> RunStore:
        """Open the run in ``out_dir`` (``StoreError`` when there is none or it is not a run store).

        ``writer=True`` (resuming, re-scoring) takes the folder's lock first, so two writers never interleave.
        """
        folder = Path(out_dir)
        path = folder / DB_NAME
        if not path.is_file():
            raise StoreError("no_run", f"{folder} holds no run ({DB_NAME} is missing); start one with "
                             "`toolworld run WORLD --tasks FILE --out DIR`")  # fmt: skip
        lock = RunLock(folder).acquire() if writer else None
        conn: sqlite3.Connection | None = None
        try:
            conn = cls._connect(path)
            version = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        except sqlite3.DatabaseError as exc:
            if conn is not None:
                conn.close()
            if lock is not None:
                lock.release()
            raise StoreError("damaged_run", f"{path} is not a readable run store: {exc}. Start a new run with "
                             "another --out (the sqlite3 shell's .recover command may save some of its trials).",
                             ) from exc  # fmt: skip
        if version is None or str(version[0]) != str(SCHEMA_VERSION):
            conn.close()
            if lock is not None:
                lock.release()
            raise StoreError("damaged_run", f"{path} has store schema {version and version[0]!r}; this toolworld "
                             f"reads schema {SCHEMA_VERSION}")  # fmt: skip
        return cls(path, conn, lock=lock, on_damage=on_damage)

    def rebuild(self) -> Path:
        """Copy every readable row into a fresh ``run.db`` and keep the damaged file beside it; returns its path.

        For a writer (it holds the lock): a resumed run writes to a healthy file instead of one whose torn pages
        would refuse the very rows it re-runs. Rows are copied as they were (attempts, finish times, scores).
        """
        if self._lock is None:
            raise StoreError("not_writer", "rebuild needs the store opened with writer=True")
        folder = self.path.parent
        rows = []
        for traj, score, facts in self.trials():
            rows.append((traj.task_id, traj.trial, facts["status"], str(traj.termination),
                         None if score is None or score.infra_error else int(score.success),
                         None if score is None or not math.isfinite(score.reward) else score.reward,
                         facts["attempts"] if isinstance(facts["attempts"], int) else 1, facts["finished_at"],
                         _pack(encode_model(traj)), None if score is None else encode_model(score)))  # fmt: skip
        meta = {"schema_version": str(SCHEMA_VERSION), "created_at": _now(), "config": encode_json(self.config),
                "rebuilt_from": ", ".join(self.damaged)[:2000]}  # fmt: skip
        try:  # the run's own creation time, when it is readable
            found = self._conn.execute("SELECT CAST(value AS BLOB) FROM meta WHERE key = 'created_at'").fetchone()
            if found:
                meta["created_at"] = _text(found[0])
        except (sqlite3.DatabaseError, ValueError):
            pass
        tasks = [(t.id, i, _pack(encode_model(t))) for i, t in enumerate(self.tasks())]
        tmp = folder / f".{DB_NAME}.tmp"
        _remove_db_files(tmp)
        try:
            _build(tmp, meta, tasks, rows)
        except BaseException:
            _remove_db_files(tmp)
            raise
        self._conn.close()
        kept = folder / f"{DB_NAME}.damaged-{datetime.now(UTC).strftime('%Y%m%dT%H%M%S')}"
        # Keep the damaged file under another name first (a second link, so run.db never goes missing), move its
        # journal with it (never onto the new file), then swap the new file in with one atomic rename.
        try:
            os.link(self.path, kept)
        except OSError:  # a file system without hard links
            shutil.copy2(self.path, kept)
        for suffix in ("-wal", "-shm"):
            if Path(f"{self.path}{suffix}").exists():
                os.replace(f"{self.path}{suffix}", f"{kept}{suffix}")
        os.replace(tmp, self.path)
        _fsync(folder)
        self._conn = self._connect(self.path)
        return kept

    def close(self) -> None:
        try:
            self._conn.close()
        finally:
            if self._lock is not None:
                self._lock.release()

    def __enter__(self) -> RunStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- damage -----------------------------------------------------------------------------------------------

    def _damage(self, what: str, why: str) -> None:
        """Report a skipped row (once per store: several reads of one command must not repeat it)."""
        if what in self._reported:
            return
        self._reported.add(what)
        line = f"{self.path}: skipped {what}: {why}".replace("\n", " ").replace("\r", " ")
        self._on_damage(line)

    @property
    def damaged(self) -> list[str]:
        """What reads so far had to skip (``task T trial K``, ``task T``, ``trials row N``...)."""
        return sorted(self._reported)

    def _query(self, sql: str, args: tuple[Any, ...] = ()) -> list[Any]:
        """A query whose failure means the store cannot be used at all (its meta table or key index is gone)."""
        try:
            return self._conn.execute(sql, args).fetchall()
        except sqlite3.DatabaseError as exc:
            if not _unreadable(exc):
                raise
            raise StoreError("damaged_run", f"{self.path} is damaged where it cannot be read around ({exc}); "
                             "start a new run with another --out") from exc  # fmt: skip

    def _keys(self, table: str, columns: str) -> list[tuple[Any, ...]]:
        """``(rowid, *columns)`` of every row of ``table`` (``columns`` must be its primary key).

        Read from the primary-key index, which holds the keys apart from the row data, so a torn data page does
        not hide which rows exist; a torn index falls back to probing each rowid (keys then ``None``).
        """
        try:
            return self._conn.execute(f"SELECT rowid, {columns} FROM {table} INDEXED BY sqlite_autoindex_{table}_1"
                                      ).fetchall()  # fmt: skip
        except sqlite3.DatabaseError as exc:
            if not _unreadable(exc):
                raise
            self._damage(f"the {table} index", f"{exc}; reading the {table} rows one by one")
        top = self._query(f"SELECT max(rowid) FROM {table}")[0][0] or 0
        width = columns.count(",") + 1
        return [(rowid, *([None] * width)) for rowid in range(1, int(top) + 1)]

    # -- run configuration and tasks ---------------------------------------------------------------------------

    @property
    def config(self) -> dict[str, Any]:
        rows = self._query("SELECT value FROM meta WHERE key = 'config'")
        if not rows:
            return {}
        try:
            value = json.loads(rows[0][0])
        except (TypeError, ValueError) as exc:
            raise StoreError("damaged_run", f"{self.path}: the run configuration is unreadable ({exc})") from exc
        return value if isinstance(value, dict) else {}

    def update_config(self, **changes: Any) -> None:
        """Merge ``changes`` into the stored configuration (e.g. more trials on resume)."""
        config = {**self.config, **changes}
        self._conn.execute("INSERT OR REPLACE INTO meta VALUES ('config', ?)", (encode_json(config),))

    def tasks(self) -> list[Task]:
        """The run's readable tasks in their file order (a damaged one is reported and left out)."""
        if self._tasks is None:
            from ..tasks.model import Task

            found: list[tuple[int, Task]] = []
            for rowid, raw_id in self._keys("tasks", "CAST(id AS BLOB)"):
                try:
                    what = f"task {_text(raw_id)}" if raw_id is not None else f"tasks row {rowid}"
                except ValueError:
                    what = f"tasks row {rowid}"
                try:
                    row = self._conn.execute("SELECT position, data FROM tasks WHERE rowid = ?", (rowid,)).fetchone()
                    if row is None:
                        continue
                    found.append((int(row[0]), decode_model(Task, _unpack(row[1]))))
                except sqlite3.DatabaseError as exc:
                    if not _unreadable(exc):
                        raise
                    self._damage(what, _why(exc))
                except (ValueError, TypeError, zlib.error) as exc:  # includes JSON and validation errors
                    self._damage(what, _why(exc))
            self._tasks = [task for _pos, task in sorted(found, key=lambda p: p[0])]
        return list(self._tasks)

    def task_ids(self) -> list[str]:
        return [t.id for t in self.tasks()]

    def use_tasks(self, tasks: Iterable[Task]) -> None:
        """Take ``tasks`` as the run's tasks instead of reading them back, for a caller that has verified they are
        the run's own (``toolworld run --resume`` compares the task file's digest with the stored one): a damaged
        task row then costs nothing, and :meth:`rebuild` writes them to the healthy file."""
        self._tasks = list(tasks)

    # -- trials -----------------------------------------------------------------------------------------------

    def record(self, trajectory: Trajectory, score: Score | None) -> None:
        """Commit one finished trial (replacing an earlier infra-errored attempt of the same pair).

        Never fails on what the trajectory holds (see the module docstring). A damaged page that the row would
        be written to is reported and the trial is lost (``--resume`` runs it again); a full disk or a locked
        database raises, since no later trial could be kept either.
        """
        status = "infra_error" if trajectory.termination == "infra_error" else "done"
        try:
            blob = _pack(encode_model(trajectory))
        except Exception as exc:  # nothing in it could be kept: store a stub that resume re-runs
            blob, status = _pack(encode_model(_stub(trajectory, exc))), "infra_error"
        score_text = None if score is None else encode_model(score)
        reward = None if score is None or not math.isfinite(score.reward) else score.reward
        try:
            with self._conn:
                self._conn.execute("BEGIN IMMEDIATE")
                prev = self._conn.execute("SELECT attempts FROM trials WHERE task_id = ? AND trial = ?",
                                          (trajectory.task_id, trajectory.trial)).fetchone()  # fmt: skip
                attempts = (int(prev[0]) + 1) if prev and isinstance(prev[0], int) else 1
                self._conn.execute(
                    "INSERT OR REPLACE INTO trials VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (trajectory.task_id, trajectory.trial, status, str(trajectory.termination),
                     None if score is None or score.infra_error else int(score.success),
                     reward, attempts, _now(), blob, score_text),
                )  # fmt: skip
        except sqlite3.DatabaseError as exc:
            if not _is_corruption(exc):
                raise
            self._damage(f"task {trajectory.task_id} trial {trajectory.trial}",
                         f"could not store it ({exc}); `--resume` runs it again")  # fmt: skip

    def finished(self) -> set[tuple[str, int]]:
        """(task id, trial) pairs that finished without an infra error: a resumed run skips exactly these.

        A pair whose stored row is unreadable is not finished: resuming runs it again.
        """
        return {(traj.task_id, traj.trial) for traj, _score, facts in self.trials() if facts["status"] == "done"}

    def count(self, status: str | None = None) -> int:
        if status is None:
            return int(self._query("SELECT COUNT(*) FROM trials")[0][0])
        return int(self._query("SELECT COUNT(*) FROM trials WHERE status = ?", (status,))[0][0])

    def trials(self) -> Iterator[tuple[Trajectory, Score | None, dict[str, Any]]]:
        """Every readable trial in task order then trial order: (trajectory, score, row facts).

        A row that cannot be read (torn page, corrupt blob, bad JSON, a trajectory that does not validate, a
        trial whose task is unreadable) is reported through ``on_damage`` and skipped.
        """
        from ..records.trajectory import Trajectory
        from ..scoring import Score

        position = {t.id: i for i, t in enumerate(self.tasks())}
        keys = self._keys("trials", "CAST(task_id AS BLOB), trial")
        if keys and keys[0][1] is None:  # index damaged: learn each row's key from the row itself
            keys = self._keys_from_rows(keys)
        wanted: list[tuple[int, str, int]] = []
        orphans: dict[str, int] = {}
        for rowid, raw_id, trial in keys:
            try:
                task_id = _text(raw_id)
            except ValueError:
                self._damage(f"trials row {rowid}", "its task id is not text")
                continue
            if task_id not in position:
                orphans[task_id] = orphans.get(task_id, 0) + 1
            elif not isinstance(trial, int):
                self._damage(f"task {task_id} trials row {rowid}", f"its trial number is {trial!r}")
            else:
                wanted.append((rowid, task_id, trial))
        for task_id, n in orphans.items():  # one line per task, not per trial: the damage is in the task's row
            self._damage(f"the {n} trial(s) of task {task_id}", "the task itself is unreadable, so they cannot be "
                         "scored")  # fmt: skip
        wanted.sort(key=lambda k: (position[k[1]], k[2]))
        columns = "trajectory, CAST(score AS BLOB), CAST(status AS BLOB), attempts, CAST(finished_at AS BLOB)"
        for rowid, task_id, trial in wanted:
            what = f"task {task_id} trial {trial}"
            try:
                row = self._conn.execute(f"SELECT {columns} FROM trials WHERE rowid = ?", (rowid,)).fetchone()
                if row is None:  # replaced since the keys were read (a live run re-ran it): read its new row
                    row = self._conn.execute(f"SELECT {columns} FROM trials WHERE task_id = ? AND trial = ?",
                                             (task_id, trial)).fetchone()  # fmt: skip
                if row is None:
                    continue
                blob, score_text, status, attempts, finished_at = row
                traj = decode_model(Trajectory, _unpack(blob))
                score = decode_model(Score, _text(score_text)) if score_text else None
                facts = {"status": _text(status), "attempts": attempts, "finished_at": _text(finished_at)}
            except sqlite3.DatabaseError as exc:
                if not _unreadable(exc):
                    raise
                self._damage(what, _why(exc))
                continue
            except (ValueError, TypeError, zlib.error) as exc:  # JSON and validation errors are ValueErrors
                self._damage(what, _why(exc))
                continue
            if (traj.task_id, traj.trial) != (task_id, trial):
                self._damage(what, f"the stored trajectory is of task {traj.task_id} trial {traj.trial}")
                continue
            yield traj, score, facts

    def _keys_from_rows(self, keys: list[tuple[Any, ...]]) -> list[tuple[int, Any, Any]]:
        found = []
        for rowid, *_ in keys:
            try:
                row = self._conn.execute("SELECT CAST(task_id AS BLOB), trial FROM trials WHERE rowid = ?",
                                         (rowid,)).fetchone()  # fmt: skip
            except sqlite3.DatabaseError as exc:
                if not _unreadable(exc):
                    raise
                self._damage(f"trials row {rowid}", _why(exc))
                continue
            if row is not None:
                found.append((rowid, row[0], row[1]))
        return found

    def replace_scores(self, scores: Iterable[Score]) -> None:
        """Store new scores for existing trials (``toolworld rescore``), all in one transaction.

        When a damaged page refuses an update, the transaction is rolled back and the scores are stored one by
        one instead, reporting each row that cannot take its new score.
        """
        rows = [(encode_model(s), s.reward if math.isfinite(s.reward) else None,
                 None if s.infra_error else int(s.success), s.task_id, s.trial) for s in scores]  # fmt: skip
        sql = "UPDATE trials SET score = ?, reward = ?, success = ? WHERE task_id = ? AND trial = ?"
        try:
            with self._conn:
                self._conn.execute("BEGIN IMMEDIATE")
                self._conn.executemany(sql, rows)
            return
        except sqlite3.DatabaseError as exc:
            if not _is_corruption(exc):
                raise
        for row in rows:
            try:
                with self._conn:
                    self._conn.execute("BEGIN IMMEDIATE")
                    self._conn.execute(sql, row)
            except sqlite3.DatabaseError as exc:
                if not _is_corruption(exc):
                    raise
                self._damage(f"task {row[3]} trial {row[4]}", f"could not store its new score ({exc})")

    def __repr__(self) -> str:
        return f"RunStore({str(self.path)!r})"


def _build(path: Path, meta: dict[str, str], tasks: list[tuple[Any, ...]], trials: list[tuple[Any, ...]]) -> None:
    """Write a complete store to ``path`` (a temporary name) and flush it to disk, ready to be renamed."""
    conn = sqlite3.connect(path, isolation_level=None)  # rollback journal: a single file to rename
    try:
        conn.execute("BEGIN IMMEDIATE")
        for statement in filter(str.strip, _SCHEMA.split(";")):
            conn.execute(statement)
        conn.executemany("INSERT INTO meta VALUES (?, ?)", list(meta.items()))
        conn.executemany("INSERT INTO tasks VALUES (?, ?, ?)", tasks)
        conn.executemany("INSERT INTO trials VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", trials)
        conn.execute("COMMIT")
    finally:
        conn.close()
    _fsync(path)


def _stub(trajectory: Trajectory, exc: BaseException) -> Trajectory:
    """What is stored for a trajectory that cannot be serialised: its identity and why, as an infra error."""
    from ..records.trajectory import Trajectory

    return Trajectory(
        task_id=trajectory.task_id, world=str(trajectory.world), seed=int(trajectory.seed), trial=trajectory.trial,
        policy=str(trajectory.policy), user=str(trajectory.user), termination="infra_error",
        infra_errors=[{"kind": "unserialisable_trajectory", "retryable": True, "fatal": True, "source": "store",
                       "message": f"the trajectory could not be stored: {type(exc).__name__}: {_safe_repr(exc)}"}],
    )  # fmt: skip
