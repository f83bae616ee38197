"""Appending one turn with the token bridge versus re-rendering the whole conversation, at 8, 32 and 128 turns.

Run: ``python benchmarks/tito.py [--tokenizer PATH] [--turns 8,32,128] [--repeat N]``. Prints a human summary
on stderr, then one JSON object as the last stdout line. Needs a real tokenizer folder with a chat template
(default: ``qwen2.5-instruct`` from the shared tokenizers next to this checkout).

A multi-turn rollout must produce the prompt ids for the next turn after every tool result or user message.
The naive way re-renders the whole conversation with the chat template and tokenizes all of it, so each turn
costs time proportional to the conversation, and re-tokenizing sampled text changes the ids anyway. The
bridge (``TitoConversation.prompt_ids``) keeps the ids it has and renders only the new messages against a
small dummy prefix, so its cost should stay flat as the conversation grows. Goal: at least 20 times faster
than re-rendering at 128 turns.

The conversations are the audit's synthetic tool conversation (``toolworld.tokens.audit``): tool calls with
JSON arguments, JSON tool results, German, Japanese and emoji text; at N turns it has N assistant turns. Two
appends are measured at each length: a JSON tool result after a tool call, and a user message after an
answer. Before timing, a perfect model (one that samples exactly the tokens the template renders for each
assistant turn) drives the bridge through the whole conversation, so the buffer holds N sampled turns and,
for a prefix-stable template, equals a full render; the benchmark checks that the bridge's ids and the
re-render's ids are the same list, so both sides produce the same prompt.

- **bridge**: ``prompt_ids(messages)`` on a copy of the driven conversation (the copy is made untimed before
  each sample; its lists are allocated exactly, so the append's ``extend`` reallocates them: if anything a
  slight overestimate). Includes the delta renders, the token-prefix check, message attribution and the
  copy of the prompt ids returned to the engine.
- **re-render**: the chat template over the whole conversation (messages already converted to the template's
  shape, outside the timing) plus one call of the Rust tokenizer on the text: the least any re-render must do.

The two are timed alternately in one loop, so machine noise hits both alike; figures are medians. With a
template that is not prefix-stable (``--tokenizer`` on Qwen3, gpt-oss, Mistral) the bridge falls back to a
re-render where the template rewrites history, so there it costs about as much as re-rendering; the result
says which appends fell back.
"""

from __future__ import annotations

import argparse
import copy
import json
import logging
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from toolworld.tokens import ChatTemplate, TitoConversation, TokenBuffer
from toolworld.tokens.audit import AUDIT_TOOLS, reference_assistant_ids, synthetic_conversation

DEFAULT_TOKENIZER = Path(__file__).resolve().parents[2] / "shared" / "tokenizers" / "qwen2.5-instruct"
GOAL_SPEEDUP_AT_128 = 20.0

NEW_USER = {"role": "user", "content": 'One more thing: ship it to 東京 instead 🙂 — {"priority": "high"}'}
LAST_ARGS = {"order_id": "#W9001", "notify": True,
             "address": {"line1": '渋谷 1-2-3 "Annex"', "city": "東京", "zip": "150-0002"}}  # fmt: skip
LAST_CALL = {"role": "assistant", "content": "", "tool_calls": [{"id": "call_last", "type": "function", "function": {
    "name": "update_address", "arguments": json.dumps(LAST_ARGS, ensure_ascii=False)}}]}  # fmt: skip
LAST_RESULT = {"role": "tool", "tool_call_id": "call_last", "content": json.dumps(
    {"ok": True, "order_id": "#W9001", "address": {"line1": "渋谷 1-2-3 \"Annex\"", "city": "東京"},
     "eta_days": [2, 3], "note": "📦 on its way ✔"}, ensure_ascii=False)}  # fmt: skip


def conversations(turns: int) -> dict[str, list[dict[str, Any]]]:
    """Both appends at ``turns`` assistant turns: the last turn is a tool call followed by its JSON result, or
    an answer followed by a new user message."""
    base = synthetic_conversation(turns)  # ends with the answer of assistant turn ``turns``
    return {"tool_result": [*base[:-1], LAST_CALL, LAST_RESULT], "user_message": [*base, NEW_USER]}


def drive(template: ChatTemplate, msgs: list[dict[str, Any]]) -> TitoConversation:
    """A ``TitoConversation`` in which a perfect model sampled every assistant turn of ``msgs``."""
    conv = TitoConversation(template)
    for i, m in enumerate(msgs):
        if m["role"] != "assistant":
            continue
        conv.prompt_ids(msgs[:i])
        sampled = reference_assistant_ids(template, msgs, i)
        if sampled is None:  # the template cannot be sampled token-exactly here (see docs/templates.md)
            sampled = template.encode(str(m.get("content") or "ok")) + template.stop_ids[:1]
        conv.record_sampled(sampled, [0.0] * len(sampled), i)
    return conv


