"""Message-level policies (gold replay, scripted, OpenAI-compatible servers) and the ``--policy`` spec factory.

Message-level policies exchange OpenAI-style messages; they have no token buffer. Token-level backends
(``hf``, ``gguf``, ``vllm``, ``smollm2``) live in ``rollout.engines`` and are reached through
:func:`make_policy` with the same spec syntax, imported only when asked for.

``GoldPolicy`` is the upper bound every scorer must recognise as perfect, and with ``drop``, ``repeat`` and
``corrupt`` noise it makes known mistakes, recorded per turn, so scorers can be tested against them.
``NoopPolicy`` and ``GibberishPolicy`` are the lower bounds: probes that must fail every task, so that a
reward an optimizer could earn by doing nothing, or by babbling, shows up as a failing test.
"""

from __future__ import annotations

import asyncio
import copy
import inspect
import json
import os
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..records.messages import AssistantTurn, Message
from ..world.episode import ToolCall
from .policy import InfraError, Policy

if TYPE_CHECKING:
    from ..tasks.model import Task
    from ..world.world import World

# -- gold -----------------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Planned:
    """One call the gold session will make, with the perturbations that led to it (or to calls dropped before it)."""

    call: ToolCall
    perturbations: list[dict[str, Any]] = field(default_factory=list)


def corrupt_value(value: Any) -> Any:
    """A plausible-looking wrong value of the same shape (the kind of slip a model makes)."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        return value + 1
    if isinstance(value, str):
        for i in range(len(value) - 1, -1, -1):  # bump the last digit: '#W1234567' -> '#W1234568'
            if value[i].isdigit():
                return f"{value[:i]}{(int(value[i]) + 1) % 10}{value[i + 1:]}"
        return value[:-1] + value[-1].swapcase() + "x" if value else "x"
    if isinstance(value, list):
        return [corrupt_value(value[0]), *value[1:]] if value else ["x"]
    if isinstance(value, dict):
        if not value:
            return {"x": "x"}
        key = sorted(value)[0]
        return {**value, key: corrupt_value(value[key])}
    return "x"


class GoldPolicy:
    """Replays a task's gold actions, one call per turn, then states the expected outputs (or the refusal).

    It works the way the world's policy asks: before each write that needs the customer's consent (a write
    tool whose ``confirm`` is true) it says what it is about to do, with the call's argument values, asks
    whether to proceed, and makes the call after the user's answer. ``world`` says which tools those are;
    by default the registered world named by the task.

    With noise it perturbs the plan per (task, trial): each gold step is dropped with probability ``drop``,
    one of its arguments corrupted with probability ``corrupt``, and repeated with probability ``repeat``.
    Each perturbation is reported in the ``meta["perturbations"]`` of the turn that carries it (a dropped
    step: the next turn made), and the loop collects them into ``Trajectory.perturbations``.
    """

    def __init__(self, *, drop: float = 0.0, repeat: float = 0.0, corrupt: float = 0.0, seed: int = 0,
                 world: World | None = None) -> None:  # fmt: skip
        self.world = world
        self._consent: dict[str, frozenset[str]] = {}  # world name -> its tools that need consent
        for key, p in (("drop", drop), ("repeat", repeat), ("corrupt", corrupt)):
            if not 0.0 <= p <= 1.0:
                raise ValueError(f"gold {key}= must be a probability between 0 and 1, got {p}")
        self.drop, self.repeat, self.corrupt, self.seed = drop, repeat, corrupt, seed
        opts = [f"{k}={v:g}" for k, v in (("drop", drop), ("repeat", repeat), ("corrupt", corrupt)) if v]
        if opts and seed:
            opts.append(f"seed={seed}")
        self.name = "gold" + (":" + ",".join(opts) if opts else "")

    def start(self, *, tools: list[dict[str, Any]], task: Task | None = None, seed: int = 0) -> GoldSession:
        if task is None:
            raise ValueError("the gold policy replays a task's gold actions: start it with task=")
        consent = self._consent.get(task.world)
        if consent is None:
            consent = self._consent[task.world] = _consent_tools(self.world, task.world)
        return GoldSession(task, self.plan(task, seed), consent)

    def plan(self, task: Task, seed: int = 0) -> tuple[list[_Planned], list[dict[str, Any]]]:
        """The calls to make and the perturbations left for the final turn (drops after the last call)."""
        rng = random.Random(f"gold:{self.seed}:{task.id}:{seed}")
        planned: list[_Planned] = []
        pending: list[dict[str, Any]] = []
        for i, action in enumerate(task.gold_actions):
            # Draw all three every step: changing one probability must not move the others' draws.
            drop_u, corrupt_u, repeat_u = rng.random(), rng.random(), rng.random()
            args = copy.deepcopy(action.arguments)
            if drop_u < self.drop:
                pending.append({"kind": "drop", "step": i, "name": action.name, "arguments": args})
                continue
            notes = pending
            pending = []
            if corrupt_u < self.corrupt:
                key = rng.choice(sorted(args)) if args else None
                if key is None:
                    args = {"unexpected": "x"}
                    notes.append({"kind": "corrupt", "step": i, "name": action.name, "argument": None})
                else:
                    before = args[key]
                    args[key] = corrupt_value(before)
                    notes.append({"kind": "corrupt", "step": i, "name": action.name, "argument": key,
                                  "original": before, "corrupted": args[key]})  # fmt: skip
            planned.append(_Planned(ToolCall(action.name, args), notes))
            if repeat_u < self.repeat:
                planned.append(_Planned(ToolCall(action.name, copy.deepcopy(args)),
                                        [{"kind": "repeat", "step": i, "name": action.name}]))  # fmt: skip
        return planned, pending


def _consent_tools(world: World | None, name: str) -> frozenset[str]:
    """Tools whose calls need the customer's yes first: writes whose ``confirm`` is not false."""
    if world is None:
        from ..world import get_world

        try:
            world = get_world(name)
        except Exception:  # a world built in a script and not registered: no tool is known to need consent
            return frozenset()
    return frozenset(n for n, t in world.tools.items() if t.mutates and getattr(t, "confirm", True))


