"""Probes, the lower bounds of the reward scale: ``noop`` does nothing, ``gibberish`` babbles.

Both must fail every task, so that a reward an optimizer could earn by doing nothing, or by babbling, shows
up as a failing test.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...core.seeds import derive_seed
from ...records.messages import AssistantTurn, Message
from ...world.episode import ToolCall
from ...world.rng import Rng
from . import policy

if TYPE_CHECKING:
    from ...tasks.model import Task

NOOP_ANSWER = "Thanks for reaching out."


@policy("noop", usage="noop", help="probe: never calls a tool, says nothing useful (must fail every task)",
        options=())
class NoopPolicy:
    """The do-nothing probe: never calls a tool and answers with a polite line that asks nothing (so the
    scripted user ends the conversation). Every task kind must fail it: it is the floor of the reward scale."""

    name = "noop"

    def start(self, *, tools: list[dict[str, Any]], task: Task | None = None, seed: int = 0) -> NoopSession:
        return NoopSession()


class NoopSession:
    buffer = None

    async def respond(self, messages: list[Message]) -> AssistantTurn:
        return AssistantTurn(content=NOOP_ANSWER)

    async def aclose(self) -> None:
        return None


_LETTERS = "abcdefghijklmnopqrstuvwxyz"


@policy("gibberish", usage="gibberish[:seed=N]",
        help="probe: random words and random or malformed tool calls (must fail every task)", options=("seed",))
class GibberishPolicy:
    """The babbling probe: seeded random words of random letters, and random or malformed tool calls.

    Per episode it takes one to four turns; each is, at random, text (sometimes ending in a question mark, so
    the user answers and the babble goes on) or one or two tool calls: a real tool with random values of the
    right JSON types, a real tool with no arguments, an unknown tool, or arguments that are not JSON at all.
    The last turn is text without a question. It draws from ``seed``, the task and the episode seed, so a run
    is reproducible. Like ``noop`` it must fail every task.
    """

    def __init__(self, *, seed: int = 0) -> None:
        if not isinstance(seed, int) or isinstance(seed, bool):
            raise ValueError(f"gibberish seed= must be an integer, got {seed!r}")
        self.seed = seed
        self.name = "gibberish" + (f":seed={seed}" if seed else "")

    def start(self, *, tools: list[dict[str, Any]], task: Task | None = None, seed: int = 0) -> GibberishSession:
        rng = Rng(derive_seed("gibberish", self.seed, task.id if task is not None else "", seed))
        return GibberishSession(rng, tools)


class GibberishSession:
    buffer = None

    def __init__(self, rng: Rng, tools: list[dict[str, Any]]) -> None:
        self._rng = rng
        self._tools = [t.get("function", t) for t in tools if isinstance(t, dict)]
        self._turns_left = rng.randint(1, 4)

    def _word(self) -> str:
        return "".join(self._rng.choice(_LETTERS) for _ in range(self._rng.randint(2, 9)))

    def _text(self, question: bool) -> str:
        words = [self._word() for _ in range(self._rng.randint(3, 14))]
        return " ".join(words).capitalize() + ("?" if question else ".")

    def _value(self, schema: Any) -> Any:
        kind = schema.get("type") if isinstance(schema, dict) else None
        if kind == "integer":
            return self._rng.randint(-5, 10_000)
        if kind == "number":
            return round(-5 + 10_005 * self._rng.random(), 2)
        if kind == "boolean":
            return self._rng.random() < 0.5
        if kind == "array":
            return [self._value(schema.get("items", {})) for _ in range(self._rng.randint(0, 2))]
        if kind == "object":
            return {self._word(): self._word()}
        return self._word()  # strings, and anything the schema does not pin down

    def _call(self) -> ToolCall:
        rng = self._rng
        roll = rng.random()
        if not self._tools or roll < 0.15:
            return ToolCall(self._word() + "_" + self._word(), {})
        fn = rng.choice(self._tools)
        name = str(fn.get("name", ""))
        if roll < 0.3:
            return ToolCall(name, "{" + self._text(False))  # not JSON: the model's own malformed call
        if roll < 0.4:
            return ToolCall(name, {})
        props = (fn.get("parameters") or {}).get("properties") or {}
        return ToolCall(name, {key: self._value(schema) for key, schema in props.items()})

    async def respond(self, messages: list[Message]) -> AssistantTurn:
        self._turns_left -= 1
        if self._turns_left <= 0:
            return AssistantTurn(content=self._text(question=False))
        if self._rng.random() < 0.6:
            calls = [self._call() for _ in range(self._rng.randint(1, 2))]
            return AssistantTurn(content="", tool_calls=calls, finish_reason="tool_calls")
        return AssistantTurn(content=self._text(question=self._rng.random() < 0.5))

    async def aclose(self) -> None:
        return None
