"""Template phrasing: turn a sampled draft into the user's request, in varied order and register.

The request carries exactly what the agent needs: the facts that identify the user (those the gold path's
first call used) and one intent sentence per target, whose slots the world's kit fills with descriptions a
person would use ("the Wireless Earbuds in black"), never internal ids the user could not know.
"""

from __future__ import annotations

from typing import Any

from ..world import Episode, Rng
from .kit import TaskKit
from .sampling import Draft

GREETINGS = ("", "Hi. ", "Hello, ", "Hi there! ", "Good morning. ", "Hey, ")
CLOSINGS = ("", " Thanks.", " Thank you!", " Thanks in advance.", " I'd appreciate your help.")
JOINERS = ("Also, ", "And ", "After that, ", "One more thing: ", "Then ")


def phrase(draft: Draft, kit: TaskKit, ep: Episode, rng: Rng) -> str:
    """The instruction for a draft (``ep`` shows the state the user speaks about: the seed state)."""
    ident = draft.identity
    identity = _fill(rng.choice(kit.identity_templates(ident.name)), {k: str(v) for k, v in ident.arguments.items()})
    intents = []
    for i, target in enumerate(draft.targets):
        slots = kit.slots(target.tool, ep, target.arguments, draft.profile)
        sentence = _sentence(_fill(rng.choice(kit.intent_templates(target.tool, target.arguments)), slots))
        if i:
            sentence = rng.choice(JOINERS) + _lower_first(sentence)
        intents.append(sentence)
    request = " ".join(intents)
    body = f"{identity} {request}" if rng.chance(0.7) else f"{request} {identity}"
    greeting = rng.choice(GREETINGS)
    if greeting.endswith(", "):
        body = _lower_first(body)
    text = greeting + body + rng.choice(CLOSINGS)
    return text[0].upper() + text[1:]


def _lower_first(text: str) -> str:
    """Lower-case a sentence start for joining, except the pronoun I (I'd, I'm...)."""
    first = text.split(" ", 1)[0]
    if first == "I" or first.startswith("I'"):
        return text
    return text[0].lower() + text[1:]


def _fill(template: str, slots: dict[str, Any]) -> str:
    try:
        return template.format_map(slots)
    except KeyError as exc:
        raise KeyError(f"intent template {template!r} needs slot {exc.args[0]!r}; the kit gave {sorted(slots)}") from exc


def _sentence(text: str) -> str:
    text = text.strip()
    if not text:
        return text
    text = text[0].upper() + text[1:]
    return text if text[-1] in ".?!" else text + "."
