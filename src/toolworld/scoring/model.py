"""``Score`` and ``Component``: the typed verdict on one trajectory, stored next to it and read by reports.

A score explains itself: besides the reward it names every missing, wrong and extra change, every expected
output that was (not) said, and where the agent left the gold path, so a failed trial can be debugged from its
score alone. It is plain data (JSON round-trips exactly), and deterministic: re-scoring a stored trajectory
with the same scorer version gives byte-identical JSON, which is what ``toolworld rescore --check`` relies on.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

#: Bumped whenever a rule changes what a trajectory scores, so stored scores say which rules produced them.
#: Version 3: the best of the task's acceptable end states (``Task.alternatives``) is the score.
SCORER_VERSION = "toolworld-score/4"


class Component(BaseModel):
    """One reward component: a named check with its weight and a reason a person can act on."""

    name: str = Field(description="'state', 'outputs', 'refusal', 'identified' or 'confirmed' (which apply depends "
                      "on the task's kind; see toolworld.scoring.verify).")
    passed: bool
    weight: float = Field(description="Share of the reward; weights of a score's components sum to 1.")
    reason: str = Field(description="What was missing, wrong or extra, or why the check passed.")


class Score(BaseModel):
    """The verdict on one trajectory of one task."""

    task_id: str
    trial: int
    reward: float = Field(description="Weighted sum of the passed components, in [0, 1]; 1.0 only on success.")
    success: bool = Field(description="Every component that applies passed: the state is gold's (a refusal or "
                          "info task: unchanged), every expected output was said, a refusal was said with its reason, "
                          "the customer was identified first and every write was confirmed.")  # fmt: skip
    components: list[Component] = Field(default_factory=list)
    missing_changes: list[dict[str, Any]] = Field(
        default_factory=list, description="Gold changes the agent did not make: {table, op, key, changed}.")
    wrong_values: list[dict[str, Any]] = Field(
        default_factory=list, description="Columns the agent set to another value: {table, op, key, column, expected, "
        "got}.")  # fmt: skip
    extra_changes: list[dict[str, Any]] = Field(
        default_factory=list, description="Collateral damage, changes gold did not make: {table, op, key, changed}.")
    outputs: list[dict[str, Any]] = Field(default_factory=list,
                                          description="Expected outputs: {label, value, found}, and when not found "
                                                      "why: not stated, stated before any tool result showed it, or "
                                                      "stated only as one of a list of candidates.")
    first_divergent_step: int | None = Field(
        default=None, description="Index into the trajectory's steps where the agent first left the gold path "
        "(len(steps) when it stopped before a gold step); None when it never did.")  # fmt: skip
    failure_visible_step: int | None = Field(
        default=None, description="Index of the step where the failure showed (the first write that differs from "
        "gold), or len(steps) when it only showed at the end; None on success.")  # fmt: skip
    divergence: str = Field(default="", description="One line on what happened at first_divergent_step.")
    end_state: str | None = Field(
        default=None, description="The task's alternative end state the trajectory was judged against (its label), "
        "because it scored better there; None for the primary end state.")  # fmt: skip
    infra_error: bool = Field(default=False, description="Ended on an infra error: not scored, left out of metrics.")
    scorer_version: str = SCORER_VERSION
