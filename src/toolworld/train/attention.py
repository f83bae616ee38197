"""Attention of a continuation over kept keys and values, in two parts that a CPU's flash kernel runs unmasked.

A conversation trained after a shared prefix (:class:`toolworld.train.prefix.SharedPrefix`) runs its own ``S``
tokens against ``P + S`` keys: all ``P`` of the prefix, and its own under a causal mask aligned to the end (query
``i`` sees keys ``0 .. P + i``). PyTorch's CPU flash kernel aligns ``is_causal`` to the start, so transformers hands
SDPA that pattern as an explicit mask, and a masked kernel computes every block, the ``S² / 2`` scores the mask
then throws away included. After a retail prompt (``P`` ≈ 2.1k) that is up to a third of the attention for a
conversation's own 2.4–4k tokens, and a tenth for the few hundred of a short info task; and attention is about
half of a training step at these lengths (SmolLM2-135M has 30 layers of width 576).

:func:`split_attention` computes the same attention as two kernel calls without a mask: the queries against the
prefix's keys (every query sees all of them), and against their own keys with ``is_causal`` (square, so the
kernel's start-aligned mask is the right one and its masked blocks are skipped). Each call returns its output
``O_k`` and the log-sum-exp ``L_k`` of its scores; the whole attention is their softmax-weighted sum

    L = logaddexp(L_1, L_2),    O = exp(L_1 − L) · O_1 + exp(L_2 − L) · O_2

exactly (the softmax over all keys, grouped by part). The backward pass is exact too: the flash backward of a set
of keys needs only the whole attention's ``O`` and ``L`` (``dS = P ⊙ (dP − rowsum(dO ⊙ O))`` with
``P = exp(S − L)``), so each part's backward, handed the merged ``O`` and ``L``, returns that part's key and value
gradients and its share of the query gradient, and the shares add up.

:func:`use_split_attention` installs it on a transformers model as an attention implementation
(``toolworld_sdpa``) that does this where it applies (a CPU, several queries against more keys, the mask exactly
end-aligned causal: no padding, no packing, no dropout, no soft-capping) and is transformers' own SDPA everywhere
else: a first forward, decoding, a padded batch, a GPU.
"""

from __future__ import annotations

import weakref
from typing import Any

import torch

#: The attention implementation :func:`use_split_attention` registers and sets.
SPLIT_SDPA = "toolworld_sdpa"


class _SplitAttention(torch.autograd.Function):
    """``softmax(q·kᵀ·scale + end-aligned causal mask)·v`` over ``[prefix keys, own keys]``, from two unmasked
    flash calls (forward and backward); ``[B, H, S, D]`` in and out, keys and values already one per query head."""

    @staticmethod
    def forward(ctx: Any, q: torch.Tensor, k_pre: torch.Tensor, v_pre: torch.Tensor, k_own: torch.Tensor,
                v_own: torch.Tensor, scale: float | None) -> torch.Tensor:  # fmt: skip
        flash = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu
        o_pre, l_pre = flash(q, k_pre, v_pre, 0.0, False, scale=scale)
        o_own, l_own = flash(q, k_own, v_own, 0.0, True, scale=scale)
        lse = torch.logaddexp(l_pre, l_own)
        wide = torch.promote_types(q.dtype, torch.float32)  # bfloat16 parts are merged in float32
        out = (o_pre.to(wide) * (l_pre - lse).exp().unsqueeze(-1)
               + o_own.to(wide) * (l_own - lse).exp().unsqueeze(-1)).to(q.dtype)  # fmt: skip
        ctx.save_for_backward(q, k_pre, v_pre, k_own, v_own, out, lse)
        ctx.scale = scale
        return out

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[Any, ...]:
        q, k_pre, v_pre, k_own, v_own, out, lse = ctx.saved_tensors
        backward = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward
        grad = grad.contiguous()
        dq_pre, dk_pre, dv_pre = backward(grad, q, k_pre, v_pre, out, lse, 0.0, False, scale=ctx.scale)
        dq_own, dk_own, dv_own = backward(grad, q, k_own, v_own, out, lse, 0.0, True, scale=ctx.scale)
        return dq_pre + dq_own, dk_pre, dv_pre, dk_own, dv_own, None


