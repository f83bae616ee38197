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

from typing import Any

from ..core.errors import ToolworldError

__all__ = ["DEFAULT_LORA_TARGETS", "AdapterOff", "wrap_lora"]

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
