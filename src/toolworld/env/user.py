"""User simulators: who plays the customer while the agent works.

``ScriptedUser`` is deterministic and free: it opens with the task's instruction, answers the agent's
questions from the facts the user knows (``task.user.known``) by keyword, says the stored line for a fact it
does not know (``task.user.unknown``), says yes to confirmations, and ends the conversation once the agent
answers without asking anything. A "piecemeal" user gives one fact per reply, and a user with a ``revision``
changes their mind at the first confirmation request. It makes rollouts reproducible and cheap, which is what
RL needs most of the time.

``LLMUser`` plays the customer through any ``Policy`` (an OpenAI-compatible server, a local model) from a
persona prompt built out of the task, and ends when it writes the stop marker: slower and noisier, but it
phrases things the way people do.

Both are factories of per-episode sessions, like policies: ``start(task, seed=...)`` returns an object with
``async respond(messages) -> UserReply`` that sees the whole conversation (OpenAI-style messages).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from ..records.messages import Message
from ..scoring.conduct import mentions

if TYPE_CHECKING:
    from ..rollout.policy import Policy
    from ..tasks.model import Task

UserStop = Literal["answered", "user_stop"]


@dataclass(frozen=True, slots=True)
class UserReply:
    """The user's next message, or the end of the conversation (``done`` with the ``reason``)."""

    content: str = ""
    done: bool = False
    reason: UserStop | None = None


@runtime_checkable
class UserSession(Protocol):
    async def respond(self, messages: list[Message]) -> UserReply: ...

    async def aclose(self) -> None: ...


@runtime_checkable
class UserSimulator(Protocol):
    """Plays the user of one task per session."""

    name: str

    def start(self, task: Task, *, seed: int = 0) -> UserSession: ...


def last_assistant_text(messages: list[Message]) -> str:
    for msg in reversed(messages):
        if msg.get("role") == "assistant":
            return msg.get("content") or ""
    return ""


# -- scripted -------------------------------------------------------------------------------------------

# A confirmation request: the agent is about to act and wants a yes. Checked before fact requests, since
# "Shall I cancel order #W1?" names an order but asks for consent, not for the order number. Scorers credit a
# write only after the user's yes, so every common way of asking for one must get it here.
_CONFIRM = re.compile(
    r"\b(?:shall i|should i|shall we|should we|would you like me to|do you want me to|want me to|may i|proceed|"
    r"go ahead|yes/no|yes or no|confirm (?:that|the|this|whether|if|you want|you'd like|you would like)|"
    r"is (?:that|this|it) (?:ok|okay|correct|right|fine|alright|all right)|(?:ok|okay|alright|fine) (?:to|if i)|"
    r"(?:does|do) (?:that|this|these) (?:sound|look) (?:good|right|ok|okay|correct|fine)|sounds? good|"
    r"are you sure|do you confirm|can you confirm (?:that|you)|do you agree)\b|please confirm[.!]?\s*$",
    re.IGNORECASE,
)
# Imperative requests count as questions ("Please provide your email.").
_REQUEST = re.compile(r"\b(please (provide|share|give|tell|send|confirm|let me know)|let me know|can you|could you|"
                      r"i need your|i'll need|i will need|what is your|what's your)\b", re.IGNORECASE)  # fmt: skip
_ANYTHING_ELSE = re.compile(r"\banything else\b", re.IGNORECASE)

# Words that, in the agent's question, ask for a known fact. Keys not listed fall back to their own words.
_SYNONYMS: dict[str, tuple[str, ...]] = {
    "email": ("email", "e-mail", "mail"),
    "name": ("name",),
    "full_name": ("name",),
    "first_name": ("first name", "name"),
    "last_name": ("last name", "surname", "family name", "name"),
    "zip": ("zip", "postal", "postcode", "post code"),
    "zip_code": ("zip", "postal", "postcode", "post code"),
    "phone": ("phone", "telephone", "number to reach"),
    "order_id": ("order",),
    "order_ids": ("order",),
    "order_number": ("order",),
    "order_numbers": ("order",),
    "card_last4": ("card", "last four", "last 4", "digits"),
    # Not a bare "address": "your email address" asks for something else.
    "new_address": ("new address", "which address", "what address", "the address", "your address", "address should",
                    "address would", "address do you", "ship it to", "send it to", "deliver it to"),
    "last4": ("card", "last four", "last 4", "digits"),
}
_SPOKEN: dict[str, str] = {
    "order_id": "order number", "order_ids": "order numbers", "zip": "zip code", "last4": "card ends in",
    "card_last4": "card ends in", "email": "email", "full_name": "name", "new_address": "new address",
}  # fmt: skip


def _keywords(key: str) -> tuple[str, ...]:
    if key in _SYNONYMS:
        return _SYNONYMS[key]
    words = [w for w in key.lower().split("_") if w not in ("id", "ids", "the", "of")]
    return (" ".join(words),) if words else (key.lower(),)


