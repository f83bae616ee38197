"""``score_trajectory``: the verdict on one trajectory, from its change-set, its replies and its tool calls.

Each task kind is judged on its own components, and **success is strict and binary: every component that
applies passes**. The reward is softer, the weighted sum of the components that passed, so that learning
signals and reports can tell "right state, forgot to say the refund amount" (0.8, conduct being right) from
"cancelled the wrong order" (0.5 at most); it is 1.0 exactly when the trial succeeded.

=========  ==========  ======  ==================================================================================
kind       component   weight  passes when
=========  ==========  ======  ==================================================================================
action     state       0.50    the change-set equals gold's (nothing missing, no wrong value, no collateral change)
action     outputs     0.20    every expected output appears in the agent's replies, after a tool result showed it
action     identified  0.15    the customer was identified before their data was touched (``scoring.conduct``)
action     confirmed   0.15    every write was described and got the user's yes first (``scoring.conduct``)
refusal    refusal     0.75    no change of state at all, one reply says it cannot be done and cites the reason,
                               and the agent looked at the object refused (a call or a reply names its id)
refusal    identified  0.25    as for action tasks
info       outputs     0.60    as for action tasks
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
refuses and cites the rule or a fact of its reason (``scoring.outputs.states_refusal``), in one message.

A task may accept more than one end state (``Task.alternatives``: an exchange asked for on an order that has not
shipped may be refused, or the pending order's items swapped instead). The trajectory is scored against the primary
end state and against each alternative as if it were the task (its kind, change-set, outputs, refusal, and gold
actions for the conduct checks and the divergence), and the best score stands: a success beats a failure, among
failures the highest reward wins, ties go to the primary end state; ``Score.end_state`` names the alternative that
won (None: the primary). An alternative opens no shortcut, since each end state is judged whole: doing nothing
states no refusal and makes no change, so it fails a refusal whose alternative is a write, and the alternative's
write plus any other change is collateral damage against the alternative and a changed state against the refusal.

A trajectory that ended on an infra error says nothing about the agent: it gets ``infra_error=True``, reward
0 and no components, and metrics leave it out.

Each component is a function registered with :func:`component`, with its weight per task kind; the score lists
the components that apply heaviest first. Components from other packages (the ``toolworld.scorers`` entry
points, or a module that uses the decorator) are **opt-in**: they count only in a call that names them,
``score_trajectory(task, trajectory, extra=["politeness"])``, which then records them in ``scorer_version``
(``toolworld-score/4+politeness``), so that installing a package never changes anyone's rewards unasked and
a stored score says which rules produced it::

    from toolworld.scoring import Verdict, component

    @component("politeness", kinds={"action": 0.1, "info": 0.1})
    def politeness(ev):  # ev: Evidence (task, trajectory, world, diff, outputs)
        rude = [m for m in ev.replies if "stupid" in m.lower()]
        return Verdict(not rude, "no rude reply" if not rude else f"rude: {rude[0][:80]}")
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

from ..core.registry import Registry
from .align import align
from .changes import Diff, Tables, compare_changes, describe, parse_ignore, tables_from_schema
from .conduct import Verdict, check_confirmed, check_identified
from .model import SCORER_VERSION, Component, Score
from .outputs import (
    HEDGED,
    NOT_STATED,
    UNGROUNDED,
    assistant_messages,
    check_outputs,
    contains_phrase,
    quoted_phrases,
    reason_facts,
    refuses,
    schema_enums,
    states_refusal,
)

if TYPE_CHECKING:
    from ..records.trajectory import Step, Trajectory
    from ..tasks.model import EndState, Task
    from ..world.world import World

ENTRY_POINT_GROUP = "toolworld.scorers"
TASK_KINDS = ("action", "refusal", "info")


@dataclass
class Evidence:
    """What a component judges: the task, the trajectory, the world (None when not registered), and what every
    component would otherwise compute again: the change-set compared with gold, the expected outputs found."""

    task: Task
    trajectory: Trajectory
    world: World | None
    tables: Tables
    diff: Diff

    @cached_property
    def outputs(self) -> list[dict[str, Any]]:
        """``check_outputs`` of the task's expected outputs: ``{label, value, found}`` each (stated, and shown by a
        tool result the agent had before saying it)."""
        enums = _enums(self.world.schema) if self.world is not None else ()
        return check_outputs(self.task.expected_outputs, self.trajectory.messages, self.trajectory.steps, enums=enums)

    @cached_property
    def replies(self) -> list[str]:
        """The text of every assistant message."""
        return assistant_messages(self.trajectory.messages)


#: A component: the verdict on one aspect of a trajectory, or None where it does not apply to this task (no
#: expected outputs; nobody to identify), in which case it is left out and the other weights are rescaled.
ComponentFn = Callable[[Evidence], "Verdict | None"]


def _as_component(obj: Any, name: str) -> ComponentFn:
    if not callable(obj):
        raise TypeError(f"{type(obj).__name__} is not a scorer component (a function of Evidence)")
    return obj


#: Every scorer component; the built-in ones are the default, the others count only when named (``extra=``).
COMPONENTS: Registry[ComponentFn] = Registry("scorer component", group=ENTRY_POINT_GROUP, adapt=_as_component,
                                             error=ValueError)  # fmt: skip


def component(name: str, *, kinds: Mapping[str, float], replace: bool = False) -> Callable[[ComponentFn], ComponentFn]:
    """Register a scorer component with its weight per task kind (kinds it does not name: not judged).

    Weights are relative: a score rescales those of the components that apply to sum to 1.
    """
    bad = {k: w for k, w in kinds.items() if not (isinstance(w, int | float) and w > 0)}
    if bad or not kinds:
        raise ValueError(f"scorer component {name!r}: kinds= needs a positive weight per task kind, got {dict(kinds)}")

    def decorate(fn: ComponentFn) -> ComponentFn:
        COMPONENTS.register(name, fn, replace=replace, kinds=dict(kinds))
        return fn

    return decorate


def weights(kind: str, extra: Sequence[str] = ()) -> dict[str, float]:
    """The components judged on a task of ``kind`` with their weights (before rescaling), heaviest first.

    ``extra`` names opt-in components to add to the built-in ones; an unknown name raises ``ValueError``
    listing the registered components.
    """
    return {name: weight for name, weight, _fn in _plan(kind, tuple(extra))}


_plans: dict[tuple[str, tuple[str, ...]], tuple[int, list[tuple[str, float, ComponentFn]]]] = {}


def _plan(kind: str, extra: tuple[str, ...]) -> list[tuple[str, float, ComponentFn]]:
    """(name, weight, function) of each component judged, heaviest first; kept until the registry changes
    (scoring runs per trial, and the table is the same for every trial of a run)."""
    version = COMPONENTS.version
    cached = _plans.get((kind, extra))
    if cached is not None and cached[0] == version:
        return cached[1]
    judged = kind if kind in TASK_KINDS else "action"  # a kind this version does not know is judged as an action
    plan = []
    for name in [*BUILTIN_COMPONENTS, *(n for n in dict.fromkeys(extra) if n not in BUILTIN_COMPONENTS)]:
        entry = COMPONENTS.entry(name)
        w = entry.meta.get("kinds", {}).get(judged)
        if w is not None:
            plan.append((name, float(w), entry.item))
    plan.sort(key=lambda item: -item[1])  # heaviest first; ties keep registration order (the sort is stable)
    _plans[(kind, extra)] = (COMPONENTS.version, plan)
    return plan  # type: ignore[return-value]


def score_trajectory(task: Task, trajectory: Trajectory, *, world: World | None = None,
                     extra: Sequence[str] = ()) -> Score:  # fmt: skip
    """Score ``trajectory`` against ``task``'s gold (the best of its acceptable end states); see the module doc.

    ``world`` (default: the registered world named by ``task.world``, when there is one) supplies table keys,
    to match inserted rows whatever surrogate ids they got, tool schemas, so that an argument left at its
    default matches gold's explicit value, and the conduct declarations (identification tools, customer kinds,
    writes that need consent). Without it, scoring still works on the change-sets alone, with the conduct
    defaults of ``scoring.conduct``. ``extra`` names opt-in components to judge besides the built-in ones (see the
    module doc). Raises ``ValueError`` when the trajectory is of another task or names an unknown component.
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
    best = _score_end_state(task, trajectory, world, tables, tuple(extra))
    for alternative in task.alternatives:
        score = _score_end_state(_end_state_view(task, alternative), trajectory, world, tables, tuple(extra))
        # strictly better only: ties go to the primary end state (then to the earlier alternative)
        if (score.success, score.reward) > (best.success, best.reward):
            best = score.model_copy(update={"end_state": alternative.label})
    return best


