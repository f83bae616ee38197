"""The ``--policy`` kinds that sample tokens themselves (``vllm``, ``hf``, ``gguf``, ``smollm2``), registered as
light factories: the engine modules (and torch, transformers, xllamacpp) are imported by ``make_token_policy`` only
when a policy of that kind is built.

They live here rather than beside the engines so that the registry's order (what ``--help`` lists) does not depend
on which of the two packages a program happens to import first.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import engines
from ..engines import ENGINE_OPTIONS, POLICY_OPTIONS
from . import PolicySpec, policy

if TYPE_CHECKING:
    from ..token_policy import TokenPolicy



def _options(*groups: Any) -> tuple[str, ...]:
    return tuple(dict.fromkeys(name for group in groups for name in group))


# Where each kind's tokenizer lives when the spec has no tokenizer= option (which wins, see tokenizer_source):
# read off the spec the way make_token_policy would find it, without loading or pulling anything.


def _target_tokenizer(spec: PolicySpec) -> str | None:
    """hf, gguf: the model folder or .gguf file holds the tokenizer the engine loads."""
    return spec.target


def _vllm_tokenizer(spec: PolicySpec) -> str | None:
    """vllm: the served MODEL, when it names a local folder (a hub name needs tokenizer=)."""
    model = (spec.target or "").rpartition("@")[0].strip()
    return model if model and Path(model).expanduser().is_dir() else None


def _smollm2_tokenizer(spec: PolicySpec) -> str | None:
    """smollm2: the pulled GGUF file (either engine renders with its vocabulary); None until it is pulled."""
    from ..models import is_pulled, model_path

    return str(model_path("smollm2")) if is_pulled("smollm2") else None


@policy("vllm", usage="vllm:MODEL@URL[,k=v...]", help="vLLM server, token-exact",
        options=_options(POLICY_OPTIONS, ENGINE_OPTIONS["vllm"]), takes_target="MODEL@URL",
        tokenizer=_vllm_tokenizer)  # fmt: skip
def make_vllm(target: str, **options: Any) -> TokenPolicy:
    if "@" not in target:
        raise ValueError(f"vllm needs MODEL@URL, got {target!r} (e.g. vllm:Qwen/Qwen3-8B@http://localhost:8000)")
    return engines.make_token_policy("vllm", target, **options)


@policy("hf", usage="hf:PATH[,k=v...]", help="transformers model directory, token-exact",
        options=_options(POLICY_OPTIONS, ENGINE_OPTIONS["hf"]), takes_target="a path",
        tokenizer=_target_tokenizer)  # fmt: skip
def make_hf(target: str, **options: Any) -> TokenPolicy:
    return engines.make_token_policy("hf", target, **options)


@policy("gguf", usage="gguf:PATH[,k=v...]", help="GGUF file through xllamacpp, token-exact",
        options=_options(POLICY_OPTIONS, ENGINE_OPTIONS["gguf"]), takes_target="a path",
        tokenizer=_target_tokenizer)  # fmt: skip
def make_gguf(target: str, **options: Any) -> TokenPolicy:
    return engines.make_token_policy("gguf", target, **options)


@policy("smollm2", usage="smollm2[,k=v...]", help="the embedded SmolLM2-135M-Instruct (engine=gguf or hf)",
        options=_options(["engine"], POLICY_OPTIONS, ENGINE_OPTIONS["gguf"], ENGINE_OPTIONS["hf"]),
        tokenizer=_smollm2_tokenizer)  # fmt: skip
def make_smollm2(**options: Any) -> TokenPolicy:
    return engines.make_token_policy("smollm2", None, **options)
