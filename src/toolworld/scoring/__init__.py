"""Scoring: verifiers (change-set against gold, collateral damage, stated outputs, refusals with their reason,
conduct: identification and confirmation), reward components, pass@k / pass^k and the first divergent step.

``score_trajectory(task, trajectory)`` gives a :class:`Score` per trial; ``summarize`` turns a run's
trajectories and scores into the typed :class:`Summary` (its JSON is the run's ``summary.json``). Nothing
here runs a model.
"""

from .align import Alignment, align
from .changes import Diff, compare_changes
from .conduct import check_confirmed, check_identified, is_affirmative
from .metrics import pass_at_k, pass_hat_k, percentile
from .model import SCORER_VERSION, Component, Score
from .outputs import check_outputs, cites_reason, output_kind, refuses, states_refusal, value_found
from .summary import Summary, summarize
from .verify import COMPONENTS, WEIGHTS, Evidence, Verdict, component, score_trajectory, weights

__all__ = [
    "COMPONENTS",
    "SCORER_VERSION",
    "WEIGHTS",
    "Alignment",
    "Component",
    "Diff",
    "Evidence",
    "Score",
    "Summary",
    "Verdict",
    "align",
    "check_confirmed",
    "check_identified",
    "check_outputs",
    "cites_reason",
    "compare_changes",
    "component",
    "is_affirmative",
    "output_kind",
    "pass_at_k",
    "pass_hat_k",
    "percentile",
    "refuses",
    "score_trajectory",
    "states_refusal",
    "summarize",
    "value_found",
    "weights",
]
