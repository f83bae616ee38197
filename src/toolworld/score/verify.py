"""``score_trajectory``: the verdict on one trajectory, from its change-set, its replies and its tool calls.

Success is strict and binary: the agent's net change-set equals gold's (nothing missing, no wrong value, no
collateral change; free-text columns aside), every expected output was said, and, for a refusal task, the
state did not change at all (gold's change-set is empty, so any write is extra). The reward is softer, a
weighted sum of components, so that learning signals and reports can tell "right state, forgot to say the
refund amount" from "cancelled the wrong order":

==========  ======  =============================================================
component   weight  passes when
==========  ======  =============================================================
state       0.6     the change-set equals gold (refusal tasks: no change at all)
outputs     0.3     every expected output appears in the agent's replies
refusal     0.1     (refusal tasks) the reply says the request cannot be done
==========  ======  =============================================================

Components that do not apply (no expected outputs; not a refusal task) are left out and the weights of the
others are rescaled to sum to 1. A reward of 1.0 therefore implies success; the only success below 1.0 is a
refusal task left untouched whose reply never says it refuses (the softer check is not part of success).

A trajectory that ended on an infra error says nothing about the agent: it gets ``infra_error=True``, reward
0 and no components, and metrics leave it out.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from .align import align
from .changes import Tables, compare_changes, describe, parse_ignore, tables_from_schema
from .model import SCORER_VERSION, Component, Score
from .outputs import assistant_text, check_outputs, states_refusal

if TYPE_CHECKING:
    from ..rollout.trajectory import Trajectory
    from ..tasks.model import Task
    from ..world.world import World

WEIGHTS = {"state": 0.6, "outputs": 0.3, "refusal": 0.1}


def score_trajectory(task: Task, trajectory: Trajectory, *, world: World | None = None) -> Score:
    """Score ``trajectory`` against ``task``'s gold; see the module doc for the rules.

    ``world`` (default: the registered world named by ``task.world``, when there is one) supplies table keys,
    to match inserted rows whatever surrogate ids they got, and tool schemas, so that an argument left at its
    default matches gold's explicit value. Without it, scoring still works on the change-sets alone.
    Raises ``ValueError`` when the trajectory is of another task.
    """
    if trajectory.task_id != task.id:
        raise ValueError(f"trajectory of task {trajectory.task_id} cannot be scored against task {task.id}")
    if trajectory.failed_by_infra:
        last = trajectory.infra_errors[-1] if trajectory.infra_errors else None
        why = f" ({last.get('kind', 'error')}: {last.get('message', '')})" if last else ""
        return Score(task_id=task.id, trial=trajectory.trial, reward=0.0, success=False, infra_error=True,
                     divergence=f"not scored: the episode ended on an infra error{why}"[:300])  # fmt: skip
    world = world if world is not None else _registered(task.world)
    tables = tables_from_schema(world.schema) if world is not None else Tables()

    diff = compare_changes(task.expected_changes, trajectory.changes, tables=tables, ignore=task.ignore_columns)
    if task.kind == "refusal":
        state_reason = ("no state change, as the request had to be refused" if diff.ok else
                        f"the request had to be refused, but the state changed: {describe(diff)}")  # fmt: skip
    else:
        state_reason = "the state matches the gold change-set" if diff.ok else describe(diff)
    components = [Component(name="state", passed=diff.ok, weight=WEIGHTS["state"], reason=state_reason)]

    outputs = check_outputs(task.expected_outputs, trajectory.messages)
    if outputs:
        missing = [o for o in outputs if not o["found"]]
        reason = ("every expected output was stated" if not missing else "not stated in the replies: "
                  + ", ".join(f"{o['label']}={o['value']!r}" for o in missing))  # fmt: skip
        components.append(Component(name="outputs", passed=not missing, weight=WEIGHTS["outputs"], reason=reason))

    if task.refusal is not None:
        said = states_refusal(assistant_text(trajectory.messages), task.refusal.reason)
        reason = ("the reply says the request cannot be done" if said else
                  f"the reply never says the request cannot be done ({task.refusal.rule}: {task.refusal.reason})")  # fmt: skip
        components.append(Component(name="refusal", passed=said, weight=WEIGHTS["refusal"], reason=reason[:300]))

    total = sum(c.weight for c in components)
    for c in components:
        c.weight = round(c.weight / total, 6)
    success = diff.ok and all(o["found"] for o in outputs)
    # exactly 1.0 when every component passed (rescaled weights need not sum to 1.0 in floating point)
    reward = 1.0 if all(c.passed for c in components) else round(sum(c.weight for c in components if c.passed), 6)

    free_text = frozenset(c for _, c in parse_ignore(task.ignore_columns))
    alignment = align(task.gold_actions, trajectory.steps, normalize=_normalizer(world), free_text=free_text)
    visible = None
    if not success:
        visible = len(trajectory.steps)
        if not diff.ok:  # the first write off the gold path is where the state went astray
            for j, step in enumerate(trajectory.steps):
                if step.mutates and j not in alignment.matched and (step.ok or step.agent_error):
                    visible = j
                    break
    return Score(
        task_id=task.id, trial=trajectory.trial, reward=reward, success=success, components=components,
        missing_changes=diff.missing, wrong_values=diff.wrong, extra_changes=diff.extra, outputs=outputs,
        first_divergent_step=alignment.step, failure_visible_step=visible, divergence=alignment.description,
        infra_error=False, scorer_version=SCORER_VERSION,
    )  # fmt: skip


def _registered(name: str) -> World | None:
    from ..world import get_world

    try:
        return get_world(name)
    except Exception:  # not registered (a world built in a script): score from the change-sets alone
        return None


def _normalizer(world: World | None) -> Any:
    """Arguments as the tool sees them (defaults filled in, values coerced), as plain JSON."""
    if world is None:
        return None

    def normalize(name: str, args: Any) -> Any:
        tool = world.tools.get(name)
        if tool is None or not isinstance(args, dict):
            return args
        try:
            values = tool.validate(args)
        except Exception:  # invalid arguments (ToolError) or anything odd a model sent: compare them as sent
            return args
        return json.loads(json.dumps(values, default=str))

    return normalize
