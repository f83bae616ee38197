"""Per-episode limits: what ends an episode that would otherwise run on (turns, tokens, wall time, errors)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Limits:
    """Per-episode limits.

    Args:
        max_turns: assistant turns before the episode ends as ``max_turns``.
        max_tokens: conversation length in tokens (prompt + completion of the latest turn, as the backend
            reports it) at which the episode ends as ``max_tokens``; None for no limit. A turn cut by the
            backend's own length limit (``finish_reason == "length"``) also ends it so.
        max_wall_s: wall-clock seconds for the whole episode (``timeout``); None (the default) for no limit. For a
            driver outside the loop (a trainer, the Gymnasium env) its own time between steps counts too. A
            ``timeout`` counts against the agent like ``max_turns``, so set it only where the agent's speed is
            part of what is judged: the clock measures the machine as much as the policy (a loaded CPU or a busy
            server turns the same trial into a failure), while turns and tokens already bound every episode and a
            server that stops answering is caught per request by the backend's ``timeout_s`` (an infra error,
            retried). It is not made an infra error instead, because a voided trial leaves pass^1 and GRPO's
            groups: a policy that stalls on hard tasks would drop its own failures.
        max_consecutive_errors: agent tool errors in a row that end the episode (``error_cap``).
        infra_retries: retries of a failed policy or user-simulator turn before ``infra_error``.
        infra_backoff_s: first retry delay; doubles each retry.
        max_observation_chars: longest tool observation shown to the model (longer ones are cut, saying so);
            it keeps a 1 MB echo of a bad argument from flooding the context.
    """

    max_turns: int = 30
    max_tokens: int | None = None
    max_wall_s: float | None = None
    max_consecutive_errors: int = 5
    infra_retries: int = 2
    infra_backoff_s: float = 1.0
    max_observation_chars: int = 20_000

    def __post_init__(self) -> None:
        if self.max_turns < 1:
            raise ValueError("max_turns must be at least 1")
        if self.max_consecutive_errors < 1:
            raise ValueError("max_consecutive_errors must be at least 1")
        if self.infra_retries < 0 or self.infra_backoff_s < 0:
            raise ValueError("infra_retries and infra_backoff_s must be >= 0")
        if self.max_observation_chars < 100:
            raise ValueError("max_observation_chars must be at least 100")
