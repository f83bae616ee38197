"""Token-in-token-out: the ``TokenBuffer``, the chat-template bridge and the ``hf`` engine on real tokenizers.

The model is a tiny random-weight Llama built here around the real SmolLM2 tokenizer. To check the prefix
property the sampled ids must be ones a full render would produce, so ``Steered`` adds a large bias to the
logit of a scripted next token: the engine still runs its own sampling loop, KV cache and logprobs.
"""

from __future__ import annotations

import json
import logging
import math
from typing import Any

import pytest

from rollout_kit import run, shared_tokenizer, tool_call_ids_answered
from toolworld.rollout.token_policy import Generation, TokenPolicy
from toolworld.tokens import TitoConversation, TokenBuffer, tool_call_text, tool_system_prompt

SMOL_IM_START, SMOL_IM_END = 1, 2
QWEN_IM_START, QWEN_IM_END, QWEN_NEWLINE, QWEN_THINK = 151644, 151645, 198, 151667

WEATHER_TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Current weather in a city.",
                                      "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                     "required": ["city"]}}},
    {"type": "function", "function": {"name": "get_time", "description": "Local time in a time zone.",
                                      "parameters": {"type": "object", "properties": {"tz": {"type": "string"}},
                                                     "required": ["tz"]}}},
]  # fmt: skip



def encode(tok: Any, text: str) -> list[int]:
    return tok.encode(text, add_special_tokens=False)


def is_prefix(short: list[int], long: list[int]) -> bool:
    return len(short) <= len(long) and long[: len(short)] == short


def sampled_spans(buffer: TokenBuffer) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    for pos, m in enumerate(buffer.mask):
        if m and spans and spans[-1][1] == pos:
            spans[-1] = (spans[-1][0], pos + 1)
        elif m:
            spans.append((pos, pos + 1))
    return spans


# ------------------------------------------------------------------------------------------------ engines


