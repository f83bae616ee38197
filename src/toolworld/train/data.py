"""Training samples and batches built straight from stored token buffers, never from re-tokenized text.

A token-level run keeps the ids a model sampled exactly as sampled; decoding them and encoding the text again can
produce different ids (merges across turn boundaries, normalisation), and a policy-gradient step on ids the
sampler never produced trains the wrong thing and makes the stored logprobs meaningless. So a :class:`Sample` is
the stored ``input_ids`` / ``loss_mask`` / ``logprobs`` as they are, and a :class:`Batch` only pads or packs them.

Two layouts:

- :func:`collate`: one row per sample, right padding, a 2D ``attention_mask`` (1 on real tokens).
- :func:`pack`: several samples concatenated in one row up to a token budget, ``position_ids`` restarting at 0 for
  each sample and a 4D block-diagonal causal mask ``[B, 1, T, T]`` so no sample sees another. With
  ``share_prefix``, samples that open with the same tokens without loss (a world's system prompt, a task's user
  opening) lay that prefix once per row and each continues from it: ``[prefix][suffix_1][suffix_2]...``. The mask is
  *additive float* (0 where a query may attend, the dtype's most negative value elsewhere): HF models take a 4D
  mask as given, eager attention adds it to the scores and SDPA accepts a float mask of the query's dtype, so one
  form serves both ``attn_implementation="eager"`` and ``"sdpa"`` (flash attention wants no mask and is not
  supported here). Call :meth:`Batch.to` with the model's dtype before a bf16/fp16 forward, since SDPA refuses a
  mask whose dtype differs from the query's.

A shared prefix is exact, not an approximation: a suffix token attends to the prefix (the same ids at the same
positions, so the same keys and values) and causally to its own suffix, which is what it saw in its own sample;
only the cost changes. Conversations whose system prompt is most of their length (tool schemas) then cost their
prompt once per row instead of once per sample. Because the token before a suffix's first token is now the
prefix's last one rather than the row's previous token, a batch says explicitly which position predicts each
token (``prev_index``).

``torch`` is imported lazily by the functions that build tensors, so reading samples needs no torch.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
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
    samples of a row from 1 (0 = padding, -1 = a prefix the row's samples share), so per-sample sums can be taken
    on packed rows: a shared prefix has no loss, so nothing a sample is scored on is left out of its segment.
    ``prev_index`` is the position in the row whose logits predict each token (-1: none, i.e. a sample's first
    token and padding); ``None`` means "the previous position within the sample", which is what a batch built
    by hand without a shared prefix has.
    """

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    position_ids: torch.Tensor
    loss_mask: torch.Tensor
    old_logprobs: torch.Tensor
    advantages: torch.Tensor
    segment_ids: torch.Tensor
    n_samples: int
    prev_index: torch.Tensor | None = None
    #: Rows that continue a shared prefix run once for the step (:class:`toolworld.train.prefix.SharedPrefix`): a
    #: callable giving a fresh KV cache of the prefix, whose length the first ``position_ids`` say.
    past: Callable[[], Any] | None = None

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
        names = ("input_ids", "position_ids", "loss_mask", "old_logprobs", "advantages", "segment_ids", "prev_index")
        moved = {name: getattr(self, name).to(device) if device is not None and getattr(self, name) is not None
                 else getattr(self, name) for name in names}  # fmt: skip
        return Batch(attention_mask=attention.to(device) if device is not None else attention,
                     n_samples=self.n_samples, past=self.past, **moved)  # fmt: skip

    def model_inputs(self, cache_keyword: str = "past_key_values") -> dict[str, Any]:
        """Keyword arguments for a HF causal LM forward; a continued batch's cache goes under ``cache_keyword``
        (what :func:`toolworld.rollout.engines.hf.cache_keyword` says the model takes)."""
        if self.past is not None:  # the prefix's keys and values stand in for its tokens; the mask covers both
            import torch

            rows, prefix = self.input_ids.shape[0], int(self.position_ids[0, 0])
            mask = torch.cat([self.attention_mask.new_ones(rows, prefix), self.attention_mask], dim=1)
            return {"input_ids": self.input_ids, "attention_mask": mask, "position_ids": self.position_ids,
                    cache_keyword: self.past(), "use_cache": True}  # fmt: skip
        return {"input_ids": self.input_ids, "attention_mask": self.attention_mask, "position_ids": self.position_ids}

    def predecessors(self) -> torch.Tensor:
        """``prev_index``, derived when the batch has none: ``t - 1``, and -1 where a sample starts
        (``position_ids`` 0) or on padding."""
        if self.prev_index is not None:
            return self.prev_index
        import torch

        width = self.input_ids.shape[1]
        prev = torch.arange(-1, width - 1, device=self.input_ids.device).expand_as(self.input_ids)
        starts = (self.position_ids == 0) | (self.segment_ids == 0)
        return prev.masked_fill(starts, -1)

    @property
    def computed_tokens(self) -> int:
        """Tokens the model runs on (padding excluded): a shared prefix counts once per row."""
        return int((self.segment_ids != 0).sum().item())

    @property
    def sample_tokens(self) -> int:
        """The samples' own lengths summed, a shared prefix counted once per sample that continues it: the work
        the batch stands for, which is what a throughput comparable across layouts divides by time."""
        seg = self.segment_ids
        shared = (seg < 0).sum(dim=1) * seg.clamp(min=0).amax(dim=1)
        return int((seg > 0).sum().item() + shared.sum().item())


