"""How a tool call reaches the world: ``Episode.call`` at the core, wrapped like Gymnasium wrappers wrap an env.

A ``CallHandler`` takes one ``ToolCall`` (and its index among the episode's calls) and returns a ``CallOutcome``:
the observation text the model will see plus what the trajectory records. The core handler runs the call (or,
for a call the parser could not read, answers with the parser's diagnosis without running it); wrappers change
what happens around it:

- ``InjectNoise``: transient failures (the call never reaches the world), added latency and truncated results,
  drawn per (noise seed, task, trial, call index), so a rerun injects the same faults at the same calls;
- ``LimitObservation``: cuts an observation longer than the limit, saying so, so a 1 MB echo of a bad
  argument cannot flood the model's context.

``ToolEnv`` builds the chain from its ``Limits`` and ``NoiseConfig``; a consumer that needs another behaviour
(a slower service, a flaky tool) writes a wrapper with the same ``__call__`` and passes the chain in.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ..tokens.dialects import malformed_result
from ..world.episode import Episode, ToolCall
from .noise import UNAVAILABLE_TYPE, NoiseInjector, unavailable_observation

ERROR_TEXT_LIMIT = 2_000  # error messages kept in step and error records (the observation keeps more)


@dataclass(slots=True)
class CallOutcome:
    """One call's result as the environment records it.

    ``content`` is the observation text for the model; ``output`` the parsed result (JSON-plain) when the call
    succeeded; ``error`` the tool error as plain data; ``internal`` is True when the error is the tool's own
    crash (ours, recorded as an infra error, not the agent's); ``noise`` lists injected faults with details.
    """

    content: str
    ok: bool
    mutates: bool
    output: Any = None
    error: dict[str, Any] | None = None
    internal: bool = False
    noise: Sequence[tuple[str, dict[str, Any]]] = ()
    clipped: bool = False


class CallHandler(Protocol):
    """Runs one tool call; ``index`` is its 0-based position among the episode's calls (noise is keyed by it)."""

    async def __call__(self, call: ToolCall, index: int) -> CallOutcome: ...


class RunCall:
    """The core handler: ``Episode.call`` (which never raises), or the parser's diagnosis for an unreadable call."""

    def __init__(self, episode: Episode) -> None:
        self.episode = episode

    async def __call__(self, call: ToolCall, index: int) -> CallOutcome:
        result = (self.episode.call(call.name, call.arguments, call_id=call.id) if call.problem is None
                  else malformed_result(call))  # fmt: skip
        content = result.content  # serialised on each access: read it once
        if result.error is not None:
            return CallOutcome(content=content, ok=False, mutates=result.mutates,
                               error=clip_error(result.error.to_dict()), internal=result.error.is_infra)  # fmt: skip
        # The parsed observation, not the tool's object: JSON-plain (tuples become lists), so the step equals
        # itself after a to_json/from_json round trip, and later mutation cannot reach it.
        output = result.output if isinstance(result.output, str) else json.loads(content)
        return CallOutcome(content=content, ok=True, mutates=result.mutates, output=output)


class InjectNoise:
    """Transient failures, latency and truncation around ``inner``; a failed call never reaches the world."""

    def __init__(self, inner: CallHandler, injector: NoiseInjector) -> None:
        self.inner, self.injector = inner, injector

    async def __call__(self, call: ToolCall, index: int) -> CallOutcome:
        if call.problem is not None:  # an unreadable call is not run: no tool fault may hide its diagnosis
            return await self.inner(call, index)
        noise = self.injector.draw(index)
        events: list[tuple[str, dict[str, Any]]] = []
        if noise.latency_s > 0:
            await asyncio.sleep(noise.latency_s)
            events.append(("latency", {"ms": round(noise.latency_s * 1000, 3)}))
        if noise.fail:
            events.append(("tool_failure", {}))
            return CallOutcome(content=unavailable_observation(call.name), ok=False, mutates=False, noise=events,
                               error={"type": UNAVAILABLE_TYPE,
                                      "message": f"{call.name} is temporarily unavailable (injected)"})  # fmt: skip
        out = await self.inner(call, index)
        if noise.truncate and out.ok:
            cut = self.injector.truncate(out.content)
            if cut != out.content:
                events.append(("truncate", {"chars": len(out.content), "kept": len(cut)}))
                out.content = cut
        out.noise = [*events, *out.noise]
        return out


class LimitObservation:
    """Cuts observations longer than ``max_chars``, saying how much was cut."""

    def __init__(self, inner: CallHandler, max_chars: int) -> None:
        self.inner, self.max_chars = inner, max_chars

    async def __call__(self, call: ToolCall, index: int) -> CallOutcome:
        out = await self.inner(call, index)
        if len(out.content) > self.max_chars:
            keep = self.max_chars
            out.content = f"{out.content[:keep]}... [observation cut: {len(out.content) - keep} more characters]"
            out.clipped = True
        return out


def clip_error(error: dict[str, Any]) -> dict[str, Any]:
    """A tool error as plain JSON data (its details hold tuples), with a bounded message."""
    message = error.get("message")
    if isinstance(message, str) and len(message) > ERROR_TEXT_LIMIT:
        error = {**error, "message": message[:ERROR_TEXT_LIMIT] + "..."}
    return json.loads(json.dumps(error, ensure_ascii=False, default=str))