class Recording:
    """Wraps an engine's ``generate`` and keeps every prompt, its keyword arguments and what came back."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine
        self.tokenizer = engine.tokenizer
        self.calls: list[dict[str, Any]] = []

    async def generate(self, prompt_ids: list[int], **kwargs: Any) -> Generation:
        prompt = list(prompt_ids)
        gen = await self.engine.generate(prompt_ids, **kwargs)
        self.calls.append({"prompt": prompt, "kwargs": kwargs, "ids": list(gen.ids),
                           "logprobs": list(gen.logprobs), "finish": gen.finish_reason})  # fmt: skip
        return gen


class FixedEngine:
    """Returns scripted ids, one turn after another, with distinct logprobs so misalignment shows."""

    def __init__(self, tokenizer: Any, turns: list[tuple[list[int], str]]) -> None:
        self.tokenizer = tokenizer
        self.turns = list(turns)
        self.calls: list[dict[str, Any]] = []

    async def generate(self, prompt_ids: list[int], **kwargs: Any) -> Generation:
        ids, finish = self.turns.pop(0)
        logprobs = [-(len(self.calls) + 1) - k / 100 for k in range(len(ids))]
        self.calls.append({"prompt": list(prompt_ids), "kwargs": kwargs, "ids": list(ids), "logprobs": logprobs})
        return Generation(list(ids), logprobs, finish)  # type: ignore[arg-type]


# ----------------------------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def smol_tok() -> Any:
    return shared_tokenizer("smollm2-135m-instruct")


@pytest.fixture(scope="module")
def tiny_lm(smol_tok: Any) -> Any:
    torch = pytest.importorskip("torch")
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(1234)
    config = LlamaConfig(vocab_size=len(smol_tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048,
                         bos_token_id=SMOL_IM_START, eos_token_id=SMOL_IM_END, pad_token_id=SMOL_IM_END)  # fmt: skip
    return LlamaForCausalLM(config).eval()


@pytest.fixture
def steered(tiny_lm: Any) -> Any:
    torch = pytest.importorskip("torch")
    from toolworld.rollout.engines.hf import cache_keyword

    class Steered(torch.nn.Module):
        """The tiny model, except that while ``script`` has ids the next one gets a logit bias no draw escapes."""

        def __init__(self, inner: Any) -> None:
            super().__init__()
            self.inner = inner
            self.config = inner.config
            self.script: list[int] = []

        def forward(self, input_ids: Any, past_key_values: Any = None, use_cache: bool = True,
                    logits_to_keep: int = 0) -> Any:  # fmt: skip
            # the engine passes the cache under this forward's own keyword; the inner model takes its own
            cache = {cache_keyword(self.inner): past_key_values}
            out = self.inner(input_ids=input_ids, use_cache=use_cache, logits_to_keep=logits_to_keep, **cache)
            if self.script:
                out.logits[..., -1, self.script.pop(0)] += 1e4
            return out

    return Steered(tiny_lm)


@pytest.fixture
def hf_engine(steered: Any, smol_tok: Any) -> Recording:
    from toolworld.rollout.engines.hf import HFEngine

    engine = HFEngine(model=steered, tokenizer=smol_tok, device="cpu")
    assert engine.prefix_cache  # the multi-turn tests below also exercise the KV-cache reuse
    return Recording(engine)


# ---------------------------------------------------------------------------------------- the buffer alone


def test_buffer_mask_logprobs_and_serialisation():
    buf = TokenBuffer()
    buf.append_prompt([5, 6, 7], 0)
    buf.append_sampled([8, 9], [-0.5, -1.5], 1)
    buf.append_prompt([10, 11], [2, 3])
    assert buf.ids == [5, 6, 7, 8, 9, 10, 11]
    assert buf.mask == [0, 0, 0, 1, 1, 0, 0]
    assert buf.logprobs == [None, None, None, -0.5, -1.5, None, None]
    assert buf.message_index == [0, 0, 0, 1, 1, 2, 3]
    assert buf.sampled_ids() == [8, 9] and buf.sampled_logprobs() == [-0.5, -1.5]
    with pytest.raises(ValueError, match="align"):
        buf.append_sampled([1, 2], [-0.1], 4)
    with pytest.raises(ValueError, match="message indices"):
        buf.append_prompt([1, 2], [4])
    with pytest.raises(ValueError, match="sampled"):
        buf.truncate(4)
    assert len(buf) == 7  # a refused truncate leaves everything in place
    buf.truncate(6)
    assert buf.ids == [5, 6, 7, 8, 9, 10]
    buf.record("break", "test", counts_as_break=True)
    buf.record("divergence", "test", counts_as_break=False)
    assert buf.breaks == 1 and [e["at_token"] for e in buf.events] == [6, 6]

    data = json.loads(json.dumps(buf.to_dict()))
    assert data["sampled_spans"] == [[3, 5]]
    back = TokenBuffer.from_dict(data)
    assert (back.ids, back.mask, back.logprobs, back.message_index, back.breaks, back.events) == (
        buf.ids, buf.mask, buf.logprobs, buf.message_index, buf.breaks, buf.events)  # fmt: skip
    with pytest.raises(ValueError):
        TokenBuffer.from_dict({**data, "sampled_logprobs": [-0.5]})


# --------------------------------------------------------------------------------- the hf engine, SmolLM2


def test_hf_buffer_holds_exactly_the_sampled_ids_and_logprobs(smol_tok, tiny_lm, hf_engine):
    """Free sampling from the random model: each buffer is the engine's output verbatim, mask and logprobs
    included. Two episodes share the engine with their turns interleaved, so every call after the first crops
    the other episode's KV cache back to the shared prefix."""
    torch = pytest.importorskip("torch")
    temperature = 0.7
    policy = TokenPolicy(hf_engine, name="tiny", max_tokens=6, temperature=temperature)
    sessions = [policy.start(tools=[], seed=seed) for seed in (7, 8)]
    convs: list[list[dict[str, Any]]] = [[{"role": "user", "content": "Hi there"}] for _ in sessions]
    for n in range(3):
        for session, msgs in zip(sessions, convs, strict=True):
            turn = run(session.respond(msgs))
            msgs += [turn.to_message(), {"role": "user", "content": f"Tell me more ({n})."}]
    assert len(hf_engine.calls) == 6
    assert hf_engine.calls[0]["prompt"] == hf_engine.calls[1]["prompt"]
    assert hf_engine.calls[0]["ids"] != hf_engine.calls[1]["ids"]  # other seeds: the episodes diverge

    for k, session in enumerate(sessions):
        buf, calls = session.buffer, hf_engine.calls[k::2]
        expected_mask = [0] * len(buf)
        for n, call in enumerate(calls):
            start, ids = len(call["prompt"]), call["ids"]
            assert call["kwargs"]["stop_ids"] == [SMOL_IM_END]
            assert 1 <= len(ids) <= 6
            assert buf.ids[:start] == call["prompt"]  # what the engine saw stays in the buffer unchanged
            assert buf.ids[start:start + len(ids)] == ids
            assert buf.logprobs[start:start + len(ids)] == call["logprobs"]
            assert set(buf.message_index[start:start + len(ids)]) == {2 * n + 1}
            expected_mask[start:start + len(ids)] = [1] * len(ids)
        assert buf.mask == expected_mask
        assert buf.sampled_ids() == [i for call in calls for i in call["ids"]]
        assert all(lp is None for lp, m in zip(buf.logprobs, buf.mask, strict=True) if not m)
        sampled_lp = buf.sampled_logprobs()
        assert all(math.isfinite(lp) and lp <= 0 for lp in sampled_lp)

        # One teacher-forced pass over the whole sequence gives every sampled token's logprob again: equality
        # shows each logprob belongs to its own token and context, and that the cache reuse is sound.
        seq = calls[-1]["prompt"] + calls[-1]["ids"]
        with torch.inference_mode():
            logits = tiny_lm(input_ids=torch.tensor([seq])).logits[0].float()
        logp = torch.log_softmax(logits / temperature, dim=-1)
        recomputed = [float(logp[pos - 1, seq[pos]]) for pos in range(len(seq)) if buf.mask[pos]]
        assert recomputed == pytest.approx(sampled_lp, abs=2e-3)

    # A retry of the first call (same prompt, same seed) samples the same ids, through a cache cropped to all
    # but the last prompt token.
    first = hf_engine.calls[0]
    again = run(hf_engine.engine.generate(first["prompt"], **first["kwargs"]))
    assert again.ids == first["ids"]
    assert again.logprobs == pytest.approx(first["logprobs"], abs=1e-4)

    # Greedy decoding takes the argmax and reports the untempered logprob.
    greedy = run(hf_engine.engine.generate(first["prompt"], max_tokens=4, temperature=0.0, stop_ids=[], seed=None))
    seq = first["prompt"] + greedy.ids
    with torch.inference_mode():
        logp = torch.log_softmax(tiny_lm(input_ids=torch.tensor([seq])).logits[0].float(), dim=-1)
    steps = range(len(first["prompt"]) - 1, len(seq) - 1)
    assert greedy.finish_reason == "length" and len(greedy.ids) == 4
    assert greedy.ids == [int(logp[pos].argmax()) for pos in steps]
    assert greedy.logprobs == pytest.approx([float(logp[pos].max()) for pos in steps], abs=2e-3)


