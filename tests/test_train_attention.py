"""The attention of a continuation split into two unmasked flash calls (``toolworld.train.attention``) gives the
values and gradients of masked SDPA, is used only where it is exact, and trains a shared-prefix step alike."""

from __future__ import annotations

import json
from typing import Any

import pytest

from train_kit import conversations, count_split_calls, prefix_step, smollm2_tokenizer, tiny_llama

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from torch.nn.functional import scaled_dot_product_attention as sdpa  # noqa: E402

from toolworld.train import attention  # noqa: E402
from toolworld.train.attention import SPLIT_SDPA, end_causal, split_attention, use_split_attention  # noqa: E402
from toolworld.train.data import collate  # noqa: E402
from toolworld.train.losses import sft_loss  # noqa: E402
from toolworld.train.prefix import SharedPrefix  # noqa: E402

if not hasattr(torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu_backward"):
    pytest.skip("this torch has no CPU flash attention kernels", allow_module_level=True)


def end_mask(s: int, n: int) -> Any:
    """The boolean mask transformers hands SDPA for ``s`` queries continuing ``n - s`` kept keys."""
    return torch.ones(s, n, dtype=torch.bool).tril(n - s)[None, None]


def qkv(s: int, n: int, *, heads: int = 3, dim: int = 16, dtype: Any = torch.float32, seed: int = 0) -> list[Any]:
    g = torch.Generator().manual_seed(seed)
    shapes = [(2, heads, s, dim), (2, heads, n, dim), (2, heads, n, dim)]
    return [(torch.randn(shape, generator=g, dtype=torch.float64) * 2).to(dtype).requires_grad_(True) for shape in shapes]


def with_grads(fn: Any, tensors: list[Any], upstream: Any) -> tuple[Any, list[Any]]:
    for t in tensors:
        t.grad = None
    out = fn(*tensors)
    out.backward(upstream)
    return out.detach(), [t.grad.detach().clone() for t in tensors]


@pytest.mark.parametrize(("s", "n"), [(5, 12), (40, 41), (33, 97), (1, 9), (64, 200)])
@pytest.mark.parametrize(("dtype", "tol"), [(torch.float64, 1e-10), (torch.float32, 2e-5), (torch.bfloat16, 3e-2)])
def test_split_attention_is_masked_sdpa_in_values_and_gradients(s, n, dtype, tol):
    tensors = qkv(s, n, dtype=dtype, seed=s + n)
    upstream = torch.randn(2, 3, s, 16, generator=torch.Generator().manual_seed(1)).to(dtype)
    mask = end_mask(s, n)
    ref = [t.detach().double().requires_grad_(True) for t in tensors]  # the reference in float64
    want, want_grads = with_grads(lambda q, k, v: sdpa(q, k, v, attn_mask=mask), ref, upstream.double())
    got, got_grads = with_grads(split_attention, tensors, upstream)
    assert got.dtype == dtype
    scale = float(want.abs().max())
    assert float((got.double() - want).abs().max()) <= tol * scale
    for name, g, w in zip("qkv", got_grads, want_grads, strict=True):
        assert float(w.abs().max()) > 0, name
        assert float((g.double() - w).abs().max()) <= tol * float(w.abs().max()), name


def test_both_parts_count():
    """Each part alone is a different attention: the merge by log-sum-exp is what makes the whole."""
    q, k, v = qkv(6, 20)
    mask = end_mask(6, 20)
    want = sdpa(q, k, v, attn_mask=mask)
    own = sdpa(q, k[:, :, 14:], v[:, :, 14:], is_causal=True)
    prefix = sdpa(q, k[:, :, :14], v[:, :, :14])
    for part in (own, prefix, (own + prefix) / 2):
        assert float((part - want).abs().max()) > 1e-2
    assert float((split_attention(q, k, v) - want).abs().max()) < 1e-5
    with pytest.raises(ValueError, match="fewer queries than keys"):
        split_attention(q, k[:, :, :6], v[:, :, :6])


def test_end_causal_tells_the_mask_apart():
    assert end_causal(end_mask(4, 10), 4, 10)
    assert end_causal(end_mask(4, 10).expand(3, 2, 4, 10), 4, 10)
    additive = torch.zeros(1, 1, 4, 10).masked_fill(~end_mask(4, 10), float("-inf"))
    assert end_causal(additive, 4, 10)
    assert not end_causal(None, 4, 10)
    assert not end_causal(end_mask(4, 10), 4, 11)  # another shape
    assert not end_causal(torch.ones(4, 10, dtype=torch.bool).tril()[None, None], 4, 10)  # aligned to the start
    padded = end_mask(4, 10).repeat(2, 1, 1, 1)
    padded[1, :, :, 0] = False  # the second row's first key is padding
    assert not end_causal(padded, 4, 10)
    # the verdict is kept per tensor, and a mask written in place is judged again
    mask = end_mask(4, 10).clone()
    assert end_causal(mask, 4, 10)
    mask[0, 0, 3, 0] = False
    assert not end_causal(mask, 4, 10)
    # a new tensor is judged on its own, whatever address it lands at
    for _ in range(20):
        assert end_causal(end_mask(4, 10).clone(), 4, 10)
        assert not end_causal(padded.clone(), 4, 10)


class Module:
    num_key_value_groups = 2
    is_causal = True


@pytest.mark.parametrize(
    ("case", "split"),
    [("end_causal", True), ("padded", False), ("one_query", False), ("no_past", False), ("dropout", False),
     ("softcap", False)],
)  # fmt: skip
def test_the_attention_function_splits_only_where_it_is_exact(case, split, monkeypatch):
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    calls = count_split_calls(monkeypatch)
    s, n = {"one_query": (1, 9), "no_past": (9, 9)}.get(case, (6, 15))
    g = torch.Generator().manual_seed(3)
    q = torch.randn(2, 4, s, 8, generator=g)
    k, v = (torch.randn(2, 2, n, 8, generator=g) for _ in range(2))  # grouped: 2 key heads for 4 query heads
    mask = end_mask(s, n).repeat(2, 1, 1, 1)
    if case == "padded":
        mask[0, :, :, :2] = False
    kwargs: dict[str, Any] = {"softcap": 30.0} if case == "softcap" else {}
    dropout = 0.1 if case == "dropout" else 0.0
    if kwargs:  # what SDPA cannot do, it refuses with its own error
        with pytest.raises(ValueError, match="softcap"):
            attention.split_sdpa_forward(Module(), q, k, v, mask, **kwargs)
        assert not calls
        return
    torch.manual_seed(0)
    got, _ = attention.split_sdpa_forward(Module(), q, k, v, mask, dropout=dropout)
    torch.manual_seed(0)
    want, _ = sdpa_attention_forward(Module(), q, k, v, mask, dropout=dropout)
    assert bool(calls) is split
    assert got.shape == want.shape == (2, s, 4, 8)
    if case != "dropout":
        assert float((got - want).abs().max()) < 1e-5


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    return smollm2_tokenizer()


def test_a_model_switched_to_it_trains_a_shared_prefix_step_alike(tokenizer, monkeypatch):
    calls = count_split_calls(monkeypatch)
    model = tiny_llama(tokenizer).eval()
    assert model.config._attn_implementation == "sdpa"
    micro = [collate([s], 0) for s in conversations(len(tokenizer))]
    whole, g_whole = prefix_step(model, micro, sft_loss, share=True)
    assert not calls
    assert use_split_attention(model) and model.config._attn_implementation == SPLIT_SDPA
    assert use_split_attention(model)  # asking again keeps it
    split, g_split = prefix_step(model, micro, sft_loss, share=True)
    # every continuation ran split in both layers: 3 conversations after a 60-token prompt
    assert sorted(set(calls)) == sorted(len(s) - 60 for s in conversations(len(tokenizer))) and len(calls) == 6
    assert SharedPrefix(model, micro, min_tokens=1).length == 60
    assert split == pytest.approx(whole, rel=1e-5, abs=1e-6)
    assert g_split.keys() == g_whole.keys() and len(g_whole) > 10
    for name, g in g_whole.items():
        assert float((g_split[name] - g).norm()) <= 1e-4 * float(g.norm()), name
    # a sampling engine reads a turn after kept keys under inference mode, whose mask has no version counter
    calls.clear()
    ids = torch.tensor([micro[0].input_ids[0].tolist()])
    with torch.inference_mode():
        kept = model(ids[:, :50], use_cache=True).past_key_values
        sampled = model(ids[:, 50:], past_key_values=kept).logits
        assert not end_causal(torch.ones(1, 1, 4, 10, dtype=torch.bool), 4, 10)
        assert end_causal(end_mask(4, 10), 4, 10)
    assert calls == [ids.shape[1] - 50] * 2
    with torch.no_grad():
        whole = model(ids).logits[:, 50:]
    assert float((sampled - whole).abs().max()) < 1e-4
    # decoding and a first forward are plain SDPA, with the same logits
    calls.clear()
    ids = torch.tensor([micro[0].input_ids[0, :30].tolist()])
    with torch.no_grad():
        out = model(ids, use_cache=True)
        nxt = model(ids[:, -1:], past_key_values=out.past_key_values).logits
    assert not calls
    model.set_attn_implementation("sdpa")
    with torch.no_grad():
        plain = model(ids[:, -1:], past_key_values=model(ids, use_cache=True).past_key_values).logits
    assert float((nxt - plain).abs().max()) < 1e-5


def test_under_bf16_autocast_it_runs_as_sdpa_does(tokenizer):
    """bf16 autocast hands the attention bfloat16 queries beside keys and values that may be float32 (the shared
    prompt's, concatenated to the conversation's own): both are cast as SDPA casts them."""
    model = tiny_llama(tokenizer).eval()
    micro = [collate([s], 0) for s in conversations(len(tokenizer))]
    with torch.autocast("cpu", dtype=torch.bfloat16):
        plain, g_plain = prefix_step(model, micro, sft_loss, share=True)
        assert use_split_attention(model)
        split, g_split = prefix_step(model, micro, sft_loss, share=True)
    assert split == pytest.approx(plain, rel=1e-3)
    for name, g in g_plain.items():
        assert float((g_split[name] - g).norm()) <= 0.03 * float(g.norm()), name
    q, k, v = qkv(6, 20)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = split_attention(q, k, v.detach().float())
    assert out.dtype == torch.bfloat16
    assert float((out.float() - sdpa(q, k, v, attn_mask=end_mask(6, 20))).abs().max()) < 5e-2


def test_it_is_left_off_where_it_does_not_apply_and_not_saved(tokenizer, tmp_path):
    from transformers import AutoModelForCausalLM

    eager = tiny_llama(tokenizer)
    eager.set_attn_implementation("eager")
    assert not use_split_attention(eager) and eager.config._attn_implementation == "eager"
    model = tiny_llama(tokenizer)
    assert use_split_attention(model)
    model.save_pretrained(tmp_path)
    assert "toolworld" not in (tmp_path / "config.json").read_text()
    json.loads((tmp_path / "config.json").read_text())
    assert AutoModelForCausalLM.from_pretrained(tmp_path).config._attn_implementation == "sdpa"


def test_lora_wrapped_models_take_it(tokenizer):
    pytest.importorskip("peft")
    from toolworld.train.lora import wrap_lora

    model = wrap_lora(tiny_llama(tokenizer), r=4, alpha=8)
    assert use_split_attention(model)
    assert model.get_base_model().config._attn_implementation == SPLIT_SDPA


def test_a_sampling_engine_over_a_switched_model_samples_what_sdpa_samples(tokenizer, monkeypatch):
    """The hf engine reads a turn after the keys it kept, under inference mode: split there, the same tokens."""
    from toolworld.rollout.engines.hf import HFEngine

    calls = count_split_calls(monkeypatch)
    prompt = tokenizer.encode("The customer asks to cancel order W123 and wants a refund to the card on file.")
    longer = [*prompt, *tokenizer.encode(" Thanks, and the other order W456 too, please.")]
    kw: dict[str, Any] = {"max_tokens": 8, "temperature": 1.0, "stop_ids": [], "seed": 3}
    runs = []
    for split in (True, False):
        model = tiny_llama(tokenizer).eval()
        if split:
            assert use_split_attention(model)
        engine = HFEngine(model=model, tokenizer=tokenizer, device="cpu", prefix_cache=True)
        runs.append((engine.generate_sync(prompt, **kw), engine.generate_sync(longer, **kw)))
    assert calls == [len(longer) - len(prompt)] * 2  # the second turn's new ids after the kept prompt, both layers
    (a1, a2), (b1, b2) = runs
    assert a1.ids == b1.ids and a2.ids == b2.ids
    assert a2.logprobs == pytest.approx(b2.logprobs, abs=1e-4)
