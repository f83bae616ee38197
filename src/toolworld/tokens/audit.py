"""``toolworld audit-template``: how well a model's chat template supports token-exact multi-turn rollouts.

For a tokenizer folder it reports whether the template renders tool definitions, whether appending tool
results or user messages leaves the earlier render untouched (prefix stability, compared as token ids),
whether the bridge's buffer reproduces a full render of a conversation, and the bridge's break rate on a
synthetic 20-turn tool conversation with unicode, emoji and JSON arguments.

The "model" in the audit is a perfect one: for each assistant turn it samples exactly the tokens the template
itself renders for that turn (``reference_assistant_ids``). Any difference between the buffer and a full
render is then the template's doing, not the model's. Every check runs twice, once with assistant turns that
carry reasoning and once without, because several templates (Qwen3, gpt-oss) treat the two apart.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .bridge import TitoConversation
from .template import ChatTemplate

Message = dict[str, Any]

AUDIT_TOOLS: list[dict[str, Any]] = [
    {"type": "function", "function": {
        "name": "find_order", "description": "Look up an order by its id or the customer's email.",
        "parameters": {"type": "object", "properties": {
            "order_id": {"type": "string", "description": "Order id such as #W1234567."},
            "email": {"type": "string"}}, "required": []}}},
    {"type": "function", "function": {
        "name": "update_address", "description": "Change the shipping address of a pending order.",
        "parameters": {"type": "object", "properties": {
            "order_id": {"type": "string"},
            "address": {"type": "object", "properties": {
                "line1": {"type": "string"}, "city": {"type": "string"}, "zip": {"type": "string"}}},
            "notify": {"type": "boolean"}}, "required": ["order_id", "address"]}}},
    {"type": "function", "function": {
        "name": "calculate", "description": "Evaluate an arithmetic expression.",
        "parameters": {"type": "object", "properties": {"expression": {"type": "string"}},
                       "required": ["expression"]}}},
]  # fmt: skip

_USERS = [
    "Hi! I want to change the address of order #W2001 🏠",
    "Ja, bitte auf „Hauptstraße 5, München“ ändern — danke!",
    "東京都渋谷区の住所に送ってください。",
    "What's 17.5% of $249.99? 🤔",
    "Thanks 🙏 that's all.",
]
_RESULTS = [
    {"order_id": "#W2001", "status": "pending", "items": [{"name": "Mug ☕", "price": 12.5}], "note": 'say "hi"'},
    {"ok": True, "address": {"line1": "Hauptstraße 5", "city": "München", "zip": "80331"}, "emoji": "📦🚚"},
    {"order_id": "#W2002", "status": "delivered", "items": [{"name": "茶碗", "price": 30}], "tags": ["gift", "🎁"]},
    {"result": 43.748, "expression": "249.99 * 0.175"},
    {"error": {"type": "not_found", "message": "No order #W9999 — check the id ✗"}},
]


def synthetic_conversation(turns: int = 20, *, reasoning: bool = False) -> list[Message]:
    """A deterministic tool conversation with ``turns`` assistant turns (unicode, emoji, JSON arguments).

    Tool-call turns have empty content (so templates that reject content next to reasoning accept them),
    some turns make two calls, and answers are followed by a new user message.
    """
    msgs: list[Message] = [
        {"role": "system", "content": "You are a careful shop assistant. Follow the policy; never guess ids. ✅"},
        {"role": "user", "content": _USERS[0]},
    ]
    call_n = 0
    for turn in range(turns):
        step = turn % 5
        msg: Message = {"role": "assistant", "content": ""}
        if reasoning:
            msg["reasoning_content"] = f"Turn {turn}: check the data first — 注意 🙂."
        if step == 4 or turn == turns - 1:
            msg["content"] = f"Done ✔ — order #W{2001 + turn} is updated: „Hauptstraße 5“, 東京 🗼."
            msgs.append(msg)
            if turn != turns - 1:
                msgs.append({"role": "user", "content": _USERS[(turn // 5 + 1) % len(_USERS)]})
            continue
        calls = [("find_order", {"order_id": f"#W{2001 + turn}"})]
        if step == 1:
            calls = [("update_address", {"order_id": f"#W{2001 + turn}", "notify": True, "address": {
                "line1": "Hauptstraße 5 \"Hinterhaus\"", "city": "München", "zip": "80331"}})]
        elif step == 2:
            calls = [("find_order", {"email": "mia.lopez@example.com"}), ("calculate", {"expression": "249.99 * 0.175"})]
        msg["tool_calls"] = []
        for name, args in calls:
            msg["tool_calls"].append({"id": f"call_{call_n}", "type": "function",
                                      "function": {"name": name, "arguments": json.dumps(args, ensure_ascii=False)}})
            call_n += 1
        msgs.append(msg)
        for k, call in enumerate(msg["tool_calls"]):
            result = _RESULTS[(turn + k) % len(_RESULTS)]
            msgs.append({"role": "tool", "tool_call_id": call["id"], "content": json.dumps(result, ensure_ascii=False)})
    return msgs


def reference_assistant_ids(template: ChatTemplate, messages: Sequence[Message], index: int) -> list[int] | None:
    """The tokens a perfect model samples for assistant message ``index``: the template's own rendering of the
    turn after the generation prompt, up to and including its end-of-turn token.

    None when the template's render of the turn does not continue its own generation prompt (then no model
    could sample it token-exactly).
    """
    prompt = template.render(messages[:index], add_generation_prompt=True)
    turn = template.render(messages[: index + 1])
    p_ids, t_ids = template.encode(prompt), template.encode(turn)
    if not turn.startswith(prompt) or t_ids[: len(p_ids)] != p_ids:
        return None
    tail = t_ids[len(p_ids):]
    last = max((k for k, i in enumerate(tail) if i in template.stop_set), default=None)
    return tail if last is None else tail[: last + 1]


@dataclass
class VariantResult:
    """One run of the checks on the synthetic conversation (with or without reasoning)."""

    tool_append_stable: int = 0
    tool_append_checked: int = 0
    user_append_stable: int = 0
    user_append_checked: int = 0
    bridge_matches_full_render: bool = True
    first_divergence: dict[str, Any] | None = None
    turns: int = 0
    appends: int = 0
    breaks: int = 0
    break_reasons: list[str] = field(default_factory=list)
    unsampleable_turns: int = 0

    @property
    def break_rate(self) -> float:
        return self.breaks / self.appends if self.appends else 0.0


@dataclass
class TemplateAudit:
    """The audit of one tokenizer folder; ``to_dict`` is the ``--json`` output."""

    path: str
    name: str
    vocab_size: int
    renders_tools: bool
    tool_calls: str
    call_ids: str
    tool_results: str
    stop_tokens: list[str]
    closing_text: str
    delta_mode: str
    plain: VariantResult
    reasoning: VariantResult
    notes: list[str]

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        for key in ("plain", "reasoning"):
            out[key]["break_rate"] = round(getattr(self, key).break_rate, 4)
        out["tool_append_stable"] = _all_stable(self.plain, "tool") and _all_stable(self.reasoning, "tool")
        out["user_append_stable"] = _all_stable(self.plain, "user") and _all_stable(self.reasoning, "user")
        out["bridge_matches_full_render"] = self.plain.bridge_matches_full_render and self.reasoning.bridge_matches_full_render
        return out


def _all_stable(v: VariantResult, kind: str) -> bool:
    return getattr(v, f"{kind}_append_stable") == getattr(v, f"{kind}_append_checked")


def _is_token_prefix(template: ChatTemplate, short: list[Message], long: list[Message]) -> bool:
    a = template.render_ids(short)
    b = template.render_ids(long, add_generation_prompt=True)
    return b[: len(a)] == a


def _snippet(template: ChatTemplate, ids: Sequence[int], at: int) -> str:
    return template.decode(ids[max(0, at - 6): at + 10])


def _run_variant(template: ChatTemplate, msgs: list[Message]) -> VariantResult:
    res = VariantResult()
    # Prefix stability of the template alone: the render of a conversation ending in an assistant turn must be a
    # token prefix of the render after tool results (or a user message) are appended.
    for k, m in enumerate(msgs):
        if m["role"] != "assistant" or k + 1 >= len(msgs):
            continue
        j = k + 1
        while j < len(msgs) and msgs[j]["role"] == "tool":
            j += 1
        kind = "tool" if msgs[k + 1]["role"] == "tool" else "user" if msgs[k + 1]["role"] == "user" else None
        if kind is None:
            continue
        end = j if kind == "tool" else k + 2
        setattr(res, f"{kind}_append_checked", getattr(res, f"{kind}_append_checked") + 1)
        if _is_token_prefix(template, msgs[: k + 1], msgs[:end]):
            setattr(res, f"{kind}_append_stable", getattr(res, f"{kind}_append_stable") + 1)
    # The bridge driven by a perfect model.
    conv = TitoConversation(template)
    for i, m in enumerate(msgs):
        if m["role"] != "assistant":
            continue
        res.turns += 1
        prompt = conv.prompt_ids(msgs[:i])
        full = template.render_ids(msgs[:i], add_generation_prompt=True)
        if res.first_divergence is None and prompt != full:
            at = next((n for n, (x, y) in enumerate(zip(prompt, full, strict=False)) if x != y), min(len(prompt), len(full)))
            res.bridge_matches_full_render = False
            res.first_divergence = {"before_message": i, "token": at, "buffer": _snippet(template, prompt, at),
                                    "full_render": _snippet(template, full, at)}  # fmt: skip
        sampled = reference_assistant_ids(template, msgs, i)
        if sampled is None:
            res.unsampleable_turns += 1
            sampled = template.encode(str(m.get("content") or "ok")) + template.stop_ids[:1]
        conv.record_sampled(sampled, [0.0] * len(sampled), i)
    res.appends = max(0, conv.appends - 1)
    res.breaks = conv.buffer.breaks
    res.break_reasons = sorted({e["reason"] for e in conv.buffer.events if e["kind"] == "break"})
    return res


def audit_template(source: Any, *, turns: int = 20, name: str | None = None) -> TemplateAudit:
    """Audit a tokenizer (object or folder path); raises ``TemplateError`` when it cannot be loaded."""
    template = ChatTemplate(source, AUDIT_TOOLS)
    tok = template.tokenizer
    plain_msgs = synthetic_conversation(turns)
    plain = _run_variant(template, plain_msgs)
    reasoning = _run_variant(template, synthetic_conversation(turns, reasoning=True))
    if template.calls_as_text:
        calls = "inline (Hermes)"
    else:
        calls = "native (dict args)" if template.arguments_as == "dict" else "native (JSON-string args)"
    notes: list[str] = []
    if template.prompt_tools:
        notes.append("Renders no tool definitions: toolworld states the tools in the system message "
                     "(tool_system_prompt) and writes calls inline in the Hermes format (tool_call_text).")  # fmt: skip
    if template.call_id_style == "nine":
        notes.append("Requires 9-character tool-call ids: other ids are mapped to a 9-character hash when rendering.")
    if template.tool_role == "user":
        notes.append("Has no tool role: tool results are rendered as user messages wrapped in <tool_response>.")
    if template.inserts_date:
        notes.append("Inserts today's date (strftime_now): renders differ from day to day; the bridge renders the "
                     "system block once, so a conversation keeps the date it started with.")  # fmt: skip
    tool_turn = next(k for k, m in enumerate(plain_msgs) if m["role"] == "tool")
    after_tool = plain_msgs[: tool_turn + 1]
    if template.render(after_tool, add_generation_prompt=True) == template.render(after_tool):
        notes.append("Adds no generation prompt after tool results: the model continues right after the result.")
    mode = template.delta_mode(plain_msgs[0]["content"])
    if mode == "faithful":
        notes.append("Deltas depend on the system prompt or the tool list, so the bridge's dummy prefix carries the "
                     "real ones (each delta renders them: slower, still independent of conversation length).")  # fmt: skip
    for label, v in (("without reasoning", plain), ("with reasoning", reasoning)):
        if v.unsampleable_turns:
            notes.append(f"{v.unsampleable_turns} of {v.turns} assistant turns ({label}) do not continue the "
                         "template's own generation prompt, so no model can sample them token-exactly.")  # fmt: skip
        for reason in v.break_reasons:
            notes.append(f"Bridge fallback ({label}): {reason}.")
    return TemplateAudit(
        path=str(source) if isinstance(source, (str, Path)) else type(tok).__name__,
        name=name or (Path(source).name if isinstance(source, (str, Path)) else type(tok).__name__),
        vocab_size=len(tok),
        renders_tools=template.renders_tools,
        tool_calls=calls,
        call_ids="9 characters" if template.call_id_style == "nine" else "any",
        tool_results=f"{template.tool_role} role",
        stop_tokens=[template.token_text(i) for i in template.stop_ids],
        closing_text=template.closing_text,
        delta_mode=mode,
        plain=plain,
        reasoning=reasoning,
        notes=notes,
    )


def summary_row(audit: Mapping[str, Any]) -> dict[str, str]:
    """Table cells for one audit dict: 'plain / with reasoning' where the two variants are reported."""

    def pair(key: str, fmt: Any) -> str:
        a, b = fmt(audit["plain"], key), fmt(audit["reasoning"], key)
        return a if a == b else f"{a} / {b}"

    def stable(v: Mapping[str, Any], kind: str) -> str:
        return f"{v[f'{kind}_append_stable']}/{v[f'{kind}_append_checked']}"

    return {
        "template": audit["name"],
        "renders tools": "yes" if audit["renders_tools"] else "no",
        "tool calls": audit["tool_calls"],
        "tool append stable": pair("tool", stable),
        "user append stable": pair("user", stable),
        "bridge = full render": pair("", lambda v, _: "yes" if v["bridge_matches_full_render"] else "no"),
        "break rate": pair("", lambda v, _: f"{v['breaks']}/{v['appends']}"),
        "stop tokens": " ".join(audit["stop_tokens"]),
    }
