"""The ``gguf`` engine records every sampled id and a logprob for each, on the real SmolLM2-135M-Instruct GGUF.

llama.cpp withholds the probabilities of a token whose text ends inside a UTF-8 character, so emoji, CJK and
accented output is where ids or logprobs go missing. The model is pulled once into the cache (a PyPI wheel);
without a network the tests skip and say so. The test session's cache is a fresh temporary folder, so the model
is looked up in (and pulled into) the user's own cache, ``~/.cache/toolworld``, to download it only once.
"""

from __future__ import annotations

import asyncio
import math
import os
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("xllamacpp")

PROMPTS = (
    "Reply only with emoji: 😀👍🏽🇯🇵👨‍👩‍👧‍👦🎉🔥",
    "Translate to Japanese and Chinese: the weather in Tokyo is sunny, 21 degrees. 東京の天気は晴れ。",
    "Écris une phrase en français avec des accents: café, naïve, façade, où, çà, île, Noël.",
)


@pytest.fixture(scope="module")
def smollm2() -> Any:
    from toolworld.rollout.engines.gguf import GGUFEngine
    from toolworld.rollout.models import ModelPullError, ensure_model

    session_cache = os.environ.get("TOOLWORLD_CACHE")
    os.environ["TOOLWORLD_CACHE"] = str(Path.home() / ".cache" / "toolworld")
    try:
        path = ensure_model("smollm2")
    except ModelPullError as exc:
        pytest.skip(f"the SmolLM2 GGUF is not cached and cannot be pulled here ({exc.kind}): {exc}")
    finally:
        if session_cache is not None:
            os.environ["TOOLWORLD_CACHE"] = session_cache
    eng = GGUFEngine(path, n_ctx=2048, threads=2)
    yield eng
    eng.close()


def _prompt(engine: Any, text: str) -> list[int]:
    out = engine.tokenizer.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True)
    return [int(i) for i in (out["input_ids"] if hasattr(out, "keys") else out)]


def test_every_sampled_id_is_recorded_with_a_logprob_on_multibyte_output(smollm2):
    """ids recorded == llama.cpp's own count of sampled tokens == logprobs, and they decode to its text."""
    seen: list[dict[str, Any]] = []
    original = smollm2._post

    async def spy(client: Any, request: dict[str, Any]) -> dict[str, Any]:
        body = await original(client, request)
        if request.get("return_tokens"):
            seen.append(body)
        return body

    smollm2._post = spy
    try:
        rescored = 0
        for n, text in enumerate(PROMPTS):
            for seed in (1,):
                seen.clear()
                gen = asyncio.run(smollm2.generate(_prompt(smollm2, text), max_tokens=32, temperature=1.0,
                                                   stop_ids=[], seed=seed))  # fmt: skip
                body = seen[0]
                assert len(gen.ids) == body["tokens_predicted"] == len(gen.logprobs), (n, seed)
                assert all(math.isfinite(lp) and lp <= 0 for lp in gen.logprobs)
                # llama.cpp's text leaves out an unfinished trailing character and end-of-turn markup
                decoded = smollm2.tokenizer.decode(gen.ids, skip_special_tokens=True).rstrip("\ufffd")
                assert decoded.startswith(body["content"].rstrip("\ufffd")), (decoded, body["content"])
                rescored += gen.rescored
    finally:
        smollm2._post = original
    assert rescored > 0, "no withheld token was produced: the prompts no longer exercise the multi-byte path"


def test_a_rescored_logprob_matches_what_llama_cpp_reports_for_the_same_position(smollm2):
    """The re-scoring path, run on every position of a turn whose logprobs llama.cpp did report, gives the same
    numbers; the first, whose distribution came from evaluating the prompt as one batch, comes close."""
    import httpx

    long_user = "Name three colours. " + " ".join(f"Item {i} is on shelf {i % 7}." for i in range(40))
    prompt = _prompt(smollm2, long_user)
    assert len(prompt) > 200  # long enough that batched and one-by-one evaluation differ numerically
    for temperature in (1.0, 1.3, 0.0):  # top of the distribution, whole vocabulary, untempered
        gen = asyncio.run(smollm2.generate(prompt, max_tokens=4, temperature=temperature, stop_ids=[], seed=3))
        assert gen.rescored == 0  # plain ASCII: nothing withheld

        async def rescore_all(gen: Any = gen, temperature: float = temperature) -> list[float]:
            async with httpx.AsyncClient(timeout=None) as client:  # last position first, as the engine does
                out = {k: await smollm2._rescore(client, prompt, gen.ids[:k], gen.ids[k], temperature)
                       for k in reversed(range(len(gen.ids)))}  # fmt: skip
            return [out[k] for k in range(len(gen.ids))]

        again = asyncio.run(rescore_all())
        assert again[1:] == pytest.approx(gen.logprobs[1:], abs=1e-3), temperature
        assert again[0] == pytest.approx(gen.logprobs[0], abs=0.25), temperature


def test_alignment_leaves_ambiguous_repeats_to_rescoring():
    from toolworld.rollout.engines.gguf import _align_logprobs

    entry = lambda i, lp: {"id": i, "logprob": lp}  # noqa: E731
    assert _align_logprobs([5, 6, 7], [entry(5, -1.0), entry(6, -2.0), entry(7, -3.0)]) == [-1.0, -2.0, -3.0]
    assert _align_logprobs([5, 6, 7], [entry(5, -1.0), entry(7, -3.0)]) == [-1.0, None, -3.0]
    # 9 9 with one withheld: either could be the reported one, so neither is trusted
    assert _align_logprobs([4, 9, 9, 3], [entry(4, -1.0), entry(9, -2.0), entry(3, -3.0)]) == [-1.0, None, None, -3.0]
    # A B A, B withheld and one A withheld: the A entry is placed only if unambiguous (here it is not)
    assert _align_logprobs([1, 2, 1, 8], [entry(1, -1.0), entry(8, -2.0)]) == [None, None, None, -2.0]
    # entries that are not a subsequence are not trusted at all
    assert _align_logprobs([1, 2], [entry(3, -1.0)]) == [None, None]


def test_the_engine_rescores_withheld_positions_to_the_sampling_steps_numbers(smollm2, monkeypatch):
    """Positions llama.cpp withholds are re-scored from the last back, inside the generation's own cache, so they
    get the very numbers the sampling step had (simulated here by hiding reported logprobs of an ASCII turn)."""
    from toolworld.rollout.engines import gguf

    prompt = _prompt(smollm2, "List five fruits. " + " ".join(f"Box {i} holds {i * 3} pears." for i in range(40)))
    args = {"max_tokens": 8, "temperature": 1.0, "stop_ids": [], "seed": 11}
    # The first run evaluates the prompt as a batch; later ones find it cached and evaluate its last token alone,
    # which moves the numbers slightly: compare two runs that both start from the cache.
    asyncio.run(smollm2.generate(prompt, **args))
    reported = asyncio.run(smollm2.generate(prompt, **args))
    assert reported.rescored == 0
    hidden = (2, 3, 6)
    real_align = gguf._align_logprobs

    def withhold(ids: list[int], entries: list[dict[str, Any]]) -> list[float | None]:
        return [None if k in hidden else lp for k, lp in enumerate(real_align(ids, entries))]

    monkeypatch.setattr(gguf, "_align_logprobs", withhold)
    again = asyncio.run(smollm2.generate(prompt, **args))
    assert again.ids == reported.ids and again.rescored == len(hidden)
    assert again.logprobs == pytest.approx(reported.logprobs, abs=1e-3)
