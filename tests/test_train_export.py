"""Trained weights exported to GGUF: transformers reads back the very tensors, llama.cpp samples what the trainer
computes, and bad input is refused with a structured error before any file appears.

The real round trip uses the embedded SmolLM2-135M GGUF (pulled once into the user's cache; the tests skip when
it cannot be had). The fast checks use a one-block random GGUF around SmolLM2's vocabulary (tests/gguf_kit.py).
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
gguf = pytest.importorskip("gguf")

from gguf_kit import SMOLLM2 as SHARED_SMOLLM2  # noqa: E402
from gguf_kit import write_tiny_smollm2_gguf  # noqa: E402
from toolworld.rollout.models import model_tool_prompt  # noqa: E402
from toolworld.train.export import ExportError, default_base_gguf, export_gguf  # noqa: E402

PERTURBED = ("model.layers.0.self_attn.q_proj.weight", "model.layers.3.self_attn.k_proj.weight",
             "model.embed_tokens.weight", "model.layers.5.input_layernorm.weight")  # fmt: skip


def _load_gguf_model(path: Path) -> Any:
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32)


def _assert_same_weights(a: Any, b: Any, tol: float = 1e-6) -> None:
    sa, sb = a.state_dict(), b.state_dict()
    assert set(sa) == set(sb)
    worst = max((sa[k].float() - sb[k].float()).abs().max().item() for k in sa)
    assert worst <= tol, worst


# ------------------------------------------------------------------------------------ the embedded model


@pytest.fixture(scope="module")
def smollm2() -> tuple[Any, Any, Path, dict[str, Any]]:
    """(perturbed model, tokenizer, base GGUF, original values of the perturbed tensors)."""
    from toolworld.rollout.models import ModelPullError, ensure_model
    from toolworld.train.sft import load_model

    session_cache = os.environ.get("TOOLWORLD_CACHE")
    os.environ["TOOLWORLD_CACHE"] = str(Path.home() / ".cache" / "toolworld")  # download it once per user
    try:
        ensure_model("smollm2")
        model, tokenizer, path = load_model("smollm2")
    except ModelPullError as exc:
        pytest.skip(f"the SmolLM2 GGUF is not cached and cannot be pulled here ({exc.kind}): {exc}")
    finally:
        if session_cache is not None:
            os.environ["TOOLWORLD_CACHE"] = session_cache
    gen = torch.Generator().manual_seed(0)
    originals = {}
    with torch.no_grad():
        # q and k of different layers: a missing or wrong rotary permutation changes them; the embedding is tied
        for name in PERTURBED:
            weight = model.get_parameter(name)
            originals[name] = weight.detach().clone()
            weight.add_(torch.randn(weight.shape, generator=gen) * 0.02)
    return model, tokenizer, path, originals


@pytest.fixture(scope="module")
def smollm2_f32(smollm2: Any, tmp_path_factory: Any) -> Path:
    model, _, _, _ = smollm2
    # no base_gguf: the model remembers the GGUF it was loaded from
    return export_gguf(model, tmp_path_factory.mktemp("export") / "smol-f32.gguf", dtype="f32", tool_prompt="json")


def test_f32_export_reloads_to_the_trained_weights(smollm2: Any, smollm2_f32: Path) -> None:
    model, _, base, originals = smollm2
    assert default_base_gguf(model) == base
    reloaded = _load_gguf_model(smollm2_f32)
    _assert_same_weights(model, reloaded)
    for name, before in originals.items():  # what a copy of the base would have given back
        assert (reloaded.get_parameter(name) - before).abs().max().item() > 1e-3
    assert reloaded.config.tie_word_embeddings

    exported, original = gguf.GGUFReader(str(smollm2_f32)), gguf.GGUFReader(str(base))
    for key in ("tokenizer.ggml.tokens", "tokenizer.ggml.merges", "tokenizer.chat_template", "llama.rope.freq_base",
                "tokenizer.ggml.eos_token_id", "general.name"):  # fmt: skip
        assert exported.fields[key].contents() == original.fields[key].contents(), key
    assert exported.fields["general.file_type"].contents() == 0
    names = {t.name for t in exported.tensors}
    assert names == {t.name for t in original.tensors} and "output.weight" not in names
    assert {t.tensor_type.name for t in exported.tensors} == {"F32"}
    assert model_tool_prompt(smollm2_f32) == "json"  # recorded, so `--policy gguf:FILE` samples with it


def test_a_model_loaded_from_gguf_saves_as_a_plain_model(smollm2: Any, tmp_path: Path) -> None:
    model, _, base, _ = smollm2
    model.save_pretrained(tmp_path)  # transformers refuses this for a model it still marks as GGUF-quantized
    assert "quantization_config" not in json.loads((tmp_path / "config.json").read_text())
    again = export_gguf(tmp_path, tmp_path / "again.gguf", base_gguf=base)
    # nothing said: the embedded model's default for itself is no evidence of how these weights were trained
    assert model_tool_prompt(again) is None


def test_llama_cpp_samples_what_the_trainer_computes(smollm2: Any, smollm2_f32: Path) -> None:
    """With float32 everywhere (``kv_cache="f32"``) llama.cpp's logprobs are the trainer's to ~1e-5. Its defaults
    (float16 KV cache, flash attention) add ~2.5e-3 mean / ~1.3e-2 max on this prompt: a property of the engine,
    not of the file."""
    pytest.importorskip("xllamacpp")
    from toolworld.rollout.engines.gguf import GGUFEngine
    from toolworld.train.data import Sample, collate
    from toolworld.train.logprobs import token_logprobs

    model, tokenizer, _, _ = smollm2
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": "Name three fruits."}],
                                           add_generation_prompt=True)  # fmt: skip
    prompt = [int(i) for i in (prompt["input_ids"] if hasattr(prompt, "keys") else prompt)]
    engine = GGUFEngine(smollm2_f32, n_ctx=256, threads=2, verify_tokenizer=False, kv_cache="f32")
    try:
        gen = asyncio.run(engine.generate(prompt, max_tokens=16, temperature=1.0, stop_ids=[], seed=0))
    finally:
        engine.close()
    assert len(gen.ids) >= 8 and len(gen.logprobs) == len(gen.ids)
    sample = Sample(input_ids=prompt + list(gen.ids), loss_mask=[0] * len(prompt) + [1] * len(gen.ids))
    with torch.no_grad():
        ours = token_logprobs(model, collate([sample], pad_id=tokenizer.eos_token_id))[0, len(prompt):]
    gap = (ours - torch.tensor(gen.logprobs)).abs()
    # measured: mean ~4e-6, max ~1.2e-5; a wrong permutation or a copy of the quantized base gives tenths
    assert gap.mean().item() < 1e-4 and gap.max().item() < 1e-3, gap


def test_f16_export_keeps_norms_f32_and_rounds_matrices_only(smollm2_f32: Path, smollm2: Any, tmp_path: Path) -> None:
    model, _, base, _ = smollm2
    out = export_gguf(model, tmp_path, base_gguf=base, dtype="f16")  # a folder: model.gguf inside
    assert out == tmp_path / "model.gguf"
    half, full = gguf.GGUFReader(str(out)), gguf.GGUFReader(str(smollm2_f32))
    assert half.fields["general.file_type"].contents() == 1
    wide = {t.name: t for t in full.tensors}
    assert {t.name for t in half.tensors} == set(wide)
    for tensor in half.tensors:
        assert tensor.tensor_type.name == ("F32" if len(tensor.shape) == 1 else "F16"), tensor.name
    for name in ("blk.0.attn_q.weight", "blk.3.attn_k.weight", "token_embd.weight", "blk.5.attn_norm.weight"):
        ours, reference = next(t for t in half.tensors if t.name == name).data, wide[name].data
        # float16 keeps 11 significant bits: within half a unit in the last place of each value
        assert np.allclose(ours.astype(np.float32), reference, rtol=2**-11, atol=2**-25), name


# ------------------------------------------------------------------------------------------- a tiny GGUF


@pytest.fixture(scope="module")
def tiny_base(tmp_path_factory: Any) -> Path:
    if not SHARED_SMOLLM2.is_dir():
        pytest.skip(f"needs the real tokenizers of ../shared/tokenizers; {SHARED_SMOLLM2} is absent")
    return write_tiny_smollm2_gguf(tmp_path_factory.mktemp("tiny") / "tiny.gguf")


@functools.cache
def _vocab_size(base: Path) -> int:
    return len(gguf.GGUFReader(str(base)).fields["tokenizer.ggml.tokens"].data)


def _trained(base: Path, seed: int = 1) -> Any:
    """A random Llama shaped like the tiny base (built directly: transformers' GGUF loader takes seconds to parse
    a 49k-token vocabulary)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=_vocab_size(base),
                         hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                         num_key_value_heads=1, rms_norm_eps=1e-5, tie_word_embeddings=False)  # fmt: skip
    return LlamaForCausalLM(config)