def smol_expected_render(tok: Any, msgs: list[dict[str, Any]], tools: list[dict[str, Any]], *,
                         generation_prompt: bool) -> list[int]:  # fmt: skip
    """The full render written out by hand: SmolLM2's template ignores tools, so they are stated in the system
    message and calls are written inline, as the bridge promises."""
    out = []
    for m in msgs:
        m = dict(m)
        if m["role"] == "system":
            m["content"] = f"{m['content']}\n\n{tool_system_prompt(tools)}"
        if m.get("tool_calls"):
            text = tool_call_text(m.pop("tool_calls"))
            m["content"] = f"{m['content']}\n{text}" if m["content"] else text
        out.append(m)
    text = tok.apply_chat_template(out, tokenize=False, add_generation_prompt=generation_prompt)
    return encode(tok, text)


def test_hf_ten_turn_episode_keeps_the_prefix_property(smol_tok, steered, hf_engine):
    tok = smol_tok
    policy = TokenPolicy(hf_engine, name="tiny", max_tokens=64)
    session = policy.start(tools=WEATHER_TOOLS, seed=11)
    buf = session.buffer

    def call(name: str, **arguments: Any) -> dict[str, Any]:
        return {"name": name, "arguments": arguments}

    sky_tokyo = '{"city": "東京", "sky": "晴れ ☀️", "temp_c": 21}'
    # Each entry: what the model writes, whether it closes the turn, and the messages that answer it.
    script: list[tuple[str, bool, list[dict[str, Any]]]] = [
        (tool_call_text([call("get_weather", city="東京")]), True,
         [{"role": "tool", "tool_call_id": "call_0", "content": sky_tokyo}]),
        (tool_call_text([call("get_weather", city="Paris"), call("get_time", tz="Europe/Paris")]), True,
         [{"role": "tool", "tool_call_id": "call_0", "content": '{"sky": "nuageux 🌥", "temp_c": 18}'},
          {"role": "tool", "tool_call_id": "call_1", "content": '{"time": "14:05", "note": "l’heure d’été"}'}]),
        ("Tokyo is sunny ☀️ (21°C); Paris is cloudy at 18°C.", True,
         [{"role": "user", "content": "Merci! Now 서울 please 🙏"}]),
        (tool_call_text([call("get_weather", city="서울")]), True,
         [{"role": "tool", "tool_call_id": "call_0", "content": '{"sky": "흐림 ☁️", "alerts": ["🌧 비"]}'}]),
        ("Seoul is cloudy and", False, [{"role": "user", "content": "You were cut off. Go on."}]),
        (tool_call_text([call("get_time", tz="Asia/Seoul")]), True,
         [{"role": "tool", "tool_call_id": "call_0", "content": '{"time": "22:05", "dev": "👩‍💻🇰🇷"}'}]),
        ("Seoul is cloudy with rain 🌧, it is 22:05 there.", True,
         [{"role": "user", "content": "And Beijing, 北京？ Also the time in 東京."}]),
        (tool_call_text([call("get_weather", city="北京"), call("get_time", tz="Asia/Tokyo")]), True,
         [{"role": "tool", "tool_call_id": "call_0", "content": '{"sky": "霾 😷", "aqi": 180}'},
          {"role": "tool", "tool_call_id": "call_1", "content": '{"time": "23:05 🌙"}'}]),
        (tool_call_text([call("get_weather", city="Zürich")]), True,
         [{"role": "tool", "tool_call_id": "call_0", "content": '{"error": "unknown city «Zürich»"}'}]),
        ("北京 is hazy 😷 and it is 23:05 in 東京. Done 🎉", True, []),
    ]  # fmt: skip
    assert len(script) == 10
    msgs: list[dict[str, Any]] = [{"role": "system", "content": "You are a weather desk."},
                                  {"role": "user", "content": "Weather in 東京 today? 🙂"}]  # fmt: skip
    for n, (text, closes, answers) in enumerate(script):
        forced = encode(tok, text)
        expected = [*forced, SMOL_IM_END] if closes else forced
        steered.script = list(expected)
        policy.max_tokens = len(forced) + 8 if closes else len(forced)
        before = len(buf)
        turn = run(session.respond(msgs))
        call_record = hf_engine.calls[-1]
        prompt = call_record["prompt"]

        # After the append: the prompt is exactly a full render of the conversation with the generation prompt.
        assert prompt == buf.ids[: len(prompt)]
        assert prompt == smol_expected_render(tok, msgs, WEATHER_TOOLS, generation_prompt=True), f"turn {n}"
        if n:
            delta = tok.decode(prompt[before:])
            for m in msgs[len(msgs) - len(script[n - 1][2]):]:
                assert m["content"] in delta  # emoji and CJK in tool results and user messages arrive intact
        # Tokens are attributed to the message they render.
        for k, m in enumerate(msgs):
            own = [i for i, idx in zip(buf.ids, buf.message_index, strict=True) if idx == k]
            assert m["content"] in tok.decode(own)

        # After sampling: the buffer holds the engine's ids and is a prefix of the render including this turn.
        assert call_record["ids"] == expected
        assert call_record["finish"] == ("stop" if closes else "length")
        assert buf.ids[len(prompt):] == call_record["ids"] and buf.mask[len(prompt):] == [1] * len(call_record["ids"])
        assert turn.text == text
        msgs.append(turn.to_message())
        assert is_prefix(buf.ids, smol_expected_render(tok, msgs, WEATHER_TOOLS, generation_prompt=False))
        msgs += answers

    assert tool_call_ids_answered(msgs)
    assert sum(1 for m in msgs if m["role"] == "tool") == 8
    assert buf.breaks == 0 and buf.events == []
    assert buf.sampled_ids() == [i for c in hf_engine.calls for i in c["ids"]]
    expected_mask = [0] * len(buf)
    for c in hf_engine.calls:
        start = len(c["prompt"])
        expected_mask[start:start + len(c["ids"])] = [1] * len(c["ids"])
    assert buf.mask == expected_mask
    spans = sampled_spans(buf)
    assert len(spans) == 10
    assert all(tok.decode(buf.ids[:a]).endswith("<|im_start|>assistant\n") for a, _ in spans)
    # The turn cut by the length limit was closed with the template's end-of-turn token before the next message.
    cut_end = spans[4][1]
    assert buf.ids[cut_end] == SMOL_IM_END and buf.mask[cut_end] == 0
    assert all(lp is not None and math.isfinite(lp) and lp <= 0 for lp in buf.sampled_logprobs())
    assert len(buf.sampled_logprobs()) == sum(buf.mask)


