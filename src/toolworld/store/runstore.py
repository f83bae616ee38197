"""``RunStore``: one run's configuration, tasks, trajectories and scores in ``DIR/run.db``.

Why SQLite in WAL mode: every finished (task, trial) is committed in its own transaction the moment it ends, so
a run killed at any instant (SIGKILL, a lost machine) keeps every trial that finished and nothing half-written;
readers (``toolworld report`` on a live run) never block the writer. ``synchronous=NORMAL`` is enough for that:
in WAL mode a killed *process* loses nothing committed, only an OS crash can drop the last transactions.

Trajectories are stored as zlib-compressed JSON (they are mostly repetitive text and token ids, ~5-10x smaller);
scores as plain JSON so that SQL can reach into them. A trial that ended on an infra error is stored too (it is
evidence), with ``status = 'infra_error'``; resuming re-runs it and replaces the row, counting ``attempts``.
"""

from __future__ import annotations

import json
import sqlite3
import zlib
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..rollout.trajectory import Trajectory
    from ..score import Score
    from ..tasks.model import Task

DB_NAME = "run.db"
SCHEMA_VERSION = 1

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


class StoreError(Exception):
    """The run folder cannot be used as asked (no run there, another run's configuration, a damaged file)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def _pack(text: str) -> bytes:
    return zlib.compress(text.encode("utf-8"), 6)


def _unpack(blob: bytes) -> str:
    return zlib.decompress(blob).decode("utf-8")


class RunStore:
    """The store of one run folder. Open with :meth:`create` (new run) or :meth:`open` (existing run).

    One process writes (the run); others may read at the same time. Not thread-safe: use it from one thread.
    """

    def __init__(self, path: Path, conn: sqlite3.Connection) -> None:
        self.path = path
        self._conn = conn

    # -- opening ----------------------------------------------------------------------------------------------

    @staticmethod
    def exists(out_dir: str | Path) -> bool:
        """True when ``out_dir`` holds a run store."""
        return (Path(out_dir) / DB_NAME).is_file()

    @classmethod
    def _connect(cls, path: Path) -> sqlite3.Connection:
        conn = sqlite3.connect(path, timeout=30.0, isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA foreign_keys=ON")
        return conn

    @classmethod
    def create(cls, out_dir: str | Path, config: dict[str, Any], tasks: Iterable[Task]) -> RunStore:
        """Start a new run in ``out_dir`` (created if needed); refuses a folder that already holds one."""
        folder = Path(out_dir)
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / DB_NAME
        if path.exists():
            raise StoreError("output_exists", f"{folder} already holds a run ({DB_NAME}); pass --resume to continue "
                             "it, or choose another --out")  # fmt: skip
        conn = cls._connect(path)
        with conn:  # schema, configuration and tasks land together or not at all
            conn.execute("BEGIN IMMEDIATE")
            for statement in filter(str.strip, _SCHEMA.split(";")):
                conn.execute(statement)
            conn.executemany("INSERT INTO meta VALUES (?, ?)", [
                ("schema_version", str(SCHEMA_VERSION)), ("created_at", _now()),
                ("config", json.dumps(config, sort_keys=True, ensure_ascii=False))])  # fmt: skip
            conn.executemany("INSERT INTO tasks VALUES (?, ?, ?)",
                             [(t.id, i, _pack(t.to_json())) for i, t in enumerate(tasks)])  # fmt: skip
        return cls(path, conn)

    @classmethod
    def open(cls, out_dir: str | Path) -> RunStore:
        """Open the run in ``out_dir`` (``StoreError`` when there is none or it is not a run store)."""
        folder = Path(out_dir)
        path = folder / DB_NAME
        if not path.is_file():
            raise StoreError("no_run", f"{folder} holds no run ({DB_NAME} is missing); start one with "
                             "`toolworld run WORLD --tasks FILE --out DIR`")  # fmt: skip
        try:
            conn = cls._connect(path)
            version = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        except sqlite3.DatabaseError as exc:
            raise StoreError("damaged_run", f"{path} is not a readable run store: {exc}") from exc
        if version is None or int(version[0]) != SCHEMA_VERSION:
            conn.close()
            raise StoreError("damaged_run", f"{path} has store schema {version and version[0]!r}; this toolworld "
                             f"reads schema {SCHEMA_VERSION}")  # fmt: skip
        return cls(path, conn)

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> RunStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- run configuration and tasks ---------------------------------------------------------------------------

    @property
    def config(self) -> dict[str, Any]:
        row = self._conn.execute("SELECT value FROM meta WHERE key = 'config'").fetchone()
        return json.loads(row[0]) if row else {}

    def update_config(self, **changes: Any) -> None:
        """Merge ``changes`` into the stored configuration (e.g. more trials on resume)."""
        config = {**self.config, **changes}
        self._conn.execute("INSERT OR REPLACE INTO meta VALUES ('config', ?)",
                           (json.dumps(config, sort_keys=True, ensure_ascii=False),))  # fmt: skip

    def tasks(self) -> list[Task]:
        """The run's tasks in their file order."""
        from ..tasks.model import Task

        rows = self._conn.execute("SELECT data FROM tasks ORDER BY position").fetchall()
        return [Task.model_validate_json(_unpack(blob)) for (blob,) in rows]

    def task_ids(self) -> list[str]:
        return [r[0] for r in self._conn.execute("SELECT id FROM tasks ORDER BY position")]

    # -- trials -----------------------------------------------------------------------------------------------

    def record(self, trajectory: Trajectory, score: Score | None) -> None:
        """Commit one finished trial (replacing an earlier infra-errored attempt of the same pair)."""
        status = "infra_error" if trajectory.termination == "infra_error" else "done"
        with self._conn:
            self._conn.execute("BEGIN IMMEDIATE")
            prev = self._conn.execute("SELECT attempts FROM trials WHERE task_id = ? AND trial = ?",
                                      (trajectory.task_id, trajectory.trial)).fetchone()  # fmt: skip
            self._conn.execute(
                "INSERT OR REPLACE INTO trials VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (trajectory.task_id, trajectory.trial, status, trajectory.termination,
                 None if score is None or score.infra_error else int(score.success),
                 None if score is None else score.reward, (prev[0] + 1) if prev else 1, _now(),
                 _pack(trajectory.to_json()), None if score is None else score.model_dump_json()),
            )  # fmt: skip

    def finished(self) -> set[tuple[str, int]]:
        """(task id, trial) pairs that finished without an infra error: a resumed run skips exactly these."""
        return {(t, int(k)) for t, k in self._conn.execute("SELECT task_id, trial FROM trials WHERE status = 'done'")}

    def count(self, status: str | None = None) -> int:
        if status is None:
            return int(self._conn.execute("SELECT COUNT(*) FROM trials").fetchone()[0])
        return int(self._conn.execute("SELECT COUNT(*) FROM trials WHERE status = ?", (status,)).fetchone()[0])

    def trials(self) -> Iterator[tuple[Trajectory, Score | None, dict[str, Any]]]:
        """Every stored trial in task order then trial order: (trajectory, score, row facts)."""
        from ..rollout.trajectory import Trajectory
        from ..score import Score

        query = ("SELECT t.trajectory, t.score, t.status, t.attempts, t.finished_at FROM trials t "
                 "JOIN tasks k ON k.id = t.task_id ORDER BY k.position, t.trial")  # fmt: skip
        for blob, score, status, attempts, finished_at in self._conn.execute(query).fetchall():
            traj = Trajectory.model_validate_json(_unpack(blob))
            yield (traj, Score.model_validate_json(score) if score else None,
                   {"status": status, "attempts": attempts, "finished_at": finished_at})  # fmt: skip

    def replace_scores(self, scores: Iterable[Score]) -> None:
        """Store new scores for existing trials (``toolworld rescore``), all in one transaction."""
        with self._conn:
            self._conn.execute("BEGIN IMMEDIATE")
            self._conn.executemany(
                "UPDATE trials SET score = ?, reward = ?, success = ? WHERE task_id = ? AND trial = ?",
                [(s.model_dump_json(), s.reward, None if s.infra_error else int(s.success), s.task_id, s.trial)
                 for s in scores],
            )  # fmt: skip

    def __repr__(self) -> str:
        return f"RunStore({str(self.path)!r})"