def _end_state_view(task: Task, alternative: EndState) -> Task:
    """``task`` as if ``alternative`` were its only end state: every component judges it unchanged, so that an
    alternative is held to exactly the rules of a task of its kind (no state, output or conduct check is relaxed)."""
    return task.model_copy(update={
        "kind": alternative.kind, "gold_actions": alternative.gold_actions,
        "expected_changes": alternative.expected_changes, "expected_outputs": alternative.expected_outputs,
        "refusal": alternative.refusal, "alternatives": [],
    })  # fmt: skip


def _score_end_state(task: Task, trajectory: Trajectory, world: World | None, tables: Tables,
                     extra: tuple[str, ...]) -> Score:  # fmt: skip
    """The score against ``task``'s primary end state alone (``end_state`` None)."""
    plan = _plan(task.kind, extra)
    diff = compare_changes(task.expected_changes, trajectory.changes, tables=tables, ignore=task.ignore_columns)
    evidence = Evidence(task, trajectory, world, tables, diff)
    verdicts: dict[str, Verdict] = {}
    components = []
    for name, weight, judge in plan:
        verdict = judge(evidence)
        if verdict is not None:
            verdicts[name] = verdict
            components.append(Component(name=name, passed=verdict.passed, weight=weight, reason=verdict.reason[:300]))
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
            for verdict in verdicts.values():
                if not verdict.passed and verdict.step is not None:
                    visible = min(visible, verdict.step)
    return Score(
        task_id=task.id, trial=trajectory.trial, reward=reward, success=success, components=components,
        missing_changes=diff.missing, wrong_values=diff.wrong, extra_changes=diff.extra, outputs=evidence.outputs,
        first_divergent_step=alignment.step, failure_visible_step=visible, divergence=alignment.description,
        infra_error=False, scorer_version=_version(extra),
    )  # fmt: skip


