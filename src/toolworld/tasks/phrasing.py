"""Template phrasing: turn a sampled draft into the user's request, and optionally let a model reword it.

The request carries exactly what the agent needs: the facts that identify the user (unless the user gives them
only when asked) and what they want, one intent sentence per target or one conditional sentence for a
contingency, with slots the world's kit fills with descriptions a person would use ("the Wireless Earbuds in
black"), never internal ids the user could not know. Phrasing also records which templates it used and the
facts the request must keep, so that a model's rewrite (``rephrase``) is kept only when it loses none.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import string
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..core.errors import ToolworldError
from ..world import Episode, Rng
from .kit import TaskKit
from .model import Task
from .sampling import Draft, Target

if TYPE_CHECKING:
    from ..rollout.policy import Policy

GREETINGS = ("", "Hi. ", "Hello, ", "Hi there! ", "Good morning. ", "Hey, ")
CLOSINGS = ("", " Thanks.", " Thank you!", " Thanks in advance.", " I'd appreciate your help.")
JOINERS = ("Also, ", "And ", "After that, ", "One more thing: ", "Then ")
# A body that already greets gets no second greeting ("Hi there! Hi, ...").
_GREETS = re.compile(r"^(hi|hello|hey|good (morning|afternoon|evening))\b", re.IGNORECASE)
_GREETING_START = re.compile(r"^(?:hi|hello|hey)(?: there)?[,.!]?\s+(?:(?:quick one|so)[,:]\s+)?", re.IGNORECASE)


class PhrasingError(ToolworldError):
    """A draft the kit's templates cannot say (a slot no template of a tool can fill, no revision template)."""

    default_kind = "phrasing_failed"


class Phrased(str):
    """The request text, with how it was made: ``templates`` (ids such as ``retail:intent:cancel_pending_order:7``),
    ``facts`` (every string the request must keep to be solvable) and ``revision`` (the change-of-mind message).

    It is the text itself (a ``str``), so a caller that stores only the instruction keeps working unchanged.
    """

    templates: list[str]
    facts: list[str]
    revision: str | None

    def __new__(cls, text: str, templates: Sequence[str] = (), facts: Sequence[str] = (),
                revision: str | None = None) -> Phrased:  # fmt: skip
        out = super().__new__(cls, text)
        out.templates, out.facts, out.revision = list(templates), list(facts), revision
        return out

    @property
    def text(self) -> str:
        return str.__str__(self)

    def __repr__(self) -> str:
        return f"Phrased({self.text!r}, templates={self.templates!r}, facts={self.facts!r}, revision={self.revision!r})"


@dataclass
class _Said:
    """Pieces of a request being built: sentences, the ids of their templates, the facts they carry."""

    sentences: list[str] = field(default_factory=list)
    templates: list[str] = field(default_factory=list)
    facts: list[str] = field(default_factory=list)


