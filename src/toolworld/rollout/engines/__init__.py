"""Token engines (``hf``, ``gguf``, ``vllm``) and :func:`make_token_policy`, the ``--policy`` factory for them.

An engine turns prompt token ids into sampled token ids with their logprobs (``token_policy.Engine``);
``TokenPolicy`` does everything else (chat template, token buffer, tool-call parsing). Importing this package is
cheap: torch, transformers and xllamacpp load only when an engine is built.

=========  ==========================  ==========================================================================
kind       target                      options (``key=value`` after the spec, e.g. ``hf:./m,temperature=0.7``)
=========  ==========================  ==========================================================================
hf         model folder or .gguf file  tokenizer, device, dtype, prefix_cache
gguf       .gguf file                  tokenizer, n_ctx, threads, n_parallel, gpu_layers, verify_tokenizer, verbose,
                                       kv_cache (f16 | f32)
vllm       MODEL@URL                   tokenizer (required unless MODEL is a local folder), api_key, timeout_s,
                                       max_retries, backoff_s
smollm2    (none)                      engine (gguf or hf) and that engine's options; pulled on first use;
                                       defaults max_tokens=256 and (gguf) n_parallel=1
=========  ==========================  ==========================================================================

Every kind also takes the policy options ``temperature``, ``max_tokens``, ``tool_format`` and ``tool_prompt``
(``auto``, ``json`` or ``compact``: how the tools are stated; by default what the model says of itself, see
``models.model_tool_prompt``: ``compact`` for smollm2 and for models trained with it, else ``auto``). The four kinds
register with the ``--policy`` registry in ``toolworld.rollout.backends.token_kinds``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..token_policy import TokenPolicy

__all__ = ["ENGINE_OPTIONS", "POLICY_OPTIONS", "build_engine", "make_gguf", "make_hf", "make_smollm2", "make_token_policy",
           "make_vllm"]


def _to_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"expected true or false, got {value!r}")


def _to_int(value: Any) -> int:
    if isinstance(value, bool):
        raise ValueError(f"expected an integer, got {value!r}")
    if isinstance(value, float):
        if not value.is_integer():
            raise ValueError(f"expected an integer, got {value!r}")
        return int(value)
    return int(str(value).strip())


def _to_float(value: Any) -> float:
    if isinstance(value, bool):
        raise ValueError(f"expected a number, got {value!r}")
    return float(str(value).strip()) if not isinstance(value, int | float) else float(value)


def _to_str(value: Any) -> str:
    text = str(value).strip()
    if not text:
        raise ValueError("expected a non-empty value")
    return text


def _at_least(minimum: float, convert: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def check(value: Any) -> Any:
        out = convert(value)
        if out < minimum:
            raise ValueError(f"must be >= {minimum:g}, got {out!r}")
        return out

    return check


#: Options TokenPolicy takes, whatever the engine.
POLICY_OPTIONS: dict[str, Callable[[Any], Any]] = {
    "temperature": _at_least(0.0, _to_float),
    "max_tokens": _at_least(1, _to_int),
    "tool_format": _to_str,
    "tool_prompt": _to_str,
}

#: Options each engine takes, with their converters.
ENGINE_OPTIONS: dict[str, dict[str, Callable[[Any], Any]]] = {
    "hf": {
        "tokenizer": _to_str,
        "device": _to_str,
        "dtype": _to_str,
        "prefix_cache": _to_bool,
        "max_batch": _at_least(1, _to_int),
        "batch_wait_s": _at_least(0.0, _to_float),
        "hand_back": _to_bool,
        "refill_wait_s": _at_least(0.0, _to_float),
        "batch_prefill": _to_bool,
    },
    "gguf": {
        "tokenizer": _to_str,
        "n_ctx": _at_least(16, _to_int),
        "threads": _at_least(1, _to_int),
        "n_parallel": _at_least(1, _to_int),
        "gpu_layers": _to_int,
        "verify_tokenizer": _to_bool,
        "verbose": _to_bool,
        "kv_cache": _to_str,
    },
    "vllm": {
        "tokenizer": _to_str,
        "api_key": _to_str,
        "timeout_s": _at_least(0.001, _to_float),
        "max_retries": _at_least(0, _to_int),
        "backoff_s": _at_least(0.0, _to_float),
    },
}


def _convert(kind: str, options: dict[str, Any], allowed: dict[str, Callable[[Any], Any]]) -> dict[str, Any]:
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise ValueError(f"unknown option(s) for {kind}: {', '.join(unknown)}; {kind} takes "
                         f"{', '.join(sorted(allowed))}")  # fmt: skip
    out = {}
    for key, value in options.items():
        try:
            out[key] = allowed[key](value)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"option {key}={value!r} for {kind}: {exc}") from None
    return out


#: Defaults of the embedded model (each can be overridden in the spec: ``smollm2,max_tokens=512,n_parallel=2``).
SMOLLM2_MAX_TOKENS = 256
SMOLLM2_SLOTS = 1


def build_engine(kind: str, target: str | None, **options: Any) -> Any:
    """Just the engine of :func:`make_token_policy` (options already converted)."""
    if kind == "hf":
        from .hf import HFEngine

        return HFEngine(target, **options)
    if kind == "gguf":
        from .gguf import GGUFEngine

        return GGUFEngine(target, **options)  # type: ignore[arg-type]
    if kind == "vllm":
        from .vllm import VLLMEngine

        model, _, url = (target or "").rpartition("@")
        if not model or not url:
            raise ValueError(f"vllm needs MODEL@URL, got {target!r} (e.g. vllm:Qwen/Qwen3-8B@http://localhost:8000)")
        return VLLMEngine(model, url, **options)
    raise ValueError(f"unknown engine kind {kind!r}; known: hf, gguf, vllm, smollm2")


def _default_tool_prompt(policy_kwargs: dict[str, Any], model: Path) -> None:
    """Fill ``tool_prompt`` with what the model file or folder says of itself, unless the spec set it."""
    from ..models import model_tool_prompt

    if "tool_prompt" not in policy_kwargs:
        policy_kwargs["tool_prompt"] = model_tool_prompt(model) or "auto"


def make_token_policy(kind: str, target: str | None = None, **options: Any) -> TokenPolicy:
    """A token-exact policy for ``--policy KIND:TARGET,key=value,...``.

    ``options`` may be strings (from the command line) or already typed; each is converted and checked, and a
    bad one raises ``ValueError`` naming the option and what it accepts. A missing model file raises
    ``ValueError``; a failed pull of ``smollm2`` raises ``models.ModelPullError`` (with ``kind`` and ``hint``).
    """
    from ..token_policy import TokenPolicy

    kind = kind.strip().lower()
    policy_opts = {k: options.pop(k) for k in list(options) if k in POLICY_OPTIONS}
    policy_kwargs = _convert(kind, policy_opts, POLICY_OPTIONS)
    if kind == "smollm2":
        from ..models import ensure_model

        engine_kind = str(options.pop("engine", "gguf")).strip().lower()
        if engine_kind not in ("gguf", "hf"):
            raise ValueError(f"option engine={engine_kind!r} for smollm2: use gguf (llama.cpp) or hf (transformers)")
        engine_opts = _convert(f"smollm2 ({engine_kind})", options, ENGINE_OPTIONS[engine_kind])
        # A 135M model on a laptop CPU: short turns (it rambles to any limit it is given) and one llama.cpp slot.
        # On a CPU, evaluating the ~4k-token system prompt dominates; one slot evaluates it once and every later
        # episode reuses it from the prompt cache, while each extra slot would evaluate it again (measured: 10
        # retail tasks in 3.2 min with one slot, 5.3 min with four, on 2 cores).
        policy_kwargs.setdefault("max_tokens", SMOLLM2_MAX_TOKENS)
        if engine_kind == "gguf":
            engine_opts.setdefault("n_parallel", SMOLLM2_SLOTS)
        path = ensure_model("smollm2")
        _default_tool_prompt(policy_kwargs, path)
        engine = build_engine(engine_kind, str(path), **engine_opts)
        name = "smollm2" if engine_kind == "gguf" else "smollm2-hf"
    elif kind in ENGINE_OPTIONS:
        if not target:
            raise ValueError(f"{kind} needs a target: " + {"hf": "hf:MODEL_FOLDER", "gguf": "gguf:FILE.gguf",
                                                             "vllm": "vllm:MODEL@URL"}[kind])  # fmt: skip
        engine_opts = _convert(kind, options, ENGINE_OPTIONS[kind])
        if kind != "vllm":
            _default_tool_prompt(policy_kwargs, Path(target))
        engine = build_engine(kind, target, **engine_opts)
        label = target.rpartition("@")[0] if kind == "vllm" else Path(target).name or target
        name = f"{kind}:{label}"
    else:
        raise ValueError(f"unknown token policy kind {kind!r}; known: hf, gguf, vllm, smollm2")
    return TokenPolicy(engine, engine.tokenizer, name=name, **policy_kwargs)
