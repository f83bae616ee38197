"""SFT step throughput of the embedded model (SmolLM2-135M) on gold retail conversations, per loss layout.

Run: ``python benchmarks/train.py [-n TASKS] [--steps N] [--per-step K] [--lora] [--tool-prompt auto|compact|both]``.

Variants, alternated within one run so a noisy shared machine slows them alike:

- ``baseline``: full-vocabulary logits at every position, one packed row per sample set (the original loss);
- ``loss_positions``: the LM head only where a token carries loss;
- ``shared_prefix``: that, and the prompt the samples share laid once per row;
- ``unpacked``: the LM head only where a token carries loss, one sample per micro-batch with a plain causal mask
  (``--no-packing``): attention kernels then skip the masked half and keep no T x T matrix, which packed rows'
  explicit masks force them to build (quadratic in the row, ~2.4 GB per layer for an 8k-token row);
- ``unpacked_bf16``: that, with the forward pass under bfloat16 autocast (``--bf16``); its loss differs a little;
- ``unpacked_kv`` / ``unpacked_kv_bf16``: those, with the prompt the step's conversations share run once and
  continued through the KV cache (``toolworld.train.prefix.SharedPrefix``, what ``--no-packing`` trains with);
- ``unpacked_kv_split`` / ``unpacked_kv_split_bf16``: those, with the continuation's attention split into an
  unmasked part over the prompt's keys and a causal one over its own (``toolworld.train.attention``, what
  ``load_model`` sets up); every other variant runs transformers' own SDPA.

``--variants`` picks some; ``--gradient-checkpointing`` recomputes layers in the backward pass of the packed ones
(what long packed rows need to fit in memory; one sample with a causal mask fits without).

Every timed step starts from the same weights (restored untimed after each step), so each variant's step ``k``
trains the same samples from the same model and reports the same loss: the figures compare cost only. Effective
tokens/s divides the samples' own lengths (prompt included) by the wall time of forward, backward and the
optimizer step; computed tokens are what the model actually ran on. Prints a summary, then one JSON object as
the last line.
"""

from __future__ import annotations

import argparse
import inspect
import json
import platform
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from toolworld.tasks.generate import generate
from toolworld.tasks.model import write_jsonl
from toolworld.train.attention import use_split_attention
from toolworld.train.data import Batch, Sample, collate, pack, truncate
from toolworld.train.logprobs import token_logprobs
from toolworld.train.prefix import SharedPrefix
from toolworld.train.sft import layer_checkpointing, load_model, sft_samples

VARIANTS = ("baseline", "loss_positions", "shared_prefix", "unpacked", "unpacked_bf16", "unpacked_kv", "unpacked_kv_bf16",
            "unpacked_kv_split", "unpacked_kv_split_bf16")


def batches_for(samples: list[Sample], variant: str, batch_tokens: int, pad: int) -> list[Batch]:
    """The micro-batches a variant trains ``samples`` as."""
    if variant.startswith("unpacked"):
        return [collate([s], pad) for s in samples]
    return pack(samples, batch_tokens, pad, share_prefix=variant == "shared_prefix")


def full_logprobs(model: Any, batch: Batch) -> torch.Tensor:
    """The loss as it was: logits at every position, then picked (the baseline's cost)."""
    first = next(model.parameters())
    batch = batch.to(first.device, dtype=first.dtype)
    logits = model(**batch.model_inputs()).logits[:, :-1].float()
    target = batch.input_ids[:, 1:]
    picked = torch.gather(logits, -1, target.unsqueeze(-1)).squeeze(-1) - torch.logsumexp(logits, dim=-1)
    out = torch.zeros(batch.input_ids.shape, dtype=torch.float32, device=logits.device)
    out[:, 1:] = picked
    return out.masked_fill((batch.position_ids == 0) | (batch.segment_ids == 0), 0.0)