def confirmation_request(call: ToolCall) -> str:
    """What a careful agent says before a write: the call in words, with its argument values, and a question."""
    args = call.arguments if isinstance(call.arguments, dict) else {}
    details = "; ".join(f"{k.replace('_', ' ')}: {', '.join(map(str, v)) if isinstance(v, list) else v}"
                        for k, v in args.items() if v not in (None, ""))  # fmt: skip
    return f"I am about to {call.name.replace('_', ' ')}" + (f" ({details})" if details else "") + \
        ". Shall I proceed?"


def gold_answer(task: Task) -> str:
    """The final message a perfect agent gives: the refusal with its rule and reason, every expected output."""
    parts: list[str] = []
    if task.refusal is not None:
        parts.append(f"I'm sorry, but I can't do that (policy {task.refusal.rule}): {task.refusal.reason}")
    if task.expected_outputs:
        facts = "; ".join(f"{o.label.replace('_', ' ')}: {o.value}" for o in task.expected_outputs)
        parts.append(f"Here is what you asked for: {facts}.")
    if not parts:
        parts.append("Your request has been completed." if task.kind == "action" else "That is all I found.")
    return " ".join(parts)


class GoldSession:
    """One episode of gold replay: the next planned call each turn (a write needing consent is asked for in a
    text turn of its own first), then the answer."""

    buffer = None

    def __init__(self, task: Task, plan: tuple[list[_Planned], list[dict[str, Any]]],
                 consent: frozenset[str] = frozenset()) -> None:  # fmt: skip
        self.task = task
        self._calls, self._final_notes = plan
        self._consent = consent
        self._next = 0
        self._asked = -1  # index of the planned call whose confirmation was asked for last
        self._answered = False

    async def respond(self, messages: list[Message]) -> AssistantTurn:
        if self._next < len(self._calls):
            planned = self._calls[self._next]
            if planned.call.name in self._consent and self._asked != self._next:
                self._asked = self._next
                return AssistantTurn(content=confirmation_request(planned.call))
            self._next += 1
            meta = {"perturbations": planned.perturbations} if planned.perturbations else {}
            call = ToolCall(planned.call.name, copy.deepcopy(planned.call.arguments))
            return AssistantTurn(content="", tool_calls=[call], finish_reason="tool_calls", meta=meta)
        if self._answered:  # the user kept talking after the answer: nothing to add, no further actions
            return AssistantTurn(content="I have nothing to add to my previous answer.")
        self._answered = True
        meta = {"perturbations": self._final_notes} if self._final_notes else {}
        return AssistantTurn(content=gold_answer(self.task), meta=meta)

    async def aclose(self) -> None:
        return None


