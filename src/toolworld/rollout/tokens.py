"""Token-in-token-out (TITO): the ``TokenBuffer`` and the chat-template bridge.

Re-tokenizing decoded text between turns silently changes the token sequence (``Hel`` + ``lo`` becomes
``Hello``, JSON is re-serialised, templates drop earlier reasoning, a multi-byte character split across two
tokens decodes to a replacement character), so gradients would land on sequences the model never sampled.
The rule here: sampled tokens are kept exactly as sampled, and only new non-assistant messages are tokenized.

How a turn is appended (``TitoConversation.prompt_ids``):

1. The first call renders the initial messages with the model's own template
   (``apply_chat_template(..., tools=..., add_generation_prompt=True)``) and tokenizes that once.
2. The model samples; ``record_sampled`` appends those ids with mask 1 and their logprobs.
3. Later calls compute a **token delta** for the new messages against a fixed dummy prefix instead of the
   real history: ``S`` = render(dummy prefix + a mirror of the sampled assistant turn) and ``L`` = render(the
   same + the new messages + generation prompt). ``S`` is cut right after the end-of-turn token that closes
   the mirrored turn; the cut ``S`` must be a *token* prefix of ``L`` (ids compared, not only strings), and
   the ids of ``L`` after it are appended. The mirror copies what later messages can depend on (tool-call
   names and ids, whether the turn had reasoning), never the sampled text, so the cost of a turn does not
   grow with the conversation.
4. The stop-token splice falls out of the cut: engines stop at the end-of-turn token (Qwen ``<|im_end|>``),
   templates write more (``<|im_end|>\\n``); whatever follows the end-of-turn token in ``L`` (the ``\\n``) is
   in the delta. A turn cut by the length limit has no end-of-turn token, so the one the template uses is
   prepended. Which token closes a turn is read off renders (``ChatTemplate.stop_ids``), not hard-coded.

When the cut ``S`` is not a token prefix of ``L`` the template re-renders history when messages are appended
(Qwen3 drops earlier reasoning, gpt-oss turns ``<|return|>`` into ``<|end|>``, Mistral moves the tool list
and system prompt to the last user message). Then the bridge **falls back**, loudly: it logs a warning,
increments ``buffer.breaks``, records an event, renders the *real* conversation with a sentinel in place of
the last assistant turn's content, and appends the text that follows that turn's end-of-turn token,
tokenized on its own. The buffer is never rewritten: tokens already in it stay (sampled ones exactly as
sampled), so what the model saw is what is trained on; what differs is only that the buffer is no longer a
prefix of a fresh full render. ``docs/templates.md`` lists which templates need this and when.

Templates that render no tool definitions (SmolLM2 ignores ``tools`` and ``tool_calls``; DeepSeek-V3.1 has
no tool-definition block) get the tools stated in the system message by ``tool_system_prompt`` and
assistant tool calls written inline by ``tool_call_text`` (Hermes ``<tool_call>{...}</tool_call>``), the
one format toolworld uses for such models in rollouts and in training data alike.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from bisect import bisect_right
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

logger = logging.getLogger("toolworld.tito")

Message = dict[str, Any]

# Marks the mirrored assistant turn (and the first new message) in renders; plain ASCII so every tokenizer
# and template passes it through unchanged.
SENTINEL = "tw_sentinel_a7"
SENTINEL_NEXT = "tw_sentinel_b7"
DUMMY_SYSTEM = "You are helpful."
DUMMY_USER = "Hello."
PROBE_TOOL = "tw_probe_tool"
_MIRROR_REASONING = "<think>\nR\n</think>\n\n"


class TemplateError(Exception):
    """A tokenizer or chat template that cannot be used; ``kind`` says which problem (for structured errors)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


# ------------------------------------------------------------------------------------------ token buffer