def test_hf_ids_that_do_not_survive_reencoding_are_kept(smol_tok, steered, hf_engine):
    """'Hel'+'lo', and 'é' as its two bytes, re-encode to other ids; a '☕' cut after two of its three bytes
    does not even decode. The buffer keeps all of them exactly as sampled."""
    tok = smol_tok
    hel, lo, caf, byte_c3, byte_a9, bang = (tok.convert_tokens_to_ids(t) for t in ("Hel", "lo", "Ġcaf", "Ã", "©", "!"))
    first = [hel, lo, caf, byte_c3, byte_a9, bang, SMOL_IM_END]
    assert tok.decode(first[:-1]) == "Hello café!"
    assert encode(tok, "Hello café!") != first[:-1]  # otherwise this test would prove nothing
    coffee = encode(tok, "Tea ☕")
    assert len(coffee) >= 3 and tok.decode(coffee) == "Tea ☕"
    second = coffee[:-1]  # the last byte of the cup is never sampled
    assert "\ufffd" in tok.decode(second)

    policy = TokenPolicy(hf_engine, name="tiny", max_tokens=16)
    session = policy.start(tools=[], seed=3)
    session.conversation.check_full_render = True
    buf = session.buffer
    msgs: list[dict[str, Any]] = [{"role": "user", "content": "Say hello."}]

    steered.script = list(first)
    turn = run(session.respond(msgs))
    assert turn.token_ids == first and turn.text == "Hello café!" and turn.content == "Hello café!"
    kept = list(buf.ids)
    start = len(hf_engine.calls[0]["prompt"])
    assert kept[start:] == first

    msgs += [turn.to_message(), {"role": "user", "content": "And a drink?"}]
    steered.script = list(second)
    policy.max_tokens = len(second)
    turn = run(session.respond(msgs))
    assert turn.finish_reason == "length" and turn.token_ids == second
    assert buf.ids[: len(kept)] == kept  # appending the next turn rewrote nothing
    second_start = len(hf_engine.calls[1]["prompt"])
    assert buf.ids[second_start:] == second

    msgs += [turn.to_message(), {"role": "user", "content": "Thanks."}]
    n_before = len(buf)
    session.conversation.prompt_ids(msgs)
    assert buf.ids[: len(kept)] == kept
    assert buf.ids[second_start:n_before] == second  # the half character is still there, as sampled
    assert buf.ids[n_before] == SMOL_IM_END  # closed by the template's token, not by re-encoding the text
    assert buf.sampled_ids() == first + second

    # A re-render-everything implementation would have fed other ids; the bridge notices, records it, and does
    # not count it as a template break.
    divergences = [e for e in buf.events if e["kind"] == "divergence"]
    assert divergences and divergences[0]["first_token"] == start
    assert buf.breaks == 0


# ---------------------------------------------------------------------------------- templates, fake engines


def test_qwen3_fallback_counts_a_break_and_never_rewrites_the_buffer(caplog):
    """Qwen3 keeps the reasoning of turns after the last user message and drops it once a new user message
    follows. The first case bridges; the second cannot, so the bridge falls back to a re-render of the new
    messages, loudly, and leaves the buffer as it was."""
    tok = shared_tokenizer("qwen3")
    call_text = tool_call_text([{"name": "get_weather", "arguments": {"city": "東京"}}])
    first = [*encode(tok, f"<think>\nI need the weather.\n</think>\n\n{call_text}"), QWEN_IM_END]
    second = [*encode(tok, "<think>\nIt is sunny.\n</think>\n\nSunny in 東京 ☀️."), QWEN_IM_END]
    third = encode(tok, "Osaka is")
    engine = FixedEngine(tok, [(first, "stop"), (second, "stop"), (third, "length"), (encode(tok, "Bye"), "stop")])
    policy = TokenPolicy(engine, name="fixed")
    session = policy.start(tools=WEATHER_TOOLS, seed=0)
    template = session.conversation.template
    buf = session.buffer
    msgs: list[dict[str, Any]] = [{"role": "user", "content": "Weather in 東京?"}]

    turn = run(session.respond(msgs))
    assert turn.tool_calls and QWEN_THINK in first
    result = {"role": "tool", "tool_call_id": turn.tool_calls[0].id, "content": '{"sky": "晴れ ☀️"}'}
    assert turn.reasoning == "I need the weather."  # split off the sampled text, and kept in the message
    msgs += [turn.to_message(), result]
    assert msgs[-2]["reasoning_content"] == "I need the weather." and "<think>" not in msgs[-2]["content"]
    turn = run(session.respond(msgs))
    assert buf.breaks == 0 and buf.events == []
    assert engine.calls[1]["prompt"] == template.render_ids(msgs, add_generation_prompt=True)  # bridged exactly

    kept = list(buf.ids)
    msgs += [turn.to_message(), {"role": "user", "content": "Thanks! And 大阪?"}]
    assert msgs[-2]["reasoning_content"] == "It is sunny."
    with caplog.at_level(logging.WARNING, logger="toolworld.tito"):
        turn = run(session.respond(msgs))
    assert buf.breaks == 1
    (event,) = buf.events
    assert event["kind"] == "break" and event["at_token"] == len(kept) and event["message_index"] == 3
    assert any("fallback" in r.getMessage() and r.levelno == logging.WARNING for r in caplog.records)
    prompt = engine.calls[2]["prompt"]
    assert prompt[: len(kept)] == kept  # both turns, reasoning included, stay as sampled
    assert tok.decode(prompt[len(kept):]) == "\n<|im_start|>user\nThanks! And 大阪?<|im_end|>\n<|im_start|>assistant\n"
    # The template's own render has dropped the reasoning of both turns: the buffer is no longer a prefix of it
    # and keeps what the model actually saw.
    full = template.render_ids(msgs, add_generation_prompt=True)
    assert not is_prefix(prompt, full)
    assert prompt.count(QWEN_THINK) == 2 and full.count(QWEN_THINK) == 0

    end = len(buf)
    msgs += [turn.to_message(), {"role": "user", "content": "Go on."}]
    run(session.respond(msgs))
    assert buf.breaks == 2 and [e["kind"] for e in buf.events] == ["break", "break"]
    assert buf.ids[end - len(third):end] == third
    # A turn cut by the length limit is closed with <|im_end|> by the fallback too.
    assert buf.ids[end:end + 3] == [QWEN_IM_END, QWEN_NEWLINE, QWEN_IM_START] and buf.mask[end] == 0
    assert buf.ids[: len(prompt)] == prompt
    assert buf.sampled_ids() == first + second + third + encode(tok, "Bye")
    assert buf.sampled_logprobs() == [lp for c in engine.calls for lp in c["logprobs"]]


