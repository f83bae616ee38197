"""Episodes that branch from another policy's path: a lead plays a task's first turns, the policy the rest.

Why: an on-policy trial starts from the task's opening and spends most of its tokens on turns the policy already
plays well (asking who the customer is, listing the orders), while the turn it gets wrong (the pick of a described
order, the answer read off a tool result) comes once per trial, late, and only when everything before it went right.
A small policy's trials then tie on most tasks and the few that differ hold one decision each. Starting some trials
from a state on a passing path (the gold's, after its first ``k`` turns) puts the policy at that decision directly:
each trial is shorter, and the trials of a group differ on what the policy does from there. This is the reset
distribution of learning from demonstrations (Nair et al. 2018; Salimans and Chen 2018, "Learning Montezuma's
Revenge from a single demonstration"): the reward is still the environment's verdict on the whole episode, the
lead's turns and the policy's together, so no turn earns credit the end state does not grant.

The lead's turns are played live (the world executes its calls, the user answers it), so the state the policy takes
over is one the environment reached, not a replayed record. They are returned with no sampled ids (``token_ids``
empty): the token buffer of the episode holds them as prompt (mask 0), so training never puts a gradient on tokens
the policy did not produce, and the turn records mark them ``no_sampled_ids`` (GiGPO's steps skip them) and
``meta["lead"]``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..records.messages import AssistantTurn, Message
    from ..tasks.model import Task

__all__ = ["BranchPolicy", "BranchSession"]


class BranchSession:
    """One episode of a :class:`BranchPolicy`: ``depth`` turns by ``lead``, then ``follow``'s."""

    def __init__(self, lead: Any, follow: Any, depth: int) -> None:
        self._lead, self._follow, self._depth, self._played = lead, follow, depth, 0

    @property
    def buffer(self) -> Any:
        """The policy's token buffer (the lead's turns in it as prompt), or None for a message-level policy."""
        return getattr(self._follow, "buffer", None)

    async def respond(self, messages: list[Message]) -> AssistantTurn:
        if self._played < self._depth:
            self._played += 1
            turn = await self._lead.respond(messages)
            # empty, not None: the loop records the turn as one that sampled nothing (``no_sampled_ids``)
            return replace(turn, token_ids=[], logprobs=[], meta={**(turn.meta or {}), "lead": True})
        return await self._follow.respond(messages)

    async def aclose(self) -> None:
        for session in (self._lead, self._follow):
            close = getattr(session, "aclose", None)
            if close is not None:
                await close()


class BranchPolicy:
    """``policy`` taking over each task's episode after ``lead`` has played its first ``depths[task.id]`` turns
    (0, or a task not in ``depths``: the policy plays it all). Both sessions get the episode's seed; the name is
    the policy's, since the trajectory's sampled turns are its."""

    def __init__(self, lead: Any, policy: Any, depths: Mapping[str, int]) -> None:
        bad = {k: v for k, v in depths.items() if v < 0}
        if bad:
            raise ValueError(f"a branch depth is a number of lead turns, >= 0; got {bad}")
        self.lead, self.policy, self.depths = lead, policy, dict(depths)
        self.name = policy.name

    def start(self, *, tools: list[dict[str, Any]], task: Task | None = None, seed: int = 0) -> BranchSession:
        depth = self.depths.get(task.id, 0) if task is not None else 0
        lead = self.lead.start(tools=tools, task=task, seed=seed) if depth else None
        return BranchSession(lead, self.policy.start(tools=tools, task=task, seed=seed), depth)
