"""How far one GRPO update moves a trained model, per optimizer and learning rate, on the same sampled trials.

Run: ``python benchmarks/grpo_step.py --model DIR --tasks FILE [--n 8] [--group 4] [--temperature 0.3]
[--configs adamw:2e-5,sgd:0.05,sgd:0.2,lora:1e-4] [--branch gold:explain=1 --branch-at pick] [--kl 0.5]
[--layouts group,step]``.

A learning rate means different things to AdamW (whose first step moves every weight by ~lr, the sign of its
gradient) and to SGD (which moves each weight by lr times its gradient), and a GRPO run on a CPU is a few steps
long: a step that is too small leaves the policy where it was, one that is too large rewrites what SFT taught.
This samples ``--group`` trials of ``--n`` tasks once with the model (at ``--temperature``, bfloat16, batched, as
``benchmarks/learning.py --engine hf`` samples), computes the step's advantages as ``train grpo`` does, and then,
from the same weights each time, makes one update per configuration and measures:

- ``objective``: token mean of ``A_t * (log pi_new - log pi_old)`` over the trained tokens, at the sampling
  temperature: what the step gains on its own trials (first order, ``lr * |g|^2`` for SGD, ``g`` after clipping to norm 1);
- ``pos`` / ``neg``: the mean change of a sampled token's logprob in trials with a positive / negative advantage;
- ``gold_drift`` / ``gold_abs_drift``: the mean change (and mean absolute change) of the logprobs of the gold
  assistant tokens of ``--measure`` tasks of the same file that were not sampled: what the step costs elsewhere;
- ``step_norm`` (L2 norm of the weight change) and ``grad_norm`` (before clipping).

``lora:LR`` is AdamW on LoRA adapters (rank ``--lora-r``, alpha ``2r``, ``train grpo --lora``): its step norm is
that of the merged weights, its grad norm the adapters'.

``--branch SPEC [--branch-at pick]`` samples the trials part-way along the lead's path as ``train grpo --branch``
does, ``--kl C`` adds the KL term to the starting weights (the adapters switched off under ``lora``), and
``--layouts group,step`` makes each configuration's update once per layout from the same weights: ``group`` runs
a group's shared prompt once where that is less work than the step's (``grpo.share_sets``,
``GRPOConfig.share_groups``, the default), ``step`` one prompt for the whole step (the system prompt alone, the
earlier layout). Each row then also gives ``update_s`` and the tokens the update's
passes ran (``update_run``) of the conversations' whole length (``update_whole``): the time on this machine and the
work on any.

Prints one JSON line per configuration, then one JSON object as the last line.
"""

from __future__ import annotations

import argparse
import copy
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from toolworld import get_world
from toolworld.rollout.backends import make_policy
from toolworld.rollout.branch import BranchPolicy
from toolworld.rollout.engines.hf import HFEngine
from toolworld.rollout.token_policy import TokenPolicy
from toolworld.scoring.verify import score_trajectory
from toolworld.tasks.model import TaskSet, write_jsonl
from toolworld.train.data import Sample, collate
from toolworld.train.grpo import (
    ADVANTAGES,
    BRANCH_AT,
    OPTIMIZERS,
    REWARDS,
    GRPOConfig,
    advantaged,
    branch_depths,
    make_optimizer,
    rollouts,
    success_only,
    update,
)
from toolworld.train.logprobs import token_logprobs
from toolworld.train.lora import AdapterOff, wrap_lora
from toolworld.train.sft import load_model, sft_samples


def logprobs(model: Any, samples: list[Sample], pad: int, temperature: float) -> list[torch.Tensor]:
    """Each sample's ``[T]`` token logprobs (0 where no loss)."""
    with torch.no_grad():
        return [token_logprobs(model, collate([s], pad), temperature=temperature)[0] for s in samples]