def clone(conv: TitoConversation) -> TitoConversation:
    """A copy that can take the same append again: its own buffer, the shared (read-only) template."""
    twin = copy.copy(conv)
    twin.buffer = TokenBuffer.from_dict(conv.buffer.to_dict())
    return twin


def measure(template: ChatTemplate, msgs: list[dict[str, Any]], repeat: int) -> dict[str, Any]:
    """Median ms of one append with the bridge and with a full re-render, timed alternately."""
    driven = drive(template, msgs)
    prepared = template.prepare(msgs)[0]

    def rerender() -> list[int]:
        return template.encode(template.render(prepared, add_generation_prompt=True, prepared=True))

    full = rerender()
    first = clone(driven)
    bridged = first.prompt_ids(msgs)
    bridge_s, rerender_s = [], []
    for _ in range(repeat):
        conv = clone(driven)
        t = time.perf_counter()
        conv.prompt_ids(msgs)
        bridge_s.append(time.perf_counter() - t)
        t = time.perf_counter()
        rerender()
        rerender_s.append(time.perf_counter() - t)
    bridge, again = statistics.median(bridge_s), statistics.median(rerender_s)
    return {
        "messages": len(msgs),
        "tokens": len(full),
        "delta_tokens": len(bridged) - len(driven.buffer),
        "bridge_ms": round(bridge * 1e3, 4),
        "rerender_ms": round(again * 1e3, 4),
        "speedup": round(again / bridge, 1),
        "bridge_equals_rerender": bridged == full,
        "fell_back": first.buffer.breaks > driven.buffer.breaks,
        "breaks_in_conversation": first.buffer.breaks,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokenizer", type=Path, default=DEFAULT_TOKENIZER,
                        help="tokenizer folder with a chat template (default: %(default)s)")  # fmt: skip
    parser.add_argument("--turns", default="8,32,128", help="conversation lengths in assistant turns, comma-separated")
    parser.add_argument("--repeat", type=int, default=60, help="timed samples of each append at each length")
    opts = parser.parse_args()
    lengths = [int(x) for x in opts.turns.split(",") if x.strip()]
    if not (opts.tokenizer / "tokenizer_config.json").is_file():
        sys.exit(f"tito benchmark: no tokenizer folder at {opts.tokenizer} (it needs tokenizer.json and "
                 "tokenizer_config.json with a chat_template); pass one with --tokenizer PATH.")  # fmt: skip

    import jinja2
    import tokenizers
    import transformers

    logging.getLogger("toolworld.tito").setLevel(logging.ERROR)  # fallbacks are reported in the result instead
    template = ChatTemplate(opts.tokenizer, AUDIT_TOOLS)
    by_length: dict[str, dict[str, Any]] = {}
    for n in lengths:
        by_length[str(n)] = {kind: measure(template, msgs, opts.repeat) for kind, msgs in conversations(n).items()}

    result: dict[str, Any] = {
        "benchmark": "tito",
        "tokenizer": opts.tokenizer.name,
        "delta_mode": template.delta_mode(synthetic_conversation(2)[0]["content"]),
        "turns": by_length,
    }
    for n, kinds in by_length.items():
        for kind, r in kinds.items():
            result[f"speedup_{kind}_{n}"] = r["speedup"]
    if "128" in by_length:
        result["speedup_at_128"] = min(r["speedup"] for r in by_length["128"].values())
        result["goal_speedup_at_128"] = GOAL_SPEEDUP_AT_128
    result.update({"repeat": opts.repeat, "python": platform.python_version(),
                   "transformers": transformers.__version__, "tokenizers": tokenizers.__version__,
                   "jinja2": jinja2.__version__, "cpus": os.cpu_count()})  # fmt: skip

    print(f"{opts.tokenizer.name}: one append, bridge vs full re-render (medians of {opts.repeat})", file=sys.stderr)
    for n, kinds in by_length.items():
        for kind, r in kinds.items():
            breaks = r["breaks_in_conversation"]
            same = "ids equal" if r["bridge_equals_rerender"] else f"ids differ, {breaks} breaks"
            same += ", this append fell back to a re-render" if r["fell_back"] else ""
            print(f"  {n:>4} turns {kind:>12}: {r['tokens']:>6} tokens, +{r['delta_tokens']:<3} bridge "
                  f"{r['bridge_ms']:7.3f} ms  re-render {r['rerender_ms']:8.3f} ms  {r['speedup']:6.1f}x  ({same})",
                  file=sys.stderr)  # fmt: skip
    if "speedup_at_128" in result:
        ok = result["speedup_at_128"] >= GOAL_SPEEDUP_AT_128
        print(f"  speedup at 128 turns (worse of the two appends): {result['speedup_at_128']}x, goal >= "
              f"{GOAL_SPEEDUP_AT_128:g}x {'OK' if ok else 'MISSED'}", file=sys.stderr)  # fmt: skip
    print(json.dumps(result, ensure_ascii=False))


if __name__ == "__main__":
    main()