def _version(extra: Sequence[str]) -> str:
    """The scorer version, with the opt-in components that took part (they change what a trajectory scores)."""
    added = [n for n in dict.fromkeys(extra) if n not in BUILTIN_COMPONENTS]
    return "+".join([SCORER_VERSION, *added])


# -- the built-in components (weights: see the module doc) ---------------------------------------------------------


@component("state", kinds={"action": 0.5, "info": 0.15})
def judge_state(ev: Evidence) -> Verdict:
    """Action: the change-set equals gold's. Info: nothing changed. (A refusal's state is part of ``refusal``.)"""
    if ev.task.kind == "info":
        return Verdict(ev.diff.ok, "the state did not change" if ev.diff.ok else
                       f"an information request changed the state: {describe(ev.diff)}")  # fmt: skip
    return Verdict(ev.diff.ok, "the state matches the gold change-set" if ev.diff.ok else describe(ev.diff))


@component("outputs", kinds={"action": 0.2, "info": 0.6})
def judge_outputs(ev: Evidence) -> Verdict | None:
    """Every expected output appears in the agent's replies, each after a tool result that showed it (a value
    said before anything showed it is a guess: ``scoring.outputs``); does not apply when nothing is expected."""
    if not ev.outputs:
        return None
    failed: dict[str, list[str]] = {}
    for o in ev.outputs:
        if not o["found"]:
            failed.setdefault(o.get("why", NOT_STATED), []).append(f"{o['label']}={o['value']!r}")
    if not failed:
        return Verdict(True, "every expected output was stated")
    heading = {NOT_STATED: "not stated in the replies",
               HEDGED: "stated only in a list of candidates (say the one value the tool showed)",
               UNGROUNDED: "stated before any tool result the agent received showed it (look it up first)"}
    why = [f"{heading.get(w, w)}: " + ", ".join(items) for w, items in failed.items()]
    return Verdict(False, "; ".join(why))


@component("refusal", kinds={"refusal": 0.75})
def judge_refusal(ev: Evidence) -> Verdict:
    """Nothing changed, and one reply refuses and cites the rule or its reason."""
    task = ev.task
    rule, reason = (task.refusal.rule, task.refusal.reason) if task.refusal is not None else (None, None)
    replies = ev.replies
    said = any(states_refusal(text, reason, rule) for text in replies)
    if not ev.diff.ok:
        return Verdict(False, f"the request had to be refused, but the state changed: {describe(ev.diff)}")
    if said:
        unseen = _unseen_objects(task, ev.trajectory.steps, replies, ev.world)
        if unseen:
            return Verdict(False, "the reply refuses, but nothing shows the agent looked at what was asked about: no "
                           f"call passed and no reply names {', '.join(unseen)} (look it up before refusing)")
        return Verdict(True, "no state change, and the reply says the request cannot be done and why")
    cite = ", ".join(what for what, _ in reason_facts(rule, reason)[:4])
    if any(refuses(text) for text in replies):
        return Verdict(False, f"the reply refuses but never says why (cite the rule or the reason: {cite})")
    return Verdict(False, f"no reply says the request cannot be done ({rule}: {reason})")


