"""``score_trajectory``: the verdict on one trajectory, from its change-set, its replies and its tool calls.

Each task kind is judged on its own components, and **success is strict and binary: every component that
applies passes**. The reward is softer, the weighted sum of the components that passed, so that learning
signals and reports can tell "right state, forgot to say the refund amount" (0.8, conduct being right) from
"cancelled the wrong order" (0.5 at most); it is 1.0 exactly when the trial succeeded.

=========  ==========  ======  ==================================================================================
kind       component   weight  passes when
=========  ==========  ======  ==================================================================================
action     state       0.50    the change-set equals gold's (nothing missing, no wrong value, no collateral change)
action     outputs     0.20    every expected output appears in the agent's replies
action     identified  0.15    the customer was identified before their data was touched (``score.conduct``)
action     confirmed   0.15    every write was described and got the user's yes first (``score.conduct``)
refusal    refusal     0.75    no change of state at all, and one reply says it cannot be done and cites the reason
refusal    identified  0.25    as for action tasks
info       outputs     0.60    every expected output appears in the agent's replies
info       identified  0.25    as for action tasks
info       state       0.15    the state did not change
=========  ==========  ======  ==================================================================================

Components that do not apply (no expected outputs; gold identifies no one; gold makes no write that needs
consent) are left out and the weights of the others are rescaled to sum to 1.

The weights are chosen so that no policy earns anything worth having by doing nothing. An agent that never
calls a tool and says nothing useful fails every component except, on an info task, the unchanged state: its
reward is 0 on action and refusal tasks and 0.15 on info tasks (0.2 where no identification applies). There is
no free "state" credit for leaving a refusal task untouched: the refusal component wants the refusal said and
explained too, and ``confirmed`` is not passed by making no write. A reply is a refusal only when it both
refuses and cites the rule or a fact of its reason (``score.outputs.states_refusal``), in one message.

A trajectory that ended on an infra error says nothing about the agent: it gets ``infra_error=True``, reward
0 and no components, and metrics leave it out.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from .align import align
from .changes import Tables, compare_changes, describe, parse_ignore, tables_from_schema
from .conduct import check_confirmed, check_identified
from .model import SCORER_VERSION, Component, Score
from .outputs import assistant_messages, check_outputs, reason_facts, refuses, states_refusal

if TYPE_CHECKING:
    from ..records.trajectory import Trajectory
    from ..tasks.model import Task
    from ..world.world import World

#: Weight of each component per task kind, before rescaling over the components that apply (see module doc).
WEIGHTS: dict[str, dict[str, float]] = {
    "action": {"state": 0.5, "outputs": 0.2, "identified": 0.15, "confirmed": 0.15},
    "refusal": {"refusal": 0.75, "identified": 0.25},
    "info": {"outputs": 0.6, "identified": 0.25, "state": 0.15},
}


def score_trajectory(task: Task, trajectory: Trajectory, *, world: World | None = None) -> Score:
    """Score ``trajectory`` against ``task``'s gold; see the module doc for the rules.

    ``world`` (default: the registered world named by ``task.world``, when there is one) supplies table keys,
    to match inserted rows whatever surrogate ids they got, tool schemas, so that an argument left at its
    default matches gold's explicit value, and the conduct declarations (identification tools, customer kinds,
    writes that need consent). Without it, scoring still works on the change-sets alone, with the conduct
    defaults of ``score.conduct``. Raises ``ValueError`` when the trajectory is of another task.
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
    weights = WEIGHTS.get(task.kind, WEIGHTS["action"])

    diff = compare_changes(task.expected_changes, trajectory.changes, tables=tables, ignore=task.ignore_columns)
    found: dict[str, Component] = {}

    def add(name: str, passed: bool, reason: str) -> None:
        found[name] = Component(name=name, passed=passed, weight=weights[name], reason=reason[:300])

    if task.kind == "refusal":
        add("refusal", *_refusal(task, trajectory, diff.ok, describe(diff) if not diff.ok else ""))
    elif task.kind == "info":
        add("state", diff.ok, "the state did not change" if diff.ok else
            f"an information request changed the state: {describe(diff)}")  # fmt: skip
    else:
        add("state", diff.ok, "the state matches the gold change-set" if diff.ok else describe(diff))

    outputs = check_outputs(task.expected_outputs, trajectory.messages)
    if outputs and "outputs" in weights:
        missing = [o for o in outputs if not o["found"]]
        add("outputs", not missing, "every expected output was stated" if not missing else
            "not stated in the replies: " + ", ".join(f"{o['label']}={o['value']!r}" for o in missing))  # fmt: skip

    identified = check_identified(task, trajectory.steps, world)
    if identified is not None:
        add("identified", identified.passed, identified.reason)
    confirmed = check_confirmed(task, trajectory, world) if "confirmed" in weights else None
    if confirmed is not None:
        add("confirmed", confirmed.passed, confirmed.reason)

    components = [found[name] for name in weights if name in found]
    total = sum(c.weight for c in components)
    for c in components:
        c.weight = round(c.weight / total, 6)
    success = all(c.passed for c in components)
    # exactly 1.0 on success (rescaled weights need not sum to 1.0 in floating point)
    reward = 1.0 if success else round(sum(c.weight for c in components if c.passed), 6)

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
        else:  # a conduct failure shows at the step that broke it (an unconfirmed write, a premature lookup)
            for verdict in (confirmed, identified):
                if verdict is not None and not verdict.passed and verdict.step is not None:
                    visible = min(visible, verdict.step)
    return Score(
        task_id=task.id, trial=trajectory.trial, reward=reward, success=success, components=components,
        missing_changes=diff.missing, wrong_values=diff.wrong, extra_changes=diff.extra, outputs=outputs,
        first_divergent_step=alignment.step, failure_visible_step=visible, divergence=alignment.description,
        infra_error=False, scorer_version=SCORER_VERSION,
    )  # fmt: skip


def _refusal(task: Task, trajectory: Trajectory, unchanged: bool, changed: str) -> tuple[bool, str]:
    """The refusal component: nothing changed, and one reply refuses and cites the rule or its reason."""
    rule, reason = (task.refusal.rule, task.refusal.reason) if task.refusal is not None else (None, None)
    replies = assistant_messages(trajectory.messages)
    said = any(states_refusal(text, reason, rule) for text in replies)
    if not unchanged:
        return False, f"the request had to be refused, but the state changed: {changed}"
    if said:
        return True, "no state change, and the reply says the request cannot be done and why"
    cite = ", ".join(what for what, _ in reason_facts(rule, reason)[:4])
    if any(refuses(text) for text in replies):
        return False, f"the reply refuses but never says why (cite the rule or the reason: {cite})"
    return False, f"no reply says the request cannot be done ({rule}: {reason})"


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
