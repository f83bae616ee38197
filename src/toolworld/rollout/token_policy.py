"""``TokenPolicy``: a ``Policy`` for any engine that takes token ids in and gives token ids out.

The engine contract is deliberately small so that hf, gguf (xllamacpp) and vLLM engines, and test fakes, all
fit it::

    class Engine(Protocol):
        tokenizer: Any   # optional: a transformers tokenizer, if TokenPolicy is not given one
        async def generate(self, prompt_ids: list[int], *, max_tokens: int, temperature: float,
                           stop_ids: list[int], seed: int | None) -> Generation: ...

``Generation.ids`` are the sampled ids exactly as sampled, *including* the stop token when one was sampled;
``logprobs`` holds the logprob of each of those ids under the sampling distribution (after temperature);
``finish_reason`` is ``"stop"`` (a stop id was sampled) or ``"length"`` (``max_tokens`` reached). Engines raise
``InfraError`` (``toolworld.rollout.policy``) when the server or model fails; ``TokenPolicy`` wraps anything
else an engine raises in a non-retryable ``InfraError`` so the episode loop never crashes on it.

Each session owns a ``TitoConversation``: every turn it appends only the new messages as a token delta, asks
the engine for a completion, appends the sampled ids unchanged, and parses tool calls from their text.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from ..core.errors import InfraError
from ..core.jsonutil import canonical_json
from ..core.seeds import derive_seed
from ..records.messages import AssistantTurn, FinishReason, Message
from ..tokens import ChatTemplate, TemplateError, TitoConversation, TokenBuffer, load_tokenizer
from ..tokens.dialects import FORMATS, parse_tool_calls
from ..tokens.template import TOOL_PROMPT_CHOICES

if TYPE_CHECKING:
    from ..tasks.model import Task


@dataclass(slots=True)
class Generation:
    """What an engine sampled for one prompt (see the module docstring for the exact contract)."""

    ids: list[int]
    logprobs: list[float]
    finish_reason: Literal["stop", "length"]
    #: How many of ``logprobs`` the engine could not take from the sampling step and recomputed afterwards over
    #: the same prefix (llama.cpp withholds some; see ``engines.gguf``).
    rescored: int = 0


@runtime_checkable
class Engine(Protocol):
    """Token ids in, sampled token ids and their logprobs out. Raise ``InfraError`` on server failures."""

    async def generate(
        self,
        prompt_ids: list[int],
        *,
        max_tokens: int,
        temperature: float,
        stop_ids: list[int],
        seed: int | None,
    ) -> Generation: ...


def turn_seed(seed: int, turn: int) -> int:
    """A per-turn sampling seed derived from the episode seed, so reruns of an episode sample the same way
    (a hash of both, so neighbouring episodes and turns get unrelated seeds)."""
    return derive_seed("turn", seed, turn)


class TokenSession:
    """One episode of a ``TokenPolicy``: a token buffer grown turn by turn."""

    def __init__(self, policy: TokenPolicy, template: ChatTemplate, tools: list[dict[str, Any]], seed: int) -> None:
        self._policy = policy
        self._tools = tools
        self._seed = seed
        self._turn = 0
        self.conversation = TitoConversation(template, template_kwargs=policy.template_kwargs)

    @property
    def buffer(self) -> TokenBuffer:
        return self.conversation.buffer

    async def respond(self, messages: list[Message]) -> AssistantTurn:
        """Append new messages as a token delta, sample, record the sampled ids, and parse tool calls."""
        policy = self._policy
        started = time.perf_counter()
        try:
            prompt = self.conversation.prompt_ids(messages)
        except TemplateError as exc:
            raise InfraError(f"chat template cannot render this conversation: {exc}", retryable=False,
                             kind="template_error") from exc  # fmt: skip
        try:
            gen = await policy.engine.generate(
                prompt,
                max_tokens=policy.max_tokens,
                temperature=policy.temperature,
                stop_ids=self.conversation.stop_ids,
                seed=turn_seed(self._seed, self._turn),
            )
        except InfraError:
            raise
        except Exception as exc:  # an engine bug must not take the episode loop down
            raise InfraError(f"engine {type(policy.engine).__name__} failed: {type(exc).__name__}: {exc}",
                             retryable=False, kind="engine_error") from exc  # fmt: skip
        ids, logprobs = list(gen.ids), list(gen.logprobs)
        if len(ids) != len(logprobs):
            raise InfraError(f"engine returned {len(ids)} ids but {len(logprobs)} logprobs", retryable=False,
                             kind="engine_error")  # fmt: skip
        text = self.conversation.record_sampled(ids, logprobs, len(messages))
        self._turn += 1
        parsed = parse_tool_calls(text, policy.tool_format, tools=self._tools)
        # A turn cut by the length limit stays "length" whatever the lenient parser made of it: a half-written
        # call (an order id cut mid-way) must never run, and the loop ends the episode as max_tokens.
        finish: FinishReason = "tool_calls" if parsed.calls and gen.finish_reason != "length" else gen.finish_reason
        rescored = int(getattr(gen, "rescored", 0) or 0)
        return AssistantTurn(
            content=parsed.content,
            tool_calls=parsed.calls,
            finish_reason=finish,
            reasoning=parsed.reasoning or None,
            text=text,
            token_ids=ids,
            logprobs=logprobs,
            prompt_tokens=len(prompt),
            completion_tokens=len(ids),
            latency_s=time.perf_counter() - started,
            meta={"rescored_logprobs": rescored} if rescored else {},
        )

    async def aclose(self) -> None:
        """Nothing to release: the engine belongs to the policy and outlives its sessions."""


class TokenPolicy:
    """A ``Policy`` for any ``Engine``: token-exact multi-turn rollouts with tool calls.

    ``tokenizer`` (an object or a tokenizer folder) defaults to ``engine.tokenizer``. ``tool_format`` picks
    the tool-call dialect to parse (``auto`` recognises all; see ``toolworld.tokens.dialects``).
    ``template_kwargs`` go to every template render (e.g. ``{"enable_thinking": False}`` for Qwen3).
    ``tool_prompt`` says how tools are stated (``auto``, ``json``, ``compact``: see ``ChatTemplate``); a model
    trained on toolworld data samples best with the choice it was trained with.
    The template probes run once per distinct tool list and are shared by all sessions.
    """

    def __init__(
        self,
        engine: Engine,
        tokenizer: Any = None,
        *,
        name: str,
        max_tokens: int = 1024,
        temperature: float = 1.0,
        tool_format: str = "auto",
        template_kwargs: Mapping[str, Any] | None = None,
        tool_prompt: str = "auto",
    ) -> None:
        if tool_format not in FORMATS:
            raise ValueError(f"tool_format must be one of {', '.join(FORMATS)}, got {tool_format!r}")
        if tool_prompt not in TOOL_PROMPT_CHOICES:
            raise ValueError(f"tool_prompt must be one of {', '.join(TOOL_PROMPT_CHOICES)}, got {tool_prompt!r}")
        if max_tokens < 1:
            raise ValueError(f"max_tokens must be at least 1, got {max_tokens}")
        if temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {temperature}")
        tok = tokenizer if tokenizer is not None else getattr(engine, "tokenizer", None)
        if tok is None:
            raise ValueError("TokenPolicy needs a tokenizer: pass tokenizer= or use an engine with a .tokenizer")
        self.engine = engine
        self.tokenizer = load_tokenizer(tok)
        self.name = name
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.tool_format = tool_format
        self.template_kwargs = dict(template_kwargs or {})
        self.tool_prompt = tool_prompt
        self._templates: dict[str, ChatTemplate] = {}

    def template(self, tools: Sequence[Mapping[str, Any]] | None) -> ChatTemplate:
        """The (cached) ``ChatTemplate`` for a tool list."""
        key = canonical_json(list(tools or []))
        hit = self._templates.get(key)
        if hit is None:
            hit = self._templates[key] = ChatTemplate(self.tokenizer, tools, template_kwargs=self.template_kwargs,
                                                           tool_prompt=self.tool_prompt)
        return hit

    def start(self, *, tools: list[dict[str, Any]], task: Task | None = None, seed: int = 0) -> TokenSession:
        """Open a session for one episode (``task`` is not needed: the conversation carries the instruction)."""
        try:
            template = self.template(tools)
        except TemplateError as exc:
            raise InfraError(f"chat template unusable for policy {self.name}: {exc}", retryable=False,
                             kind="template_error") from exc  # fmt: skip
        return TokenSession(self, template, list(tools), seed)
