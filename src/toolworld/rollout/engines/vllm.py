"""The ``vllm`` engine: a vLLM server's ``/v1/completions`` with token ids in and token ids + logprobs out.

The prompt goes as a list of ids (never text, so nothing is re-tokenized); ``return_token_ids`` makes vLLM
return the sampled ids (older servers: ``return_tokens_as_token_ids`` spells them ``token_id:N`` in the
logprobs, which is the fallback), and ``logprobs`` returns each sampled id's logprob. Sampling is pinned to the
plain tempered softmax (``top_p=1``, ``top_k=-1``, ``min_p=0``, no penalties) so that a model's
``generation_config`` defaults cannot silently truncate the distribution.

Which distribution the logprobs describe is a *server* setting: vLLM reports the raw model logprobs unless it
was started with ``--logprobs-mode processed_logprobs``; start it that way when sampling at a temperature other
than 1, or the logprobs will not be those of the sampled distribution.

Failures: connection errors, timeouts, 429 and 5xx are retried with exponential backoff and jitter (honouring
``Retry-After``), and so is a malformed 200 (a body that is not JSON, no choices, token ids and logprobs of
different lengths: what a proxy's error page or a cut connection produces); when retries run out an
``InfraError`` of the last failure's kind (``timeout``, ``connection``, ``http_503``, ``bad_response``) is
raised. A 4xx caused by our request is an ``InfraError`` with ``retryable=False``, except a prompt longer than
the model's context, which ends the turn with ``finish_reason="length"`` like the other engines.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...core.errors import InfraError
from ...core.retry import backoff_delay
from ...tokens.tokenizers import load_tokenizer
from ..token_policy import Generation

if TYPE_CHECKING:
    import httpx
    from transformers import PreTrainedTokenizerBase

RETRY_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})


def completions_url(base_url: str) -> str:
    """``http://host:8000``, ``http://host:8000/v1`` or the full endpoint, normalised to the endpoint."""
    url = base_url.strip().rstrip("/")
    if not url.startswith(("http://", "https://")):
        url = "http://" + url
    if url.endswith("/completions"):
        return url
    return url + ("/completions" if url.endswith("/v1") else "/v1/completions")


def _token_ids_from_logprobs(tokens: list[str]) -> list[int] | None:
    ids = []
    for tok in tokens:
        if not isinstance(tok, str) or not tok.startswith("token_id:"):
            return None
        ids.append(int(tok.split(":", 1)[1]))
    return ids


def parse_completion(payload: dict[str, Any]) -> Generation:
    """The ``Generation`` in a vLLM completion response (raises ``InfraError`` when ids/logprobs are missing).

    Malformed responses are retryable (a glitch between us and the server); a response that lacks token ids
    altogether is not, since it means a server too old or started without the option that returns them.
    """
    try:
        choice = payload["choices"][0]
        if not isinstance(choice, dict):
            raise TypeError
    except (KeyError, IndexError, TypeError):
        raise InfraError(f"vLLM response has no choices: {str(payload)[:200]}", retryable=True,
                         kind="bad_response") from None  # fmt: skip
    logprobs = choice.get("logprobs") or {}
    if not isinstance(logprobs, dict):
        raise InfraError(f"vLLM response has logprobs of type {type(logprobs).__name__}", kind="bad_response")
    ids = choice.get("token_ids")
    if ids is None:
        tokens = logprobs.get("tokens")
        try:
            ids = _token_ids_from_logprobs(tokens) if tokens else None
        except ValueError:  # 'token_id:x'
            raise InfraError(f"vLLM response has malformed token strings: {str(tokens)[:200]}",
                             kind="bad_response") from None  # fmt: skip
    if ids is None:
        raise InfraError("the vLLM server returned no token ids; use vLLM >= 0.10.2 (return_token_ids) or start it "
                         "with --return-tokens-as-token-ids", retryable=False, kind="bad_response")  # fmt: skip
    lps = logprobs.get("token_logprobs")
    if not isinstance(ids, list) or lps is None or not isinstance(lps, list) or len(lps) != len(ids):
        n_ids = len(ids) if isinstance(ids, list) else "malformed"
        n_lps = "no" if lps is None else (len(lps) if isinstance(lps, list) else "malformed")
        raise InfraError(f"the vLLM server returned {n_ids} token ids but {n_lps} logprobs", kind="bad_response")
    try:
        gen_ids, gen_lps = [int(i) for i in ids], [float(x) for x in lps]
    except (TypeError, ValueError):
        raise InfraError(f"vLLM response has token ids or logprobs that are not numbers: {str(choice)[:200]}",
                         kind="bad_response") from None  # fmt: skip
    finish = "length" if choice.get("finish_reason") == "length" else "stop"
    return Generation(ids=gen_ids, logprobs=gen_lps, finish_reason=finish)


