"""Pieces of task kits that several worlds share (a world's ``kit.py`` imports them; generic defaults stay in
``toolworld.tasks.kit``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from toolworld.tasks.model import Need

if TYPE_CHECKING:
    from toolworld.tasks.sampling import Draft, Target


def add_need(draft: Draft, target: Target, slot: str, said: str, value: Any,
             *reads: tuple[str, dict[str, Any]]) -> None:  # fmt: skip
    """The user says ``said`` where the request would name ``value`` (an id they do not know): the agent must work
    it out with ``reads``, which join the gold's reads once each, so the task asks for that look-up."""
    target.slots[slot] = said
    draft.needs.append(Need(slot=slot, phrase=said, value=value))
    for read in reads:
        if read not in draft.reads:
            draft.reads.append(read)
    draft.demand("need")
