"""Training on stored runs: samples and batches from token buffers, logprobs, advantages and losses.

Only :mod:`toolworld.train.data` is imported here, and it loads torch lazily, so ``import toolworld.train`` stays
cheap; ``logprobs``, ``advantages`` and ``losses`` import torch and are imported by name where needed.
"""

from __future__ import annotations

from .data import Batch, Sample, TrainDataError, collate, pack, samples_from_sft, samples_from_tokens, truncate

__all__ = ["Batch", "Sample", "TrainDataError", "collate", "pack", "samples_from_sft", "samples_from_tokens",
           "truncate"]  # fmt: skip
