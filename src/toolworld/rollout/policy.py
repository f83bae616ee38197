"""The ``Policy`` protocol: what the episode loop needs from any agent, from gold replay to a vLLM server.

A policy is a factory of per-episode sessions. The loop owns the conversation as OpenAI-style message dicts
(``{"role": "system"|"user"|"assistant"|"tool", "content": ..., "tool_calls": [...], "tool_call_id": ...}``)
and hands the whole list to ``AgentSession.respond`` each turn. Message-level backends (gold, scripted,
OpenAI-compatible servers) send messages; token-level backends (hf, gguf, vllm) keep a ``TokenBuffer`` in the
session and append only the messages they have not seen yet as token deltas, so sampled tokens are never
re-encoded.

Errors split in two: a malformed tool call is the agent's mistake and travels back to
the model as an error observation (it is a ``ToolCall`` whose arguments are the raw, unparsed string, which
``Episode.call`` turns into ``invalid_arguments``); a failed server, timeout or crash is an ``InfraError``,
retried by the loop and recorded, never scored as reward 0.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ..records.messages import AssistantTurn, Message

if TYPE_CHECKING:
    from ..tasks.model import Task



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
