"""``TaskKit``: what a world tells the task generator beyond its tool types, with generic defaults.

The generator needs four things the SDK's types cannot say: who asks (the *principal*, e.g. a customer) and
what they know; plausible arguments for a target call, drawn from the episode's live state; how to speak of a
value to a person (an item is "the blue M T-shirt", never its id); and what the agent must tell the user
afterwards (a refund amount). Every method here has a default that works from the schema alone, so a world
without a kit still gets tasks; a world makes them realistic by subclassing and passing
``World(..., synthesis="package.module:kit_factory")``.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ..world import Episode, Rng, World
from .model import ExpectedOutput, UserProfile

if TYPE_CHECKING:
    from .quality import CoherenceRule
    from .sampling import Draft, Plan, Target

IDENTIFIER_COLUMNS = ("name", "title", "label", "subject")


class Bag:
    """Entity values known so far in a sampled conversation, by kind, in the order they were learnt."""

    __slots__ = ("by_kind",)

    def __init__(self, facts: Mapping[str, Iterable[Any]] | None = None) -> None:
        self.by_kind: dict[str, list[Any]] = {}
        for kind, values in (facts or {}).items():
            self.add(kind, values)

    def add(self, kind: str, values: Iterable[Any]) -> None:
        known = self.by_kind.setdefault(kind, [])
        for v in values:
            if isinstance(v, (str, int)) and not isinstance(v, bool) and v not in known:
                known.append(v)

    def has(self, kind: str, value: Any) -> bool:
        return value in self.by_kind.get(kind, ())

    def kinds(self) -> set[str]:
        return {k for k, v in self.by_kind.items() if v}

    def get(self, kind: str) -> list[Any]:
        return self.by_kind.get(kind, [])


class TaskKit:
    """Generic task-synthesis hints derived from the world's schema; subclass to make tasks realistic.

    Attributes:
        principal: entity kind of the person asking (default: the kind yielded by a read tool that needs
            only facts, e.g. ``user`` from ``find_user_by_email``).
        intents: tool name → short request templates with ``{slot}`` fields (see ``slots``).
        info_tools: read tools whose result can be the answer of an ``info`` task.
        ignore_columns: ``table.column`` values that are free text written from the conversation (a ticket
            summary): scorers do not compare them.
        known_entity_keys: key in ``UserProfile.known`` → entity kind it holds (e.g. ``order_ids`` → ``order``).
    """

    principal: str | None = None
    intents: dict[str, list[str]] = {}  # noqa: RUF012 - class-level defaults, replaced by subclasses
    info_tools: tuple[str, ...] = ()
    ignore_columns: tuple[str, ...] = ()
    known_entity_keys: dict[str, str] = {}  # noqa: RUF012

    def __init__(self, world: World) -> None:
        self.world = world
        self.fact_kinds = sorted(k for k, ref in world.entities.items() if ref is None)
        if self.principal is None:
            self.principal = self._guess_principal()
        self._principals: dict[int, list[Any]] = {}

    # -- who asks -------------------------------------------------------------------------------------------

    def identify_tools(self) -> list[str]:
        """Read tools that find the principal from facts alone (the conversation's first call).

        The world's declared identification tools (``@tool(identifies=True)``) win; worlds that declare none
        get those inferred from the entity graph.
        """
        declared = getattr(self.world, "identification_tools", ())
        if declared:
            return sorted(declared)
        facts = set(self.fact_kinds)
        return sorted(
            s.name
            for s in self.world.specs()
            if not s.mutates and self.principal in s.produces and s.requires and s.requires <= facts
        )

    def principals(self, ep: Episode) -> list[Any]:
        """Every principal id in the episode's world (cached per seed: seed data never changes)."""
        if ep.seed not in self._principals:
            ref = self.world.entities.get(self.principal or "")
            if ref is None:
                self._principals[ep.seed] = []
            else:
                rows = ep.query(f'SELECT "{ref.column}" AS id FROM "{ref.table}" ORDER BY 1')
                self._principals[ep.seed] = [r["id"] for r in rows]
        return self._principals[ep.seed]

    def profile(self, ep: Episode, principal_id: Any, rng: Rng) -> UserProfile:
        """The user's persona and known facts: by default the fact-kind columns of the principal's row."""
        ref = self.world.entities[self.principal or ""]
        assert ref is not None
        row = ep.query(f'SELECT * FROM "{ref.table}" WHERE "{ref.column}" = ?', (principal_id,))[0]
        known = {k: row[k] for k in self.fact_kinds if k in row and row[k] is not None}
        name = next((str(row[c]) for c in IDENTIFIER_COLUMNS if row.get(c)), f"{self.principal} {principal_id}")
        return UserProfile(name=name, persona="A customer who wants this done.", known=known)

    def facts(self, profile: UserProfile) -> dict[str, list[Any]]:
        """Entity kinds → values the user can give, read from ``profile.known``."""
        out: dict[str, list[Any]] = {}
        for key, value in profile.known.items():
            kind = self.known_entity_keys.get(key, key)
            if kind in self.world.entities:
                out[kind] = list(value) if isinstance(value, list) else [value]
        return out

    # -- what to ask for ------------------------------------------------------------------------------------

    def propose(self, tool: str, ep: Episode, principal_id: Any, bag: Bag, rng: Rng) -> list[dict[str, Any]]:
        """Candidate arguments for ``tool``. Default: entity arguments from the bag, the rest from the schema.

        Candidates need not all succeed: the generator executes them and keeps what the world accepts (or,
        for refusal tasks, what it refuses with ``policy_violation``).
        """
        spec = self.world.tools[tool].spec
        entity = {p.param: p for p in spec.entity_params}
        props: dict[str, Any] = spec.parameters.get("properties", {})
        required = set(spec.parameters.get("required", []))
        out = []
        for _ in range(8):
            args: dict[str, Any] = {}
            for name, schema in props.items():
                if name in entity:
                    values = bag.get(entity[name].kind)
                    if not values:
                        if name in required:
                            break
                        continue
                    args[name] = rng.sample(values, min(len(values), rng.randint(1, 2))) if entity[name].many \
                        else rng.choice(values)  # fmt: skip
                    continue
                value = schema_value(schema, rng)
                if value is _MISSING:
                    if name in required:
                        break
                    continue
                args[name] = value
            else:
                out.append(args)
        return out

    def slots(self, tool: str, ep: Episode, args: Mapping[str, Any], profile: UserProfile) -> dict[str, str]:
        """Slot values for the intent templates: each argument spoken as a person would say it."""
        spec = self.world.tools[tool].spec
        kinds = {p.param: p.kind for p in spec.entity_params}
        out: dict[str, str] = {}
        for name, value in args.items():
            values = value if isinstance(value, list) else [value]
            if name in kinds:
                out[name] = " and ".join(self.describe(kinds[name], v, ep, profile) for v in values)
            else:
                out[name] = ", ".join(str(v) for v in values)
        return out

    def describe(self, kind: str, value: Any, ep: Episode, profile: UserProfile) -> str:
        """How the user refers to an entity: the value itself if they know it, else a name from its row."""
        if kind in self.fact_kinds or any(value == v or (isinstance(v, list) and value in v) for v in profile.known.values()):
            return str(value)
        ref = self.world.entities.get(kind)
        if ref is not None:
            rows = ep.query(f'SELECT * FROM "{ref.table}" WHERE "{ref.column}" = ?', (value,))
            if rows:
                for col in IDENTIFIER_COLUMNS:
                    if rows[0].get(col):
                        return f"the {kind.replace('_', ' ')} '{rows[0][col]}'"
        return f"{kind.replace('_', ' ')} {value}"

    def intent_templates(self, tool: str, args: Mapping[str, Any]) -> list[str]:
        """Request templates for ``tool``; the default is built from the tool's name and the given arguments."""
        if tool in self.intents:
            return self.intents[tool]
        words = tool.replace("_", " ")
        params = list(args)
        detail = ", ".join(f"{p.replace('_', ' ')} {{{p}}}" for p in params)
        return [f"Please {words}" + (f" ({detail})." if detail else "."),
                f"I need you to {words}" + (f": {detail}." if detail else ".")]  # fmt: skip

    def identity_templates(self, tool: str) -> list[str]:
        """How the user introduces themselves so that ``tool`` can find them (slots: its arguments)."""
        params = list(self.world.tools[tool].spec.parameters.get("properties", {}))
        detail = ", ".join(f"my {p.replace('_', ' ')} is {{{p}}}" for p in params)
        return [f"{detail[0].upper()}{detail[1:]}.", f"For the record, {detail}."]

    def opener_templates(self) -> list[str]:
        """First lines of a user who says nothing of who they are until asked (no slots)."""
        return ["Hi, I need some help.", "Hello, I'd like to get something sorted out.",
                "Hi there, can you help me with something?", "Hello. I have a request."]  # fmt: skip

    def contingency_templates(self, kind: str) -> list[str]:
        """Templates that phrase a draft's targets as one conditional request of ``kind``.

        A contingency is a world's own scenario, so the generic kit knows none: asking for one is a kit that
        produces contingency drafts without templates to say them, and is reported with the kind it lacks.
        """
        from ..core.errors import ToolworldError

        raise ToolworldError(f"world {self.world.name!r} has no contingency templates of kind {kind!r}; its task "
                             "kit must return some from contingency_templates()", kind="unknown_contingency")  # fmt: skip

    def withheld_templates(self, tool: str) -> list[str]:
        """Requests for ``tool`` that leave out the values a piecemeal user gives only when asked (a new address).

        The default is one generic sentence per tool: a kit that withholds values phrases them its own way.
        """
        return [f"I need to {tool.replace('_', ' ')}, please."]

    def revision_templates(self, tool: str) -> list[str]:
        """What a user who changed their mind says when asked to confirm ``tool`` (slots: its arguments).

        The default has one pair of templates per parameter, so the phrasing can pick those that speak of the
        value that actually changed.
        """
        out = []
        for p in self.world.tools[tool].spec.parameters.get("properties", {}):
            words = p.replace("_", " ")
            out += [f"Actually, wait: I'd like the {words} to be {{{p}}} instead.",
                    f"Sorry, I got that wrong: the {words} should be {{{p}}}."]  # fmt: skip
        return out

    def slot_facts(self, tool: str, ep: Episode, args: Mapping[str, Any], profile: UserProfile) -> dict[str, list[str]]:
        """Per slot of ``slots()``, the strings a request must keep for the agent to act on it (a rewrite that
        drops one is unsolvable). Default: each slot's whole text, as ``fact_strings`` reads it."""
        return {name: self.fact_strings(name, text) for name, text in self.slots(tool, ep, args, profile).items()}

    def fact_strings(self, slot: str, text: str) -> list[str]:
        """The facts in a slot text the kit did not write itself (a described need, an order the user cannot
        number): the text without a leading article, which a rewrite may swap for another."""
        words = text.strip().split(" ", 1)
        if len(words) == 2 and words[0].lower() in ("the", "a", "an", "my", "our"):
            return [words[1]]
        return [text.strip()] if text.strip() else []

    def outputs(self, tool: str, args: Mapping[str, Any], result: Any) -> list[ExpectedOutput]:
        """What the agent must tell the user after ``tool`` ran (default: nothing)."""
        return []

    # -- checks ---------------------------------------------------------------------------------------------

    #: Tools that hand the case to a person: nothing an agent does after one belongs to the same conversation.
    handoff_tools: tuple[str, ...] = ()

    def required_checks(self, tool: str, args: Mapping[str, Any], ep: Episode | None = None, *,
                        principal: Any = None) -> list[tuple[str, dict[str, Any]]]:  # fmt: skip
        """Reads a careful agent makes before the write ``tool(args)``, as ``(tool, arguments)`` in order.

        An agent that writes to an object it never looked at acts on the user's word alone, and the object's
        state (a status, an owner) is what policy rules turn on. Default: for each single, non-principal entity
        argument, the kind's inspector read (see :meth:`inspector`). Kits whose checks read the account itself
        need the person's id: ``principal`` when the caller knows it, else what ``ep`` (the seed state) says
        owns the objects in ``args``; the generic checks need neither.
        """
        spec = self.world.tools[tool].spec if tool in self.world.tools else None
        if spec is None or not spec.mutates:
            return []
        out: list[tuple[str, dict[str, Any]]] = []
        for p in spec.entity_params:
            value = args.get(p.param)
            if p.many or p.kind == self.principal or value is None or isinstance(value, list):
                continue
            reader = self.inspector(p.kind)
            if reader is not None and (reader[0], {reader[1]: value}) not in out:
                out.append((reader[0], {reader[1]: value}))
        return out

    def inspector(self, kind: str) -> tuple[str, str] | None:
        """``(read tool, its parameter)`` that shows the most about one entity of ``kind``, or None.

        The read with exactly one required parameter, a single entity of ``kind``, and the most ``yields``
        (ties by name, so the choice is stable). Kinds with an inspector are the objects a write is *about*;
        kinds without one (a payment method, here only ever an instrument) are not.
        """
        table: dict[str, tuple[str, str]] | None = self.__dict__.get("_inspectors")
        if table is None:
            table = {}
            for spec in sorted(self.world.specs(), key=lambda s: (-len(s.yields), s.name)):
                required = [p for p in spec.entity_params if p.required]
                if spec.mutates or len(required) != 1 or required[0].many \
                        or len(spec.parameters.get("required", [])) != 1:  # fmt: skip
                    continue
                table.setdefault(required[0].kind, (spec.name, required[0].param))
            self.__dict__["_inspectors"] = table
        return table.get(kind)

    def coherence_rules(self) -> dict[str, CoherenceRule]:
        """The world's own coherence rules by name (see ``toolworld.tasks.quality``; default: none).

        Generic rules (a handoff ends the conversation, one write per object) apply to every world already;
        these add what only the world knows (which complaint fits which order status).
        """
        return {}

    # -- scenarios ------------------------------------------------------------------------------------------

    def dress(self, draft: Draft, ep: Episode, rng: Rng) -> None:
        """Turn a sampled command into what a customer would bring (default: leave it a command).

        ``ep`` shows the seed state. A world's kit sets, on the draft: ``Target.slots`` for values the user
        describes by a need instead of naming them (with ``draft.needs``), facts the user does not know
        (``draft.profile.unknown`` and ``draft.unknown``: values the agent must find with tools), a change of
        mind (``Target.said``, ``draft.revision`` and ``draft.speech.revision``), a piecemeal user
        (``draft.speech.identity = False``), the reads that show a need's answer (``draft.reads``: the gold
        makes them right after identifying the user), and the demands each adds (``draft.demand(name)``).
        Every value it puts in a slot must resolve to exactly one answer on ``ep``: ambiguous ones are not used.
        """

    def contingencies(self, ep: Episode, principal_id: Any, rng: Rng) -> list[Plan]:
        """Conditional requests for this user, for the ``contingency`` sampler (default: none)."""
        return []

    def has_contingencies(self) -> bool:
        return type(self).contingencies is not TaskKit.contingencies

    def alternatives(self, target: Target, ep: Episode, principal_id: Any) -> list[tuple[str, list[tuple[str, dict[str, Any]]]]]:
        """For a refused request: compliant things the policy allows instead, each ``(label, calls)``.

        The generator executes each after the gold reads and lists those that succeed as acceptable end
        states; a refusal with a compliant alternative the kit does not know about would fail an agent that
        found it, so a kit names every one its policy allows.
        """
        return []

    # -- helpers --------------------------------------------------------------------------------------------

    def _guess_principal(self) -> str | None:
        facts = set(self.fact_kinds)
        for s in self.world.specs():
            if not s.mutates and s.requires and s.requires <= facts and s.produces:
                return sorted(s.produces - facts)[0] if s.produces - facts else None
        return None


_MISSING = object()


def schema_value(schema: Mapping[str, Any], rng: Rng) -> Any:
    """A plausible value for a non-entity parameter from its JSON schema, or ``_MISSING`` if none is safe."""
    options = schema.get("anyOf")
    if options:
        concrete = [o for o in options if o.get("type") != "null"]
        if len(concrete) != len(options) and "default" in schema:
            return _MISSING  # optional: leave it out
        schema = concrete[0] if concrete else schema
    if "enum" in schema:
        return rng.choice(list(schema["enum"]))
    if "const" in schema:
        return schema["const"]
    if "default" in schema:
        return _MISSING
    kind = schema.get("type")
    if kind == "boolean":
        return rng.chance(0.5)
    if kind == "integer":
        lo = int(schema.get("minimum", 1))
        return rng.randint(lo, int(schema.get("maximum", lo + 4)))
    if schema.get("examples"):
        return rng.choice(list(schema["examples"]))
    return _MISSING


def kit_for(world: World) -> TaskKit:
    """The world's kit (``World(synthesis=...)``: an instance, a factory, or ``"module:attr"``), else generic."""
    spec = getattr(world, "synthesis", None)
    if spec is None:
        return TaskKit(world)
    if isinstance(spec, TaskKit):
        return spec
    if isinstance(spec, str):
        module, _, attr = spec.partition(":")
        spec = getattr(importlib.import_module(module), attr)
    kit = spec(world) if callable(spec) else spec
    if not isinstance(kit, TaskKit):
        raise TypeError(f"world {world.name!r}: synthesis must give a TaskKit, got {type(kit).__name__}")
    return kit
