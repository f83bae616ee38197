"""The ``gguf`` engine on a real llama.cpp (a tiny random-weight model around SmolLM2's vocabulary), the
tokenizer rebuilt from a GGUF's metadata, and the ``vllm`` engine against a scripted HTTP server."""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from gguf_kit import SMOLLM2, write_sentencepiece_gguf
from rollout_kit import make_task
from toolworld.cli import app
from toolworld.core import InfraError
from toolworld.store import RunStore
from toolworld.tasks.model import write_jsonl
from toolworld.tokens import TokenBuffer

needs_shared = pytest.mark.skipif(not SMOLLM2.is_dir(), reason=f"needs the shared tokenizers at {SMOLLM2}")


@pytest.fixture(scope="module")
def engine(tiny_gguf: Path) -> Any:
    pytest.importorskip("xllamacpp")
    from toolworld.rollout.engines.gguf import GGUFEngine

    eng = GGUFEngine(tiny_gguf, n_ctx=2048, threads=2)  # verify_tokenizer=True: raises unless ids agree
    yield eng
    eng.close()


def test_gguf_kv_cache_option_is_checked_and_reaches_the_policy_spec(tiny_gguf: Path) -> None:
    pytest.importorskip("xllamacpp")
    from toolworld.rollout.backends import make_policy
    from toolworld.rollout.engines.gguf import GGUFEngine

    with pytest.raises(ValueError, match="kv_cache must be one of f16, f32"):
        GGUFEngine(tiny_gguf, kv_cache="q8")
    policy = make_policy(f"gguf:{tiny_gguf},kv_cache=f32,n_ctx=256,threads=1")
    try:
        assert policy.engine.kv_cache == "f32"
        prompt = chat_ids(policy.engine, "Hello there.")
        # same greedy ids as the default cache on a tiny random model: only the numerics change
        wide = generate(policy.engine, prompt, temperature=0.0)
    finally:
        policy.engine.close()
    half = GGUFEngine(tiny_gguf, n_ctx=256, threads=1)
    try:
        assert generate(half, prompt, temperature=0.0).ids == wide.ids
    finally:
        half.close()


def chat_ids(engine: Any, text: str) -> list[int]:
    """The prompt ids of one user message (newer transformers return a BatchEncoding, older a plain list)."""
    out = engine.tokenizer.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True)
    return [int(i) for i in (out["input_ids"] if hasattr(out, "keys") else out)]


def generate(engine: Any, prompt: list[int], **kw: Any) -> Any:
    args = {"max_tokens": 12, "temperature": 1.0, "stop_ids": [], "seed": 7} | kw
    return asyncio.run(engine.generate(prompt, **args))


# -- the tokenizer rebuilt from GGUF metadata --------------------------------------------------------------


@needs_shared
def test_gguf_tokenizer_reproduces_the_original_tokenizer_and_template(tiny_gguf):
    from transformers import AutoTokenizer

    from toolworld.rollout.engines.gguf import PROBE_TEXTS
    from toolworld.tokens.tokenizers import build_gguf_tokenizer

    ours, ref = build_gguf_tokenizer(tiny_gguf), AutoTokenizer.from_pretrained(str(SMOLLM2))
    texts = [*PROBE_TEXTS, "<|im_start|>user\n1234567 order<|im_end|>\n", "ab\u200bc \t\u00a0x"]
    for text in texts:
        ids = ours.encode(text, add_special_tokens=False)
        assert ids == ref.encode(text, add_special_tokens=False), text
        assert ours.decode(ids) == text
    chat = [{"role": "user", "content": "Où est ma commande #W1? 😀"}, {"role": "assistant", "content": "Ici."}]
    assert ours.apply_chat_template(chat, tokenize=False) == ref.apply_chat_template(chat, tokenize=False)
    assert (ours.eos_token, ours.bos_token, ours.pad_token) == ("<|im_end|>", "<|im_start|>", "<|im_end|>")
    assert ours.convert_tokens_to_ids("<|im_end|>") == 2


@needs_shared
def test_gguf_tokenizer_is_cached_and_a_broken_cache_is_rebuilt(tiny_gguf):
    from toolworld.tokens.tokenizers import _tokenizer_cache_dir, load_gguf_tokenizer

    first = load_gguf_tokenizer(tiny_gguf)
    saved = _tokenizer_cache_dir(tiny_gguf)
    assert (saved / "tokenizer_config.json").is_file()
    (saved / "tokenizer.json").write_text("{not json")
    again = load_gguf_tokenizer(tiny_gguf)
    assert again.encode("hello 42 😀") == first.encode("hello 42 😀")


