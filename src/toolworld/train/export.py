"""Trained weights back into a GGUF, so that llama.cpp (the ``gguf`` engine) samples the model the trainer holds.

The trainers work on a transformers model (the embedded SmolLM2 GGUF is dequantized on load) and save HF folders,
but rollouts decode about 2.5x faster through llama.cpp on CPU. :func:`export_gguf` closes the loop: it takes the
*base* GGUF the model came from, keeps every metadata entry of it (hyper-parameters, the whole vocabulary, merges,
special ids, chat template: so llama.cpp tokenizes and renders exactly as before) and replaces its tensors with
the trained ones, in float32 or float16.

Tensor names and layouts are the inverse of transformers' GGUF loader (``modeling_gguf_pytorch_utils``): names
come from gguf-py's own HF -> GGUF name map, and the Llama query/key projections get back llama.cpp's rotary
permutation (its converter interleaves the halves of each head; transformers undoes that on load). Tied
embeddings stay tied (no ``output.weight``) unless the base has its own output matrix or the model's head differs
from its embedding.

What could make llama.cpp sample a *different* distribution is refused before anything is written: a model whose
shape, head counts, rope base or norm epsilon disagree with the base's metadata (llama.cpp reads those from the
metadata, not from the tensors) is a ``base_mismatch``. The file is written beside its final name and renamed
when complete, so an interrupted export never leaves a truncated ``.gguf`` that looks finished.

torch, transformers and gguf are imported inside the functions, so ``import toolworld`` stays light.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

from ..core.errors import ToolworldError
from ..core.files import atomic_path
from ..rollout.models import GGUF_TOOL_PROMPT_KEY, model_tool_prompt

__all__ = ["SUPPORTED_ARCHITECTURES", "ExportError", "default_base_gguf", "export_gguf"]

#: HF ``model_type`` -> GGUF ``general.architecture`` of what :func:`export_gguf` can write.
SUPPORTED_ARCHITECTURES: dict[str, str] = {"llama": "llama"}

#: Written as ``general.file_type`` (llama.cpp's ``LLAMA_FTYPE_ALL_F32`` / ``LLAMA_FTYPE_MOSTLY_F16``).
_FILE_TYPES = {"f32": 0, "f16": 1}

#: HF state-dict entries with no GGUF counterpart that carry no trained information (recomputed from config).
_DERIVED = ("rotary_emb.inv_freq", "rotary_emb.original_inv_freq")

#: Metadata the writer sets itself or that described the base's quantization, not the exported file.
_SKIP_KEYS = ("general.architecture", "general.file_type", "general.quantization_version")


class ExportError(ToolworldError):
    """An export that cannot be done as asked; ``kind`` says why: ``unsupported_model`` (an architecture other than
    those in :data:`SUPPORTED_ARCHITECTURES`), ``missing_base`` (no base GGUF given or found), ``bad_base``,
    ``base_mismatch`` (the model does not fit the base's metadata), ``bad_model``, ``lora_adapter``,
    ``invalid_option``, ``missing_dependency``."""

    default_kind = "export_error"


# ------------------------------------------------------------------------------------------------ the source


def _config_get(config: Any, name: str, default: Any = None) -> Any:
    return config.get(name, default) if isinstance(config, dict) else getattr(config, name, default)


def _is_peft(model: Any) -> bool:
    return hasattr(model, "peft_config") and hasattr(model, "merge_and_unload")


def _load_folder(folder: Path) -> tuple[dict[str, Any], Any]:
    """(state dict, config) of a ``save_pretrained`` folder, read straight from its weight files: building the
    model would only cost time and memory, since the export needs nothing but tensors and hyper-parameters."""
    import torch
    from transformers import AutoConfig

    if not (folder / "config.json").is_file():
        if (folder / "adapter_config.json").is_file():
            raise ExportError(f"{folder} holds a LoRA adapter only; export a merged model instead (the trainers' "
                              "final/ folder is merged unless merge_lora=False), or load the base with the adapter "
                              "(peft) and pass the model object, which is merged for the export",
                              kind="lora_adapter")  # fmt: skip
        raise ExportError(f"{folder} is not a model folder (no config.json); pass a folder that save_pretrained "
                          "wrote, or a model object", kind="bad_model")  # fmt: skip
    config = AutoConfig.from_pretrained(str(folder))
    state: dict[str, Any] = {}
    shards = sorted(folder.glob("*.safetensors"))
    if shards:
        from safetensors.torch import load_file

        for shard in shards:
            state.update(load_file(str(shard)))
    else:
        for shard in sorted(folder.glob("pytorch_model*.bin")):
            state.update(torch.load(shard, map_location="cpu", weights_only=True))
    if not state:
        raise ExportError(f"{folder} has a config.json but no weights (*.safetensors or pytorch_model*.bin)",
                          kind="bad_model")  # fmt: skip
    return state, config


def _load_source(model_or_folder: Any) -> tuple[dict[str, Any], Any]:
    """(state dict, config) of a model object or a saved folder; a peft model is merged into a copy, so the
    caller's model (possibly mid-training) keeps its adapters and its exact weights."""
    if isinstance(model_or_folder, (str, Path)):
        folder = Path(model_or_folder).expanduser()
        if folder.is_file() and folder.suffix == ".gguf":
            raise ExportError(f"{folder} is already a GGUF; pass a trained model folder or model object",
                              kind="bad_model")  # fmt: skip
        if not folder.is_dir():
            raise ExportError(f"model folder {str(folder)!r} does not exist", kind="bad_model")
        return _load_folder(folder)
    model = model_or_folder
    if _is_peft(model):
        # merge_and_unload rewrites the modules in place; a deep copy keeps the caller's model untouched (an
        # unmerge after an in-place merge would not restore the weights bit for bit).
        model = copy.deepcopy(model).merge_and_unload()
    if not hasattr(model, "state_dict") or getattr(model, "config", None) is None:
        raise ExportError(f"cannot export a {type(model).__name__}: pass a transformers causal LM (with .config), "
                          "a peft model around one, or a saved model folder", kind="bad_model")  # fmt: skip
    return model.state_dict(), model.config


# -------------------------------------------------------------------------------------------------- the base


def default_base_gguf(model_or_folder: Any) -> Path | None:
    """The GGUF a model was loaded from, when that can be told: ``config._name_or_path`` naming a ``.gguf`` file,
    or a folder holding exactly one ``.gguf`` (transformers records the folder, not the file, when it loads
    ``from_pretrained(folder, gguf_file=name)``, which is how :func:`toolworld.train.sft.load_model` loads the
    embedded model). A saved folder does not record where its weights came from, so it gives None.
    """
    config = None
    if not isinstance(model_or_folder, (str, Path)):
        config = getattr(model_or_folder, "config", None)
        if config is None and _is_peft(model_or_folder):
            config = getattr(model_or_folder.get_base_model(), "config", None)
    source = (_config_get(config, "_name_or_path") or _config_get(config, "name_or_path")) if config else None
    if not source:
        return None
    path = Path(str(source)).expanduser()
    if path.is_file() and path.suffix == ".gguf":
        return path
    if path.is_dir():
        found = sorted(path.glob("*.gguf"))
        if len(found) == 1:
            return found[0]
    return None


def _field_value(reader: Any, key: str, default: Any = None) -> Any:
    field = reader.fields.get(key)
    return default if field is None else field.contents()


def _open_base(base: Path) -> Any:
    from gguf import GGUFReader

    if not base.is_file():
        raise ExportError(f"base GGUF {str(base)!r} does not exist; pass the .gguf the model was trained from "
                          "(the embedded model: toolworld.rollout.models.ensure_model('smollm2'))",
                          kind="missing_base")  # fmt: skip
    try:
        return GGUFReader(str(base))
    except Exception as exc:  # gguf-py raises ValueError, struct.error, IndexError... on a damaged file
        raise ExportError(f"cannot read base GGUF {base}: {exc}", kind="bad_base") from exc


def _rope_theta(config: Any) -> float | None:
    params = _config_get(config, "rope_parameters") or _config_get(config, "rope_scaling") or {}
    theta = params.get("rope_theta") if isinstance(params, dict) else None
    return theta if theta is not None else _config_get(config, "rope_theta")


def _check_fits(config: Any, reader: Any, arch: str, vocab_rows: int, base: Path) -> None:
    """Refuse a model whose hyper-parameters differ from what llama.cpp will read from the copied metadata."""
    def meta(key: str, default: Any = None) -> Any:
        return _field_value(reader, f"{arch}.{key}", default)

    tokens = _field_value(reader, "tokenizer.ggml.tokens") or []
    wanted = [("num_hidden_layers", meta("block_count")), ("hidden_size", meta("embedding_length")),
              ("intermediate_size", meta("feed_forward_length")),
              ("num_attention_heads", meta("attention.head_count")),
              ("num_key_value_heads", meta("attention.head_count_kv", meta("attention.head_count")))]  # fmt: skip
    problems = [f"{name} {_config_get(config, name)} vs {value}" for name, value in wanted
                if value is not None and _config_get(config, name) != value]  # fmt: skip
    if tokens and vocab_rows != len(tokens):
        problems.append(f"vocabulary rows {vocab_rows} vs {len(tokens)} tokens")
    # llama.cpp falls back to these defaults when the key is absent, and so does transformers' GGUF loader
    floats = [("rope theta", _rope_theta(config), meta("rope.freq_base", 10000.0)),
              ("rms_norm_eps", _config_get(config, "rms_norm_eps"), meta("attention.layer_norm_rms_epsilon", 1e-5))]
    problems += [f"{name} {ours} vs {theirs}" for name, ours, theirs in floats
                 if ours is not None and not math.isclose(float(ours), float(theirs), rel_tol=1e-5)]  # fmt: skip
    if problems:
        raise ExportError(f"the model does not fit base GGUF {base.name} (model vs base: {'; '.join(problems)}); "
                          "pass the GGUF this model was trained from as base_gguf", kind="base_mismatch")  # fmt: skip


# ------------------------------------------------------------------------------------------------ the tensors


def _permute(weights: Any, n_head: int) -> Any:
    """llama.cpp's converter permutation of a query/key projection (the inverse of transformers'
    ``LlamaTensorProcessor._reverse_permute_weights``): per head, rows ``[x0.., y0..]`` become ``[x0, y0, ...]``."""
    return (weights.reshape(n_head, 2, weights.shape[0] // n_head // 2, *weights.shape[1:])
            .swapaxes(1, 2).reshape(weights.shape))  # fmt: skip


def _gguf_tensors(state: dict[str, Any], config: Any, arch: str, base_names: set[str],
                  dtype: str) -> dict[str, Any]:  # fmt: skip
    """GGUF name -> numpy array, in the layout llama.cpp expects."""
    import gguf
    import numpy as np
    import torch

    arch_id = next(key for key, value in gguf.MODEL_ARCH_NAMES.items() if value == arch)
    name_map = gguf.get_tensor_name_map(arch_id, int(_config_get(config, "num_hidden_layers")))
    n_head = int(_config_get(config, "num_attention_heads"))
    n_kv = int(_config_get(config, "num_key_value_heads") or n_head)

    embed, head = state.get("model.embed_tokens.weight"), state.get("lm_head.weight")
    tied = head is None or (embed is not None and head.shape == embed.shape and torch.equal(head, embed))
    out: dict[str, Any] = {}
    unmapped: list[str] = []
    for hf_name, tensor in state.items():
        if hf_name.endswith(_DERIVED):
            continue
        stem, dot, suffix = hf_name.rpartition(".")
        gguf_stem = name_map.get_name(stem) if dot else None
        if gguf_stem is None:
            unmapped.append(hf_name)
            continue
        name = f"{gguf_stem}.{suffix}"
        if name == "output.weight" and tied and name not in base_names:
            continue  # llama.cpp reuses token_embd.weight when the file has no output matrix
        array = tensor.detach().to("cpu", torch.float32).numpy()
        if ".attn_q." in name:
            array = _permute(array, n_head)
        elif ".attn_k." in name:
            array = _permute(array, n_kv)
        # norms and biases stay float32 in f16 files, as llama.cpp's converter keeps 1-D tensors
        out[name] = array.astype(np.float16) if dtype == "f16" and array.ndim > 1 else array
    if unmapped:
        raise ExportError(f"{len(unmapped)} tensors have no GGUF name for a {arch} model (e.g. {unmapped[:3]}); "
                          "only plain causal LMs of the supported architectures can be exported",
                          kind="bad_model")  # fmt: skip
    if "output.weight" in base_names and "output.weight" not in out and embed is not None:
        # an untied base with a tied model: llama.cpp would read no head at all, so write the shared matrix
        array = embed.detach().to("cpu", torch.float32).numpy()
        out["output.weight"] = array.astype(np.float16) if dtype == "f16" else array
    return out


def _check_shapes(tensors: dict[str, Any], reader: Any, base: Path) -> None:
    base_shapes = {t.name: tuple(int(d) for d in reversed(t.shape)) for t in reader.tensors}
    wrong = [f"{name} {tuple(array.shape)} vs {base_shapes[name]}" for name, array in tensors.items()
             if name in base_shapes and tuple(array.shape) != base_shapes[name]]  # fmt: skip
    missing = sorted(set(base_shapes) - set(tensors) - {"output.weight", "rope_freqs.weight"})
    if wrong or missing:
        detail = "; ".join(wrong[:3] + ([f"missing {missing[:3]}"] if missing else []))
        raise ExportError(f"the model's tensors do not fit base GGUF {base.name} ({detail})", kind="base_mismatch")


def _copy_metadata(writer: Any, reader: Any) -> None:
    from gguf import GGUFValueType

    for key, field in reader.fields.items():
        if key.startswith("GGUF.") or key in _SKIP_KEYS or key == GGUF_TOOL_PROMPT_KEY:  # written by export_gguf
            continue
        vtype = field.types[0]
        sub_type = field.types[-1] if vtype == GGUFValueType.ARRAY else None
        if vtype == GGUFValueType.ARRAY and len(field.types) > 2:
            raise ExportError(f"base metadata {key!r} is a nested array, which cannot be copied", kind="bad_base")
        writer.add_key_value(key, field.contents(), vtype, sub_type=sub_type)


# ---------------------------------------------------------------------------------------------------- export


def export_gguf(model_or_folder: Any, out: str | Path, *, base_gguf: str | Path | None = None,
                dtype: Literal["f32", "f16"] = "f32", tool_prompt: str | None = None) -> Path:  # fmt: skip
    """Write ``model_or_folder`` as a GGUF that llama.cpp loads, with ``base_gguf``'s metadata; return its path.

    Args:
        model_or_folder: a transformers causal LM (a peft model is merged into a copy first) or a folder that
            ``save_pretrained`` wrote (a trainer's ``final/``). Supported: :data:`SUPPORTED_ARCHITECTURES`.
        out: the ``.gguf`` to write (replaced if it exists); an existing folder gets ``model.gguf`` inside.
        base_gguf: the GGUF the model was trained from, whose metadata (tokenizer, chat template,
            hyper-parameters) is copied. Default: :func:`default_base_gguf` (the file a model object was loaded
            from; the embedded model is ``toolworld.rollout.models.ensure_model("smollm2")``). A saved folder
            records no base, so pass it.
        dtype: ``f32`` samples what the trainer computes up to float rounding; ``f16`` halves the file and
            perturbs logprobs slightly more. 1-D tensors (norms) stay float32 either way.
        tool_prompt: how the model was trained to see its tools (``ChatTemplate``'s ``tool_prompt``), written as
            the ``toolworld.tool_prompt`` key so that ``--policy gguf:FILE`` samples with it. Default: what a
            saved folder's ``toolworld.json`` says, else the key of a base that is itself an export, else nothing
            is written (a policy then uses ``auto``): pass it for a model object trained in Python.

    Raises :class:`ExportError`; nothing is left at ``out`` unless the whole file was written.
    """
    if dtype not in _FILE_TYPES:
        raise ExportError(f"dtype must be one of {sorted(_FILE_TYPES)}, got {dtype!r}", kind="invalid_option")
    try:
        import gguf
        import torch  # noqa: F401  (fail here, with the install hint, not halfway through)
    except ImportError as exc:
        raise ExportError(f"exporting needs torch and gguf ({exc}): pip install 'toolworld[train]'",
                          kind="missing_dependency") from exc  # fmt: skip

    state, config = _load_source(model_or_folder)
    model_type = _config_get(config, "model_type")
    arch = SUPPORTED_ARCHITECTURES.get(str(model_type))
    if arch is None:
        raise ExportError(f"cannot export a {model_type!r} model to GGUF; supported architectures: "
                          f"{', '.join(SUPPORTED_ARCHITECTURES)}", kind="unsupported_model")  # fmt: skip

    base = Path(base_gguf).expanduser() if base_gguf is not None else default_base_gguf(model_or_folder)
    if base is None:
        raise ExportError("no base GGUF: the model does not record a .gguf it was loaded from; pass base_gguf= "
                          "(the embedded model: toolworld.rollout.models.ensure_model('smollm2'))",
                          kind="missing_base")  # fmt: skip
    reader = _open_base(base)
    base_arch = _field_value(reader, "general.architecture")
    if base_arch != arch:
        raise ExportError(f"base GGUF {base.name} is a {base_arch!r} model, the model is {arch!r}",
                          kind="base_mismatch" if base_arch in SUPPORTED_ARCHITECTURES.values()
                          else "unsupported_model")  # fmt: skip
    embed = state.get("model.embed_tokens.weight")
    _check_fits(config, reader, arch, int(embed.shape[0]) if embed is not None else -1, base)

    base_names = {t.name for t in reader.tensors}
    tensors = _gguf_tensors(state, config, arch, base_names, dtype)
    _check_shapes(tensors, reader, base)
    # tensors the HF model does not hold but llama.cpp reads (rope_freqs of llama-3 rope scaling) are constants
    # of the architecture: carried over from the base untouched
    extra = [t for t in reader.tensors if t.name not in tensors and t.name != "output.weight"]

    target = Path(out).expanduser()
    if target.is_dir():
        target = target / "model.gguf"
    with atomic_path(target, suffix=".gguf.tmp") as tmp:
        writer = gguf.GGUFWriter(str(tmp), arch)
        try:
            _copy_metadata(writer, reader)
            writer.add_file_type(_FILE_TYPES[dtype])
            if tool_prompt is None and isinstance(model_or_folder, str | Path):
                tool_prompt = model_tool_prompt(model_or_folder)
            if tool_prompt is None:  # a key an earlier export wrote into the base (a known model's default is no
                field = reader.get_field(GGUF_TOOL_PROMPT_KEY)  # evidence of how these weights were trained)
                tool_prompt = bytes(field.parts[-1]).decode("utf-8") if field is not None else None
            if tool_prompt is not None:
                writer.add_string(GGUF_TOOL_PROMPT_KEY, tool_prompt)
            for name in _ordered(tensors, (t.name for t in reader.tensors)):
                writer.add_tensor(name, tensors[name])
            for t in extra:
                writer.add_tensor(t.name, t.data, raw_shape=t.data.shape, raw_dtype=t.tensor_type)
            writer.write_header_to_file()
            writer.write_kv_data_to_file()
            writer.write_tensors_to_file(progress=False)
        finally:
            writer.close()
    return target


def _ordered(tensors: dict[str, Any], base_order: Iterable[str]) -> list[str]:
    """The base file's tensor order, then any new tensor (an untied head): a diff of two exports reads naturally."""
    order = [name for name in base_order if name in tensors]
    seen = set(order)
    return order + [name for name in tensors if name not in seen]
