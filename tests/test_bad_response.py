"""A malformed HTTP 200 from an OpenAI-compatible or vLLM server (a body that is not JSON, a proxy's error page,
no choices, token ids and logprobs of different lengths) is an infra error of kind ``bad_response``: retried with
backoff like a 5xx, never a crash of the run and never the agent's fault."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from toolworld.core import InfraError
from toolworld.rollout.backends import OpenAIPolicy


def good_completion(content: str = "All good.") -> dict[str, Any]:
    return {"id": "c", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}}  # fmt: skip


MALFORMED_CHAT = {
    "cut JSON": httpx.Response(200, content=b'{"choices": [{"index": 0, "mess', headers={"content-type": "application/json"}),
    "error page": httpx.Response(200, text="<html><body>502 Bad Gateway</body></html>",
                                 headers={"content-type": "text/html"}),
    "not UTF-8": httpx.Response(200, content=b"\xff\xfe\x00garbage", headers={"content-type": "application/json"}),
    "no choices": httpx.Response(200, json={"id": "c", "object": "chat.completion", "choices": []}),
    "choice of a wrong type": httpx.Response(200, json={"choices": [7]}),
    "content that is not text": httpx.Response(200, json={"choices": [{"index": 0, "finish_reason": "stop",
                                                          "message": {"role": "assistant", "content": 5}}]}),
}  # fmt: skip


class Scripted:
    """An HTTP handler answering each request with the next response of a list (the last one repeats)."""

    def __init__(self, responses: list[httpx.Response]) -> None:
        self.responses = responses
        self.calls = 0

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.calls += 1
        return self.responses[min(self.calls, len(self.responses)) - 1]


def chat(handler: Scripted, max_retries: int) -> Any:
    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    policy = OpenAIPolicy("m", "http://mock.local/v1", http_client=client, backoff_s=0.0, max_retries=max_retries)
    return asyncio.run(policy.start(tools=[]).respond([{"role": "user", "content": "hi"}]))


@pytest.mark.parametrize("what", list(MALFORMED_CHAT))
def test_openai_malformed_200_is_retried_then_recovers(what):
    handler = Scripted([MALFORMED_CHAT[what], httpx.Response(200, json=good_completion())])
    turn = chat(handler, max_retries=2)
    assert turn.content == "All good." and handler.calls == 2


@pytest.mark.parametrize("what", list(MALFORMED_CHAT))
def test_openai_malformed_200_that_persists_is_a_retryable_bad_response(what):
    handler = Scripted([MALFORMED_CHAT[what]])
    with pytest.raises(InfraError) as info:
        chat(handler, max_retries=2)
    assert info.value.kind == "bad_response" and info.value.retryable and handler.calls == 3
    assert "gave up after 3 attempts" in str(info.value)


# -- vLLM completions ------------------------------------------------------------------------------------------


class Tokenizer:
    def __len__(self) -> int:
        return 100


def vllm_generate(handler: Scripted, max_retries: int = 3) -> Any:
    from toolworld.rollout.engines.vllm import VLLMEngine

    engine = VLLMEngine("m", "http://vllm.test:8000", tokenizer=Tokenizer(), backoff_s=0.0, max_retries=max_retries,
                        transport=httpx.MockTransport(handler))  # fmt: skip
    return asyncio.run(engine.generate([1, 2, 3], max_tokens=8, temperature=1.0, stop_ids=[9], seed=1))


def vllm_body(ids: Any, lps: Any) -> dict[str, Any]:
    return {"choices": [{"finish_reason": "stop", "token_ids": ids, "logprobs": {"token_logprobs": lps}}]}


MALFORMED_VLLM = {
    "no choices": httpx.Response(200, json={"choices": []}),
    "not JSON": httpx.Response(200, text="upstream connect error"),
    "ids and logprobs differ": httpx.Response(200, json=vllm_body([4, 5], [-0.1])),
    "ids that are not numbers": httpx.Response(200, json=vllm_body(["a"], [-0.1])),
    "logprobs of a wrong type": httpx.Response(200, json={"choices": [{"token_ids": [4], "logprobs": "x"}]}),
}


@pytest.mark.parametrize("what", list(MALFORMED_VLLM))
def test_vllm_malformed_200_is_retried_then_recovers(what):
    handler = Scripted([MALFORMED_VLLM[what], httpx.Response(200, json=vllm_body([4, 9], [-0.1, -0.2]))])
    gen = vllm_generate(handler)
    assert (gen.ids, gen.logprobs) == ([4, 9], [-0.1, -0.2]) and handler.calls == 2


@pytest.mark.parametrize("what", list(MALFORMED_VLLM))
def test_vllm_malformed_200_that_persists_is_a_retryable_bad_response(what):
    handler = Scripted([MALFORMED_VLLM[what]])
    with pytest.raises(InfraError) as info:
        vllm_generate(handler, max_retries=2)
    assert info.value.kind == "bad_response" and info.value.retryable and handler.calls == 3


def test_vllm_without_token_ids_is_not_retried():
    """A server that never returns ids (too old, or started without the option) will not start to on a retry."""
    body = {"choices": [{"finish_reason": "stop", "logprobs": {"token_logprobs": [-1.0]}}]}
    handler = Scripted([httpx.Response(200, json=body)])
    with pytest.raises(InfraError) as info:
        vllm_generate(handler)
    assert not info.value.retryable and handler.calls == 1 and "token ids" in str(info.value)


def test_a_bad_response_ends_the_episode_as_an_infra_error_not_a_crash():
    from rollout_kit import make_task, retail
    from toolworld.rollout.loop import Limits, run_episode

    handler = Scripted([MALFORMED_CHAT["cut JSON"]])
    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    policy = OpenAIPolicy("m", "http://mock.local/v1", http_client=client, backoff_s=0.0, max_retries=1)
    traj = asyncio.run(run_episode(retail(), make_task("cancel"), policy,
                                   limits=Limits(infra_retries=1, infra_backoff_s=0.0)))  # fmt: skip
    assert traj.termination == "infra_error" and handler.calls == 4
    assert {e["kind"] for e in traj.infra_errors} == {"bad_response"} and traj.infra_errors[-1]["retryable"]
    assert json.loads(traj.to_json())["termination"] == "infra_error"