def split_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float | None = None) -> torch.Tensor:
    """Attention of ``q`` (``[B, H, S, D]``, the last ``S`` positions) over ``k``, ``v`` (``[B, H, P + S, D]``)
    under the end-aligned causal mask, on a CPU, exact to float rounding (see the module's docstring). Under
    autocast the three are cast to its dtype first, as SDPA's are (a prefix kept in float32 meets bfloat16
    queries)."""
    s, n = q.shape[2], k.shape[2]
    if not 0 < s < n:
        raise ValueError(f"split attention needs fewer queries than keys and at least one of each: {s} and {n}")
    p = n - s
    if torch.is_autocast_enabled(q.device.type):  # what SDPA does under autocast: all three in its dtype
        dtype = torch.get_autocast_dtype(q.device.type)
        q, k, v = q.to(dtype), k.to(dtype), v.to(dtype)
    return _SplitAttention.apply(q, k[:, :, :p], v[:, :, :p], k[:, :, p:], v[:, :, p:], scale)


#: The last mask judged by :func:`end_causal`: a weak reference to it, its version counter, and the verdict.
_verdict: tuple[weakref.ref[torch.Tensor], int, bool] | None = None


def end_causal(mask: torch.Tensor | None, s: int, n: int) -> bool:
    """Whether a ``[B, 1|H, S, N]`` SDPA mask (boolean, or additive with 0 where allowed) lets query ``i`` see
    exactly keys ``0 .. N − S + i`` in every row.

    A model's layers share one mask tensor, so the verdict is kept for that tensor (held weakly, with its version
    counter, so that neither a new mask at a freed one's address nor one written in place can reuse it). A tensor
    made under ``torch.inference_mode`` (a sampling engine's) has no version counter, so it is judged every time.
    """
    global _verdict
    if mask is None or mask.dim() != 4 or mask.shape[-2:] != (s, n):
        return False
    version = None if mask.is_inference() else mask._version
    if version is not None and _verdict is not None and _verdict[0]() is mask and _verdict[1] == version:
        return _verdict[2]
    allowed = mask if mask.dtype == torch.bool else mask == 0
    expected = torch.ones(s, n, dtype=torch.bool, device=mask.device).tril(n - s)
    ok = bool(torch.equal(allowed, expected.expand_as(allowed)))
    if version is not None:
        _verdict = (weakref.ref(mask), version, ok)
    return ok


def split_sdpa_forward(module: Any, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                       attention_mask: torch.Tensor | None, dropout: float = 0.0, scaling: float | None = None,
                       **kwargs: Any) -> tuple[torch.Tensor, None]:  # fmt: skip
    """transformers' attention-function signature: :func:`split_attention` where it is exact and pays, SDPA
    otherwise."""
    from transformers.integrations.sdpa_attention import repeat_kv, sdpa_attention_forward

    s, n = query.shape[2], key.shape[2]
    if (query.device.type == "cpu" and 1 < s < n and not dropout and kwargs.get("softcap") is None
            and kwargs.get("position_bias") is None and end_causal(attention_mask, s, n)):  # fmt: skip
        groups = getattr(module, "num_key_value_groups", 1)
        out = split_attention(query, repeat_kv(key, groups), repeat_kv(value, groups), scaling)
        return out.transpose(1, 2).contiguous(), None
    return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                  **kwargs)  # fmt: skip


def use_split_attention(model: Any) -> bool:
    """Switch a transformers model that runs SDPA to ``toolworld_sdpa`` (SDPA's masks, :func:`split_sdpa_forward`
    for the attention). Returns whether the model now runs it: a model on another implementation (eager, a
    kernel), or a transformers without these interfaces, is left as it is. ``model.set_attn_implementation("sdpa")``
    switches back; a saved model records no attention implementation, so it loads anywhere as before."""
    try:
        from transformers import AttentionInterface
        from transformers.masking_utils import AttentionMaskInterface, sdpa_mask
    except ImportError:
        return False
    if not hasattr(torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu_backward"):
        return False
    current = getattr(getattr(model, "config", None), "_attn_implementation", None)
    if current == SPLIT_SDPA:
        return True
    if current != "sdpa" or not hasattr(model, "set_attn_implementation"):
        return False
    AttentionInterface.register(SPLIT_SDPA, split_sdpa_forward)
    AttentionMaskInterface.register(SPLIT_SDPA, sdpa_mask)
    model.set_attn_implementation(SPLIT_SDPA)
    return True
