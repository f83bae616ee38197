"""The ``hf`` engine: a transformers causal LM sampled by our own loop, on CPU or GPU.

``model.generate`` hides what RL needs to see, so the loop here is explicit: one forward pass per token with a
KV cache, ``log_softmax(logits / T)`` in float32, a draw from that distribution with a seeded
``torch.Generator``, and the drawn id's logprob under exactly that distribution (at ``T == 0``, greedy, the
untempered model logprob). The same seed and prompt give the same ids.

Multi-turn rollouts resend a prompt that extends the previous one, so the engine keeps the KV cache of its last
sequence and, when the next prompt shares a prefix with it, crops the cache to that prefix instead of
re-reading the whole conversation. One model serves many episodes: calls run one at a time in a worker thread
(``asyncio.to_thread`` behind a lock), keeping the event loop free for the episodes' tool calls.

``max_batch > 1`` decodes concurrent requests together, which is what a GPU needs: one token of one sequence
leaves it almost idle, so a rollout of many episodes at a time (``concurrency``) is only as fast as its batches.
Requests that arrive while a batch runs wait for the next one (a turn-level continuous batching); once half of a
batch's rows have stopped, the batch hands its finished replies back and its running rows wait at the head of the
queue, their keys and values kept and their generators carried, so the finished episodes' next turns join them in
the next batch instead of waiting for the longest reply. Each prompt is
prefilled on its own (no padding, no ``B x L x L`` mask), the caches are left-padded into one, and the rows are
decoded together under an attention mask; a row leaves the batch when it stops. Each row draws from its own
``torch.Generator`` seeded like the unbatched path, so a row gets the ids it would get alone up to the float
rounding of a batched matmul (which rows share a batch can flip a near-tie; the logprobs recorded are always
those of the distribution the id was drawn from). The prefix cache holds one entry per sequence here (the
``2 * max_batch`` most recent): a row that leaves the batch keeps its keys and values, and the episode's next
turn, whose prompt extends it, reads only its new tokens. Batching pays on a CPU too: decoding one sequence
reads every weight for one token, a batch of 8 reads them once for 8 (``docs/benchmarks.md``).
"""

from __future__ import annotations

import asyncio
import inspect
import secrets
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from ...core.errors import InfraError
from ...core.memory import release_freed_memory
from ...tokens.template import lcp
from ...tokens.tokenizers import load_tokenizer
from ..token_policy import Generation

_T = TypeVar("_T")

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase


def cache_keyword(model: Any) -> str:
    """The keyword a causal LM's forward takes its KV cache under: ``cache`` since transformers 5.24 (which
    deprecates ``past_key_values``, to be removed in 5.40), ``past_key_values`` before. A peft wrapper's forward
    takes ``**kwargs`` only and passes them on, so the model it wraps is asked."""
    inner = model.get_base_model() if hasattr(model, "get_base_model") else model
    try:
        params = inspect.signature(inner.forward).parameters
    except (TypeError, ValueError):
        return "past_key_values"
    return "cache" if "cache" in params else "past_key_values"


def returned_cache(output: Any) -> Any:
    """The KV cache a forward returned (``output.cache`` since transformers 5.24, ``past_key_values`` before);
    None when it returned none."""
    cache = getattr(output, "cache", None)
    return cache if cache is not None else getattr(output, "past_key_values", None)


def _pick_device(device: str) -> str:
    import torch

    if device != "auto":
        return device
    if torch.cuda.is_available():
        return "cuda"
    mps = getattr(torch.backends, "mps", None)
    return "mps" if mps is not None and mps.is_available() else "cpu"


def native_bf16(device: str = "cpu") -> bool:
    """Whether bfloat16 matmuls run in hardware on ``device``, so that bf16 autocast or a bf16 model pays.

    Where they do not, PyTorch emulates them: on a 2-core AVX2 CPU (no AVX512-BF16, no AMX) a bf16 autocast
    matmul with its backward measured 26x slower than float32's, and an SFT step of SmolLM2-135M took ~29 minutes
    instead of ~2.5. Defaults that choose bf16 (``benchmarks/learning.py``'s ``--bf16`` and ``--hf-dtype auto``) ask
    this first, and the trainers warn when asked for bf16 on hardware without it. CUDA answers for itself; on a
    CPU the instructions are AVX512-BF16 or AMX; anything else (MPS included) counts as no."""
    import torch

    if device.startswith("cuda"):
        return bool(torch.cuda.is_available() and torch.cuda.is_bf16_supported())
    if device != "cpu":
        return False
    cpu = torch.cpu
    probes = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
    return any(bool(getattr(cpu, name)()) for name in probes if callable(getattr(cpu, name, None)))


