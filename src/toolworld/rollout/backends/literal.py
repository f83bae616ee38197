"""``literal``: the rule-based difficulty probe, an agent that takes the user at their word.

It reads ids and values straight from the request (emails, ids such as ``#W1234567``, zip codes, names after
"I'm", quoted strings, a street address), identifies the customer with the first identification tool it can
fill, picks the tool whose name best matches the request's words, fills its arguments from the request (and,
for ids the user cannot know, from read tools whose rows mention the request's words), asks for a yes before a
write that needs one, makes that one call, and echoes the result. It never re-plans: no second write, no
branching on what it reads, no change of mind.

A task set is worth learning only when such an agent fails most of it while passing the requests that really
are commands. That makes the probe useful only if it is good at what it does, so it works for any world built
with the SDK: it reads nothing but the conversation, the tool results and the world's declarations (tool
names, schemas, entity parameters, ``yields``, ``mutates``, ``confirm``, identification tools), never a task's
gold actions, expected changes or outputs.
"""

from __future__ import annotations

import json
import re
from collections.abc import Generator, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ...records.messages import AssistantTurn, Message
from ...world.episode import ToolCall
from . import policy
from .gold import confirmation_request

if TYPE_CHECKING:
    from ...tasks.model import Task
    from ...world.tool import Tool
    from ...world.world import World

#: What the agent says when the user keeps talking after its last word: it has no further plan.
NOTHING_TO_ADD = "I have nothing to add to my previous answer."

_STOP = frozenset({"a", "an", "the", "to", "by", "of", "for", "in", "on", "and", "or", "with", "my", "me", "i",
                   "is", "it", "be", "get", "list", "find", "do", "can", "you", "please", "id", "ids"})  # fmt: skip
#: Plain English stand-ins for the words tools are named with; generic, so that no world needs its own table.
_SYNONYMS_RAW: dict[str, tuple[str, ...]] = {
    "swap": ("exchange", "modify"), "replace": ("exchange", "modify"), "change": ("modify",),
    "update": ("modify",), "edit": ("modify",), "ship": ("address",), "send": ("address",), "pay": ("payment",),
    "charge": ("payment",), "person": ("human", "transfer"), "human": ("transfer",),
    "someone": ("human", "transfer"), "where": ("track",), "tracking": ("track",), "status": ("details",),
    "refund": ("return",), "back": ("return",), "remove": ("delete",), "open": ("create",), "new": ("create",),
    "add": ("create",), "show": ("details",),
}  # fmt: skip
_FREE_TEXT = frozenset({"summary", "reason", "note", "notes", "description", "message", "comment", "comments",
                        "details", "text", "query", "subject", "issue", "problem", "explanation", "body"})  # fmt: skip
_ADDRESS_PARTS = {"line1": "line1", "street": "line1", "address_line1": "line1", "address1": "line1",
                  "street_address": "line1", "line2": "line2", "address_line2": "line2", "address2": "line2",
                  "city": "city", "town": "city", "state": "state", "state_code": "state", "zip": "zip",
                  "zip_code": "zip", "zipcode": "zip", "postal_code": "zip", "postcode": "zip"}  # fmt: skip

_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
# An id: '#' and a token with a digit, capitals then three or more digits ('M001', 'TKT-1042'), or a token with a
# letter (or '_') and at least five digits. Units such as '1080p', '4K' or '24-inch' start with their number and
# have fewer digits; zip codes and card endings have no letter.
_ID = re.compile(r"(?<![\w@.#-])(#[A-Za-z0-9][\w-]*\d[\w-]*|#\d+|[A-Z][A-Z_-]*\d{3,}[\w-]*"
                 r"|(?=[\w-]*[A-Za-z_])(?=(?:[\w-]*?\d){5})[A-Za-z0-9][\w-]*)(?![\w@-])")