def test_qwen25_stop_ids_and_end_of_turn_splice():
    """Qwen2.5 stops at <|im_end|> and its template writes <|im_end|>\\n: the '\\n' comes with the next delta, and
    a turn cut by the length limit is closed with <|im_end|> first."""
    tok = shared_tokenizer("qwen2.5-instruct")
    conv = TitoConversation(tok, WEATHER_TOOLS)
    assert QWEN_IM_END in conv.stop_ids and QWEN_IM_START not in conv.stop_ids

    answer = [*encode(tok, "Hi! 你好 👋"), QWEN_IM_END]
    cut = encode(tok, "Let me look that up")
    call = [*encode(tok, tool_call_text([{"name": "get_weather", "arguments": {"city": "東京"}}])), QWEN_IM_END]
    engine = FixedEngine(tok, [(answer, "stop"), (cut, "length"), (call, "stop"), (encode(tok, "Sunny."), "stop")])
    policy = TokenPolicy(engine, name="fixed")
    session = policy.start(tools=WEATHER_TOOLS, seed=0)
    buf = session.buffer
    template = session.conversation.template
    msgs: list[dict[str, Any]] = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]

    turn = run(session.respond(msgs))
    assert engine.calls[0]["kwargs"]["stop_ids"] == conv.stop_ids
    end = len(buf)
    msgs += [turn.to_message(), {"role": "user", "content": "Weather in 東京?"}]
    turn = run(session.respond(msgs))
    assert buf.ids[end - 1] == QWEN_IM_END and buf.ids[end:end + 2] == [QWEN_NEWLINE, QWEN_IM_START]
    assert buf.ids.count(QWEN_IM_END) == len(msgs)  # one per finished message, none doubled
    assert is_prefix(engine.calls[1]["prompt"], template.render_ids(msgs, add_generation_prompt=True))

    end = len(buf)
    msgs += [turn.to_message(), {"role": "user", "content": "Go on."}]
    turn = run(session.respond(msgs))
    assert buf.ids[end - len(cut):end] == cut
    assert buf.ids[end:end + 3] == [QWEN_IM_END, QWEN_NEWLINE, QWEN_IM_START] and buf.mask[end] == 0
    assert engine.calls[2]["prompt"] == template.render_ids(msgs, add_generation_prompt=True)
    assert turn.tool_calls and turn.tool_calls[0].arguments == {"city": "東京"}

    end = len(buf)
    result = '{"sky": "晴れ ☀️", "temp_c": 21}'
    msgs += [turn.to_message(), {"role": "tool", "tool_call_id": turn.tool_calls[0].id, "content": result}]
    run(session.respond(msgs))
    delta = tok.decode(engine.calls[3]["prompt"][end:])
    assert delta == f"\n<|im_start|>user\n<tool_response>\n{result}\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
    assert buf.breaks == 0 and buf.events == []
    assert buf.sampled_ids() == answer + cut + call + encode(tok, "Sunny.")


def test_prompt_retry_takes_back_only_prompt_tokens(smol_tok):
    """A retried prompt (after an infrastructure error) feeds the same ids; messages added before the sample
    replace the unsampled prompt tokens; sampled tokens are never taken back."""
    conv = TitoConversation(smol_tok)
    msgs: list[dict[str, Any]] = [{"role": "user", "content": "Hi"}]
    first = conv.prompt_ids(msgs)
    assert conv.prompt_ids(msgs) == first
    sampled = [*encode(smol_tok, "Hello 🙂"), SMOL_IM_END]
    assert conv.record_sampled(sampled, [-0.5] * len(sampled), 1) == "Hello 🙂"
    after_sample = list(conv.buffer.ids)

    msgs += [{"role": "assistant", "content": "Hello 🙂"}, {"role": "user", "content": "Weather?"}]
    conv.prompt_ids(msgs)
    msgs.append({"role": "user", "content": "In 東京, I mean."})
    again = conv.prompt_ids(msgs)
    assert again[: len(after_sample)] == after_sample
    assert again == conv.template.render_ids(msgs, add_generation_prompt=True)
    assert conv.buffer.sampled_ids() == sampled and conv.buffer.mask.count(1) == len(sampled)
    with pytest.raises(ValueError, match="appended"):
        conv.prompt_ids(msgs[:1])  # drops the sampled turn
    assert conv.prompt_ids(msgs) == again
    with pytest.raises(ValueError, match="message 4"):
        conv.record_sampled([5], [-0.1], 3)


