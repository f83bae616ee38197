"""The ``Policy`` protocol: what the episode loop needs from any agent, from gold replay to a vLLM server.

A policy is a factory of per-episode sessions. The loop owns the conversation as OpenAI-style message dicts
(``{"role": "system"|"user"|"assistant"|"tool", "content": ..., "tool_calls": [...], "tool_call_id": ...}``)
and hands the whole list to ``AgentSession.respond`` each turn. Message-level backends (gold, scripted,
OpenAI-compatible servers) send messages; token-level backends (hf, gguf, vllm) keep a ``TokenBuffer`` in the
session and append only the messages they have not seen yet as token deltas, so sampled tokens are never
re-encoded.

Errors split in two, as design.md decides: a malformed tool call is the agent's mistake and travels back to
the model as an error observation (it is a ``ToolCall`` whose arguments are the raw, unparsed string, which
``Episode.call`` turns into ``invalid_arguments``); a failed server, timeout or crash is an ``InfraError``,
retried by the loop and recorded, never scored as reward 0.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from ..world.episode import ToolCall

if TYPE_CHECKING:
    from ..tasks.model import Task

Message = dict[str, Any]
FinishReason = Literal["stop", "tool_calls", "length"]


class InfraError(Exception):
    """The policy could not produce a turn for reasons that are not the agent's fault (server down, timeout).

    ``retryable`` tells the loop whether trying again can help (a 503 can; a missing model file cannot).
    """

    def __init__(self, message: str, *, retryable: bool = True, kind: str = "server_error") -> None:
        super().__init__(message)
        self.retryable = retryable
        self.kind = kind

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "message": str(self), "retryable": self.retryable}


@dataclass(slots=True)
class AssistantTurn:
    """One sampled assistant turn.

    ``content`` is what the user sees; ``tool_calls`` are routed to the world (their ``arguments`` may be a
    raw string when the model's JSON did not parse). Token backends also fill ``text`` (the decoded sampled
    text including any tool-call markup), ``token_ids`` and ``logprobs`` exactly as sampled.
    """

    content: str
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish_reason: FinishReason = "stop"
    text: str | None = None
    token_ids: list[int] | None = None
    logprobs: list[float] | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    #: Reasoning the model produced apart from its answer (a ``<think>`` block, or a server's
    #: ``reasoning_content``). Kept in the message so chat templates that render reasoning (Qwen3, DeepSeek)
    #: reproduce what the model actually saw, and so SFT exports keep it.
    reasoning: str | None = None
    #: Free-form facts about how the turn was made (e.g. the gold policy's injected perturbations); the loop
    #: copies them into the trajectory so scorers can be tested against known mistakes.
    meta: dict[str, Any] = field(default_factory=dict)

    def to_message(self) -> Message:
        """The OpenAI-style assistant message the loop appends to the conversation."""
        msg: Message = {"role": "assistant", "content": self.content}
        if self.reasoning:
            msg["reasoning_content"] = self.reasoning
        if self.tool_calls:
            msg["tool_calls"] = [
                {
                    "id": call.id or f"call_{i}",
                    "type": "function",
                    "function": {
                        "name": call.name,
                        "arguments": call.arguments
                        if isinstance(call.arguments, str)
                        else json.dumps(call.arguments, ensure_ascii=False),
                    },
                }
                for i, call in enumerate(self.tool_calls)
            ]
        return msg


@runtime_checkable
class AgentSession(Protocol):
    """One episode's view of a policy. Token-level sessions expose their ``TokenBuffer``; others give None."""

    @property
    def buffer(self) -> Any | None: ...

    async def respond(self, messages: list[Message]) -> AssistantTurn:
        """Produce the next assistant turn given the whole conversation so far (raise ``InfraError``)."""
        ...

    async def aclose(self) -> None: ...


@runtime_checkable
class Policy(Protocol):
    """An agent: ``start`` opens a session for one episode with the world's tools (OpenAI format)."""

    name: str

    def start(self, *, tools: list[dict[str, Any]], task: Task | None = None, seed: int = 0) -> AgentSession: ...