def phrase(draft: Draft, kit: TaskKit, ep: Episode, rng: Rng) -> Phrased:
    """The request for a draft (``ep`` shows the state the user speaks about: the seed state)."""
    world = kit.world.name
    said = _Said()
    if draft.speech.contingency:
        _contingency(draft, kit, ep, rng, said)
    else:
        for i, target in enumerate(draft.targets):
            slots, facts = _target_slots(target, kit, ep, draft)
            templates = kit.intent_templates(target.tool, target.said or target.arguments)
            if target.withheld:  # values the user gives only when asked: neither said nor a fact of the request
                for slot in target.withheld:
                    slots.pop(slot, None)
                    facts.pop(slot, None)
                templates = kit.withheld_templates(target.tool)
            idx, template = _pick(templates, slots, rng, f"intent templates of {target.tool}")
            sentence = _sentence(_fill(template, slots))
            if i or not draft.speech.identity:  # after a joiner or an opener, a template's own "Hi," is one too many
                sentence = _sentence(_GREETING_START.sub("", sentence, count=1)) or sentence
            if i:
                sentence = rng.choice(JOINERS) + _lower_first(sentence, said.facts + _used(template, facts))
            said.sentences.append(sentence)
            kind = "withheld" if target.withheld else "intent"
            said.templates.append(f"{world}:{kind}:{target.tool}:{idx}")
            said.facts += _used(template, facts)
    request = " ".join(said.sentences)
    ident = draft.identity
    if draft.speech.identity:
        values = {k: str(v) for k, v in ident.arguments.items()}
        idx, template = _pick(kit.identity_templates(ident.name), values, rng, f"identity templates of {ident.name}")
        identity = _sentence(_fill(template, values))
        intro = [f"{world}:identity:{ident.name}:{idx}"]
        identity_facts = _used(template, {k: [v] for k, v in values.items()})
        body = f"{identity} {request}" if rng.chance(0.7) else f"{request} {identity}"
    else:  # the user says who they are only when asked
        idx, opener = _pick(kit.opener_templates(), {}, rng, "opener templates")
        intro, identity_facts = [f"{world}:opener:{idx}"], []
        body = f"{_sentence(opener)} {request}"
    facts = _unique(identity_facts + said.facts)
    greeting = "" if _GREETS.match(body) else rng.choice(GREETINGS)
    if greeting.endswith(", "):
        body = _lower_first(body, facts)
    text = greeting + body + rng.choice(CLOSINGS)
    text = text[0].upper() + text[1:]
    revision, revision_id = _revision(draft, kit, ep, rng)
    templates = intro + said.templates + ([revision_id] if revision_id else [])
    return Phrased(text, templates, facts, revision)


def _target_slots(target: Target, kit: TaskKit, ep: Episode,
                  draft: Draft) -> tuple[dict[str, str], dict[str, list[str]]]:  # fmt: skip
    """Slot texts and their facts for what the request says of a target: the kit's plain ones for the arguments
    it speaks of (``said`` in a change of mind), with the target's own texts (a need, a described order) on top."""
    args = target.said if target.said is not None else target.arguments
    slots = kit.slots(target.tool, ep, args, draft.profile)
    facts = kit.slot_facts(target.tool, ep, args, draft.profile)
    for name, text in target.slots.items():
        slots[name] = text
        facts[name] = kit.fact_strings(name, text)
        if name == "order":  # an order spoken of without its number: the number is no fact of this request
            facts.pop("order_id", None)
    return slots, facts


def _contingency(draft: Draft, kit: TaskKit, ep: Episode, rng: Rng, said: _Said) -> None:
    """All targets as ONE conditional request: slots of every target, then the contingency's own texts."""
    kind = draft.speech.contingency
    assert kind is not None
    slots: dict[str, str] = {}
    facts: dict[str, list[str]] = {}
    for target in draft.targets:
        s, f = _target_slots(target, kit, ep, draft)
        slots.update(s)
        facts.update(f)
    for name, text in draft.speech.contingency_slots.items():
        if slots.get(name) == text:
            continue  # the text a target already gave: keep the kit's finer facts for it
        slots[name] = text
        facts[name] = kit.fact_strings(name, text)
    idx, template = _pick(kit.contingency_templates(kind), slots, rng, f"contingency templates of kind {kind!r}")
    said.sentences.append(_sentence(_fill(template, slots)))
    said.templates.append(f"{kit.world.name}:contingency:{kind}:{idx}")
    said.facts += _used(template, facts)


