"""The ``gguf`` engine: a local GGUF file run by llama.cpp through ``xllamacpp``, token ids in and out.

xllamacpp embeds llama.cpp's server in-process. A completion request whose ``prompt`` is a list of token ids is
evaluated exactly as given (no BOS added, no text round trip) and, with ``n_probs``, generated tokens come back
with their logprobs. Two request settings make the reported logprobs those of the distribution the token was
drawn from, which is what importance ratios in RL need:

- ``samplers: ["temperature"]`` strips llama.cpp's default chain (top-k 40, top-p 0.95, min-p 0.05, ...), so
  sampling is from ``softmax(logits / T)`` over the whole vocabulary;
- ``post_sampling_probs: true`` reports the probability *after* that chain (llama.cpp's plain logprobs ignore
  the temperature). At ``T == 0`` (greedy) the untempered model logprob is reported instead of a useless 0.

Requests go to the native ``/completion`` endpoint of the server's loopback HTTP port with ``return_tokens``:
its ``tokens`` list holds *every* sampled id. The per-token logprobs cannot be trusted to be complete: llama.cpp
withholds the probabilities of a token whose text ends inside a UTF-8 character (an emoji or CJK character
split over byte tokens), so they never reach any response, streamed or not. Each such position is re-scored
with one extra request over the same prefix that returns the model's full distribution, evaluated the way the
generation evaluated it (the same numbers, except for a turn's first token, which comes close: see
:meth:`GGUFEngine._rescore`); the turn says how many were re-scored
(``Generation.rescored``), and a count of ids that disagrees with llama.cpp's own ``tokens_predicted`` is an
``InfraError``, never a shorter turn. Generation stops at end-of-generation ids of the vocabulary; a caller's
stop id that llama.cpp does not treat so cuts the sample after the fact (the kept prefix is what a stop there
would have produced). An awaiting caller that is cancelled (Ctrl-C) closes the connection, which makes
llama.cpp drop the request at its next token.

The same port's ``/tokenize`` endpoint is llama.cpp's own tokenizer, which :meth:`GGUFEngine.check_tokenizer`
uses to prove that the Python tokenizer that renders chat templates produces the very ids llama.cpp would.
"""

from __future__ import annotations

import asyncio
import math
import os
import secrets
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ...core.errors import InfraError, ToolworldError
from ...tokens.tokenizers import load_gguf_tokenizer, load_tokenizer
from ..token_policy import Generation

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

#: Texts that exercise what chat rollouts contain: digits, runs of whitespace and newlines, JSON, code, CJK,
#: emoji (multi-codepoint), accents and the chat markup tokens themselves.
PROBE_TEXTS = (
    "Hello, world! The order #W1234567 costs $1,299.50 (2024-01-05).",
    '{"name": "get_order_details", "arguments": {"order_id": "#W2611340", "qty": 12}}',
    "def f(x):\n    return [1, 2.5, None]  # 3 items\n\n\n12 apples\n\n  7 pears\t\t99",
    "東京の天気は晴れ、気温は21度です。中文文本，한국어 텍스트",
    "emoji 😀👍🏽🇯🇵 family 👨‍👩‍👧‍👦 — “quotes” café naïve",
    "   leading and trailing   \r\n\r\nx",
)


class TokenizerMismatch(ToolworldError, ValueError):
    """The Python tokenizer does not produce llama.cpp's ids for the same text (a ``ValueError`` too, for callers
    that catch bad input generally)."""

    default_kind = "tokenizer_mismatch"


def _logprob(entry: dict[str, Any]) -> float:
    if "logprob" in entry:
        return float(entry["logprob"])
    prob = float(entry["prob"])
    return math.log(prob) if prob > 0 else float("-inf")


def _align_logprobs(ids: list[int], entries: list[dict[str, Any]]) -> list[float | None]:
    """The reported logprob of each sampled id, None where llama.cpp withheld it or the match is ambiguous.

    ``entries`` are the emitted tokens in order, a subsequence of ``ids``. An entry is placed only where the
    leftmost and the rightmost embedding of that subsequence agree (every embedding lies between them), so an id
    that repeats around a withheld one is re-scored rather than given another position's logprob.
    """
    if len(entries) == len(ids) and all(int(e["id"]) == t for e, t in zip(entries, ids, strict=True)):
        return [_logprob(e) for e in entries]
    want = [int(e["id"]) for e in entries]
    left: list[int] = []
    for i, tok in enumerate(ids):
        if len(left) < len(want) and tok == want[len(left)]:
            left.append(i)
    right: list[int] = []
    for i in range(len(ids) - 1, -1, -1):
        if len(right) < len(want) and ids[i] == want[len(want) - 1 - len(right)]:
            right.append(i)
    right.reverse()
    out: list[float | None] = [None] * len(ids)
    if len(left) != len(want) or len(right) != len(want):  # not a subsequence: trust none of them
        return out
    for entry, lo, hi in zip(entries, left, right, strict=True):
        if lo == hi:
            out[lo] = _logprob(entry)
    return out