def _read_back(path: Path, model: Any) -> dict[str, Any]:
    """The exported tensors as transformers' GGUF loader maps and un-permutes them onto ``model``'s names."""
    from transformers.modeling_gguf_pytorch_utils import TENSOR_PROCESSORS, get_gguf_hf_weights_map

    config = model.config
    processor = TENSOR_PROCESSORS["llama"](config={"num_attention_heads": config.num_attention_heads,
                                                   "num_key_value_heads": config.num_key_value_heads})  # fmt: skip
    names = get_gguf_hf_weights_map(model, processor)
    out = {}
    for tensor in gguf.GGUFReader(str(path)).tensors:
        weights = processor.process(weights=gguf.dequantize(tensor.data, tensor.tensor_type), name=tensor.name).weights
        out[names[tensor.name]] = torch.from_numpy(np.array(weights))
    return out


def test_untied_head_and_saved_folder_round_trip(tiny_base: Path, tmp_path: Path) -> None:
    model = _trained(tiny_base)
    model.save_pretrained(tmp_path / "final")
    with pytest.raises(ExportError) as exc:  # a saved folder does not know its base
        export_gguf(tmp_path / "final", tmp_path / "x.gguf")
    assert exc.value.kind == "missing_base" and "base_gguf" in str(exc.value)
    out = export_gguf(tmp_path / "final", tmp_path / "tiny-out.gguf", base_gguf=tiny_base)
    assert "output.weight" in {t.name for t in gguf.GGUFReader(str(out)).tensors}  # the head is not tied
    back = _read_back(out, model)
    assert set(back) == set(model.state_dict())
    assert all(torch.equal(back[k], v) for k, v in model.state_dict().items())


