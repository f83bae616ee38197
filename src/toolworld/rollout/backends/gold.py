"""``gold``: the task's gold actions replayed as a careful agent would, optionally with known mistakes.

``GoldPolicy`` is the upper bound every scorer must recognise as perfect, and with ``drop``, ``repeat`` and
``corrupt`` noise it makes known mistakes, recorded per turn, so scorers can be tested against them. Its
conversation is what a careful agent says (it is the data supervised fine-tuning learns from): it asks a
piecemeal customer for each identification fact before looking them up, asks for consent before each write,
and when the customer changes their mind at that point, asks again for the revised change.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ...core.dates import is_iso_date, spoken_date
from ...core.seeds import derive_seed
from ...records.messages import AssistantTurn, Message
from ...scoring.conduct import identifies, is_affirmative
from ...world.episode import ToolCall
from ...world.rng import Rng
from . import policy

if TYPE_CHECKING:
    from ...tasks.model import Task
    from ...world.world import World

@dataclass(slots=True)
class _Planned:
    """One call the gold session will make, with the perturbations that led to it (or to calls dropped before it)."""

    call: ToolCall
    perturbations: list[dict[str, Any]] = field(default_factory=list)


def corrupt_value(value: Any) -> Any:
    """A plausible-looking wrong value of the same shape (the kind of slip a model makes)."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        return value + 1
    if isinstance(value, str):
        for i in range(len(value) - 1, -1, -1):  # bump the last digit: '#W1234567' -> '#W1234568'
            if value[i].isdigit():
                return f"{value[:i]}{(int(value[i]) + 1) % 10}{value[i + 1:]}"
        return value[:-1] + value[-1].swapcase() + "x" if value else "x"
    if isinstance(value, list):
        return [corrupt_value(value[0]), *value[1:]] if value else ["x"]
    if isinstance(value, dict):
        if not value:
            return {"x": "x"}
        key = sorted(value)[0]
        return {**value, key: corrupt_value(value[key])}
    return "x"