@dataclass
class TokenBuffer:
    """The token sequence of one conversation exactly as the model saw and produced it.

    ``mask`` is 1 only on sampled tokens (the loss mask), ``logprobs`` holds the sampling logprob on those and
    None elsewhere, ``message_index`` maps each token to the message of the conversation it belongs to
    (template glue such as a generation prompt belongs to the message that follows it). ``breaks`` counts the
    bridge fallbacks and ``events`` records each fallback and divergence with its reason.
    """

    ids: list[int] = field(default_factory=list)
    mask: list[int] = field(default_factory=list)
    logprobs: list[float | None] = field(default_factory=list)
    message_index: list[int] = field(default_factory=list)
    breaks: int = 0
    events: list[dict[str, Any]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.ids)

    def append_prompt(self, ids: Sequence[int], message_index: int | Sequence[int]) -> None:
        """Append template/prompt tokens (mask 0); ``message_index`` is one index or one per token."""
        n = len(ids)
        indices = [message_index] * n if isinstance(message_index, int) else list(message_index)
        if len(indices) != n:
            raise ValueError(f"append_prompt got {n} ids but {len(indices)} message indices")
        self.ids.extend(int(i) for i in ids)
        self.mask.extend([0] * n)
        self.logprobs.extend([None] * n)
        self.message_index.extend(indices)

    def append_sampled(self, ids: Sequence[int], logprobs: Sequence[float], message_index: int) -> None:
        """Append sampled tokens (mask 1) with the logprob each was sampled with."""
        if len(ids) != len(logprobs):
            raise ValueError(f"append_sampled got {len(ids)} ids but {len(logprobs)} logprobs; they must align")
        self.ids.extend(int(i) for i in ids)
        self.mask.extend([1] * len(ids))
        self.logprobs.extend(float(lp) for lp in logprobs)
        self.message_index.extend([message_index] * len(ids))

    def sampled_ids(self) -> list[int]:
        """The sampled ids in order (what the engine returned, turn after turn)."""
        return [i for i, m in zip(self.ids, self.mask, strict=True) if m]

    def sampled_logprobs(self) -> list[float]:
        return [lp for lp, m in zip(self.logprobs, self.mask, strict=True) if m]  # type: ignore[misc]

    def truncate(self, length: int) -> None:
        """Drop tokens after ``length``; only prompt tokens may go (sampled tokens are never removed)."""
        if any(self.mask[length:]):
            raise ValueError("truncate would remove sampled tokens; the buffer only ever drops prompt tokens")
        del self.ids[length:], self.mask[length:], self.logprobs[length:], self.message_index[length:]

    def record(self, kind: str, reason: str, *, counts_as_break: bool, **detail: Any) -> None:
        """Record a bridge event; fallbacks also count in ``breaks``."""
        if counts_as_break:
            self.breaks += 1
        self.events.append({"kind": kind, "reason": reason, "at_token": len(self.ids), **detail})

    def to_dict(self) -> dict[str, Any]:
        """Compact JSON-ready form: ids, sampled spans, logprobs of sampled tokens, run-length message indices."""
        spans: list[list[int]] = []
        for pos, m in enumerate(self.mask):
            if m:
                if spans and spans[-1][1] == pos:
                    spans[-1][1] = pos + 1
                else:
                    spans.append([pos, pos + 1])
        runs: list[list[int]] = []
        for idx in self.message_index:
            if runs and runs[-1][0] == idx:
                runs[-1][1] += 1
            else:
                runs.append([idx, 1])
        return {
            "format": "toolworld.token_buffer/1",
            "ids": list(self.ids),
            "sampled_spans": spans,
            "sampled_logprobs": self.sampled_logprobs(),
            "message_index_runs": runs,
            "breaks": self.breaks,
            "events": [dict(e) for e in self.events],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TokenBuffer:
        """Inverse of ``to_dict`` (validates that the parts agree in length)."""
        ids = [int(i) for i in data["ids"]]
        n = len(ids)
        mask = [0] * n
        for start, end in data.get("sampled_spans", []):
            if not 0 <= start < end <= n:
                raise ValueError(f"sampled span {start}:{end} is outside a buffer of {n} tokens")
            mask[start:end] = [1] * (end - start)
        sampled_lp = [float(x) for x in data.get("sampled_logprobs", [])]
        if len(sampled_lp) != sum(mask):
            raise ValueError(f"{len(sampled_lp)} sampled logprobs for {sum(mask)} sampled tokens")
        it = iter(sampled_lp)
        logprobs: list[float | None] = [next(it) if m else None for m in mask]
        message_index: list[int] = []
        for idx, count in data.get("message_index_runs", []):
            message_index.extend([int(idx)] * int(count))
        if len(message_index) != n:
            raise ValueError(f"message_index_runs cover {len(message_index)} tokens, the buffer has {n}")
        return cls(ids, mask, logprobs, message_index, int(data.get("breaks", 0)), list(data.get("events", [])))


# ------------------------------------------------------------------------------------ tool prompt format


def tool_system_prompt(tools: Sequence[Mapping[str, Any]]) -> str:
    """The system-message text that states the tools for a template that renders none (Hermes call format).

    Public so that rollouts and training data use the same words: models trained on toolworld data see tools
    described exactly like this, and are expected to answer with ``tool_call_text``'s format.
    """
    lines = "\n".join(json.dumps(dict(t), ensure_ascii=False) for t in tools)
    return (
        "# Tools\n\n"
        "You can call the functions described in JSON Schema inside <tools></tools>:\n"
        f"<tools>\n{lines}\n</tools>\n\n"
        "To call a function, write a JSON object with its name and arguments inside <tool_call></tool_call> "
        "tags (one block per call; several blocks for several calls):\n"
        '<tool_call>\n{"name": <function-name>, "arguments": <arguments-as-a-JSON-object>}\n</tool_call>\n'
        "The results come back in the next message. Without a call, answer the user directly."
    )


def _call_parts(call: Any) -> tuple[str, Any, str | None]:
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
        for name, args, _ in map(_call_parts, calls)
    )