# ------------------------------------------------------------------------------ the hf engine, batched decoding


def _count_prefills(engine: Any, together: list[list[int]] | None = None) -> list[int]:
    """Wrap the engine's prefill forwards: the list fills with the number of ids each prompt reads (alone or read
    together with others); ``together``, when given, with the ids read per forward that read several prompts."""
    prefilled: list[int] = []
    forward, read_together = engine._forward, engine._read_together

    def counting(ids: list[int], cache: Any) -> Any:
        prefilled.append(len(ids))
        return forward(ids, cache)

    def counting_together(parts: Any) -> Any:
        prefilled.extend(len(ids) for ids, _, _ in parts)
        if together is not None:
            together.append([len(ids) for ids, _, _ in parts])
        return read_together(parts)

    engine._forward, engine._read_together = counting, counting_together
    return prefilled


def _record_batches(engine: Any) -> list[int]:
    """Wrap the engine's batch call: the list fills with the size of each batch it decodes."""
    sizes: list[int] = []
    real = engine.generate_batch_sync

    def recording(requests: Any, **kw: Any) -> Any:
        sizes.append(len(requests))
        return real(requests, **kw)

    engine.generate_batch_sync = recording
    return sizes


def _alone(engine: Any, req: Any) -> Generation:
    return engine.generate_sync(req.prompt_ids, max_tokens=req.max_tokens, temperature=req.temperature,
                                stop_ids=req.stop_ids, seed=req.seed)  # fmt: skip


def test_hf_batched_rows_get_what_they_would_alone(smol_tok, tiny_lm):
    """Prompts of different lengths, temperatures, seeds, budgets and stops decoded as one batch: every row gets
    the ids, finish reason and logprobs it gets when decoded alone (left padding, masks and per-row positions
    are right), and rows that stop early leave the batch without disturbing the others."""
    pytest.importorskip("torch")
    from toolworld.rollout.engines.hf import BatchRequest, HFEngine

    alone = HFEngine(model=tiny_lm, tokenizer=smol_tok, device="cpu", prefix_cache=False)
    batched = HFEngine(model=tiny_lm, tokenizer=smol_tok, device="cpu", max_batch=8)
    prompts = [list(range(100, 100 + n)) for n in (5, 41, 12, 90, 3, 2045)]
    reqs = [BatchRequest(p, 12, t, [SMOL_IM_END], s)
            for p, t, s in zip(prompts, (0.0, 1.0, 0.7, 0.0, 1.3, 0.0), (1, 2, 3, 4, 5, 6), strict=True)]  # fmt: skip
    reqs[2].max_tokens = 3
    greedy = _alone(alone, reqs[3])
    reqs[3].stop_ids = [greedy.ids[4]]  # stops on its fifth id, long before the others
    reqs.insert(1, BatchRequest([], 5, 1.0, [], 9))  # nothing to continue: an empty generation, as alone
    expected = [_alone(alone, r) for r in reqs]
    got = batched.generate_batch_sync(reqs)
    assert [g.ids for g in got] == [e.ids for e in expected]
    assert [g.finish_reason for g in got] == [e.finish_reason for e in expected]
    for g, e in zip(got, expected, strict=True):
        assert g.logprobs == pytest.approx(e.logprobs, abs=1e-4)
    assert got[1].ids == [] and got[4].finish_reason == "stop" and len(got[4].ids) == 5
    assert len(got[3].ids) == 3 and got[3].finish_reason == "length"
    assert len(got[6].ids) == 3  # 2045 prompt ids in a 2048-token context leave room for 3
    assert len({tuple(g.ids) for g in got[2:6]}) == 4  # the rows are not one row repeated


def test_hf_next_turns_read_their_new_ids_in_one_forward(smol_tok, tiny_lm):
    """A batch of next turns (each prompt extends its episode's kept turn by new ids of its own length) reads the
    new ids of rows of similar lengths in one forward, padded in the middle of the rows: every row still gets the
    ids and logprobs it gets alone, and the same as with ``batch_prefill`` off, which reads one prompt per
    forward."""
    pytest.importorskip("torch")
    from toolworld.rollout.engines.hf import BatchRequest, HFEngine

    alone = HFEngine(model=tiny_lm, tokenizer=smol_tok, device="cpu", prefix_cache=False)
    firsts = [BatchRequest([1000 + i, *range(500, 500 + n)], budget, t, [], seed)
              for i, (n, budget, t, seed) in enumerate(((9, 3, 1.0, 1), (60, 5, 0.0, 2), (25, 2, 0.8, 3),
                                                        (140, 4, 1.1, 4)))]  # fmt: skip
    news = ([7, 8, 9], list(range(600, 690)), [11], list(range(700, 731)))

    def play(batch_prefill: bool) -> tuple[list[Generation], list[int], list[list[int]]]:
        engine = HFEngine(model=tiny_lm, tokenizer=smol_tok, device="cpu", max_batch=4, batch_prefill=batch_prefill)
        replies = engine.generate_batch_sync(firsts)
        seconds = [BatchRequest(r.prompt_ids + g.ids + new, 6, r.temperature, [], r.seed + 10)
                   for r, g, new in zip(firsts, replies, news, strict=True)]  # fmt: skip
        together: list[list[int]] = []
        prefilled = _count_prefills(engine, together)
        return replies + engine.generate_batch_sync(seconds), prefilled, together

    got, prefilled, together = play(True)
    seconds = [BatchRequest(r.prompt_ids + g.ids + new, 6, r.temperature, [], r.seed + 10)
               for r, g, new in zip(firsts, got[:4], news, strict=True)]  # fmt: skip
    expected = [_alone(alone, r) for r in firsts + seconds]
    assert [g.ids for g in got] == [e.ids for e in expected]
    for g, e in zip(got, expected, strict=True):
        assert g.logprobs == pytest.approx(e.logprobs, abs=1e-4)
    # each reads its new ids and the last id of its reply (kept without it); rows of similar lengths together, so
    # that a long read is not padded onto short ones
    assert together == [[2, 4], [32, 91]] and sorted(prefilled) == sorted(len(new) + 1 for new in news)
    off, prefilled_off, together_off = play(False)
    assert [g.ids for g in off] == [g.ids for g in got] and together_off == []
    assert prefilled_off == [len(new) + 1 for new in news]