def _say(key: str, value: Any) -> str:
    spoken = _SPOKEN.get(key, key.replace("_", " "))
    if isinstance(value, list | tuple):
        text = ", ".join(str(v) for v in value)
        if len(value) == 1:  # one order: "my order number is", not "my order numbers is"
            return f"My {spoken.removesuffix('s')} is {text}."
        return f"My {spoken} are {text}."
    if isinstance(value, dict):
        text = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in value.items())
        return f"My {spoken}: {text}."
    if spoken.endswith(" in"):
        return f"My {spoken} {value}."
    return f"My {spoken} is {value}."


def is_question(text: str) -> bool:
    """Does the agent ask something (a question mark, or a request for information)?"""
    return "?" in text or bool(_REQUEST.search(text))


def _asked_at(low: str, key: str) -> int | None:
    """Where in the (lower-cased) question fact ``key`` is first asked for; None when it is not."""
    found = [m.start() for k in _keywords(key) if (m := re.search(rf"\b{re.escape(k)}", low))]
    return min(found) if found else None


def answer_from_known(text: str, known: dict[str, Any]) -> str | None:
    """The facts the question asks for, in the user's words; None when it asks for nothing the user knows."""
    low = text.lower()
    said = [_say(key, value) for key, value in known.items() if _asked_at(low, key) is not None]
    return " ".join(said) if said else None


def answer_facts(text: str, known: dict[str, Any], unknown: dict[str, str] | None = None, *,
                 piecemeal: bool = False) -> str | None:  # fmt: skip
    """The user's answer to a question about facts; None when it asks for nothing the user knows or knows
    they do not know.

    It gives the known facts asked for (in the order of ``known``; when ``piecemeal``, only the one the
    question asks for first), then the stored line of each unknown fact asked for. Unknown lines are said even
    by a piecemeal user: "I don't know" gives nothing away, and an agent that never hears it would keep asking.
    """
    low = text.lower()
    unknown = unknown or {}
    # A fact listed as unknown is not told even if ``known`` has it too: the line is what the user says.
    facts = [(at, i, _say(key, value)) for i, (key, value) in enumerate(known.items())
             if key not in unknown and value not in (None, "", [], {}) and (at := _asked_at(low, key)) is not None]  # fmt: skip
    if piecemeal:
        facts = sorted(facts)[:1]
    said = [line for _, _, line in facts]
    lines = sorted((at, i, line) for i, (key, line) in enumerate(unknown.items())
                   if (at := _asked_at(low, key)) is not None)  # fmt: skip
    for _, _, line in lines:
        if line not in said:  # two unknown keys asked with one word ("order"), one line: say it once
            said.append(line)
    return " ".join(said) if said else None


class ScriptedUser:
    """The deterministic user: instruction first, then answers from ``task.user.known``, then done.

    Args:
        max_turns: user messages after which the user gives up (``user_stop``), the opening included.
    """

    def __init__(self, *, max_turns: int = 10) -> None:
        if max_turns < 1:
            raise ValueError("max_turns must be at least 1 (the opening message)")
        self.max_turns = max_turns
        self.name = "scripted"

    def start(self, task: Task, *, seed: int = 0) -> ScriptedUserSession:
        return ScriptedUserSession(task, self.max_turns)


class ScriptedUserSession:
    def __init__(self, task: Task, max_turns: int) -> None:
        self.task = task
        self.max_turns = max_turns
        self.turns = 0
        self.revised = False  # whether the change of mind was said (it is said once)

    async def respond(self, messages: list[Message]) -> UserReply:
        return self.reply(messages)

    def _first_wish_values(self) -> dict[str, Any]:
        """The first wish's argument values that differ from the gold call of the same tool."""
        revision = self.task.user.revision
        if revision is None:
            return {}
        out: dict[str, Any] = {}
        for first in revision.initial:
            final = next((a.arguments for a in self.task.gold_actions if a.name == first.name), {})
            out.update({k: v for k, v in first.arguments.items() if final.get(k) != v})
        return out

    def reply(self, messages: list[Message]) -> UserReply:
        """The scripted decision (synchronous: it is pure text matching)."""
        if self.turns == 0:
            self.turns = 1
            return UserReply(self.task.instruction)
        text = last_assistant_text(messages).strip()
        if not is_question(text) or _ANYTHING_ELSE.search(text):
            return UserReply(done=True, reason="answered")
        if self.turns >= self.max_turns:
            return UserReply(done=True, reason="user_stop")
        self.turns += 1
        user = self.task.user
        if _CONFIRM.search(text):
            # The change of mind comes when the agent reads back the first wish (a value of it the final wish does
            # not have), as it would in a real conversation, and again whenever the agent proposes it anew; a
            # question that only looks like one ("May I have your email?") is not a proposal of anything.
            if user.revision is not None and mentions(text, self._first_wish_values()):
                self.revised = True
                return UserReply(user.revision.message)
            # For a refusal task the forbidden change is what the user asked for, so they agree too: it is
            # the tools (and the agent) that must refuse.
            return UserReply("Yes, please go ahead.")
        facts = answer_facts(text, user.known, user.unknown, piecemeal="piecemeal" in user.behaviour)
        if facts is not None:
            return UserReply(facts)
        return UserReply(f"Sorry, I don't know that. What I need is this: {self.task.instruction}")

    async def aclose(self) -> None:
        return None


