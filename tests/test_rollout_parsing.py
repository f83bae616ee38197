"""Tool-call parsing: every dialect, malformed calls kept as raw strings, never raising, linear on huge input."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolworld.tokens.dialects import FORMATS, parse_tool_calls
from toolworld.world import get_world

TOOLS = [{"type": "function", "function": {"name": "get_order", "parameters": {"type": "object", "properties": {
    "order_id": {"type": "string"}, "n": {"type": "integer"}, "gift": {"type": "boolean"},
    "zip": {"type": "string"}, "items": {"type": "array"}}}}}]  # fmt: skip


def test_hermes_several_calls_with_content_and_ids() -> None:
    text = ('Let me look both up.\n<tool_call>\n{"name": "get_order", "arguments": {"order_id": "#W1"}}\n</tool_call>\n'
            '<tool_call>\n{"name": "get_order", "arguments": {"order_id": "#W2", "note": "東京 ☕"}}\n</tool_call>')
    r = parse_tool_calls(text)
    assert r.format == "hermes"
    assert r.content == "Let me look both up."
    assert [(c.name, c.arguments, c.id) for c in r.calls] == [
        ("get_order", {"order_id": "#W1"}, "call_0"),
        ("get_order", {"order_id": "#W2", "note": "東京 ☕"}, "call_1"),
    ]
    assert r.problems == []


def test_hermes_bad_json_is_kept_raw_with_guessed_name_and_the_world_reports_invalid_arguments() -> None:
    text = '<tool_call>\n{"name": "find_user_by_email", "arguments": {"email": "a@b.c",}}\n</tool_call>'
    r = parse_tool_calls(text)
    (call,) = r.calls
    assert call.name == "find_user_by_email"
    assert call.arguments == '{"email": "a@b.c",}'
    assert r.problems and "not valid JSON" in r.problems[0]
    assert call.problem is not None and call.problem.startswith("Your <tool_call> JSON is not valid JSON: Expecting")
    with get_world("retail").episode(0) as ep:
        result = ep.call(call.name, call.arguments)
    assert result.error is not None and result.error.type == "invalid_arguments"


def test_hermes_call_without_a_name_still_comes_back() -> None:
    r = parse_tool_calls("<tool_call>{'function': get_order(1)}</tool_call>")
    assert len(r.calls) == 1 and r.calls[0].name == "" and isinstance(r.calls[0].arguments, str)
    assert r.calls[0].problem is not None and "at char 1" in r.calls[0].problem


def test_hermes_call_cut_by_the_length_limit() -> None:
    r = parse_tool_calls('<tool_call>\n{"name": "get_order", "arguments": {"order_id": "#W')
    assert r.calls[0].name == "get_order" and r.calls[0].arguments == '{"order_id": "#W'
    assert any("not closed" in p for p in r.problems)


def test_double_encoded_arguments_are_decoded_once_more() -> None:
    r = parse_tool_calls('<tool_call>{"name": "get_order", "arguments": "{\\"order_id\\": \\"#W1\\"}"}</tool_call>')
    assert r.calls[0].arguments == {"order_id": "#W1"}


def test_reasoning_is_split_off() -> None:
    r = parse_tool_calls("<think>\nThe user wants #W1.\n</think>\n\nSure.")
    assert r.reasoning == "The user wants #W1." and r.content == "Sure." and r.calls == []
    # A generation prompt that already opened <think> leaves only the closing tag in the sampled text.
    r = parse_tool_calls('hmm\n</think>\n\n<tool_call>{"name": "get_order", "arguments": {}}</tool_call>')
    assert r.reasoning == "hmm" and r.calls[0].name == "get_order"


def test_qwen3_coder_xml_with_schema_types() -> None:
    text = ("I'll check.\n<tool_call>\n<function=get_order>\n<parameter=order_id>\n#W1\n</parameter>\n"
            "<parameter=n>\n5\n</parameter>\n<parameter=gift>\ntrue\n</parameter>\n<parameter=zip>\n02139\n</parameter>\n"
            '<parameter=items>\n["a", "b"]\n</parameter>\n</function>\n</tool_call>')  # fmt: skip
    r = parse_tool_calls(text, tools=TOOLS)
    assert r.format == "qwen3_coder" and r.content == "I'll check."
    assert r.calls[0].arguments == {"order_id": "#W1", "n": 5, "gift": True, "zip": "02139", "items": ["a", "b"]}
    # Without a schema numbers stay text (the world's validation coerces "5" to 5, never 5 to "02139").
    untyped = parse_tool_calls(text).calls[0].arguments
    assert untyped["n"] == "5" and untyped["zip"] == "02139" and untyped["items"] == ["a", "b"]


def test_qwen3_coder_multiline_value_and_missing_close() -> None:
    text = "<tool_call>\n<function=note>\n<parameter=body>\nline 1\nline 2\n</parameter>\n<parameter=x>\n7"
    r = parse_tool_calls(text)
    assert r.calls[0].name == "note"
    assert r.calls[0].arguments == {"body": "line 1\nline 2", "x": "7"}
    assert r.problems


def test_llama3_json_with_python_tag_and_bare() -> None:
    r = parse_tool_calls('<|python_tag|>{"name": "get_order", "parameters": {"order_id": "#W1"}}')
    assert r.format == "llama3" and r.calls[0].arguments == {"order_id": "#W1"}
    r = parse_tool_calls('{"type": "function", "name": "get_order", "parameters": {"order_id": "#W2"}}')
    assert r.calls[0].name == "get_order" and r.calls[0].arguments == {"order_id": "#W2"} and r.content == ""


def test_mistral_list_keeps_model_ids_and_tekken_form() -> None:
    r = parse_tool_calls('[TOOL_CALLS][{"name": "get_order", "arguments": {"order_id": "#W1"}, "id": "a1B2c3D4e"}, '
                         '{"name": "get_order", "arguments": {"order_id": "#W2"}}]')  # fmt: skip
    assert r.format == "mistral"
    assert [(c.arguments["order_id"], c.id) for c in r.calls] == [("#W1", "a1B2c3D4e"), ("#W2", "call_1")]
    r = parse_tool_calls('[TOOL_CALLS]get_order[ARGS]{"order_id": "#W1"}[TOOL_CALLS]cancel[ARGS]{"order_id": ')
    assert [c.name for c in r.calls] == ["get_order", "cancel"]
    assert r.calls[0].arguments == {"order_id": "#W1"} and r.calls[1].arguments == '{"order_id":'


def test_deepseek_native_calls() -> None:
    text = ("Checking.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_order<｜tool▁sep｜>{\"order_id\": \"#W1\"}"
            "<｜tool▁call▁end｜><｜tool▁call▁begin｜>cancel<｜tool▁sep｜>{bad}<｜tool▁call▁end｜><｜tool▁calls▁end｜>")
    r = parse_tool_calls(text)
    assert r.format == "deepseek" and r.content == "Checking."
    assert r.calls[0].arguments == {"order_id": "#W1"} and r.calls[1].arguments == "{bad}"


def test_harmony_call_reasoning_and_final() -> None:
    sampled = ("<|channel|>analysis<|message|>Need the order.<|end|><|start|>assistant to=functions.get_order"
               '<|channel|>commentary json<|message|>{"order_id": "#W1"}')
    r = parse_tool_calls(sampled)
    assert r.format == "harmony" and r.reasoning == "Need the order."
    assert (r.calls[0].name, r.calls[0].arguments) == ("get_order", {"order_id": "#W1"})
    r = parse_tool_calls("<|channel|>analysis<|message|>ok<|end|><|start|>assistant<|channel|>final<|message|>Done ✔")
    assert r.calls == [] and r.content == "Done ✔" and r.reasoning == "ok"


def test_lenient_fenced_json_and_bare_objects() -> None:
    r = parse_tool_calls('Sure!\n```json\n{"name": "get_order", "arguments": {"order_id": "#W1"}}\n```\nOne moment.')
    assert r.format == "json" and r.content == "Sure!\nOne moment." and r.calls[0].arguments == {"order_id": "#W1"}
    r = parse_tool_calls('I will call {"name": "get_order", "arguments": {"order_id": #W1}} now')
    assert r.calls[0].name == "get_order" and isinstance(r.calls[0].arguments, str)
    plain = 'The order {"id": 1} is "name": fine.'
    r = parse_tool_calls(plain)
    assert r.calls == [] and r.content == plain


def test_explicit_format_and_unknown_format() -> None:
    text = '<tool_call>{"name": "a", "arguments": {}}</tool_call>'
    assert parse_tool_calls(text, "mistral").calls == []
    assert parse_tool_calls(text, "hermes").calls[0].name == "a"
    with pytest.raises(ValueError, match="unknown tool-call format"):
        parse_tool_calls(text, "xml")


def test_one_megabyte_of_arguments_parses() -> None:
    big = "x" * 1_000_000
    ok = parse_tool_calls(json.dumps({"name": "get_order", "arguments": {"blob": big}}).join(
        ["<tool_call>", "</tool_call>"]))  # fmt: skip
    assert ok.calls[0].arguments["blob"] == big
    broken = parse_tool_calls('<tool_call>{"name": "get_order", "arguments": {"blob": "' + big + "}</tool_call>")
    assert broken.calls[0].name == "get_order" and len(broken.calls[0].arguments) > 1_000_000
    # Pathological lenient input: a megabyte of near-miss objects is scanned a bounded number of times.
    noisy = '{"name": "f", "arguments": {' * 40_000
    assert len(parse_tool_calls(noisy).calls) == 1
    xml = "<tool_call>\n<function=f>\n" + "<parameter=p>\n" * 50_000
    assert parse_tool_calls(xml).calls[0].name == "f"
    # Absurd nesting is a malformed call (raw string), not a RecursionError.
    deep = "[" * 200_000
    for text in (f'<tool_call>{{"name": "f", "arguments": {deep}</tool_call>', f"<|python_tag|>{deep}",
                 f"<function=f>\n<parameter=x>\n{deep}\n</parameter>\n</function>", f"```json\n{deep}\n```",
                 f"[TOOL_CALLS]f[ARGS]{deep}", f"<｜tool▁call▁begin｜>f<｜tool▁sep｜>{deep}"):
        r = parse_tool_calls(text)
        assert all(isinstance(c.arguments, (dict, str)) for c in r.calls)
    assert parse_tool_calls(f'<tool_call>{{"name": "f", "arguments": {deep}</tool_call>').calls[0].name == "f"


@pytest.mark.parametrize(("text", "diagnosis"), [
    ('<tool_call>\n{"name": "get_order", "arguments": {"order_id": "#W',
     "Your <tool_call> JSON is cut off at char 51: it ends before its brackets and quotes are closed."),
    ('<tool_call>{"name": "get_order", "arguments": {"order_id": "#W1"}, }</tool_call>',
     "Your <tool_call> JSON is not valid JSON: Expecting property name enclosed in double quotes at char 56"),
    ("<tool_call>\n</tool_call>", "Your <tool_call> call is empty."),
    ('<tool_call>{"arguments": {"order_id": "#W1"}}</tool_call>', 'Your <tool_call> JSON has no string "name".'),
    ('<tool_call>{"name": "", "arguments": {}}</tool_call>', "Your <tool_call> call has no tool name."),
    ('<tool_call>{"name": "get_order", "arguments": [1, 2]}</tool_call>',
     "The arguments of your <tool_call> call to 'get_order' are a JSON array, not an object."),
    ('<tool_call>{"name": "get_order", "arguments": "{\\"order_id\\": "}</tool_call>',
     "The \"arguments\" string of your <tool_call> call to 'get_order' is cut off at char 12"),
    ("[TOOL_CALLS]get_order[ARGS]{\"order_id\": ", "The [ARGS] JSON of your [TOOL_CALLS]get_order call is cut off at char 12"),
    ("[TOOL_CALLS]get_order", "Your [TOOL_CALLS]get_order call has no [ARGS]."),
    ('[TOOL_CALLS][{"name": "get_order", "arguments": {"order_id": "#W1"}', "Your [TOOL_CALLS] JSON is cut off at char"),
    ("<｜tool▁call▁begin｜>get_order{}<｜tool▁call▁end｜>", "has no <｜tool▁sep｜> between the tool name and its JSON"),
    ("<｜tool▁call▁begin｜>get_order<｜tool▁sep｜>{bad}<｜tool▁call▁end｜>",
     "The JSON of your <｜tool▁call▁begin｜>get_order call is not valid JSON: Expecting property name"),
    ("<|start|>assistant to=functions.get_order<|channel|>commentary json<|message|>{\"order_id\": 1",
     "The JSON message of your to=functions.get_order call is cut off at char 14"),
    ("<tool_call>\n<function=get_order\n<parameter=order_id>\n#W1", "Your <function=get_order"),
    ('<|python_tag|>{"name": "get_order", "parameters": {"order_id": "#W1"', "Your <|python_tag|> JSON is cut off"),
    ('```json\n{"name": "get_order", "arguments": {"order_id": "#W1"\n```', "Your fenced ```json tool call is cut off"),
    ('Calling {"name": "get_order", "arguments": {"order_id": #W1}} now', "Your tool call JSON is not valid JSON: "
     "Expecting value at char 48 (near"),
])  # fmt: skip
def test_a_call_that_cannot_be_read_carries_a_diagnosis_in_the_models_terms(text: str, diagnosis: str) -> None:
    r = parse_tool_calls(text, tools=TOOLS)
    flagged = [c for c in r.calls if c.problem is not None]
    assert len(flagged) == 1, r
    problem = flagged[0].problem
    assert diagnosis in problem
    assert problem.rstrip(".").endswith(("</tool_call>", "}]", "<｜tool▁call▁end｜>", "<|call|>", "{...}}"))
    assert len(problem) < 900


def test_complete_json_whose_tag_is_not_closed_still_runs() -> None:
    r = parse_tool_calls('<tool_call>{"name": "get_order", "arguments": {"order_id": "#W1"}}')
    assert r.calls[0].problem is None and r.calls[0].arguments == {"order_id": "#W1"}
    assert r.problems == ["tool call is not closed with </tool_call> (cut by the length limit?)"]
    assert parse_tool_calls('<tool_call>{"name": "get_order", "arguments": {}}</tool_call>').calls[0].problem is None


def test_values_no_tool_can_take_are_flagged_and_kept_as_storable_text() -> None:
    surrogate = parse_tool_calls('<tool_call>{"name": "get_order", "arguments": {"order_id": "#W1\\ud800"}}</tool_call>')
    (call,) = surrogate.calls
    assert "lone UTF-16 surrogate" in call.problem and call.arguments == '{"order_id": "#W1\\ud800"}'
    name = parse_tool_calls('<tool_call>{"name": "get_\\udfffo", "arguments": {}}</tool_call>').calls[0]
    assert name.name == "get_\\udfffo" and "invalid \\u escape" in name.problem
    huge = parse_tool_calls('<tool_call>{"name": "f", "arguments": {"n": ' + "9" * 5_000 + "}}</tool_call>").calls[0]
    assert "more than 4,300 digits" in huge.problem and isinstance(huge.arguments, str)
    deep = parse_tool_calls('<tool_call>{"name": "f", "arguments": ' + '{"a": ' * 40 + "1" + "}" * 41 + "</tool_call>")
    assert "nested more than 32 levels" in deep.calls[0].problem
    for text in ('{"name": "f", "arguments": {"n": ' + "9" * 5_000 + "}}", "[TOOL_CALLS]f[ARGS]{\"n\": " + "9" * 5_000 + "}",
                 "<｜tool▁call▁begin｜>f<｜tool▁sep｜>{\"n\": " + "9" * 5_000 + "}"):  # fmt: skip
        r = parse_tool_calls(text)  # a ValueError here used to escape as a crash of the policy
        assert r.calls and all(c.problem for c in r.calls)
    # Text-level backends may hand over lone surrogates in the content itself: kept as escapes.
    r = parse_tool_calls("I am sorry \ud800")
    assert r.content == "I am sorry \\ud800"


FRAGMENTS = ["<tool_call>", "</tool_call>", "{", "}", '"name"', ":", '"arguments"', "[TOOL_CALLS]", "[ARGS]", "\\ud800",
             "<function=", "<parameter=", ">", "</function>", "<|python_tag|>", "```json\n", "```", "<think>",
             "</think>", "<|start|>", "<|channel|>", "<|message|>", "to=functions.", "<｜tool▁call▁begin｜>",
             "<｜tool▁sep｜>", "<｜tool▁call▁end｜>", '"', "\n", "x", "☕", "[", "]", ","]  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(FRAGMENTS) | st.text(max_size=5), max_size=30), st.sampled_from(FORMATS))
def test_never_raises_on_model_output(parts: list[str], fmt: str) -> None:
    r = parse_tool_calls("".join(parts), fmt)
    assert isinstance(r.content, str)
    for n, call in enumerate(r.calls):
        assert isinstance(call.name, str) and isinstance(call.arguments, (dict, str))
        assert call.problem is not None or call.name.strip()  # a call without a name always says why
        json.dumps(call.to_dict(), ensure_ascii=False).encode("utf-8")  # storable as it is
        assert call.id
        if fmt != "mistral" and r.format != "mistral":
            assert call.id == f"call_{n}"