def _check_pad(pad_id: int) -> None:
    if not isinstance(pad_id, int) or pad_id < 0:
        raise TrainDataError("bad_pad_id", f"pad_id must be a non-negative token id, got {pad_id!r} (use the "
                             "tokenizer's pad_token_id, or its eos_token_id when it has none)")  # fmt: skip


MIN_SHARED_PREFIX = 32
"""Below this many tokens a shared prefix saves less than the bookkeeping costs, and a row is packed plainly."""


@dataclass
class _Row:
    """The samples of one row and how many leading tokens they share (0: none, laid one after another)."""

    samples: list[Sample]
    prefix: int = 0

    @property
    def width(self) -> int:
        return self.prefix + sum(len(s) - self.prefix for s in self.samples)


def _rows(rows: list[_Row], pad_id: int, *, packed: bool) -> Batch:
    """Fill right-padded tensors for rows of samples (one sample per row unless ``packed``)."""
    import torch

    width = max(max((row.width for row in rows), default=0), 1)
    shape = (len(rows), width)
    ids = torch.full(shape, pad_id, dtype=torch.long)
    pos = torch.zeros(shape, dtype=torch.long)
    seg = torch.zeros(shape, dtype=torch.long)
    prev = torch.full(shape, -1, dtype=torch.long)
    loss = torch.zeros(shape, dtype=torch.float32)
    old = torch.zeros(shape, dtype=torch.float32)
    adv = torch.zeros(shape, dtype=torch.float32)
    for r, row in enumerate(rows):
        p = row.prefix
        if p:
            # the prefix is the first sample's head; loss, logprobs and advantages are zero there by construction
            ids[r, :p] = torch.tensor(row.samples[0].input_ids[:p], dtype=torch.long)
            pos[r, :p] = torch.arange(p)
            seg[r, :p] = -1
            prev[r, 1:p] = torch.arange(p - 1)
        at = p
        for k, s in enumerate(row.samples, start=1):
            n = len(s) - p
            span, own = slice(at, at + n), slice(p, len(s))
            ids[r, span] = torch.tensor(s.input_ids[own], dtype=torch.long)
            pos[r, span] = torch.arange(p, len(s))
            seg[r, span] = k
            prev[r, span] = torch.arange(at - 1, at + n - 1)
            # a sample's first own token follows the prefix's last one (none without a prefix), not the previous
            # sample's last token
            prev[r, at] = p - 1
            loss[r, span] = torch.tensor(s.loss_mask[own], dtype=torch.float32)
            if s.logprobs is not None:
                old[r, span] = torch.tensor(s.logprobs[own], dtype=torch.float32)
            adv[r, span] = torch.tensor(s.token_advantage_list()[own], dtype=torch.float32)
            at += n
        if not packed:
            pos[r, at:] = torch.arange(at, width)  # padding only needs positions in range; it is never attended to
    old = old * loss
    adv = adv * loss
    if packed:
        # A query attends to keys of its own sample at or before it, and a sample's tokens to the whole prefix its
        # row shares (segment -1, laid before every sample). Padding (segment 0) attends to itself only, so no
        # softmax row is all masked (NaN in some SDPA kernels).
        query, key = seg[:, :, None], seg[:, None, :]
        causal = torch.ones(width, width, dtype=torch.bool).tril()
        allowed = ((query == key) & causal) | ((query > 0) & (key < 0))
        allowed &= query != 0
        allowed |= torch.eye(width, dtype=torch.bool)
        blocked = torch.finfo(torch.float32).min
        attention = torch.zeros(allowed.shape, dtype=torch.float32).masked_fill(~allowed, blocked)[:, None]
    else:
        attention = (seg > 0).long()
    return Batch(input_ids=ids, attention_mask=attention, position_ids=pos, loss_mask=loss, old_logprobs=old,
                 advantages=adv, segment_ids=seg, n_samples=sum(len(row.samples) for row in rows),
                 prev_index=prev)  # fmt: skip


def collate(samples: Sequence[Sample], pad_id: int) -> Batch:
    """One row per sample, right-padded with ``pad_id`` to the longest; ``attention_mask`` is 1 on real tokens."""
    _check_pad(pad_id)
    if not samples:
        raise TrainDataError("empty_batch", "collate needs at least one sample")
    return _rows([_Row([s]) for s in samples], pad_id, packed=False)