def test_rows_read_together_are_of_similar_lengths():
    """A forward pads every row it reads to the longest: a group grows while its padded size stays within 1.5
    times the ids it reads, so seven 1-id continuations are not padded to a 300-id tool result."""
    from toolworld.rollout.engines.hf import _similar_lengths

    assert _similar_lengths([1, 300, 1, 1, 250, 200, 1, 40], key=int) == [[1, 1, 1, 1], [40], [200, 250, 300]]
    assert _similar_lengths([196, 121, 171, 146], key=int) == [[121, 146, 171, 196]]  # 784 padded for 634
    assert _similar_lengths([296, 121, 171, 146], key=int) == [[121, 146, 171], [296]]  # 1,184 for 734: too many
    assert _similar_lengths([], key=int) == []


def test_hf_batched_engine_serves_concurrent_turns_together(smol_tok, tiny_lm):
    """Turns that arrive together are decoded together, ``max_batch`` at a time; a failing batch fails only its
    own calls (as an InfraError), and the next batch runs."""
    torch = pytest.importorskip("torch")
    import asyncio

    from toolworld.core.errors import InfraError
    from toolworld.rollout.engines.hf import HFEngine

    engine = HFEngine(model=tiny_lm, tokenizer=smol_tok, device="cpu", max_batch=2)
    sizes = _record_batches(engine)
    recording = engine.generate_batch_sync
    kw = {"max_tokens": 4, "temperature": 1.0, "stop_ids": []}

    async def many(n: int) -> list[Any]:
        return await asyncio.gather(*(engine.generate(list(range(50, 60 + i)), seed=i, **kw) for i in range(n)),
                                    return_exceptions=True)  # fmt: skip

    got = run(many(5))
    assert sizes == [2, 2, 1]
    assert len(engine._rows) == 4  # the pool keeps the 2 * max_batch most recent rows
    alone = HFEngine(model=tiny_lm, tokenizer=smol_tok, device="cpu", prefix_cache=False)
    assert [g.ids for g in got] == [alone.generate_sync(list(range(50, 60 + i)), seed=i, **kw).ids for i in range(5)]

    def broken(requests: Any, **kw: Any) -> Any:
        if len(sizes) == 3:
            sizes.append(len(requests))
            raise RuntimeError("CUDA out of memory")
        return recording(requests, **kw)

    engine.generate_batch_sync = broken  # type: ignore[method-assign]
    got = run(many(3))
    assert sizes[3:] == [2, 1]
    assert all(isinstance(g, InfraError) and "out of memory" in str(g) for g in got[:2])
    assert isinstance(got[2], Generation) and len(got[2].ids) == 4
    with pytest.raises(ValueError, match="max_batch"):
        HFEngine(model=tiny_lm, tokenizer=smol_tok, device="cpu", max_batch=0)
    assert torch is not None


def test_hf_batch_hands_back_its_running_rows_and_they_continue_as_they_would_have(smol_tok, tiny_lm):
    """``hand_back``: once half of the rows have stopped the batch returns, the rows still running come back
    unfinished with their generators, and a continuation (prompt plus what they drew, the budget less it) draws the
    ids and logprobs the row would have drawn alone, reading one new token (its keys and values were kept)."""
    pytest.importorskip("torch")
    from toolworld.rollout.engines.hf import BatchRequest, HFEngine, Unfinished

    alone = HFEngine(model=tiny_lm, tokenizer=smol_tok, device="cpu", prefix_cache=False)
    engine = HFEngine(model=tiny_lm, tokenizer=smol_tok, device="cpu", max_batch=4)
    reqs = [BatchRequest(list(range(200, 200 + n)), budget, t, [], seed)
            for n, budget, t, seed in ((7, 2, 1.0, 1), (30, 3, 0.0, 2), (12, 9, 0.9, 3), (50, 12, 1.2, 4))]  # fmt: skip
    expected = [_alone(alone, r) for r in reqs]
    got = engine.generate_batch_sync(reqs, hand_back=True)
    assert [g.ids for g in got[:2]] == [e.ids for e in expected[:2]]  # stopped: handed back whole
    assert all(isinstance(g, Unfinished) for g in got[2:]) and [len(g.ids) for g in got[2:]] == [3, 3]
    prefilled = _count_prefills(engine)
    parts = got[2:]
    rest = [BatchRequest(r.prompt_ids + g.ids, r.max_tokens - len(g.ids), r.temperature, r.stop_ids, r.seed)
            for r, g in zip(reqs[2:], parts, strict=True)]  # fmt: skip
    more = engine.generate_batch_sync(rest, generators=[g.generator for g in parts])
    assert prefilled == [1, 1]
    for g, m, e in zip(parts, more, expected[2:], strict=True):
        assert g.ids + m.ids == e.ids and m.finish_reason == e.finish_reason
        assert g.logprobs + m.logprobs == pytest.approx(e.logprobs, abs=1e-4)
    assert engine.generate_batch_sync(reqs) and all(
        not isinstance(g, Unfinished) for g in engine.generate_batch_sync(reqs))  # off by default: runs to the end


