"""The ``hf`` engine: a transformers causal LM sampled by our own loop, on CPU or GPU.

``model.generate`` hides what RL needs to see, so the loop here is explicit: one forward pass per token with a
KV cache, ``log_softmax(logits / T)`` in float32, a draw from that distribution with a seeded
``torch.Generator``, and the drawn id's logprob under exactly that distribution (at ``T == 0``, greedy, the
untempered model logprob). The same seed and prompt give the same ids.

Multi-turn rollouts resend a prompt that extends the previous one, so the engine keeps the KV cache of its last
sequence and, when the next prompt shares a prefix with it, crops the cache to that prefix instead of
re-reading the whole conversation. One model serves many episodes: calls run one at a time in a worker thread
(``asyncio.to_thread`` behind a lock), keeping the event loop free for the episodes' tool calls.
"""

from __future__ import annotations

import asyncio
import inspect
import secrets
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...core.errors import InfraError
from ...tokens.tokenizers import load_tokenizer
from ..token_policy import Generation

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase


def _pick_device(device: str) -> str:
    import torch

    if device != "auto":
        return device
    if torch.cuda.is_available():
        return "cuda"
    mps = getattr(torch.backends, "mps", None)
    return "mps" if mps is not None and mps.is_available() else "cpu"


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
    return value


class HFEngine:
    """Sample token ids and their logprobs from a transformers causal LM.

    Args:
        path: a model folder (``config.json`` + weights) or a ``.gguf`` file, which transformers dequantizes
            (the route for training the embedded model).
        tokenizer: tokenizer folder / ``.gguf`` / loaded tokenizer; default: the model's own.
        device: ``auto`` (cuda, then mps, then cpu) or a torch device string.
        dtype: ``auto`` (float32 on CPU, bfloat16/float16 on GPU) or a torch dtype name.
        prefix_cache: reuse the KV cache of the previous call when the prompt extends it.
        model: an already-built model to wrap instead of loading ``path`` (tests, trainers sharing weights).
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
    ) -> None:
        import torch

        if model is None and path is None:
            raise ValueError("HFEngine needs a model path or a model")
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
        # Cropping a KV cache is only sound when every layer keeps the whole past (no sliding window layers).
        layer_types = set(getattr(config, "layer_types", None) or ["full_attention"])
        self.prefix_cache = prefix_cache and not getattr(config, "sliding_window", None) and layer_types == {
            "full_attention"
        }
        self._cache: Any = None
        self._cache_ids: list[int] = []
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
        async with self._async_lock():
            try:
                return await asyncio.to_thread(self.generate_sync, list(prompt_ids), max_tokens=max_tokens,
                                               temperature=temperature, stop_ids=list(stop_ids), seed=seed)  # fmt: skip
            except (RuntimeError, MemoryError) as exc:  # CUDA OOM, device lost: not the agent's fault
                self._cache, self._cache_ids = None, []
                raise InfraError(f"transformers generation failed: {exc}", kind="engine_error") from exc

    def _forward(self, ids: list[int], cache: Any) -> Any:
        torch = self._torch
        kwargs: dict[str, Any] = {"past_key_values": cache, "use_cache": True}
        if self._logits_kw:
            kwargs[self._logits_kw] = 1
        out = self.model(input_ids=torch.tensor([ids], device=self.device), **kwargs)
        return out.logits[0, -1].float()

    def _start_cache(self, prompt_ids: list[int]) -> tuple[Any, int]:
        """A KV cache holding a prefix of ``prompt_ids`` and that prefix's length (at most len - 1, so the last
        prompt token is always fed and yields the first logits)."""
        from transformers import DynamicCache

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
        try:
            return DynamicCache(config=self.model.config), 0
        except TypeError:  # transformers < 4.56 builds it without a config
            return DynamicCache(), 0

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
            self._cache, self._cache_ids = None, []

    def close(self) -> None:
        """Drop the KV cache and the model reference (frees GPU memory once nothing else holds the model)."""
        self._cache, self._cache_ids = None, []
        self.model = None

    def __repr__(self) -> str:
        return f"HFEngine({str(self.path) if self.path else 'model'!r}, device={self.device!r})"