def step(model: Any, optimizer: Any, params: list[Any], batches: list[Batch], variant: str) -> tuple[float, int]:
    """One SFT step (token-weighted mean NLL over the micro-batches, as ``train_sft`` takes it); its loss and the
    tokens the model ran on."""
    first = next(model.parameters())
    total = sum(float(b.loss_mask.sum()) for b in batches)
    optimizer.zero_grad(set_to_none=True)
    loss_sum = 0.0
    bf16 = variant.endswith("_bf16")
    if "_split" not in variant:
        model.set_attn_implementation("sdpa")
    elif not use_split_attention(model):
        raise SystemExit(f"{variant}: this model or transformers cannot run the split attention")
    moved = [b.to(first.device, dtype=first.dtype) for b in batches]
    with torch.autocast(first.device.type, dtype=torch.bfloat16, enabled=bf16):
        prefix = SharedPrefix(model, moved, enabled="_kv" in variant, min_tokens=1)
    for batch in prefix.batches:
        with torch.autocast(first.device.type, dtype=torch.bfloat16, enabled=bf16):
            logp = full_logprobs(model, batch) if variant == "baseline" else token_logprobs(model, batch)
        mask = batch.loss_mask
        loss = -(logp * mask).sum() / total
        loss.backward()
        loss_sum += float(loss.detach())
    prefix.backward()
    torch.nn.utils.clip_grad_norm_(params, 1.0)
    optimizer.step()
    return loss_sum, sum(b.computed_tokens for b in batches) - prefix.length * max(len(batches) - 1, 0)