class VLLMEngine:
    """Sample token ids and logprobs from a running vLLM server.

    Args:
        model: the served model name (as in ``vllm serve MODEL``).
        base_url: server address, e.g. ``http://localhost:8000`` (``/v1`` optional).
        tokenizer: tokenizer folder / ``.gguf`` / loaded tokenizer matching the served model; when omitted,
            ``model`` itself must be a local folder.
        api_key: bearer token (default ``$VLLM_API_KEY``).
        timeout_s: per-request timeout.
        max_retries: retries after the first attempt for connection errors, timeouts, 429 and 5xx.
        backoff_s: first retry delay; doubles per retry (capped at 30 s, with jitter).
        transport: an ``httpx`` transport to use instead of the network (tests, custom routing).
    """

    def __init__(
        self,
        model: str,
        base_url: str,
        *,
        tokenizer: str | Path | PreTrainedTokenizerBase | None = None,
        api_key: str | None = None,
        timeout_s: float = 300.0,
        max_retries: int = 5,
        backoff_s: float = 0.5,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if not model or not base_url:
            raise ValueError("VLLMEngine needs a model name and a server URL (vllm:MODEL@URL)")
        if tokenizer is None:
            if not Path(model).expanduser().is_dir():
                raise ValueError(f"vllm needs the served model's tokenizer: pass tokenizer=PATH (a local folder "
                                 f"with tokenizer.json), since {model!r} is not a local folder")  # fmt: skip
            tokenizer = model
        if max_retries < 0 or backoff_s < 0 or timeout_s <= 0:
            raise ValueError("max_retries and backoff_s must be >= 0 and timeout_s > 0")
        self.model = model
        self.url = completions_url(base_url)
        self.tokenizer = load_tokenizer(tokenizer)
        self.api_key = api_key if api_key is not None else os.environ.get("VLLM_API_KEY")
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self._transport = transport
        self._client: httpx.AsyncClient | None = None
        self._client_loop: asyncio.AbstractEventLoop | None = None
        self.requests = 0  # attempts made, retries included (for reports and tests)

    def _http(self) -> httpx.AsyncClient:
        import httpx

        loop = asyncio.get_running_loop()
        if self._client is None or self._client_loop is not loop:  # a client's pool belongs to one loop
            headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
            self._client = httpx.AsyncClient(timeout=self.timeout_s, headers=headers, transport=self._transport)
            self._client_loop = loop
        return self._client

    def request_body(
        self, prompt_ids: list[int], *, max_tokens: int, temperature: float, stop_ids: list[int], seed: int | None
    ) -> dict[str, Any]:
        """The JSON body sent for one generation."""
        body: dict[str, Any] = {
            "model": self.model,
            "prompt": list(prompt_ids),
            "max_tokens": max_tokens,
            "temperature": temperature,
            "top_p": 1.0,
            "top_k": -1,
            "min_p": 0.0,
            "repetition_penalty": 1.0,
            "presence_penalty": 0.0,
            "frequency_penalty": 0.0,
            "logprobs": 1,
            "stop_token_ids": list(stop_ids),
            "return_token_ids": True,
            "return_tokens_as_token_ids": True,
            "skip_special_tokens": False,
            "add_special_tokens": False,
        }
        if seed is not None:
            body["seed"] = seed
        return body

    def _delay(self, attempt: int, retry_after: str | None) -> float:
        hint: float | None = None
        with contextlib.suppress(TypeError, ValueError):  # absent, or an HTTP date: our own backoff decides
            hint = float(retry_after)  # type: ignore[arg-type]
        return backoff_delay(self.backoff_s, attempt, hint_s=hint)

    async def generate(
        self, prompt_ids: list[int], *, max_tokens: int, temperature: float, stop_ids: list[int], seed: int | None
    ) -> Generation:
        """One completion; retried on transient failures (see the module docstring)."""
        import httpx

        if not prompt_ids or max_tokens <= 0:
            return Generation(ids=[], logprobs=[], finish_reason="length")
        body = self.request_body(prompt_ids, max_tokens=max_tokens, temperature=temperature, stop_ids=stop_ids,
                                 seed=seed)  # fmt: skip
        last, kind = "", "server_error"
        retry_after: str | None = None
        for attempt in range(self.max_retries + 1):
            if attempt:
                await asyncio.sleep(self._delay(attempt - 1, retry_after))
                retry_after = None
            self.requests += 1
            try:
                resp = await self._http().post(self.url, json=body)
            except httpx.TimeoutException as exc:
                last, kind = f"timed out after {self.timeout_s:g}s ({type(exc).__name__})", "timeout"
                continue
            except httpx.TransportError as exc:
                last, kind = f"cannot reach {self.url}: {type(exc).__name__}: {exc}", "connection"
                continue
            if resp.status_code in RETRY_STATUS or resp.status_code >= 500:
                retry_after = resp.headers.get("retry-after")
                last, kind = f"HTTP {resp.status_code}: {resp.text[:300]}", f"http_{resp.status_code}"
                continue
            if resp.status_code >= 400:
                text = resp.text[:500]
                if resp.status_code == 400 and "context length" in text.lower():
                    return Generation(ids=[], logprobs=[], finish_reason="length")
                raise InfraError(f"vLLM rejected the request (HTTP {resp.status_code}): {text}", retryable=False,
                                 kind="bad_request")  # fmt: skip
            try:
                payload = resp.json()
            except ValueError:  # UnicodeDecodeError included
                last, kind = f"HTTP {resp.status_code} with a body that is not JSON: {resp.text[:200]}", "bad_response"
                continue
            try:
                return parse_completion(payload)
            except InfraError as exc:
                if not exc.retryable:
                    raise
                last, kind = str(exc), exc.kind
        raise InfraError(f"vLLM at {self.url} failed {self.max_retries + 1} times; last error: {last}",
                         retryable=True, kind=kind)  # fmt: skip

    async def aclose(self) -> None:
        """Close the HTTP connection pool."""
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    def __repr__(self) -> str:
        return f"VLLMEngine({self.model!r}, {self.url!r})"
