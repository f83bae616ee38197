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

import logging
from bisect import bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..records.messages import Message
from .buffer import TokenBuffer
from .template import MIRROR_REASONING, SENTINEL, SENTINEL_NEXT, ChatTemplate, lcp

logger = logging.getLogger("toolworld.tito")


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
        mirror = dict(real_a, content=(MIRROR_REASONING if self._had_reasoning(msgs[a]) else "") + SENTINEL)
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
            start = lcp(before, full)
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