def mean_change(before: list[torch.Tensor], after: list[torch.Tensor], samples: list[Sample], *,
                absolute: bool = False) -> list[float]:  # fmt: skip
    """Per sample, the mean change of its learnt tokens' logprobs."""
    out = []
    for b, a, s in zip(before, after, samples, strict=True):
        mask = torch.tensor(s.loss_mask, dtype=torch.float32)
        d = (a - b) * mask
        out.append(float((d.abs() if absolute else d).sum() / mask.sum()))
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", required=True, help="A trained model folder (e.g. runs/learning/sft/final).")
    p.add_argument("--tasks", type=Path, required=True, help="Task file: the first --n are sampled, the next "
                   "--measure give the gold conversations the drift is measured on.")  # fmt: skip
    p.add_argument("--offset", type=int, default=0, help="Skip this many tasks of the file first.")
    p.add_argument("--n", type=int, default=8, help="Tasks sampled.")
    p.add_argument("--group", type=int, default=4, help="Trials per task.")
    p.add_argument("--temperature", type=float, default=0.3)
    p.add_argument("--configs", default="adamw:2e-5,sgd:0.05,sgd:0.2",
                   help=f"Comma-separated OPTIMIZER:LR ({', '.join(OPTIMIZERS)}, or lora: AdamW on LoRA adapters).")
    p.add_argument("--lora-r", type=int, default=16, help="LoRA rank of the lora configurations.")
    p.add_argument("--advantage", choices=ADVANTAGES, default="gigpo")
    p.add_argument("--reward", choices=REWARDS, default="success")
    p.add_argument("--measure", type=int, default=8, help="Gold conversations (tasks after the sampled ones) measured.")
    p.add_argument("--gold-policy", default="gold", help="Gold policy spec of the drift set (gold:explain=1).")
    p.add_argument("--max-tokens", type=int, default=320, help="Tokens per assistant turn.")
    p.add_argument("--max-turns", type=int, default=12)
    p.add_argument("--max-len", type=int, default=6144)
    p.add_argument("--batch", type=int, default=8, help="Episodes decoded together.")
    p.add_argument("--tool-prompt", default="compact")
    p.add_argument("--seed", type=int, default=11)
    p.add_argument("--branch", default=None, metavar="SPEC",
                   help="Sample the trials after this policy's first k turns (gold:explain=1), as train grpo --branch.")
    p.add_argument("--branch-at", default="uniform", choices=tuple(BRANCH_AT), help="Where a branched group starts.")
    p.add_argument("--kl", type=float, default=0.0, help="KL coefficient to the starting weights (0: none).")
    p.add_argument("--layouts", default="group", help="Comma-separated update layouts, each timed from the same "
                   "weights: group (a group's shared prompt once where that pays), step (one prompt for the whole "
                   "step).")
    a = p.parse_args()
    configs = []
    for spec in a.configs.split(","):
        name, _, lr = spec.partition(":")
        try:
            rate = float(lr)
        except ValueError:
            rate = 0.0
        if name not in (*OPTIMIZERS, "lora") or not rate > 0:
            p.error(f"--configs: {spec!r} is not OPTIMIZER:LR with OPTIMIZER one of {', '.join(OPTIMIZERS)} or lora, "
                    "and LR > 0")
        configs.append((name, rate))
    layouts = a.layouts.split(",")
    if not set(layouts) <= {"group", "step"}:
        p.error(f"--layouts: {a.layouts!r} is not a comma-separated list of group and step")
    if a.branch_at != "uniform" and not a.branch:
        p.error("--branch-at places the lead's branch point: give --branch SPEC")

    from toolworld.env.limits import Limits

    tasks = TaskSet.load(a.tasks).tasks[a.offset :]
    sampled, held = tasks[: a.n], tasks[a.n : a.n + a.measure]
    if not sampled or not held:
        p.error(f"{a.tasks} has too few tasks after --offset {a.offset} for --n {a.n} and --measure {a.measure}")
    world = get_world(sampled[0].world)
    model, tokenizer, _ = load_model(a.model)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id

    twin = copy.deepcopy(model).to(torch.bfloat16).eval().requires_grad_(False)
    engine = HFEngine(model=twin, tokenizer=tokenizer, device="cpu", max_batch=a.batch)
    policy = TokenPolicy(engine, tokenizer, name="grpo-step", max_tokens=a.max_tokens, temperature=a.temperature,
                         tool_prompt=a.tool_prompt)  # fmt: skip
    scorer = lambda task, traj: score_trajectory(task, traj, world=world)  # noqa: E731
    limits = Limits(max_turns=a.max_turns, max_tokens=8192 - a.max_tokens)
    started = time.perf_counter()
    runner: Any = policy
    if a.branch:
        depths = branch_depths(world, sampled, make_policy(a.branch), seed=a.seed, step=0, limits=limits,
                               at=a.branch_at)  # fmt: skip
        runner = BranchPolicy(make_policy(a.branch), policy, depths)
    pairs = rollouts(world, sampled, runner, trials=a.group, salt=a.seed, concurrency=a.batch, limits=limits,
                     scorer=success_only(scorer) if a.reward == "success" else scorer)  # fmt: skip
    sample_s = time.perf_counter() - started
    engine.close()
    del twin

    def config(name: str, lr: float, layout: str = "group") -> GRPOConfig:
        return GRPOConfig(out=Path(tempfile.gettempdir()), group=a.group, temperature=a.temperature,
                          optimizer="adamw" if name == "lora" else name, lr=lr, lora=name == "lora", lora_r=a.lora_r,
                          lora_alpha=2 * a.lora_r, advantage=a.advantage, reward=a.reward, bf16=True, packing=False,
                          max_len=a.max_len, tensorboard=False, kl_coef=a.kl,
                          share_groups=layout == "group")  # fmt: skip

    _, train_on, spread = advantaged(pairs, config(*configs[0]))
    passed = sum(score.success for _, score in pairs)
    print(f"sampled {len(pairs)} trials in {sample_s:.0f} s, {passed} passed, {len(spread)} of {len(sampled)} groups "
          f"differ, {len(train_on)} trials to train on", flush=True)  # fmt: skip
    result: dict[str, Any] = {"benchmark": "grpo_step", "model": str(a.model), "temperature": a.temperature,
                              "trials": len(pairs), "passed": passed, "groups": len(spread),
                              "trained_trials": len(train_on), "sample_s": round(sample_s, 1), "configs": []}  # fmt: skip
    if not train_on:
        print(json.dumps(result))
        return
    with tempfile.TemporaryDirectory() as tmp:
        write_jsonl(Path(tmp) / "held.jsonl", held)
        gold = sft_samples(Path(tmp) / "held.jsonl", tokenizer, gold_out=Path(tmp) / "gold", max_len=a.max_len,
                           tool_prompt=a.tool_prompt, gold_policy=a.gold_policy)  # fmt: skip
    before, before_gold = logprobs(model, train_on, pad, a.temperature), logprobs(model, gold, pad, 1.0)
    for (name, lr), layout in ((c, lay) for c in configs for lay in layouts):
        trained = copy.deepcopy(model)
        cfg = config(name, lr, layout)
        peft = wrap_lora(trained, r=cfg.lora_r, alpha=cfg.lora_alpha) if cfg.lora else None  # adapters in trained
        ref = None
        if a.kl:
            ref = AdapterOff(peft) if peft is not None else copy.deepcopy(model).eval().requires_grad_(False)
        params = [q for q in trained.parameters() if q.requires_grad]
        t0 = time.perf_counter()
        stats = update(trained, ref, train_on, make_optimizer(params, cfg), params, cfg, pad)
        took = time.perf_counter() - t0
        after, after_gold = logprobs(trained, train_on, pad, a.temperature), logprobs(trained, gold, pad, 1.0)
        gain = num = 0.0
        pos, neg = [], []
        for b, af, s in zip(before, after, train_on, strict=True):
            mask, adv = torch.tensor(s.loss_mask, dtype=torch.float32), collate([s], pad).advantages[0]
            gain += float(((af - b) * mask * adv).sum())
            num += float(mask.sum())
            (pos if float((adv * mask).sum()) > 0 else neg).append(mean_change([b], [af], [s])[0])
        drift, abs_drift = mean_change(before_gold, after_gold, gold), mean_change(before_gold, after_gold, gold,
                                                                                   absolute=True)  # fmt: skip
        if peft is not None:  # the adapters folded into the weights they adapt, so the step norm compares like
            peft.merge_and_unload()
        moved = sum(float((q1.detach() - q0.detach()).norm() ** 2)
                    for q1, q0 in zip(trained.parameters(), model.parameters(), strict=True)) ** 0.5  # fmt: skip
        row = {"optimizer": name, "lr": lr, "objective": round(gain / num, 5),
               "pos": round(sum(pos) / len(pos), 5) if pos else None,
               "neg": round(sum(neg) / len(neg), 5) if neg else None,
               "gold_drift": round(sum(drift) / len(drift), 5), "gold_abs_drift": round(sum(abs_drift) / len(abs_drift), 5),
               "step_norm": round(moved, 5), "grad_norm": round(float(stats["grad_norm"]), 5),
               "update_s": round(took, 1), "layout": layout, "update_run": int(stats["update_run"]),
               "update_whole": int(stats["update_whole"])}  # fmt: skip
        print(json.dumps(row), flush=True)
        result["configs"].append(row)
        del trained
    print(json.dumps(result))


if __name__ == "__main__":
    main()
