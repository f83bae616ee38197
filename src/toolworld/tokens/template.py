"""Chat-template probing: ``ChatTemplate`` learns what a family's template does from small renders (tools
rendered or not, argument shape, call-id shape, the end-of-turn token). It takes any tokenizer source that
:func:`toolworld.tokens.load_tokenizer` takes (``tokenizers.py``).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..records.messages import Message
from .dialects import call_parts, tool_call_text, tool_system_prompt
from .tokenizers import TemplateError, load_tokenizer

logger = logging.getLogger("toolworld.tito")

#: The ways a ``ChatTemplate`` can state the tools (see its docstring).
TOOL_PROMPT_CHOICES: tuple[str, ...] = ("auto", "json", "compact")

# Marks the mirrored assistant turn (and the first new message) in renders; plain ASCII so every tokenizer
# and template passes it through unchanged.
SENTINEL = "tw_sentinel_a7"
SENTINEL_NEXT = "tw_sentinel_b7"
DUMMY_SYSTEM = "You are helpful."
DUMMY_USER = "Hello."
PROBE_TOOL = "tw_probe_tool"
MIRROR_REASONING = "<think>\nR\n</think>\n\n"


def lcp(a: Sequence[Any], b: Sequence[Any]) -> int:
    """Length of the common prefix of two strings or id lists (binary search over C-level slice compares)."""
    lo, hi = 0, min(len(a), len(b))
    if a[:hi] == b[:hi]:
        return hi
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


@dataclass(slots=True)
class Delta:
    """One computed delta: ``ok`` when the cut render is a token prefix of the extended render."""

    ok: bool
    reason: str = ""
    tail_ids: list[int] = field(default_factory=list)
    tail_starts: list[int] = field(default_factory=list)  # char offset in ``long`` of each tail token
    long: str = ""
    closing_id: int | None = None


class ChatTemplate:
    """A tokenizer's chat template plus the facts the bridge derives from renders of it.

    Everything family-specific is found by rendering small probe conversations: whether tools are rendered,
    whether tool-call arguments must be a dict or a JSON string, whether call ids must have a special shape
    (Mistral wants 9 characters), which tokens end an assistant turn, and whether a cheap dummy prefix gives
    the same deltas as the real system prompt and tool list. One ``ChatTemplate`` is shared by all sessions
    with the same tools, so these probes run once.

    ``tool_prompt`` says how the tools reach the model: ``auto`` (the template's own tool block, or each tool's
    JSON schema in the system message when the template has none), ``json`` (always the system message, JSON
    schemas) or ``compact`` (always the system message, one signature per tool: a few times fewer tokens, for
    small models). Rollouts and training data must use the same choice, since the prompt is part of what is
    learned.
    """

    def __init__(
        self,
        tokenizer: Any,
        tools: Sequence[Mapping[str, Any]] | None = None,
        *,
        template_kwargs: Mapping[str, Any] | None = None,
        tool_prompt: str = "auto",
    ) -> None:
        if tool_prompt not in TOOL_PROMPT_CHOICES:
            raise TemplateError("bad_tool_prompt", f"tool_prompt must be one of {', '.join(TOOL_PROMPT_CHOICES)}, "
                                f"got {tool_prompt!r}")  # fmt: skip
        self.tool_prompt = tool_prompt
        self.tokenizer = load_tokenizer(tokenizer)
        if not getattr(self.tokenizer, "chat_template", None):
            raise TemplateError("no_chat_template", "this tokenizer has no chat_template; toolworld needs one.")
        self.tools: list[dict[str, Any]] | None = [dict(t) for t in tools] if tools else None
        self.template_kwargs = dict(template_kwargs or {})
        self.template_source = str(self.tokenizer.chat_template)
        self.special_ids: set[int] = set(self.tokenizer.all_special_ids) | {
            i for i, t in getattr(self.tokenizer, "added_tokens_decoder", {}).items() if getattr(t, "special", False)
        }
        self._backend = self._pick_backend()
        self._text_of: dict[int, str] = {}
        self._modes: dict[str | None, str] = {}
        self._ctx_cache: dict[tuple[str, str | None], tuple[list[Message], list[dict[str, Any]] | None, str]] = {}
        self._probe()

    # --- rendering and tokenizing

    def _pick_backend(self) -> Any:
        """The Rust tokenizer when it agrees with ``tokenizer.encode`` (faster, gives offsets), else None."""
        backend = getattr(self.tokenizer, "backend_tokenizer", None)
        if backend is None:
            return None
        probe = "<|im_start|>Hé said: {\"a\": [1, 2]} ☕ 東京 \n\n  x</s>[INST]"
        try:
            if backend.encode(probe, add_special_tokens=False).ids == self.tokenizer.encode(probe, add_special_tokens=False):
                return backend
        except Exception:  # a backend that cannot encode: use the Python path
            return None
        return None

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` with no special tokens added (the template wrote any it wants)."""
        return self.encode_offsets(text)[0]

    def encode_offsets(self, text: str) -> tuple[list[int], list[int]]:
        """Token ids and the start character of each token in ``text``."""
        if self._backend is not None:
            enc = self._backend.encode(text, add_special_tokens=False)
            return list(enc.ids), [s for s, _ in enc.offsets]
        out = self.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        return list(out["input_ids"]), [s for s, _ in out["offset_mapping"]]

    def decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=False, clean_up_tokenization_spaces=False)

    def token_text(self, token_id: int) -> str:
        text = self._text_of.get(token_id)
        if text is None:
            text = self._text_of[token_id] = self.decode([token_id])
        return text

    def _render(self, messages: Sequence[Message], *, generation_prompt: bool, tools: Any) -> str:
        try:
            return self.tokenizer.apply_chat_template(
                list(messages), tools=tools, tokenize=False, add_generation_prompt=generation_prompt,
                **self.template_kwargs,
            )  # fmt: skip
        except Exception as exc:  # jinja TemplateError, TypeError from templates that index wrongly, ...
            raise TemplateError("render_failed", f"the chat template failed to render: {exc}") from exc

    def render(self, messages: Sequence[Message], *, add_generation_prompt: bool = False, prepared: bool = False) -> str:
        """The template's text for a conversation (prepared for this template unless ``prepared``)."""
        msgs = messages if prepared else self.prepare(messages)[0]
        return self._render(msgs, generation_prompt=add_generation_prompt, tools=self.render_tools)

    def render_ids(self, messages: Sequence[Message], *, add_generation_prompt: bool = False) -> list[int]:
        """Token ids of a full render: what a re-render-everything implementation would feed the model."""
        return self.encode(self.render(messages, add_generation_prompt=add_generation_prompt))

    # --- probes

    def _probe(self) -> None:
        user = {"role": "user", "content": DUMMY_USER}
        probe_tools = self.tools or [{"type": "function", "function": {
            "name": PROBE_TOOL, "description": "probe", "parameters": {"type": "object", "properties": {
                "probe_arg": {"type": "string"}}, "required": ["probe_arg"]}}}]  # fmt: skip
        with_tools = self._render([user], generation_prompt=True, tools=probe_tools)
        without = self._render([user], generation_prompt=True, tools=None)
        self.renders_tools = with_tools != without
        native = self.renders_tools and self.tool_prompt == "auto"
        self.render_tools = self.tools if native else None
        self.arguments_as, self.call_id_style = self._probe_call_shape()
        # Without a tool-definition block the tools are stated in the system message in the Hermes format, so
        # earlier calls are written in that same format even where the template has a native call syntax
        # (DeepSeek-V3.1): the model sees one convention throughout.
        self.prompt_tools = bool(self.tools) and not native
        self.native_calls = self.arguments_as is not None
        self.calls_as_text = not self.native_calls or not native
        self.accepts_string_arguments = self._accepts_string_arguments()
        self.tool_role = self._probe_tool_role()
        self.inserts_date = "strftime_now" in self.template_source

        # Which tokens close an assistant turn: the last special token after the content of a final assistant
        # turn (plain, and with a tool call), plus the tokenizer's eos.
        stops: list[int] = []
        eos = self.tokenizer.eos_token_id
        for e in eos if isinstance(eos, list) else [eos]:
            if isinstance(e, int) and e not in stops:
                stops.append(e)
        plain = {"role": "assistant", "content": SENTINEL}
        shapes = [[user, plain]]
        if not self.calls_as_text:
            shapes.append([user, self._mirror_message(["probe"], [PROBE_TOOL], reasoning=False)])
        closing_text = ""
        for n, shape in enumerate(shapes):
            text = self._render(self.prepare(shape)[0], generation_prompt=False, tools=None)
            ids, starts = self.encode_offsets(text)
            after = text.find(SENTINEL) + len(SENTINEL)
            last = next((k for k in range(len(ids) - 1, -1, -1) if ids[k] in self.special_ids and starts[k] >= after), None)
            if last is not None:
                if ids[last] not in stops:
                    stops.append(ids[last])
                if n == 0:
                    closing_text = text[starts[last]:]
        self.stop_ids: list[int] = stops
        self.stop_set = frozenset(stops)
        self.closing_text = closing_text
        # Tokens that end an assistant turn when another message follows (gpt-oss writes <|end|> there rather
        # than the <|return|> it stops at): the fallback looks for these to find where a turn ends.
        followed = self._render(self.prepare([user, plain, {"role": "user", "content": SENTINEL_NEXT}])[0],
                                generation_prompt=False, tools=None)  # fmt: skip
        ids, starts = self.encode_offsets(followed)
        after = followed.find(SENTINEL) + len(SENTINEL)
        turn_end = set(stops)
        first = next((k for k in range(len(ids)) if ids[k] in self.special_ids and starts[k] >= after), None)
        if first is not None:
            turn_end.add(ids[first])
        self.turn_end_ids = frozenset(turn_end)

    def _probe_call_shape(self) -> tuple[str | None, str]:
        """How tool calls must look for this template: ('dict'|'str'|None, 'any'|'nine')."""
        user = {"role": "user", "content": DUMMY_USER}
        for args_kind in ("dict", "str"):
            for id_style in ("any", "nine"):
                call_id = "call_0" if id_style == "any" else "c4ll0pr0b"
                args: Any = {"probe_arg": "probe_value"}
                msgs = [user, {"role": "assistant", "content": "", "tool_calls": [{
                    "id": call_id, "type": "function", "function": {
                        "name": PROBE_TOOL, "arguments": args if args_kind == "dict" else json.dumps(args)}}]},
                    {"role": "tool", "tool_call_id": call_id, "content": SENTINEL_NEXT}]  # fmt: skip
                try:
                    text = self._render(msgs, generation_prompt=False, tools=None)
                except TemplateError:
                    continue
                if PROBE_TOOL in text and "probe_value" in text:
                    return args_kind, id_style
        return None, "any"

    def _accepts_string_arguments(self) -> bool:
        if self.calls_as_text or self.arguments_as == "str":
            return not self.calls_as_text
        call_id = "call_0" if self.call_id_style == "any" else "c4ll0pr0b"
        msgs = [{"role": "user", "content": DUMMY_USER}, {"role": "assistant", "content": "", "tool_calls": [{
            "id": call_id, "type": "function", "function": {"name": PROBE_TOOL, "arguments": '{"probe_arg": 1'}}]}]
        try:
            return "probe_arg" in self._render(msgs, generation_prompt=False, tools=None)
        except TemplateError:
            return False

    def _probe_tool_role(self) -> str:
        """'tool' when the template renders tool messages' content; else results travel as user messages."""
        msgs = self.prepare([{"role": "user", "content": DUMMY_USER},
                             self._mirror_message(["call_0"], [PROBE_TOOL], reasoning=False, content=""),
                             {"role": "tool", "tool_call_id": "call_0", "content": SENTINEL_NEXT}],
                            tool_role="tool")[0]  # fmt: skip
        try:
            text = self._render(msgs, generation_prompt=True, tools=None)
        except TemplateError:
            return "user"
        return "tool" if SENTINEL_NEXT in text else "user"

    # --- preparing messages for this template

    def template_call_id(self, call_id: str | None, n: int = 0) -> str:
        """A call id in the shape the template demands (Mistral checks for 9 characters)."""
        cid = call_id or f"call_{n}"
        if self.call_id_style == "nine" and not (len(cid) == 9 and cid.isalnum()):
            cid = hashlib.sha1(cid.encode()).hexdigest()[:9]
        return cid

    def _template_args(self, args: Any) -> Any:
        if self.arguments_as == "str":
            return args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
        if isinstance(args, str):
            try:
                decoded = json.loads(args) if args.strip() else {}
            except (ValueError, RecursionError):  # malformed or absurdly nested model JSON
                decoded = None
            if isinstance(decoded, dict):
                return decoded
            return args if self.accepts_string_arguments else {}  # a malformed call: lossy if dicts are required
        return args

    def prepare(self, messages: Sequence[Mapping[str, Any]], *, tool_role: str | None = None) -> tuple[list[Message], int]:
        """Messages shaped for this template, and how many messages were inserted in front (0 or 1).

        ``content=None`` becomes ``""``; tool calls get the argument type and id shape the template needs, or
        are written inline (``tool_call_text``) when the template renders none; tool results become user
        messages when the template has no tool role; templates without tool definitions get
        ``tool_system_prompt`` in the system message.
        """
        role_for_tool = tool_role or getattr(self, "tool_role", "tool")
        out: list[Message] = []
        pending_ids: list[str] = []
        for raw in messages:
            m = dict(raw)
            if m.get("content") is None:
                m["content"] = ""
            role = m.get("role")
            if role == "assistant" and m.get("tool_calls"):
                calls = list(m["tool_calls"])
                if self.calls_as_text:
                    text = tool_call_text(calls)
                    m["content"] = f"{m['content']}\n{text}" if m["content"] else text
                    del m["tool_calls"]
                else:
                    shaped = []
                    for n, call in enumerate(calls):
                        name, args, cid = call_parts(call)
                        shaped.append({"id": self.template_call_id(cid, n), "type": "function",
                                       "function": {"name": name, "arguments": self._template_args(args)}})
                    m["tool_calls"] = shaped
                pending_ids = [self.template_call_id(call_parts(c)[2], n) for n, c in enumerate(calls)]
            elif role == "tool":
                if role_for_tool == "user":
                    m = {"role": "user", "content": f"<tool_response>\n{m['content']}\n</tool_response>"}
                else:
                    cid = m.get("tool_call_id")
                    m["tool_call_id"] = self.template_call_id(cid) if cid else (
                        pending_ids.pop(0) if pending_ids else self.template_call_id(None))
            out.append(m)
        inserted = 0
        if getattr(self, "prompt_tools", False):
            prompt = tool_system_prompt(self.tools or [], "compact" if self.tool_prompt == "compact" else "json")
            if out and out[0].get("role") == "system":
                out[0] = {**out[0], "content": f"{out[0]['content']}\n\n{prompt}" if out[0]["content"] else prompt}
            else:
                out.insert(0, {"role": "system", "content": prompt})
                inserted = 1
        return out, inserted

    def _mirror_message(self, ids: Sequence[str | None], names: Sequence[str], *, reasoning: bool,
                        content: str = SENTINEL) -> Message:  # fmt: skip
        """A stand-in for a sampled assistant turn: what later messages may depend on, none of the text."""
        msg: Message = {"role": "assistant", "content": (MIRROR_REASONING if reasoning else "") + content}
        if names:
            msg["tool_calls"] = [{"id": cid, "type": "function", "function": {"name": name, "arguments": {}}}
                                 for cid, name in zip(ids, names, strict=True)]  # fmt: skip
        return msg

    # --- deltas

    def context(self, mode: str, system: str | None) -> tuple[list[Message], list[dict[str, Any]] | None, str]:
        """The dummy prefix for ``mode``: messages, tools to render with, and its own render with gen prompt.

        ``cheap``: a one-line system message (when the conversation has one) and user message, no tools.
        ``faithful``: the real system message and tool list, for templates whose deltas depend on them.
        """
        key = (mode, system)
        hit = self._ctx_cache.get(key)
        if hit is not None:
            return hit
        has_system = system is not None or self.prompt_tools
        if mode == "cheap":
            msgs: list[Message] = ([{"role": "system", "content": DUMMY_SYSTEM}] if has_system else [])
            msgs.append({"role": "user", "content": DUMMY_USER})
            tools = None
        else:
            head = [{"role": "system", "content": system}] if system is not None else []
            msgs = self.prepare([*head, {"role": "user", "content": DUMMY_USER}])[0]
            tools = self.render_tools
        entry = (msgs, tools, self._render(msgs, generation_prompt=True, tools=tools))
        self._ctx_cache[key] = entry
        return entry

    def delta(self, mode: str, system: str | None, mirror: Message, new: Sequence[Message]) -> Delta:
        """Render [prefix + mirror] and [prefix + mirror + new + generation prompt]; cut and compare ids."""
        ctx, tools, ctx_text = self.context(mode, system)
        short = self._render([*ctx, mirror], generation_prompt=False, tools=tools)
        long = self._render([*ctx, mirror, *new], generation_prompt=True, tools=tools)
        s_ids, s_starts = self.encode_offsets(short)
        at = short.find(SENTINEL)
        after = at + len(SENTINEL) if at >= 0 else lcp(short, ctx_text)
        cut = len(s_ids)
        closing_id = None
        for k in range(len(s_ids) - 1, -1, -1):
            if s_starts[k] < after:
                break
            if s_ids[k] in self.stop_set:
                cut, closing_id = k + 1, s_ids[k]
                break
        cut_char = s_starts[cut] if cut < len(s_ids) else len(short)
        l_ids, l_starts = self.encode_offsets(long)
        if not long.startswith(short[:cut_char]):
            return Delta(False, "the template renders the previous assistant turn differently once messages follow it")
        if l_ids[:cut] != s_ids[:cut]:
            return Delta(False, "the rendered history is a text prefix but not a token prefix of the extended render")
        return Delta(True, "", l_ids[cut:], l_starts[cut:], long, closing_id)

    def delta_mode(self, system: str | None) -> str:
        """'cheap' when the dummy prefix gives the same deltas as the real system prompt and tools, else 'faithful'.

        Checked once per system text on probe turns (a user message after an answer; one and two tool results
        after tool calls; a tool result then a user message).
        """
        mode = self._modes.get(system)
        if mode is not None:
            return mode
        mode = "cheap"
        call = PROBE_TOOL if not self.tools else str(self.tools[0].get("function", self.tools[0]).get("name", PROBE_TOOL))
        result = {"role": "tool", "tool_call_id": "call_0", "content": '{"ok": true, "note": "東京 ☕"}'}
        result2 = {"role": "tool", "tool_call_id": "call_1", "content": "[1, 2]"}
        later = {"role": "user", "content": "And then? 🙂"}
        probes = [
            (self._mirror_message([], [], reasoning=False), [later]),
            (self._mirror_message(["call_0"], [call], reasoning=False), [result]),
            (self._mirror_message(["call_0", "call_1"], [call, call], reasoning=False), [result, result2]),
            (self._mirror_message(["call_0"], [call], reasoning=False), [result, later]),
        ]
        for mirror, new in probes:
            prepared = self.prepare([mirror, *new])[0]
            if self.prompt_tools and prepared and prepared[0].get("role") == "system":
                prepared = prepared[1:]
            a = self.delta("cheap", system, prepared[0], prepared[1:])
            b = self.delta("faithful", system, prepared[0], prepared[1:])
            if (a.ok, a.tail_ids) != (b.ok, b.tail_ids):
                mode = "faithful"
                break
        self._modes[system] = mode
        return mode

    def boundaries(self, head: Sequence[Message], new: Sequence[Message], full: str, tools: Any) -> list[int]:
        """Character offsets in ``full`` where each new message after the first, and the generation prompt,
        begin: the common prefix of ``full`` with renders that stop after each message."""
        out: list[int] = []
        for k in range(1, len(new) + 1):
            try:
                part = self._render([*head, *new[:k]], generation_prompt=False, tools=tools)
                out.append(lcp(part, full))
            except TemplateError:  # e.g. a template that cannot end on this role: reuse the previous boundary
                out.append(out[-1] if out else 0)
        return out
