"""``openai``: any OpenAI-compatible chat-completions endpoint with tools, at the message level (no token ids)."""

from __future__ import annotations

import asyncio
import json
import os
import time
from typing import TYPE_CHECKING, Any

from ...core.errors import InfraError
from ...core.retry import backoff_delay
from ...records.messages import AssistantTurn, Message
from ...world.episode import ToolCall
from . import policy

if TYPE_CHECKING:
    from ...tasks.model import Task

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
                hint = getattr(last, "retry_after", None)  # the server's Retry-After, when it sent one
                await asyncio.sleep(backoff_delay(p.backoff_s, attempt - 1, hint_s=hint))
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


class _BadResponse(InfraError):
    """A 200 that is not a chat completion (a proxy's error page, a truncated body, a wrong shape): retried,
    since such glitches pass, and an infra error of kind ``bad_response`` once the retries are spent."""

    default_kind = "bad_response"

    def __init__(self, message: str) -> None:
        super().__init__(message, retryable=True, kind="bad_response")


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


#: What ``--policy openai:...`` accepts after the comma: the policy's own settings and the request fields.
OPENAI_OPTIONS = ("api_key", "max_retries", "backoff_s", "timeout_s", "temperature", "top_p", "max_tokens",
                  "max_completion_tokens", "seed", "presence_penalty", "frequency_penalty", "stop", "tool_choice",
                  "parallel_tool_calls")  # fmt: skip


@policy("openai", usage="openai:MODEL[@URL][,k=v...]",
        help="OpenAI-compatible server (URL default $OPENAI_BASE_URL; key $OPENAI_API_KEY)",
        options=OPENAI_OPTIONS, takes_target="a model name")  # fmt: skip
def make_openai(target: str, **options: Any) -> OpenAIPolicy:
    """``--policy openai:MODEL[@URL]``: the URL is everything after the first ``@`` (model names have none)."""
    model, _, url = target.partition("@")
    if not model.strip():
        raise ValueError("openai needs a model name: openai:MODEL[@URL]")
    return OpenAIPolicy(model.strip(), url.strip() or None, **options)
