"""``ScriptedPolicy``: a fixed script of turns, or a function of the conversation, for tests and benchmarks.

It is built in Python (a script is not something a ``--policy`` spec can hold), so it is not registered.
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from ...records.messages import AssistantTurn, Message
from ...world.episode import ToolCall

if TYPE_CHECKING:
    from ...tasks.model import Task

#: What a script may hold per turn: a full turn, plain text (an answer), one or several tool calls, a
#: ``{"name", "arguments"}`` dict, or an exception to raise (``InfraError`` to test retries).
ScriptItem = AssistantTurn | str | ToolCall | list[ToolCall] | dict[str, Any] | BaseException
ScriptFn = Callable[[list[Message], "Task | None"], ScriptItem | Awaitable[ScriptItem]]


def as_turn(item: ScriptItem) -> AssistantTurn:
    """Normalise a script item into a fresh ``AssistantTurn`` (raises the item when it is an exception)."""
    if isinstance(item, BaseException):
        raise item
    if isinstance(item, AssistantTurn):
        return copy.deepcopy(item)
    if isinstance(item, str):
        return AssistantTurn(content=item)
    if isinstance(item, dict):
        item = ToolCall(item["name"], item.get("arguments", {}), item.get("id"))
    if isinstance(item, ToolCall):
        item = [item]
    if isinstance(item, list):
        calls = [ToolCall(c.name, copy.deepcopy(c.arguments), c.id) for c in item]
        return AssistantTurn(content="", tool_calls=calls, finish_reason="tool_calls")
    raise TypeError(f"a script item must be an AssistantTurn, str, ToolCall, list of ToolCall, dict or exception; "
                    f"got {type(item).__name__}")  # fmt: skip


class ScriptedPolicy:
    """A policy that plays a fixed script (a list of turns) or a function of the conversation.

    For tests and benchmarks: every session replays the script from its start; after the last item the
    session answers ``final`` (a plain answer, so the episode can end).
    """

    def __init__(self, script: Sequence[ScriptItem] | ScriptFn, *, name: str = "scripted",
                 final: str = "That is all.") -> None:  # fmt: skip
        self.script = script
        self.name = name
        self.final = final

    def start(self, *, tools: list[dict[str, Any]], task: Task | None = None, seed: int = 0) -> ScriptedSession:
        return ScriptedSession(self, task)


class ScriptedSession:
    buffer = None

    def __init__(self, policy: ScriptedPolicy, task: Task | None) -> None:
        self._policy = policy
        self._task = task
        self._i = 0

    async def respond(self, messages: list[Message]) -> AssistantTurn:
        script = self._policy.script
        if callable(script):
            item = script(messages, self._task)
            if inspect.isawaitable(item):
                item = await item
            return as_turn(item)  # type: ignore[arg-type]
        if self._i >= len(script):
            return AssistantTurn(content=self._policy.final)
        item = script[self._i]
        self._i += 1
        return as_turn(item)

    async def aclose(self) -> None:
        return None
