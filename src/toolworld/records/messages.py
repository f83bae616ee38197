"""The messages an episode is made of: OpenAI-style message dicts and the ``AssistantTurn`` a policy returns.

Shared records: the environment, the policies, the scorers, the store and the trainers all read them, so they
live apart from any of those.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from ..world.episode import ToolCall

Message = dict[str, Any]
FinishReason = Literal["stop", "tool_calls", "length"]


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
