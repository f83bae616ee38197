"""Hostile input is the agent's error: ``Episode.call`` never raises, never blames the world, never echoes junk.

Each case is what a model can really send: a lone surrogate (a JSON ``\\ud800`` escape), JSON nested thousands
deep, an integer over Python's 4,300-digit limit, a 50,000-character value, LIKE wildcards in a search. Every
one must come back as an agent error type (``invalid_arguments``, ``not_found``, ``unknown_tool``,
``malformed_call``) with a short message that says what to do, and leave the state as it was. The last tests
take the same inputs through the loop as sampled tokens, where the parser's diagnosis must reach the model.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

import sdkworld
from rollout_kit import make_task, shared_tokenizer
from toolworld.records.trajectory import Trajectory
from toolworld.rollout.loop import Limits, run_episode
from toolworld.rollout.token_policy import Generation, TokenPolicy
from toolworld.world import Episode
from toolworld.world.episode import MAX_ARGUMENT_DEPTH, MAX_ERROR_CHARS

IM_END = 151645


@pytest.fixture
def ep(world: Any) -> Iterator[Episode]:
    with world.episode(0) as episode:
        yield episode


@pytest.fixture(scope="module")
def facts(world: Any) -> dict[str, Any]:
    with world.episode(0) as e:
        order = e.query("SELECT order_id, user_id FROM orders WHERE status = 'pending' ORDER BY order_id LIMIT 1")[0]
        email = e.query("SELECT email FROM users WHERE user_id = ?", (order["user_id"],))[0]["email"]
    return {**order, "email": email}


def refused(ep: Episode, name: str, arguments: Any, kind: str = "invalid_arguments") -> str:
    """Call, check it failed as the agent's ``kind`` with a bounded message and no trace; return the message."""
    before = ep.state_hash()
    result = ep.call(name, arguments)
    assert result.error is not None, f"{name} accepted {str(arguments)[:80]!r}"
    assert result.error.type == kind, result.error.message[:300]
    assert not result.error.is_infra
    assert len(result.error.message) <= MAX_ERROR_CHARS + 40
    assert len(result.content) < 3 * MAX_ERROR_CHARS
    result.content.encode("utf-8")  # storable as it is
    assert ep.state_hash() == before
    return result.error.message


# -- Episode.call, dict and JSON-string arguments --------------------------------------------------------------


@pytest.mark.parametrize("as_json", [False, True], ids=["dict", "json"])
def test_lone_surrogates_are_invalid_arguments_not_a_crash(ep: Episode, facts: dict[str, Any], as_json: bool) -> None:
    for name, args in [("find_user_by_email", {"email": "a\ud800b@example.com"}),
                       ("get_order_details", {"order_id": facts["order_id"] + "\udfff"}),
                       ("cancel_pending_order", {"order_id": facts["order_id"], "reason": "no longer needed\ud83d"}),
                       ("search_products", {"query": "jacket", "category": "\ud800"})]:  # fmt: skip
        message = refused(ep, name, json.dumps(args) if as_json else args)
        assert "lone UTF-16 surrogate" in message and "index" in message


def test_json_nested_thousands_deep(ep: Episode) -> None:
    for depth in (5_000, 200_000):
        message = refused(ep, "get_order_details", '{"order_id": ' + "[" * depth + "]" * depth + "}")
        assert "nested too deeply" in message
    # Parsed fine by json, but deeper than any tool takes: refused before validation walks it.
    message = refused(ep, "get_order_details", {"order_id": json.loads("[" * 500 + "]" * 500)})
    assert f"nested more than {MAX_ARGUMENT_DEPTH} levels" in message
    refused(ep, "find_user_by_email", '{"email": ' + '{"a":' * 900 + "1" + "}" * 900 + "}")


def test_integers_over_the_digit_limit(ep: Episode) -> None:
    message = refused(ep, "get_order_details", '{"order_id": ' + "9" * 5_000 + "}")
    assert "4,300 digits" in message
    assert "over 4,000 digits" in refused(ep, "get_order_details", {"order_id": 10**5_000})
    assert "over 4,000 digits" in refused(ep, "calculate", {"expression": [10**5_000]})
    # A merely long integer is an ordinary wrong type, quoted in a few characters.
    assert len(refused(ep, "get_order_details", {"order_id": 10**400})) < 300


