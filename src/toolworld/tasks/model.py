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

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ..core.files import atomic_path, atomic_text_writer
from ..core.jsonutil import canonical_json

TaskKind = Literal["action", "refusal", "info"]


def _only_known(values: list[str], known: tuple[str, ...], what: str) -> list[str]:
    """``values`` unchanged, or a ``ValueError`` naming the unknown ones and the known (pydantic reports it)."""
    bad = [v for v in values if v not in known]
    if bad:
        raise ValueError(f"unknown {what} {bad}; known: {', '.join(known)}")
    return values


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


BEHAVIOURS = ("piecemeal",)
"""How a user may talk, beyond the facts they know: ``piecemeal`` gives one fact per answer, and says nothing
of who they are (or of a value the request leaves out) until asked."""


class UserProfile(_Strict):
    """Who asks, what they can tell the agent, what they cannot, and how they behave.

    A user simulator gives a ``known`` fact only when the agent asks for it, answers a question about an
    ``unknown`` one with the line stored for it ("I don't have the order number at hand"), and follows
    ``behaviour`` and ``revision``; the agent must find everything else with tools.
    """

    name: str = Field(description="How the user is addressed, e.g. 'Mia Lopez'.")
    persona: str = Field(description="One line on tone and situation, used by user simulators.")
    known: dict[str, Any] = Field(description="Facts the user knows (email, name, zip, an order number...).")
    unknown: dict[str, str] = Field(default_factory=dict, description="Fact key the user does not know -> what "
                                    "they say when asked for it, e.g. {'order_id': \"I don't have the order number.\"}.")
    behaviour: list[str] = Field(default_factory=list, description="How the user talks: 'piecemeal' (one fact "
                                 "per answer, identity only when asked).")
    revision: Revision | None = Field(default=None, description="A change of mind, said when the agent reads "
                                      "the first wish back to confirm it.")

    @field_validator("behaviour")
    @classmethod
    def _known_behaviours(cls, value: list[str]) -> list[str]:
        """A misspelt behaviour would silently make a plain user: user simulators act only on those they know."""
        return _only_known(value, BEHAVIOURS, "behaviour")


class Action(_Strict):
    """One gold tool call; ``output_digest`` lets ``tasks verify`` name the first step whose result changed."""

    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    output_digest: str | None = None


class ExpectedOutput(_Strict):
    """A value the agent must tell the user (a refund amount, a tracking number)."""

    label: str = Field(description="What the value is, e.g. 'refund_total'.")
    value: str = Field(description="The value as the user should hear it; numbers are compared normalized.")
    step: int | None = Field(default=None, description="Index of the gold action whose result gives the value "
                             "(``tasks verify`` recomputes it from the replay).")


class Revision(_Strict):
    """A change of mind: the request first asks for ``initial``; when the agent asks the user to confirm it,
    the user says ``message`` and wants the gold actions instead (the gold end state is the final wish)."""

    message: str
    initial: list[Action] = Field(description="The write(s) the instruction first asked for, now superseded.")


class Need(_Strict):
    """A value the user describes by what they need ("one size up") instead of naming it; resolved on the
    seed state by the world's kit to exactly one value."""

    slot: str = Field(description="The request slot it fills, e.g. 'new_items', 'payment', 'order'.")
    phrase: str = Field(description="How the user says it, e.g. 'the same jacket one size up'.")
    value: Any = Field(description="What it resolves to (an item id, a payment method id...).")


class Contingency(_Strict):
    """A request whose branch depends on state the agent must look up ("if it hasn't shipped, cancel it,
    otherwise return it"); gold takes ``taken``."""

    condition: str = Field(description="The condition in words, e.g. 'the order has not shipped'.")
    holds: bool = Field(description="Whether the condition holds on the seed state.")
    taken: str = Field(description="The tool of the branch gold takes.")
    other: str = Field(description="The tool of the branch not taken.")


DEMANDS = ("unknown_fact", "need", "contingency", "change_of_mind", "piecemeal")
"""Reasoning a task asks for beyond calling the obvious tool with the values in the request."""


class Scenario(_Strict):
    """What makes a request more than a command: the reasoning it demands and how it was phrased."""

    demands: list[str] = Field(default_factory=list, description=f"Any of {', '.join(DEMANDS)}.")
    needs: list[Need] = Field(default_factory=list)
    contingency: Contingency | None = None
    facts: list[str] = Field(default_factory=list, description="Strings the instruction must contain for the "
                             "task to be solvable (a rephrasing that drops one is rejected).")
    templates: list[str] = Field(default_factory=list, description="Ids of the templates the instruction used.")
    reads: list[int] = Field(default_factory=list, description="Gold steps that find what the user cannot quote or "
                             "show a need's answer (the orders listed with their dates; the order whose address is "
                             "meant): they serve the scenario even where another read shows the same values.")
    withheld: list[str] = Field(default_factory=list, description="Keys of ``user.known`` the request leaves out "
                                "(a piecemeal user's new address): the user gives them only when asked.")

    @field_validator("demands")
    @classmethod
    def _known_demands(cls, value: list[str]) -> list[str]:
        return _only_known(value, DEMANDS, "demand")


class Difficulty(_Strict):
    """Why a task is hard: how long and how write-heavy its (pruned) gold path is, and what it asks to reason
    about (``demands``: the number of the scenario's reasoning demands)."""

    path_length: int
    writes: int
    tools: list[str]
    distractors: int = 0
    demands: int = 0
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


class EndState(_Strict):
    """Another end state the policy accepts for the same request (e.g. an exchange asked for on an order that
    has not shipped: swap the items, or refuse and say why); scorers pass a trial that reaches any of them."""

    label: str = Field(description="What the agent did to reach it, e.g. 'modify the pending order instead'.")
    kind: TaskKind
    gold_actions: list[Action]
    expected_changes: dict[str, Any]
    expected_outputs: list[ExpectedOutput] = Field(default_factory=list)
    refusal: Refusal | None = None


UserProfile.model_rebuild()


class Task(_Strict):
    """A user request in a world whose correct end state is known (or end states: ``alternatives``)."""

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
    alternatives: list[EndState] = Field(default_factory=list, description="Other acceptable end states.")
    scenario: Scenario = Field(default_factory=Scenario)
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

    def described_arguments(self) -> list[tuple[Need, str]]:
        """The values the customer only describes ("the order I placed on April 16") that a gold call takes, each
        with the first argument gold passes it as: the picks an agent makes from what a tool listed, which is
        where a small policy fails most (the benchmark's pick counts and GRPO's ``branch_at="pick"`` read it)."""
        out: list[tuple[Need, str]] = []
        for need in self.scenario.needs:
            if not isinstance(need.value, str):
                continue
            arg = next((k for a in self.gold_actions for k, v in a.arguments.items() if v == need.value), None)
            if arg is not None:
                out.append((need, arg))
        return out


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
                        "alternatives", "scenario", "difficulty", "provenance")  # fmt: skip


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