# -- LLM-played -------------------------------------------------------------------------------------------

STOP_MARKER = "###STOP###"
OPENING = "Hi! How can I help you today?"


def persona_prompt(task: Task, stop_marker: str = STOP_MARKER) -> str:
    """The system prompt that makes a chat model play the task's customer."""
    user = task.user
    known = "\n".join(f"- {k.replace('_', ' ')}: {v}" for k, v in user.known.items()
                      if k not in user.unknown) or "- (nothing else)"  # fmt: skip
    unknown = ""
    if user.unknown:
        lines = "\n".join(f"- {k.replace('_', ' ')} (when asked, say something like: \"{line}\")"
                          for k, line in user.unknown.items())  # fmt: skip
        unknown = f"Facts you do NOT know; when the agent asks for one, say that you do not know it:\n{lines}\n\n"
    rules = [
        "Write one short message at a time, as the customer, in plain language. Never act as the agent.",
        "Give a fact only when the agent asks for it. Never invent facts you were not given (ids, amounts, "
        "dates); say you do not know instead.",
    ]
    if "piecemeal" in user.behaviour:
        rules.append("Give one fact per message: when the agent asks for several at once, give only the first "
                     "and wait to be asked for the next.")  # fmt: skip
    if user.revision is not None:
        rules.append("You change your mind: the first time the agent asks you to confirm a change, do not say "
                     f"yes; say instead: \"{user.revision.message}\" After that, confirm the new request.")
        rules.append("When the agent asks you to confirm the new request, say yes.")
    else:
        rules.append("When the agent asks you to confirm what you asked for, say yes.")
    rules.append(f"When your request is done, or the agent says it cannot be done, reply with only {stop_marker}")
    return (
        f"You are {user.name}, a customer writing to an online support agent. {user.persona}\n\n"
        f"What you want: {task.instruction}\n\n"
        f"The only facts you know:\n{known}\n\n{unknown}"
        "Rules:\n" + "\n".join(f"- {r}" for r in rules)
    )


class LLMUser:
    """A user played by a policy (any backend) from a persona prompt; ends on the stop marker.

    The conversation is shown to the user model with roles swapped (the agent's messages are its "user"
    turns; tool calls and results are hidden, the customer does not see them).
    """

    def __init__(self, policy: Policy, *, max_turns: int = 10, stop_marker: str = STOP_MARKER) -> None:
        self.policy = policy
        self.max_turns = max_turns
        self.stop_marker = stop_marker
        self.name = f"llm:{policy.name}"

    def start(self, task: Task, *, seed: int = 0) -> LLMUserSession:
        # task=None: the user model must not see the gold actions a task-aware policy would read.
        session = self.policy.start(tools=[], task=None, seed=seed)
        return LLMUserSession(self, task, session)


class LLMUserSession:
    def __init__(self, user: LLMUser, task: Task, session: Any) -> None:
        self._user = user
        self._session = session
        self._system = persona_prompt(task, user.stop_marker)
        self.turns = 0

    def view(self, messages: list[Message]) -> list[Message]:
        """The conversation as the user model sees it: roles swapped, tools hidden, same roles merged."""
        out: list[Message] = [{"role": "system", "content": self._system}, {"role": "user", "content": OPENING}]
        for msg in messages:
            role = msg.get("role")
            text = (msg.get("content") or "").strip()
            if role not in ("user", "assistant") or not text:
                continue
            flipped = "assistant" if role == "user" else "user"
            if out[-1]["role"] == flipped:
                out[-1] = {"role": flipped, "content": f"{out[-1]['content']}\n\n{text}"}
            else:
                out.append({"role": flipped, "content": text})
        return out

    async def respond(self, messages: list[Message]) -> UserReply:
        if self.turns >= self._user.max_turns:
            return UserReply(done=True, reason="user_stop")
        turn = await self._session.respond(self.view(messages))
        text = (turn.content or "").strip()
        if self._user.stop_marker in text or not text:
            return UserReply(done=True, reason="user_stop")
        self.turns += 1
        return UserReply(text)

    async def aclose(self) -> None:
        await self._session.aclose()


__all__ = ["STOP_MARKER", "LLMUser", "ScriptedUser", "UserReply", "UserSession", "UserSimulator", "answer_facts",
           "answer_from_known", "is_question", "persona_prompt"]  # fmt: skip