def test_a_50_kb_value_is_never_echoed_back(ep: Episode) -> None:
    message = refused(ep, "get_order_details", {"order_id": "#W" + "9" * 50_000}, "not_found")
    assert "(50,002 characters)" in message and len(message) < 400
    refused(ep, "find_user_by_email", json.dumps({"email": "a" * 50_000 + "@example.com"}), "not_found")
    # 10,000 unexpected keys: one message and a few details, not ten thousand of them.
    many = {f"key_{i}": i for i in range(10_000)}
    assert "unexpected argument" in refused(ep, "list_product_types", many)
    details = ep.history[-1].error.details
    assert len(details["errors"]) == 10 and details["errors_left_out"] == 9_990
    assert "unexpected argument" in refused(ep, "list_product_types", {"x" * 50_000: 1})


def test_a_50_kb_search_and_like_wildcards(ep: Episode, world: Any) -> None:
    for query in ("x " * 25_000, "a" * 50_000, "jacket " * 1_000):
        assert "search with a few words" in refused(ep, "search_products", {"query": query})
    assert "at most 12" in refused(ep, "search_products", {"query": " ".join(f"w{i}" for i in range(13))})
    assert "no words" in refused(ep, "search_products", {"query": "%"})
    assert "no words" in refused(ep, "search_products", {"query": "%%% ''' --"})
    # '_' is a word character but also LIKE's "any one character": it must match only itself.
    name = ep.query("SELECT name FROM products WHERE name LIKE '% %' ORDER BY product_id LIMIT 1")[0]["name"]
    first, second = name.lower().split()[:2]
    assert ep.call("search_products", {"query": f"{first} {second}"}).unwrap()
    assert ep.call("search_products", {"query": f"{first}_{second}"}).unwrap() == []
    assert ep.call("search_products", {"query": "_"}).unwrap() == []
    injected = ep.call("search_products", {"query": "' OR 1=1 --"}).unwrap()
    assert injected == ep.call("search_products", {"query": "OR 1 1"}).unwrap()  # just words, never SQL


def test_unknown_tools_bad_names_and_empty_names(ep: Episode) -> None:
    message = refused(ep, "x" * 200_000, {}, "unknown_tool")
    assert "(200,000 characters)" in message and len(message) < MAX_ERROR_CHARS
    assert "no tool name" in refused(ep, "", {}, "unknown_tool")
    assert "No tool named ''" not in refused(ep, "   ", {}, "unknown_tool")
    for odd in (None, 7, ["get_order_details"], {"name": "f"}, 10**5_000):
        refused(ep, odd, {}, "unknown_tool")  # type: ignore[arg-type]
    refused(ep, "get_order_\ud800details", {}, "unknown_tool")


def test_wrong_shapes_of_arguments(ep: Episode) -> None:
    for args in ([1, 2], "[1, 2]", "null", 5, 3.5, True, b"{}", '"#W1"', "NaN", object()):
        assert "must be a JSON object" in refused(ep, "get_order_details", args)
    assert "cut off at char" in refused(ep, "get_order_details", '{"order_id": "#W12')
    refused(ep, "get_order_details", {"order_id": float("nan")})
    refused(ep, "get_order_details", '{"order_id": 1e999}')


def test_a_mapping_that_breaks_while_read_is_an_internal_error_not_an_exception(ep: Episode) -> None:
    class Broken(Mapping[str, Any]):
        def __getitem__(self, key: str) -> Any:
            raise KeyError(key)

        def __iter__(self) -> Iterator[str]:
            raise RuntimeError("cannot iterate")

        def __len__(self) -> int:
            return 1

    result = ep.call("get_order_details", Broken())
    assert result.error is not None and result.error.type == "internal_error"
    assert ep.history[-1] is result


def test_a_genuine_tool_bug_is_still_internal_error_with_a_bounded_message() -> None:
    with sdkworld.world.episode(0) as e:
        member_id = e.query("SELECT member_id FROM members ORDER BY member_id LIMIT 1")[0]["member_id"]
        result = e.call("buggy_upgrade_member", {"member_id": member_id})
        assert result.error is not None and result.error.type == "internal_error" and result.error.is_infra
        assert "KeyError" in result.error.message and len(e.changes()) == 0


# -- through the loop, as sampled tokens ------------------------------------------------------------------------


class TextEngine:
    """Samples each scripted text as real Qwen2.5 token ids (what a model that wrote it would have sampled)."""

    def __init__(self, tokenizer: Any, texts: list[str]) -> None:
        self.tokenizer = tokenizer
        self.texts = list(texts)

    async def generate(self, prompt_ids: list[int], **kwargs: Any) -> Generation:
        text = self.texts.pop(0) if self.texts else "That is all."
        ids = [*self.tokenizer.encode(text, add_special_tokens=False), IM_END]
        return Generation(ids, [-1.0] * len(ids), "stop")


