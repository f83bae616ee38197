"""The logprob a model gives each token of a batch, and how far that is from the sampler's stored logprobs.

The gap matters because the sampler (llama.cpp, vLLM) and the trainer (HF in another precision, other kernels)
never compute exactly the same distribution: a policy-gradient step that treats the stored logprobs as its own is
slightly off-policy, which truncated importance sampling corrects (:func:`toolworld.train.advantages.tis_weights`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from .data import Batch, Sample, TrainDataError, collate


def _dtype_device(model: Any) -> tuple[torch.dtype, torch.device]:
    param = next(model.parameters())
    return param.dtype, param.device


def token_logprobs(model: Any, batch: Batch) -> torch.Tensor:
    """``[B, T]`` logprobs: position ``t`` scores ``input_ids[t]`` from the logits at ``t - 1``.

    Positions with no context of their own get 0: the first of each row, the first token of every packed sample
    (whose previous token belongs to another sample) and padding. The logsumexp is taken in float32 whatever the
    model's dtype, since bf16 log-softmax over a large vocabulary loses the precision a ratio of probabilities needs.
    """
    dtype, device = _dtype_device(model)
    batch = batch.to(device, dtype=dtype)
    logits = model(**batch.model_inputs()).logits[:, :-1].float()
    target = batch.input_ids[:, 1:]
    picked = torch.gather(logits, -1, target.unsqueeze(-1)).squeeze(-1) - torch.logsumexp(logits, dim=-1)
    out = torch.zeros(batch.input_ids.shape, dtype=torch.float32, device=device)
    out[:, 1:] = picked
    starts = (batch.position_ids == 0) | (batch.segment_ids == 0)
    return out.masked_fill(starts, 0.0)


@torch.no_grad()
def logprob_gap(model: Any, samples: Sequence[Sample], pad_id: int, *, batch_size: int = 8) -> dict[str, float]:
    """Mean and max ``|trainer logprob - stored logprob|`` over the masked tokens of ``samples``.

    Returns ``{"mean", "max", "tokens"}``. A large mean says the trainer is not the policy that sampled the data
    (a wrong checkpoint, tokenizer or chat template), which no importance weight can repair.
    """
    rollouts = [s for s in samples if s.logprobs is not None]
    if not rollouts:
        raise TrainDataError("no_logprobs", "none of the samples has stored logprobs (SFT data has none): the gap "
                             "needs samples_from_tokens rows of a token-level run")  # fmt: skip
    total, worst, n = 0.0, 0.0, 0
    for i in range(0, len(rollouts), batch_size):
        batch = collate(rollouts[i : i + batch_size], pad_id)
        lp = token_logprobs(model, batch).cpu()
        gap = (lp - batch.old_logprobs).abs() * batch.loss_mask
        total += float(gap.sum())
        worst = max(worst, float(gap.max()))
        n += int(batch.loss_mask.sum())
    return {"mean": total / max(n, 1), "max": worst, "tokens": float(n)}
