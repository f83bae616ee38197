"""Environment noise: transient tool failures, added latency and truncated results, seeded per (task, trial).

Real tool backends time out, lag and cut long answers. Training only on a perfect environment teaches an
agent nothing about retrying, so the loop can inject these faults. Every draw comes from a generator keyed
by (noise seed, task id, trial, step index), so a rerun injects exactly the same faults at the same steps,
whatever happened at other steps, and every injected fault is recorded as a ``NoiseEvent`` in the
trajectory, so a scorer can tell an agent's mistake from an injected one.

A transient failure never reaches the world: the call is not executed and the state stays unchanged, as
when a real service is down. Noise is the environment's doing, so it is counted neither as an agent error
nor as an infra error.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from ..core.seeds import derive_seed
from ..world.rng import Rng

UNAVAILABLE_TYPE = "temporarily_unavailable"


@dataclass(frozen=True, slots=True)
class NoiseConfig:
    """How much noise to inject. Probabilities are per tool call; all zero means no noise.

    Args:
        tool_failure_p: chance that a call fails with a "temporarily unavailable, retry" observation.
        latency_ms: mean added delay per call (drawn uniformly in [0.5, 1.5] x this value).
        truncate_p: chance that a successful result is cut to ``truncate_chars`` characters.
        truncate_chars: how much of a truncated result the agent still sees.
        seed: noise seed; with the task id and trial it fixes every draw.
    """

    tool_failure_p: float = 0.0
    latency_ms: float = 0.0
    truncate_p: float = 0.0
    truncate_chars: int = 200
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("tool_failure_p", "truncate_p"):
            p = getattr(self, name)
            if not 0.0 <= p <= 1.0:
                raise ValueError(f"{name} must be a probability between 0 and 1, got {p}")
        if self.latency_ms < 0:
            raise ValueError(f"latency_ms must be >= 0, got {self.latency_ms}")
        if self.truncate_chars < 0:
            raise ValueError(f"truncate_chars must be >= 0, got {self.truncate_chars}")

    @property
    def active(self) -> bool:
        return self.tool_failure_p > 0 or self.latency_ms > 0 or self.truncate_p > 0


@dataclass(frozen=True, slots=True)
class StepNoise:
    """What happens to one tool call."""

    fail: bool = False
    latency_s: float = 0.0
    truncate: bool = False


class NoiseInjector:
    """The per-episode source of noise decisions (one per (task, trial))."""

    def __init__(self, config: NoiseConfig, task_id: str, trial: int) -> None:
        self.config = config
        self._key = ("noise", config.seed, task_id, trial)

    def draw(self, step: int) -> StepNoise:
        """The noise for the call at ``step`` (0-based index among the episode's tool calls)."""
        c = self.config
        if not c.active:
            return StepNoise()
        # A generator of its own per step: a step's draws never depend on how many draws other steps made.
        rng = Rng(derive_seed(*self._key, step))
        # Always draw all three so that changing one probability does not shift the others' draws.
        fail_u, latency_u, truncate_u = rng.random(), rng.random(), rng.random()
        return StepNoise(
            fail=fail_u < c.tool_failure_p,
            latency_s=c.latency_ms * (0.5 + latency_u) / 1000.0 if c.latency_ms > 0 else 0.0,
            truncate=truncate_u < c.truncate_p,
        )

    def truncate(self, content: str) -> str:
        """Cut an observation, saying so, as a service with a response size limit would."""
        keep = self.config.truncate_chars
        if len(content) <= keep:
            return content
        return f"{content[:keep]}... [truncated: {len(content) - keep} more characters not shown]"


def unavailable_observation(tool: str) -> str:
    """The observation of an injected transient failure (JSON, like every tool error)."""
    return json.dumps({"error": {"type": UNAVAILABLE_TYPE,
                                 "message": f"The {tool} service is temporarily unavailable. Nothing was changed; "
                                            "retry the same call."}})  # fmt: skip