# ------------------------------------------------------------------------------------------ chat template


def load_tokenizer(source: Any) -> Any:
    """A tokenizer object as is, or one loaded offline from a tokenizer folder (structured ``TemplateError``)."""
    if not isinstance(source, (str, os.PathLike)):
        return source
    path = Path(source)
    if not path.exists():
        raise TemplateError("not_found", f"{path} does not exist; pass a tokenizer folder (with tokenizer.json).")
    if not path.is_dir():
        raise TemplateError("not_a_tokenizer", f"{path} is a file; pass the folder that holds tokenizer.json.")
    if not any((path / name).exists() for name in ("tokenizer.json", "tokenizer_config.json", "tokenizer.model")):
        raise TemplateError(
            "not_a_tokenizer",
            f"{path} has no tokenizer.json, tokenizer_config.json or tokenizer.model; pass a tokenizer folder.",
        )
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    except Exception as exc:  # transformers raises many types for a broken folder
        raise TemplateError("not_a_tokenizer", f"{path} could not be loaded as a tokenizer: {exc}") from exc


def _lcp(a: str, b: str) -> int:
    """Length of the common prefix of two strings (binary search over C-level slice compares)."""
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
    """

    def __init__(
        self,
        tokenizer: Any,
        tools: Sequence[Mapping[str, Any]] | None = None,
        *,
        template_kwargs: Mapping[str, Any] | None = None,
    ) -> None:
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
        self.render_tools = self.tools if self.renders_tools else None
        self.arguments_as, self.call_id_style = self._probe_call_shape()
        # Without a tool-definition block the tools are stated in the system message in the Hermes format, so
        # earlier calls are written in that same format even where the template has a native call syntax
        # (DeepSeek-V3.1): the model sees one convention throughout.
        self.prompt_tools = bool(self.tools) and not self.renders_tools
        self.native_calls = self.arguments_as is not None
        self.calls_as_text = not self.native_calls or not self.renders_tools
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
                        name, args, cid = _call_parts(call)
                        shaped.append({"id": self.template_call_id(cid, n), "type": "function",
                                       "function": {"name": name, "arguments": self._template_args(args)}})
                    m["tool_calls"] = shaped
                pending_ids = [self.template_call_id(_call_parts(c)[2], n) for n, c in enumerate(calls)]
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
            prompt = tool_system_prompt(self.tools or [])
            if out and out[0].get("role") == "system":
                out[0] = {**out[0], "content": f"{out[0]['content']}\n\n{prompt}" if out[0]["content"] else prompt}
            else:
                out.insert(0, {"role": "system", "content": prompt})
                inserted = 1
        return out, inserted

    def _mirror_message(self, ids: Sequence[str | None], names: Sequence[str], *, reasoning: bool,
                        content: str = SENTINEL) -> Message:  # fmt: skip
        """A stand-in for a sampled assistant turn: what later messages may depend on, none of the text."""
        msg: Message = {"role": "assistant", "content": (_MIRROR_REASONING if reasoning else "") + content}
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
        after = at + len(SENTINEL) if at >= 0 else _lcp(short, ctx_text)
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
                out.append(_lcp(part, full))
            except TemplateError:  # e.g. a template that cannot end on this role: reuse the previous boundary
                out.append(out[-1] if out else 0)
        return out


def _attribute(starts: Sequence[int], bounds: Sequence[int], first_index: int, next_index: int) -> list[int]:
    """Message index per token: tokens before ``bounds[0]`` belong to message ``first_index``, and so on; tokens
    after the last bound (the generation prompt) belong to the message still to come, ``next_index``."""
    if not bounds:
        return [next_index] * len(starts)
    last = len(bounds)
    out = []
    for s in starts:
        k = bisect_right(bounds, s)
        out.append(next_index if k >= last else first_index + k)
    return out


# ------------------------------------------------------------------------------------ the bridge itself


@dataclass(slots=True)
class _Pending:
    buffer_len: int
    consumed: int


class TitoConversation:
    """One conversation's token buffer, grown turn by turn without re-encoding sampled tokens.

    ``prompt_ids(messages)`` takes the whole conversation each turn (the loop's OpenAI-style messages),
    appends the messages it has not seen plus the generation prompt, and returns the ids to feed the engine.
    ``record_sampled(ids, logprobs, message_index)`` appends what the engine sampled. Calling ``prompt_ids``
    again before a sample (a retry after an infrastructure error) returns the same ids; if messages were added
    meanwhile, the unsampled prompt tokens are taken back and recomputed.

    ``check_full_render=True`` also compares the buffer with a full render after every append and records a
    ``divergence`` event where they differ (costs a full render per turn: for audits and tests).
    """

    def __init__(
        self,
        tokenizer: Any,
        tools: Sequence[Mapping[str, Any]] | None = None,
        *,
        template_kwargs: Mapping[str, Any] | None = None,
        check_full_render: bool = False,
    ) -> None:
        self.template = tokenizer if isinstance(tokenizer, ChatTemplate) else ChatTemplate(
            tokenizer, tools, template_kwargs=template_kwargs)  # fmt: skip
        self.buffer = TokenBuffer()
        self.check_full_render = check_full_render
        self._consumed = 0
        self._pending: _Pending | None = None
        self._last_sample: list[int] | None = None
        self._last_text = ""
        self._system: str | None = None
        self.appends = 0

    @property
    def stop_ids(self) -> list[int]:
        """Token ids the engine should stop at (eos and the template's end-of-turn tokens)."""
        return list(self.template.stop_ids)

    @property
    def tokenizer(self) -> Any:
        return self.template.tokenizer

    def prompt_ids(self, messages: Sequence[Mapping[str, Any]]) -> list[int]:
        """Append the messages not yet in the buffer and the generation prompt; return all ids for the engine."""
        msgs = list(messages)
        if self._pending is not None:
            if len(msgs) == self._consumed:
                return list(self.buffer.ids)
            self.buffer.truncate(self._pending.buffer_len)
            self._consumed = self._pending.consumed
            self._pending = None
        if len(msgs) < self._consumed:
            raise ValueError(f"the conversation has {len(msgs)} messages but {self._consumed} are already in the "
                             "token buffer; messages can only be appended")  # fmt: skip
        if not msgs:
            raise ValueError("prompt_ids needs at least one message")
        pending = _Pending(len(self.buffer), self._consumed)
        if self._consumed == 0:
            self._first(msgs)
        else:
            self._append(msgs)
        self._consumed = len(msgs)
        self._pending = pending
        self.appends += 1
        if self.check_full_render:
            self._check_full(msgs)
        return list(self.buffer.ids)

    def record_sampled(self, ids: Sequence[int], logprobs: Sequence[float], message_index: int) -> str:
        """Append sampled ids (mask 1) as assistant message ``message_index``; return their decoded text.

        The text leaves out a final end-of-turn token (it is markup, not content) and is for parsing only: the
        ids are what the buffer keeps.
        """
        if self._pending is None:
            raise ValueError("record_sampled needs a prompt first: call prompt_ids(messages) before sampling")
        if message_index != self._consumed:
            raise ValueError(f"the sampled turn must be message {self._consumed} (the one the prompt asks for), "
                             f"got {message_index}")  # fmt: skip
        self.buffer.append_sampled(ids, logprobs, message_index)
        self._pending = None
        self._last_sample = [int(i) for i in ids]
        self._consumed = message_index + 1
        body = self._last_sample[:-1] if self._last_sample and self._last_sample[-1] in self.template.stop_set else self._last_sample
        self._last_text = self.template.decode(body)
        return self._last_text

    # --- internals

    def _first(self, msgs: list[Message]) -> None:
        t = self.template
        if msgs[0].get("role") == "system":
            self._system = str(msgs[0].get("content") or "")
        prepared, inserted = t.prepare(msgs)
        text = t.render(prepared, add_generation_prompt=True, prepared=True)
        ids, starts = t.encode_offsets(text)
        bounds = t.boundaries([], prepared, text, t.render_tools)
        # Indices are computed over the prepared messages; an inserted tool-prompt system message is glue of
        # the first real message.
        indices = [max(0, i - inserted) for i in _attribute(starts, bounds, 0, len(prepared))]
        self.buffer.append_prompt(ids, indices)

    def _had_reasoning(self, last: Mapping[str, Any]) -> bool:
        """Whether the sampled turn carried non-empty reasoning (templates treat empty and non-empty apart)."""
        end = self._last_text.find("</think>")
        if end >= 0 and self._last_text[:end].replace("<think>", "").strip():
            return True
        return any(str(last.get(k) or "").strip() for k in ("reasoning_content", "reasoning", "thinking"))

    def _append(self, msgs: list[Message]) -> None:
        t = self.template
        a = self._consumed - 1
        last = msgs[a]
        if last.get("role") != "assistant":
            raise ValueError(f"message {a} should be the sampled assistant turn but has role {last.get('role')!r}; "
                             "append the assistant message returned by the policy before new messages")  # fmt: skip
        prepared_tail = t.prepare(msgs[a:])[0]
        if t.prompt_tools and prepared_tail and prepared_tail[0].get("role") == "system":
            prepared_tail = prepared_tail[1:]
        real_a, new = prepared_tail[0], prepared_tail[1:]
        calls = real_a.get("tool_calls") or []
        mirror = t._mirror_message([c["id"] for c in calls], [c["function"]["name"] for c in calls],
                                   reasoning=self._had_reasoning(last))  # fmt: skip
        mirror = t.prepare([mirror])[0][-1] if calls else mirror
        mode = t.delta_mode(self._system)
        d = t.delta(mode, self._system, mirror, new)
        if not d.ok:
            self._fallback(msgs, d.reason)
            return
        ctx, tools, _ = t.context(mode, self._system)
        bounds = t.boundaries([*ctx, mirror], new, d.long, tools)
        indices = _attribute(d.tail_starts, bounds, self._consumed, len(msgs))
        ids = d.tail_ids
        lead = self._splice(d.closing_id)
        self.buffer.append_prompt(lead + ids, [self._consumed] * len(lead) + indices)

    def _splice(self, closing_id: int | None) -> list[int]:
        """Tokens to add before the delta so the sampled turn ends the way the template closes a turn."""
        sampled = self._last_sample or []
        ended = bool(sampled) and sampled[-1] in self.template.stop_set
        if closing_id is None:
            return []
        if not ended:  # cut by the length limit: close the turn with the template's own end-of-turn token
            return [closing_id]
        if sampled[-1] != closing_id:
            self.buffer.record("stop_token", "the turn ended with a different end-of-turn token than the template "
                               "writes; kept as sampled", counts_as_break=False, sampled=sampled[-1],
                               template=closing_id, message_index=self._consumed - 1)  # fmt: skip
        return []

    def _fallback(self, msgs: list[Message], reason: str) -> None:
        """Full re-render of the real conversation; append what follows the last assistant turn, on its own."""
        t = self.template
        a = self._consumed - 1
        self.buffer.record("break", reason, counts_as_break=True, message_index=a)
        logger.warning("token bridge fallback at message %d: %s (buffer kept, new messages re-rendered)", a, reason)
        prepared, inserted = t.prepare(msgs)
        pa = a + inserted
        real_a = prepared[pa]
        mirror = dict(real_a, content=(_MIRROR_REASONING if self._had_reasoning(msgs[a]) else "") + SENTINEL)
        head, new = prepared[:pa], prepared[pa + 1:]
        full = t.render([*head, mirror, *new], add_generation_prompt=True, prepared=True)
        locate = full
        if new:
            locate = t.render([*head, mirror, dict(new[0], content=SENTINEL_NEXT), *new[1:]],
                              add_generation_prompt=True, prepared=True)  # fmt: skip
        at = locate.find(SENTINEL)
        stop_text = ""
        if at < 0:
            before = t.render([*head, real_a], prepared=True)
            start = _lcp(before, full)
            self.buffer.record("fallback_detail", "the assistant turn is not visible in the re-render; appended "
                               "everything after the common prefix", counts_as_break=False, message_index=a)  # fmt: skip
        else:
            after = at + len(SENTINEL)
            end = locate.find(SENTINEL_NEXT, after) if new else len(locate)
            region = locate[after:end if end >= 0 else len(locate)]
            best = -1
            for tid in t.turn_end_ids:
                txt = t.token_text(tid)
                pos = region.rfind(txt) if txt else -1
                if pos >= 0 and pos + len(txt) > best:
                    best, stop_text = pos + len(txt), txt
            start = after + max(best, 0)
        sampled = self._last_sample or []
        if stop_text and not (sampled and sampled[-1] in t.stop_set):
            start -= len(stop_text)  # the turn was cut by the length limit: close it as the template does
        text = full[start:]
        ids, starts = t.encode_offsets(text)
        bounds = [max(0, b - start) for b in t.boundaries([*head, mirror], new, full, t.render_tools)]
        self.buffer.append_prompt(ids, _attribute(starts, bounds, self._consumed, len(msgs)))

    def _check_full(self, msgs: list[Message]) -> None:
        full = self.template.render_ids(msgs, add_generation_prompt=True)
        if full != self.buffer.ids:
            n = min(len(full), len(self.buffer.ids))
            first = next((k for k in range(n) if full[k] != self.buffer.ids[k]), n)
            self.buffer.record("divergence", "the buffer differs from a full render of the conversation",
                               counts_as_break=False, first_token=first, message_index=len(msgs) - 1)  # fmt: skip
