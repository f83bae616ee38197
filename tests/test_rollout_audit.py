"""``toolworld audit-template`` over real tokenizers: the audit's findings match what the templates really do.

Three families cover the three outcomes documented in docs/templates.md: Qwen2.5 is prefix-stable and bridged
with no breaks; Qwen3 breaks because it rewrites earlier assistant turns (it drops reasoning once a new user
message arrives, and an empty reasoning block once anything follows); SmolLM2 renders no tools, so the tools
are stated in the system message. The prefix-stability counts are cross-checked with a plain
``apply_chat_template`` + ``encode`` recount that shares no code with the audit.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from toolworld.cli import app
from toolworld.tokens import ChatTemplate, tool_system_prompt
from toolworld.tokens.audit import AUDIT_TOOLS, audit_template, summary_row, synthetic_conversation

TOKENIZERS = Path(__file__).resolve().parents[2] / "shared" / "tokenizers"

pytestmark = pytest.mark.skipif(not TOKENIZERS.is_dir(), reason=f"real tokenizers not found at {TOKENIZERS}")
pytest.importorskip("transformers", reason="the audit loads tokenizers with transformers (the models extra)")

runner = CliRunner()
TOP_KEYS = {"path", "name", "vocab_size", "renders_tools", "tool_calls", "call_ids", "tool_results", "stop_tokens",
            "closing_text", "delta_mode", "plain", "reasoning", "notes", "tool_append_stable", "user_append_stable",
            "bridge_matches_full_render"}  # fmt: skip
VARIANT_KEYS = {"tool_append_stable", "tool_append_checked", "user_append_stable", "user_append_checked",
                "bridge_matches_full_render", "first_divergence", "turns", "appends", "breaks", "break_reasons",
                "unsampleable_turns", "break_rate"}  # fmt: skip


def folder(name: str) -> Path:
    path = TOKENIZERS / name
    if not (path / "tokenizer_config.json").is_file():
        pytest.skip(f"tokenizer folder {path} is missing")
    return path


@pytest.fixture(scope="module")
def qwen25() -> dict[str, Any]:
    return audit_template(folder("qwen2.5-instruct")).to_dict()


@pytest.fixture(scope="module")
def qwen3() -> dict[str, Any]:
    return audit_template(folder("qwen3")).to_dict()


@pytest.fixture(scope="module")
def smollm2() -> dict[str, Any]:
    return audit_template(folder("smollm2-135m-instruct")).to_dict()


@functools.cache
def plain_tokenizer(path: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(path), local_files_only=True)


def recount_stability(path: Path, msgs: list[dict[str, Any]]) -> dict[str, list[int]]:
    """[stable, checked] per append kind, with transformers alone: the render ending in an assistant turn must be
    a token prefix of the render after that turn's tool results (or the next user message) are appended."""
    tok = plain_tokenizer(path)

    def ids(part: list[dict[str, Any]], gen: bool) -> list[int]:
        text = tok.apply_chat_template(part, tools=AUDIT_TOOLS, tokenize=False, add_generation_prompt=gen)
        return tok.encode(text, add_special_tokens=False)

    msgs = [dict(m, tool_calls=[dict(c, function=dict(c["function"], arguments=json.loads(c["function"]["arguments"])))
                                for c in m["tool_calls"]]) if m.get("tool_calls") else m for m in msgs]  # fmt: skip
    counts = {"tool": [0, 0], "user": [0, 0]}
    for k, m in enumerate(msgs[:-1]):
        nxt = msgs[k + 1]["role"]
        if m["role"] != "assistant" or nxt not in counts:
            continue
        end = k + 2
        while nxt == "tool" and end < len(msgs) and msgs[end]["role"] == "tool":
            end += 1
        short, long = ids(msgs[: k + 1], False), ids(msgs[:end], True)
        counts[nxt][0] += long[: len(short)] == short
        counts[nxt][1] += 1
    return counts


def test_qwen25_is_prefix_stable_and_bridged_without_breaks(qwen25):
    assert qwen25["renders_tools"] and qwen25["tool_calls"] == "native (dict args)"
    assert qwen25["stop_tokens"] == ["<|im_end|>"] and qwen25["closing_text"] == "<|im_end|>\n"
    assert qwen25["delta_mode"] == "cheap" and qwen25["notes"] == []
    for key in ("plain", "reasoning"):
        v = qwen25[key]
        assert (v["turns"], v["appends"], v["breaks"], v["break_rate"]) == (20, 19, 0, 0.0)
        assert v["bridge_matches_full_render"] and v["first_divergence"] is None
        assert v["tool_append_stable"] == v["tool_append_checked"] > 0
        assert v["user_append_stable"] == v["user_append_checked"] > 0
    assert qwen25["tool_append_stable"] and qwen25["user_append_stable"] and qwen25["bridge_matches_full_render"]
    assert summary_row(qwen25)["break rate"] == "0/19" and summary_row(qwen25)["bridge = full render"] == "yes"