#: How much of the distribution a re-scoring asks for first when the top alone is exact (T of 0 or 1).
_RESCORE_TOP = 256


#: ``kv_cache`` values of :class:`GGUFEngine`.
KV_CACHE_TYPES = ("f16", "f32")


class GGUFEngine:
    """Sample token ids and their logprobs from a GGUF model with llama.cpp (CPU, or GPU with a GPU build).

    Args:
        path: the ``.gguf`` file.
        tokenizer: a tokenizer folder / ``.gguf`` / loaded tokenizer whose ids match the GGUF's vocabulary;
            default: built from the GGUF itself (see :func:`load_gguf_tokenizer`).
        n_ctx: context length of each slot (prompt + completion); longer prompts end the turn with ``length``.
        threads: CPU threads (default: all cores).
        n_parallel: slots that decode concurrently (many episodes share one model); worth > 1 on a GPU.
        gpu_layers: layers to offload (GPU builds only); None keeps llama.cpp's default.
        verify_tokenizer: check at start that the tokenizer gives llama.cpp's ids on ``PROBE_TEXTS``
            (raises :class:`TokenizerMismatch` otherwise).
        verbose: let llama.cpp log to stderr.
        kv_cache: ``"f16"`` (llama.cpp's default: half the cache memory, flash attention where available) or
            ``"f32"`` (a float32 cache without flash attention). RL samplers want ``"f32"``: the importance
            ratio compares these logprobs with the trainer's, and an f16 cache alone puts a gap of ~1e-3 per
            token between them (~1e-5 with f32, measured on SmolLM2-135M).
    """

    def __init__(
        self,
        path: str | Path,
        *,
        tokenizer: str | Path | PreTrainedTokenizerBase | None = None,
        n_ctx: int = 8192,
        threads: int | None = None,
        n_parallel: int = 1,
        gpu_layers: int | None = None,
        verify_tokenizer: bool = True,
        verbose: bool = False,
        kv_cache: Literal["f16", "f32"] = "f16",
    ) -> None:
        self.path = Path(path).expanduser()
        if kv_cache not in KV_CACHE_TYPES:
            raise ValueError(f"kv_cache must be one of {', '.join(KV_CACHE_TYPES)}, got {kv_cache!r}")
        if not self.path.is_file():
            raise ValueError(f"GGUF file {str(self.path)!r} does not exist")
        if n_ctx < 16 or n_parallel < 1:
            raise ValueError(f"n_ctx must be >= 16 and n_parallel >= 1 (got {n_ctx}, {n_parallel})")
        import xllamacpp

        # The model's own vocabulary whatever the file is called; a given tokenizer goes through the one loader.
        self.tokenizer = load_tokenizer(tokenizer) if tokenizer is not None else load_gguf_tokenizer(self.path)
        self.n_ctx = n_ctx
        self.n_parallel = n_parallel
        params = xllamacpp.CommonParams()
        params.model.path = str(self.path)
        params.n_ctx = n_ctx * n_parallel  # llama.cpp splits the context between slots
        params.n_parallel = n_parallel
        params.cpuparams.n_threads = params.cpuparams_batch.n_threads = threads or os.cpu_count() or 1
        params.verbosity = 3 if verbose else 1
        if gpu_layers is not None:
            params.n_gpu_layers = gpu_layers
        self.kv_cache = kv_cache
        if kv_cache == "f32":
            params.cache_type_k = params.cache_type_v = xllamacpp.ggml_type.GGML_TYPE_F32
            params.flash_attn_type = 0  # off: the flash kernels keep an f16 cache
        try:
            self._server: Any = xllamacpp.Server(params)
        except Exception as exc:  # llama.cpp refuses files it cannot parse with a bare RuntimeError
            raise ValueError(f"llama.cpp could not load {self.path}: {exc}") from exc
        # Re-scoring a withheld token forces a plain ASCII token (never withheld itself) and asks for the whole
        # distribution (see _rescore).
        self._vocab_size = len(self.tokenizer)
        self._filler = int(self.tokenizer.encode("a", add_special_tokens=False)[0])
        self._slots: asyncio.Semaphore | None = None
        self._slots_loop: asyncio.AbstractEventLoop | None = None
        self._guard = threading.Lock()
        if verify_tokenizer:
            bad = self.check_tokenizer()
            if bad:
                text, ours, theirs = bad[0]
                raise TokenizerMismatch(
                    f"the tokenizer disagrees with llama.cpp's for {self.path.name} on {len(bad)} of "
                    f"{len(PROBE_TEXTS)} probe texts, e.g. {text[:40]!r}: ours {ours[:12]} vs llama.cpp "
                    f"{theirs[:12]}; pass the model's original tokenizer folder (tokenizer=PATH) or "
                    "verify_tokenizer=false to accept it"
                )

    # -- tokenizer agreement -----------------------------------------------------------------------------------

    def reference_tokenize(self, text: str) -> list[int]:
        """llama.cpp's ids for ``text`` (special tokens parsed, no BOS), from the in-process server."""
        import httpx

        resp = httpx.post(f"{self._server.listening_address}/tokenize",
                          json={"content": text, "add_special": False, "parse_special": True}, timeout=30)  # fmt: skip
        resp.raise_for_status()
        return [int(t) for t in resp.json()["tokens"]]

    def check_tokenizer(self, texts: tuple[str, ...] | list[str] = PROBE_TEXTS) -> list[tuple[str, list[int], list[int]]]:
        """``(text, our_ids, llama_cpp_ids)`` for every text the two tokenizers encode differently."""
        specials = [t for t in self.tokenizer.all_special_tokens if t][:4]
        bad = []
        for text in [*texts, "\n".join(f"{t}user\nhi 42" for t in specials)]:
            ours = list(self.tokenizer.encode(text, add_special_tokens=False))
            theirs = self.reference_tokenize(text)
            if ours != theirs:
                bad.append((text, ours, theirs))
        return bad

    # -- generation ---------------------------------------------------------------------------------------------

    def _semaphore(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        if self._slots is None or self._slots_loop is not loop:  # asyncio primitives belong to one loop
            self._slots, self._slots_loop = asyncio.Semaphore(self.n_parallel), loop
        return self._slots

    async def generate(
        self, prompt_ids: list[int], *, max_tokens: int, temperature: float, stop_ids: list[int], seed: int | None
    ) -> Generation:
        """Sample up to ``max_tokens`` ids after ``prompt_ids`` (see the module docstring for the logprobs)."""
        async with self._semaphore():
            ids = [int(t) for t in prompt_ids]  # a list of strings would be read as several text prompts
            return await self._generate(ids, max_tokens, temperature, [int(t) for t in stop_ids], seed)

    async def _post(self, client: Any, request: dict[str, Any]) -> dict[str, Any]:
        """One native ``/completion`` request; llama.cpp's own errors come back as ``{"error": {...}}``."""
        import httpx

        server = self._server
        if server is None:
            raise InfraError(f"the engine for {self.path.name} is closed", retryable=False, kind="engine_error")
        try:
            resp = await client.post(f"{server.listening_address}/completion", json=request)
            body = resp.json()
            if not isinstance(body, dict):
                raise ValueError(f"expected one JSON object, got {type(body).__name__}")
        except (httpx.HTTPError, ValueError) as exc:  # the in-process server died or answered garbage: ours
            raise InfraError(f"llama.cpp failed on {self.path.name}: {type(exc).__name__}: {exc}",
                             kind="engine_error") from exc  # fmt: skip
        if resp.status_code != 200 or "error" in body:
            err = body.get("error") if isinstance(body.get("error"), dict) else {"message": str(body)[:500]}
            return {"error": {"code": resp.status_code, **err}}
        return body

    async def _generate(
        self, prompt_ids: list[int], max_tokens: int, temperature: float, stop_ids: list[int], seed: int | None
    ) -> Generation:
        import httpx

        budget = min(max_tokens, self.n_ctx - len(prompt_ids))
        if budget <= 0 or not prompt_ids:
            return Generation(ids=[], logprobs=[], finish_reason="length")
        request = {
            "prompt": prompt_ids,
            "n_predict": budget,
            "temperature": max(temperature, 0.0),
            "samplers": ["temperature"],
            "n_probs": 1,
            "post_sampling_probs": temperature > 0,
            "seed": seed if seed is not None else secrets.randbits(31),
            "stream": False,
            "cache_prompt": True,
            "return_tokens": True,
        }
        async with httpx.AsyncClient(timeout=httpx.Timeout(30.0, read=None)) as client:
            body = await self._post(client, request)
            if "error" in body:
                err = body["error"]
                if err.get("type") == "exceed_context_size_error":
                    return Generation(ids=[], logprobs=[], finish_reason="length")
                raise InfraError(f"llama.cpp rejected the request: {err.get('message', err)}",
                                 retryable=int(err.get("code") or 500) >= 500, kind="engine_error")  # fmt: skip
            ids = [int(t) for t in body.get("tokens") or []]
            predicted = body.get("tokens_predicted")
            if isinstance(predicted, int) and predicted != len(ids):
                raise InfraError(f"llama.cpp sampled {predicted} tokens but returned {len(ids)} ids; the turn "
                                 "cannot be recorded token-exactly", retryable=False, kind="engine_error")  # fmt: skip
            logprobs = _align_logprobs(ids, body.get("completion_probabilities") or [])
            finish: Literal["stop", "length"] = "stop" if body.get("stop_type") in ("eos", "word") else "length"
            stops = set(stop_ids)
            cut = next((k for k, t in enumerate(ids) if t in stops), None)
            if cut is not None:  # a stop id llama.cpp does not end generation at: the turn ended there
                ids, logprobs, finish = ids[: cut + 1], logprobs[: cut + 1], "stop"
            missing = [k for k, lp in enumerate(logprobs) if lp is None]
            for k in sorted(missing, reverse=True):  # see _rescore for why the order matters
                logprobs[k] = await self._rescore(client, prompt_ids, ids[:k], ids[k], temperature)
        return Generation(ids=ids, logprobs=[float(lp) for lp in logprobs], finish_reason=finish,  # type: ignore[misc]
                          rescored=len(missing))  # fmt: skip

    async def _rescore(self, client: Any, prompt: list[int], sampled: list[int], token: int, temperature: float) -> float:
        """The logprob of ``token`` after ``prompt + sampled`` under the distribution sampling used.

        llama.cpp reports probabilities only for a token it emits, so one harmless token (``self._filler``, plain
        ASCII, so never withheld) is forced with a logit bias; the raw, unbiased distribution comes with it, and
        the temperature is applied here: ``log p_T(k) = log p(k) / T - logsumexp_i(log p(i) / T)``. At ``T == 1``
        that is ``log p(k)`` and at ``T == 0`` the untempered ``log p(k)`` is wanted, so the top of the
        distribution is enough when it holds ``k``; any other temperature needs the whole vocabulary.

        Numbers: llama.cpp's logits depend slightly on how tokens were batched (a 4-bit model on a CPU differs by up
        to ~0.1 nats between a batch and one token at a time), so the re-score repeats the generation's own
        evaluation where it can. llama.cpp keeps the slot's cache and re-evaluates only the last token of a cached
        prefix, one token, as decoding did; so positions are re-scored from the last one back (each prefix stays
        inside what the generation cached) and match the sampling step. The first sampled token is the exception:
        its distribution came from evaluating the prompt as a batch, which a re-score cannot repeat (llama.cpp
        restores the cached prompt and re-evaluates its last token alone), so that one is close, not exact.
        """
        prefix = prompt + sampled
        exact_from_top = temperature in (0.0, 1.0)
        for n_probs in ((_RESCORE_TOP, self._vocab_size) if exact_from_top else (self._vocab_size,)):
            body = await self._post(client, {
                "prompt": prefix, "n_predict": 1, "temperature": 0.0, "samplers": ["temperature"],
                "n_probs": n_probs, "post_sampling_probs": False, "logit_bias": [[self._filler, 1e4]],
                "cache_prompt": True, "stream": False,
            })  # fmt: skip
            entries = body.get("completion_probabilities") or []
            if "error" in body or not entries:
                raise InfraError(f"llama.cpp could not re-score a withheld token: {body.get('error', body)}"[:500],
                                 kind="engine_error")  # fmt: skip
            top = entries[0].get("top_logprobs") or entries[0].get("top_probs") or []
            dist = {int(e["id"]): _logprob(e) for e in top}
            if token in dist and math.isfinite(dist[token]):
                break
        else:
            raise InfraError(f"llama.cpp's distribution has no probability for the sampled id {token}",
                             retryable=False, kind="engine_error")  # fmt: skip
        if exact_from_top:
            return dist[token]
        scale = 1.0 / temperature
        scaled = [lp * scale for lp in dist.values() if math.isfinite(lp)]
        peak = max(scaled)
        return dist[token] * scale - (peak + math.log(sum(math.exp(v - peak) for v in scaled)))

    def close(self) -> None:
        """Stop llama.cpp's loop and free the model (the engine is unusable afterwards)."""
        with self._guard:
            server, self._server = getattr(self, "_server", None), None
        del server

    def __repr__(self) -> str:
        return (f"GGUFEngine({str(self.path)!r}, n_ctx={self.n_ctx}, n_parallel={self.n_parallel}, "
                f"kv_cache={self.kv_cache!r})")  # fmt: skip
