"""Expected outputs: did the agent tell the user the values it had to (a refund amount, a tracking number)?

Only what the agent said counts: the content of its assistant messages, never tool observations (the value is
in the observation whether or not the agent passed it on). Values are matched by kind:

* **identifiers** (tracking numbers, order numbers, ids, codes: by label, or values mixing letters and digits,
  or long digit strings) must appear verbatim, case included, not inside a longer token: a tracking number
  with one digit off, or reformatted with separators, is a different parcel;
* **amounts** are compared as numbers: ``"$1,299.50"``, ``"1299.5"`` and ``"1,299.50 USD"`` all say 1299.50;
* **text** (a status, a carrier) is compared case- and whitespace-insensitively, as a whole word or phrase.
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
_REFUSAL = re.compile(
    r"\b(cannot|can ?not|can't|unable|not able|not possible|isn't possible|not allowed|not permitted|"
    r"not eligible|no longer eligible|won't be able|unfortunately|sorry|against (?:our|the) policy|decline)\b",
    re.I,
)


def assistant_text(messages: Iterable[Mapping[str, Any]]) -> str:
    """Everything the agent said, in order (text parts of multi-part contents included)."""
    parts: list[str] = []
    for msg in messages:
        if msg.get("role") != "assistant":
            continue
        content = msg.get("content")
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts.extend(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return "\n".join(parts).replace("\u2019", "'")


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


def states_refusal(text: str, reason: str | None = None) -> bool:
    """Whether the agent told the user it cannot do what was asked (a refusal word, or the rule's own reason)."""
    if reason and _squash(reason) in _squash(text):
        return True
    return _REFUSAL.search(text) is not None
