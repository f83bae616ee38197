"""What the training tests share: SmolLM2's real tokenizer (from ../shared) and tiny random Llamas around it."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

SMOLLM2_TOKENIZER = Path(__file__).resolve().parents[2] / "shared" / "tokenizers" / "smollm2-135m-instruct"


def smollm2_tokenizer() -> Any:
    """The real tokenizer, or a skip that says why (a clone without ../shared)."""
    if not SMOLLM2_TOKENIZER.is_dir():
        pytest.skip(f"needs the real tokenizers of ../shared/tokenizers; {SMOLLM2_TOKENIZER} is absent")
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(SMOLLM2_TOKENIZER), local_files_only=True)


def tiny_llama(tokenizer: Any, *, hidden: int = 64, heads: int = 4, kv_heads: int = 2, tie: bool = True,
               max_positions: int = 16384, seed: int = 0) -> Any:  # fmt: skip
    """A 2-layer random-weight Llama over the tokenizer's whole vocabulary, the same for a seed."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=hidden, intermediate_size=2 * hidden,
                         num_hidden_layers=2, num_attention_heads=heads, num_key_value_heads=kv_heads,
                         max_position_embeddings=max_positions, tie_word_embeddings=tie)  # fmt: skip
    return LlamaForCausalLM(config)


def count_split_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Record the query length of every split attention call (``toolworld.train.attention``) from now on."""
    from toolworld.train import attention

    calls: list[int] = []
    real = attention.split_attention

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(args[0].shape[2])
        return real(*args, **kwargs)

    monkeypatch.setattr(attention, "split_attention", counted)
    return calls


def conversations(vocab: int, *, prefix: int = 60, n: int = 3, seed: int = 0) -> list[Any]:
    """``n`` samples opening with the same ``prefix`` unlearnt tokens, then their own turns, some learnt."""
    from toolworld.train.data import Sample

    rng = random.Random(seed)
    head = [rng.randrange(vocab) for _ in range(prefix)]
    out = []
    for k in range(n):
        own = [rng.randrange(vocab) for _ in range(20 + 7 * k)]
        mask = [0] * prefix + [0] * 5 + [1] * (len(own) - 5)
        logprobs = [(-0.5 - 0.1 * k) if m else 0.0 for m in mask]
        out.append(Sample(input_ids=head + own, loss_mask=mask, logprobs=logprobs, advantage=(-1.0) ** k,
                          group="g"))  # fmt: skip
    return out


def prefix_step(model: Any, micro: list[Any], loss_of: Any, *, share: bool) -> tuple[float, dict[str, Any]]:
    """One step's summed loss and the gradients it leaves, with the step's shared prompt run once or not."""
    from toolworld.train.prefix import SharedPrefix

    model.zero_grad(set_to_none=True)
    prefix = SharedPrefix(model, micro, enabled=share, min_tokens=1)
    total = 0.0
    for batch in prefix.batches:
        loss = loss_of(model, batch)
        loss.backward()
        total += float(loss.detach())
    prefix.backward()
    return total, grads(model)


def grads(model: Any) -> dict[str, Any]:
    """A copy of every gradient the model holds, by parameter name."""
    return {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}