def gold_samples(n: int, seed: int, tokenizer: Any, tool_prompt: str, work: Path, max_len: int) -> list[Sample]:
    tasks_file = work / f"tasks-{n}-{seed}.jsonl"
    if not tasks_file.exists():
        write_jsonl(tasks_file, generate("retail", n, seed=seed).lines)
    kwargs: dict[str, Any] = {"gold_out": work / "gold"}
    if "tool_prompt" in inspect.signature(sft_samples).parameters:
        kwargs["tool_prompt"] = tool_prompt
    cut = [truncate(s, max_len) for s in sft_samples(tasks_file, tokenizer, **kwargs)]
    return [s for s in cut if any(s.loss_mask)]  # a cut that kept only the prompt has nothing to train on


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=4, help="retail tasks whose gold conversations are trained on")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=1, help="timed steps per variant (2: ~8 min on 2 cores)")
    parser.add_argument("--per-step", type=int, default=2, help="samples per step")
    parser.add_argument("--batch-tokens", type=int, default=4096, help="row budget of a packed micro-batch")
    parser.add_argument("--max-len", type=int, default=3072, help="samples are cut to this many tokens")
    parser.add_argument("--lora", action="store_true", help="train LoRA adapters instead of every weight")
    parser.add_argument("--tool-prompt", choices=("auto", "compact", "both"), default="compact",
                        help="how the tools are stated; auto's prompt alone is ~4.8k tokens: give it --max-len 6144 "
                             "--batch-tokens 8192 and ~20 GB of memory")  # fmt: skip
    parser.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated, from " + ", ".join(VARIANTS))
    parser.add_argument("--gradient-checkpointing", action="store_true", help="recompute layers in the backward pass")
    parser.add_argument("--work", type=Path, default=None, help="folder for the tasks and gold runs (kept; reused)")
    args = parser.parse_args()
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    if not variants or set(variants) - set(VARIANTS):
        parser.error(f"--variants takes some of {', '.join(VARIANTS)}")
    torch.manual_seed(0)

    model, tokenizer, _ = load_model("smollm2", split_attention=False)  # each variant picks its attention
    if args.lora:
        from toolworld.train.lora import wrap_lora

        model = wrap_lora(model, r=16, alpha=32)
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=1e-5)
    initial = {k: v.detach().clone() for k, v in model.state_dict().items()}
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id

    has_option = "tool_prompt" in inspect.signature(sft_samples).parameters
    prompts = ["auto", "compact"] if args.tool_prompt == "both" else [args.tool_prompt]
    if not has_option and prompts != ["auto"]:
        print("sft_samples has no tool_prompt option here: only the default prompt is measured")
        prompts = ["auto"]
    # not TOOLWORLD_CACHE: that also says where the model is cached, which must stay where it was pulled
    work = args.work or Path(tempfile.mkdtemp(prefix="toolworld-bench-train-"))
    work.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {}
    for prompt in prompts:
        samples = gold_samples(args.n, args.seed, tokenizer, prompt, work, args.max_len)
        sets = [samples[i : i + args.per_step] for i in range(0, len(samples), args.per_step)][: args.steps]
        lengths = [len(s) for s in samples]
        print(f"tool_prompt={prompt}: {len(samples)} samples, tokens min/median/max {min(lengths)}/"
              f"{int(statistics.median(lengths))}/{max(lengths)}, loss tokens {sum(sum(s.loss_mask) for s in samples)}")  # fmt: skip
        # untimed warm-up of every variant on a short cut: allocator pools, optimizer state and kernel choice are
        # one-time costs that would otherwise land on whichever variant runs first
        warm = [truncate(s, 512) for s in sets[0]]
        warm = [s for s in warm if any(s.loss_mask)] or [truncate(sets[0][0], args.max_len)]
        for variant in variants:
            with layer_checkpointing(model, args.gradient_checkpointing and not variant.startswith("unpacked")):
                step(model, optimizer, params, batches_for(warm, variant, args.batch_tokens, pad), variant)[0]
            model.load_state_dict(initial)
            optimizer.state.clear()
        runs: dict[str, dict[str, list[float]]] = {v: {"wall": [], "loss": [], "computed": [], "own": []}
                                                   for v in variants}  # fmt: skip
        for k in range(len(sets)):
            for variant in variants:
                batches = batches_for(sets[k], variant, args.batch_tokens, pad)
                t0 = time.perf_counter()
                with layer_checkpointing(model, args.gradient_checkpointing and not variant.startswith("unpacked")):
                    loss, computed = step(model, optimizer, params, batches, variant)
                wall = time.perf_counter() - t0
                model.load_state_dict(initial)
                optimizer.state.clear()
                run = runs[variant]
                run["wall"].append(wall)
                run["loss"].append(loss)
                run["computed"].append(computed)
                run["own"].append(sum(b.sample_tokens for b in batches))
                print(f"  step {k + 1} {variant:15s} {wall:6.1f} s  loss {loss:.5f}  computed {run['computed'][-1]}"
                      f"  effective {run['own'][-1] / wall:6.1f} tok/s", flush=True)  # fmt: skip
        for variant, run in runs.items():
            results[f"{prompt}/{variant}"] = {
                "effective_tokens_per_s": round(sum(run["own"]) / sum(run["wall"]), 1),
                "computed_tokens_per_step": round(statistics.mean(run["computed"]), 1),
                "sample_tokens_per_step": round(statistics.mean(run["own"]), 1),
                "first_loss": round(run["loss"][0], 6),
                "step_s": round(statistics.mean(run["wall"]), 2),
                # interference from other work on a shared machine only slows a step: the best step is the cleaner
                # comparison when the machine is busy
                "best_effective_tokens_per_s": round(max(o / w for o, w in zip(run["own"], run["wall"], strict=True)), 1),
            }
        anchor = variants[0]  # the first variant asked for is what the others are compared with
        base = results[f"{prompt}/{anchor}"]["effective_tokens_per_s"]
        for variant in variants:
            r = results[f"{prompt}/{variant}"]
            r["speedup"] = round(r["effective_tokens_per_s"] / base, 2)
            r["best_speedup"] = round(r["best_effective_tokens_per_s"] / results[f"{prompt}/{anchor}"]
                                      ["best_effective_tokens_per_s"], 2)  # fmt: skip
            print(f"{prompt}/{variant:15s} {r['effective_tokens_per_s']:7.1f} tok/s  x{r['speedup']:.2f}  (best step "
                  f"x{r['best_speedup']:.2f})  computed/step "
                  f"{r['computed_tokens_per_step']:.0f} of {r['sample_tokens_per_step']:.0f}  first loss {r['first_loss']}")  # fmt: skip
        exact = [results[f"{prompt}/{v}"]["first_loss"] for v in variants if not v.endswith("_bf16")]
        results[f"{prompt}/same_first_loss"] = not exact or max(exact) - min(exact) < 1e-3
    summary = {"bench": "train", "model": "smollm2", "lora": args.lora, "tasks": args.n, "steps": args.steps,
               "per_step": args.per_step, "batch_tokens": args.batch_tokens, "max_len": args.max_len,
               "variants": variants, "anchor": variants[0], "gradient_checkpointing": args.gradient_checkpointing,
               "threads": torch.get_num_threads(),
               "machine": platform.machine(), "results": results}  # fmt: skip
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
