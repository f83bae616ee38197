"""The prompt a step's conversations share, run once per step instead of once per conversation (exact).

Unpacked training (one conversation per micro-batch under a plain causal mask, what a CPU runs fastest, see
``docs/benchmarks.md``) runs every conversation from its first token. The conversations of a step open with the
same tokens on which nothing is learnt: the system prompt with the tool signatures, about half of a retail
conversation, and for a GRPO group also the user's opening. :class:`SharedPrefix` runs those ``P`` tokens once,
keeping their keys and values; each conversation then runs only its own tokens, attending to them through the
model's KV cache (positions from ``P``). The attention a suffix token computes is the one it computes in the whole
conversation: the same keys and values at the same positions, a causal mask aligned to the end.

The gradient is exact too. Each conversation's backward pass stops at a detached copy of the prefix's keys and
values (leaves that require grad), where the gradients of all conversations add up; :meth:`SharedPrefix.backward`
then runs the prefix's backward pass once with that sum. Since backpropagation is linear in the upstream gradient,

    dL/dθ = Σ_i ∂L_i/∂θ |_(own tokens of i)  +  (∂KV/∂θ)ᵀ · Σ_i ∂L_i/∂KV

is what backpropagating every conversation through its own copy of the prefix gives, for ``1/n`` of the prefix's
cost. Memory: the prefix's activations live for the whole step (as one conversation's would), plus one
conversation's own at a time. With dropout on (a training-mode model with dropout > 0, LoRA dropout) the step's
conversations share one dropout draw of the prefix: the same expectation, correlated noise; the embedded models
have none.

Only unpacked batches (2D attention mask) share this way; packed rows share their prefix inside the row
(:func:`toolworld.train.data.pack`). A prefix never holds a token with loss, and the token after it has none
either (it has no logits to be predicted from in the suffix's forward pass).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from ..rollout.engines.hf import returned_cache
from .data import MIN_SHARED_PREFIX, Batch
from .sft import base_model, checkpoints_layers


def kv_shareable(config: Any) -> bool:
    """Whether a trainer's configuration shares the prompt this way: asked to share (``share_prefix``), unpacked,
    and without recomputed layers (a checkpointed layer keeps no KV cache)."""
    return bool(config.share_prefix and not config.packing and not config.gradient_checkpointing)


def shared_length(batches: Sequence[Batch]) -> int:
    """How many leading tokens every row of every batch has in common, with no loss on them or on the token after
    them (0 when fewer than two rows, a packed batch, or nothing shared)."""
    if sum(b.input_ids.shape[0] for b in batches) < 2 or any(b.packed or b.past is not None for b in batches):
        return 0
    rows = [row for b in batches for row in b.input_ids]
    masks = [row for b in batches for row in b.loss_mask]
    first = rows[0]
    n = min(int(row.sum().item()) for b in batches for row in b.attention_mask) - 1  # each row keeps a token
    for row in rows[1:]:
        width = min(n, row.shape[0])
        differ = (row[:width] != first[:width]).nonzero()
        n = int(differ[0, 0]) if differ.numel() else width
    for mask in masks:  # the prefix and the first token after it carry no loss
        learnt = (mask[:n + 1] > 0).nonzero()
        if learnt.numel():
            n = min(n, int(learnt[0, 0]) - 1)
    return max(n, 0)


class SharedPrefix:
    """A step's shared prefix, run once; :attr:`batches` are what to compute the step's losses on.

    Use::

        prefix = SharedPrefix(model, micro)                # the prefix's forward pass (none if nothing is shared)
        for batch in prefix.batches:
            loss_of(model, batch).backward()                # each conversation's own tokens
        prefix.backward()                                   # the prefix's share of the gradient, once

    Run the constructor under the same autocast as the losses. ``batches`` are ``micro`` themselves when not
    ``enabled`` or fewer than ``min_tokens`` tokens are shared; then :meth:`backward` does nothing. A prefix built under ``torch.no_grad``
    serves forward passes only (logprobs of a reference model), and :meth:`backward` is then not needed.
    """

    def __init__(self, model: Any, micro: Sequence[Batch], *, enabled: bool = True,
                 min_tokens: int = MIN_SHARED_PREFIX) -> None:  # fmt: skip
        import torch

        self.length = shared_length(micro) if enabled else 0
        self._kv: list[Any] = []
        self._leaves: list[Any] = []
        if getattr(model, "training", False) and checkpoints_layers(model):  # a reference (AdapterOff) is not
            self.length = 0  # the caller's own checkpointing: transformers keeps no cache while training
        if self.length < min_tokens:
            self.length = 0
            self.batches = list(micro)
            return
        p = self.length
        ids = micro[0].input_ids[:1, :p]
        out = model(input_ids=ids, position_ids=torch.arange(p, device=ids.device)[None], use_cache=True,
                    **_one_logit(model))  # fmt: skip
        cache = returned_cache(out)
        if cache is None:  # a model that returns no cache: run every conversation whole
            self.length, self.batches = 0, list(micro)
            return
        for layer in cache.layers:
            self._kv += [layer.keys, layer.values]
        # float32 leaves: the conversations' gradients add up there, which bf16 would round at every addition
        self._leaves = [t.detach().float().requires_grad_(t.requires_grad) for t in self._kv]
        self._config = getattr(base_model(model), "config", None)
        self.batches = [self._suffix(b) for b in micro]

    def _suffix(self, batch: Batch) -> Batch:
        """``batch`` without its first ``length`` tokens, continuing from the prefix's keys and values."""
        p = self.length
        prev = batch.predecessors()[:, p:] - p
        return replace(batch, input_ids=batch.input_ids[:, p:], attention_mask=batch.attention_mask[:, p:],
                       position_ids=batch.position_ids[:, p:],
                       loss_mask=batch.loss_mask[:, p:], old_logprobs=batch.old_logprobs[:, p:],
                       advantages=batch.advantages[:, p:], segment_ids=batch.segment_ids[:, p:],
                       prev_index=prev.clamp(min=-1), past=self._cache_for(batch.input_ids.shape[0]))  # fmt: skip

    def _cache_for(self, rows: int) -> Any:
        leaves, kv, config = self._leaves, self._kv, self._config

        def fresh() -> Any:  # a forward pass appends to its cache: every pass gets its own, over the same leaves
            from transformers import DynamicCache

            if not leaves:
                raise RuntimeError("this batch continues a shared prefix whose step is over (backward() was called)")
            typed = [leaf.to(t.dtype).expand(rows, -1, -1, -1) for leaf, t in zip(leaves, kv, strict=True)]
            return DynamicCache([(typed[i], typed[i + 1]) for i in range(0, len(typed), 2)], config=config)

        return fresh

    def slice(self, tensor: Any) -> Any:
        """A ``[B, T]`` per-token tensor of a whole batch (logprobs computed before) cut like :attr:`batches`."""
        return tensor if tensor is None or not self.length else tensor[:, self.length :]

    def backward(self) -> None:
        """The prefix's backward pass, with the gradients its keys and values got from every conversation."""
        import torch

        pairs = [(kv, leaf.grad) for kv, leaf in zip(self._kv, self._leaves, strict=True)
                 if kv.requires_grad and leaf.grad is not None]  # fmt: skip
        if pairs:
            torch.autograd.backward([kv for kv, _ in pairs], [g.to(kv.dtype) for kv, g in pairs])
        # in place: the suffix batches' caches hold these lists, and the next step's peak must not hold them too
        self._kv.clear()
        self._leaves.clear()
        self.batches = []


def _one_logit(model: Any) -> dict[str, Any]:
    """The prefix's logits are never read: ask for one position's where the forward takes ``logits_to_keep``."""
    from .logprobs import keeps_logits

    return {"logits_to_keep": 1} if keeps_logits(model) else {}