def warn_unless_native_bf16(device: str, what: str) -> None:
    """Warn that ``what`` runs bf16 on ``device`` where it is emulated (many times slower than float32); the
    run goes on, as asked. Only CPUs and CUDA devices are judged: other backends answer for themselves."""
    if device.split(":")[0] in ("cpu", "cuda") and not native_bf16(device):
        import warnings

        warnings.warn(f"{what}: bfloat16 on {device!r}, which has no bf16 instructions (AVX512-BF16/AMX on a CPU): "
                      "PyTorch emulates it, many times slower than float32; drop --bf16 (or pass --no-bf16) here",
                      RuntimeWarning, stacklevel=3)  # fmt: skip


def _pick_dtype(dtype: str, device: str) -> Any:
    import torch

    if dtype == "auto":
        if device.startswith("cuda"):
            return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        return torch.float32
    try:
        value = getattr(torch, dtype)
    except AttributeError:
        value = None
    if not isinstance(value, torch.dtype):
        raise ValueError(f"unknown dtype {dtype!r}; use auto, float32, bfloat16 or float16")
    if value is torch.bfloat16:
        warn_unless_native_bf16(device, "the hf engine's weights")
    return value


@dataclass(slots=True)
class BatchRequest:
    """One prompt of a batched call (the arguments of :meth:`HFEngine.generate`)."""

    prompt_ids: list[int]
    max_tokens: int
    temperature: float
    stop_ids: list[int] = field(default_factory=list)
    seed: int | None = None


@dataclass(slots=True)
class Unfinished:
    """A row a batch handed back before it stopped (``generate_batch_sync(..., hand_back=True)``): what it sampled
    so far and the generator it draws from, so that a continuation (the prompt plus ``ids``, the budget less
    ``len(ids)``) draws what the row would have drawn next."""

    ids: list[int]
    logprobs: list[float]
    generator: Any


@dataclass(slots=True)
class _Waiting:
    request: BatchRequest
    future: asyncio.Future[Generation]
    ids: list[int] = field(default_factory=list)  # sampled by earlier batches that handed the row back
    logprobs: list[float] = field(default_factory=list)
    generator: Any = None  # the row's generator, carried from the batch that handed it back

    def resumed(self, part: Unfinished) -> _Waiting:
        """This request's continuation after a batch handed it back with ``part`` sampled."""
        req = self.request
        return _Waiting(BatchRequest(req.prompt_ids + part.ids, req.max_tokens - len(part.ids), req.temperature,
                                     req.stop_ids, req.seed),
                        self.future, self.ids + part.ids, self.logprobs + part.logprobs, part.generator)  # fmt: skip


def _layer_kv(cache: Any, layer: int) -> tuple[Any, Any]:
    """The key and value tensors of one layer of a ``DynamicCache`` (transformers 5 layers, or 4.x lists)."""
    layers = getattr(cache, "layers", None)
    if layers is not None:
        return layers[layer].keys, layers[layer].values
    return cache.key_cache[layer], cache.value_cache[layer]


def _n_layers(cache: Any) -> int:
    """How many layers a ``DynamicCache`` holds (transformers 5 layers, or 4.x lists)."""
    layers = getattr(cache, "layers", None)
    return len(layers if layers is not None else cache.key_cache)


def _select_rows(cache: Any, keep: Any) -> None:
    """Keep only rows ``keep`` (a long tensor) of every layer of ``cache`` (dynamic or static)."""
    layers = getattr(cache, "layers", None)
    if layers is not None:
        for layer in layers:
            layer.keys, layer.values = layer.keys[keep], layer.values[keep]
        return
    for i in range(len(cache.key_cache)):  # transformers 4.x
        cache.key_cache[i] = cache.key_cache[i][keep]
        cache.value_cache[i] = cache.value_cache[i][keep]