# -- probes ---------------------------------------------------------------------------------------------

NOOP_ANSWER = "Thanks for reaching out."


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


class GibberishPolicy:
    """The babbling probe: seeded random words of random letters, and random or malformed tool calls.

    Per episode it takes one to four turns; each is, at random, text (sometimes ending in a question mark, so
    the user answers and the babble goes on) or one or two tool calls: a real tool with random values of the
    right JSON types, a real tool with no arguments, an unknown tool, or arguments that are not JSON at all.
    The last turn is text without a question. It draws from ``seed``, the task and the episode seed, so a run
    is reproducible. Like ``noop`` it must fail every task.
    """

    def __init__(self, *, seed: int = 0) -> None:
        self.seed = seed
        self.name = "gibberish" + (f":seed={seed}" if seed else "")

    def start(self, *, tools: list[dict[str, Any]], task: Task | None = None, seed: int = 0) -> GibberishSession:
        rng = random.Random(f"gibberish:{self.seed}:{task.id if task is not None else ''}:{seed}")
        return GibberishSession(rng, tools)


class GibberishSession:
    buffer = None

    def __init__(self, rng: random.Random, tools: list[dict[str, Any]]) -> None:
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
            return round(self._rng.uniform(-5, 10_000), 2)
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


# -- scripted --------------------------------------------------------------------------------------------

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


# -- OpenAI-compatible servers ------------------------------------------------------------------------------


def parse_arguments(raw: Any) -> dict[str, Any] | str:
    """Tool-call arguments as a dict when they are a JSON object; otherwise the raw text, untouched.

    The raw text goes to ``Episode.call``, which answers with an ``invalid_arguments`` observation: the
    model's malformed JSON is its own mistake, to be shown to it, not repaired behind its back.
    """
    if isinstance(raw, dict):
        return raw
    if raw is None:
        return {}
    text = raw if isinstance(raw, str) else str(raw)
    if not text.strip():
        return {}
    try:
        value = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return text
    return value if isinstance(value, dict) else text


_FINISH = {"tool_calls": "tool_calls", "function_call": "tool_calls", "length": "length"}


class OpenAIPolicy:
    """Any OpenAI-compatible chat-completions endpoint with tools (OpenAI, vLLM, llama.cpp server, SGLang...).

    Server errors (5xx, 429), connection failures, timeouts and malformed 200 responses (a body that is not JSON
    or not a chat completion: kind ``bad_response``) are retried with exponential backoff; when the retries are
    spent the turn raises a retryable ``InfraError`` (the loop may try again later). A 4xx
    means our request is wrong (bad model name, bad key, context too long): retrying cannot help, so it is
    a non-retryable ``InfraError`` at once.

    Args:
        model: model name as the server knows it.
        base_url: endpoint (``.../v1``); default ``$OPENAI_BASE_URL``, else the client's default.
        api_key: default ``$OPENAI_API_KEY``, else ``"EMPTY"`` (what local servers accept).
        max_retries: retries per turn after the first attempt.
        backoff_s: first retry delay; doubles each retry (with jitter), capped at 30 s.
        timeout_s: per-request timeout.
        http_client: an ``httpx.AsyncClient`` to use (proxies, tests with ``httpx.MockTransport``).
        sampling: extra request fields, e.g. ``temperature=0.7``, ``max_tokens=512``, ``top_p=0.9``.
    """

    def __init__(self, model: str, base_url: str | None = None, *, api_key: str | None = None,
                 max_retries: int = 3, backoff_s: float = 0.5, timeout_s: float = 120.0,
                 http_client: Any = None, **sampling: Any) -> None:  # fmt: skip
        if not model:
            raise ValueError("openai policy needs a model name: openai:MODEL[@URL]")
        self.model = model
        self.base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
        self.api_key = api_key or os.environ.get("OPENAI_API_KEY") or "EMPTY"
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.timeout_s = timeout_s
        self.sampling = sampling
        self.name = f"openai:{model}" + (f"@{self.base_url}" if self.base_url else "")
        self._http_client = http_client
        self._client: Any = None
        self._client_loop: Any = None

    def client(self) -> Any:
        """The ``AsyncOpenAI`` client, shared by the sessions of one event loop (its own retries are off: ours
        apply). A new loop gets a new client, since a connection pool cannot outlive the loop it was made in."""
        loop = asyncio.get_running_loop()
        if self._client is None or (self._client_loop is not loop and self._http_client is None):
            self._client_loop = loop
            try:
                from openai import AsyncOpenAI
            except ImportError as exc:  # pragma: no cover - depends on the environment
                raise InfraError("the openai policy needs the openai package: pip install 'toolworld[models]'",
                                 retryable=False, kind="missing_dependency") from exc  # fmt: skip
            self._client = AsyncOpenAI(api_key=self.api_key, base_url=self.base_url, max_retries=0,
                                       timeout=self.timeout_s, http_client=self._http_client)  # fmt: skip
        return self._client

    def start(self, *, tools: list[dict[str, Any]], task: Task | None = None, seed: int = 0) -> OpenAISession:
        return OpenAISession(self, tools, seed)