@pytest.fixture(scope="module")
def qwen() -> Any:
    return shared_tokenizer("qwen2.5-instruct")


def run_texts(world: Any, qwen: Any, texts: list[str]) -> Trajectory:
    policy = TokenPolicy(TextEngine(qwen, texts), qwen, name="scripted-tokens")
    limits = Limits(max_consecutive_errors=50, infra_retries=0, max_wall_s=None)
    traj = asyncio.run(run_episode(world, make_task("cancel", world=world), policy, limits=limits))
    assert traj.infra_errors == [] and traj.termination != "infra_error"
    assert Trajectory.from_json(traj.to_json()) == traj
    return traj


def tool_messages(traj: Trajectory) -> list[str]:
    return [m["content"] for m in traj.messages if m["role"] == "tool"]


def test_the_parsers_diagnosis_reaches_the_model(world: Any, qwen: Any) -> None:
    cut = '<tool_call>\n{"name": "get_order_details", "arguments": {"order_id": "#W'
    traj = run_texts(world, qwen, [cut, "<tool_call>\n</tool_call>", '<tool_call>{"arguments": {}}</tool_call>'])
    steps = traj.steps
    assert [s.error["type"] for s in steps] == ["malformed_call"] * 3
    assert [e["type"] for e in traj.agent_errors] == ["malformed_call"] * 3
    first = json.loads(tool_messages(traj)[0])["error"]["message"]
    assert first.startswith("Your <tool_call> JSON is cut off at char 59")
    assert first.endswith('Write each call as <tool_call>{"name": "TOOL", "arguments": {...}}</tool_call>.')
    assert steps[0].name == "get_order_details" and steps[0].arguments == '{"order_id": "#W'
    assert "is empty" in steps[1].error["message"] and "no string \"name\"" in steps[2].error["message"]
    assert not any("No tool named" in m for m in tool_messages(traj))
    assert traj.changes == {}


def test_hostile_values_in_sampled_json_are_agent_errors_and_the_trajectory_stores(world: Any, qwen: Any,
                                                                                  facts: dict[str, Any]) -> None:
    calls = [
        {"name": "find_user_by_email", "arguments": {"email": "\\ud800" + facts["email"]}},
        {"name": "get_order_\\udfffdetails", "arguments": {}},
        {"name": "get_order_details", "arguments": {"order_id": "9" * 5_000}},
        {"name": "search_products", "arguments": {"query": "a" * 50_000}},
        {"name": "get_order_details", "arguments": {"order_id": "[" * 3_000}},
    ]
    texts = [f"<tool_call>{json.dumps(c).replace(chr(92) * 2, chr(92))}</tool_call>" for c in calls[:2]]
    texts.append('<tool_call>{"name": "get_order_details", "arguments": {"order_id": ' + "9" * 5_000 + "}}</tool_call>")
    texts.append(f"<tool_call>{json.dumps(calls[3])}</tool_call>")
    texts.append('<tool_call>{"name": "get_order_details", "arguments": {"order_id": ' + "[" * 3_000 + "}}</tool_call>")
    traj = run_texts(world, qwen, texts)
    types = [s.error["type"] for s in traj.steps]
    assert types == ["malformed_call", "malformed_call", "malformed_call", "invalid_arguments", "malformed_call"]
    assert "lone UTF-16 surrogate" in traj.steps[0].error["message"]
    assert "4,300 digits" in traj.steps[2].error["message"] and "nested too deeply" in traj.steps[4].error["message"]
    assert "search with a few words" in traj.steps[3].error["message"]
    assert all(len(m) < 3 * MAX_ERROR_CHARS for m in tool_messages(traj))
    traj.to_json().encode("utf-8")  # every string in it is valid Unicode


def test_the_call_command_answers_hostile_args_with_a_json_error() -> None:
    from typer.testing import CliRunner

    from toolworld.cli import app

    runner = CliRunner()
    for args in ('{"order_id": ' + "[" * 5_000 + "]" * 5_000 + "}", '{"order_id": ' + "9" * 5_000 + "}",
                 '{"order_id": "#W\\ud800"}'):  # fmt: skip
        res = runner.invoke(app, ["call", "retail", "get_order_details", "--args", args], catch_exceptions=False)
        assert res.exit_code == 1
        assert json.loads(res.output)["error"]["type"] == "invalid_arguments"
