"""The logprob a model gives each token of a batch, and how far that is from the sampler's stored logprobs.

The gap matters because the sampler (llama.cpp, vLLM) and the trainer (HF in another precision, other kernels)
never compute exactly the same distribution: a policy-gradient step that treats the stored logprobs as its own is
slightly off-policy, which truncated importance sampling corrects (:func:`toolworld.train.advantages.tis_weights`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from ..rollout.engines.hf import cache_keyword
from .data import Batch, Sample, TrainDataError, collate


def _dtype_device(model: Any) -> tuple[torch.dtype, torch.device]:
    param = next(model.parameters())
    return param.dtype, param.device


def keeps_logits(model: Any) -> bool:
    """Whether ``model``'s forward takes ``logits_to_keep`` (a peft wrapper passes it on to the model it wraps).

    A forward that only has ``**kwargs`` is not trusted with it: some pass unknown keywords to layers that reject
    them.
    """
    import inspect

    from .sft import base_model

    inner = base_model(model)
    try:
        return "logits_to_keep" in inspect.signature(inner.forward).parameters
    except (TypeError, ValueError):
        return False


def token_logprobs(model: Any, batch: Batch, *, positions: str = "loss", temperature: float = 1.0) -> torch.Tensor:
    """``[B, T]`` logprobs: position ``t`` scores ``input_ids[t]`` from the logits at ``batch.predecessors()[t]``
    (``t - 1`` within a sample, the prefix's last position for a sample's first token after a shared prefix).

    ``positions="loss"`` (the default) scores only the tokens with ``loss_mask > 0`` and leaves 0 elsewhere, which
    is all a loss or a logprob gap reads: the LM head then runs only where it predicts one of them. With a vocabulary
    of ~50k and conversations whose prompt is most of their length, full logits are most of the memory and a
    large share of the time of a training step. ``positions="all"`` scores every token that has a predecessor.
    The head is narrowed through the model's own ``logits_to_keep``, so whatever the model does to its logits
    (soft-capping, scaling) still applies; a model without it gets full logits, picked from afterwards.

    Tokens with no predecessor get 0: the first of each sample, and padding. The logsumexp is taken in float32
    whatever the model's dtype, since bf16 log-softmax over a large vocabulary loses the precision a ratio of
    probabilities needs.

    ``temperature`` scores under ``softmax(logits / T)``, the distribution a sampler at that temperature draws
    from and whose logprobs it stores: a policy-gradient step on tokens sampled at ``T`` must weigh them by the
    tempered policy, or its importance weights compare two different distributions.
    """
    if positions not in ("loss", "all"):
        raise TrainDataError("bad_positions", f"positions must be 'loss' or 'all', got {positions!r}")
    if not temperature > 0:
        raise TrainDataError("bad_temperature", f"temperature must be > 0, got {temperature!r}")
    dtype, device = _dtype_device(model)
    batch = batch.to(device, dtype=dtype)
    prev = batch.predecessors()
    wanted = prev >= 0
    if positions == "loss":
        wanted &= batch.loss_mask > 0
    out = torch.zeros(batch.input_ids.shape, dtype=torch.float32, device=device)
    rows, cols = wanted.nonzero(as_tuple=True)
    source = prev[rows, cols]
    # one set of positions for every row (what logits_to_keep takes); the union costs little next to full logits
    keep = torch.unique(source)
    width = batch.input_ids.shape[1]
    narrow = keep.numel() < width and keeps_logits(model)
    inputs = batch.model_inputs(cache_keyword(model)) if batch.past is not None else batch.model_inputs()
    if narrow:
        inputs["logits_to_keep"] = keep
    logits = model(**inputs).logits
    # shape, not the signature, says what came back: a forward may take the keyword and still return every position
    at = torch.searchsorted(keep, source) if logits.shape[1] == keep.numel() and narrow else source
    chosen = logits[rows, at].float()
    if temperature != 1.0:
        chosen = chosen / temperature
    target = batch.input_ids[rows, cols]
    picked = chosen.gather(-1, target.unsqueeze(-1)).squeeze(-1) - torch.logsumexp(chosen, dim=-1)
    out[rows, cols] = picked
    return out


@torch.no_grad()
def logprob_gap(model: Any, samples: Sequence[Sample], pad_id: int, *, batch_size: int = 8,
                temperature: float = 1.0) -> dict[str, float]:  # fmt: skip
    """Mean and max ``|trainer logprob - stored logprob|`` over the masked tokens of ``samples``, the trainer's
    taken at the ``temperature`` the samples were drawn at (their stored logprobs are the tempered sampler's).

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
        lp = token_logprobs(model, batch, temperature=temperature).cpu()
        gap = (lp - batch.old_logprobs).abs() * batch.loss_mask
        total += float(gap.sum())
        worst = max(worst, float(gap.max()))
        n += int(batch.loss_mask.sum())
    return {"mean": total / max(n, 1), "max": worst, "tokens": float(n)}
