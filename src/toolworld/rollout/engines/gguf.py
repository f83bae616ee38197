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
import contextlib
import hashlib
import math
import os
import secrets
import shutil
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ...core.errors import ToolworldError
from ...core.files import atomic_directory
from ...core.paths import cache_dir
from ..policy import InfraError
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

# llama.cpp pre-tokenizer names (``tokenizer.ggml.pre``) -> the equivalent `tokenizers` pre-tokenizer. Each is
# checked against llama.cpp itself by GGUFEngine.check_tokenizer on PROBE_TEXTS; a name missing here gets GPT-2's
# byte-level split, and a mismatch is reported rather than silently producing other ids.
_LLAMA3_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
    r"|\s+(?!\S)|\s+"
)
_QWEN2_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
    r"|\s+(?!\S)|\s+"
)


def _byte_level_after(pt: Any, pattern: str) -> Any:
    return pt.Sequence([pt.Split(_tk_regex(pattern), behavior="isolated", invert=False),
                        pt.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)])  # fmt: skip


def _tk_regex(pattern: str) -> Any:
    from tokenizers import Regex

    return Regex(pattern)


_PRE_TOKENIZERS = {
    # SmolLM/SmolLM2: digits are split one by one before the GPT-2 byte-level regex.
    "smollm": lambda pt: pt.Sequence(
        [pt.Digits(individual_digits=True), pt.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True)]
    ),
    "llama-bpe": lambda pt: _byte_level_after(pt, _LLAMA3_SPLIT),
    "qwen2": lambda pt: _byte_level_after(pt, _QWEN2_SPLIT),
    "gpt-2": lambda pt: pt.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True),
}
_TOKEN_CONTROL, _TOKEN_USER_DEFINED = 3, 4


class TokenizerMismatch(ToolworldError, ValueError):
    """The Python tokenizer does not produce llama.cpp's ids for the same text (a ``ValueError`` too, for callers
    that catch bad input generally)."""

    default_kind = "tokenizer_mismatch"


def gguf_metadata(path: str | Path | Any, keys: tuple[str, ...]) -> dict[str, Any]:
    """Read a few scalar/string metadata keys of a GGUF file or open ``GGUFReader`` (tensors are not loaded)."""
    from gguf import GGUFReader

    reader = path if isinstance(path, GGUFReader) else GGUFReader(str(path))
    out: dict[str, Any] = {}
    for key in keys:
        field = reader.fields.get(key)
        if field is None or not field.data:
            continue
        part = field.parts[field.data[0]]
        out[key] = bytes(part).decode("utf-8") if field.types[0].name == "STRING" else part.tolist()[0]
    return out


def _tokenizer_cache_dir(gguf: Path) -> Path:
    st = gguf.stat()
    key = hashlib.sha256(f"{gguf.resolve()}|{st.st_size}|{st.st_mtime_ns}".encode()).hexdigest()[:16]
    return cache_dir() / "tokenizers" / f"{gguf.stem}-{key}"


def _gguf_array(reader: Any, key: str) -> list[Any]:
    field = reader.fields.get(key)
    if field is None:
        return []
    return list(field.contents())


