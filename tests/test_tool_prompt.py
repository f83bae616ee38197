"""The compact tool prompt: one signature per tool, the same at rollout and in training data, and remembered by the
models trained with it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from rollout_kit import shared_tokenizer
from toolworld.rollout.models import MODEL_CARD, model_path, model_tool_prompt, write_model_card
from toolworld.tokens import ChatTemplate, TitoConversation, tool_call_text, tool_system_prompt
from toolworld.tokens.dialects import tool_signature
from toolworld.tokens.tokenizers import TemplateError
from toolworld.world.registry import get_world

TOOL = {"type": "function", "function": {
    "name": "move", "description": "Move an order.\n\nSecond paragraph that a signature leaves out.",
    "parameters": {"type": "object", "required": ["order_id", "items"], "properties": {
        "order_id": {"type": "string", "description": "e.g. '#W1'"},
        "items": {"type": "array", "items": {"type": "string"}},
        "reason": {"type": "string", "enum": ["lost", "late"]},
        "note": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
        "count": {"type": "integer"},
        "where": {"type": "object", "properties": {"zip": {"type": "string"}, "floor": {"type": "number"}}}}}}}  # fmt: skip


def test_signature_states_every_argument_its_type_and_whether_it_is_required() -> None:
    line = tool_signature(TOOL)
    assert line == ('move(order_id: string, items: list[string], reason?: "lost" | "late", note?: string, '
                    'count?: int, where?: {zip: string, floor: float}) - Move an order.')  # fmt: skip
    assert tool_signature({"name": "ping", "parameters": {"type": "object", "properties": {}}}) == "ping()"


def test_compact_prompt_is_a_few_times_shorter_than_the_schemas_for_retail() -> None:
    tools = get_world("retail").openai_tools()
    compact, full = tool_system_prompt(tools, "compact"), tool_system_prompt(tools)
    assert len(compact) * 3 < len(full)
    for tool in tools:  # every tool and every argument name is still there
        fn = tool["function"]
        assert f"- {fn['name']}(" in compact
        for arg in fn["parameters"]["properties"]:
            assert f"{arg}:" in compact or f"{arg}?:" in compact
    assert "<tool_call>" in compact  # the same call format as the JSON prompt
    with pytest.raises(ValueError, match="compact"):
        tool_system_prompt(tools, "yaml")


@pytest.mark.parametrize("name", ["smollm2-135m-instruct", "qwen2.5-instruct"])
def test_compact_conversation_grows_token_exactly(name: str) -> None:
    """Turn by turn deltas with the compact prompt equal the one-shot render (the buffer RL trains on), for a
    template without tool support (SmolLM2) and one whose own tool block compact replaces (Qwen2.5)."""
    tok = shared_tokenizer(name)
    tools = get_world("retail").openai_tools()[:4]
    template = ChatTemplate(tok, tools, tool_prompt="compact")
    assert template.prompt_tools and template.render_tools is None and template.calls_as_text
    conv = TitoConversation(template)
    msgs: list[dict[str, Any]] = [{"role": "system", "content": "You are a store agent."},
                                  {"role": "user", "content": "Find me: Olivia Martin, 94110."}]  # fmt: skip
    replies = [
        (tool_call_text([{"name": "find_user_by_name_zip",
                          "arguments": {"first_name": "Olivia", "last_name": "Martin", "zip": "94110"}}]),
         {"role": "tool", "tool_call_id": "call_0", "content": '"olivia_martin_4821"'}),
        ("You are olivia_martin_4821.", {"role": "user", "content": "Thanks!"}),
        ("Glad to help.", None),
    ]  # fmt: skip
    for text, answer in replies:
        prompt = conv.prompt_ids(msgs)
        ids = tok(text, add_special_tokens=False)["input_ids"] + list(template.stop_ids[:1])
        conv.record_sampled(ids, [0.0] * len(ids), len(msgs))
        if text.startswith("<tool_call>"):
            call = json.loads(text.split("\n")[1])
            msgs.append({"role": "assistant", "content": "", "tool_calls": [
                {"id": "call_0", "type": "function", "function": call}]})  # fmt: skip
        else:
            msgs.append({"role": "assistant", "content": text})
        assert prompt
        if answer is not None:
            msgs.append(answer)
    system = tok.decode(conv.buffer.ids[:400])
    assert "find_user_by_name_zip(first_name: string" in system and '"properties"' not in system
    expected = template.render_ids(msgs)
    assert conv.buffer.ids == expected[: len(conv.buffer.ids)]
    assert len(expected) - len(conv.buffer.ids) <= 2  # at most a trailing newline after the last end-of-turn


def test_bad_tool_prompt_is_refused() -> None:
    tok = shared_tokenizer("smollm2-135m-instruct")
    with pytest.raises(TemplateError, match="tool_prompt must be one of auto, json, compact"):
        ChatTemplate(tok, [TOOL], tool_prompt="short")


def test_json_forces_schemas_into_the_system_message_of_a_template_with_a_tool_block() -> None:
    tok = shared_tokenizer("qwen2.5-instruct")
    native, forced = ChatTemplate(tok, [TOOL]), ChatTemplate(tok, [TOOL], tool_prompt="json")
    msgs = [{"role": "system", "content": "S"}, {"role": "user", "content": "hi"}]
    assert native.render_tools and not native.prompt_tools
    assert forced.prompt_tools and forced.render_tools is None
    assert tool_system_prompt([TOOL]) in forced.render(msgs)


def test_models_remember_their_tool_prompt(tmp_path) -> None:
    assert model_tool_prompt(model_path("smollm2")) == "compact"  # the embedded model: a path test, nothing pulled
    folder = tmp_path / "final"
    folder.mkdir()
    assert model_tool_prompt(folder) is None
    write_model_card(folder, tool_prompt="compact", base="smollm2")
    assert model_tool_prompt(folder) == "compact"
    (folder / MODEL_CARD).write_text("{not json", encoding="utf-8")
    assert model_tool_prompt(folder) is None  # unreadable: as if it did not say
    assert model_tool_prompt(tmp_path / "missing.gguf") is None


def test_policies_default_to_the_models_tool_prompt_and_take_an_explicit_one(tmp_path, monkeypatch) -> None:
    from toolworld.rollout import engines

    built: list[dict[str, Any]] = []

    class Engine:
        tokenizer = shared_tokenizer("smollm2-135m-instruct")

    def fake_build(kind: str, target: Any, **options: Any) -> Any:
        built.append({"kind": kind, "target": target})
        return Engine()

    monkeypatch.setattr(engines, "build_engine", fake_build)
    folder = tmp_path / "m"
    folder.mkdir()
    assert engines.make_token_policy("hf", str(folder)).tool_prompt == "auto"
    write_model_card(folder, tool_prompt="compact")
    assert engines.make_token_policy("hf", str(folder)).tool_prompt == "compact"
    assert engines.make_token_policy("hf", str(folder), tool_prompt="json").tool_prompt == "json"
    with pytest.raises(ValueError, match="tool_prompt must be one of"):
        engines.make_token_policy("hf", str(folder), tool_prompt="tiny")


def test_sft_export_states_tools_as_the_runs_policy_did(tmp_path) -> None:
    from rollout_kit import SHARED_TOKENIZERS
    from toolworld import pipeline
    from toolworld.rollout.backends import tool_prompt_of
    from toolworld.tasks.generate import generate

    folder = SHARED_TOKENIZERS / "smollm2-135m-instruct"
    shared_tokenizer("smollm2-135m-instruct")  # skips with the reason when ../shared is absent
    tasks = generate("retail", 1, seed=0, sampler="target").tasks
    pipeline.run("retail", tasks, "gold", out=tmp_path / "run", report=False)

    def system(**kw: Any) -> str:
        out = pipeline.export(tmp_path / "run", "sft", tokenizer=folder, output=tmp_path / "x.jsonl", **kw)
        return json.loads(out.path.read_text().splitlines()[0])["messages"][0]["content"]

    assert '"properties"' in system()  # gold states no tools of its own: the template's way (JSON for SmolLM2)
    compact = system(tool_prompt="compact")
    assert SIGNATURE_LINE in compact and '"properties"' not in compact
    assert (tool_prompt_of("smollm2"), tool_prompt_of("smollm2,tool_prompt=json"), tool_prompt_of("gold")) == (
        "compact", "json", "auto")
    with pytest.raises(pipeline.RunError, match="--tool-prompt applies to --format sft"):
        pipeline.export(tmp_path / "run", "chat", tool_prompt="compact")


SIGNATURE_LINE = "- find_user_by_email(email: string) - Find a customer's user id from their email address."