def _revision(draft: Draft, kit: TaskKit, ep: Episode, rng: Rng) -> tuple[str | None, str | None]:
    """The change-of-mind message: a revision template of the tool that speaks of a value that changed
    between what the request said and what the user finally wants."""
    tool = draft.speech.revision
    if not tool:
        return None, None
    target = next((t for t in draft.targets if t.tool == tool), None)
    if target is None:
        raise PhrasingError(f"the draft revises {tool!r} but has no target of that tool; its targets are "
                            f"{[t.tool for t in draft.targets]}", kind="invalid_draft")  # fmt: skip
    final = {**kit.slots(tool, ep, target.arguments, draft.profile), **draft.speech.revision_slots}
    first = kit.slots(tool, ep, target.said, draft.profile) if target.said is not None else {}
    changed = {k for k, v in final.items() if first.get(k) != v}
    templates = kit.revision_templates(tool)
    usable = [(i, t) for i, t in enumerate(templates) if _fields(t) <= final.keys() and _fields(t) & changed]
    if not usable:
        raise PhrasingError(f"no revision template of {tool} speaks of what changed ({sorted(changed) or 'nothing'}); "
                            f"the slots are {sorted(final)}", kind="phrasing_failed")  # fmt: skip
    idx, template = usable[rng.below(len(usable))]
    return _sentence(_fill(template, final)), f"{kit.world.name}:revision:{tool}:{idx}"


def _pick(templates: Sequence[str], slots: Mapping[str, str], rng: Rng, what: str) -> tuple[int, str]:
    """A template whose slots are all given, with its position (its id): templates are never filtered away
    silently, so an empty choice names what was missing."""
    if not templates:
        raise PhrasingError(f"no {what}", kind="phrasing_failed")
    usable = [(i, t) for i, t in enumerate(templates) if _fields(t) <= slots.keys()]
    if not usable:
        need = sorted(set.intersection(*(_fields(t) for t in templates)) - slots.keys())
        raise PhrasingError(f"none of the {len(templates)} {what} can be filled: they need {need or 'other slots'}, "
                            f"the kit gave {sorted(slots)}", kind="phrasing_failed")  # fmt: skip
    return usable[rng.below(len(usable))]


def _fields(template: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(template) if name}


def _used(template: str, facts: Mapping[str, list[str]]) -> list[str]:
    """The facts of the slots a template actually says (a slot the template leaves out carries none), in the
    order the template says them: a set's order would change with the interpreter's hash seed, and with it
    the task file that must be byte-identical for one seed."""
    names = [name for _, name, _, _ in string.Formatter().parse(template) if name]
    return [f for name in dict.fromkeys(names) for f in facts.get(name, [])]


def _unique(items: list[str]) -> list[str]:
    return list(dict.fromkeys(i for i in items if i))


def _lower_first(text: str, facts: Sequence[str] = ()) -> str:
    """Lower-case a sentence start for joining, except the pronoun I (I'd, I'm...) and a fact (a name)."""
    first = text.split(" ", 1)[0]
    if first == "I" or first.startswith("I'") or any(f.startswith(first) for f in facts):
        return text
    return text[0].lower() + text[1:]


def _fill(template: str, slots: Mapping[str, Any]) -> str:
    try:
        return template.format_map(slots)
    except KeyError as exc:
        raise PhrasingError(f"template {template!r} needs slot {exc.args[0]!r}; the kit gave {sorted(slots)}") from exc


def _sentence(text: str) -> str:
    text = text.strip()
    if not text:
        return text
    text = text[0].upper() + text[1:]
    return text if text[-1] in ".?!" else text + "."


# -- rewording by a model ------------------------------------------------------------------------------------------

REWRITE_PROMPT = (
    "Rewrite this customer message in your own words, as the same customer would write it to a support chat. "
    "Keep every fact exactly as written: order numbers, names, email addresses, zip codes, street addresses, "
    "product names and options, card brands and digits. Do not add facts, do not answer it, and reply with the "
    "rewritten message only.\n\nMessage:\n{instruction}"
)


def normalise(text: str) -> str:
    """Case- and whitespace-insensitive form used to look for facts."""
    return " ".join(text.split()).casefold()