_NAME = re.compile(r"(?i:\b(?:i'm|i am|my name is|my name's|this is|name:))\s+([A-Z][a-z'’-]+)\s+([A-Z][a-z'’-]+)")
_PHONE = re.compile(r"\+?\d[\d\s().-]{8,}\d")
_QUOTED = re.compile(r"\"([^\"]+)\"|“([^”]+)”|(?<![A-Za-z])'([^']+)'(?![A-Za-z])")
_ADDRESS = re.compile(r"\b(\d+(?:\s+[A-Za-z0-9.'-]+){1,6}?),\s*(?:((?:Apt|Apartment|Suite|Ste|Unit|Floor|#)\.?\s*[\w-]+),\s*)?"
                      r"([A-Za-z .'-]+?),\s*([A-Z]{2})\s+(\d{5})\b")  # fmt: skip
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


def _stem(word: str) -> str:
    """A crude stemmer, enough to meet 'cancelled' with 'cancel' and 'details' with 'detail'."""
    w = word.lower()
    for suffix in ("ing", "ed", "es", "s"):
        if w.endswith(suffix) and len(w) - len(suffix) >= 3 and not w.endswith("ss"):
            w = w[: -len(suffix)]
            break
    if w.endswith("e") and len(w) > 3:
        w = w[:-1]
    if len(w) > 3 and w[-1] == w[-2] and w[-1] not in "aeiou":
        w = w[:-1]
    if w.endswith("i") and len(w) > 3:
        w = w[:-1] + "y"
    return w


_SYNONYMS = {_stem(k): tuple(_stem(v) for v in vs) for k, vs in _SYNONYMS_RAW.items()}


def _words(text: str, *, synonyms: bool = True) -> set[str]:
    """The stemmed content words of ``text`` (with their stand-ins when ``synonyms``)."""
    out: set[str] = set()
    for raw in re.findall(r"[A-Za-z][A-Za-z']*", text):
        w = _stem(raw.strip("'"))
        if raw.lower() in _STOP or w in _STOP:
            continue
        out.add(w)
        if synonyms:
            out.update(_SYNONYMS.get(w, ()))
    return out


def _name_words(name: str) -> list[str]:
    return [_stem(w) for w in re.split(r"[_\W]+", name) if w and w.lower() not in _STOP]


@dataclass(slots=True)
class Extracted:
    """The literal values in what the user said, in order of appearance."""

    text: str
    emails: list[str] = field(default_factory=list)
    ids: list[tuple[str, int]] = field(default_factory=list)  # (token, position)
    names: list[tuple[str, str]] = field(default_factory=list)
    quoted: list[str] = field(default_factory=list)
    address: dict[str, str] | None = None


def extract(text: str) -> Extracted:
    """Emails, id-like tokens, capitalised name pairs, quoted strings and a street address found in ``text``."""
    out = Extracted(text)
    out.emails = _EMAIL.findall(text)
    without_emails = _EMAIL.sub(lambda m: " " * len(m.group()), text)
    out.ids = [(m.group(1), m.start(1)) for m in _ID.finditer(without_emails)]
    out.names = _NAME.findall(text)
    out.quoted = [next(g for g in m.groups() if g) for m in _QUOTED.finditer(text)]
    m = _ADDRESS.search(text)
    if m:
        out.address = {"line1": m.group(1).strip(), "line2": (m.group(2) or "").strip(), "city": m.group(3).strip(),
                       "state": m.group(4), "zip": m.group(5)}  # fmt: skip
    return out


def _stated(param: str, text: str) -> str | None:
    """A value the user states by the parameter's name: 'my zip code is 12345' for ``zip``."""
    words = [w for w in re.split(r"[_\W]+", param.lower()) if w and w not in ("id", "ids")]
    if not words:
        return None
    head = r"[\s_-]*".join(re.escape(w) for w in words)
    m = re.search(rf"\b{head}(?:\s+(?:code|number|address))?\s*(?:is|:|=)\s*([^\s,;!?]+)", text, re.IGNORECASE)
    return m.group(1).rstrip(".") if m else None


