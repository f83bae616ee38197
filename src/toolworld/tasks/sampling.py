"""Samplers: walk the tool graph on a live episode until a target call succeeds (or is refused).

Every draw runs on a real episode, so arguments come from live state and the gold path is valid by
construction: a candidate target call is first tried on a fork, and only what the world accepts (or, for a
refusal task, refuses with ``policy_violation``) is kept. Each value the target needs and the user does not
know is then *discovered* by read calls, chosen along the graph from what is already known, so the gold
actions are a conversation an agent could actually have.

Samplers (the ``SAMPLERS`` registry, in this order):
- ``target``: a target write tool (cycling so every one is covered); its inputs reached by the shortest read
  paths from the user's facts.
- ``greedy``: FunReason-MT-style: call the target as soon as its prerequisites are known, otherwise the
  legal read nearest to it in the graph; every call executes as it goes.
- ``walk``: APIGen-MT-style random walk over legal reads, then a write whose inputs the walk uncovered.
- ``compose``: two or three targets for the same user, chained in one conversation.
- ``refusal``: a target call the policy forbids; the gold is no state change plus the stated reason.
- ``info``: a read whose answer the agent must tell the user (a tracking number).

A sampler is a function registered with :func:`sampler`: given the synthesizer, a conversation whose user has
just been identified, and the draw's index, it returns the targets it reached (``conv.attempt(tool, goal)``
tries a candidate call and discovers what it needs) or raises ``Drop(reason)``. Other packages add samplers
through the ``toolworld.samplers`` entry points (a module that uses the decorator); they are drawn only when
``--sampler`` names them, so the default mix, and the tasks it generates for a seed, stay as they are.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ..core.errors import ToolworldError
from ..core.jsonutil import canonical_json
from ..core.registry import Registry
from ..world import Episode, Rng, World, extract_path
from .graph import ToolGraph
from .kit import _MISSING, Bag, TaskKit, kit_for, schema_value
from .model import Contingency, Need, TaskKind, UserProfile

ENTRY_POINT_GROUP = "toolworld.samplers"
# The default mix: every sampler, refusals at about 12% so that scorers see enough of them, and a fifth of
# conditional requests (the branch depends on state the agent must look up).
DEFAULT_MIX = {"target": 20, "greedy": 16, "walk": 8, "compose": 14, "refusal": 11, "info": 10, "contingency": 21}

Role = Literal["identify", "discover", "explore", "inspect", "target"]
RULE = re.compile(r"\(policy (R\d+)\)")


@dataclass(slots=True)
class Step:
    name: str
    arguments: dict[str, Any]
    role: Role
    output: Any = None


@dataclass(slots=True)
class Target:
    tool: str
    arguments: dict[str, Any]
    output: Any = None
    rule: str | None = None  # refusal: the policy rule the call breaks
    reason: str | None = None  # refusal: the tool's explanation
    # Slot texts that replace the kit's plain ones when phrasing (a need: {"new_items": "the same one a size
    # up"}; an order the user cannot number: {"order": "my order with the Desk Lamp"}).
    slots: dict[str, str] = field(default_factory=dict)
    # The arguments the request speaks of when they are not the gold's (a change of mind: the first wish).
    said: dict[str, Any] | None = None
    # Slots the request leaves out, by the ``user.known`` key the user gives when asked (a piecemeal user:
    # {"address": "new_address"}); phrased with the kit's ``withheld_templates``.
    withheld: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class Speech:
    """How a draft is phrased beyond one intent sentence per target (set by the world's scenarios)."""

    identity: bool = True  # False: the request says nothing of who asks (a piecemeal user, asked for it)
    contingency: str | None = None  # a contingency template kind: the targets become one conditional request
    contingency_slots: dict[str, str] = field(default_factory=dict)
    revision: str | None = None  # the tool whose change of mind the user voices when asked to confirm
    revision_slots: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class Draft:
    """A sampled conversation before phrasing and gold replay."""

    kind: TaskKind
    sampler: str
    principal: Any
    profile: UserProfile
    identity: Step
    steps: list[Step]
    targets: list[Target]
    distractors: int = 0
    speech: Speech = field(default_factory=Speech)
    # The scenario, filled by the contingency sampler and the kit's ``dress``:
    demands: list[str] = field(default_factory=list)  # reasoning the request asks for (model.DEMANDS)
    needs: list[Need] = field(default_factory=list)
    contingency: Contingency | None = None
    unknown: list[tuple[str, Any]] = field(default_factory=list)  # (kind, value) the user cannot quote
    revision: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # the first wish's calls
    reads: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # reads a need's answer is shown by
    mentions: list[Any] = field(default_factory=list)  # entity values the request quotes besides the targets'

    def demand(self, name: str) -> None:
        if name not in self.demands:
            self.demands.append(name)


@dataclass(slots=True)
class Plan:
    """A contingency a kit proposes: ``then`` when ``condition`` holds on the live state, else ``otherwise``."""

    kind: str  # the contingency template kind that phrases it
    condition: str
    holds: bool
    then: tuple[str, dict[str, Any]]
    otherwise: tuple[str, dict[str, Any]]
    slots: dict[str, str] = field(default_factory=dict)


class Drop(ToolworldError):
    """A draw that produced no usable task (counted by reason in generation stats).

    Control flow inside generation, caught per draw; a sampler may raise it with its own ``reason``.
    """

    default_kind = "task_dropped"

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass
class Conversation:
    """The state of one draw: the episode, what the user and agent know, and the calls made so far."""

    synth: Synthesizer
    ep: Episode
    rng: Rng
    principal: Any
    profile: UserProfile
    bag: Bag
    steps: list[Step] = field(default_factory=list)
    called: set[str] = field(default_factory=set)
    plan: Plan | None = None  # the contingency a sampler took, if any

    # -- executing ------------------------------------------------------------------------------------------

    def run(self, name: str, args: dict[str, Any], role: Role) -> Any | None:
        """Call a tool on the episode; on success record the step and learn what its result yields."""
        result = self.ep.call(name, args)
        self.called.add(_key(name, args))
        if not result.ok:
            return None
        self.steps.append(Step(name, args, role, result.output))
        for kind, path in self.synth.specs[name].yields.items():
            self.bag.add(kind, extract_path(result.output, path))
        return result

    def checkpoint(self) -> tuple[dict[str, list[Any]], int]:
        return {k: list(v) for k, v in self.bag.by_kind.items()}, len(self.steps)

    def rollback(self, point: tuple[dict[str, list[Any]], int]) -> None:
        """Forget reads that led nowhere (reads change no state, so only knowledge is rolled back)."""
        self.bag.by_kind, n = point[0], point[1]
        del self.steps[n:]

    # -- the first call -------------------------------------------------------------------------------------

    def identify(self) -> Step:
        tools = [t for t in self.synth.identify_tools if self.synth.specs[t].requires <= self.bag.kinds()]
        if not tools:
            raise Drop("no_identity_tool")
        for name in self.rng.sample(tools, len(tools)):
            spec = self.synth.specs[name]
            args = {p.param: self.bag.get(p.kind)[0] for p in spec.entity_params if self.bag.get(p.kind)}
            if self.run(name, args, "identify") is not None and self.bag.has(self.synth.kit.principal or "", self.principal):
                return self.steps[-1]
            self.steps = [s for s in self.steps if s.role != "identify"]
        raise Drop("identity_failed")

    # -- finding what a target needs -------------------------------------------------------------------------

    def entity_values(self, tool: str, args: Mapping[str, Any]) -> list[tuple[str, Any]]:
        out = []
        for p in self.synth.specs[tool].entity_params:
            if p.param in args and args[p.param] is not None:
                values = args[p.param] if p.many else [args[p.param]]
                out.extend((p.kind, v) for v in values)
        return out

    def resolve(self, tool: str, args: Mapping[str, Any]) -> bool:
        """Discover, by read calls, every entity value in ``args`` that is not known yet (a few passes, so
        chains like order → item → product → replacement item resolve in dependency order)."""
        hints = {v for _, v in self.entity_values(tool, args)}
        pending = [(k, v) for k, v in self.entity_values(tool, args) if not self.bag.has(k, v)]
        for _ in range(4):
            if not pending:
                return True
            progress = False
            for kind, value in list(pending):
                if self.bag.has(kind, value) or self.discover(kind, value, hints):
                    pending.remove((kind, value))
                    progress = True
            if not progress:
                return False
        return not pending

    def discover(self, kind: str, value: Any, hints: set[Any]) -> bool:
        """One read that yields ``value``: producers of ``kind`` bound from the bag, related values first."""
        related = self.synth.related(self.ep, kind, value) | hints
        for producer in self.synth.graph.producers(kind):
            for args in self.bindings(producer, related):
                if _key(producer, args) in self.called:
                    continue
                point = self.checkpoint()
                if self.run(producer, args, "discover") is not None and self.bag.has(kind, value):
                    return True
                self.rollback(point)
        return False

    def bindings(self, tool: str, prefer: set[Any] = frozenset(), limit: int = 6) -> list[dict[str, Any]]:  # type: ignore[assignment]
        """Argument sets for a read tool from known values: preferred values first, then the most recent."""
        spec = self.synth.specs[tool]
        choices: list[list[tuple[str, Any]]] = []
        for p in spec.entity_params:
            if not p.required:
                continue
            values = self.bag.get(p.kind)
            if not values:
                return []
            ranked = sorted(values, key=lambda v, vs=values: (v not in prefer, -vs.index(v)))
            choices.append([(p.param, [v] if p.many else v) for v in ranked[:limit]])
        extras: dict[str, Any] = {}
        entity_params = {p.param for p in spec.entity_params}
        for name in spec.parameters.get("required", []):
            if name in entity_params:
                continue
            value = schema_value(spec.parameters["properties"][name], self.rng)
            if value is _MISSING:
                return []
            extras[name] = value
        return [{**dict(combo), **extras} for combo in itertools.islice(itertools.product(*choices), limit)]

    def inspect(self, tool: str, args: Mapping[str, Any]) -> None:
        """For a refusal: look at each entity the request is about, as an agent must before refusing."""
        singles = {p.param for p in self.synth.specs[tool].entity_params if not p.many}
        for kind, value in self.entity_values(tool, {k: v for k, v in args.items() if k in singles}):
            readers = self.synth.inspectors.get(kind)
            if readers and _key(readers, {self.synth.param_of[readers]: value}) not in self.called:
                self.run(readers, {self.synth.param_of[readers]: value}, "inspect")

    # -- trying a target ------------------------------------------------------------------------------------

    def attempt(self, tool: str, goal: Literal["action", "refusal", "info"], *, known_only: bool = False,
                tries: int = 8, avoid: set[Any] = frozenset()) -> Target | None:  # type: ignore[assignment]  # fmt: skip
        """Try candidate arguments on a fork; keep the first the world accepts (or refuses, for ``refusal``).

        ``avoid``: objects (non-principal entity values) an earlier request of the same conversation already
        changes; a second write on one object is not something a customer asks for in one breath.
        """
        kit = self.synth.kit
        for args in kit.propose(tool, self.ep, self.principal, self.bag, self.rng)[:tries]:
            if known_only and any(not self.bag.has(k, v) for k, v in self.entity_values(tool, args)):
                continue
            if avoid and self.synth.objects(tool, args) & avoid:
                continue
            if _key(tool, args) in self.called:
                continue
            result = self.ep.probe(tool, args)
            if goal == "refusal":
                if result.ok or result.error is None or result.error.type != "policy_violation":
                    continue
            elif not result.ok:
                continue
            point = self.checkpoint()
            if not self.resolve(tool, args):
                self.rollback(point)
                continue
            if goal == "refusal":
                assert result.error is not None
                self.inspect(tool, args)
                match = RULE.search(result.error.message)
                self.called.add(_key(tool, args))
                return Target(tool, dict(args), None, match.group(1) if match else "policy", result.error.message)
            if goal == "info" and not kit.outputs(tool, args, result.output):
                self.rollback(point)
                continue
            done = self.run(tool, dict(args), "target")
            if done is None:  # pragma: no cover - a fork and its parent agree unless a tool is non-deterministic
                self.rollback(point)
                continue
            return Target(tool, dict(args), done.output)
        return None

    def distractors(self, targets: Iterable[Target]) -> int:
        """Known values of the same kinds as the targets' entities that the user did not mean."""
        used: dict[str, set[Any]] = {}
        for t in targets:
            for k, v in self.entity_values(t.tool, t.arguments):
                used.setdefault(k, set()).add(v)
        return sum(max(0, len(self.bag.get(k)) - len(vs)) for k, vs in used.items() if k in self.synth.world_kinds)


class Synthesizer:
    """Draws task drafts for one world and seed; ``draw(index)`` is a pure function of (seed, index)."""

    def __init__(self, world: World, seed: int = 0, kit: TaskKit | None = None) -> None:
        self.world = world
        self.seed = seed
        self.kit = kit or kit_for(world)
        self.specs = {s.name: s for s in world.specs()}
        probe = world.episode(seed)
        principals = self.kit.principals(probe)
        if not principals:
            raise ValueError(f"world {world.name!r}: no principal (the person asking) to build tasks for; give "
                             "the world a TaskKit with `principal` set")  # fmt: skip
        sample_profile = self.kit.profile(probe, principals[0], Rng(seed))
        probe.close()
        self.fact_kinds = set(self.kit.facts(sample_profile))
        self.graph = ToolGraph(world, self.fact_kinds)
        self.identify_tools = self.kit.identify_tools()
        self.identity_kinds = self.fact_kinds | {self.kit.principal or ""}
        self.world_kinds = {k for k, ref in world.entities.items() if ref is not None}
        self.write_tools = [t for t in self.graph.write_tools if self.specs[t].requires <= self._reachable_kinds()]
        self.info_tools = [t for t in self.kit.info_tools if t in self.specs]
        self.inspectors, self.param_of = self._inspectors()
        self._order: list[Any] | None = None

    def _reachable_kinds(self) -> set[str]:
        kinds = set(self.fact_kinds)
        for _ in range(len(self.specs)):
            new = {k for s in self.specs.values() if not s.mutates and s.requires <= kinds for k in s.produces}
            if new <= kinds:
                break
            kinds |= new
        return kinds

    def _inspectors(self) -> tuple[dict[str, str], dict[str, str]]:
        """Per entity kind, the read tool that shows the most about one such entity (used before refusing)."""
        best: dict[str, str] = {}
        param: dict[str, str] = {}
        for spec in sorted(self.specs.values(), key=lambda s: (-len(s.yields), s.name)):
            required = [p for p in spec.entity_params if p.required]
            if spec.mutates or len(required) != 1 or required[0].many or len(spec.parameters.get("required", [])) != 1:
                continue
            kind = required[0].kind
            if kind not in best:
                best[kind], param[spec.name] = spec.name, required[0].param
        return best, param

    def objects(self, tool: str, args: Mapping[str, Any]) -> set[Any]:
        """The objects a call is about: its single entity arguments of kinds other than the principal's."""
        return {args[p.param] for p in self.specs[tool].entity_params
                if not p.many and p.kind != self.kit.principal and args.get(p.param) is not None}  # fmt: skip

    def related(self, ep: Episode, kind: str, value: Any) -> set[Any]:
        """Values in the entity's own row (an item's product id): the best hints for finding it."""
        ref = self.world.entities.get(kind)
        if ref is None:
            return set()
        rows = ep.query(f'SELECT * FROM "{ref.table}" WHERE "{ref.column}" = ?', (value,))
        return {v for v in rows[0].values() if isinstance(v, (str, int))} if rows else set()

    # -- drawing --------------------------------------------------------------------------------------------

    def start(self, index: int, label: str, attempt: int = 0) -> Conversation:
        rng = Rng(f"{self.world.name}/{self.seed}/{index}/{label}")
        ep = self.world.episode(self.seed)
        principal = self.principal(ep, index, attempt)
        profile = self.kit.profile(ep, principal, rng)
        return Conversation(self, ep, rng, principal, profile, Bag(self.kit.facts(profile)))

    def principal(self, ep: Episode, index: int, attempt: int) -> Any:
        """Who asks in draw ``index``: the users in one seeded shuffle, draw i taking the i-th (a retry the
        next lap's), so a task set spreads over every customer before any comes back."""
        if self._order is None:
            everyone = self.kit.principals(ep)
            self._order = Rng(f"{self.world.name}/{self.seed}/principals").sample(everyone, len(everyone))
        return self._order[(index + attempt * 7_919) % len(self._order)]

    def pick_sampler(self, index: int, samplers: Mapping[str, int]) -> str:
        # Registration order (built-ins first, as they always were) fixes the weighted draw for a seed.
        names = [s for s in SAMPLERS if samplers.get(s) and self.usable(s)]
        if not names:
            raise ValueError("no usable sampler: this world has no info tools; choose another --sampler")
        return Rng(f"{self.world.name}/{self.seed}/{index}/sampler").weighted(names, [samplers[s] for s in names])

    def usable(self, name: str) -> bool:
        """Whether sampler ``name`` can draw anything in this world (``info`` needs the kit's info tools)."""
        needs = SAMPLERS.meta(name).get("usable")
        return needs is None or bool(needs(self))

    def cycle(self, index: int, tools: list[str]) -> list[str]:
        """Tools in rotation starting at ``index``: the target of draw i is tool i mod n, with fallbacks."""
        if not tools:
            raise Drop("no_target_tools")
        k = index % len(tools)
        return tools[k:] + tools[:k]

    def draw(self, index: int, sampler: str, attempts: int = 3) -> Draft:
        """Draw ``index``; a user for whom the target cannot be done is replaced by another (``attempts``)."""
        for attempt in range(attempts):
            try:
                return self._draw(index, sampler, f"{sampler}/{attempt}", attempt)
            except Drop:
                if attempt == attempts - 1:
                    raise
        raise AssertionError("unreachable")

    def _draw(self, index: int, sampler: str, label: str, attempt: int = 0) -> Draft:
        conv = self.start(index, label, attempt)
        try:
            identity = conv.identify()
            entry = SAMPLERS.entry(sampler)
            kind: TaskKind = entry.meta.get("kind", "action")
            targets = entry.item(self, conv, index)  # type: ignore[misc]
            draft = Draft(kind, sampler, conv.principal, conv.profile, identity, conv.steps, targets,
                          conv.distractors(targets))  # fmt: skip
            if conv.plan is not None:
                plan = conv.plan
                draft.speech.contingency, draft.speech.contingency_slots = plan.kind, dict(plan.slots)
                draft.contingency = Contingency(condition=plan.condition, holds=plan.holds, taken=targets[0].tool,
                                                other=(plan.otherwise if plan.holds else plan.then)[0])  # fmt: skip
                draft.demand("contingency")
            return draft
        finally:
            conv.ep.close()

    def _first(self, conv: Conversation, tools: list[str], goal: Literal["action", "refusal", "info"]) -> list[Target]:
        for tool in tools:
            target = conv.attempt(tool, goal)
            if target is not None:
                return [target]
        raise Drop(f"no_{goal}_candidate")

    def _greedy(self, conv: Conversation, target: str, max_steps: int = 8) -> list[Target]:
        spec = self.specs[target]
        for _ in range(max_steps):
            if spec.requires <= conv.bag.kinds():
                found = conv.attempt(target, "action", known_only=True)
                if found is not None:
                    return [found]
            legal = self._explorable(conv)
            ranked = sorted(legal, key=lambda t: (_dist(self.graph.distance_to(t, target)), conv.rng.random()))
            for tool in ranked:
                fresh = [a for a in conv.bindings(tool) if _key(tool, a) not in conv.called]
                if fresh and conv.run(tool, conv.rng.choice(fresh), "explore") is not None:
                    break
            else:
                break
        raise Drop("greedy_exhausted")

    def _walk(self, conv: Conversation) -> list[Target]:
        for _ in range(conv.rng.randint(1, 4)):
            legal = self._explorable(conv)
            conv.rng.shuffle(legal)
            for tool in legal:
                fresh = [a for a in conv.bindings(tool) if _key(tool, a) not in conv.called]
                if fresh and conv.run(tool, conv.rng.choice(fresh), "explore") is not None:
                    break
        writes = [t for t in self.write_tools if self.specs[t].requires <= conv.bag.kinds()]
        conv.rng.shuffle(writes)
        # A walk should end in a write that uses what it uncovered: writes that need only the user come last.
        writes.sort(key=lambda t: self.specs[t].requires <= self.identity_kinds)
        for tool in writes:
            found = conv.attempt(tool, "action", known_only=True)
            if found is not None:
                return [found]
        raise Drop("walk_dead_end")

    def _explorable(self, conv: Conversation) -> list[str]:
        """Reads an exploring agent may make: legal now, and not a second identification of the user."""
        return [t for t in self.graph.legal(conv.bag.kinds()) if not self.specs[t].mutates
                and t not in self.identify_tools]  # fmt: skip

    def _compose(self, conv: Conversation, index: int) -> list[Target]:
        want = conv.rng.randint(2, 3)
        order = self.cycle(index, self.write_tools)
        rest = order[1:]
        conv.rng.shuffle(rest)
        rest.sort(key=lambda t: self.specs[t].requires <= self.identity_kinds)  # user-only writes last
        targets: list[Target] = []
        handoff = set(getattr(self.kit, "handoff_tools", ()))
        touched: set[Any] = set()
        for tool in [order[0], *rest]:
            if tool in handoff:  # a handoff ends a conversation: it is never one of several requests
                continue
            found = conv.attempt(tool, "action", avoid=touched)
            if found is not None:
                targets.append(found)
                touched |= self.objects(found.tool, found.arguments)
                if len(targets) == want:
                    break
        if len(targets) < 2:
            raise Drop("compose_too_few")
        return targets


# -- the sampler registry ---------------------------------------------------------------------------------------

#: A sampler: (synthesizer, conversation with the user identified, draw index) -> the targets reached.
SamplerFn = Callable[[Synthesizer, Conversation, int], list[Target]]


def _as_sampler(obj: Any, name: str) -> SamplerFn:
    if not callable(obj):
        raise TypeError(f"{type(obj).__name__} is not a sampler (a function of synthesizer, conversation, index)")
    return obj


#: Every sampler by name, built-ins first in the order of the module doc.
SAMPLERS: Registry[SamplerFn] = Registry("sampler", group=ENTRY_POINT_GROUP, adapt=_as_sampler, error=ValueError)


def sampler(name: str, *, kind: TaskKind = "action", usable: Callable[[Synthesizer], bool] | None = None,
            replace: bool = False) -> Callable[[SamplerFn], SamplerFn]:  # fmt: skip
    """Register a sampler drawing tasks of ``kind``; ``usable`` says whether a world can use it at all."""

    def decorate(fn: SamplerFn) -> SamplerFn:
        SAMPLERS.register(name, fn, replace=replace, kind=kind, usable=usable)
        return fn

    return decorate


@sampler("target")
def target_sampler(synth: Synthesizer, conv: Conversation, index: int) -> list[Target]:
    # Only the draw's own tool: a user for whom it cannot be done is replaced by another (``draw``'s retries)
    # rather than the tool by one that always works, which would skew the mix toward writes any user can make.
    return synth._first(conv, synth.cycle(index, synth.write_tools)[:1], "action")


@sampler("greedy")
def greedy_sampler(synth: Synthesizer, conv: Conversation, index: int) -> list[Target]:
    return synth._greedy(conv, synth.cycle(index, synth.write_tools)[0])


@sampler("walk")
def walk_sampler(synth: Synthesizer, conv: Conversation, index: int) -> list[Target]:
    return synth._walk(conv)


@sampler("compose")
def compose_sampler(synth: Synthesizer, conv: Conversation, index: int) -> list[Target]:
    return synth._compose(conv, index)


@sampler("refusal", kind="refusal")
def refusal_sampler(synth: Synthesizer, conv: Conversation, index: int) -> list[Target]:
    return synth._first(conv, synth.cycle(index, synth.write_tools), "refusal")


@sampler("info", kind="info", usable=lambda synth: bool(synth.info_tools))
def info_sampler(synth: Synthesizer, conv: Conversation, index: int) -> list[Target]:
    return synth._first(conv, synth.cycle(index, synth.info_tools), "info")


@sampler("contingency", usable=lambda synth: synth.kit.has_contingencies())
def contingency_sampler(synth: Synthesizer, conv: Conversation, index: int) -> list[Target]:
    """A request with a condition on live state ("if it hasn't shipped, cancel it, otherwise return it"):
    the kit proposes plans; gold takes the branch whose condition the seed state decides."""
    for plan in synth.kit.contingencies(conv.ep, conv.principal, conv.rng):
        tool, args = plan.then if plan.holds else plan.otherwise
        if _key(tool, args) in conv.called or not conv.ep.probe(tool, args).ok:
            continue
        point = conv.checkpoint()
        if not conv.resolve(tool, args):
            conv.rollback(point)
            continue
        done = conv.run(tool, dict(args), "target")
        if done is None:  # pragma: no cover - the probe above said it works
            conv.rollback(point)
            continue
        conv.plan = plan
        return [Target(tool, dict(args), done.output)]
    raise Drop("no_contingency")


def _key(name: str, args: Mapping[str, Any]) -> str:
    return name + canonical_json(args)


def _dist(d: int | None) -> int:
    return 1_000 if d is None else d