def missing_facts(text: str, facts: Sequence[str]) -> list[str]:
    """The facts ``text`` does not contain as whole words (so "12" is not found inside "1234")."""
    norm = normalise(text)
    return [f for f in facts if not re.search(rf"(?<!\w){re.escape(normalise(f))}(?!\w)", norm)]


@dataclass
class RephraseStats:
    """What ``rephrase`` did: ``kept`` rewrites, ``rejected`` (a fact missing), ``failed`` (the model errored),
    ``skipped`` (a task that records no facts, or a conditional one, so no rewrite of it could be checked)."""

    kept: int = 0
    rejected: int = 0
    failed: int = 0
    skipped: int = 0
    errors: list[str] = field(default_factory=list)  # the first few policy errors, for the report

    def as_dict(self) -> dict[str, Any]:
        return {"kept": self.kept, "rejected": self.rejected, "failed": self.failed, "skipped": self.skipped}


def _clean(reply: str) -> str:
    """The model's text without a reasoning block, wrapping quotes or a 'Rewritten message:' label."""
    text = re.sub(r"<think>.*?</think>", "", reply, flags=re.DOTALL).strip()
    text = re.sub(r"^(?:rewritten message|rewrite|message)\s*:\s*", "", text, flags=re.IGNORECASE)
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        text = text[1:-1].strip()
    return text


def rephrase(tasks: Sequence[Task], policy_spec: str | Policy, *, concurrency: int = 8,
             on_progress: Callable[[int, RephraseStats], None] | None = None) -> tuple[list[Task], RephraseStats]:  # fmt: skip
    """Reword each task's instruction with a model (any ``--policy`` SPEC, or a policy already made) and keep a
    rewrite only when it contains every string of ``task.scenario.facts``; otherwise, or when the model fails,
    the template text stays. A kept rewrite gets a new id (the id hashes the instruction). A failing model
    server never loses the task set: every task comes back, in order.

    Raises ``ValueError`` for a SPEC that does not make a policy.
    """
    from ..rollout.backends import make_policy

    policy = make_policy(policy_spec) if isinstance(policy_spec, str) else policy_spec
    stats = RephraseStats()
    out: list[Task] = list(tasks)

    async def one(i: int, task: Task, gate: asyncio.Semaphore) -> None:
        # A conditional request's meaning is in its structure (which branch on which condition, which choice
        # first), which no list of facts can check in a rewrite: such requests keep their template text.
        if not task.scenario.facts or task.scenario.contingency is not None:
            stats.skipped += 1
            return
        async with gate:
            session = policy.start(tools=[], task=None, seed=i)
            try:
                prompt = REWRITE_PROMPT.format(instruction=task.instruction)
                turn = await session.respond([{"role": "user", "content": prompt}])
            except Exception as exc:  # any policy failure keeps the template text
                stats.failed += 1
                if len(stats.errors) < 5:
                    stats.errors.append(f"{task.id}: {type(exc).__name__}: {exc}")
                return
            finally:
                with contextlib.suppress(Exception):  # closing a failed session must not lose the task
                    await session.aclose()
        text = _clean(turn.content or "")
        if not text or missing_facts(text, task.scenario.facts):
            stats.rejected += 1
            return
        stats.kept += 1
        scenario = task.scenario.model_copy(update={"templates": [*task.scenario.templates, f"rewrite:{policy.name}"]})
        out[i] = task.model_copy(update={
            "instruction": text, "scenario": scenario,
            "id": Task.content_id(task.world, task.seed, text, task.expected_changes)})  # fmt: skip

    async def run_all() -> None:
        gate = asyncio.Semaphore(max(1, concurrency))
        pending = [asyncio.ensure_future(one(i, t, gate)) for i, t in enumerate(tasks)]
        for done, fut in enumerate(asyncio.as_completed(pending), start=1):
            await fut
            if on_progress is not None:
                on_progress(done, stats)
        closer = getattr(policy, "aclose", None)
        if closer is not None:
            await closer()

    asyncio.run(run_all())
    return out, stats
