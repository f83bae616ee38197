"""A tiny random-weight llama GGUF around SmolLM2's real vocabulary, for llama.cpp tests without a download.

The vocabulary, merges, token types and chat template come from ``../shared/tokenizers/smollm2-135m-instruct``
and are written under the same metadata keys llama.cpp's converter uses (``tokenizer.ggml.pre = smollm``), so the
file exercises exactly the tokenizer path of the embedded default model; the network is one block of width 32.
"""

from __future__ import annotations

import json
from pathlib import Path

SHARED_TOKENIZERS = Path(__file__).resolve().parents[2] / "shared" / "tokenizers"
SMOLLM2 = SHARED_TOKENIZERS / "smollm2-135m-instruct"


def write_tiny_smollm2_gguf(path: Path, *, width: int = 32, ffn: int = 64, context: int = 8192, seed: int = 0) -> Path:
    """Write the model to ``path`` (about 14 MB, under a second) and return ``path``."""
    import gguf
    import numpy as np

    spec = json.loads((SMOLLM2 / "tokenizer.json").read_text())
    config = json.loads((SMOLLM2 / "tokenizer_config.json").read_text())
    vocab: dict[str, int] = spec["model"]["vocab"]
    tokens = [""] * len(vocab)
    for text, idx in vocab.items():
        tokens[idx] = text
    types = [1] * len(tokens)  # llama.cpp token types: 1 normal, 3 control, 4 user-defined
    for added in spec["added_tokens"]:
        tokens[added["id"]] = added["content"]
        types[added["id"]] = 3 if added["special"] else 4
    merges = [m if isinstance(m, str) else " ".join(m) for m in spec["model"]["merges"]]

    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_context_length(context)
    writer.add_embedding_length(width)
    writer.add_block_count(1)
    writer.add_feed_forward_length(ffn)
    writer.add_head_count(2)
    writer.add_head_count_kv(1)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_rope_dimension_count(width // 2)
    writer.add_vocab_size(len(tokens))
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("smollm")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(merges)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_unk_token_id(0)
    writer.add_pad_token_id(2)
    writer.add_add_bos_token(False)
    writer.add_chat_template(config["chat_template"])
    rng = np.random.default_rng(seed)

    def weight(name: str, *shape: int) -> None:
        writer.add_tensor(name, (rng.standard_normal(shape) * 0.5).astype(np.float32))

    weight("token_embd.weight", len(tokens), width)
    weight("output.weight", len(tokens), width)
    writer.add_tensor("output_norm.weight", np.ones(width, np.float32))
    writer.add_tensor("blk.0.attn_norm.weight", np.ones(width, np.float32))
    writer.add_tensor("blk.0.ffn_norm.weight", np.ones(width, np.float32))
    weight("blk.0.attn_q.weight", width, width)
    weight("blk.0.attn_k.weight", width // 2, width)
    weight("blk.0.attn_v.weight", width // 2, width)
    weight("blk.0.attn_output.weight", width, width)
    weight("blk.0.ffn_gate.weight", ffn, width)
    weight("blk.0.ffn_up.weight", ffn, width)
    weight("blk.0.ffn_down.weight", width, ffn)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def write_sentencepiece_gguf(path: Path) -> Path:
    """A GGUF whose vocabulary is SentencePiece ('llama'), which cannot be rebuilt as a byte-level BPE tokenizer."""
    import gguf

    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_tokenizer_model("llama")
    writer.add_token_list(["<unk>", "a"])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