class OpenAISession:
    buffer = None

    def __init__(self, policy: OpenAIPolicy, tools: list[dict[str, Any]], seed: int) -> None:
        self._policy = policy
        self._tools = tools
        self._seed = seed

    async def respond(self, messages: list[Message]) -> AssistantTurn:
        import openai

        p = self._policy
        client = p.client()
        request: dict[str, Any] = {"model": p.model, "messages": messages, **p.sampling}
        if self._tools:
            request["tools"] = self._tools
        last: InfraError | None = None
        for attempt in range(p.max_retries + 1):
            if attempt:
                await asyncio.sleep(_retry_delay(p.backoff_s, attempt, last))
            started = time.perf_counter()
            try:
                response = await client.chat.completions.create(**request)
            except openai.APIStatusError as exc:
                status = exc.status_code
                if status >= 500 or status in (408, 409, 429):
                    last = InfraError(f"server answered {status}: {_short(exc)}", kind=f"http_{status}")
                    last.retry_after = _retry_after(exc)  # type: ignore[attr-defined]
                    continue
                raise _client_error(status, exc) from exc
            except openai.APITimeoutError as exc:
                last = InfraError(f"request timed out after {p.timeout_s:g} s ({_short(exc)})", kind="timeout")
                continue
            except openai.APIConnectionError as exc:
                last = InfraError(f"cannot reach {p.base_url or 'the OpenAI API'}: {_short(exc)}", kind="connection")
                continue
            except openai.APIResponseValidationError as exc:
                last = InfraError(f"the server sent a malformed response: {_short(exc)}", kind="bad_response")
                continue
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:  # a 200 whose body is not JSON: a glitch, retry
                last = InfraError(f"the server answered with a body that is not JSON: {_short(exc)}",
                                  kind="bad_response")  # fmt: skip
                continue
            try:
                return _to_turn(response, time.perf_counter() - started)
            except _BadResponse as exc:
                last = InfraError(str(exc), kind="bad_response")
        assert last is not None
        raise InfraError(f"{last} (gave up after {p.max_retries + 1} attempts)", retryable=True, kind=last.kind)

    async def aclose(self) -> None:
        return None


class _BadResponse(Exception):
    """A 200 that is not a chat completion (a proxy's error page, a truncated body, a wrong shape): retried,
    since such glitches pass, and an infra error of kind ``bad_response`` once the retries are spent."""


def _to_turn(response: Any, latency_s: float) -> AssistantTurn:
    try:
        return _turn_of(response, latency_s)
    except _BadResponse:
        raise
    except (AttributeError, TypeError, ValueError, KeyError, IndexError) as exc:  # the SDK builds models unchecked
        raise _BadResponse(f"the server returned a malformed chat completion ({type(exc).__name__}: "
                           f"{_short(exc, 200)})") from exc  # fmt: skip