def test_qwen3_breaks_where_it_rewrites_earlier_turns(qwen3):
    plain, reasoning = qwen3["plain"], qwen3["reasoning"]
    # With reasoning: tool results keep it, a new user message drops it from earlier turns; one break per user turn.
    assert reasoning["tool_append_stable"] == reasoning["tool_append_checked"] > 0
    assert reasoning["user_append_stable"] == 0 < reasoning["user_append_checked"] == reasoning["breaks"]
    div = reasoning["first_divergence"]
    assert "<think>" in div["buffer"] and "<think>" not in div["full_render"]
    # Without reasoning: the empty <think></think> the last turn gets is dropped as soon as anything follows.
    assert plain["tool_append_stable"] == 0 and plain["user_append_stable"] == 0
    assert plain["breaks"] == plain["appends"] == 19
    assert "<think>\n\n</think>" in plain["first_divergence"]["buffer"]
    for v in (plain, reasoning):
        assert not v["bridge_matches_full_render"] and v["unsampleable_turns"] == 0
        assert v["break_reasons"] == ["the template renders the previous assistant turn differently once messages "
                                      "follow it"]  # fmt: skip
    assert not qwen3["bridge_matches_full_render"] and not qwen3["user_append_stable"]
    assert summary_row(qwen3)["break rate"] == f"19/19 / {reasoning['breaks']}/19"
    assert any(n.startswith("Bridge fallback (with reasoning)") for n in qwen3["notes"])


@pytest.mark.parametrize(("name", "reasoning"), [("qwen2.5-instruct", False), ("qwen3", True), ("qwen3", False)])
def test_stability_counts_agree_with_a_plain_transformers_recount(name, reasoning, request):
    audit = request.getfixturevalue("qwen25" if name == "qwen2.5-instruct" else "qwen3")
    v = audit["reasoning" if reasoning else "plain"]
    counts = recount_stability(folder(name), synthetic_conversation(20, reasoning=reasoning))
    assert counts == {"tool": [v["tool_append_stable"], v["tool_append_checked"]],
                      "user": [v["user_append_stable"], v["user_append_checked"]]}  # fmt: skip


def test_smollm2_gets_the_tools_in_the_system_message(smollm2):
    assert not smollm2["renders_tools"] and smollm2["tool_calls"] == "inline (Hermes)"
    assert any("tool_system_prompt" in n for n in smollm2["notes"])
    for key in ("plain", "reasoning"):
        assert smollm2[key]["breaks"] == 0 and smollm2[key]["bridge_matches_full_render"]
    # Why: the official template ignores ``tools``; toolworld's render carries them in the system turn instead.
    template = ChatTemplate(folder("smollm2-135m-instruct"), AUDIT_TOOLS)
    msgs = synthetic_conversation(2)
    raw = template.tokenizer.apply_chat_template(msgs[:2], tools=AUDIT_TOOLS, tokenize=False)
    assert "update_address" not in raw
    ours = template.render(msgs[:2], add_generation_prompt=True)
    system_turn = ours.split("<|im_end|>")[0]
    assert system_turn.startswith("<|im_start|>system\n" + msgs[0]["content"])
    assert tool_system_prompt(AUDIT_TOOLS) in system_turn
    assert '<tool_call>\n{"name": "find_order"' in template.render(msgs[:3])


def invoke(*args: str | Path) -> Any:
    return runner.invoke(app, ["audit-template", *map(str, args)], catch_exceptions=False)


def test_cli_json_is_one_object_for_one_folder_and_a_list_for_several():
    res = invoke(folder("smollm2-135m-instruct"), "--json", "--turns", "3")
    assert res.exit_code == 0, res.output
    one = json.loads(res.stdout)
    assert isinstance(one, dict) and set(one) == TOP_KEYS
    assert set(one["plain"]) == set(one["reasoning"]) == VARIANT_KEYS
    assert (one["name"], one["vocab_size"], one["plain"]["turns"], one["plain"]["appends"]) == (
        "smollm2-135m-instruct", 49152, 3, 2)  # fmt: skip
    res = invoke(folder("smollm2-135m-instruct"), folder("qwen2.5-instruct"), "--json", "--turns", "2")
    assert res.exit_code == 0, res.output
    many = json.loads(res.stdout)
    assert [a["name"] for a in many] == ["smollm2-135m-instruct", "qwen2.5-instruct"]
    assert all(set(a) == TOP_KEYS for a in many)


def test_cli_reports_a_clear_error_for_a_path_that_is_not_a_tokenizer_folder(tmp_path):
    a_file = tmp_path / "notes.txt"
    a_file.write_text("not a tokenizer")
    checks = [(tmp_path, "not_a_tokenizer", "pass a tokenizer folder"),
              (tmp_path / "missing", "not_found", "does not exist"),
              (a_file, "not_a_tokenizer", "is a file")]  # fmt: skip
    for path, kind, words in checks:
        res = invoke(path, "--json")
        assert res.exit_code == 1, res.output
        error = json.loads(res.stdout.strip().splitlines()[-1])["error"]
        assert error["type"] == kind and words in error["message"] and error["path"] == str(path)
