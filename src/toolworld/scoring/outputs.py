"""Expected outputs: did the agent tell the user the values it had to (a refund amount, a tracking number)?

Only what the agent said counts: the content of its assistant messages, never tool observations (the value is
in the observation whether or not the agent passed it on). And a value said counts only when it is **grounded**:
the same value (same matcher) was in a tool result the agent had received before the message that says it. An
answer that lists every value a field can take ("the plan is team, business or enterprise", "0, 1, ..., 60
issues") would otherwise pass without the agent ever looking anything up; grounded, it passes only for an agent
that read the value, which is what the output is there to check. For the same reason a value said only inside a
list of three or more candidates of its kind (:func:`hedges`) is not stated: having read a list of issues, "37, 38
or 39" still tells the user nothing. Values are matched by kind:

* **identifiers** (tracking numbers, order numbers, ids, codes: by label, or values mixing letters and digits,
  or long digit strings) must appear verbatim, case included, not inside a longer token: a tracking number
  with one digit off, or reformatted with separators, is a different parcel;
* **amounts** are compared as numbers: ``"$1,299.50"``, ``"1299.5"`` and ``"1,299.50 USD"`` all say 1299.50;
* **text** (a status, a carrier) is compared case- and whitespace-insensitively, as a whole word or phrase.

A **refusal** is stated when one assistant message both says the request cannot be done and cites why
(:func:`states_refusal`). Saying "sorry" is not refusing, and refusing without a reason leaves the user with
nothing to act on; asking for both in the same message keeps a chatty "I can't wait to help!" early on and a
status mentioned later from adding up to a refusal nobody made. The reason is cited by the rule id (``R1``,
"policy R1", "rule 1") or by a distinctive fact of the world's own reason (:func:`reason_facts`): a quoted
status (``'delivered'``), a number of days (``220 days``, ``30-day``), a date, an amount, or a word that names
the cause (expired, once, only one, out of stock, balance...). A reply that also names a rule the reason does not
(in any of the forms a citation may take: ``r7``, "rule 7", "policy #7", "rules 1, 2 and 3") cites no reason:
listing every rule would otherwise pass every refusal.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from decimal import Decimal, InvalidOperation
from typing import Any, Literal

OutputKind = Literal["identifier", "number", "text"]

_ID_LABEL = re.compile(r"(tracking|number|code|sku|email|(^|_)id$)", re.I)
_AMOUNT = re.compile(r"^\s*(?:[$€£]\s*)?[-+]?(?P<int>\d{1,3}(?:,\d{3})+|\d+)(?P<frac>\.\d+)?\s*(?:usd|dollars?)?\s*$",
                     re.I)  # fmt: skip
_NUMBER_TOKEN = re.compile(r"(?<![\d.])(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(?!\d)")
# Refusal wording: negated ability or permission, a rule that forbids it, a window that has closed. Matched on
# text with contractions spelled out ("can't" -> "cannot", "isn't" -> "is not") and with idioms that merely
# look negative removed first (_NOT_REFUSING).
_REFUSAL = re.compile(
    r"\b(?:cannot|can not|could not|unable to|not able to|will not be able to|"
    r"not (?:possible|allowed|permitted|eligible|authori[sz]ed)|impossible|ineligible|"
    r"no longer (?:possible|allowed|eligible|be)|(?:must|have to|need to) (?:decline|refuse)|"
    r"against (?:our|the|store|company) polic(?:y|ies)|"
    r"(?:polic(?:y|ies)|rules?) (?:does not|do not|will not) (?:allow|permit|let)|"
    r"(?:can|may) only be|only (?:when|while|within)|(?:window|period) (?:has|is) (?:closed|passed|expired|over)|"
    r"(?:outside|past|beyond) (?:the|our|your|its|that) [\w -]{0,25}(?:window|period)|too late to|"
    r"(?:i|we) will not (?:be )?(?:cancel|chang|modif|process|return|exchang|refund|do|make|open)\w*|"
    r"unfortunately|i'm afraid|i am afraid|not something (?:i|we) can)\b",
    re.I,
)
_NOT_REFUSING = re.compile(
    r"\b(?:cannot|can not|could not) (?:wait|thank|believe|stress|emphasi[sz]e|help but|agree more|be happier|"
    r"recommend\b[\w ]{0,30}\benough)\b",
    re.I,
)
_CONTRACTIONS = ((re.compile(r"\bcan'?t\b", re.I), "cannot"), (re.compile(r"\bwon'?t\b", re.I), "will not"),
                 (re.compile(r"n't\b", re.I), " not"))  # fmt: skip
# Words that name the cause in a world's refusal reason; one found in both the reason and the reply is a citation.
_CAUSE_WORDS = ("expired", "closed", "once", "only one", "out of stock", "same product", "balance",
                "original payment method", "belong", "summary")  # fmt: skip
_QUOTED = re.compile(r"'([^'\n]{2,40})'")
_DAYS = re.compile(r"\b(\d+)[\s-]*days?\b", re.I)
_DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")
_MONEY = re.compile(r"\$\s?(\d[\d,]*(?:\.\d+)?)")
_RULE = re.compile(r"^([A-Za-z]+)(\d+)$")
# Words for an empty field, as a value is told to the user when the tool result has null there.
_NOTHING = re.compile(r"^(?:none|null|nobody|no one|unassigned|unset|not set|n/?a|empty)$", re.I)


def message_text(msg: Mapping[str, Any]) -> str:
    """The text of one message (text parts of a multi-part content joined), curly apostrophes made straight."""
    content = msg.get("content")
    if isinstance(content, str):
        text = content
    elif isinstance(content, list):
        text = "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    else:
        text = ""
    return text.replace("\u2019", "'")


def assistant_messages(messages: Iterable[Mapping[str, Any]]) -> list[str]:
    """The text of each assistant message, in order (empty for a message that only calls tools)."""
    return [message_text(m) for m in messages if m.get("role") == "assistant"]


def assistant_text(messages: Iterable[Mapping[str, Any]]) -> str:
    """Everything the agent said, in order (text parts of multi-part contents included)."""
    return "\n".join(assistant_messages(messages))


def output_kind(label: str, value: str) -> OutputKind:
    """How a value is matched: identifiers verbatim, amounts as numbers, other text loosely (see module doc)."""
    v = value.strip()
    if _ID_LABEL.search(label):
        return "identifier"
    if re.search(r"[A-Za-z]", v) and re.search(r"\d", v) and not _AMOUNT.match(v):
        return "identifier"
    if v.isdigit() and (len(v) >= 7 or (len(v) > 1 and v.startswith("0"))):
        return "identifier"
    if _AMOUNT.match(v):
        return "number"
    return "text"


def _decimal(integer: str, frac: str | None) -> Decimal | None:
    try:
        return Decimal(integer.replace(",", "") + (frac or ""))
    except InvalidOperation:  # pragma: no cover - the regexes only let digits through
        return None


def numbers_in(text: str) -> set[Decimal]:
    """Every number written in ``text`` (thousands separators and currency signs around it do not matter)."""
    out = set()
    for m in _NUMBER_TOKEN.finditer(text):
        d = _decimal(m.group(1), m.group(2))
        if d is not None:
            out.add(d)
    return out


def _squash(text: str) -> str:
    return " ".join(text.casefold().split())


def contains_phrase(text: str, phrase: str) -> bool:
    """Whether ``text`` contains ``phrase``, case and runs of whitespace aside."""
    return _squash(phrase) in _squash(text)


def quoted_phrases(text: str) -> list[str]:
    """The phrases ``text`` quotes in single quotes ('delivered', 'Hold a 30-day goals meeting'), once each."""
    return list(dict.fromkeys(_QUOTED.findall(text)))


def value_found(label: str, value: str, text: str, *, numbers: set[Decimal] | None = None) -> bool:
    """Whether ``text`` states ``value`` (matched according to :func:`output_kind`)."""
    kind = output_kind(label, value)
    v = value.strip()
    if not v:
        return True
    if kind == "identifier":
        return re.search(rf"(?<![A-Za-z0-9]){re.escape(v)}(?![A-Za-z0-9])", text) is not None
    if kind == "number":
        m = _AMOUNT.match(v)
        assert m is not None
        want = _decimal(m.group("int"), m.group("frac"))
        return want in (numbers if numbers is not None else numbers_in(text))
    return re.search(rf"(?<!\w){re.escape(_squash(v))}(?!\w)", _squash(text)) is not None


#: Why an expected output was not found (``check_outputs``' ``why``).
NOT_STATED = "not stated"
UNGROUNDED = "stated, but no tool result the agent had received before showed it"
HEDGED = "stated only as one of a list of candidate values"


def check_outputs(expected: Sequence[Any], messages: Iterable[Mapping[str, Any]],
                  steps: Sequence[Any] | None = None, *,
                  enums: Sequence[frozenset[str]] = ()) -> list[dict[str, Any]]:  # fmt: skip
    """``{"label", "value", "found"}`` for each expected output (``ExpectedOutput`` or a dict with those keys).

    ``found`` is true when an assistant message states the value, a tool result the agent received before that
    message shows it (see the module doc: an ungrounded value is a guess), and the message does not state it as one
    item of a list of candidates (:func:`hedges`; ``enums``: the value sets a text value may belong to, from
    :func:`schema_enums`). A value not found also gets ``why``. Tool results are the ``tool`` messages of the
    conversation, and the output of each step in ``steps`` that has no tool message (a call made outside the
    conversation), seen from the turn after the one that made it.
    """
    said = _replies_with_sources(list(messages), steps or ())
    text = "\n".join(reply for reply, _ in said)
    numbers = numbers_in(text)
    cache: dict[str, set[Decimal]] = {}
    items = [(i["label"], i["value"]) if isinstance(i, Mapping) else (i.label, i.value) for i in expected]
    out = []
    for label, value in items:
        if not value_found(label, value, text, numbers=numbers):
            out.append({"label": label, "value": value, "found": False, "why": NOT_STATED})
            continue
        grounded = [reply for reply, sources in said
                    if value_found(label, value, reply) and _grounded(label, value, sources, cache)]  # fmt: skip
        others = [v for lab, v in items if (lab, v) != (label, value)]
        if any(not hedges(label, value, reply, enums=enums, others=others) for reply in grounded):
            out.append({"label": label, "value": value, "found": True})
        elif grounded:
            out.append({"label": label, "value": value, "found": False, "why": HEDGED})
        else:
            out.append({"label": label, "value": value, "found": False, "why": UNGROUNDED})
    return out


#: Distinct candidates in one list that make a stated value a hedge ("team, business or enterprise").
HEDGE_LIST = 3
# What may stand between the items of a list: punctuation, ellipses and the words that join alternatives.
_LIST_GAP = re.compile(r"(?:[\s,;:/|().*\u2022-]|\u2026|\b(?:or|and|either|nor)\b)*", re.I)
_IN_LIST = re.compile(r"\bIN\s*\(([^()]*)\)", re.I)


def schema_enums(schema: str) -> list[frozenset[str]]:
    """The value sets of a schema's ``CHECK (column IN ('a', 'b', 'c'))`` constraints with three or more text
    values (casefolded): the values a status, plan or stage can take, which a hedge lists."""
    sets = []
    for m in _IN_LIST.finditer(schema):
        values = frozenset(v.casefold() for v in re.findall(r"'([^']*)'", m.group(1)))
        if len(values) >= HEDGE_LIST and values not in sets:
            sets.append(values)
    return sets


def hedges(label: str, value: str, text: str, *, enums: Sequence[frozenset[str]] = (),
           others: Sequence[str] = ()) -> bool:  # fmt: skip
    """Whether ``text`` states ``value`` inside a list of at least :data:`HEDGE_LIST` distinct candidates of its
    kind: numbers ("0, 1, 2, ..., 60 issues") or, for text, members of one of ``enums`` ("team, business or
    enterprise"). Such a list tells the user nothing, yet holds the right value wherever the list is complete.

    Only a list counts (items separated by nothing but punctuation, bullets and "or"/"and"), so that prose naming another
    status ("it is open, and nobody has closed it") is not a hedge; ``others`` (the task's other expected values)
    are not candidates, since an answer may list them side by side.
    """
    kind = output_kind(label, value)
    if kind == "identifier":
        return False
    mentions: list[tuple[int, int, Any]] = []
    if kind == "number":
        m = _AMOUNT.match(value.strip())
        want: Any = _decimal(m.group("int"), m.group("frac")) if m else None
        skip = {d for o in others for d in numbers_in(o)}
        for t in _NUMBER_TOKEN.finditer(text):
            # a number inside an id, a date or a time ('PRJ-37', '2026-03-23') is not a count of anything
            if re.match(r"[A-Za-z#-]", text[t.start() - 1: t.start()] or " ") or re.match(r"[A-Za-z-]", text[t.end():]):
                continue
            d = _decimal(t.group(1), t.group(2))
            if d is not None and d not in skip:
                mentions.append((t.start(), t.end(), d))
    else:
        want = _squash(value)
        members = {m for s in enums if want in s for m in s} - {_squash(o) for o in others} | {want}
        if len(members) < HEDGE_LIST:
            return False
        for member in members:
            words = r"\s+".join(re.escape(w) for w in member.split())
            mentions += [(t.start(), t.end(), member) for t in re.finditer(rf"(?<!\w){words}(?!\w)", text, re.I)]
    mentions.sort(key=lambda x: (x[0], -x[1]))
    run: set[Any] = set()
    end = -1
    hedged = False
    for start, stop, what in mentions:
        if start < end:  # inside a longer mention ('on hold' within 'put on hold')
            continue
        if end < 0 or not _LIST_GAP.fullmatch(text[end:start]):
            hedged = hedged or (want in run and len(run) >= HEDGE_LIST)
            run = set()
        run.add(what)
        end = stop
    return hedged or (want in run and len(run) >= HEDGE_LIST)


def _replies_with_sources(messages: list[Mapping[str, Any]], steps: Sequence[Any]) -> list[tuple[str, list[str]]]:
    """Each assistant message's text with the tool results the agent had received before it."""
    answered = {m.get("tool_call_id") for m in messages if m.get("role") == "tool"}
    # turn -> outputs of steps the conversation does not show (tool-level calls, trimmed conversations)
    unshown: dict[int, list[str]] = {}
    for step in steps:
        if getattr(step, "call_id", None) in answered:
            continue
        shown = step.output if step.ok else {"error": step.error}
        unshown.setdefault(int(step.turn), []).append(json.dumps(shown, ensure_ascii=False, default=str))
    sources: list[str] = [text for turn, texts in unshown.items() if turn < 0 for text in texts]
    said: list[tuple[str, list[str]]] = []
    turn = 0
    for msg in messages:
        role = msg.get("role")
        if role == "tool":
            sources.append(message_text(msg))
        elif role == "assistant":
            said.append((message_text(msg), sources[:]))
            sources.extend(unshown.get(turn, ()))
            turn += 1
    return said


def _grounded(label: str, value: str, sources: list[str], cache: dict[str, set[Decimal]]) -> bool:
    """Whether one of ``sources`` (tool results) shows ``value``, by the matcher of :func:`value_found`; ``cache``
    keeps the numbers of each source, since every reply looks through the same results again.

    A value that says there is nothing ("unassigned", "none") is shown by the field of its label left empty
    (``"assignee": null``): the result shows it in the only way JSON can.
    """
    number = output_kind(label, value) == "number"
    nothing = _NOTHING.match(value.strip()) is not None
    for source in sources:
        numbers = None
        if number:
            numbers = cache.get(source)
            if numbers is None:
                numbers = cache[source] = numbers_in(source)
        if value_found(label, value, source, numbers=numbers):
            return True
        if nothing and re.search(rf'"{re.escape(label)}"\s*:\s*(?:null|""|\[\]|\{{\}})', source, re.I):
            return True
    return False


def refuses(text: str) -> bool:
    """Whether ``text`` says the request cannot or will not be done (wording only; see :func:`states_refusal`)."""
    text = text.replace("\u2019", "'")
    for pattern, spelled in _CONTRACTIONS:
        text = pattern.sub(spelled, text)
    return _REFUSAL.search(_NOT_REFUSING.sub(" ", text)) is not None


def reason_facts(rule: str | None, reason: str | None) -> list[tuple[str, re.Pattern[str]]]:
    """The ways to cite a refusal reason: ``(what, pattern)`` for the rule id and each distinctive fact of it."""
    facts: list[tuple[str, re.Pattern[str]]] = []
    if rule:
        facts.append((rule, re.compile(rf"(?<![A-Za-z0-9]){re.escape(rule)}(?![0-9])", re.I)))
        m = _RULE.match(rule)
        if m:  # "rule 1", "policy #1"
            facts.append((f"rule {m.group(2)}", re.compile(rf"\b(?:rule|policy)\s*#?\s*{m.group(2)}(?!\d)", re.I)))
    text = reason or ""
    for quoted in dict.fromkeys(_QUOTED.findall(text)):
        words = r"\s+".join(re.escape(w) for w in quoted.split())
        facts.append((f"'{quoted}'", re.compile(rf"(?<!\w){words}(?!\w)", re.I)))
    for days in dict.fromkeys(_DAYS.findall(text)):
        facts.append((f"{days} days", re.compile(rf"(?<![\d.]){days}[\s-]*days?\b", re.I)))
    for date in dict.fromkeys(_DATE.findall(text)):
        facts.append((date, re.compile(rf"\b{re.escape(date)}\b")))
    for amount in dict.fromkeys(a.rstrip(",") for a in _MONEY.findall(text)):
        facts.append((f"${amount}", re.compile(rf"(?<![\d.,]){re.escape(amount)}(?![\d])")))
    low = text.lower()
    for word in _CAUSE_WORDS:
        if re.search(rf"\b{word}", low):
            facts.append((word, re.compile(rf"\b{word}", re.I)))
    return facts


def cites_reason(text: str, rule: str | None, reason: str | None) -> bool:
    """Whether ``text`` names the rule or a distinctive fact of the reason (the whole reason, verbatim, too)."""
    text = text.replace("\u2019", "'")
    if reason and _squash(reason) in _squash(text):
        return True
    return any(pattern.search(text) for _, pattern in reason_facts(rule, reason))


def states_refusal(text: str, reason: str | None = None, rule: str | None = None) -> bool:
    """Whether ``text`` (one message) says the request cannot be done and, when a reason or rule is given, cites it.

    See the module doc; refusal wording that is an idiom ("I can't wait to help") does not count.
    """
    if not refuses(text):
        return False
    if rule and _cites_other_rules(text, rule, reason):
        return False
    return cites_reason(text, rule, reason) if (reason or rule) else True


# A rule named the ways a citation may name one (:func:`reason_facts`, case-insensitive): "R7" / "r7", "rule 7",
# "policy #7"; after the word, a list or range ("rules 1, 2 and 3", "policy 1-11") names each of its numbers (a
# list goes on only through short numbers, so that "rule 1, 2026-03-23" is rule 1 and a date).
_RULE_ID = re.compile(
    r"(?<![A-Za-z0-9])r(?P<short>\d+)(?![0-9])|"
    r"\b(?:rules?|polic(?:y|ies))\s*#?\s*(?P<list>\d+(?:\s*(?:,|/|&|-|\u2013|\band\b|\bor\b|\bto\b)\s*#?\s*\d{1,3}(?![\d.]|-\d))*)",
    re.I,
)


def rule_ids(text: str) -> set[int]:
    """The rule numbers ``text`` names, in any form a citation may take (see ``_RULE_ID``)."""
    found: set[int] = set()
    for m in _RULE_ID.finditer(text):
        if m.group("short") is not None:
            found.add(int(m.group("short")))
        else:
            found.update(int(n) for n in re.findall(r"\d+", m.group("list")))
    return found


def _cites_other_rules(text: str, rule: str, reason: str | None) -> bool:
    """Whether ``text`` names a rule that is neither ``rule`` nor one its reason names: citing the wrong rule is not
    citing the reason, and a reply listing every rule would otherwise pass every refusal. The forms are those a
    citation may take, in any case, so that "r1 r2 ... r11" or "rule 1, rule 2, ..." is caught like "R1 R2 ..."."""
    m = _RULE.match(rule)
    own = {int(m.group(2))} if m else set()
    return bool(rule_ids(text) - own - rule_ids(reason or ""))
