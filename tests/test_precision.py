"""bf16 only where the hardware runs it: a CPU without AVX512-BF16 or AMX emulates bfloat16 matmuls (26x slower
than float32 on an AVX2 EPYC), so defaults that pick bf16 ask first and an explicit ``bf16`` warns."""

from __future__ import annotations

import warnings

import pytest

torch = pytest.importorskip("torch")

from toolworld.rollout.engines import hf  # noqa: E402


def cpu_with(monkeypatch: pytest.MonkeyPatch, *, avx512_bf16: bool, amx: bool) -> None:
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: avx512_bf16, raising=False)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: amx, raising=False)


@pytest.mark.parametrize(("avx512_bf16", "amx", "native"), [(False, False, False), (True, False, True),
                                                            (False, True, True), (True, True, True)])
def test_a_cpu_runs_bf16_natively_only_with_its_instructions(monkeypatch, avx512_bf16, amx, native):
    cpu_with(monkeypatch, avx512_bf16=avx512_bf16, amx=amx)
    assert hf.native_bf16("cpu") is native
    assert hf.native_bf16("mps") is False  # not judged as a CPU


def test_cuda_answers_for_itself(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: False)
    assert hf.native_bf16("cuda:1") is False
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    assert hf.native_bf16("cuda") is True


def test_bf16_where_it_is_emulated_warns_and_where_it_is_native_does_not(monkeypatch):
    cpu_with(monkeypatch, avx512_bf16=False, amx=False)
    with pytest.warns(RuntimeWarning, match="no bf16 instructions.*--no-bf16"):
        hf.warn_unless_native_bf16("cpu", "SFT's forward passes")
    cpu_with(monkeypatch, avx512_bf16=True, amx=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        hf.warn_unless_native_bf16("cpu", "SFT's forward passes")
        hf.warn_unless_native_bf16("mps", "SFT's forward passes")  # other backends are not second-guessed


def test_sft_asked_for_bf16_on_an_avx2_cpu_says_so_and_still_trains(monkeypatch, tmp_path):
    from toolworld.train.data import Sample
    from toolworld.train.sft import SFTConfig, train_sft
    from train_kit import smollm2_tokenizer, tiny_llama

    tokenizer = smollm2_tokenizer()
    model = tiny_llama(tokenizer)
    cpu_with(monkeypatch, avx512_bf16=False, amx=False)
    samples = [Sample(input_ids=[1, 2, 3, 4, 5, 6], loss_mask=[0, 0, 1, 1, 1, 1])]
    config = SFTConfig(out=tmp_path / "out", lr=1e-3, max_steps=1, batch_tokens=64, max_len=64, seed=0, bf16=True)
    with pytest.warns(RuntimeWarning, match="SFT's forward passes: bfloat16 on 'cpu'"):
        result = train_sft(model, tokenizer, samples, config)
    assert result.steps == 1


def test_the_hf_engine_asked_for_bfloat16_weights_where_they_are_emulated_warns(monkeypatch):
    cpu_with(monkeypatch, avx512_bf16=False, amx=False)
    with pytest.warns(RuntimeWarning, match="the hf engine's weights: bfloat16 on 'cpu'"):
        assert hf._pick_dtype("bfloat16", "cpu") is torch.bfloat16
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert hf._pick_dtype("auto", "cpu") is torch.float32  # the default on a CPU stays float32, silently