class GoldPolicy:
    """Replays a task's gold actions, one call per turn, then states the expected outputs (or the refusal).

    It works the way the world's policy asks: before each write that needs the customer's consent (a write
    tool whose ``confirm`` is true) it says what it is about to do, with the call's argument values, asks
    whether to proceed, and makes the call after the user's answer. ``world`` says which tools those are;
    by default the registered world named by the task.

    With ``explain`` the turn that first uses a value the customer only described ("the order I placed on
    April 16", a scenario need) says how it was found, reading the list it came from row by row up to the one
    meant (:func:`pick_note`), so a model trained on the conversation learns to make the pick in steps it can
    copy and compare rather than in one token.

    With noise it perturbs the plan per (task, trial): each gold step is dropped with probability ``drop``,
    one of its arguments corrupted with probability ``corrupt``, and repeated with probability ``repeat``.
    Each perturbation is reported in the ``meta["perturbations"]`` of the turn that carries it (a dropped
    step: the next turn made), and the loop collects them into ``Trajectory.perturbations``.
    """

    def __init__(self, *, drop: float = 0.0, repeat: float = 0.0, corrupt: float = 0.0, seed: int = 0,
                 explain: bool = False, world: World | None = None) -> None:  # fmt: skip
        self.world = world
        self.explain = explain
        # world name -> (its tools that need consent, its identification tools)
        self._tools: dict[str, tuple[frozenset[str], frozenset[str]]] = {}
        for key, p in (("drop", drop), ("repeat", repeat), ("corrupt", corrupt)):
            if not 0.0 <= p <= 1.0:
                raise ValueError(f"gold {key}= must be a probability between 0 and 1, got {p}")
        self.drop, self.repeat, self.corrupt, self.seed = drop, repeat, corrupt, seed
        opts = [f"{k}={v:g}" for k, v in (("drop", drop), ("repeat", repeat), ("corrupt", corrupt)) if v]
        if opts and seed:
            opts.append(f"seed={seed}")
        if explain:
            opts.append("explain=1")
        self.name = "gold" + (":" + ",".join(opts) if opts else "")

    def start(self, *, tools: list[dict[str, Any]], task: Task | None = None, seed: int = 0) -> GoldSession:
        if task is None:
            raise ValueError("the gold policy replays a task's gold actions: start it with task=")
        known = self._tools.get(task.world)
        if known is None:
            known = self._tools[task.world] = _declared_tools(self.world, task.world)
        consent, identification = known
        first = task.gold_actions[0] if task.gold_actions else None
        questions: list[str] = []
        if "piecemeal" in task.user.behaviour and first is not None and first.name in identification:
            questions = [fact_request(name, i) for i, name in enumerate(first.arguments)]
        # What the request left out and the customer gives only when asked (a piecemeal user's new address).
        questions += [fact_request(key, len(questions) + i) for i, key in enumerate(task.scenario.withheld)]
        return GoldSession(task, self.plan(task, seed), consent, questions=questions, explain=self.explain)

    def plan(self, task: Task, seed: int = 0) -> tuple[list[_Planned], list[dict[str, Any]]]:
        """The calls to make and the perturbations left for the final turn (drops after the last call)."""
        rng = Rng(derive_seed("gold", self.seed, task.id, seed))
        planned: list[_Planned] = []
        pending: list[dict[str, Any]] = []
        for i, action in enumerate(task.gold_actions):
            # Draw all three every step: changing one probability must not move the others' draws.
            drop_u, corrupt_u, repeat_u = rng.random(), rng.random(), rng.random()
            args = copy.deepcopy(action.arguments)
            if drop_u < self.drop:
                pending.append({"kind": "drop", "step": i, "name": action.name, "arguments": args})
                continue
            notes = pending
            pending = []
            if corrupt_u < self.corrupt:
                key = rng.choice(sorted(args)) if args else None
                if key is None:
                    args = {"unexpected": "x"}
                    notes.append({"kind": "corrupt", "step": i, "name": action.name, "argument": None})
                else:
                    before = args[key]
                    args[key] = corrupt_value(before)
                    notes.append({"kind": "corrupt", "step": i, "name": action.name, "argument": key,
                                  "original": before, "corrupted": args[key]})  # fmt: skip
            planned.append(_Planned(ToolCall(action.name, args), notes))
            if repeat_u < self.repeat:
                planned.append(_Planned(ToolCall(action.name, copy.deepcopy(args)),
                                        [{"kind": "repeat", "step": i, "name": action.name}]))  # fmt: skip
        return planned, pending


def _declared_tools(world: World | None, name: str) -> tuple[frozenset[str], frozenset[str]]:
    """The world's tools whose calls need the customer's yes first (writes whose ``confirm`` is not false) and
    its identification tools."""
    if world is None:
        from ...world import get_world

        try:
            world = get_world(name)
        except Exception:  # a world built in a script and not registered: no tool is known to need consent
            return frozenset(), frozenset()
    consent = frozenset(n for n, t in world.tools.items() if t.mutates and getattr(t, "confirm", True))
    return consent, frozenset(n for n in world.tools if identifies(world, n))


def fact_request(parameter: str, index: int = 0) -> str:
    """How a careful agent asks for one identification fact (``parameter`` of the identification tool)."""
    spoken = parameter.replace("_", " ")
    if index == 0:
        return f"I can help with that. First, could you give me your {spoken}?"
    return f"Thank you. Could you give me your {spoken}?"


def confirmation_request(call: ToolCall) -> str:
    """What a careful agent says before a write: the call in words, with its argument values, and a question."""
    args = call.arguments if isinstance(call.arguments, dict) else {}
    details = "; ".join(f"{k.replace('_', ' ')}: {', '.join(map(str, v)) if isinstance(v, list) else v}"
                        for k, v in args.items() if v not in (None, ""))  # fmt: skip
    return f"I am about to {call.name.replace('_', ' ')}" + (f" ({details})" if details else "") + \
        ". Shall I proceed?"