def _fact(param: str, ex: Extracted, *, address_zip: bool = False) -> str | None:
    """A fact about the user for an identification-style parameter, read by its name and the value's format."""
    name = param.lower()
    if "email" in name:
        return ex.emails[0] if ex.emails else None
    if "zip" in name or "postal" in name:
        if address_zip and ex.address:
            return ex.address["zip"]
        stated = _stated("zip", ex.text) or _stated("postal", ex.text)
        if stated and re.fullmatch(r"\d{5}", stated):
            return stated
        skip = {ex.address["zip"]} if ex.address else set()
        numbers = [n for n in re.findall(r"(?<![\w#-])\d{5}(?![\w-])", ex.text) if n not in skip]
        return numbers[0] if numbers else None
    if "name" in name and ("first" in name or "given" in name):
        return ex.names[0][0] if ex.names else _stated("first_name", ex.text)
    if "name" in name and ("last" in name or "sur" in name or "family" in name):
        return ex.names[0][1] if ex.names else _stated("last_name", ex.text)
    if name in ("name", "full_name", "customer_name"):
        return " ".join(ex.names[0]) if ex.names else None
    if "phone" in name:
        m = _PHONE.search(ex.text)
        return m.group().strip() if m else None
    return _stated(param, ex.text)


def _schema(spec_params: Mapping[str, Any], param: str) -> dict[str, Any]:
    """A parameter's schema with ``Optional[...]`` unwrapped to its non-null branch."""
    schema = dict(spec_params.get("properties", {}).get(param, {}))
    for branch in schema.get("anyOf", []):
        if isinstance(branch, dict) and branch.get("type") != "null":
            return {**branch, **{k: v for k, v in schema.items() if k != "anyOf"}}
    return schema


def _rows_at(value: Any, path: str) -> list[tuple[Any, Any]]:
    """``(id, row)`` at ``path`` in a tool result: the row is the object that holds the id (the id itself when
    the path ends in a list of bare ids), so the row's other values can describe the entity."""
    current: list[tuple[Any, Any]] = [(value, value)]
    if path:
        for part in path.split("."):
            many = part.endswith("[]")
            key = part[:-2] if many else part
            nxt: list[tuple[Any, Any]] = []
            for v, _row in current:
                holder = v
                if key:
                    if not isinstance(v, dict) or key not in v:
                        continue
                    v = v[key]
                if many:
                    items = v if isinstance(v, list) else list(v) if isinstance(v, dict) else []
                    nxt.extend((item, item) for item in items)
                else:
                    nxt.append((v, holder))
            current = nxt
    return [(v, row) for v, row in current if v is not None and not isinstance(v, dict | list)]


def _descriptions(row: Any) -> list[tuple[str, str]]:
    """``(key, text)`` for the string values that describe a row (ids left out: they describe nothing)."""
    out: list[tuple[str, str]] = []

    def walk(key: str, value: Any) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                if k != "id" and not k.endswith(("_id", "_ids")):
                    walk(str(k), v)
        elif isinstance(value, list):
            for v in value:
                if isinstance(v, str | dict):
                    walk(key, v)
        elif isinstance(value, str) and value.strip():
            out.append((key, value.strip().replace("_", " ").lower()))

    if isinstance(row, dict):
        walk("", row)
    return out


def _mentioned(key: str, value: str, text: str) -> bool:
    """Whether ``text`` (lower case) names the value; a one- or two-letter value only with its key ('size S')."""
    needle = value if len(value) > 2 else f"{key.replace('_', ' ').lower()} {value}"
    return re.search(rf"(?<!\w){re.escape(needle)}(?!\w)", text) is not None


@dataclass(slots=True)
class _Candidate:
    id: Any
    row: Any
    matched: set[str]
    described: set[str]
    score: tuple[int, int] = (0, 0)

    @property
    def full(self) -> bool:
        return bool(self.described) and self.matched >= self.described


def _rank(rows: list[tuple[Any, Any]], text: str, used_values: set[str] = frozenset()) -> list[_Candidate]:  # type: ignore[assignment]
    """Rows scored by how many of their distinguishing values the request names, best first (stable).

    Values every row shares distinguish nothing and are left out; a value the first pick of the same call
    already matched counts only as a tie-breaker, so a replacement is told from the item it replaces.
    """
    low = text.lower()
    seen: dict[Any, _Candidate] = {}
    described = {id(r): {f"{k}={v}" for k, v in _descriptions(r)} for _, r in rows}
    shared = set.intersection(*described.values()) if len(rows) > 1 and described else set()
    for entity_id, row in rows:
        if entity_id in seen:
            continue
        pairs = [(k, v) for k, v in _descriptions(row) if f"{k}={v}" not in shared]
        matched = {f"{k}={v}" for k, v in pairs if _mentioned(k, v, low)}
        fresh = {m for m in matched if m.split("=", 1)[1] not in used_values}
        seen[entity_id] = _Candidate(entity_id, row, matched, {f"{k}={v}" for k, v in pairs}, (len(fresh), len(matched)))
    return sorted(seen.values(), key=lambda c: (-c.score[0], -c.score[1]))