def refused_objects(task: Task, world: World | None) -> list[str]:
    """The ids of what the task's refused call is about, which a refusal must be seen to concern.

    They are the entity arguments of the forbidden call (``Tool.spec.entity_params``; without a world, arguments
    named ``*_id`` / ``*_ids``), less the customer's own id (who asks, not what is refused); of those, the ones the
    reason names (a refused return is about the order the reason cites, not the payment method the refund would
    have gone to), or all of them when the reason names the object as the user did (a quoted phrase of the
    request: 'Hold a 30-day goals meeting'). Empty when the reason names neither: then the refusal is about the
    customer or the request itself (a frozen membership refuses any plan change, whichever plan was named), and
    there is no object to have looked at; likewise when the call takes no such id (a request to create something
    new).
    """
    refusal = task.refusal
    if refusal is None:
        return []
    args = refusal.forbidden.arguments
    tool = world.tools.get(refusal.forbidden.name) if world is not None else None
    if tool is not None:
        customer = getattr(world, "customer", None)
        params = [p.param for p in tool.spec.entity_params if p.kind != customer]
    else:
        params = [k for k in args if k.endswith(("_id", "_ids")) and k not in ("user_id", "customer_id")]
    ids: list[str] = []
    for param in params:
        value = args.get(param)
        for v in value if isinstance(value, list) else [value]:
            if isinstance(v, str | int) and not isinstance(v, bool) and str(v).strip():
                ids.append(str(v).strip())
    named = [i for i in ids if _names_id(refusal.reason, i)]
    if not named and any(contains_phrase(task.instruction, q) for q in quoted_phrases(refusal.reason)):
        named = ids
    return list(dict.fromkeys(named))


def _names_id(text: str, ident: str) -> bool:
    """Whether ``text`` names id ``ident`` as a whole token (case and a leading '#' aside, as people write ids)."""
    bare = ident.lstrip("#")
    return re.search(rf"(?<![A-Za-z0-9]){re.escape(bare)}(?![A-Za-z0-9])", text, re.I) is not None


def _unseen_objects(task: Task, steps: Sequence[Step], replies: Sequence[str], world: World | None) -> list[str]:
    """The refused objects (:func:`refused_objects`) that no call passed and no reply names.

    Without this, a refusal about the wrong object passes: asked to reopen ticket A, an agent that tries ticket B,
    gets the same rule's error and relays it has cited the right rule without ever looking at A. Any call counts,
    a read or the refused write itself (it fails, and its error is the reason), and so does a reply that names the
    id, since the reason the agent must give is about that object. Where the reason names several ids, each must
    be seen; otherwise one of the call's ids is enough, or a reply that names the object as the reason and the user
    both do.
    """
    objects = refused_objects(task, world)
    if not objects:
        return []
    passed = [json.dumps(s.arguments, ensure_ascii=False, default=str) if not isinstance(s.arguments, str)
              else s.arguments for s in steps]  # fmt: skip
    seen = [o for o in objects if any(_names_id(text, o) for text in [*passed, *replies])]
    reason = task.refusal.reason if task.refusal is not None else ""
    if any(_names_id(reason, o) for o in objects):
        return [o for o in objects if o not in seen]
    if seen:
        return []
    # A reason that does not name the id names the object as the user did ('Hold a 30-day goals meeting'):
    # saying that is as good as the id, and an agent relaying another object's error says another name.
    names = [q for q in quoted_phrases(reason) if contains_phrase(task.instruction, q)]
    if any(contains_phrase(text, q) for q in names for text in replies):
        return []
    return [*objects, *(f"'{q}'" for q in names)]


@component("identified", kinds={"action": 0.15, "refusal": 0.25, "info": 0.25})
def judge_identified(ev: Evidence) -> Verdict | None:
    """The customer was identified before their data was touched (``scoring.conduct``)."""
    return check_identified(ev.task, ev.trajectory.steps, ev.world)


@component("confirmed", kinds={"action": 0.15})
def judge_confirmed(ev: Evidence) -> Verdict | None:
    """Every write was described and got the user's yes first (``scoring.conduct``)."""
    return check_confirmed(ev.task, ev.trajectory, ev.world)


#: The components every score judges, in registration order.
BUILTIN_COMPONENTS: tuple[str, ...] = ("state", "outputs", "refusal", "identified", "confirmed")

#: Weight of each built-in component per task kind, before rescaling over the components that apply (a view of
#: the registrations above, heaviest first).
WEIGHTS: dict[str, dict[str, float]] = {kind: weights(kind) for kind in TASK_KINDS}


@functools.lru_cache(maxsize=32)
def _enums(schema: str) -> tuple[frozenset[str], ...]:
    """``schema_enums`` of a world's schema, parsed once per schema (every trial of a run has the same)."""
    return tuple(schema_enums(schema))


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