def gold_answer(task: Task) -> str:
    """The final message a perfect agent gives: the refusal with its rule and reason, every expected output."""
    parts: list[str] = []
    if task.refusal is not None:
        parts.append(f"I'm sorry, but I can't do that (policy {task.refusal.rule}): {task.refusal.reason}")
    if task.expected_outputs:
        facts = "; ".join(f"{o.label.replace('_', ' ')}: {o.value}" for o in task.expected_outputs)
        parts.append(f"Here is what you asked for: {facts}.")
    if not parts:
        parts.append("Your request has been completed." if task.kind == "action" else "That is all I found.")
    return " ".join(parts)


def _listed_rows(messages: list[Message], value: str) -> tuple[list[dict[str, Any]], str] | None:
    """The rows of the latest tool result that is a list of objects one of which holds ``value``, and the field
    that holds it; None when no tool result lists it."""
    for msg in reversed(messages):
        if msg.get("role") != "tool":
            continue
        try:
            rows = json.loads(msg.get("content") or "")
        except (TypeError, ValueError):
            continue
        if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
            continue
        for row in rows:
            key = next((k for k, v in row.items() if v == value), None)
            if key is not None:
                return rows, key
    return None


def _row_words(row: dict[str, Any], key: str) -> str:
    """One listed row as a note names it: the picked field first, then its other words; dates also spoken."""
    words = [str(row[key])]
    for k, v in row.items():
        if k == key or not isinstance(v, str):
            continue
        words.append(f"{v[:10]} ({spoken_date(v)})" if is_iso_date(v) else v)
    return " ".join(words)


def pick_note(phrase: str, value: str, messages: list[Message]) -> str:
    """How a careful agent says it found a value the customer only described: the rows of the list it came
    from, in order, each with its words (dates also as spoken), up to the row that matches the description.

    ``'Looking for "the order I placed on April 16": #W4627932 processed 2026-05-14 (May 14); ...;
    #W8708015 delivered 2026-04-16 (April 16), this one.'`` Read row by row, each step is a copy and a local
    comparison with the phrase just quoted, which a small model can learn; picking the id in one step from the
    whole list is a lookup it does at chance. Empty when no earlier tool result lists ``value``.
    """
    found = _listed_rows(messages, value)
    if found is None:
        return ""
    rows, key = found
    shown: list[str] = []
    for row in rows:
        shown.append(_row_words(row, key))
        if row.get(key) == value:
            break
    return f'Looking for "{phrase}": ' + "; ".join(shown) + ", this one."


def _last_user_text(messages: list[Message]) -> str:
    for msg in reversed(messages):
        if msg.get("role") == "user":
            return msg.get("content") or ""
    return ""