def _similar_lengths(items: Sequence[_T], key: Callable[[_T], int], waste: float = 1.5) -> list[list[_T]]:
    """``items`` in groups of similar ``key`` (the ids a prompt reads): a forward reading several rows pads each to
    the longest, so a 300-id tool result read beside seven 1-id continuations would compute 2,400 positions for
    307. Sorted by length, a group grows while its padded size stays within ``waste`` times the ids it reads."""
    groups: list[list[_T]] = []
    total = 0
    for item in sorted(items, key=key):
        n = key(item)
        if groups and n * (len(groups[-1]) + 1) <= waste * (total + n):
            groups[-1].append(item)
            total += n
        else:
            groups.append([item])
            total = n
    return groups


class HFEngine:
    """Sample token ids and their logprobs from a transformers causal LM.

    Args:
        path: a model folder (``config.json`` + weights) or a ``.gguf`` file, which transformers dequantizes
            (the route for training the embedded model).
        tokenizer: tokenizer folder / ``.gguf`` / loaded tokenizer; default: the model's own.
        device: ``auto`` (cuda, then mps, then cpu) or a torch device string.
        dtype: ``auto`` (float32 on CPU, bfloat16/float16 on GPU) or a torch dtype name.
        prefix_cache: reuse the KV cache of the previous call when the prompt extends it (unbatched calls).
        model: an already-built model to wrap instead of loading ``path`` (tests, trainers sharing weights).
        max_batch: decode up to this many concurrent requests together (1: one at a time, with the prefix cache).
            Pair it with a rollout ``concurrency`` of the same size; worth it on a GPU.
        batch_wait_s: how long a batch waits for more requests after the first arrives.
        hand_back: once half of a batch's rows have stopped, return their replies and continue the running rows in
            the next batch, beside the turns that follow (needs the prefix cache; off: a batch runs until its
            longest reply ends and the episodes whose rows stopped wait for it).
        refill_wait_s: after a batch handed rows back, how long the next one waits at most for the episodes whose
            replies it returned to send their next turns.
        batch_prefill: read the new ids of a batch's prompts that extend a kept prefix (the next turns, the
            continuations) in one forward (off: one forward per prompt).
    """

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        tokenizer: str | Path | PreTrainedTokenizerBase | None = None,
        device: str = "auto",
        dtype: str = "auto",
        prefix_cache: bool = True,
        model: Any = None,
        max_batch: int = 1,
        batch_wait_s: float = 0.005,
        hand_back: bool = True,
        refill_wait_s: float = 0.05,
        batch_prefill: bool = True,
    ) -> None:
        import torch

        if model is None and path is None:
            raise ValueError("HFEngine needs a model path or a model")
        if max_batch < 1:
            raise ValueError(f"max_batch must be at least 1, got {max_batch}")
        self.max_batch = int(max_batch)
        self.batch_wait_s = max(0.0, float(batch_wait_s))
        self.refill_wait_s = max(0.0, float(refill_wait_s))
        self._waiting: list[_Waiting] = []
        self._batcher: asyncio.Task[None] | None = None
        self.device = _pick_device(device)
        if model is None:
            assert path is not None
            src = Path(path).expanduser()
            if not src.exists():
                raise ValueError(f"model path {str(src)!r} does not exist; pass a folder with config.json and "
                                 "weights, or a .gguf file")  # fmt: skip
            from transformers import AutoModelForCausalLM

            kwargs: dict[str, Any] = {"dtype": _pick_dtype(dtype, self.device)}
            if src.suffix == ".gguf":
                kwargs["gguf_file"] = src.name
                folder = src.parent
            else:
                folder = src
            try:
                model = AutoModelForCausalLM.from_pretrained(str(folder), **kwargs)
            except (OSError, ValueError) as exc:
                raise ValueError(f"transformers could not load a causal LM from {src}: {exc}") from exc
            if tokenizer is None:
                tokenizer = src if src.suffix == ".gguf" else folder  # a .gguf carries its own vocabulary
        elif tokenizer is None:
            raise ValueError("pass tokenizer= along with model=")
        self.path = Path(path) if path is not None else None
        self.model = model.to(self.device).eval()
        self.tokenizer = load_tokenizer(tokenizer)  # type: ignore[arg-type]
        config = self.model.config
        self.max_context: int | None = getattr(config, "max_position_embeddings", None)
        params = inspect.signature(self.model.forward).parameters
        self._logits_kw = "logits_to_keep" if "logits_to_keep" in params else None
        self._cache_kw = cache_keyword(self.model)
        # Cropping a KV cache is only sound when every layer keeps the whole past (no sliding window layers).
        layer_types = set(getattr(config, "layer_types", None) or ["full_attention"])
        self.prefix_cache = prefix_cache and not getattr(config, "sliding_window", None) and layer_types == {
            "full_attention"
        }
        self.hand_back = bool(hand_back) and self.prefix_cache  # a continuation reads the kept row, not its prompt
        self.batch_prefill = bool(batch_prefill)
        self._cache: Any = None
        self._cache_ids: list[int] = []
        self._rows: list[tuple[list[int], Any]] = []  # batched mode's prefix cache: (ids, cache), oldest first
        self._thread_lock = threading.Lock()
        self._lock: asyncio.Lock | None = None
        self._lock_loop: asyncio.AbstractEventLoop | None = None
        self._torch = torch

    def _async_lock(self) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        if self._lock is None or self._lock_loop is not loop:  # asyncio primitives belong to one loop
            self._lock, self._lock_loop = asyncio.Lock(), loop
        return self._lock

    async def generate(
        self, prompt_ids: list[int], *, max_tokens: int, temperature: float, stop_ids: list[int], seed: int | None
    ) -> Generation:
        """Sample up to ``max_tokens`` ids after ``prompt_ids``; stop after the first id in ``stop_ids``."""
        if self.max_batch > 1:
            return await self._generate_batched(BatchRequest(list(prompt_ids), max_tokens, temperature,
                                                             list(stop_ids), seed))  # fmt: skip
        async with self._async_lock():
            try:
                return await asyncio.to_thread(self.generate_sync, list(prompt_ids), max_tokens=max_tokens,
                                               temperature=temperature, stop_ids=list(stop_ids), seed=seed)  # fmt: skip
            except (RuntimeError, MemoryError) as exc:  # CUDA OOM, device lost: not the agent's fault
                self._cache, self._cache_ids = None, []
                raise InfraError(f"transformers generation failed: {exc}", kind="engine_error") from exc

    async def _generate_batched(self, request: BatchRequest) -> Generation:
        loop = asyncio.get_running_loop()
        if self._batcher is not None and self._batcher.get_loop() is not loop:  # a new event loop: start over
            self._batcher, self._waiting = None, []
        future: asyncio.Future[Generation] = loop.create_future()
        self._waiting.append(_Waiting(request, future))
        if self._batcher is None or self._batcher.done():
            self._batcher = loop.create_task(self._run_batches())
        return await future

    async def _run_batches(self) -> None:
        """Serve waiting requests, ``max_batch`` at a time, until none wait. Rows a batch hands back go first into
        the next one, which waits up to ``refill_wait_s`` for the turns of the episodes whose replies were returned."""
        expected = 0  # requests the next batch can count on: the previous batch's, when it handed rows back
        while self._waiting:
            await asyncio.sleep(self.batch_wait_s)  # let the other episodes' turns arrive
            waited, want = 0.0, min(expected, self.max_batch)
            while len(self._waiting) < want and waited < self.refill_wait_s:
                await asyncio.sleep(self.batch_wait_s or 0.001)
                waited += self.batch_wait_s or 0.001
            batch = [w for w in self._waiting[: self.max_batch] if not w.future.done()]  # done: cancelled
            del self._waiting[: self.max_batch]
            if not batch:
                continue
            try:
                gens = await asyncio.to_thread(self.generate_batch_sync, [w.request for w in batch],
                                               hand_back=self.hand_back, generators=[w.generator for w in batch])  # fmt: skip
            except (RuntimeError, MemoryError) as exc:  # CUDA OOM, device lost: not the agent's fault
                error: BaseException = InfraError(f"transformers generation failed: {exc}", kind="engine_error")
                gens = None
            except Exception as exc:  # TokenPolicy wraps it as a non-retryable InfraError
                error, gens = exc, None
            resumed = []
            for i, waiting in enumerate(batch):
                if waiting.future.done():
                    continue
                if gens is None:
                    waiting.future.set_exception(error)
                elif isinstance(gens[i], Unfinished):
                    resumed.append(waiting.resumed(gens[i]))
                else:
                    gen = gens[i]
                    waiting.future.set_result(gen if not waiting.ids else Generation(
                        ids=waiting.ids + gen.ids, logprobs=waiting.logprobs + gen.logprobs,
                        finish_reason=gen.finish_reason))  # fmt: skip
            self._waiting[:0] = resumed
            expected = len(batch) if resumed else 0

    def _new_cache(self) -> Any:
        from transformers import DynamicCache

        try:
            return DynamicCache(config=self.model.config)
        except TypeError:  # transformers < 4.56 builds it without a config
            return DynamicCache()

    def generate_batch_sync(self, requests: Sequence[BatchRequest], *, hand_back: bool = False,
                            generators: Sequence[Any] | None = None) -> list[Generation | Unfinished]:  # fmt: skip
        """Decode ``requests`` together (blocking); one :class:`Generation` per request, in order.

        ``hand_back``: once half of the rows have stopped, stop the batch and return an :class:`Unfinished` for each
        row still running (its keys and values kept in the prefix cache). ``generators``: per request, the
        ``torch.Generator`` of an :class:`Unfinished` being continued (``None``: a new one from the seed)."""
        try:
            return self._decode_batch(requests, hand_back=hand_back and self.prefix_cache, generators=generators)
        finally:  # the batch's caches are freed by now; each batch's have their own sizes, and the holes they
            release_freed_memory()  # leave in the heap would otherwise pile up (``core/memory.py``)

    def _decode_batch(self, requests: Sequence[BatchRequest], *, hand_back: bool = False,
                      generators: Sequence[Any] | None = None) -> list[Generation | Unfinished]:  # fmt: skip
        torch = self._torch
        out: list[Generation | Unfinished] = [Generation(ids=[], logprobs=[], finish_reason="length") for _ in requests]
        budgets: dict[int, int] = {}
        for i, req in enumerate(requests):
            room = req.max_tokens if self.max_context is None else min(req.max_tokens,
                                                                        self.max_context - len(req.prompt_ids))  # fmt: skip
            if room > 0 and req.prompt_ids:
                budgets[i] = room
        if not budgets:
            return out
        rows = list(budgets)
        with self._thread_lock, torch.inference_mode():
            # A prompt with nothing kept is read alone (the batch's later prompts may copy its prefix: the system
            # prompt); the prompts that extend a kept prefix (an episode's next turn, a continuation, a copied
            # system prompt) read their new ids in one forward. Then the caches are left-padded into one batch.
            first: list[Any] = [None] * len(rows)
            pieces: list[list[tuple[Any, int, int, int]]] = [[] for _ in rows]  # per row: (cache, row, start, stop)
            read: list[tuple[list[int], Any]] = []  # prompts this batch has read whole, for the later ones to copy
            together: list[tuple[int, list[int], Any, int]] = []
            for j, i in enumerate(rows):
                prompt = requests[i].prompt_ids
                row_cache, start = self._row_cache(prompt, read)
                if start and self.batch_prefill:
                    together.append((j, prompt[start:], row_cache, start))
                    continue
                first[j] = self._forward(prompt[start:], row_cache)
                pieces[j] = [(row_cache, 0, 0, len(prompt))]
                read.append((prompt, row_cache))
            for group in _similar_lengths(together, key=lambda part: len(part[1])):
                if len(group) == 1:  # nothing to batch with
                    j, new, row_cache, start = group[0]
                    first[j] = self._forward(new, row_cache)
                    pieces[j] = [(row_cache, 0, 0, start + len(new))]
                    continue
                both, logits, kept, fed_ids = self._read_together([(new, c, s) for _, new, c, s in group])
                for p, (j, new, _, start) in enumerate(group):
                    first[j] = logits[p]
                    pieces[j] = [(both, p, kept - start, kept), (both, p, kept + fed_ids - len(new), kept + fed_ids)]
            del together, read
            lengths = [len(requests[i].prompt_ids) for i in rows]
            width = max(lengths)
            cache = self._decode_cache(width + max(budgets.values()))
            for layer in range(_n_layers(pieces[0][0][0])):
                keys, values = [], []
                for row_pieces, n in zip(pieces, lengths, strict=True):
                    ks, vs = [], []
                    for source, row, start, stop in row_pieces:
                        k, v = _layer_kv(source, layer)
                        ks.append(k[row : row + 1, :, start:stop])
                        vs.append(v[row : row + 1, :, start:stop])
                    k, v = (ks[0], vs[0]) if len(ks) == 1 else (torch.cat(ks, dim=2), torch.cat(vs, dim=2))
                    keys.append(torch.nn.functional.pad(k, (0, 0, width - n, 0)))
                    values.append(torch.nn.functional.pad(v, (0, 0, width - n, 0)))
                cache.update(torch.cat(keys), torch.cat(values), layer)
            del pieces
            mask = torch.zeros((len(rows), width), dtype=torch.long, device=self.device)
            for j, n in enumerate(lengths):
                mask[j, width - n :] = 1
            position = torch.tensor(lengths, dtype=torch.long, device=self.device)
            logits = torch.stack(first)
            gens = []
            for i in rows:
                gen = generators[i] if generators is not None else None
                if gen is None:
                    seed = requests[i].seed
                    gen = torch.Generator(device=self.device)
                    gen.manual_seed(seed if seed is not None else secrets.randbits(63))
                gens.append(gen)
            temps = torch.tensor([max(requests[i].temperature, 0.0) or 1.0 for i in rows], device=self.device)
            stops = [set(requests[i].stop_ids) for i in rows]
            ids: list[list[int]] = [[] for _ in rows]
            logprobs: list[list[float]] = [[] for _ in rows]
            # Rows that finish stay in the batch (fed, not recorded) until half have finished: taking a row out
            # copies every layer's cache, so it is done a few times per batch rather than once per row.
            present = list(range(len(rows)))  # positions in ``rows`` held by the batch's cache, in batch order
            done = [False] * len(rows)
            fed = 0  # ids fed after the prompts, the same for every row
            while True:
                logp = torch.log_softmax(logits / temps[present].unsqueeze(1), dim=-1)  # greedy rows: T = 1
                picks = []
                for j, r in enumerate(present):
                    if requests[rows[r]].temperature > 0 and not done[r]:
                        picks.append(torch.multinomial(logp[j].exp(), 1, generator=gens[r]))
                    else:
                        picks.append(torch.argmax(logits[j]).reshape(1))
                tokens = torch.cat(picks)
                chosen = logp.gather(1, tokens.unsqueeze(1)).squeeze(1)
                for j, (r, token, lp) in enumerate(zip(present, tokens.tolist(), chosen.tolist(), strict=True)):
                    if done[r]:
                        continue
                    ids[r].append(token)
                    logprobs[r].append(lp)
                    if token in stops[r]:
                        out[rows[r]] = Generation(ids=ids[r], logprobs=logprobs[r], finish_reason="stop")
                    elif len(ids[r]) >= budgets[rows[r]]:
                        out[rows[r]] = Generation(ids=ids[r], logprobs=logprobs[r], finish_reason="length")
                    else:
                        continue
                    done[r] = True
                    if self.prefix_cache:  # the row's keys and values: its prompt and every sampled id but the last
                        self._keep_row(cache, j, width - lengths[r], width + fed, requests[rows[r]].prompt_ids + ids[r][:-1])
                running = [j for j, r in enumerate(present) if not done[r]]
                if not running:
                    break
                if hand_back and len(running) <= len(rows) // 2:  # return the finished; the rest go on later
                    for j in running:
                        r = present[j]
                        self._keep_row(cache, j, width - lengths[r], width + fed, requests[rows[r]].prompt_ids + ids[r][:-1])
                        out[rows[r]] = Unfinished(ids=ids[r], logprobs=logprobs[r], generator=gens[r])
                    break
                if len(running) <= len(present) // 2:
                    index = torch.tensor(running, dtype=torch.long, device=self.device)
                    _select_rows(cache, index)
                    mask, position, tokens = mask[index], position[index], tokens[index]
                    present = [present[j] for j in running]
                mask = torch.cat([mask, mask.new_ones((len(present), 1))], dim=1)
                result = self.model(input_ids=tokens.unsqueeze(1), attention_mask=mask,
                                    position_ids=position.unsqueeze(1), **self._cache_kwargs(cache))  # fmt: skip
                logits = result.logits[:, -1].float()
                position = position + 1
                fed += 1
        return out

    def _row_cache(self, prompt_ids: list[int], siblings: Sequence[tuple[list[int], Any]] = ()) -> tuple[Any, int]:
        """Batched mode: a cache holding the longest prefix of ``prompt_ids`` that a kept sequence shares, and that
        prefix's length (a fresh cache and 0 when none shares one). A kept sequence the prompt extends is the same
        episode's previous turn: it is taken out of the pool and extended. One that only shares a prefix (another
        episode's: the system prompt, or a trial of the same task) is copied up to it and stays for its own
        episode's next turn; so are ``siblings``, the prompts this batch has read already (the first turns of a
        batch of episodes share their system prompt)."""
        best, common, sibling = -1, 0, None
        if self.prefix_cache:
            for n, (ids, _) in enumerate(self._rows):
                shared = lcp(ids, prompt_ids)
                if shared > common or (shared == common > 0 and shared == len(ids)):
                    best, common = n, shared
            for ids, cache in siblings:
                shared = lcp(ids, prompt_ids)
                if shared > common:
                    best, common, sibling = -1, shared, cache
        keep = min(common, len(prompt_ids) - 1)
        if keep <= 0:
            return self._new_cache(), 0
        if sibling is not None:
            return self._copy_rows(sibling, 0, 0, keep), keep
        ids, cache = self._rows[best]
        if keep == len(ids):
            del self._rows[best]
            return cache, keep
        if common == len(ids):  # the whole entry but for the one id the prompt must feed: extend it
            del self._rows[best]
            cache.crop(-(len(ids) - keep))
            return cache, keep
        return self._copy_rows(cache, 0, 0, keep), keep

    def _copy_rows(self, source: Any, row: int, start: int, stop: int | None) -> Any:
        """A new cache holding positions ``start:stop`` of row ``row`` of ``source`` (a copy, every layer)."""
        cache = self._new_cache()
        for layer in range(_n_layers(source)):
            k, v = _layer_kv(source, layer)
            cache.update(k[row : row + 1, :, start:stop].clone(), v[row : row + 1, :, start:stop].clone(), layer)
        return cache

    def _keep_row(self, batch_cache: Any, row: int, start: int, stop: int, ids: list[int]) -> None:
        """Copy positions ``start:stop`` of row ``row`` of the batch's cache (the row without its left padding)
        into the pool as ``ids``."""
        self._rows.append((ids, self._copy_rows(batch_cache, row, start, stop)))
        del self._rows[: max(0, len(self._rows) - 2 * self.max_batch)]

    def _decode_cache(self, length: int) -> Any:
        """The batch's cache: a ``StaticCache`` of ``length`` positions where this transformers has one that takes
        its length alone (written in place; a ``DynamicCache`` concatenates, copying the whole batch's cache on
        every decoded token), else a ``DynamicCache``."""
        try:
            from transformers import StaticCache

            return StaticCache(config=self.model.config, max_cache_len=length)
        except (ImportError, TypeError, ValueError):
            return self._new_cache()

    def _cache_kwargs(self, cache: Any) -> dict[str, Any]:
        """Extend ``cache`` and compute logits at the last position only (where the model can be told so)."""
        kwargs: dict[str, Any] = {self._cache_kw: cache, "use_cache": True}
        if self._logits_kw:
            kwargs[self._logits_kw] = 1
        return kwargs

    def _forward(self, ids: list[int], cache: Any) -> Any:
        out = self.model(input_ids=self._torch.tensor([ids], device=self.device), **self._cache_kwargs(cache))
        return out.logits[0, -1].float()

    def _read_together(self, parts: Sequence[tuple[list[int], Any, int]]) -> tuple[Any, Any, int, int]:
        """Read several rows' new ids in one forward: ``parts`` holds, per row, its new ids, a one-row cache of the
        prefix they extend and that prefix's length. One prompt of a few hundred ids read alone keeps a CPU's
        matrix units half idle; eight read together cost little more than one.

        The rows' prefixes are right-aligned in a region as wide as the longest, their new ids right-aligned in a
        block as wide as the longest that follows it; the mask hides the padding in both and each id gets its own
        row's position, so every row computes what it would alone. Returns the batch's cache, the logits after
        each row's last id, the prefix region's width and the block's (row ``p``'s keys and values lie at
        ``kept - start:kept`` and ``kept + block - len(ids):kept + block``)."""
        torch = self._torch
        kept = max(start for _, _, start in parts)
        block = max(len(ids) for ids, _, _ in parts)
        both = self._new_cache()
        for layer in range(_n_layers(parts[0][1])):
            keys, values = [], []
            for _, cache, start in parts:
                k, v = _layer_kv(cache, layer)
                keys.append(torch.nn.functional.pad(k, (0, 0, kept - start, 0)))
                values.append(torch.nn.functional.pad(v, (0, 0, kept - start, 0)))
            both.update(torch.cat(keys), torch.cat(values), layer)
        ids = torch.zeros((len(parts), block), dtype=torch.long, device=self.device)
        mask = torch.zeros((len(parts), kept + block), dtype=torch.long, device=self.device)
        position = torch.zeros((len(parts), block), dtype=torch.long, device=self.device)
        for p, (new, _, start) in enumerate(parts):
            pad = block - len(new)
            ids[p, pad:] = torch.tensor(new, dtype=torch.long, device=self.device)
            mask[p, kept - start : kept] = 1
            mask[p, kept + pad :] = 1
            position[p] = start  # the padding's queries see the row's prefix, so no row of the mask is empty
            position[p, pad:] = torch.arange(start, start + len(new), device=self.device)
        out = self.model(input_ids=ids, attention_mask=mask, position_ids=position, **self._cache_kwargs(both))
        return both, out.logits[:, -1].float(), kept, block

    def _start_cache(self, prompt_ids: list[int]) -> tuple[Any, int]:
        """A KV cache holding a prefix of ``prompt_ids`` and that prefix's length (at most len - 1, so the last
        prompt token is always fed and yields the first logits)."""
        if self.prefix_cache and self._cache is not None:
            common = 0
            for a, b in zip(self._cache_ids, prompt_ids, strict=False):
                if a != b:
                    break
                common += 1
            keep = min(common, len(prompt_ids) - 1)
            if keep > 0:
                drop = len(self._cache_ids) - keep
                if drop:
                    self._cache.crop(-drop)  # negative: remove that many from the end (every transformers)
                return self._cache, keep
        return self._new_cache(), 0

    def generate_sync(
        self, prompt_ids: list[int], *, max_tokens: int, temperature: float, stop_ids: list[int], seed: int | None
    ) -> Generation:
        """The blocking generation (one call at a time; ``generate`` is the async entry point)."""
        torch = self._torch
        budget = max_tokens if self.max_context is None else min(max_tokens, self.max_context - len(prompt_ids))
        if budget <= 0 or not prompt_ids:
            return Generation(ids=[], logprobs=[], finish_reason="length")
        stops = set(stop_ids)
        with self._thread_lock, torch.inference_mode():
            gen = torch.Generator(device=self.device)
            gen.manual_seed(seed if seed is not None else secrets.randbits(63))
            cache, start = self._start_cache(prompt_ids)
            self._cache, self._cache_ids = None, []  # being extended: invalid until this call completes
            logits = self._forward(prompt_ids[start:], cache)
            ids: list[int] = []
            logprobs: list[float] = []
            finish = "length"
            for step in range(budget):
                if temperature > 0:
                    logp = torch.log_softmax(logits / temperature, dim=-1)
                    token = int(torch.multinomial(logp.exp(), 1, generator=gen).item())
                else:
                    logp = torch.log_softmax(logits, dim=-1)
                    token = int(torch.argmax(logits).item())
                ids.append(token)
                logprobs.append(float(logp[token].item()))
                if token in stops:
                    finish = "stop"
                    break
                if step + 1 < budget:
                    logits = self._forward([token], cache)
            if self.prefix_cache:  # the cache now holds the prompt and every sampled id but the last
                self._cache, self._cache_ids = cache, prompt_ids + ids[:-1]
        return Generation(ids=ids, logprobs=logprobs, finish_reason=finish)  # type: ignore[arg-type]

    def reset_cache(self) -> None:
        """Forget the KV prefix cache. Call it after every change to the model's weights (a training update):
        the cached keys and values were computed by the old weights, and a prompt that extends the cached one would
        otherwise be continued from them, sampling from a policy that is neither the old nor the new one."""
        with self._thread_lock:
            self._cache, self._cache_ids, self._rows = None, [], []
            release_freed_memory()

    def close(self) -> None:
        """Drop the KV cache and the model reference (frees GPU memory once nothing else holds the model)."""
        self._cache, self._cache_ids, self._rows = None, [], []
        self.model = None
        release_freed_memory()

    def __repr__(self) -> str:
        return f"HFEngine({str(self.path) if self.path else 'model'!r}, device={self.device!r})"


def sampling_engine(model: Any, tokenizer: Any, *, concurrency: int = 1) -> HFEngine:
    """The engine a trainer samples its own model with (RFT, GRPO): it decodes the ``concurrency`` episodes in
    flight together. One sequence at a time reads every weight per token and leaves a GPU almost idle; a batch
    reads them once for all its rows, on a CPU too (``docs/benchmarks.md``)."""
    device = str(next(model.parameters()).device)
    return HFEngine(model=model, tokenizer=tokenizer, device=device, prefix_cache=True, max_batch=max(1, concurrency))