def test_non_bpe_gguf_is_refused_with_a_way_out(tmp_path):
    pytest.importorskip("gguf")
    from toolworld.tokens.tokenizers import build_gguf_tokenizer

    write_sentencepiece_gguf(tmp_path / "spm.gguf")
    with pytest.raises(ValueError, match="tokenizer=PATH"):
        build_gguf_tokenizer(tmp_path / "spm.gguf")


# -- llama.cpp through xllamacpp ---------------------------------------------------------------------------


def test_engine_returns_ids_with_logprobs_and_is_seeded(engine):
    prompt = chat_ids(engine, "hi")
    gen = generate(engine, prompt)
    assert gen.finish_reason == "length" and len(gen.ids) == 12 == len(gen.logprobs)
    assert all(0 <= i < len(engine.tokenizer) for i in gen.ids)
    assert all(math.isfinite(lp) and lp <= 0 for lp in gen.logprobs)
    assert generate(engine, prompt).ids == gen.ids  # same seed, same sample
    assert any(generate(engine, prompt, seed=s).ids != gen.ids for s in (8, 9, 10))


def test_engine_stops_at_the_callers_stop_id_and_keeps_it(engine):
    prompt = engine.tokenizer.encode("The store opens at", add_special_tokens=False)
    gen = generate(engine, prompt)
    stop = gen.ids[3]
    cut = generate(engine, prompt, stop_ids=[stop])
    assert cut.finish_reason == "stop"
    assert cut.ids == gen.ids[: gen.ids.index(stop) + 1] and cut.ids[-1] == stop


def test_greedy_logprobs_are_the_models_not_zero(engine):
    prompt = engine.tokenizer.encode("Hello there", add_special_tokens=False)
    gen = generate(engine, prompt, temperature=0.0)
    assert gen.ids == generate(engine, prompt, temperature=0.0, seed=99).ids  # greedy ignores the seed
    assert all(lp < 0 for lp in gen.logprobs)  # a random model is never certain


def test_prompt_longer_than_the_context_ends_the_turn(engine):
    gen = generate(engine, [5] * 2100)
    assert gen.ids == [] and gen.finish_reason == "length"


def test_llama_cpp_tokenizer_agrees_on_chat_markup(engine):
    text = "<|im_start|>assistant\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": 12}}\n</tool_call><|im_end|>"
    assert engine.reference_tokenize(text) == engine.tokenizer.encode(text, add_special_tokens=False)
    assert engine.check_tokenizer() == []


def test_toolworld_run_with_a_gguf_policy_keeps_sampled_ids_and_logprobs(tmp_path, tiny_gguf, engine):
    tasks = tmp_path / "tasks.jsonl"
    write_jsonl(tasks, [make_task("cancel", 0), make_task("info", 1)])
    out = tmp_path / "run"
    spec = f"gguf:{tiny_gguf},n_ctx=8192,max_tokens=24,temperature=1.0"
    res = CliRunner().invoke(app, ["run", "retail", "--tasks", str(tasks), "--out", str(out), "--policy", spec,
                                   "--max-turns", "2", "--concurrency", "2"], catch_exceptions=False)  # fmt: skip
    assert res.exit_code == 0, res.output
    with RunStore.open(out) as store:
        trajs = [traj for traj, _score, _facts in store.trials()]
    assert len(trajs) == 2
    for traj in trajs:
        assert traj.termination != "infra_error", traj.infra_errors
        buf = TokenBuffer.from_dict(traj.token_buffer)
        sampled = buf.sampled_ids()
        assert 0 < len(sampled) <= 24 * len(traj.turns)
        assert len(buf.sampled_logprobs()) == len(sampled)
        assert all(math.isfinite(lp) and lp <= 0 for lp in buf.sampled_logprobs())
        assert traj.usage.completion_tokens == len(sampled)
        # the buffer starts with the rendered system + user prompt: the tools are stated in the system message
        head = engine.tokenizer.decode(buf.ids[: buf.mask.index(1)])
        assert "<tool_call>" in head and "cancel_pending_order" in head


# -- vLLM's completions endpoint ---------------------------------------------------------------------------


