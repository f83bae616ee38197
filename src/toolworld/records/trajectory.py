"""``Trajectory``: the typed record of one episode, the unit that scorers, stores, reports and trainers read.

A trajectory keeps everything needed to judge and to learn from an episode without re-running it: the
conversation as sent to the model, every tool call with its result and timing, the token buffer of
token-level policies, which errors were the agent's and which were ours (infra errors are never scored as
reward 0), the noise that was injected, why the episode stopped, and the final change-set and state hash
that verifiers compare with the task's gold.

``to_json`` is one JSONL line; ``from_json`` reads it back to an equal object whose ``to_json`` gives the
same bytes, so trajectories survive a store round trip unchanged.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

#: Why an episode ended. ``answered``: the agent answered without a tool call and the user was done;
#: ``user_stop``: the user simulator ended the conversation (stop marker, or its turn cap);
#: ``max_turns`` / ``max_tokens`` / ``timeout``: a per-episode limit; ``error_cap``: too many agent errors in
#: a row; ``infra_error``: the policy (or our own code) failed after retries, so the episode says nothing
#: about the agent.
Termination = Literal["answered", "user_stop", "max_turns", "max_tokens", "timeout", "error_cap", "infra_error"]
TERMINATIONS: tuple[str, ...] = ("answered", "user_stop", "max_turns", "max_tokens", "timeout", "error_cap",
                                 "infra_error")  # fmt: skip

NoiseKind = Literal["tool_failure", "latency", "truncate"]


class Step(BaseModel):
    """One tool call the agent made and what came back."""

    index: int = Field(description="Position among the episode's tool calls (0-based).")
    turn: int = Field(description="The assistant turn that made the call (0-based; -1 for a call made at the tool "
                      "level, e.g. by an MCP client, outside any assistant turn).")
    call_id: str
    name: str
    arguments: dict[str, Any] | str = Field(description="As the model sent them; a raw string when not a JSON object.")
    ok: bool
    output: Any = None
    error: dict[str, Any] | None = Field(default=None, description="The tool error (type, message) when not ok.")
    mutates: bool = False
    duration_s: float = Field(default=0.0, description="Time spent executing the call, added latency included.")
    noise: list[NoiseKind] = Field(default_factory=list, description="Noise that hit this call, if any.")
    observation_truncated: bool = Field(default=False, description="The observation was cut to the size limit.")

    @property
    def agent_error(self) -> bool:
        """A failure the agent caused (not injected noise and not a crash of the world's tool)."""
        return (not self.ok and "tool_failure" not in self.noise and self.error is not None
                and self.error.get("type") != "internal_error")  # fmt: skip


class TurnRecord(BaseModel):
    """Timing and usage of one assistant turn."""

    index: int
    latency_s: float = Field(description="Wall time the loop waited for the turn, retries included.")
    attempts: int = Field(default=1, description="Calls to the policy, 1 plus the infra retries.")
    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish_reason: str = "stop"
    tool_calls: int = 0
    state_hash: str = Field(default="", description="The world's state hash when the turn was taken (before its "
                            "tool calls ran); with what the agent had been shown, it makes GiGPO's anchor state.")
    meta: dict[str, Any] = Field(default_factory=dict, description="What the policy reported about the turn.")


class NoiseEvent(BaseModel):
    """One injected perturbation of the environment (see ``toolworld.env.noise``)."""

    kind: NoiseKind
    turn: int
    step: int
    tool: str
    detail: dict[str, Any] = Field(default_factory=dict)


class Usage(BaseModel):
    """Tokens over the whole episode (sums over turns, as the backends reported them)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class Trajectory(BaseModel):
    """One episode of one task by one policy: conversation, steps, errors, noise, outcome."""

    version: int = 1
    task_id: str
    world: str
    seed: int = Field(description="The world seed the episode started from (the task's seed).")
    trial: int = Field(description="Which repetition of the task this is (0-based), for pass@k.")
    policy: str
    user: str = Field(description="The user simulator that played the customer.")
    policy_seed: int = Field(default=0, description="Seed handed to the policy, derived from (task, trial).")
    messages: list[dict[str, Any]] = Field(default_factory=list)
    steps: list[Step] = Field(default_factory=list)
    turns: list[TurnRecord] = Field(default_factory=list)
    token_buffer: dict[str, Any] | None = None
    usage: Usage = Field(default_factory=Usage)
    agent_errors: list[dict[str, Any]] = Field(default_factory=list)
    infra_errors: list[dict[str, Any]] = Field(default_factory=list)
    noise_events: list[NoiseEvent] = Field(default_factory=list)
    perturbations: list[dict[str, Any]] = Field(default_factory=list,
                                                description="Mistakes a policy made on purpose (gold noise).")
    termination: Termination
    changes: dict[str, Any] = Field(default_factory=dict, description="ep.changes().to_dict() at the end.")
    state_hash: str = ""
    started_at: str = Field(default="", description="UTC start time, ISO 8601.")
    wall_s: float = 0.0

    @property
    def num_turns(self) -> int:
        """Assistant turns taken."""
        return len(self.turns)

    @property
    def final_answer(self) -> str | None:
        """The content of the last assistant message without tool calls (what the user was told last)."""
        for msg in reversed(self.messages):
            if msg.get("role") == "assistant" and not msg.get("tool_calls"):
                return msg.get("content") or ""
        return None

    @property
    def failed_by_infra(self) -> bool:
        """True when the episode cannot be scored: it ended on an infra error."""
        return self.termination == "infra_error"

    def to_json(self) -> str:
        """One JSONL line (no newline inside)."""
        return self.model_dump_json()

    @classmethod
    def from_json(cls, line: str | bytes) -> Trajectory:
        """Read a line written by :meth:`to_json` (raises ``pydantic.ValidationError`` when it is not one)."""
        return cls.model_validate_json(line)