def _shareable(sample: Sample) -> int:
    """How many leading tokens of ``sample`` another could share: its run without loss, less one token, so every
    sample keeps a token of its own to be a segment (and the prefix never holds a token with loss)."""
    n = 0
    for m in sample.loss_mask:
        if m:
            break
        n += 1
    return min(n, len(sample) - 1)


def _common(a: list[int], b: list[int], limit: int) -> int:
    """Length of the common start of ``a`` and ``b``, at most ``limit``."""
    if a[:limit] == b[:limit]:
        return limit
    lo, hi = 0, limit  # a[:lo] == b[:lo] and a[:hi] != b[:hi]; slices compare in C, so bisect rather than loop
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid
    return lo


def _plain_rows(samples: Iterable[Sample], max_tokens: int) -> list[_Row]:
    rows: list[_Row] = []
    used = math.inf
    for s in samples:
        if used + len(s) > max_tokens:
            rows.append(_Row([]))
            used = 0
        rows[-1].samples.append(s)
        used += len(s)
    return rows


def _shared_rows(samples: Sequence[Sample], max_tokens: int, min_prefix: int) -> list[_Row]:
    """Rows of samples grouped by their common prefix; samples left alone are packed plainly after them.

    Samples whose first ``min_prefix`` tokens agree (and carry no loss) are candidates for one row, so an open row
    is kept per such key and a sample joins its key's row while the row, laid with the prefix they all share, fits
    ``max_tokens``. Arrival order is kept within a key: SFT samples arrive shuffled, and a GRPO caller lists a
    task's trials together, which then share their whole opening rather than only the system prompt.
    """
    open_rows: dict[tuple[int, ...], _Row] = {}
    done: list[_Row] = []
    alone: list[Sample] = []
    for s in samples:
        cap = _shareable(s)
        if cap < min_prefix:
            alone.append(s)
            continue
        key = tuple(s.input_ids[:min_prefix])
        row = open_rows.get(key)
        if row is not None:
            prefix = _common(row.samples[0].input_ids, s.input_ids, min(row.prefix, cap))
            if prefix + sum(len(t) - prefix for t in (*row.samples, s)) <= max_tokens:
                row.samples.append(s)
                row.prefix = prefix
                continue
            done.append(row)
        open_rows[key] = _Row([s], prefix=cap)
    done.extend(open_rows.values())
    shared = [row for row in done if len(row.samples) > 1]
    alone.extend(row.samples[0] for row in done if len(row.samples) == 1)
    return shared + _plain_rows(alone, max_tokens)


def pack(samples: Sequence[Sample], max_tokens: int, pad_id: int, *, rows_per_batch: int = 1,
         share_prefix: bool = False, min_prefix: int = MIN_SHARED_PREFIX) -> list[Batch]:  # fmt: skip
    """Pack samples into rows of at most ``max_tokens`` tokens, ``rows_per_batch`` rows per :class:`Batch`.

    Greedy in order: a sample joins the current row when it fits, else starts a new one; order is kept so a
    caller's grouping (e.g. the trials of one task) stays together. ``max_tokens`` is therefore the token budget
    of one row: with the default of one row per batch, each batch costs at most ``max_tokens`` tokens of
    activations, and its ``[1, 1, T, T]`` mask ``T**2`` floats, which bounds ``max_tokens`` in practice.
    A sample longer than ``max_tokens`` is an error, not silently cut: :func:`truncate` it first if that is meant.
    Empty samples are skipped (they have nothing to train on), so ``n_samples`` counts the packed ones.

    ``share_prefix`` lays the loss-free opening that samples have in common (at least ``min_prefix`` tokens) once
    per row, the budget counting it once, so a row holds more samples at the same cost; rows are then formed per
    common opening (see :func:`_shared_rows`) and samples that share nothing are packed plainly after them. Losses
    and gradients are those of the unshared layout.
    """
    _check_pad(pad_id)
    if max_tokens < 1 or rows_per_batch < 1:
        raise TrainDataError("bad_pack_size", f"max_tokens and rows_per_batch must be at least 1, got {max_tokens} "
                             f"and {rows_per_batch}")  # fmt: skip
    if min_prefix < 1:
        raise TrainDataError("bad_pack_size", f"min_prefix must be at least 1, got {min_prefix}")
    for s in samples:
        if len(s) > max_tokens:
            raise TrainDataError("sample_too_long", f"a sample of {len(s)} tokens{_where(s.meta)} exceeds "
                                 f"max_tokens={max_tokens}: raise max_tokens or truncate(sample, {max_tokens}) "
                                 "first")  # fmt: skip
    kept = [s for s in samples if len(s)]
    rows = _shared_rows(kept, max_tokens, min_prefix) if share_prefix else _plain_rows(kept, max_tokens)
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
