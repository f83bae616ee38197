"""Tool-call dialects, both ways. Writing: ``tool_system_prompt`` and ``tool_call_text`` state tools and calls
for a template that renders none (one Hermes format, in rollouts and training data alike). Reading:
``parse_tool_calls`` turns sampled text into routed ``ToolCall``s without ever touching the sampled tokens.

Models write tool calls in many dialects. ``parse_tool_calls`` recognises the common ones and always answers:
a call whose JSON does not parse still comes back as a ``ToolCall`` (``arguments`` is the raw string, the name
is the best guess or ``""``) with ``problem`` set to a diagnosis in the model's terms ("your <tool_call> JSON is
cut off at char 41"). The loop answers such a call with a ``malformed_call`` error carrying that diagnosis
instead of running it, so the attempt neither vanishes nor comes back as a puzzling "No tool named ''".
Parsing only decides what to route to the world; the token buffer keeps the tokens exactly as sampled whatever
happens here.

Formats (``fmt``):

- ``hermes``: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``, several per turn (Qwen2.5, Qwen3,
  Hermes, and the prompt toolworld writes for templates without tool support).
- ``qwen3_coder``: ``<tool_call><function=NAME><parameter=KEY>value</parameter></function></tool_call>``.
- ``llama3``: a JSON object ``{"name": ..., "parameters": {...}}``, optionally after ``<|python_tag|>``.
- ``mistral``: ``[TOOL_CALLS][{"name": ..., "arguments": {...}, "id": ...}]`` and tekken's
  ``[TOOL_CALLS]NAME[ARGS]{...}``.
- ``deepseek``: ``<｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{...}<｜tool▁call▁end｜>`` (DeepSeek-V3.1).
- ``harmony``: gpt-oss messages, ``<|start|>assistant to=functions.NAME<|channel|>commentary json<|message|>{...}``.
- ``json``: the lenient fallback for small models: fenced ```json blocks or bare JSON objects that have a
  ``name`` and ``arguments`` (or ``parameters``).
- ``auto`` (default): pick by the markers present, falling back to ``json``.

A leading ``<think>...</think>`` block is split off into ``reasoning`` for every format. Everything here is
linear in the input (``str.find`` scans and ``json`` decoding, no backtracking regular expressions), and the
lenient scan tries a bounded number of candidates, so a megabyte of arguments parses in milliseconds.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ..world.episode import ToolCall, ToolResult, unreadable_arguments
from ..world.errors import ToolError

# ------------------------------------------------------------------------------------ writing tool calls


#: How the tools are stated when toolworld writes them into the system message: ``json`` (each tool's full JSON
#: schema, the Hermes convention) or ``compact`` (one signature line per tool, a few times shorter; for small
#: models, whose cost on a CPU grows with the prompt, and which read a signature no worse than a schema).
TOOL_PROMPTS: tuple[str, ...] = ("json", "compact")

_CALL_FORMAT = (
    "To call a function, write a JSON object with its name and arguments inside <tool_call></tool_call> "
    "tags (one block per call; several blocks for several calls):\n"
    '<tool_call>\n{"name": <function-name>, "arguments": <arguments-as-a-JSON-object>}\n</tool_call>\n'
    "The results come back in the next message. Without a call, answer the user directly."
)


def tool_system_prompt(tools: Sequence[Mapping[str, Any]], style: str = "json") -> str:
    """The system-message text that states the tools for a template that renders none (Hermes call format).

    Public so that rollouts and training data use the same words: models trained on toolworld data see tools
    described exactly like this, and are expected to answer with ``tool_call_text``'s format. ``style`` is one
    of :data:`TOOL_PROMPTS`; ``compact`` states each tool as :func:`tool_signature` does.
    """
    if style == "compact":
        lines = "\n".join(f"- {tool_signature(t)}" for t in tools)
        return f"# Tools\n\nYou can call these functions (? marks an optional argument):\n{lines}\n\n{_CALL_FORMAT}"
    if style != "json":
        raise ValueError(f"tool prompt style must be one of {', '.join(TOOL_PROMPTS)}, got {style!r}")
    lines = "\n".join(json.dumps(dict(t), ensure_ascii=False) for t in tools)
    return (
        "# Tools\n\n"
        "You can call the functions described in JSON Schema inside <tools></tools>:\n"
        f"<tools>\n{lines}\n</tools>\n\n{_CALL_FORMAT}"
    )


def _type_text(schema: Any) -> str:
    """A short type for a JSON schema: ``string``, ``"a" | "b"`` for an enum, ``list[string]``, ``int | null``."""
    if not isinstance(schema, Mapping):
        return "any"
    if "enum" in schema:
        return " | ".join(json.dumps(v, ensure_ascii=False) for v in schema["enum"])
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list):
            kinds = [_type_text(s) for s in schema[key] if not (isinstance(s, Mapping) and s.get("type") == "null")]
            return " | ".join(dict.fromkeys(kinds)) or "null"
    kind = schema.get("type")
    if isinstance(kind, list):
        return " | ".join(str(k) for k in kind if k != "null") or "null"
    if kind == "array":
        return f"list[{_type_text(schema.get('items'))}]"
    if kind == "object" and isinstance(schema.get("properties"), Mapping):
        inner = ", ".join(f"{k}: {_type_text(v)}" for k, v in schema["properties"].items())
        return "{" + inner + "}"
    return {"integer": "int", "number": "float", "boolean": "bool"}.get(str(kind), str(kind or "any"))


def tool_signature(tool: Mapping[str, Any]) -> str:
    """One line for a tool: ``name(arg: type, opt?: type) - the first paragraph of its description``.

    Argument descriptions are left out: they make up most of a schema's tokens, a model trained on the world's
    data learns the values' shapes from the calls it sees, and the full schema still validates every call, so
    nothing the signature leaves out can slip through (a wrong value gets the tool's own error).
    """
    fn = tool.get("function") if isinstance(tool.get("function"), Mapping) else tool
    params = fn.get("parameters") if isinstance(fn.get("parameters"), Mapping) else {}
    props = params.get("properties") if isinstance(params.get("properties"), Mapping) else {}
    required = set(params.get("required") or [])
    args = ", ".join(f"{arg}{'' if arg in required else '?'}: {_type_text(schema)}" for arg, schema in props.items())
    description = str(fn.get("description") or "").strip().split("\n\n")[0].replace("\n", " ")
    return f"{fn.get('name', '')}({args})" + (f" - {description}" if description else "")


def call_parts(call: Any) -> tuple[str, Any, str | None]:
    """(name, arguments, id) of an OpenAI-format tool call dict or a ``ToolCall``."""
    if isinstance(call, Mapping):
        fn = call.get("function") if isinstance(call.get("function"), Mapping) else call
        return str(fn.get("name", "")), fn.get("arguments", {}), call.get("id")
    return str(getattr(call, "name", "")), getattr(call, "arguments", {}), getattr(call, "id", None)


def _args_json(args: Any) -> str:
    """Arguments as JSON text: dicts are serialised, a JSON string is normalised, a malformed one kept verbatim."""
    if isinstance(args, str):
        try:
            return json.dumps(json.loads(args), ensure_ascii=False)
        except (ValueError, RecursionError):  # malformed or absurdly nested model JSON
            return args
    return json.dumps(args, ensure_ascii=False)


def tool_call_text(calls: Iterable[Any]) -> str:
    """Tool calls written inline, as a model prompted with ``tool_system_prompt`` should write them."""
    return "\n".join(
        f'<tool_call>\n{{"name": {json.dumps(name, ensure_ascii=False)}, "arguments": {_args_json(args)}}}\n</tool_call>'
        for name, args, _ in map(call_parts, calls)
    )


# ------------------------------------------------------------------------------------ reading tool calls

Format = Literal["auto", "hermes", "qwen3_coder", "llama3", "mistral", "deepseek", "harmony", "json"]
FORMATS: tuple[str, ...] = ("auto", "hermes", "qwen3_coder", "llama3", "mistral", "deepseek", "harmony", "json")

# Lenient JSON scanning tries at most this many candidate objects: a pathological text full of "name" keys
# costs a bounded number of decodes instead of quadratic time.
MAX_JSON_CANDIDATES = 16
_NAME_GUESS = re.compile(r'"(?:name|function)"\s*:\s*"([^"\\\n]{1,200})"')
_DECODER = json.JSONDecoder()

TOOL_CALL_OPEN, TOOL_CALL_CLOSE = "<tool_call>", "</tool_call>"
_DS_CALLS_BEGIN, _DS_CALLS_END = "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"
_DS_CALL_BEGIN, _DS_CALL_END, _DS_SEP = "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>", "<｜tool▁sep｜>"
_MISTRAL_CALLS, _MISTRAL_ARGS, _MISTRAL_CALL_ID = "[TOOL_CALLS]", "[ARGS]", "[CALL_ID]"
_PYTHON_TAG = "<|python_tag|>"
_H_START, _H_CHANNEL, _H_MESSAGE = "<|start|>", "<|channel|>", "<|message|>"
_H_ENDS = ("<|end|>", "<|call|>", "<|return|>")

#: How each dialect names a call in a diagnosis, and how a call should have been written (the diagnosis ends
#: with it, so the model is told the fix, not only the fault).
_MARKERS = {
    "hermes": "<tool_call>", "qwen3_coder": "<function=...>", "llama3": "<|python_tag|>", "mistral": "[TOOL_CALLS]",
    "deepseek": "<｜tool▁call▁begin｜>", "harmony": "to=functions.NAME", "json": "tool call",
}  # fmt: skip
_SHAPES = {
    "hermes": 'Write each call as <tool_call>{"name": "TOOL", "arguments": {...}}</tool_call>.',
    "qwen3_coder": "Write each call as <tool_call><function=TOOL><parameter=KEY>value</parameter></function></tool_call>.",
    "llama3": 'Write each call as <|python_tag|>{"name": "TOOL", "parameters": {...}}.',
    "mistral": 'Write calls as [TOOL_CALLS][{"name": "TOOL", "arguments": {...}}].',
    "deepseek": "Write each call as <｜tool▁call▁begin｜>TOOL<｜tool▁sep｜>{...}<｜tool▁call▁end｜>.",
    "harmony": "Write each call as to=functions.TOOL<|channel|>commentary json<|message|>{...}<|call|>.",
    "json": 'Write each call as one JSON object {"name": "TOOL", "arguments": {...}}.',
}
#: Longest diagnosis kept (a snippet of the text is quoted, never the whole 1 MB attempt).
MAX_PROBLEM_CHARS = 600


@dataclass(slots=True)
class ParseResult:
    """What a sampled turn says: visible ``content``, the ``calls`` to route, and any split-off reasoning.

    ``format`` names the dialect that matched (``None`` when there was no call); ``problems`` lists what was
    wrong with the calls, including notes that did not stop a call from being routed (a missing closing tag
    after complete JSON). A call that could not be read at all is still in ``calls``, with raw-string
    arguments and its diagnosis in ``ToolCall.problem``.
    """

    content: str
    calls: list[ToolCall] = field(default_factory=list)
    reasoning: str | None = None
    format: str | None = None
    problems: list[str] = field(default_factory=list)


def parse_tool_calls(text: str, fmt: Format | str = "auto", *, tools: Iterable[dict[str, Any]] | None = None) -> ParseResult:
    """Split ``text`` into content and tool calls; never raises on model output.

    ``tools`` (OpenAI function format) is optional: it lets formats whose argument values are untyped text
    (Qwen3-Coder's XML) convert them to the declared JSON types. Call ids are ``call_0``, ``call_1``, ... in
    order of appearance, except where the model wrote its own id (Mistral), which is kept so the id the
    model sees in the tool result is the one it chose.
    """
    if fmt not in FORMATS:
        raise ValueError(f"unknown tool-call format {fmt!r}; choose one of {', '.join(FORMATS)}")
    reasoning, body = _split_reasoning(text)
    schemas = _param_types(tools)
    if fmt == "auto":
        fmt = _detect(body)
    parser = _PARSERS[fmt]
    result = parser(body, schemas)
    result.reasoning = reasoning if result.reasoning is None else result.reasoning
    for n, call in enumerate(result.calls):
        if not call.id:
            call.id = f"call_{n}"
        _check_call(call, fmt, result.problems)
    if result.calls:
        result.format = fmt
    # Text-level backends can hand over lone surrogates (a JSON "\ud800" escape); they cannot be stored as
    # UTF-8, so they are written out as escapes here rather than failing the trajectory's write later.
    result.content = _valid_text(result.content)
    if result.reasoning is not None:
        result.reasoning = _valid_text(result.reasoning)
    return result


def malformed_result(call: ToolCall) -> ToolResult:
    """The error a call with a parse ``problem`` gets instead of running: the agent's ``malformed_call``."""
    return ToolResult(call, error=ToolError("malformed_call", call.problem or "the tool call could not be read"))


def _check_call(call: ToolCall, fmt: str, problems: list[str]) -> None:
    """Last checks on every parsed call: a name, arguments a tool could read, text that can be stored."""
    marker = _MARKERS.get(fmt, "tool call")
    if _surrogate_free(call.name) is not call.name:
        call.name = _valid_text(call.name)
        _flag(call, problems, f"the tool name in your {marker} call contains an invalid \\u escape")
    if call.problem is None and not call.name.strip():
        _flag(call, problems, f"your {marker} call has no tool name")
    if isinstance(call.arguments, dict):
        reason = unreadable_arguments(call.arguments)
        if reason is not None:
            _flag(call, problems, f"in your {marker} call to {_snippet(call.name)}, {reason}")
            call.arguments = _storable(call.arguments)
    elif isinstance(call.arguments, str):
        call.arguments = _valid_text(call.arguments)
    if call.problem is not None:
        problem = call.problem if len(call.problem) <= MAX_PROBLEM_CHARS else call.problem[:MAX_PROBLEM_CHARS] + "..."
        call.problem = _valid_text(f"{problem[0].upper()}{problem[1:]}. {_SHAPES.get(fmt, _SHAPES['json'])}")


def _flag(call: ToolCall, problems: list[str], problem: str) -> ToolCall:
    """Mark ``call`` as unreadable: it is not run, and the model gets ``problem`` back (the first one wins)."""
    if call.problem is None:
        call.problem = problem
    problems.append(problem)
    return call


def _surrogate_free(text: str) -> str | None:
    """``text`` itself when it is valid Unicode (the common, allocation-free case), else None."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return None
    return text


def _valid_text(text: str) -> str:
    ok = _surrogate_free(text)
    return ok if ok is not None else text.encode("utf-8", "backslashreplace").decode("utf-8")


def _storable(arguments: Any) -> str:
    """Arguments that cannot be kept as they are (not an object, lone surrogates, huge integers) as JSON text."""
    try:
        return json.dumps(arguments)  # ensure_ascii: a lone surrogate becomes the "\ud800" escape the model wrote
    except (ValueError, RecursionError):
        return "<arguments not kept: they cannot be written as JSON>"


def _snippet(text: str, limit: int = 40) -> str:
    return repr(text) if len(text) <= limit else repr(text[:limit]) + "..."


def _json_problem(what: str, text: str, exc: json.JSONDecodeError) -> str:
    """A decode error in the model's terms: cut off (and where), or invalid at a char with the text around it."""
    end = len(text.rstrip())
    if exc.msg == _TOO_DEEP:
        return f"{what} is nested too deeply to read"
    if exc.msg == _TOO_LONG:
        return f"{what} holds a number with more than 4,300 digits"
    if exc.pos >= end or exc.msg.startswith("Unterminated string"):
        return f"{what} is cut off at char {end}: it ends before its brackets and quotes are closed"
    near = text[max(0, exc.pos - 20):exc.pos + 20]
    return f"{what} is not valid JSON: {exc.msg} at char {exc.pos} (near {near!r})"


def _detect(text: str) -> str:
    """The dialect whose markers appear in ``text`` (cheap substring checks), else the lenient JSON scan."""
    if "to=functions." in text or (_H_CHANNEL in text and _H_MESSAGE in text):
        return "harmony"
    if _MISTRAL_CALLS in text:
        return "mistral"
    if _DS_CALL_BEGIN in text or _DS_CALLS_BEGIN in text:
        return "deepseek"
    if TOOL_CALL_OPEN in text:
        after = text[text.find(TOOL_CALL_OPEN) + len(TOOL_CALL_OPEN):].lstrip()
        return "qwen3_coder" if after.startswith("<function=") else "hermes"
    if "<function=" in text:
        return "qwen3_coder"
    if _PYTHON_TAG in text:
        return "llama3"
    return "json"


# --------------------------------------------------------------------------------------------- helpers
_TOO_DEEP, _TOO_LONG = "nesting too deep", "number too long"


def _loads(text: str) -> Any:
    """``json.loads`` that reports absurd nesting (``[[[[...``) and integers over Python's 4,300-digit limit as
    decode errors, not as a RecursionError or ValueError escaping the parser."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        raise
    except RecursionError:
        raise json.JSONDecodeError(_TOO_DEEP, text, 0) from None
    except ValueError:
        raise json.JSONDecodeError(_TOO_LONG, text, 0) from None


def _raw_decode(text: str, pos: int = 0) -> tuple[Any, int]:
    try:
        return _DECODER.raw_decode(text, pos)
    except json.JSONDecodeError:
        raise
    except RecursionError:
        raise json.JSONDecodeError(_TOO_DEEP, text, pos) from None
    except ValueError:
        raise json.JSONDecodeError(_TOO_LONG, text, pos) from None


def _split_reasoning(text: str) -> tuple[str | None, str]:
    """Split a ``<think>...</think>`` block (or an unopened one ending in ``</think>``) off the front."""
    end = text.find("</think>")
    if end < 0:
        stripped = text.lstrip()
        if stripped.startswith("<think>"):  # cut by the length limit while still thinking
            return stripped[len("<think>"):].strip(), ""
        return None, text
    head = text[:end]
    start = head.find("<think>")
    reasoning = head[start + len("<think>"):] if start >= 0 else head
    return reasoning.strip(), text[:start if start >= 0 else 0] + text[end + len("</think>"):]


def _param_types(tools: Iterable[dict[str, Any]] | None) -> dict[str, dict[str, Any]]:
    """Tool name -> {parameter: JSON-schema type} from OpenAI-format tools (types only; the world validates)."""
    out: dict[str, dict[str, Any]] = {}
    for tool in tools or ():
        fn = tool.get("function", tool) if isinstance(tool, dict) else {}
        props = (fn.get("parameters") or {}).get("properties") or {}
        if isinstance(fn.get("name"), str) and isinstance(props, dict):
            out[fn["name"]] = {k: (v or {}).get("type") if isinstance(v, dict) else None for k, v in props.items()}
    return out


def _call_from_obj(obj: Any, problems: list[str], marker: str = "tool call") -> ToolCall | None:
    """A ``ToolCall`` from a decoded ``{"name", "arguments"|"parameters"}`` object, or None if it is not one."""
    if not isinstance(obj, dict):
        return None
    fn = obj.get("function") if isinstance(obj.get("function"), dict) else obj
    name = fn.get("name")
    if not isinstance(name, str):
        return None
    args: Any = fn.get("arguments", fn.get("parameters", {}))
    problem = None
    if isinstance(args, str):  # double-encoded arguments: decode once more, keep the raw text if that fails
        try:
            decoded = _loads(args) if args.strip() else {}
        except json.JSONDecodeError as exc:
            problem = _json_problem(f"the \"arguments\" string of your {marker} call to {_snippet(name)}", args, exc)
            decoded = args
        args = decoded
    if not isinstance(args, (dict, str)):
        problem = f"the arguments of your {marker} call to {_snippet(name)} are a JSON {_json_type(args)}, not an object"
        args = _storable(args)
    call_id = obj.get("id") if isinstance(obj.get("id"), str) and obj.get("id") else None
    call = ToolCall(name=name, arguments=args, id=call_id)
    return _flag(call, problems, problem) if problem is not None else call


def _json_type(value: Any) -> str:
    return {list: "array", bool: "boolean", int: "number", float: "number", type(None): "null"}.get(type(value), "value")


def _raw_call(body: str, problems: list[str], reason: str) -> ToolCall:
    """The best-effort call for a body that did not decode: a guessed name and the raw arguments text.

    ``reason`` is the diagnosis the model gets back (the call is flagged, never run)."""
    m = _NAME_GUESS.search(body, 0, 20_000)
    name = m.group(1) if m else ""
    raw = body.strip()
    for key in ('"arguments"', '"parameters"'):
        at = body.find(key)
        if at >= 0:
            colon = body.find(":", at + len(key))
            if colon >= 0:
                raw = body[colon + 1:].strip()
                if raw.endswith("}") and body.strip().startswith("{"):
                    raw = raw[:-1].rstrip()  # the closing brace of the outer {"name", "arguments"} object
            break
    return _flag(ToolCall(name=name, arguments=raw), problems, reason)


def _decode_call(body: str, problems: list[str], marker: str) -> ToolCall:
    stripped = body.strip()
    if not stripped:
        return _flag(ToolCall(name="", arguments=""), problems, f"your {marker} call is empty")
    try:
        obj = _loads(stripped)
    except json.JSONDecodeError as exc:
        return _raw_call(body, problems, _json_problem(f"your {marker} JSON", stripped, exc))
    call = _call_from_obj(obj, problems, marker)
    if call is None:
        what = "is not a JSON object" if not isinstance(obj, dict) else 'has no string "name"'
        return _raw_call(body, problems, f"your {marker} JSON {what}")
    return call


def _join(parts: list[str]) -> str:
    return "\n".join(p.strip() for p in parts if p.strip()).strip()


# --------------------------------------------------------------------------------------------- formats


def _parse_hermes(text: str, _: dict[str, dict[str, Any]]) -> ParseResult:
    calls: list[ToolCall] = []
    problems: list[str] = []
    content: list[str] = []
    pos = 0
    while True:
        start = text.find(TOOL_CALL_OPEN, pos)
        if start < 0:
            content.append(text[pos:])
            break
        content.append(text[pos:start])
        body_start = start + len(TOOL_CALL_OPEN)
        end = text.find(TOOL_CALL_CLOSE, body_start)
        body = text[body_start:] if end < 0 else text[body_start:end]
        if end < 0:  # a note only: complete JSON before the cut still runs
            problems.append("tool call is not closed with </tool_call> (cut by the length limit?)")
        calls.append(_decode_call(body, problems, TOOL_CALL_OPEN))
        if end < 0:
            break
        pos = end + len(TOOL_CALL_CLOSE)
    return ParseResult(_join(content), calls, problems=problems)


def _coerce(value: str, kind: Any) -> Any:
    """Qwen3-Coder writes every parameter as text: convert it to the declared type when that is unambiguous."""
    if kind == "string":
        return value
    if kind in ("integer", "number", "boolean", "object", "array", "null") or (kind is None and value[:1] in "{["):
        try:
            decoded = _loads(value)
        except json.JSONDecodeError:
            return value
        if kind == "integer" and isinstance(decoded, float) and decoded.is_integer():
            return int(decoded)
        return decoded
    return value


def _parse_qwen3_coder(text: str, schemas: dict[str, dict[str, Any]]) -> ParseResult:
    calls: list[ToolCall] = []
    problems: list[str] = []
    content: list[str] = []
    pos = 0
    while True:
        fstart = text.find("<function=", pos)
        if fstart < 0:
            content.append(text[pos:])
            break
        # Content ends at the <tool_call> wrapper when there is one right before the <function=...> tag.
        wrapper = text.rfind(TOOL_CALL_OPEN, pos, fstart)
        wrapped = wrapper >= 0 and not text[wrapper + len(TOOL_CALL_OPEN):fstart].strip()
        content.append(text[pos:wrapper if wrapped else fstart])
        name_end = text.find(">", fstart)
        fend = text.find("</function>", fstart)
        if name_end < 0 or (fend >= 0 and name_end > fend):
            guess = text[fstart + len("<function="):fstart + 210].split("\n")[0].strip()
            calls.append(_flag(ToolCall(name=guess, arguments=text[fstart:]), problems,
                               f"your <function={guess[:40]}...> tag is not closed with '>'"))
            break
        name = text[fstart + len("<function="):name_end].strip()
        bad: list[str] = []
        if "<" in name or "\n" in name:  # the '>' found belongs to a later tag: this one was never closed
            name = name.split("\n")[0].split("<")[0].strip()
            bad.append(f"your <function={name[:40]} tag is not closed with '>' before the next line or tag")
        block_end = fend if fend >= 0 else len(text)
        if fend < 0:
            problems.append(f"</function> missing for {name[:200]!r} (cut by the length limit?)")
        call = ToolCall(name=name, arguments=_xml_parameters(text, name_end, block_end, schemas.get(name, {}), name, bad))
        calls.append(_flag(call, problems, bad[0]) if bad else call)
        if fend < 0:
            break
        pos = fend + len("</function>")
        close = text.find(TOOL_CALL_CLOSE, pos)
        if close >= 0 and not text[pos:close].strip():
            pos = close + len(TOOL_CALL_CLOSE)
    return ParseResult(_join(content), calls, problems=problems)


def _xml_parameters(text: str, start: int, end: int, types: dict[str, Any], name: str,
                    problems: list[str]) -> dict[str, Any]:
    """``<parameter=KEY>\nvalue\n</parameter>`` pairs between ``start`` and ``end`` (a missing close tag ends
    the value at the next parameter or the end of the function block)."""
    args: dict[str, Any] = {}
    p = text.find("<parameter=", start, end)
    vend = text.find("</parameter>", start, end)  # the next close tag, searched again only once passed (linear)
    while p >= 0:
        key_end = text.find(">", p, end)
        if key_end < 0:
            problems.append(f"a <parameter=...> tag of your <function={name[:40]}> call is not closed with '>'")
            break
        key = text[p + len("<parameter="):key_end].strip()
        if 0 <= vend < key_end:
            vend = text.find("</parameter>", key_end, end)
        nxt = text.find("<parameter=", key_end, end)
        stop = vend if vend >= 0 and (nxt < 0 or vend < nxt) else (nxt if nxt >= 0 else end)
        value = text[key_end + 1:stop]
        value = value[1:] if value.startswith("\n") else value  # the template writes "\n" + value + "\n"
        value = value[:-1] if value.endswith("\n") else value
        args[key] = _coerce(value, types.get(key))
        p = nxt
    return args


def _json_objects(text: str, start: int) -> Iterable[tuple[int, int, Any]]:
    """Consecutive JSON values from ``start``, skipping whitespace, commas and semicolons between them."""
    pos = start
    n = len(text)
    while pos < n:
        while pos < n and text[pos] in " \t\r\n,;":
            pos += 1
        if pos >= n or text[pos] not in "{[":
            return
        try:
            obj, end = _raw_decode(text, pos)
        except json.JSONDecodeError:
            return
        yield pos, end, obj
        pos = end


def _parse_llama3(text: str, schemas: dict[str, dict[str, Any]]) -> ParseResult:
    tag = text.find(_PYTHON_TAG)
    head = text[:tag] if tag >= 0 else ""
    start = tag + len(_PYTHON_TAG) if tag >= 0 else 0
    problems: list[str] = []
    calls: list[ToolCall] = []
    end = start
    for _, obj_end, obj in _json_objects(text, start):
        end = obj_end
        for item in obj if isinstance(obj, list) else [obj]:
            call = _call_from_obj(item, problems, _PYTHON_TAG)
            if call is not None:
                calls.append(call)
    rest = text[end:]
    if not calls:
        if tag < 0:
            return _parse_json(text, schemas)
        body = text[start:]
        if body.strip():
            calls.append(_decode_call(body, problems, _PYTHON_TAG))
            rest = ""
    return ParseResult(_join([head, rest]), calls, problems=problems)


def _parse_mistral(text: str, _: dict[str, dict[str, Any]]) -> ParseResult:
    problems: list[str] = []
    calls: list[ToolCall] = []
    first = text.find(_MISTRAL_CALLS)
    content = [text[:first]]
    pos = first
    while pos >= 0:
        seg_start = pos + len(_MISTRAL_CALLS)
        nxt = text.find(_MISTRAL_CALLS, seg_start)
        seg = text[seg_start:nxt if nxt >= 0 else len(text)]
        stripped = seg.lstrip()
        if stripped.startswith("[") or stripped.startswith("{"):
            decoded = next(iter(_json_objects(seg, 0)), None)
            if decoded is None:
                try:
                    _loads(stripped)
                    reason = f"your {_MISTRAL_CALLS} JSON is not valid JSON"
                except json.JSONDecodeError as exc:
                    reason = _json_problem(f"your {_MISTRAL_CALLS} JSON", stripped, exc)
                calls.append(_raw_call(seg, problems, reason))
            else:
                _, end, obj = decoded
                for item in obj if isinstance(obj, list) else [obj]:
                    call = _call_from_obj(item, problems, _MISTRAL_CALLS)
                    if call is None:
                        call = _raw_call(_storable(item), problems, f'an item of your {_MISTRAL_CALLS} list has no "name"')
                    calls.append(call)
                content.append(seg[end:])
        else:  # tekken v7+: NAME[ARGS]{...} (optionally NAME[CALL_ID]id[ARGS]{...})
            args_at = seg.find(_MISTRAL_ARGS)
            head = seg if args_at < 0 else seg[:args_at]
            call_id = None
            if _MISTRAL_CALL_ID in head:
                head, _, call_id = head.partition(_MISTRAL_CALL_ID)
            name = head.strip()
            if args_at < 0:
                calls.append(_flag(ToolCall(name=name, arguments="", id=call_id.strip() if call_id else None), problems,
                                   f"your {_MISTRAL_CALLS}{name[:40]} call has no {_MISTRAL_ARGS}"))
            else:
                raw = seg[args_at + len(_MISTRAL_ARGS):]
                problem = None
                try:
                    obj, end = _raw_decode(raw.lstrip())
                    if isinstance(obj, dict):
                        args: Any = obj
                    else:
                        problem = f"the {_MISTRAL_ARGS} of your {_MISTRAL_CALLS}{name[:40]} call are not a JSON object"
                        args = raw.strip()
                    content.append(raw.lstrip()[end:])
                except json.JSONDecodeError as exc:
                    problem = _json_problem(f"the {_MISTRAL_ARGS} JSON of your {_MISTRAL_CALLS}{name[:40]} call",
                                            raw.strip(), exc)
                    args = raw.strip()
                call = ToolCall(name=name, arguments=args, id=call_id.strip() if call_id else None)
                calls.append(_flag(call, problems, problem) if problem else call)
        pos = nxt
    return ParseResult(_join(content), calls, problems=problems)


def _parse_deepseek(text: str, _: dict[str, dict[str, Any]]) -> ParseResult:
    problems: list[str] = []
    calls: list[ToolCall] = []
    first_call = text.find(_DS_CALL_BEGIN)
    if first_call < 0:
        return ParseResult(text.replace(_DS_CALLS_BEGIN, "").replace(_DS_CALLS_END, "").strip())
    begin = text.find(_DS_CALLS_BEGIN)
    content = [text[:begin if 0 <= begin < first_call else first_call]]
    pos = first_call
    while pos >= 0:
        body_start = pos + len(_DS_CALL_BEGIN)
        end = text.find(_DS_CALL_END, body_start)
        body = text[body_start:end if end >= 0 else len(text)]
        name, sep, args_text = body.partition(_DS_SEP)
        name = name.strip()
        if not sep:
            calls.append(_flag(ToolCall(name=name[:200], arguments=body), problems,
                               f"your {_DS_CALL_BEGIN} call has no {_DS_SEP} between the tool name and its JSON"))
        else:
            if name == "function":  # DeepSeek-V3 style: function<sep>NAME\n```json\n{...}\n```
                name, _, args_text = args_text.partition("\n")
                name = name.strip()
                args_text = args_text.strip().removeprefix("```json").removeprefix("```").removesuffix("```")
            problem = None
            try:
                obj = _loads(args_text) if args_text.strip() else {}
                args: Any = obj if isinstance(obj, dict) else args_text.strip()
                if not isinstance(obj, dict):
                    problem = f"the arguments of your {_DS_CALL_BEGIN}{name[:40]} call are not a JSON object"
            except json.JSONDecodeError as exc:
                problem = _json_problem(f"the JSON of your {_DS_CALL_BEGIN}{name[:40]} call", args_text.strip(), exc)
                args = args_text.strip()
            call = ToolCall(name=name, arguments=args)
            calls.append(_flag(call, problems, problem) if problem else call)
        if end < 0:  # a note only: complete JSON before the cut still runs
            problems.append("DeepSeek tool call is not closed (cut by the length limit?)")
            break
        pos = text.find(_DS_CALL_BEGIN, end)
        if pos < 0:
            content.append(text[end + len(_DS_CALL_END):].replace(_DS_CALLS_END, "", 1))
    return ParseResult(_join(content), calls, problems=problems)


def _parse_harmony(text: str, schemas: dict[str, dict[str, Any]]) -> ParseResult:
    """gpt-oss: split into messages at ``<|start|>``; ``analysis`` is reasoning, ``to=functions.X`` a call."""
    problems: list[str] = []
    calls: list[ToolCall] = []
    final: list[str] = []
    other: list[str] = []
    analysis: list[str] = []
    for chunk in text.split(_H_START):
        if not chunk.strip():
            continue
        head, sep, body = chunk.partition(_H_MESSAGE)
        if not sep:
            other.append(chunk)
            continue
        for end_tok in _H_ENDS:
            cut = body.find(end_tok)
            if cut >= 0:
                body = body[:cut]
        to = head.find("to=")
        words = head[to + 3:].split("<|", 1)[0].split() if to >= 0 else []
        recipient = words[0] if words else ""
        channel = head.partition(_H_CHANNEL)[2].split("<|", 1)[0].split()
        channel_name = channel[0] if channel else ""
        if recipient.startswith("functions."):
            name = recipient[len("functions."):]
            problem = None
            try:
                obj = _loads(body) if body.strip() else {}
                args: Any = obj if isinstance(obj, dict) else body
                if not isinstance(obj, dict):
                    problem = f"the message of your to=functions.{name[:40]} call is not a JSON object"
            except json.JSONDecodeError as exc:
                problem = _json_problem(f"the JSON message of your to=functions.{name[:40]} call", body.strip(), exc)
                args = body.strip()
            call = ToolCall(name=name, arguments=args)
            calls.append(_flag(call, problems, problem) if problem else call)
        elif channel_name == "analysis":
            analysis.append(body)
        elif channel_name == "final":
            final.append(body)
        else:
            other.append(body)
    reasoning = _join(analysis) or None
    return ParseResult(_join(final) if final else _join(other), calls, reasoning=reasoning, problems=problems)


def _parse_json(text: str, _: dict[str, dict[str, Any]]) -> ParseResult:
    """Lenient: fenced JSON blocks first, then bare objects that start like ``{"name": ...``."""
    problems: list[str] = []
    calls: list[ToolCall] = []
    spans: list[tuple[int, int]] = []
    tries = 0
    pos = 0
    while tries < MAX_JSON_CANDIDATES:  # ```json ... ``` fences
        fence = text.find("```", pos)
        if fence < 0:
            break
        body_start = text.find("\n", fence)
        close = text.find("```", fence + 3)
        if body_start < 0 or close < 0 or close < body_start:
            break
        tries += 1
        body = text[body_start + 1:close]
        found = _calls_in_json(body, problems)
        if found is not None:
            calls.extend(found)
            spans.append((fence, close + 3))
        pos = close + 3
    if not calls:
        pos = 0
        while tries < MAX_JSON_CANDIDATES:
            key = text.find('"name"', pos)
            if key < 0:
                break
            brace = text.rfind("{", max(0, key - 64), key)
            if brace < 0 or "}" in text[brace + 1:key]:
                pos = key + 6
                continue
            tries += 1
            try:
                obj, end = _raw_decode(text, brace)
            except json.JSONDecodeError as exc:
                if _NAME_GUESS.match(text, key) and ('"arguments"' in text[key:key + 400] or '"parameters"' in text[key:key + 400]):
                    reason = _json_problem("your tool call JSON", text[brace:], _shift(exc, brace))
                    calls.append(_raw_call(text[brace:], problems, reason))
                    spans.append((brace, len(text)))
                    break
                pos = key + 6
                continue
            found = _calls_in_json_obj(obj, problems)
            if found:
                calls.extend(found)
                spans.append((brace, end))
            pos = end
    content_parts: list[str] = []
    last = 0
    for a, b in spans:
        content_parts.append(text[last:a])
        last = b
    content_parts.append(text[last:])
    return ParseResult(_join(content_parts) if calls else text.strip(), calls, problems=problems)


def _shift(exc: json.JSONDecodeError, offset: int) -> json.JSONDecodeError:
    """A decode error of ``doc[offset:]`` re-expressed relative to that slice (positions the model can count)."""
    return json.JSONDecodeError(exc.msg, exc.doc[offset:], max(0, exc.pos - offset))


def _calls_in_json_obj(obj: Any, problems: list[str]) -> list[ToolCall]:
    items = obj if isinstance(obj, list) else [obj]
    out: list[ToolCall] = []
    for item in items:
        if isinstance(item, dict) and ("arguments" in item or "parameters" in item or "function" in item):
            call = _call_from_obj(item, problems)
            if call is not None:
                out.append(call)
    return out


def _calls_in_json(body: str, problems: list[str]) -> list[ToolCall] | None:
    try:
        obj = _loads(body)
    except json.JSONDecodeError as exc:
        if _NAME_GUESS.search(body, 0, 2000) and ('"arguments"' in body[:4000] or '"parameters"' in body[:4000]):
            return [_raw_call(body, problems, _json_problem("your fenced ```json tool call", body, exc))]
        return None
    found = _calls_in_json_obj(obj, problems)
    return found or None


_PARSERS = {
    "hermes": _parse_hermes,
    "qwen3_coder": _parse_qwen3_coder,
    "llama3": _parse_llama3,
    "mistral": _parse_mistral,
    "deepseek": _parse_deepseek,
    "harmony": _parse_harmony,
    "json": _parse_json,
}
