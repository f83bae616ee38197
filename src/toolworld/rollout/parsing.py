"""Tool-call parsing: turn sampled text into routed ``ToolCall``s without ever touching the sampled tokens.

Models write tool calls in many dialects. ``parse_tool_calls`` recognises the common ones and always answers:
a call whose JSON does not parse still comes back as a ``ToolCall`` (``arguments`` is the raw string, the name
is the best guess or ``""``), so ``Episode.call`` turns it into an ``invalid_arguments`` observation the model
learns from, instead of the attempt vanishing. Parsing only decides what to route to the world; the token
buffer keeps the tokens exactly as sampled whatever happens here.

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
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from ..world.episode import ToolCall

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


@dataclass(slots=True)
class ParseResult:
    """What a sampled turn says: visible ``content``, the ``calls`` to route, and any split-off reasoning.

    ``format`` names the dialect that matched (``None`` when there was no call); ``problems`` describes each
    call that could not be decoded cleanly (the call is still in ``calls`` with raw-string arguments).
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
    if result.calls:
        result.format = fmt
    return result


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
def _loads(text: str) -> Any:
    """``json.loads`` that reports absurd nesting (``[[[[...``) as a decode error instead of a RecursionError."""
    try:
        return json.loads(text)
    except RecursionError:
        raise json.JSONDecodeError("nesting too deep", text, 0) from None


def _raw_decode(text: str, pos: int = 0) -> tuple[Any, int]:
    try:
        return _DECODER.raw_decode(text, pos)
    except RecursionError:
        raise json.JSONDecodeError("nesting too deep", text, pos) from None



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


def _call_from_obj(obj: Any, problems: list[str]) -> ToolCall | None:
    """A ``ToolCall`` from a decoded ``{"name", "arguments"|"parameters"}`` object, or None if it is not one."""
    if not isinstance(obj, dict):
        return None
    fn = obj.get("function") if isinstance(obj.get("function"), dict) else obj
    name = fn.get("name")
    if not isinstance(name, str):
        return None
    args: Any = fn.get("arguments", fn.get("parameters", {}))
    if isinstance(args, str):  # double-encoded arguments: decode once more, keep the raw text if that fails
        try:
            decoded = _loads(args) if args.strip() else {}
        except json.JSONDecodeError:
            problems.append(f"arguments of {name!r} are a string that is not JSON")
            decoded = args
        args = decoded
    if not isinstance(args, (dict, str)):
        problems.append(f"arguments of {name!r} are a JSON {type(args).__name__}, not an object")
        args = json.dumps(args, ensure_ascii=False)
    call_id = obj.get("id") if isinstance(obj.get("id"), str) and obj.get("id") else None
    return ToolCall(name=name, arguments=args, id=call_id)


def _raw_call(body: str, problems: list[str], reason: str) -> ToolCall:
    """The best-effort call for a body that did not decode: a guessed name and the raw arguments text."""
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
    problems.append(f"{reason} (call {name or '?'})")
    return ToolCall(name=name, arguments=raw)


def _decode_call(body: str, problems: list[str]) -> ToolCall:
    stripped = body.strip()
    try:
        obj = _loads(stripped)
    except json.JSONDecodeError as exc:
        return _raw_call(body, problems, f"tool call is not valid JSON ({exc.msg} at char {exc.pos})")
    call = _call_from_obj(obj, problems)
    if call is None:
        return _raw_call(body, problems, "tool call JSON has no string 'name'")
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
        if end < 0:
            problems.append("tool call is not closed with </tool_call> (cut by the length limit?)")
        calls.append(_decode_call(body, problems))
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
            problems.append("<function=...> tag is not closed")
            guess = text[fstart + len("<function="):fstart + 210].split("\n")[0].strip()
            calls.append(ToolCall(name=guess, arguments=text[fstart:]))
            break
        name = text[fstart + len("<function="):name_end].strip()
        block_end = fend if fend >= 0 else len(text)
        if fend < 0:
            problems.append(f"</function> missing for {name!r} (cut by the length limit?)")
        calls.append(ToolCall(name=name, arguments=_xml_parameters(text, name_end, block_end, schemas.get(name, {}),
                                                                    name, problems)))
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
            problems.append(f"<parameter=...> tag of {name!r} is not closed")
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
            call = _call_from_obj(item, problems)
            if call is not None:
                calls.append(call)
    rest = text[end:]
    if not calls:
        if tag < 0:
            return _parse_json(text, schemas)
        body = text[start:]
        if body.strip():
            calls.append(_decode_call(body, problems))
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
                calls.append(_raw_call(seg, problems, "[TOOL_CALLS] payload is not valid JSON"))
            else:
                _, end, obj = decoded
                for item in obj if isinstance(obj, list) else [obj]:
                    call = _call_from_obj(item, problems)
                    if call is None:
                        call = _raw_call(json.dumps(item, ensure_ascii=False), problems, "[TOOL_CALLS] item has no name")
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
                problems.append(f"[TOOL_CALLS]{name} has no [ARGS]")
                calls.append(ToolCall(name=name, arguments="", id=call_id.strip() if call_id else None))
            else:
                raw = seg[args_at + len(_MISTRAL_ARGS):]
                try:
                    obj, end = _raw_decode(raw.lstrip())
                    if isinstance(obj, dict):
                        args: Any = obj
                    else:
                        problems.append(f"arguments of {name!r} are not a JSON object")
                        args = raw.strip()
                    content.append(raw.lstrip()[end:])
                except json.JSONDecodeError as exc:
                    problems.append(f"arguments of {name!r} are not valid JSON ({exc.msg})")
                    args = raw.strip()
                calls.append(ToolCall(name=name, arguments=args, id=call_id.strip() if call_id else None))
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
            problems.append("DeepSeek tool call has no <｜tool▁sep｜>")
            calls.append(ToolCall(name=name, arguments=""))
        else:
            if name == "function":  # DeepSeek-V3 style: function<sep>NAME\n```json\n{...}\n```
                name, _, args_text = args_text.partition("\n")
                name = name.strip()
                args_text = args_text.strip().removeprefix("```json").removeprefix("```").removesuffix("```")
            try:
                obj = _loads(args_text) if args_text.strip() else {}
                args: Any = obj if isinstance(obj, dict) else args_text.strip()
                if not isinstance(obj, dict):
                    problems.append(f"arguments of {name!r} are not a JSON object")
            except json.JSONDecodeError as exc:
                problems.append(f"arguments of {name!r} are not valid JSON ({exc.msg})")
                args = args_text.strip()
            calls.append(ToolCall(name=name, arguments=args))
        if end < 0:
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
            try:
                obj = _loads(body) if body.strip() else {}
                args: Any = obj if isinstance(obj, dict) else body
                if not isinstance(obj, dict):
                    problems.append(f"arguments of {name!r} are not a JSON object")
            except json.JSONDecodeError as exc:
                problems.append(f"arguments of {name!r} are not valid JSON ({exc.msg})")
                args = body.strip()
            calls.append(ToolCall(name=name, arguments=args))
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
            except json.JSONDecodeError:
                if _NAME_GUESS.match(text, key) and ('"arguments"' in text[key:key + 400] or '"parameters"' in text[key:key + 400]):
                    calls.append(_raw_call(text[brace:], problems, "tool call JSON does not parse"))
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
    except json.JSONDecodeError:
        if _NAME_GUESS.search(body, 0, 2000) and ('"arguments"' in body[:4000] or '"parameters"' in body[:4000]):
            return [_raw_call(body, problems, "fenced tool call JSON does not parse")]
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
