"""Grounding: the argument values of an agent's tool calls that the conversation never showed it.

A small policy that has learnt the shape of a call fills it with what it has seen in training: it looks a customer
up as ``find_user_by_email(email="sarah_jones@example.com")`` when the customer gave a name and a zip code, or reads
order ``#9368`` (the digits of the customer's user id) when no tool ever returned that order. Such a call fails, and
so does the episode, but the reward alone does not say which of its tokens were wrong: a policy-gradient update
lowers the whole turn, the choice of tool with the made-up value, and a small model then shuns the tool where it was
right (``docs/benchmarks.md``, "Made-up arguments"). This module says which values were made up, so that a trainer
can put the blame on them (``GRPOConfig.blame_invented``) and a benchmark can count them.

A value is **grounded** when a message the environment had shown the agent before the call holds it: the system
prompt, the user's messages, the tool results that are not errors (an error repeats the value it was given: "No
customer has the email '...'", which grounds nothing). It must appear as a whole (not inside a longer word or
address: ``mia`` is grounded neither by "family" nor by "mia.garcia@example.com"), compared case-insensitively.
Strings and integers are checked, inside lists and objects too; booleans, floats (an amount is rendered many ways)
and empty strings are not. The agent's own messages are no source: a value it made up once stays made up when it
repeats it.

What it cannot tell: a value the agent derived rather than copied (a date rewritten in another format, a sum) looks
made up, and so does an enumerated value the system prompt does not list; a value the system prompt uses as an
example (retail's ``#W1234567``) looks given. So it is a measure and a hint for credit assignment, not a score
component: the score judges the end state and what the user was told.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Invented", "grounded", "invented_arguments", "made_up_counts", "tool_call_arguments"]


@dataclass(frozen=True, slots=True)
class Invented:
    """One made-up value: the assistant turn that sent it (0-based among the assistant messages), the tool, the
    argument (a dotted path for a value inside a list or object: ``items.0.item_id``) and the value as text."""

    turn: int
    tool: str
    argument: str
    value: str


def _leaves(value: Any, path: str) -> Iterator[tuple[str, str]]:
    """``(path, text)`` of every string and integer inside ``value`` (booleans and floats are skipped)."""
    if isinstance(value, bool) or value is None or isinstance(value, float):
        return
    if isinstance(value, str | int):
        text = str(value).strip()
        if text:
            yield path, text
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _leaves(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            yield from _leaves(item, f"{path}.{i}")


#: Around a whole value: no word or address character glued to it ("mia" not in "family" nor in "mia.garcia@x.com",
#: "a@b.co" not in "xa@b.com"); a sentence's full stop after it is fine ("my email is a@b.com.").
BEFORE, AFTER = r"(?<![\w@.])", r"(?![\w@]|\.\w)"


def _pattern(text: str) -> re.Pattern[str]:
    return re.compile(BEFORE + re.escape(text.lower()) + AFTER)


def grounded(value: str, sources: Sequence[str]) -> bool:
    """Whether one of ``sources`` (lower-cased message texts) holds ``value`` as a whole, case-insensitively."""
    pattern = _pattern(value)
    return any(pattern.search(source) for source in sources)


def tool_call_arguments(call: Mapping[str, Any]) -> tuple[str, Any]:
    """The tool name and the parsed arguments of one OpenAI-style tool call (``arguments`` a JSON string as the
    conversation stores it, or already an object); arguments that are not JSON come back as the raw string."""
    function = call.get("function") or {}
    arguments = function.get("arguments")
    if isinstance(arguments, str):
        with contextlib.suppress(json.JSONDecodeError):  # not JSON: the raw string, as the step stores it
            arguments = json.loads(arguments)
    return str(function.get("name") or ""), arguments


def _is_error(message: Mapping[str, Any]) -> bool:
    """Whether a tool message is an error result (``{"error": ...}``), which echoes the arguments it was given."""
    content = message.get("content")
    if message.get("role") != "tool" or not isinstance(content, str) or not content.lstrip().startswith("{"):
        return False
    try:
        data = json.loads(content)
    except json.JSONDecodeError:
        return False
    return isinstance(data, Mapping) and "error" in data


def _content(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):  # content parts: their text
        content = " ".join(str(p.get("text", "")) if isinstance(p, Mapping) else str(p) for p in content)
    return str(content or "").lower()


def invented_arguments(messages: Sequence[Mapping[str, Any]]) -> list[Invented]:
    """Every argument value of the assistant's tool calls that no earlier system, user or tool message held (see
    the module docstring), in the order the calls were made. Arguments that did not parse as a JSON object are
    left out: the call was malformed, which the environment already answered with an error."""
    out: list[Invented] = []
    sources: list[str] = []
    turn = 0
    for message in messages:
        if message.get("role") != "assistant":
            if not _is_error(message):
                sources.append(_content(message))
            continue
        for call in message.get("tool_calls") or []:
            name, arguments = tool_call_arguments(call)
            if not isinstance(arguments, Mapping):
                continue
            out.extend(Invented(turn, name, path, text) for path, text in _leaves(arguments, "")
                       if not grounded(text, sources))  # fmt: skip
        turn += 1
    return out


_LIST_POSITION = re.compile(r"(?<![^.])\d+(?=\.|$)")  # "items.0.item_id" -> "items.*.item_id"


def made_up_counts(trials: Iterable[tuple[Sequence[Mapping[str, Any]], bool]]) -> dict[str, Any]:
    """Over ``(messages, passed)`` trials: how many made up an argument value (:func:`invented_arguments`), how
    many of those failed, and the made-up values per ``tool.argument``, most frequent first (list positions folded:
    ``items.*.item_id``)."""
    values: Counter[str] = Counter()
    made = failed = 0
    for messages, passed in trials:
        found = invented_arguments(messages)
        values.update(f"{i.tool}.{_LIST_POSITION.sub('*', i.argument)}" for i in found)
        made += bool(found)
        failed += bool(found) and not passed
    return {"trials": made, "failed": failed, "values": dict(values.most_common())}