def _turn_of(response: Any, latency_s: float) -> AssistantTurn:
    if isinstance(response, str | bytes):  # the client hands back the raw body when it is not JSON
        body = response if isinstance(response, str) else response.decode("utf-8", "replace")
        raise _BadResponse(f"the server answered with a body that is not a chat completion: {_short(body, 200)!r}")
    choices = getattr(response, "choices", None)
    if not choices:
        raise _BadResponse("the server returned no choices")
    choice = choices[0]
    message = choice.message
    if message is None:
        raise _BadResponse("the server returned a choice without a message")
    if message.content is not None and not isinstance(message.content, str):
        raise _BadResponse(f"the server returned message content of type {type(message.content).__name__}, not text")
    calls = []
    for i, tc in enumerate(message.tool_calls or []):
        fn = getattr(tc, "function", None)
        if fn is None:  # a custom (non-function) tool call: not something a world can run
            continue
        calls.append(ToolCall(fn.name or "", parse_arguments(fn.arguments), tc.id or f"call_{i}"))  # type: ignore[arg-type]
    finish = _FINISH.get(choice.finish_reason or "", "tool_calls" if calls else "stop")
    usage = getattr(response, "usage", None)
    meta: dict[str, Any] = {}
    reasoning = getattr(message, "reasoning_content", None) or getattr(message, "reasoning", None)
    if isinstance(reasoning, str) and reasoning:
        meta["reasoning"] = reasoning
    return AssistantTurn(
        content=message.content or "",
        tool_calls=calls,
        finish_reason=finish,  # type: ignore[arg-type]
        prompt_tokens=getattr(usage, "prompt_tokens", 0) or 0,
        completion_tokens=getattr(usage, "completion_tokens", 0) or 0,
        latency_s=latency_s,
        reasoning=meta.get("reasoning"),
        meta=meta,
    )


def _short(exc: BaseException, limit: int = 300) -> str:
    text = str(exc).replace("\n", " ")
    return text if len(text) <= limit else text[:limit] + "..."


def _client_error(status: int, exc: Exception) -> InfraError:
    """A 4xx: the request is wrong; say what to fix."""
    text = _short(exc)
    low = text.lower()
    too_long = ("context" in low and ("length" in low or "window" in low)) or "prompt is too long" in low
    if too_long:
        return InfraError(f"the conversation no longer fits the model's context ({text})", retryable=False,
                          kind="context_length")  # fmt: skip
    hints = {401: "check OPENAI_API_KEY", 403: "check the key's permissions", 404: "check the model name and the URL"}
    hint = hints.get(status, "the request was rejected; check the model name, URL and sampling options")
    return InfraError(f"server answered {status}: {text} ({hint})", retryable=False, kind="bad_request")


def _retry_after(exc: Any) -> float | None:
    try:
        value = exc.response.headers.get("retry-after")
        return float(value) if value is not None else None
    except (AttributeError, TypeError, ValueError):
        return None


def _retry_delay(backoff_s: float, attempt: int, last: InfraError | None) -> float:
    hinted = getattr(last, "retry_after", None)
    if hinted is not None and 0 <= hinted <= 60:
        return hinted
    # Jitter spreads the retries of many concurrent episodes so they do not hit a recovering server together.
    return min(30.0, backoff_s * 2 ** (attempt - 1)) * random.uniform(0.5, 1.0)


# -- the --policy SPEC --------------------------------------------------------------------------------------

TOKEN_KINDS = ("hf", "gguf", "vllm", "smollm2")
SPEC_FORMS = (
    "gold                          replay the task's gold actions",
    "gold:drop=P,repeat=P,corrupt=P,seed=N   gold with injected mistakes",
    "noop                          probe: never calls a tool, says nothing useful (must fail every task)",
    "gibberish[:seed=N]            probe: random words and random or malformed tool calls (must fail every task)",
    "openai:MODEL[@URL][,k=v...]   OpenAI-compatible server (URL default $OPENAI_BASE_URL; key $OPENAI_API_KEY)",
    "vllm:MODEL@URL[,k=v...]       vLLM server, token-exact",
    "hf:PATH[,k=v...]              transformers model directory, token-exact",
    "gguf:PATH[,k=v...]            GGUF file through xllamacpp, token-exact",
    "smollm2[,k=v...]              the embedded SmolLM2-135M-Instruct",
)


def _spec_error(spec: str, why: str) -> ValueError:
    forms = "\n  ".join(SPEC_FORMS)
    return ValueError(f"bad policy spec {spec!r}: {why}. Valid forms:\n  {forms}\n"
                      "Options after a comma, e.g. hf:./model,temperature=0.7,max_tokens=256")  # fmt: skip