@dataclass(slots=True)
class _Read:
    """A successful read: which tool, and the ids (with their rows) it yielded per entity kind."""

    tool: str
    arguments: dict[str, Any]
    rows: dict[str, list[tuple[Any, Any]]]


class LiteralPolicy:
    """The literal-minded agent (see the module doc). ``world`` says which tools exist and what they declare;
    by default the registered world named by the task."""

    name = "literal"

    def __init__(self, *, world: World | None = None) -> None:
        self.world = world

    def start(self, *, tools: list[dict[str, Any]], task: Task | None = None, seed: int = 0) -> LiteralSession:
        world = self.world
        if world is None:
            if task is None:
                raise ValueError("the literal policy reads the world's tool declarations: start it with task= (a "
                                 "task of a registered world) or build it with LiteralPolicy(world=...)")  # fmt: skip
            from ...world import get_world

            world = get_world(task.world)
        offered = {str((t.get("function", t) or {}).get("name")) for t in tools if isinstance(t, dict)}
        return LiteralSession(world, offered or set(world.tools))


class LiteralSession:
    """One episode: a script that yields one turn at a time and reads the conversation the loop hands back."""

    buffer = None

    def __init__(self, world: World, offered: Iterable[str]) -> None:
        self.world = world
        self.tools: dict[str, Tool] = {n: t for n, t in world.tools.items() if n in set(offered)}
        self._messages: list[Message] = []
        self._script = self._converse()
        self._finished = False
        self._reads: dict[str, _Read] = {}  # canonical call -> its result's rows
        self._known: dict[str, list[Any]] = {}  # entity kind -> ids seen, first seen first
        self._principal: Any = None

    async def respond(self, messages: list[Message]) -> AssistantTurn:
        self._messages = messages
        if not self._finished:
            try:
                return self._script.send(None)
            except StopIteration:
                self._finished = True
        return AssistantTurn(content=NOTHING_TO_ADD)

    async def aclose(self) -> None:
        self._script.close()

    # -- reading the conversation ---------------------------------------------------------------------------------
    def _user_texts(self) -> list[str]:
        return [str(m.get("content") or "") for m in self._messages if m.get("role") == "user"]

    def _said(self) -> Extracted:
        """Everything the user said so far, the request first, as one text."""
        return extract("\n".join(self._user_texts()))

    def _last_result(self) -> tuple[bool, Any]:
        """(ok, value or error message) of the last tool message."""
        for msg in reversed(self._messages):
            if msg.get("role") == "tool":
                try:
                    value = json.loads(str(msg.get("content") or ""))
                except json.JSONDecodeError:
                    return True, msg.get("content")
                if isinstance(value, dict) and isinstance(value.get("error"), dict) and len(value) == 1:
                    return False, str(value["error"].get("message") or value["error"].get("type") or "error")
                return True, value
        return False, "no tool result"

    # -- the conversation -----------------------------------------------------------------------------------------
    def _converse(self) -> Generator[AssistantTurn, None, None]:
        request = self._user_texts()[0] if self._user_texts() else ""
        if self.world.identification_tools:
            found = yield from self._identify()
            if not found:
                return
        target = self._choose(request)
        if target is None:
            yield AssistantTurn(content="I'm sorry, I don't know how to help with that.")
            return
        arguments = yield from self._fill(target, request)
        if arguments is None:
            return
        call = ToolCall(target.name, arguments)
        if target.mutates and target.confirm:
            yield AssistantTurn(content=confirmation_request(call))  # the answer does not matter: it is literal
        ok, value = yield from self._call(target.name, arguments)
        if not ok:
            yield AssistantTurn(content=f"I'm sorry, I can't do that: {value}")
            return
        yield AssistantTurn(content=_echo(target, value))

    def _call(self, name: str, arguments: dict[str, Any]) -> Generator[AssistantTurn, None, tuple[bool, Any]]:
        """Make one call (a read made before with the same arguments is answered from memory) and record the
        ids its result yields."""
        key = json.dumps([name, arguments], sort_keys=True, default=str)
        tool = self.tools[name]
        if not tool.mutates and key in self._reads:
            return True, None
        yield AssistantTurn(content="", tool_calls=[ToolCall(name, dict(arguments))], finish_reason="tool_calls")
        ok, value = self._last_result()
        if ok:
            rows = {kind: _rows_at(value, path) for kind, path in tool.spec.yields.items()}
            for kind, found in rows.items():
                bucket = self._known.setdefault(kind, [])
                bucket.extend(v for v, _ in found if v not in bucket)
            if not tool.mutates:
                self._reads[key] = _Read(name, arguments, rows)
        return ok, value

    def _identify(self) -> Generator[AssistantTurn, None, bool]:
        """Identify the customer with the first identification tool whose parameters the user has given; ask
        (at most twice) for what the closest one still misses. False: given up, with a message said."""
        names = [n for n in self.world.identification_tools if n in self.tools]
        tried: set[str] = set()
        error = ""
        for asked in range(3):
            said = self._said()
            fills = {n: self._identity_args(self.tools[n], said) for n in names}
            for name in names:
                args, missing = fills[name]
                if missing or name in tried:
                    continue
                tried.add(name)
                ok, value = yield from self._call(name, args)
                if ok:
                    customer = self.world.customer
                    path = self.tools[name].spec.yields.get(customer or "", None)
                    ids = _rows_at(value, path) if path is not None else []
                    self._principal = ids[0][0] if ids else None
                    return True
                error = str(value)
            open_tools = [n for n in names if n not in tried]
            if asked == 2 or not open_tools:
                break
            closest = min(open_tools, key=lambda n: len(fills[n][1]))
            wanted = _spoken_list(fills[closest][1])
            yield AssistantTurn(content=f"To find your account, please give me your {wanted}.")
        why = f": {error}" if error else ""
        yield AssistantTurn(content=f"I'm sorry, I could not find your account{why}")
        return False

    def _identity_args(self, tool: Tool, said: Extracted) -> tuple[dict[str, Any], list[str]]:
        args: dict[str, Any] = {}
        missing: list[str] = []
        for param in tool.spec.parameters.get("required", []):
            value = _fact(param, said)
            if value is None:
                missing.append(param)
            else:
                args[param] = value
        return args, missing

    # -- choosing the tool ----------------------------------------------------------------------------------------
    def _choose(self, request: str) -> Tool | None:
        """The tool named most like the request: a write whose verb the request uses first, then the overlap of
        name words; on a tie, the tool more of whose parameters the request's values fill, then the one whose
        description's first clause shares more of the request's own words, then the fewest ids to look up and required parameters."""
        intent = re.sub(r"\([^()]*\)", " ", request)  # '(noise cancelling, black)' describes, it asks nothing
        said = _words(intent)
        plain = _words(intent, synonyms=False)
        ex = extract(request)
        best: tuple[Any, ...] | None = None
        chosen = None
        for order, tool in enumerate(self.tools.values()):
            if tool.identifies:
                continue
            words = _name_words(tool.name)
            overlap = len(set(words) & said)
            if not overlap:
                continue
            verb = int(tool.mutates and bool(words) and words[0] in said)
            summary = re.split(r"[.;:]\s", tool.spec.description.strip())[0]  # what it does, not its fine print
            described = len(_words(summary, synonyms=False) & plain)
            required = tool.spec.parameters.get("required", [])
            lookups = sum(1 for p in tool.spec.entity_params if p.required and not self._direct(p.kind, ex.ids))
            key = (verb, overlap, self._literal_fills(tool, ex), described, -lookups, -len(required), -order)
            if best is None or key > best:
                best, chosen = key, tool
        return chosen

    def _literal_fills(self, tool: Tool, said: Extracted) -> int:
        """How many of the tool's plain parameters the request's values fill by name and format (an address for
        ``line1``/``city``..., an email, a stated value): evidence the request is about this tool."""
        entity = {p.param for p in tool.spec.entity_params}
        count = 0
        for param in tool.spec.parameters.get("properties", {}):
            if param in entity:
                continue
            schema = _schema(tool.spec.parameters, param)
            if schema.get("enum"):
                count += any(_words(str(o), synonyms=False) & _words(said.text, synonyms=False) for o in schema["enum"])
            elif param.lower() in _FREE_TEXT or param.lower().split("_")[-1] in _FREE_TEXT:
                continue
            elif self._plain_value(tool, param, said, said.text) is not None:
                count += 1
        return count

    def _direct(self, kind: str, ids: list[tuple[str, int]]) -> bool:
        """Whether an id of ``kind`` needs no lookup: the customer's own, or one the request names."""
        return (kind == self.world.customer and self._principal is not None) or bool(ids and self.world.entities.get(kind))

    # -- filling the arguments ------------------------------------------------------------------------------------
    def _fill(self, tool: Tool, request: str) -> Generator[AssistantTurn, None, dict[str, Any] | None]:
        """Arguments for ``tool`` from the request, the customer's id and reads; asks once for what is missing,
        then gives up (None, with a message said)."""
        for attempt in range(2):
            said = self._said()
            args: dict[str, Any] = {}
            missing: list[str] = []
            params = tool.spec.parameters
            required = set(params.get("required", []))
            entity = {p.param: p for p in tool.spec.entity_params}
            picks: dict[str, list[_Candidate]] = {}  # entity kind -> rows picked for an earlier parameter
            used_tokens: set[str] = set()
            for param in params.get("properties", {}):
                if param in entity:
                    p = entity[param]
                    value = yield from self._entity_value(tool, p.param, p.kind, p.many, p.required, args, picks,
                                                          said, used_tokens)  # fmt: skip
                else:
                    value = self._plain_value(tool, param, said, request)
                if value is None:
                    if param in required:
                        missing.append(param)
                    continue
                args[param] = value
            if not missing:
                return args
            if attempt == 0:
                yield AssistantTurn(content=f"To {_spoken(tool.name)}, I need the {_spoken_list(missing)}. "
                                            "Could you tell me?")  # fmt: skip
        yield AssistantTurn(content=f"I'm sorry, I can't {_spoken(tool.name)} without the {_spoken_list(missing)}.")
        return None

    def _plain_value(self, tool: Tool, param: str, said: Extracted, request: str) -> Any:
        schema = _schema(tool.spec.parameters, param)
        name = param.lower()
        if schema.get("enum"):
            words = _words(request, synonyms=False)
            options = list(schema["enum"])
            return max(options, key=lambda o: (len(_words(str(o), synonyms=False) & words), -options.index(o)))
        kind = schema.get("type")
        part = _ADDRESS_PARTS.get(name)
        address_tool = any(_ADDRESS_PARTS.get(p.lower()) in ("line1", "city") for p in tool.spec.parameters.get(
            "properties", {}))  # fmt: skip
        if part and address_tool:
            if said.address is None:
                return None
            value = said.address.get(part)
            return value if value or part != "line2" else None
        if kind in ("string", None):
            fact = _fact(param, said, address_zip=address_tool)
            if fact is not None:
                return fact
            if name in _FREE_TEXT or name.split("_")[-1] in _FREE_TEXT:
                return _best_sentence(request, _name_words(tool.name)) or request.strip() or None
            return said.quoted[0] if said.quoted else None
        if kind in ("integer", "number"):
            stated = _stated(param, said.text)
            if stated and re.fullmatch(r"-?\d+(?:\.\d+)?", stated):
                return int(stated) if kind == "integer" and "." not in stated else float(stated)
        return None

    def _entity_value(self, tool: Tool, param: str, kind: str, many: bool, required: bool, args: dict[str, Any],
                      picks: dict[str, list[_Candidate]], said: Extracted,
                      used_tokens: set[str]) -> Generator[AssistantTurn, None, Any]:  # fmt: skip
        """An id (or list of ids) of ``kind``: the customer's own, one the user named, or one looked up."""
        if kind == self.world.customer and self._principal is not None:
            return [self._principal] if many else self._principal
        if self.world.entities.get(kind) is None and kind in self.world.entities:  # a fact, such as an email
            return _fact(param, said)
        token = self._token_for(tool, param, kind, said, used_tokens)
        if token is not None:
            used_tokens.add(token)
            return [token] if many else token
        if not required:
            return None
        earlier = picks.get(kind)
        if earlier:  # a second parameter of the kind: its counterpart among the first pick's relatives
            chosen: list[_Candidate] = []
            used = {c.id for c in earlier}
            for first in earlier if many else earlier[:1]:
                rows = yield from self._related_rows(first, kind)
                ranked = _rank([r for r in rows if r[0] not in used], said.text, {v.split("=", 1)[1]
                                                                                  for v in first.matched})
                if ranked and ranked[0].score[1] > 0:
                    chosen.append(ranked[0])
                    used.add(ranked[0].id)
            if not chosen:
                return None
            picks[kind] = earlier + chosen
            return [c.id for c in chosen] if many else chosen[0].id
        ranked = yield from self._look_up(kind, args, said.text)
        if not ranked:
            return None
        if ranked[0].score[1] == 0 and len(ranked) > 1:
            return None  # nothing in the request tells them apart: ask
        full = [c for c in ranked if c.full]
        chosen = full if many and full else ranked[:1]
        picks[kind] = chosen
        return [c.id for c in chosen] if many else chosen[0].id

    def _token_for(self, tool: Tool, param: str, kind: str, said: Extracted, used: set[str]) -> str | None:
        """An id the user typed for this parameter: one right after a word of its kind ('order #W1'), else, for
        the first id parameter, one after no kind word at all; in the sentence most about the tool first."""
        tokens = [(t, pos) for t, pos in said.ids if t not in used]
        if not tokens:
            return None
        own = set(_name_words(kind)) | set(_name_words(param))
        kinds = {k: set(_name_words(k)) for k in self.world.entities if k != kind}
        near: list[tuple[str, int]] = []
        free: list[tuple[str, int]] = []
        for token, pos in tokens:
            before = _words(" ".join(re.findall(r"[A-Za-z']+", said.text[max(0, pos - 40):pos])[-3:]),
                            synonyms=False)  # fmt: skip
            if before & own:
                near.append((token, pos))
            elif not any(before & words for words in kinds.values()):
                free.append((token, pos))
        first_id_param = next((p.param for p in tool.spec.entity_params if p.kind != self.world.customer), None)
        pool = near or (free if param == first_id_param else [])
        if not pool:
            return None
        focus = _best_sentence(said.text, _name_words(tool.name))
        inside = [t for t, pos in pool if focus and said.text.find(focus) <= pos < said.text.find(focus) + len(focus)]
        return inside[0] if inside else pool[0][0]

    def _producers(self, kind: str, known: Mapping[str, list[Any]]) -> list[tuple[Tool, dict[str, Any]]]:
        """Read tools that yield ``kind`` and whose required parameters are all ids already known, with their
        arguments; those named like the kind first, then those that need fewer parameters."""
        kind_words = set(_name_words(kind))
        out: list[tuple[tuple[int, int, int], Tool, dict[str, Any]]] = []
        for order, tool in enumerate(self.tools.values()):
            if tool.mutates or tool.identifies or kind not in tool.spec.yields:
                continue
            entity = {p.param: p for p in tool.spec.entity_params}
            args: dict[str, Any] = {}
            for param in tool.spec.parameters.get("required", []):
                p = entity.get(param)
                values = known.get(p.kind) if p is not None else None
                if not values:
                    break
                args[param] = list(values[:1]) if p.many else values[0]  # type: ignore[union-attr]
            else:
                overlap = len(set(_name_words(tool.name)) & kind_words)
                out.append(((-overlap, len(args), order), tool, args))
        out.sort(key=lambda item: item[0])
        return [(tool, args) for _, tool, args in out]

    def _look_up(self, kind: str, args: Mapping[str, Any], text: str) -> Generator[AssistantTurn, None, list[_Candidate]]:
        """Rows of ``kind`` from the reads that can give them (the call's own ids first), ranked against the request;
        stops at the first read whose rows the request names."""
        known: dict[str, list[Any]] = {}
        for p_kind, values in self._call_ids(args).items():
            known.setdefault(p_kind, []).extend(values)
        if self._principal is not None and self.world.customer:
            known.setdefault(self.world.customer, []).append(self._principal)
        for p_kind, values in self._known.items():
            known.setdefault(p_kind, []).extend(v for v in values if v not in known[p_kind])
        rows: list[tuple[Any, Any]] = []
        ranked: list[_Candidate] = []
        for tool, tool_args in self._producers(kind, known)[:3]:
            ok, _ = yield from self._call(tool.name, tool_args)
            if not ok:
                continue
            read = self._reads.get(json.dumps([tool.name, tool_args], sort_keys=True, default=str))
            found = read.rows.get(kind, []) if read else []
            ranked = _rank(found, text)
            if ranked and ranked[0].score[1] > 0:
                return ranked
            rows.extend(found)
        return _rank(rows, text)

    def _call_ids(self, args: Mapping[str, Any]) -> dict[str, list[Any]]:
        """Ids already in the call being filled, by kind (its order id is the one to read details of)."""
        out: dict[str, list[Any]] = {}
        for tool in self.tools.values():
            for p in tool.spec.entity_params:
                if p.param in args and self.world.entities.get(p.kind) is not None:
                    value = args[p.param]
                    for v in value if isinstance(value, list) else [value]:
                        bucket = out.setdefault(p.kind, [])
                        if v not in bucket:
                            bucket.append(v)
        return out

    def _related_rows(self, first: _Candidate, kind: str) -> Generator[AssistantTurn, None, list[tuple[Any, Any]]]:
        """Rows of ``kind`` read from the ids that sit beside ``first`` in its row (the product of an item...)."""
        related: dict[str, list[Any]] = {}
        for read in list(self._reads.values()):
            for k, found in read.rows.items():
                for v, row in found:
                    if row is first.row and k != kind:
                        related.setdefault(k, []).append(v)
        rows: list[tuple[Any, Any]] = []
        for tool, tool_args in self._producers(kind, related)[:2]:
            ok, _ = yield from self._call(tool.name, tool_args)
            read = self._reads.get(json.dumps([tool.name, tool_args], sort_keys=True, default=str))
            if ok and read is not None:
                rows.extend(read.rows.get(kind, []))
        return rows


