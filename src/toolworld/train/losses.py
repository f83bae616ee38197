"""Losses on a :class:`~toolworld.train.data.Batch`: supervised NLL, the clipped policy-gradient surrogate and a
floor under the likelihood of conversations known good.

All are token means over ``loss_mask`` across the whole batch (not a mean of per-sequence means), so a long
episode weighs by its tokens and a short one is not up-weighted (the DAPO / Dr. GRPO aggregation).
"""

from __future__ import annotations

from typing import Any

import torch

from .advantages import kl_k3, tis_weights
from .data import Batch, TrainDataError
from .logprobs import token_logprobs


def _masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return (x * mask).sum() / mask.sum().clamp(min=1.0)


def _mask(model: Any, batch: Batch) -> torch.Tensor:
    mask = batch.loss_mask.to(next(model.parameters()).device)
    if not bool(mask.any()):
        raise TrainDataError("empty_loss_mask", "the batch has no token with loss_mask 1: nothing to train on "
                             "(a rollout that sampled nothing, or SFT rows without assistant turns)")  # fmt: skip
    return mask


def sft_loss(model: Any, batch: Batch, *, logprobs: torch.Tensor | None = None) -> torch.Tensor:
    """Mean negative log-likelihood of the tokens under ``loss_mask``: ``-sum(m_t log p(x_t)) / sum(m_t)``.

    A sequence's first token has no context to be predicted from and scores 0; chat data never masks it in.
    ``logprobs`` (``token_logprobs(model, batch)``, with their graph) spares the forward pass where the caller has
    them already.
    """
    mask = _mask(model, batch)
    return -_masked_mean(token_logprobs(model, batch) if logprobs is None else logprobs, mask)


def floor_loss(logprobs: torch.Tensor, ref_logprobs: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, float]:
    """One-sided k3 to the reference over ``mask``: the likelihood of tokens known good held at the reference's.

        L = sum_t m_t [log pi(x_t) < log ref(x_t)] k3_t / sum_t m_t,   k3_t = e^d - d - 1,  d = log ref - log pi

    On a conversation that passed (the gold SFT learnt), a token the update made less likely than the reference
    did is pulled back (gradient ``-(e^d - 1)`` on ``log pi``, ~``-d`` near the reference), and one it made more
    likely is left alone: unlike SFT's loss, nothing pushes the conversation past where the reference had it, and
    unlike the two-sided KL, nothing holds back a gain on it. ``ref_logprobs`` are detached. Returns the loss and
    the fraction of masked tokens below the reference.
    """
    ref = ref_logprobs.to(logprobs.device).detach()
    mask = mask.to(logprobs.device)
    below = (logprobs.detach() < ref).to(logprobs.dtype)
    loss = _masked_mean(kl_k3(logprobs, ref) * below, mask)
    return loss, float(_masked_mean(below, mask))


def policy_loss(model: Any, batch: Batch, *, clip: float = 0.2, tis_cap: float | None = 2.0, kl_coef: float = 0.0,
                ref_logprobs: torch.Tensor | None = None,
                old_logprobs: torch.Tensor | None = None,
                temperature: float = 1.0) -> tuple[torch.Tensor, dict[str, float]]:  # fmt: skip
    """PPO / GRPO clipped surrogate with truncated importance sampling and an optional k3 KL penalty.

    Per token, with ``pi`` the trainer now, ``pi_old`` the trainer before this batch's updates and ``mu`` the
    sampler (``batch.old_logprobs``, as stored at rollout):

        r_t = pi(x_t) / pi_old(x_t)                  w_t = min(pi_old(x_t) / mu(x_t), C)   (detached)
        L_t = -w_t * min(r_t A_t, clip(r_t, 1 - eps, 1 + eps) A_t) + beta * k3(pi, pi_ref)
        L   = sum_t m_t L_t / sum_t m_t

    Splitting ``mu`` from ``pi_old`` keeps the two corrections apart: the clip bounds the policy's own update
    while ``w_t`` absorbs the sampler/trainer mismatch, which clipping would otherwise treat as policy drift and
    cut off. ``old_logprobs`` (the trainer's ``[B, T]`` logprobs before its first update on this batch) defaults
    to the current ones detached, which is exact for one update per batch (r_t = 1 with gradient
    ``grad log pi``). ``tis_cap=None`` disables the weight. ``ref_logprobs`` is needed when ``kl_coef > 0``.
    ``temperature`` is the one the trials were sampled at: ``pi`` is then ``softmax(logits / T)``, the policy that
    drew them (as ``mu`` is stored), and ``old_logprobs`` / ``ref_logprobs`` must be taken at it too.

    Stats: ``clip_frac`` (tokens whose ratio left the trust region), ``ratio`` (mean r_t), ``kl`` (mean k3, 0
    without a reference), ``logprob_gap`` (mean |log pi_old - log mu|), ``tis`` (mean weight) and ``tis_capped``
    (fraction of tokens at the cap), all over ``loss_mask``.
    """
    if kl_coef and ref_logprobs is None:
        raise TrainDataError("missing_reference", f"kl_coef={kl_coef} needs ref_logprobs (token_logprobs of the "
                             "reference model on the same batch), or kl_coef=0")  # fmt: skip
    mask = _mask(model, batch)
    device = mask.device
    logp = token_logprobs(model, batch, temperature=temperature)
    old = logp.detach() if old_logprobs is None else old_logprobs.to(device).detach()
    rollout = batch.old_logprobs.to(device)
    adv = batch.advantages.to(device)

    ratio = torch.exp(logp - old)
    clipped = ratio.clamp(1.0 - clip, 1.0 + clip)
    surrogate = torch.minimum(ratio * adv, clipped * adv)
    weight = torch.ones_like(logp) if tis_cap is None else tis_weights(old, rollout, tis_cap).detach()
    per_token = -weight * surrogate
    kl = torch.zeros_like(logp) if ref_logprobs is None else kl_k3(logp, ref_logprobs.to(device).detach())
    if kl_coef:
        per_token = per_token + kl_coef * kl
    loss = _masked_mean(per_token, mask)

    with torch.no_grad():
        stats = {"clip_frac": float(_masked_mean(((ratio - clipped).abs() > 0).float(), mask)),
                 "ratio": float(_masked_mean(ratio, mask)), "kl": float(_masked_mean(kl, mask)),
                 "logprob_gap": float(_masked_mean((old - rollout).abs(), mask)),
                 "tis": float(_masked_mean(weight, mask)),
                 "tis_capped": 0.0 if tis_cap is None else float(_masked_mean((weight >= tis_cap).float(), mask))}  # fmt: skip
    return loss, stats
