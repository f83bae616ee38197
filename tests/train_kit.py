"""What the training tests share: SmolLM2's real tokenizer (from ../shared) and tiny random Llamas around it."""

from __future__ import annotations

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
