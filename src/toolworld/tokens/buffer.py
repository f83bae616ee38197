"""The ``TokenBuffer``: one conversation's tokens exactly as the model saw and sampled them.

A shared record: rollouts fill it, the run store keeps it, exports and trainers read it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

logger = logging.getLogger("toolworld.tito")

@dataclass
class TokenBuffer:
    """The token sequence of one conversation exactly as the model saw and produced it.

    ``mask`` is 1 only on sampled tokens (the loss mask), ``logprobs`` holds the sampling logprob on those and
    None elsewhere, ``message_index`` maps each token to the message of the conversation it belongs to
    (template glue such as a generation prompt belongs to the message that follows it). ``breaks`` counts the
    bridge fallbacks and ``events`` records each fallback and divergence with its reason.
    """

    ids: list[int] = field(default_factory=list)
    mask: list[int] = field(default_factory=list)
    logprobs: list[float | None] = field(default_factory=list)
    message_index: list[int] = field(default_factory=list)
    breaks: int = 0
    events: list[dict[str, Any]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.ids)

    def append_prompt(self, ids: Sequence[int], message_index: int | Sequence[int]) -> None:
        """Append template/prompt tokens (mask 0); ``message_index`` is one index or one per token."""
        n = len(ids)
        indices = [message_index] * n if isinstance(message_index, int) else list(message_index)
        if len(indices) != n:
            raise ValueError(f"append_prompt got {n} ids but {len(indices)} message indices")
        self.ids.extend(int(i) for i in ids)
        self.mask.extend([0] * n)
        self.logprobs.extend([None] * n)
        self.message_index.extend(indices)

    def append_sampled(self, ids: Sequence[int], logprobs: Sequence[float], message_index: int) -> None:
        """Append sampled tokens (mask 1) with the logprob each was sampled with."""
        if len(ids) != len(logprobs):
            raise ValueError(f"append_sampled got {len(ids)} ids but {len(logprobs)} logprobs; they must align")
        self.ids.extend(int(i) for i in ids)
        self.mask.extend([1] * len(ids))
        self.logprobs.extend(float(lp) for lp in logprobs)
        self.message_index.extend([message_index] * len(ids))

    def sampled_ids(self) -> list[int]:
        """The sampled ids in order (what the engine returned, turn after turn)."""
        return [i for i, m in zip(self.ids, self.mask, strict=True) if m]

    def sampled_logprobs(self) -> list[float]:
        return [lp for lp, m in zip(self.logprobs, self.mask, strict=True) if m]  # type: ignore[misc]

    def truncate(self, length: int) -> None:
        """Drop tokens after ``length``; only prompt tokens may go (sampled tokens are never removed)."""
        if any(self.mask[length:]):
            raise ValueError("truncate would remove sampled tokens; the buffer only ever drops prompt tokens")
        del self.ids[length:], self.mask[length:], self.logprobs[length:], self.message_index[length:]

    def record(self, kind: str, reason: str, *, counts_as_break: bool, **detail: Any) -> None:
        """Record a bridge event; fallbacks also count in ``breaks``."""
        if counts_as_break:
            self.breaks += 1
        self.events.append({"kind": kind, "reason": reason, "at_token": len(self.ids), **detail})

    def to_dict(self) -> dict[str, Any]:
        """Compact JSON-ready form: ids, sampled spans, logprobs of sampled tokens, run-length message indices."""
        spans: list[list[int]] = []
        for pos, m in enumerate(self.mask):
            if m:
                if spans and spans[-1][1] == pos:
                    spans[-1][1] = pos + 1
                else:
                    spans.append([pos, pos + 1])
        runs: list[list[int]] = []
        for idx in self.message_index:
            if runs and runs[-1][0] == idx:
                runs[-1][1] += 1
            else:
                runs.append([idx, 1])
        return {
            "format": "toolworld.token_buffer/1",
            "ids": list(self.ids),
            "sampled_spans": spans,
            "sampled_logprobs": self.sampled_logprobs(),
            "message_index_runs": runs,
            "breaks": self.breaks,
            "events": [dict(e) for e in self.events],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TokenBuffer:
        """Inverse of ``to_dict`` (validates that the parts agree in length)."""
        ids = [int(i) for i in data["ids"]]
        n = len(ids)
        mask = [0] * n
        for start, end in data.get("sampled_spans", []):
            if not 0 <= start < end <= n:
                raise ValueError(f"sampled span {start}:{end} is outside a buffer of {n} tokens")
            mask[start:end] = [1] * (end - start)
        sampled_lp = [float(x) for x in data.get("sampled_logprobs", [])]
        if len(sampled_lp) != sum(mask):
            raise ValueError(f"{len(sampled_lp)} sampled logprobs for {sum(mask)} sampled tokens")
        it = iter(sampled_lp)
        logprobs: list[float | None] = [next(it) if m else None for m in mask]
        message_index: list[int] = []
        for idx, count in data.get("message_index_runs", []):
            message_index.extend([int(idx)] * int(count))
        if len(message_index) != n:
            raise ValueError(f"message_index_runs cover {len(message_index)} tokens, the buffer has {n}")
        return cls(ids, mask, logprobs, message_index, int(data.get("breaks", 0)), list(data.get("events", [])))
