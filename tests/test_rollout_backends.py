"""Message-level policies and the --policy SPEC: gold plans and their noise, scripted turns, lenient parsing,
and an OpenAI-compatible server mocked at the HTTP layer (5xx retried then infra error; tool calls end to end)."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import httpx
import pytest

from rollout_kit import make_task, retail, run, tool_call_ids_answered
from toolworld.core import InfraError
from toolworld.records.messages import AssistantTurn
from toolworld.rollout import engines
from toolworld.rollout.backends import (
    GoldPolicy,
    OpenAIPolicy,
    PolicySpec,
    ScriptedPolicy,
    as_turn,
    corrupt_value,
    gold_answer,
    make_policy,
    parse_arguments,
    parse_spec,
    spec_forms,
)
from toolworld.rollout.loop import Limits, run_episode
from toolworld.rollout.policy import AgentSession, Policy
from toolworld.world import ToolCall


@pytest.fixture(scope="module")
def task():
    return make_task("cancel")


# -- the SPEC ----------------------------------------------------------------------------------------------


def test_gold_specs():
    assert make_policy("gold").name == "gold"
    p = make_policy("gold:drop=0.3,repeat=0.1,corrupt=0.2,seed=5")
    assert isinstance(p, GoldPolicy) and (p.drop, p.repeat, p.corrupt, p.seed) == (0.3, 0.1, 0.2, 5)
    assert p.name == "gold:drop=0.3,repeat=0.1,corrupt=0.2,seed=5"
    assert make_policy("gold", drop=0.5).drop == 0.5  # overrides win


def test_openai_specs(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    p = make_policy("openai:Qwen/Qwen3-8B@http://localhost:8000/v1,temperature=0.7,max_tokens=256")
    assert isinstance(p, OpenAIPolicy)
    assert (p.model, p.base_url, p.api_key) == ("Qwen/Qwen3-8B", "http://localhost:8000/v1", "EMPTY")
    assert p.sampling == {"temperature": 0.7, "max_tokens": 256}
    monkeypatch.setenv("OPENAI_BASE_URL", "http://gpu-box:9000/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    p = make_policy("openai:gpt-4o-mini")
    assert (p.base_url, p.api_key) == ("http://gpu-box:9000/v1", "sk-test")  # type: ignore[attr-defined]


def test_token_specs_go_to_the_engines_lazily(monkeypatch):
    calls: list[tuple[Any, ...]] = []

    def make_token_policy(kind: str, target: str | None, **options: Any) -> Any:
        calls.append((kind, target, options))
        return GoldPolicy()

    monkeypatch.setattr(engines, "make_token_policy", make_token_policy)
    make_policy("hf:./model,temperature=0.7,max_tokens=256")
    make_policy("gguf:/models/m.gguf")
    make_policy("vllm:Qwen/Qwen3-8B@http://localhost:8000/v1,timeout_s=5")
    make_policy("smollm2")
    make_policy("smollm2,temperature=0")
    assert calls == [
        ("hf", "./model", {"temperature": 0.7, "max_tokens": 256}),
        ("gguf", "/models/m.gguf", {}),
        ("vllm", "Qwen/Qwen3-8B@http://localhost:8000/v1", {"timeout_s": 5}),
        ("smollm2", None, {}),
        ("smollm2", None, {"temperature": 0}),
    ]
    # an option the kind does not take is named before anything is built
    with pytest.raises(ValueError, match=r"unknown vllm option\(s\) \['top_p'\]; vllm takes temperature"):
        make_policy("vllm:Qwen/Qwen3-8B@http://localhost:8000/v1,top_p=0.9")
    assert len(calls) == 5


def test_registering_the_token_kinds_imports_no_model_library():
    code = ("import sys; from toolworld.rollout.backends import POLICIES, make_policy, spec_forms; "
            "assert {'hf', 'gguf', 'vllm', 'smollm2'} <= set(POLICIES.names()); spec_forms(); "
            "make_policy('gold:drop=0.1'); "
            "print(sorted(m for m in ('torch', 'transformers', 'xllamacpp', 'openai') if m in sys.modules))")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stderr


def test_spec_forms_and_parsing_come_from_the_registrations():
    forms = spec_forms()
    assert [f.split()[0] for f in forms][:8] == ["gold[:drop=P,repeat=P,corrupt=P,seed=N,explain=1]", "noop", "gibberish[:seed=N]",
                                                 "openai:MODEL[@URL][,k=v...]", "vllm:MODEL@URL[,k=v...]",
                                                 "hf:PATH[,k=v...]", "gguf:PATH[,k=v...]", "smollm2[,k=v...]"]  # fmt: skip
    # a kind that takes no target reads what follows the colon as options; one that does keeps it whole
    assert parse_spec("gibberish:seed=3") == PolicySpec("gibberish", None, {"seed": 3}, ("seed=3",))
    assert parse_spec("Gold:seed=1, drop=0.3").canonical == parse_spec("gold,drop=0.3,seed=1").canonical
    spec = parse_spec("openai:m@http://h:8000/v1,temperature=0.5")
    assert (spec.target, spec.options) == ("m@http://h:8000/v1", {"temperature": 0.5})
    assert parse_spec("retired:x=1").target is None and parse_spec("retired:path").target == "path"  # unregistered


@pytest.mark.parametrize("spec, why", [
    ("", "empty"),
    ("claude", "unknown policy kind"),
    ("gold:drop=2", "between 0 and 1"),
    ("gold:temperature=0.1", "unknown gold option"),
    ("gold:drop", "not key=value"),
    ("openai:", "model name"),
    ("openai:m,temprature=0.1", "unknown openai option"),
    ("hf:", "needs a path"),
    ("hf:./model,max_batch=0", "max_batch=0 for hf: must be >= 1"),
    ("vllm:model-without-url", "MODEL@URL"),
    ("gold:drop=0.1,drop=0.2", "twice"),
])  # fmt: skip
def test_bad_specs_list_the_valid_forms(spec, why):
    with pytest.raises(ValueError) as info:
        make_policy(spec)
    assert why in str(info.value) and "Valid forms" in str(info.value) and "openai:MODEL" in str(info.value)


# -- gold and scripted --------------------------------------------------------------------------------------


def test_gold_plan_is_seeded_per_task_and_trial(task):
    p = GoldPolicy(drop=0.3, repeat=0.3, corrupt=0.3)
    names = lambda plan: [(c.call.name, json.dumps(c.call.arguments), c.perturbations) for c in plan[0]]  # noqa: E731
    assert names(p.plan(task, 11)) == names(p.plan(task, 11))
    assert len({json.dumps(names(p.plan(task, s))) for s in range(30)}) > 3
    clean = GoldPolicy().plan(task, 11)
    assert [c.call.to_dict() for c in clean[0]] == [{"name": a.name, "arguments": a.arguments} for a in task.gold_actions]
    assert clean[1] == [] and all(not c.perturbations for c in clean[0])


def test_gold_noise_draws_are_independent_per_kind(task):
    """Raising one probability never moves where another kind of noise lands."""
    drops = [p["step"] for c in GoldPolicy(drop=0.5, seed=3).plan(task, 1)[0] for p in c.perturbations
             if p["kind"] == "drop"] + [p["step"] for p in GoldPolicy(drop=0.5, seed=3).plan(task, 1)[1]]  # fmt: skip
    both = GoldPolicy(drop=0.5, corrupt=0.9, seed=3).plan(task, 1)
    drops_too = [p["step"] for c in both[0] for p in c.perturbations if p["kind"] == "drop"] + [
        p["step"] for p in both[1]]  # fmt: skip
    assert sorted(drops) == sorted(drops_too)


def test_corrupt_value_keeps_the_shape():
    assert corrupt_value("#W1234567") == "#W1234568"
    assert corrupt_value("#W1234569") == "#W1234560"
    assert corrupt_value("no longer needed") not in ("no longer needed", "")
    assert corrupt_value(5) == 6 and corrupt_value(True) is False
    assert corrupt_value(["1000000001", "2"]) == ["1000000002", "2"]
    assert corrupt_value({"a": "x1"}) == {"a": "x2"}


def test_gold_answer_states_outputs_and_refusal():
    refusal = make_task("refusal")
    text = gold_answer(refusal)
    assert refusal.refusal is not None and refusal.refusal.reason in text and "can't" in text
    info = make_task("info")
    assert info.expected_outputs[0].value in gold_answer(info)


def test_gold_needs_a_task():
    with pytest.raises(ValueError, match="task="):
        GoldPolicy().start(tools=[], task=None)


def test_sessions_fit_the_protocols(task):
    for policy in (GoldPolicy(), ScriptedPolicy(["hi"]), OpenAIPolicy("m", "http://x/v1")):
        assert isinstance(policy, Policy)
        session = policy.start(tools=[], task=task, seed=0)
        assert isinstance(session, AgentSession) and session.buffer is None


def test_script_items():
    assert as_turn("hello").content == "hello" and as_turn("hello").tool_calls == []
    t = as_turn({"name": "calculate", "arguments": {"expression": "1+1"}})
    assert t.finish_reason == "tool_calls" and t.tool_calls[0].name == "calculate"
    assert len(as_turn([ToolCall("a"), ToolCall("b")]).tool_calls) == 2
    original = AssistantTurn("", [ToolCall("a", {"x": [1]})])
    copy = as_turn(original)
    copy.tool_calls[0].arguments["x"].append(2)
    assert original.tool_calls[0].arguments == {"x": [1]}  # sessions never share mutable turns
    with pytest.raises(InfraError):
        as_turn(InfraError("down"))
    with pytest.raises(TypeError):
        as_turn(42)  # type: ignore[arg-type]


def test_scripted_sessions_replay_from_the_start_and_then_answer(task):
    policy = ScriptedPolicy(["one", "two"], final="end")

    async def turns() -> list[str]:
        out = []
        for _ in range(2):
            s = policy.start(tools=[], task=task)
            out += [(await s.respond([])).content for _ in range(3)]
        return out

    assert run(turns()) == ["one", "two", "end", "one", "two", "end"]


def test_parse_arguments_is_lenient():
    assert parse_arguments('{"a": 1}') == {"a": 1}
    assert parse_arguments("") == {} and parse_arguments(None) == {}
    assert parse_arguments('{"a": 1') == '{"a": 1'  # bad JSON stays raw, for the world to report
    assert parse_arguments("[1, 2]") == "[1, 2]"
    assert parse_arguments("[" * 100_000) == "[" * 100_000  # deep nesting does not crash the parser
    assert parse_arguments({"a": 1}) == {"a": 1}


# -- OpenAI-compatible server over a mocked transport ------------------------------------------------------------


def completion(content: str | None = None, calls: list[tuple[str, str, str]] | None = None,
               finish: str | None = None) -> dict[str, Any]:  # fmt: skip
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = [{"id": cid, "type": "function", "function": {"name": name, "arguments": args}}
                                 for cid, name, args in calls]  # fmt: skip
    return {"id": "cmpl-1", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "message": message, "finish_reason": finish or ("tool_calls" if calls else "stop")}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 7, "total_tokens": 107}}  # fmt: skip


class Server:
    """A scripted chat-completions endpoint: each request gets the next response (status, JSON body)."""

    def __init__(self, responses: list[Any]) -> None:
        self.responses = responses
        self.requests: list[dict[str, Any]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        assert request.url.path.endswith("/chat/completions")
        self.requests.append(json.loads(request.content))
        item = self.responses[min(len(self.requests), len(self.responses)) - 1]
        if isinstance(item, Exception):
            raise item
        status, body = item
        return httpx.Response(status, json=body)

    def policy(self, **kwargs: Any) -> OpenAIPolicy:
        client = httpx.AsyncClient(transport=httpx.MockTransport(self))
        return OpenAIPolicy("test-model", "http://mock.local/v1", http_client=client, backoff_s=0.0, **kwargs)


def test_openai_server_errors_are_retried_then_infra_error(task):
    server = Server([(500, {"error": {"message": "overloaded"}})])
    policy = server.policy(max_retries=2)
    traj = run(run_episode(retail(), task, policy, limits=Limits(infra_retries=1, infra_backoff_s=0.0)))
    assert traj.termination == "infra_error" and traj.failed_by_infra
    assert len(server.requests) == 6  # (1 + 2 policy retries) x (1 + 1 loop retry)
    assert [e["kind"] for e in traj.infra_errors] == ["http_500", "http_500"]
    assert traj.infra_errors[-1]["fatal"] and "gave up after 3 attempts" in traj.infra_errors[-1]["message"]
    assert traj.changes == {} and not traj.agent_errors


def test_openai_recovers_from_transient_failures(task):
    server = Server([(503, {}), httpx.ConnectError("refused"), (429, {}), (200, completion("All good."))])
    turn = run(server.policy(max_retries=3).start(tools=[], task=task).respond([{"role": "user", "content": "hi"}]))
    assert turn.content == "All good." and len(server.requests) == 4
    assert (turn.prompt_tokens, turn.completion_tokens) == (100, 7)


@pytest.mark.parametrize("status, body, kind", [
    (400, {"error": {"message": "This model's maximum context length is 4096 tokens."}}, "context_length"),
    (404, {"error": {"message": "model not found"}}, "bad_request"),
    (401, {"error": {"message": "bad key"}}, "bad_request"),
])  # fmt: skip
def test_openai_client_errors_are_not_retried(task, status, body, kind):
    server = Server([(status, body)])
    with pytest.raises(InfraError) as info:
        run(server.policy(max_retries=3).start(tools=[], task=task).respond([{"role": "user", "content": "hi"}]))
    assert len(server.requests) == 1 and not info.value.retryable and info.value.kind == kind


def test_openai_malformed_response_is_an_infra_error(task):
    server = Server([(200, {"id": "x", "object": "chat.completion", "created": 0, "model": "m", "choices": []})])
    with pytest.raises(InfraError, match="no choices"):
        run(server.policy(max_retries=1).start(tools=[], task=task).respond([]))
    assert len(server.requests) == 2


def test_openai_tool_calls_end_to_end(task):
    email = task.user.known["email"]
    order = task.gold_actions[1].arguments["order_id"]
    server = Server([
        (200, completion(None, [("c1", "find_user_by_email", json.dumps({"email": email}))])),
        (200, completion(None, [("c2", "get_order_details", '{"order_id": "' + order)])),  # cut JSON
        (200, completion("Let me look again.", [("c3", "get_order_details", json.dumps({"order_id": order}))])),
        (200, completion(None, [("c4", "cancel_pending_order",
                                 json.dumps({"order_id": order, "reason": "no longer needed"}))])),
        (200, completion("Your order is cancelled; the refund is on its way.")),
    ])
    traj = run(run_episode(retail(), task, server.policy(temperature=0.0)))
    assert traj.termination == "answered" and traj.policy == "openai:test-model@http://mock.local/v1"
    assert traj.changes == task.expected_changes
    assert [s.ok for s in traj.steps] == [True, False, True, True]
    assert traj.steps[1].arguments == '{"order_id": "' + order and traj.steps[1].error["type"] == "invalid_arguments"
    assert [e["type"] for e in traj.agent_errors] == ["invalid_arguments"]
    assert traj.usage.prompt_tokens == 500 and traj.usage.completion_tokens == 35
    first, second = server.requests[0], server.requests[1]
    assert first["model"] == "test-model" and first["temperature"] == 0.0
    assert {t["function"]["name"] for t in first["tools"]} == set(retail().tools)
    assert [m["role"] for m in first["messages"]] == ["system", "user"]
    assert second["messages"][-1] == {"role": "tool", "tool_call_id": "c1", "content": json.dumps(
        {"user_id": traj.steps[0].output["user_id"]})}  # fmt: skip
    assert tool_call_ids_answered(traj.messages)
