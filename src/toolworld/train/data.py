"""Training samples and batches built straight from stored token buffers, never from re-tokenized text.

A token-level run keeps the ids a model sampled exactly as sampled; decoding them and encoding the text again can
produce different ids (merges across turn boundaries, normalisation), and a policy-gradient step on ids the
sampler never produced trains the wrong thing and makes the stored logprobs meaningless. So a :class:`Sample` is
the stored ``input_ids`` / ``loss_mask`` / ``logprobs`` as they are, and a :class:`Batch` only pads or packs them.

Two layouts:

- :func:`collate`: one row per sample, right padding, a 2D ``attention_mask`` (1 on real tokens).
- :func:`pack`: several samples concatenated in one row up to a token budget, ``position_ids`` restarting at 0 for
  each sample and a 4D block-diagonal causal mask ``[B, 1, T, T]`` so no sample sees another. The mask is
  *additive float* (0 where a query may attend, the dtype's most negative value elsewhere): HF models take a 4D
  mask as given, eager attention adds it to the scores and SDPA accepts a float mask of the query's dtype, so one
  form serves both ``attn_implementation="eager"`` and ``"sdpa"`` (flash attention wants no mask and is not
  supported here). Call :meth:`Batch.to` with the model's dtype before a bf16/fp16 forward, since SDPA refuses a
  mask whose dtype differs from the query's.

``torch`` is imported lazily by the functions that build tensors, so reading samples needs no torch.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from ..core.errors import ToolworldError

if TYPE_CHECKING:
    import torch


class TrainDataError(ToolworldError):
    """Input that cannot become a training sample or batch; ``kind`` names the problem."""

    default_kind = "bad_train_data"

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message, kind=kind)


@dataclass
class Sample:
    """One sequence to train on.

    ``loss_mask`` is 1 where the loss applies (sampled tokens of an RL rollout, assistant tokens of SFT data).
    ``logprobs`` are the sampler's logprobs per token (0.0 where the mask is 0), kept so the trainer can measure
    and correct the rollout/trainer mismatch; ``None`` for SFT data, which was never sampled. ``advantage`` is one
    value for the whole sequence (GRPO); ``token_advantages``, when set, overrides it per token (GiGPO's step-level
    credit). ``group`` ties samples whose advantages are normalised together (the task id for GRPO).
    """

    input_ids: list[int]
    loss_mask: list[int]
    logprobs: list[float] | None = None
    advantage: float = 0.0
    token_advantages: list[float] | None = None
    group: str = ""
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        n = len(self.input_ids)
        for name in ("loss_mask", "logprobs", "token_advantages"):
            value = getattr(self, name)
            if value is not None and len(value) != n:
                raise TrainDataError("length_mismatch", f"{name} has {len(value)} entries but input_ids has {n}"
                                     f"{_where(self.meta)}: every per-token list must have one entry per id")  # fmt: skip

    def __len__(self) -> int:
        return len(self.input_ids)

    def token_advantage_list(self) -> list[float]:
        """The advantage of every token: ``token_advantages`` when set, else ``advantage`` broadcast."""
        if self.token_advantages is not None:
            return [float(a) for a in self.token_advantages]
        return [float(self.advantage)] * len(self.input_ids)


def _where(meta: Mapping[str, Any]) -> str:
    if "task_id" in meta:
        return f" (task {meta['task_id']!r}, trial {meta.get('trial')})"
    return ""


def _ints(value: Any, name: str, meta: Mapping[str, Any]) -> list[int]:
    if value is None:
        raise TrainDataError("missing_column", f"a record has no {name}{_where(meta)}: rows need input_ids and a "
                             "mask (token_records rows: loss_mask; sft_records rows: assistant_masks)")  # fmt: skip
    return [int(v) for v in value]


def _meta(row: Mapping[str, Any], skip: Iterable[str]) -> dict[str, Any]:
    dropped = set(skip)
    return {k: v for k, v in row.items() if k not in dropped}


def samples_from_tokens(records: Iterable[Mapping[str, Any]]) -> list[Sample]:
    """Samples from ``token_records`` rows (task_id, trial, reward, success, input_ids, loss_mask, logprobs...).

    Ids, mask and logprobs are taken as stored; a missing logprob (``None``) becomes 0.0, which only happens where
    the mask is 0. ``group`` is the task id, so the trials of one task form one GRPO group; every other column
    (task_id, trial, world, policy, success, reward, termination, breaks) lands in ``meta``.
    """
    out = []
    for row in records:
        meta = _meta(row, ("input_ids", "loss_mask", "logprobs"))
        ids = _ints(row.get("input_ids"), "input_ids", meta)
        mask = _ints(row.get("loss_mask"), "loss_mask", meta)
        raw = row.get("logprobs")
        logprobs = [0.0 if lp is None else float(lp) for lp in raw] if raw is not None else [0.0] * len(ids)
        out.append(Sample(input_ids=ids, loss_mask=mask, logprobs=logprobs, group=str(row.get("task_id", "")),
                          meta=meta))  # fmt: skip
    return out


def samples_from_sft(records: Iterable[Mapping[str, Any]]) -> list[Sample]:
    """Samples from ``sft_records`` rows: ``input_ids`` with ``assistant_masks`` as the loss mask, no logprobs.

    Conversations, tools and the other columns go to ``meta`` (minus the token columns, which would double the
    memory of a large dataset for no use).
    """
    out = []
    for row in records:
        meta = _meta(row, ("input_ids", "assistant_masks"))
        ids = _ints(row.get("input_ids"), "input_ids", meta)
        mask = _ints(row.get("assistant_masks"), "assistant_masks", meta)
        out.append(Sample(input_ids=ids, loss_mask=mask, group=str(row.get("task_id", "")), meta=meta))
    return out


def truncate(sample: Sample, max_len: int) -> Sample:
    """The sample cut to its first ``max_len`` tokens (every per-token list cut alike); the input is unchanged.

    Keeping the start keeps the prompt and the earliest turns, which the later ones condition on; a cut from the
    left would train on turns whose context is gone.
    """
    if max_len < 1:
        raise TrainDataError("bad_max_len", f"max_len must be at least 1, got {max_len}")
    if len(sample) <= max_len:
        return sample
    cut = slice(0, max_len)
    return replace(sample, input_ids=sample.input_ids[cut], loss_mask=sample.loss_mask[cut],
                   logprobs=None if sample.logprobs is None else sample.logprobs[cut],
                   token_advantages=None if sample.token_advantages is None else sample.token_advantages[cut],
                   meta={**sample.meta, "truncated_from": len(sample)})  # fmt: skip


@dataclass
class Batch:
    """Tensors of shape ``[B, T]`` (``attention_mask``: ``[B, T]`` from :func:`collate`, ``[B, 1, T, T]`` additive
    float from :func:`pack`).

    ``loss_mask``, ``old_logprobs`` and ``advantages`` are float32 and zero on padding; ``segment_ids`` numbers the
    samples of a row from 1 (0 = padding), so per-sample sums can be taken on packed rows.
    """

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    position_ids: torch.Tensor
    loss_mask: torch.Tensor
    old_logprobs: torch.Tensor
    advantages: torch.Tensor
    segment_ids: torch.Tensor
    n_samples: int

    @property
    def packed(self) -> bool:
        """Whether the rows hold several samples (a 4D block-diagonal mask)."""
        return self.attention_mask.dim() == 4

    def to(self, device: Any = None, *, dtype: torch.dtype | None = None) -> Batch:
        """The batch on ``device``; with ``dtype`` (the model's), a packed mask is rebuilt in that dtype, whose
        most negative value differs from float32's and which SDPA requires to match the query's."""
        attention = self.attention_mask
        if dtype is not None and self.packed:
            import torch

            attention = torch.zeros(attention.shape, dtype=dtype).masked_fill(attention < 0, torch.finfo(dtype).min)
        moved = {name: getattr(self, name).to(device) if device is not None else getattr(self, name)
                 for name in ("input_ids", "position_ids", "loss_mask", "old_logprobs", "advantages", "segment_ids")}  # fmt: skip
        return Batch(attention_mask=attention.to(device) if device is not None else attention,
                     n_samples=self.n_samples, **moved)  # fmt: skip

    def model_inputs(self) -> dict[str, torch.Tensor]:
        """Keyword arguments for a HF causal LM forward."""
        return {"input_ids": self.input_ids, "attention_mask": self.attention_mask, "position_ids": self.position_ids}


def _check_pad(pad_id: int) -> None:
    if not isinstance(pad_id, int) or pad_id < 0:
        raise TrainDataError("bad_pad_id", f"pad_id must be a non-negative token id, got {pad_id!r} (use the "
                             "tokenizer's pad_token_id, or its eos_token_id when it has none)")  # fmt: skip


def _rows(rows: list[list[Sample]], pad_id: int, *, packed: bool) -> Batch:
    """Fill right-padded tensors for rows of samples (one sample per row unless ``packed``)."""
    import torch

    width = max((sum(len(s) for s in row) for row in rows), default=0)
    width = max(width, 1)
    shape = (len(rows), width)
    ids = torch.full(shape, pad_id, dtype=torch.long)
    pos = torch.zeros(shape, dtype=torch.long)
    seg = torch.zeros(shape, dtype=torch.long)
    loss = torch.zeros(shape, dtype=torch.float32)
    old = torch.zeros(shape, dtype=torch.float32)
    adv = torch.zeros(shape, dtype=torch.float32)
    for r, row in enumerate(rows):
        at = 0
        for k, s in enumerate(row, start=1):
            n = len(s)
            span = slice(at, at + n)
            ids[r, span] = torch.tensor(s.input_ids, dtype=torch.long)
            pos[r, span] = torch.arange(n)
            seg[r, span] = k
            loss[r, span] = torch.tensor(s.loss_mask, dtype=torch.float32)
            if s.logprobs is not None:
                old[r, span] = torch.tensor(s.logprobs, dtype=torch.float32)
            adv[r, span] = torch.tensor(s.token_advantage_list(), dtype=torch.float32)
            at += n
        if not packed:
            pos[r, at:] = torch.arange(at, width)  # padding only needs positions in range; it is never attended to
    old = old * loss
    adv = adv * loss
    if packed:
        # A query attends to keys of its own sample at or before it. Padding (segment 0) attends to itself only, so
        # no softmax row is all masked (NaN in some SDPA kernels).
        same = seg[:, :, None] == seg[:, None, :]
        causal = torch.ones(width, width, dtype=torch.bool).tril()
        allowed = (same & causal) & (seg[:, :, None] > 0)
        allowed |= torch.eye(width, dtype=torch.bool)
        blocked = torch.finfo(torch.float32).min
        attention = torch.zeros(allowed.shape, dtype=torch.float32).masked_fill(~allowed, blocked)[:, None]
    else:
        attention = (seg > 0).long()
    return Batch(input_ids=ids, attention_mask=attention, position_ids=pos, loss_mask=loss, old_logprobs=old,
                 advantages=adv, segment_ids=seg, n_samples=sum(len(row) for row in rows))  # fmt: skip


def collate(samples: Sequence[Sample], pad_id: int) -> Batch:
    """One row per sample, right-padded with ``pad_id`` to the longest; ``attention_mask`` is 1 on real tokens."""
    _check_pad(pad_id)
    if not samples:
        raise TrainDataError("empty_batch", "collate needs at least one sample")
    return _rows([[s] for s in samples], pad_id, packed=False)


def pack(samples: Sequence[Sample], max_tokens: int, pad_id: int, *, rows_per_batch: int = 1) -> list[Batch]:
    """Pack samples into rows of at most ``max_tokens`` tokens, ``rows_per_batch`` rows per :class:`Batch`.

    Greedy in order: a sample joins the current row when it fits, else starts a new one; order is kept so a
    caller's grouping (e.g. the trials of one task) stays together. ``max_tokens`` is therefore the token budget
    of one row: with the default of one row per batch, each batch costs at most ``max_tokens`` tokens of
    activations, and its ``[1, 1, T, T]`` mask ``T**2`` floats, which bounds ``max_tokens`` in practice.
    A sample longer than ``max_tokens`` is an error, not silently cut: :func:`truncate` it first if that is meant.
    Empty samples are skipped (they have nothing to train on), so ``n_samples`` counts the packed ones.
    """
    _check_pad(pad_id)
    if max_tokens < 1 or rows_per_batch < 1:
        raise TrainDataError("bad_pack_size", f"max_tokens and rows_per_batch must be at least 1, got {max_tokens} "
                             f"and {rows_per_batch}")  # fmt: skip
    rows: list[list[Sample]] = []
    used = math.inf
    for s in samples:
        if len(s) > max_tokens:
            raise TrainDataError("sample_too_long", f"a sample of {len(s)} tokens{_where(s.meta)} exceeds "
                                 f"max_tokens={max_tokens}: raise max_tokens or truncate(sample, {max_tokens}) "
                                 "first")  # fmt: skip
        if len(s) == 0:
            continue
        if used + len(s) > max_tokens:
            rows.append([])
            used = 0
        rows[-1].append(s)
        used += len(s)
    return [_rows(rows[i : i + rows_per_batch], pad_id, packed=True) for i in range(0, len(rows), rows_per_batch)]


def one_world_tasks(tasks: Iterable[Any], world: Any, *, error: type[ToolworldError], what: str) -> list[Any]:
    """The tasks as a list, refused with ``error`` (kind ``no_tasks`` or ``invalid_option``) when there are none or
    some belong to another world: ``what`` says what the caller does with them ("train on", "sample")."""
    tasks = list(tasks)
    if not tasks:
        raise error(f"no tasks to {what}: pass a task file from `toolworld tasks generate`", kind="no_tasks")
    foreign = sorted({t.world for t in tasks if t.world != world.name})
    if foreign:
        raise error(f"tasks of world(s) {', '.join(foreign)} cannot be played in world {world.name!r}: {what} one "
                    "world's tasks at a time", kind="invalid_option")  # fmt: skip
    return tasks