def test_hf_batched_engine_lets_the_next_turn_join_a_long_reply(smol_tok, tiny_lm):
    """An episode whose reply stopped early sends its next turn while another episode's long reply is still being
    decoded: the next batch holds both (the long reply handed back and continued), and every reply is what it is
    alone. Without hand back the next turn waits until the long reply ends."""
    pytest.importorskip("torch")
    import asyncio

    from toolworld.rollout.engines.hf import HFEngine

    alone = HFEngine(model=tiny_lm, tokenizer=smol_tok, device="cpu", prefix_cache=False)

    def play(hand_back: bool) -> tuple[list[list[int]], list[int]]:
        engine = HFEngine(model=tiny_lm, tokenizer=smol_tok, device="cpu", max_batch=2, hand_back=hand_back)
        sizes = _record_batches(engine)

        async def short_turns() -> list[int]:
            first = await engine.generate(list(range(300, 320)), max_tokens=2, temperature=1.0, stop_ids=[], seed=5)
            second = await engine.generate(list(range(300, 320)) + first.ids + [77, 78], max_tokens=3,
                                           temperature=1.0, stop_ids=[], seed=6)  # fmt: skip
            return first.ids + second.ids

        async def both() -> list[Any]:
            long = engine.generate(list(range(400, 440)), max_tokens=20, temperature=0.8, stop_ids=[], seed=7)
            return list(await asyncio.gather(short_turns(), long))

        short, long = run(both())
        return [short, long.ids], sizes

    (short, long), sizes = play(True)
    want_long = alone.generate_sync(list(range(400, 440)), max_tokens=20, temperature=0.8, stop_ids=[], seed=7)
    first = alone.generate_sync(list(range(300, 320)), max_tokens=2, temperature=1.0, stop_ids=[], seed=5)
    second = alone.generate_sync(list(range(300, 320)) + first.ids + [77, 78], max_tokens=3, temperature=1.0,
                                 stop_ids=[], seed=6)  # fmt: skip
    assert long == want_long.ids and short == first.ids + second.ids
    assert sizes[:2] == [2, 2]  # the second turn decoded beside the long reply's continuation
    (short_off, long_off), sizes_off = play(False)
    assert (short_off, long_off) == (short, long) and sizes_off == [2, 1]


def test_hf_batched_engine_gives_freed_memory_back_after_each_batch(smol_tok, tiny_lm, monkeypatch):
    """Every batch builds caches of its own size; once they are freed the heap is trimmed (after a failed batch
    too), and so it is when the prefix cache is dropped: otherwise a sampling pass's resident memory climbs
    batch after batch (~21 GB in 300 episodes of SmolLM2 on a CPU)."""
    pytest.importorskip("torch")
    from toolworld.rollout.engines import hf

    calls: list[int] = []
    engine = hf.HFEngine(model=tiny_lm, tokenizer=smol_tok, device="cpu", max_batch=4)
    monkeypatch.setattr(hf, "release_freed_memory", lambda: calls.append(len(engine._rows)) or True)
    reqs = [hf.BatchRequest(list(range(100, 100 + n)), 4, 1.0, [], n) for n in (5, 30, 12)]
    engine.generate_batch_sync(reqs)
    assert calls == [3]  # once, after the batch (its rows already in the pool)
    engine.generate_batch_sync(reqs[:1])
    assert len(calls) == 2
    monkeypatch.setattr(engine, "_decode_batch", lambda requests, **kw: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        engine.generate_batch_sync(reqs)
    assert len(calls) == 3
    engine.reset_cache()
    assert calls[-1] == 0 and len(calls) == 4  # after the pool is emptied
    engine.close()
    assert len(calls) == 5


def test_hf_batched_episodes_keep_their_own_tokens(smol_tok, tiny_lm):
    """Two episodes whose turns are decoded in one batch: each buffer holds its own sampled ids, and a
    teacher-forced pass over each conversation gives back the logprobs recorded in the batch."""
    torch = pytest.importorskip("torch")
    import asyncio

    from toolworld.rollout.engines.hf import HFEngine

    engine = HFEngine(model=tiny_lm, tokenizer=smol_tok, device="cpu", max_batch=4)
    prefilled = _count_prefills(engine)
    temperature = 0.8
    policy = TokenPolicy(engine, name="tiny", max_tokens=6, temperature=temperature)
    sessions = [policy.start(tools=[], seed=seed) for seed in (7, 8)]
    convs: list[list[dict[str, Any]]] = [[{"role": "user", "content": f"Hi there{'!' * k}"}] for k in range(2)]

    async def turns() -> None:
        for n in range(2):
            done = await asyncio.gather(*(s.respond(m) for s, m in zip(sessions, convs, strict=True)))
            for turn, msgs in zip(done, convs, strict=True):
                msgs += [turn.to_message(), {"role": "user", "content": f"And then ({n})?"}]

    run(turns())
    assert sessions[0].buffer.sampled_ids() != sessions[1].buffer.sampled_ids()
    # Only the first row of the first batch reads its whole prompt; the second copies the system prompt it shares
    # with it, and each second turn reads only what is new since its own first turn (the prefix cache per row).
    spans = [s.buffer.to_dict()["sampled_spans"] for s in sessions]
    assert prefilled[0] == spans[0][0][0] and 0 < prefilled[1] < spans[1][0][0]
    assert sorted(prefilled[2:]) == sorted(second[0] - (first[1] - 1) for first, second in spans)
    for session in sessions:
        buf = session.buffer
        with torch.inference_mode():
            logits = tiny_lm(input_ids=torch.tensor([buf.ids])).logits[0].float()
        logp = torch.log_softmax(logits / temperature, dim=-1)
        recomputed = [float(logp[pos - 1, buf.ids[pos]]) for pos in range(len(buf.ids)) if buf.mask[pos]]
        assert recomputed == pytest.approx(buf.sampled_logprobs(), abs=2e-3)