def _best_sentence(text: str, words: Iterable[str]) -> str:
    """The sentence of ``text`` that shares most words with ``words`` (the first on a tie; '' when none does)."""
    wanted = set(words)
    best, score = "", 0
    for sentence in _SENTENCE.split(text.strip()):
        overlap = len(_words(sentence) & wanted)
        if overlap > score:
            best, score = sentence.strip(), overlap
    return best


def _spoken(name: str) -> str:
    return name.replace("_", " ")


def _spoken_list(params: list[str]) -> str:
    spoken = [_spoken(p) for p in params]
    return spoken[0] if len(spoken) == 1 else ", ".join(spoken[:-1]) + " and " + spoken[-1]


def _echo(tool: Tool, value: Any) -> str:
    """The result in words: every scalar field, and those one object down (amounts, tracking numbers...)."""
    facts: list[str] = []
    if isinstance(value, dict):
        for key, v in value.items():
            if isinstance(v, dict):
                facts.extend(f"{_spoken(key)} {_spoken(k)}: {x}" for k, x in v.items()
                             if x is not None and not isinstance(x, dict | list))  # fmt: skip
            elif v is not None and not isinstance(v, list):
                facts.append(f"{_spoken(key)}: {v}")
    elif isinstance(value, list):
        facts.append(f"{len(value)} result(s)")
    elif value is not None:
        facts.append(str(value))
    head = f"Done: {_spoken(tool.name)}." if tool.mutates else "Here is what I found."
    return head + (" " + "; ".join(facts) + "." if facts else "")


@policy("literal", usage="literal", options=(),
        help="probe: a literal-minded agent calling the obvious tool with the request's values (passes commands only)")
def make_literal(*, world: World | None = None) -> LiteralPolicy:
    """``--policy literal``: no options; ``world`` (Python only) for a world that is not registered."""
    return LiteralPolicy(world=world)