def _parse_value(text: str) -> Any:
    """Option values: JSON scalars (numbers, true/false/null) when they parse, else the text itself."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return text
    return value if isinstance(value, int | float | bool) or value is None else text


def _parse_options(spec: str, parts: Sequence[str]) -> dict[str, Any]:
    options: dict[str, Any] = {}
    for part in parts:
        key, sep, value = part.partition("=")
        key = key.strip()
        if not sep or not key:
            raise _spec_error(spec, f"option {part!r} is not key=value")
        if key in options:
            raise _spec_error(spec, f"option {key!r} given twice")
        options[key] = _parse_value(value.strip())
    return options


OPENAI_OPTIONS = ("api_key", "max_retries", "backoff_s", "timeout_s", "temperature", "top_p", "max_tokens",
                  "max_completion_tokens", "seed", "presence_penalty", "frequency_penalty", "stop", "tool_choice",
                  "parallel_tool_calls")  # fmt: skip


def _gold(spec: str, options: dict[str, Any]) -> Policy:
    unknown = sorted(set(options) - {"drop", "repeat", "corrupt", "seed"})
    if unknown:
        raise _spec_error(spec, f"unknown gold option(s) {unknown}; gold takes drop, repeat, corrupt, seed")
    try:
        return GoldPolicy(**{k: (int(v) if k == "seed" else float(v)) for k, v in options.items()})
    except (TypeError, ValueError) as exc:
        raise _spec_error(spec, str(exc)) from None


def _noop(spec: str, options: dict[str, Any]) -> Policy:
    if options:
        raise _spec_error(spec, f"noop takes no options, got {sorted(options)}")
    return NoopPolicy()


def _gibberish(spec: str, options: dict[str, Any]) -> Policy:
    unknown = sorted(set(options) - {"seed"})
    if unknown:
        raise _spec_error(spec, f"unknown gibberish option(s) {unknown}; gibberish takes seed")
    seed = options.get("seed", 0)
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise _spec_error(spec, f"gibberish seed= must be an integer, got {seed!r}")
    return GibberishPolicy(seed=seed)


#: Policies that need no model, by spec kind: each factory takes the spec (for errors) and its options.
BUILTIN_POLICIES: dict[str, Callable[[str, dict[str, Any]], Policy]] = {
    "gold": _gold,
    "noop": _noop,
    "gibberish": _gibberish,
}


def make_policy(spec: str, **overrides: Any) -> Policy:
    """Build a policy from a ``--policy`` SPEC; ``overrides`` win over options written in the spec.

    Raises ``ValueError`` (listing the valid forms) for a spec that does not parse; token-level kinds are
    handed to ``toolworld.rollout.engines.make_token_policy(kind, target, **options)``.
    """
    text = spec.strip()
    if not text:
        raise _spec_error(spec, "it is empty")
    kind, _, rest = text.partition(":")
    kind = kind.strip().lower()
    if "," in kind:  # 'smollm2,temperature=0.7' (no target)
        kind, _, opts = kind.partition(",")
        rest = "," + opts + (":" + rest if rest else "")
    target, *option_parts = rest.split(",") if rest else [""]
    target = target.strip()
    option_parts = [p for p in option_parts if p.strip()]
    if kind in BUILTIN_POLICIES and target:  # no target: 'gold:drop=0.3' puts the first option there
        option_parts, target = [target, *option_parts], ""
    options = {**_parse_options(spec, option_parts), **overrides}

    if kind in BUILTIN_POLICIES:
        return BUILTIN_POLICIES[kind](spec, options)
    if kind == "openai":
        model, _, url = target.partition("@")
        if not model.strip():
            raise _spec_error(spec, "openai needs a model name")
        unknown = sorted(set(options) - set(OPENAI_OPTIONS) - set(overrides))
        if unknown:
            raise _spec_error(spec, f"unknown openai option(s) {unknown}; known: {', '.join(OPENAI_OPTIONS)}")
        return OpenAIPolicy(model.strip(), url.strip() or None, **options)
    if kind in TOKEN_KINDS:
        if kind == "vllm" and "@" not in target:
            raise _spec_error(spec, "vllm needs MODEL@URL")
        if kind in ("hf", "gguf") and not target:
            raise _spec_error(spec, f"{kind} needs a path: {kind}:PATH")
        from . import engines  # heavy backends load only when asked for

        return engines.make_token_policy(kind, target or None, **options)
    raise _spec_error(spec, f"unknown policy kind {kind!r}")