class FakeTokenizer:
    """Enough of a tokenizer for the engine, which only carries it for the policy."""

    def __len__(self) -> int:
        return 100


def vllm_engine(handler: Any, **kw: Any) -> Any:
    from toolworld.rollout.engines.vllm import VLLMEngine

    return VLLMEngine("m", "http://vllm.test:8000", tokenizer=FakeTokenizer(), backoff_s=0.0,
                      transport=httpx.MockTransport(handler), **kw)  # fmt: skip


def completion(ids: list[int], lps: list[float], finish: str = "stop", *, as_tokens: bool = False) -> dict[str, Any]:
    choice: dict[str, Any] = {"finish_reason": finish, "logprobs": {"token_logprobs": lps}}
    if as_tokens:
        choice["logprobs"]["tokens"] = [f"token_id:{i}" for i in ids]
    else:
        choice["token_ids"] = ids
    return {"choices": [choice]}


def vgen(engine: Any, prompt: list[int] | None = None) -> Any:
    return asyncio.run(engine.generate(prompt or [1, 2, 3], max_tokens=8, temperature=0.7, stop_ids=[9], seed=5))


def test_vllm_sends_ids_and_pins_sampling_then_returns_ids_and_logprobs():
    seen: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/v1/completions"
        seen.append(json.loads(request.content))
        return httpx.Response(200, json=completion([4, 5, 9], [-0.1, -2.0, -0.5]))

    gen = vgen(vllm_engine(handler), [11, 12, 13])
    assert (gen.ids, gen.logprobs, gen.finish_reason) == ([4, 5, 9], [-0.1, -2.0, -0.5], "stop")
    body = seen[0]
    assert body["prompt"] == [11, 12, 13] and body["stop_token_ids"] == [9] and body["seed"] == 5
    assert (body["top_p"], body["top_k"], body["min_p"], body["logprobs"]) == (1.0, -1, 0.0, 1)
    assert body["add_special_tokens"] is False and body["skip_special_tokens"] is False


def test_vllm_older_servers_spell_ids_in_the_logprob_tokens():
    eng = vllm_engine(lambda r: httpx.Response(200, json=completion([7, 8], [-1.0, -1.5], "length", as_tokens=True)))
    gen = vgen(eng)
    assert (gen.ids, gen.finish_reason) == ([7, 8], "length")


def test_vllm_5xx_are_retried_then_succeed():
    calls = {"n": 0}

    def handler(request: httpx.Request) -> httpx.Response:
        calls["n"] += 1
        if calls["n"] < 3:
            return httpx.Response(503, text="overloaded")
        return httpx.Response(200, json=completion([4], [-0.3]))

    eng = vllm_engine(handler)
    assert vgen(eng).ids == [4] and eng.requests == 3


def test_vllm_server_that_keeps_failing_is_an_infra_error_not_an_empty_turn():
    eng = vllm_engine(lambda r: httpx.Response(500, text="boom"), max_retries=2)
    with pytest.raises(InfraError) as info:
        vgen(eng)
    assert info.value.retryable and eng.requests == 3 and "HTTP 500" in str(info.value)


def test_vllm_unreachable_server_is_an_infra_error():
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    with pytest.raises(InfraError, match="cannot reach"):
        vgen(vllm_engine(handler, max_retries=1))


def test_vllm_context_overflow_ends_the_turn_and_bad_requests_are_not_retried():
    long = vllm_engine(lambda r: httpx.Response(400, json={"message": "maximum context length is 4096 tokens"}))
    assert vgen(long).finish_reason == "length" and vgen(long).ids == []
    bad = vllm_engine(lambda r: httpx.Response(404, json={"message": "model m does not exist"}))
    with pytest.raises(InfraError) as info:
        vgen(bad)
    assert not info.value.retryable and bad.requests == 1


@pytest.mark.parametrize(
    "payload, why",
    [
        ({"choices": []}, "no choices"),
        ({"choices": [{"finish_reason": "stop", "logprobs": {"token_logprobs": [-1.0]}}]}, "no token ids"),
        (completion([1, 2], [-1.0]), "2 token ids but 1 logprobs"),
    ],
)
def test_vllm_responses_without_ids_or_logprobs_are_refused(payload, why):
    with pytest.raises(InfraError, match=why):
        vgen(vllm_engine(lambda r: httpx.Response(200, json=payload)))
