"""Scoring: verifiers (change-set against gold, collateral damage, stated outputs), reward components,
pass@k / pass^k and the first divergent step.

``score_trajectory(task, trajectory)`` gives a :class:`Score` per trial; ``summarize`` turns a run's
trajectories and scores into its ``summary.json``. Nothing here runs a model.
"""

from .align import Alignment, align
from .changes import Diff, compare_changes
from .metrics import pass_at_k, pass_hat_k, percentile, summarize
from .model import SCORER_VERSION, Component, Score
from .outputs import check_outputs, output_kind, value_found
from .verify import WEIGHTS, score_trajectory

__all__ = [
    "SCORER_VERSION",
    "WEIGHTS",
    "Alignment",
    "Component",
    "Diff",
    "Score",
    "align",
    "check_outputs",
    "compare_changes",
    "output_kind",
    "pass_at_k",
    "pass_hat_k",
    "percentile",
    "score_trajectory",
    "summarize",
    "value_found",
]