def build_gguf_tokenizer(gguf_path: str | Path) -> PreTrainedTokenizerBase:
    """A fast tokenizer built straight from a GGUF's vocabulary, merges, token types and chat template.

    Built with `tokenizers` alone (no torch, no model weights), so the embedded default runs on a machine with
    neither; transformers' own GGUF loader needs torch. Only byte-level BPE vocabularies
    (``tokenizer.ggml.model == "gpt2"``: SmolLM, Llama 3, Qwen, ...) are supported; for others pass the model's
    tokenizer folder.
    """
    from gguf import GGUFReader
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    path = Path(gguf_path)
    reader = GGUFReader(str(path))
    meta = gguf_metadata(reader, ("tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.chat_template",
                                "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                                "tokenizer.ggml.unknown_token_id", "tokenizer.ggml.padding_token_id"))  # fmt: skip
    kind = meta.get("tokenizer.ggml.model")
    if kind != "gpt2":
        raise ValueError(f"{path.name}: tokenizer type {kind!r} cannot be rebuilt from the GGUF (only byte-level "
                         "BPE, 'gpt2'); pass the model's tokenizer folder (tokenizer=PATH)")  # fmt: skip
    tokens = _gguf_array(reader, "tokenizer.ggml.tokens")
    types = _gguf_array(reader, "tokenizer.ggml.token_type") or [1] * len(tokens)
    merges = [tuple(m.split(" ", 1)) for m in _gguf_array(reader, "tokenizer.ggml.merges")]
    vocab = {tok: i for i, tok in enumerate(tokens)}
    backend = Tokenizer(models.BPE(vocab=vocab, merges=merges, fuse_unk=False, byte_fallback=False))
    pre = meta.get("tokenizer.ggml.pre") or "gpt-2"
    backend.pre_tokenizer = _PRE_TOKENIZERS.get(pre, _PRE_TOKENIZERS["gpt-2"])(pre_tokenizers)
    backend.decoder = decoders.ByteLevel()
    added = [AddedToken(tok, special=(kind_ == _TOKEN_CONTROL), normalized=False)
             for tok, kind_ in zip(tokens, types, strict=False) if kind_ in (_TOKEN_CONTROL, _TOKEN_USER_DEFINED)]  # fmt: skip
    backend.add_tokens(added)

    def name(key: str) -> str | None:
        idx = meta.get(f"tokenizer.ggml.{key}_token_id")
        return tokens[idx] if isinstance(idx, int) and 0 <= idx < len(tokens) else None

    tok = PreTrainedTokenizerFast(tokenizer_object=backend, bos_token=name("bos"), eos_token=name("eos"),
                                  unk_token=name("unknown"), pad_token=name("padding"),
                                  clean_up_tokenization_spaces=False)  # fmt: skip
    if meta.get("tokenizer.chat_template"):
        tok.chat_template = meta["tokenizer.chat_template"]
    return tok


def load_gguf_tokenizer(gguf_path: str | Path, *, use_cache: bool = True) -> PreTrainedTokenizerBase:
    """A transformers tokenizer (with the GGUF's chat template) built from the GGUF's own vocabulary.

    See :func:`build_gguf_tokenizer`. Reading tens of thousands of strings out of the GGUF takes about a second,
    so the result is saved under ``<cache>/tokenizers/`` keyed by the file's path, size and mtime; later loads
    take a fraction of that.
    """
    from transformers import AutoTokenizer

    gguf = Path(gguf_path)
    saved = _tokenizer_cache_dir(gguf)
    if use_cache and (saved / "tokenizer_config.json").is_file():
        try:
            return AutoTokenizer.from_pretrained(str(saved))
        except Exception:  # an unreadable cache entry is rebuilt, never trusted
            shutil.rmtree(saved, ignore_errors=True)
    tok = build_gguf_tokenizer(gguf)
    if use_cache:
        # A reader sees the whole folder or none. OSError: another process won the race, or the cache is
        # read-only; either way the tokenizer in hand still works.
        with contextlib.suppress(OSError), atomic_directory(saved) as tmp:
            tok.save_pretrained(str(tmp))
    return tok


def load_tokenizer(source: str | Path | PreTrainedTokenizerBase) -> PreTrainedTokenizerBase:
    """A tokenizer from a folder, a ``.gguf`` file, or an already-loaded tokenizer (returned as is)."""
    if not isinstance(source, str | Path):
        return source
    path = Path(source).expanduser()
    if path.suffix == ".gguf" and path.is_file():
        return load_gguf_tokenizer(path)
    if not path.exists():
        raise ValueError(f"tokenizer path {str(path)!r} does not exist; pass a folder with tokenizer.json / "
                         "tokenizer_config.json or a .gguf file")  # fmt: skip
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(path))


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
    ) -> None:
        self.path = Path(path).expanduser()
        if not self.path.is_file():
            raise ValueError(f"GGUF file {str(self.path)!r} does not exist")
        if n_ctx < 16 or n_parallel < 1:
            raise ValueError(f"n_ctx must be >= 16 and n_parallel >= 1 (got {n_ctx}, {n_parallel})")
        import xllamacpp

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
        return f"GGUFEngine({str(self.path)!r}, n_ctx={self.n_ctx}, n_parallel={self.n_parallel})"
