"""LoRA for the trainers: wrapping a model in adapters, and the reference model a LoRA run gets for free.

SFT and GRPO both train LoRA through :func:`wrap_lora` (peft's adapters, ``W' = W + (alpha / r) B A`` with ``B``
zero at the start, so the wrapped model begins as the model given). For GRPO it is more than a memory saving:

- A policy-gradient update carries little information (a few bits per trial), which a low-rank update holds as
  well as a full one does; LoRA then matches full fine-tuning at about ten times its learning rate (Schulman et al.,
  "LoRA Without Regret", 2025).
- AdamW's first steps move every trainable weight by about ``lr`` whatever its gradient: on a small model with a
  handful of informative groups a step, a full update moves 135M weights by noise as far as by signal. LoRA bounds
  the update to ``r`` directions per projection, and everything else stays as SFT left it.
- The model the run started from is the same weights with the adapters switched off (:class:`AdapterOff`): a KL
  reference that costs no second copy.

peft injects the adapters into the model's own modules, so the transformers model the caller holds runs them in
its forward pass: the sampler, the trainer and the logprobs all use that object, and only saving and loading the
adapter, switching it off and merging it go through the peft wrapper.
"""

from __future__ import annotations

import copy
from typing import Any

from ..core.errors import ToolworldError

__all__ = ["DEFAULT_LORA_TARGETS", "AdapterOff", "folded_state_dict", "plain_copy", "wrap_lora"]

#: The attention and MLP projections of Llama-style models (SmolLM2, Qwen, Mistral): where LoRA adapters go.
DEFAULT_LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def wrap_lora(model: Any, *, r: int, alpha: int, dropout: float = 0.0,
              targets: tuple[str, ...] = DEFAULT_LORA_TARGETS,
              error: type[ToolworldError] = ToolworldError) -> Any:  # fmt: skip
    """``model`` wrapped in a peft model with LoRA adapters on the ``targets`` it has (its other weights frozen).

    Raises ``error`` (``missing_dependency`` without peft, ``invalid_option`` when the model has none of the
    target modules, with the names it does have).
    """
    try:
        from peft import LoraConfig, get_peft_model
    except ImportError as exc:
        raise error(f"--lora needs peft ({exc}): pip install 'toolworld[train]'", kind="missing_dependency") from exc
    names = {name.rsplit(".", 1)[-1] for name, _ in model.named_modules()}
    present = [t for t in targets if t in names]
    if not present:
        raise error(f"none of the LoRA target modules {list(targets)} is in this model; its modules include "
                    f"{sorted(names)[:20]}", kind="invalid_option")  # fmt: skip
    config = LoraConfig(r=r, lora_alpha=alpha, lora_dropout=dropout, target_modules=present, task_type="CAUSAL_LM")
    return get_peft_model(model, config)


class AdapterOff:
    """The model a LoRA run started from: ``peft_model`` called with its adapters switched off.

    It stands where a reference model goes (``token_logprobs(ref, batch)``): the same frozen weights the adapters
    sit on, so a KL term to the start needs no copy of the model.
    """

    def __init__(self, peft_model: Any) -> None:
        self.peft = peft_model

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        with self.peft.disable_adapter():
            return self.peft.get_base_model()(*args, **kwargs)

    def parameters(self) -> Any:
        return self.peft.parameters()

    def get_base_model(self) -> Any:
        return self.peft.get_base_model()


def _lora_layers(model: Any) -> dict[str, Any]:
    """The LoRA layers peft put into ``model`` (none without peft, or when it has none), by module name."""
    try:
        from peft.tuners.lora import LoraLayer
    except ImportError:
        return {}
    return {name: m for name, m in model.named_modules() if isinstance(m, LoraLayer)}


def folded_state_dict(model: Any) -> dict[str, Any]:
    """``model``'s weights under the plain model's names, each active adapter folded into the weight it adapts
    (``W + (alpha / r) B A``): what a separate inference engine loads to sample the policy being trained.

    ``model`` is a transformers model with adapters injected, its peft wrapper, or a plain model (its own state).
    Decoding through unmerged adapters costs a small model ~1.3x per token on a CPU (docs/benchmarks.md), and a
    merge in place would have to be undone before the next update, which float arithmetic does not do exactly.
    """
    import torch

    inner = model.get_base_model() if hasattr(model, "get_base_model") else model
    layers = _lora_layers(inner)
    state = {key.replace(".base_layer.", "."): value for key, value in inner.state_dict().items() if ".lora_" not in key}
    with torch.no_grad():
        for name, layer in layers.items():
            if layer.merged or layer.disable_adapters:
                continue
            key = f"{name}.weight"
            for adapter in layer.active_adapters:
                state[key] = state[key] + layer.get_delta_weight(adapter).to(state[key].dtype)
    return state


def plain_copy(model: Any) -> Any:
    """A copy of ``model`` without adapter layers, holding :func:`folded_state_dict`'s weights (``model`` is left
    as it is); a plain model is simply copied."""
    inner = model.get_base_model() if hasattr(model, "get_base_model") else model
    twin = copy.deepcopy(inner)
    for name, layer in _lora_layers(twin).items():
        parent, _, child = name.rpartition(".")
        setattr(twin.get_submodule(parent) if parent else twin, child, layer.get_base_layer())
    twin.load_state_dict(folded_state_dict(inner))
    return twin