def test_peft_model_is_merged_into_a_copy(tiny_base: Path, tmp_path: Path) -> None:
    peft = pytest.importorskip("peft")
    model = _trained(tiny_base)
    wrapped = peft.get_peft_model(model, peft.LoraConfig(r=2, target_modules=["q_proj", "k_proj"], init_lora_weights=False))
    before = {k: v.clone() for k, v in wrapped.state_dict().items()}
    out = export_gguf(wrapped, tmp_path / "merged.gguf", base_gguf=tiny_base)
    after = wrapped.state_dict()
    assert set(after) == set(before) and all(torch.equal(before[k], after[k]) for k in before)  # untouched
    import copy

    merged = copy.deepcopy(wrapped).merge_and_unload().state_dict()
    back = _read_back(out, _trained(tiny_base))  # the wrapped model's names are peft's, not transformers'
    assert set(back) == set(merged) and all(torch.equal(back[k], v) for k, v in merged.items())
    q = "model.layers.0.self_attn.q_proj.weight"
    base_q = before["base_model.model.model.layers.0.self_attn.q_proj.base_layer.weight"]
    assert not torch.allclose(back[q], base_q)  # the adapter's update is in the file


def test_an_interrupted_export_leaves_the_previous_file(tiny_base: Path, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    out = tmp_path / "model.gguf"
    out.write_bytes(b"previous")

    def crash(self: Any, *args: Any, **kwargs: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(gguf.GGUFWriter, "write_tensors_to_file", crash)
    with pytest.raises(KeyboardInterrupt):
        export_gguf(_trained(tiny_base), out, base_gguf=tiny_base)
    assert out.read_bytes() == b"previous" and sorted(p.name for p in tmp_path.iterdir()) == ["model.gguf"]


# ------------------------------------------------------------------------------------------------ refusals


def test_unsupported_architecture_is_refused(tiny_base: Path, tmp_path: Path) -> None:
    from transformers import GPT2Config, GPT2LMHeadModel

    model = GPT2LMHeadModel(GPT2Config(vocab_size=64, n_positions=32, n_embd=16, n_layer=1, n_head=2))
    with pytest.raises(ExportError) as exc:
        export_gguf(model, tmp_path / "gpt2.gguf", base_gguf=tiny_base)
    assert exc.value.kind == "unsupported_model" and "gpt2" in str(exc.value) and "llama" in str(exc.value)
    assert exc.value.to_dict()["type"] == "unsupported_model"
    assert not (tmp_path / "gpt2.gguf").exists()


def test_missing_or_mismatched_base_is_refused(tiny_base: Path, tmp_path: Path) -> None:
    from transformers import LlamaConfig, LlamaForCausalLM

    model = _trained(tiny_base)
    with pytest.raises(ExportError) as exc:
        export_gguf(model, tmp_path / "a.gguf", base_gguf=tmp_path / "nowhere.gguf")
    assert exc.value.kind == "missing_base" and "nowhere.gguf" in str(exc.value)

    wider = LlamaForCausalLM(LlamaConfig(vocab_size=model.config.vocab_size, hidden_size=64, intermediate_size=64,
                                         num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1))  # fmt: skip
    with pytest.raises(ExportError) as exc:
        export_gguf(wider, tmp_path / "b.gguf", base_gguf=tiny_base)
    assert exc.value.kind == "base_mismatch" and "hidden_size 64 vs 32" in str(exc.value)

    model.config.rope_parameters = {"rope_theta": 500000.0, "rope_type": "default"}  # llama.cpp would use 10000
    with pytest.raises(ExportError) as exc:
        export_gguf(model, tmp_path / "c.gguf", base_gguf=tiny_base)
    assert exc.value.kind == "base_mismatch" and "rope theta" in str(exc.value)
    with pytest.raises(ExportError) as exc:
        export_gguf(model, tmp_path / "d.gguf", base_gguf=tiny_base, dtype="q4")  # type: ignore[arg-type]
    assert exc.value.kind == "invalid_option"
    assert not any(tmp_path.iterdir())


def test_cli_export_records_the_folders_tool_prompt_and_refuses_bad_input(tiny_base: Path, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from toolworld.cli import app
    from toolworld.rollout.models import write_model_card

    final = tmp_path / "final"
    _trained(tiny_base).save_pretrained(final)
    write_model_card(final, tool_prompt="compact")
    runner = CliRunner()

    def export(*args: Any) -> Any:
        return runner.invoke(app, ["train", "export", *map(str, args), "--json"], catch_exceptions=False)

    res = export(final, "--out", tmp_path / "m.gguf", "--base", tiny_base, "--dtype", "f32")
    assert res.exit_code == 0, res.output
    written = Path(json.loads(res.output.strip().splitlines()[-1])["gguf"])
    assert written == tmp_path / "m.gguf" and model_tool_prompt(written) == "compact"
    for args, kind in [((final, "--out", tmp_path / "q.gguf", "--base", tiny_base, "--dtype", "q4"), "invalid_option"),
                       ((final, "--out", tmp_path / "q.gguf", "--base", tmp_path / "nope.gguf"), "missing_base"),
                       ((final, "--out", tmp_path / "q.gguf", "--base", tiny_base, "--tool-prompt", "x"),
                        "invalid_option")]:  # fmt: skip
        res = export(*args)
        assert res.exit_code == 1 and json.loads(res.output.strip().splitlines()[-1])["error"]["type"] == kind, res.output
    assert not (tmp_path / "q.gguf").exists()