class GoldSession:
    """One episode of gold replay: the identification facts asked for one at a time when the customer gives
    them piecemeal, then the next planned call each turn (a write needing consent is asked for in a text turn
    of its own first, and asked for again while the customer's answer is not a yes), then the answer.

    With a ``revision`` on the task's user, the first request for consent describes the customer's first
    wish (``revision.initial``): that is when they change their mind, and the gold calls carry the new wish.
    """

    buffer = None

    #: Requests for consent for one write: the first, and up to two more while the answer is not a yes.
    MAX_ASKS = 3

    def __init__(self, task: Task, plan: tuple[list[_Planned], list[dict[str, Any]]],
                 consent: frozenset[str] = frozenset(), *, questions: list[str] | None = None,
                 explain: bool = False) -> None:  # fmt: skip
        self.task = task
        self._explain = explain
        self._explained: set[str] = set()  # values whose pick was already explained
        self._calls, self._final_notes = plan
        self._consent = consent
        self._questions = list(questions or ())
        revision = task.user.revision
        self._initial = revision.initial[0] if revision is not None and revision.initial else None
        self._next = 0
        self._asked = -1  # index of the planned call whose confirmation was asked for last
        self._asks = 0  # how many times it was asked for
        self._revised = False  # the first wish was just asked for (the customer's answer revises it)
        self._answered = False

    def _consent_request(self, messages: list[Message]) -> AssistantTurn | None:
        """The turn that asks for consent to the next planned call; None once it was answered with a yes or
        asked for ``MAX_ASKS`` times."""
        call = self._calls[self._next].call
        if self._initial is not None:  # ask for the first wish: the customer revises it in their answer
            initial, self._initial = self._initial, None
            self._revised = True
            return AssistantTurn(content=confirmation_request(ToolCall(initial.name, dict(initial.arguments))))
        if self._asked != self._next:
            self._asked, self._asks = self._next, 1
            # After a change of mind the request acknowledges it, as a careful agent's would.
            ack, self._revised = "Understood. " if self._revised else "", False
            return AssistantTurn(content=ack + confirmation_request(call))
        if is_affirmative(_last_user_text(messages)) or self._asks >= self.MAX_ASKS:
            return None
        self._asks += 1
        return AssistantTurn(content="Understood. " + confirmation_request(call))

    async def respond(self, messages: list[Message]) -> AssistantTurn:
        if self._questions:
            return AssistantTurn(content=self._questions.pop(0))
        while self._next < len(self._calls):
            planned = self._calls[self._next]
            if planned.call.name in self._consent:
                ask = self._consent_request(messages)
                if ask is not None:
                    return ask
                if not is_affirmative(_last_user_text(messages)):
                    self._next += 1
                    # Never a yes: a careful agent does not make the change. The call's perturbations move on
                    # to the next turn, so the trajectory still reports every one.
                    if self._next < len(self._calls):
                        self._calls[self._next].perturbations[:0] = planned.perturbations
                    else:
                        self._final_notes = [*planned.perturbations, *self._final_notes]
                    continue
            self._next += 1
            meta = {"perturbations": planned.perturbations} if planned.perturbations else {}
            call = ToolCall(planned.call.name, copy.deepcopy(planned.call.arguments))
            note = self._note(call, messages) if self._explain else ""
            return AssistantTurn(content=note, tool_calls=[call], finish_reason="tool_calls", meta=meta)
        return self._answer()

    def _note(self, call: ToolCall, messages: list[Message]) -> str:
        """The pick note for the first call that uses a described value (none for later uses of it)."""
        args = call.arguments if isinstance(call.arguments, dict) else {}
        for need in self.task.scenario.needs:
            value = need.value
            if not isinstance(value, str) or value in self._explained or value not in args.values():
                continue
            note = pick_note(need.phrase, value, messages)
            if note:
                self._explained.add(value)
                return note
        return ""

    def _answer(self) -> AssistantTurn:
        if self._answered:  # the user kept talking after the answer: nothing to add, no further actions
            return AssistantTurn(content="I have nothing to add to my previous answer.")
        self._answered = True
        meta = {"perturbations": self._final_notes} if self._final_notes else {}
        return AssistantTurn(content=gold_answer(self.task), meta=meta)

    async def aclose(self) -> None:
        return None


@policy("gold", usage="gold[:drop=P,repeat=P,corrupt=P,seed=N,explain=1]",
        help="replay the task's gold actions; with drop/repeat/corrupt, known mistakes to test scorers; with "
             "explain=1, say how each described value was picked from the list it came from",
        options=("drop", "repeat", "corrupt", "seed", "explain"))  # fmt: skip
def make_gold(*, drop: Any = 0.0, repeat: Any = 0.0, corrupt: Any = 0.0, seed: Any = 0, explain: Any = 0,
              world: World | None = None) -> GoldPolicy:  # fmt: skip
    """``--policy gold:...``: probabilities as numbers, the seed as an integer, explain as 0/1."""
    try:
        probabilities = {"drop": float(drop), "repeat": float(repeat), "corrupt": float(corrupt)}
        seed_value = int(seed)
    except (TypeError, ValueError):
        raise ValueError("gold drop=, repeat= and corrupt= take probabilities (0 to 1) and seed= an integer, got "
                         f"drop={drop!r}, repeat={repeat!r}, corrupt={corrupt!r}, seed={seed!r}") from None
    flag = str(explain).strip().lower()
    if flag not in ("0", "1", "true", "false", "yes", "no"):
        raise ValueError(f"gold explain= takes 0 or 1, got {explain!r}")
    return GoldPolicy(**probabilities, seed=seed_value, explain=flag in ("1", "true", "yes"), world=world)
