"""The ``Task`` model and task-set files (JSONL, one task a line; Parquet export).

A task is data whose correct answer is known because it was executed: the gold actions were run on a fresh
episode of ``world`` at ``seed`` and the resulting change-set was recorded as ``expected_changes``. The
instruction only contains what the user could know (``user.known``), never an internal id.

Reading is forgiving line by line and strict per line: a bad line is reported with its number and the
reason, and the other lines are still loaded, so one corrupt record never costs a whole task set.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..core.files import atomic_path, atomic_text_writer
from ..core.jsonutil import canonical_json

TaskKind = Literal["action", "refusal", "info"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class UserProfile(_Strict):
    """Who asks, and the only facts they can give the agent."""

    name: str = Field(description="How the user is addressed, e.g. 'Mia Lopez'.")
    persona: str = Field(description="One line on tone and situation, used by user simulators.")
    known: dict[str, Any] = Field(description="Facts the user knows (email, name, zip, an order number...).")


class Action(_Strict):
    """One gold tool call; ``output_digest`` lets ``tasks verify`` name the first step whose result changed."""

    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    output_digest: str | None = None


class ExpectedOutput(_Strict):
    """A value the agent must tell the user (a refund amount, a tracking number)."""

    label: str = Field(description="What the value is, e.g. 'refund_total'.")
    value: str = Field(description="The value as the user should hear it; numbers are compared normalized.")


class Difficulty(_Strict):
    """Why a task is hard: how long and how write-heavy its gold path is."""

    path_length: int
    writes: int
    tools: list[str]
    distractors: int = 0
    level: Literal["easy", "medium", "hard"]


class Provenance(_Strict):
    """Where a task came from, so a task set can be regenerated or audited."""

    sampler: str
    targets: list[str]
    generator_version: str
    index: int = Field(description="Position of the draw in the generation run (for reproduction).")


class Refusal(_Strict):
    """For refusal tasks: the rule the request breaks and the write the agent must not make."""

    rule: str = Field(description="The policy rule id, e.g. 'R3'.")
    reason: str = Field(description="Why the request cannot be done, as the tool would explain it.")
    forbidden: Action


class Task(_Strict):
    """A user request in a world whose correct end state is known."""

    id: str
    world: str
    seed: int
    kind: TaskKind
    instruction: str
    user: UserProfile
    gold_actions: list[Action]
    expected_changes: dict[str, Any]
    expected_outputs: list[ExpectedOutput] = Field(default_factory=list)
    refusal: Refusal | None = None
    ignore_columns: list[str] = Field(default_factory=list, description="'table.column' free text scorers skip.")
    difficulty: Difficulty
    provenance: Provenance

    @staticmethod
    def content_id(world: str, seed: int, instruction: str, expected_changes: dict[str, Any]) -> str:
        """Task id: a hash of what makes a task distinct (same request + same gold end state = same task)."""
        import hashlib

        payload = canonical_json([world, seed, instruction, expected_changes])
        return "t_" + hashlib.sha256(payload.encode()).hexdigest()[:16]

    def to_json(self) -> str:
        """One JSONL line: canonical, so identical tasks give identical bytes."""
        return canonical_json(self.model_dump(mode="json"))


@dataclass(frozen=True, slots=True)
class LineError:
    """A line of a task file that could not be read."""

    line: int
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}"


@dataclass(slots=True)
class TaskSet:
    """Tasks read from a file, with the lines that could not be read kept as errors (not raised)."""

    tasks: list[Task] = field(default_factory=list)
    errors: list[LineError] = field(default_factory=list)
    lines: list[int] = field(default_factory=list)  # the file line of each task, for error reports
    path: Path | None = None

    def __len__(self) -> int:
        return len(self.tasks)

    def __iter__(self) -> Iterator[Task]:
        return iter(self.tasks)

    @classmethod
    def load(cls, path: str | Path) -> TaskSet:
        """Read a JSONL task file; a missing file raises ``FileNotFoundError``, a bad line becomes an error."""
        path = Path(path)
        out = cls(path=path)
        with path.open("r", encoding="utf-8") as fh:
            for number, raw in enumerate(fh, start=1):
                if not raw.strip():
                    continue
                task = parse_task_line(raw, number, out.errors)
                if task is not None:
                    out.tasks.append(task)
                    out.lines.append(number)
        return out

    def save(self, path: str | Path) -> None:
        """Write atomically: a crash mid-write leaves the old file, not half of a new one."""
        write_jsonl(path, self.tasks)

    def to_parquet(self, path: str | Path) -> None:
        """Parquet export (needs the ``data`` extra): nested fields stay JSON strings for any reader."""
        export_parquet(self.tasks, path)


def parse_task_line(raw: str, number: int, errors: list[LineError]) -> Task | None:
    """Parse one JSONL line into a ``Task``, appending a readable error instead of raising."""
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        errors.append(LineError(number, f"not valid JSON ({exc.msg} at column {exc.colno})"))
        return None
    if not isinstance(data, dict):
        errors.append(LineError(number, f"expected a JSON object, got {type(data).__name__}"))
        return None
    try:
        return Task.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '(task)'}: {e['msg']}" for e in exc.errors()[:5]
        )
        errors.append(LineError(number, f"not a valid task ({problems})"))
        return None


def write_jsonl(path: str | Path, tasks: Iterable[Task | str]) -> int:
    """Write tasks (or their JSON lines) one per line, atomically: a failed write leaves the previous file."""
    n = 0
    with atomic_text_writer(path) as fh:
        for task in tasks:
            fh.write(task if isinstance(task, str) else task.to_json())
            fh.write("\n")
            n += 1
    return n


PARQUET_JSON_COLUMNS = ("user", "gold_actions", "expected_changes", "expected_outputs", "refusal", "ignore_columns",
                        "difficulty", "provenance")  # fmt: skip


def export_parquet(tasks: Iterable[Task], path: str | Path) -> int:
    """Write tasks as a Parquet table: flat columns for filtering, JSON strings for nested structures."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise RuntimeError("Parquet export needs pyarrow: pip install 'toolworld[data]'") from exc
    rows: dict[str, list[Any]] = {k: [] for k in ("id", "world", "seed", "kind", "instruction", "target",
                                                  "path_length", "writes", "level", *PARQUET_JSON_COLUMNS)}  # fmt: skip
    for t in tasks:
        d = t.model_dump(mode="json")
        for k in ("id", "world", "seed", "kind", "instruction"):
            rows[k].append(d[k])
        rows["target"].append(",".join(t.provenance.targets))
        rows["path_length"].append(t.difficulty.path_length)
        rows["writes"].append(t.difficulty.writes)
        rows["level"].append(t.difficulty.level)
        for k in PARQUET_JSON_COLUMNS:
            rows[k].append(None if d[k] is None else canonical_json(d[k]))
    table = pa.table(rows)
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp)
    return table.num_rows
