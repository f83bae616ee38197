"""The typed summary of a run: what ``summary.json`` holds, as a pydantic model.

``summary.json`` is a contract (scripts and dashboards read it), so :class:`Summary` keeps exactly its keys and
their order: ``Summary.model_dump(mode="json")`` is the file. pass@k and pass^k stay keyed by k as a string, as
JSON objects must be; :meth:`Summary.pass_hat` and :meth:`Summary.pass_at` take an ``int``.

Older summaries lack newer keys (``token_integrity``, ``pass_k_tasks``, ``components`` came later):
:meth:`Summary.load` fills them with empty defaults, keeps keys it does not know, and replaces a value of the
wrong type by its default instead of failing, so a run folder written by any version still reports.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .metrics import summary_fields

if TYPE_CHECKING:
    from ..records.trajectory import Trajectory
    from ..tasks.model import Task
    from .model import Score

__all__ = [
    "ComponentRate",
    "Failures",
    "Group",
    "Latency",
    "NoiseStats",
    "Summary",
    "TokenIntegrity",
    "Tokens",
    "ToolErrors",
]


class _Part(BaseModel):
    """A nested block: extra keys (from a newer toolworld) are kept, so loading and writing back loses nothing."""

    model_config = ConfigDict(extra="allow")


class Group(_Part):
    """Success over one group of scored trials (a difficulty level, a task kind, a target tool)."""

    n: int = 0
    success_rate: float | None = None


class ComponentRate(_Part):
    """How often one score component (state, outputs, identified, ...) passed where it applied."""

    n: int = 0
    pass_rate: float | None = None


class Failures(_Part):
    """Failed trials by what was wrong (a trial can count in several)."""

    missing_changes: int = 0
    wrong_values: int = 0
    extra_changes: int = 0
    outputs_not_stated: int = 0


class ToolErrors(_Part):
    """One tool's calls and the agent errors among them, by error type."""

    calls: int = 0
    errors: int = 0
    rate: float | None = None
    types: dict[str, int] = Field(default_factory=dict)


class Tokens(_Part):
    """Tokens over the scored trials."""

    prompt: int = 0
    completion: int = 0
    per_episode_mean: float | None = None

    @property
    def total(self) -> int:
        return self.prompt + self.completion


class TokenIntegrity(_Part):
    """What token-level training must know about the recorded tokens (see ``scoring.metrics.token_integrity``)."""

    bridge_breaks: int = 0
    divergences: int = 0
    turns_without_sampled_ids: int = 0
    rescored_logprobs: int = 0
    renamed_call_ids: int = 0
    episodes_affected: int = 0


class Latency(_Part):
    """Seconds per assistant turn and per episode."""

    turn_mean_s: float | None = None
    episode_mean_s: float | None = None
    episode_p90_s: float | None = None


class NoiseStats(_Part):
    """Success with and without injected noise."""

    episodes_with_noise: int = 0
    success_rate_with_noise: float | None = None
    success_rate_without_noise: float | None = None
    episodes_with_perturbations: int = 0


class Summary(_Part):
    """A run's ``summary.json``. Rates are over the scored (non-infra) trials; ``infra_errors`` counts the rest.

    ``world``, ``policy``, ``finished`` and ``task_file_errors`` describe the run folder and are set by the
    pipeline; :meth:`compute` fills the rest from trajectories and scores.
    """

    world: str | None = None
    policy: str | None = None
    trials: int = 1
    tasks: int = 0
    episodes: int = 0
    scored: int = 0
    infra_errors: int = 0
    success_rate: float = 0.0
    mean_reward: float = 0.0
    pass_at_k: dict[str, float | None] = Field(default_factory=dict)
    pass_hat_k: dict[str, float | None] = Field(default_factory=dict)
    pass_k_tasks: dict[str, int] = Field(default_factory=dict)
    by_difficulty: dict[str, Group] = Field(default_factory=dict)
    by_kind: dict[str, Group] = Field(default_factory=dict)
    by_target_tool: dict[str, Group] = Field(default_factory=dict)
    by_demand: dict[str, Group] = Field(default_factory=dict)
    components: dict[str, ComponentRate] = Field(default_factory=dict)
    failures: Failures = Field(default_factory=Failures)
    tool_errors: dict[str, ToolErrors] = Field(default_factory=dict)
    error_types: dict[str, int] = Field(default_factory=dict)
    divergence: dict[str, int] = Field(default_factory=dict)
    terminations: dict[str, int] = Field(default_factory=dict)
    tokens: Tokens = Field(default_factory=Tokens)
    token_integrity: TokenIntegrity = Field(default_factory=TokenIntegrity)
    latency: Latency = Field(default_factory=Latency)
    noise: NoiseStats = Field(default_factory=NoiseStats)
    scorer_version: str | None = None
    finished: int | None = None
    task_file_errors: list[str] = Field(default_factory=list)

    @classmethod
    def compute(cls, tasks: Mapping[str, Task], trajectories: Sequence[Trajectory], scores: Sequence[Score], *,
                trials: int, **run: Any) -> Summary:  # fmt: skip
        """The summary of these trials (see :func:`toolworld.scoring.metrics.summary_fields` for every rule);
        ``run`` sets the run-folder fields (``world``, ``policy``, ``finished``, ``task_file_errors``)."""
        return cls.model_validate({**summary_fields(tasks, trajectories, scores, trials=trials), **run})

    @classmethod
    def load(cls, data: Mapping[str, Any] | str | Path) -> Summary:
        """A summary from its JSON dict, or from a ``summary.json`` path, written by this or an older toolworld.

        A top-level value of the wrong type (a hand-edited or damaged file) is replaced by its default rather
        than refusing the whole summary: a report of what is readable beats none. Unknown keys are kept.
        """
        if isinstance(data, (str, Path)):
            data = json.loads(Path(data).read_text(encoding="utf-8"))
        if not isinstance(data, Mapping):
            raise TypeError(f"a summary is a JSON object, not {type(data).__name__}")
        data = dict(data)
        for _ in range(len(data) + 1):
            try:
                return cls.model_validate(data)
            except ValidationError as exc:
                bad = {err["loc"][0] for err in exc.errors() if err["loc"]}
                if not bad & data.keys():
                    raise
                for key in bad:
                    data.pop(key, None)  # the field's default takes its place
        raise AssertionError("unreachable: every retry removes at least one key")  # pragma: no cover

    def to_json(self) -> str:
        """The ``summary.json`` text (indented, UTF-8 as is, a final newline)."""
        return json.dumps(self.model_dump(mode="json"), indent=2, ensure_ascii=False) + "\n"

    def pass_hat(self, k: int) -> float | None:
        """pass^k (all k trials of a task succeed), None when no task had k scored trials."""
        return self.pass_hat_k.get(str(k))

    def pass_at(self, k: int) -> float | None:
        """pass@k (at least one of k trials succeeds), None when no task had k scored trials."""
        return self.pass_at_k.get(str(k))


def summarize(tasks: Mapping[str, Task], trajectories: Sequence[Trajectory], scores: Sequence[Score], *,
              trials: int) -> Summary:  # fmt: skip
    """The typed summary of a run's trials: success, pass@k and pass^k, groups, failures, tokens, latency, noise
    (``Summary.compute`` without the run-folder fields); ``.model_dump(mode="json")`` is its ``summary.json``."""
    return Summary.compute(tasks, trajectories, scores, trials=trials)
