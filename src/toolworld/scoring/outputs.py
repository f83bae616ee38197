"""Expected outputs: did the agent tell the user the values it had to (a refund amount, a tracking number)?

Only what the agent said counts: the content of its assistant messages, never tool observations (the value is
in the observation whether or not the agent passed it on). Values are matched by kind:

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
the cause (expired, once, only one, out of stock, balance...).
"""

from __future__ import annotations

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


def check_outputs(expected: Sequence[Any], messages: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``{"label", "value", "found"}`` for each expected output (``ExpectedOutput`` or a dict with those keys)."""
    text = assistant_text(messages)
    numbers = numbers_in(text)
    out = []
    for item in expected:
        label, value = (item["label"], item["value"]) if isinstance(item, Mapping) else (item.label, item.value)
        out.append({"label": label, "value": value, "found": value_found(label, value, text, numbers=numbers)})
    return out


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


_RULE_ID = re.compile(r"(?<![A-Za-z0-9])R(\d+)(?![0-9])")


def _cites_other_rules(text: str, rule: str, reason: str | None) -> bool:
    """Whether ``text`` names a rule id that is neither ``rule`` nor one its reason names: citing the wrong rule
    is not citing the reason, and a reply listing every rule id would otherwise pass every refusal."""
    allowed = {rule.upper(), *(f"R{n}" for n in _RULE_ID.findall(reason or ""))}
    return any(f"R{n}" not in allowed for n in _RULE_ID.findall(text))
