"""The learning benchmark: does training in toolworld make the embedded model better at tasks it never saw?

SmolLM2-135M-Instruct (the embedded model) is trained in stages on retail tasks and evaluated after each on the
same held-out tasks, with the scripted user and the scorer, through ``toolworld.pipeline.run`` (the path
``toolworld run`` takes):

    base   the model as shipped
    sft    supervised fine-tuning on the gold conversations of the training tasks
    rft    rejection fine-tuning: the SFT model plays each training task k times, learns its own passed trials
    grpo   on-policy GRPO from the RFT model (group-relative advantages, TIS against the sampler's logprobs)

Training and held-out tasks come from different generator seeds, and held-out tasks whose customer appears in
the training set are dropped, so a held-out pass is never a memorised customer. Every stage is evaluated from a
GGUF export of its weights (f16, the base too: quantization costs every stage alike) run by llama.cpp at
temperature 0, one trial per task: pass^1 with its 95% Wilson interval (``--eval-trials K --eval-temperature T``:
K sampled trials per task, pass^1 the fraction that passed, its interval over task means). Each stage is compared
with the one before it on the same tasks: the mean per-task gain with its 95% interval, and how many tasks it fixed
and broke with their sign test. Sampling for RFT and GRPO also runs on llama.cpp over a fresh export of the current
weights (the weight sync of a separate inference engine).

Goal: >= 30 points of held-out pass^1 gained by SFT over the base model, and GRPO >= 5 more, in <= 2 hours on a
2-core CPU. Each stage's result is kept in OUT/<stage>.json, so a rerun with the same OUT skips finished stages
(and ``--stages`` picks some). Every evaluation run's report shows the curve so far (``learning.json``).

    python benchmarks/learning.py --out runs/learning                 # the benchmark (run it in the background)
    python benchmarks/learning.py --out /tmp/lq --quick                # a few tasks and steps: does it all run?
    python benchmarks/learning.py --out runs/learning-b --start-from runs/learning --stages grpo ...
                                        # a GRPO variant from the same SFT weights, on the same tasks
    python benchmarks/learning.py --out runs/learning-gpu --engine hf --device cuda   # the GPU recipe (see below)

``--engine hf`` samples RFT's and GRPO's trials with transformers (``--batch`` episodes decoded together, in
``--hf-dtype``, from a twin of the trained weights synced before every step) and, unless ``--eval-engine`` says
otherwise, evaluates each stage the same way. On 2 CPU cores it plays an episode ~1.7x faster than llama.cpp
(``benchmarks/engines.py``); with ``--device cuda`` it is the GPU recipe: more tasks, larger groups and more GRPO
steps than fit 2 CPU cores (``docs/benchmarks.md`` has the command).

The last line printed is one JSON object.
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from toolworld import get_world
from toolworld.core.dates import MONTHS
from toolworld.pipeline import run
from toolworld.scoring.metrics import paired_gain, task_interval, wilson
from toolworld.tasks.generate import generate
from toolworld.tasks.model import DEMANDS, Task, TaskSet
from toolworld.train.grpo import ADVANTAGES, BRANCH_AT, REWARD_CONTROLS, REWARDS

STAGES = ("base", "sft", "rft", "grpo")
#: what :meth:`Bench.evaluate` writes into a stage's row (the rest is its training's)
EVAL_FIELDS = ("pass1", "lo", "hi", "n", "successes", "trials", "temperature", "infra_errors", "mean_reward",
               "components", "by_demand", "picks", "terminations", "eval_wall_s", "eval_resumed", "run",
               "train_wall_s", "evals")  # fmt: skip
TOOL_PROMPT = "compact"
GOAL = {"sft_gain": 0.30, "grpo_gain": 0.05}




def grpo_log(folder: Path, resumed_from: int, took: float) -> dict[str, Any]:
    """A GRPO stage's figures over all its steps, those of a run it resumed included: steps, the first and last
    step's mean reward, and its training time (the logged seconds of the steps before the resume plus this call's
    ``took``). Without it, a stage resumed after its last step reported a few seconds of training and no rewards."""
    path = folder / "train.jsonl"
    steps = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()] \
        if path.is_file() else []  # fmt: skip
    earlier = sum(float(s.get("seconds", 0.0)) for s in steps[:resumed_from])
    return {"steps": len(steps), "reward_first": steps[0]["reward"] if steps else None,
            "reward_last": steps[-1]["reward"] if steps else None, "train_wall_s": earlier + took}  # fmt: skip


def pass_rates(run_dir: Path) -> dict[str, float]:
    """task id -> the fraction of its scored trials in an evaluation run that passed (0 or 1 with one trial per
    task). A trial lost to an infra error says nothing of the model and counts for nothing, as in the run's summary
    and in GRPO's own evaluations, so stage rows and GRPO's steps on one curve are judged alike; a task none of
    whose trials was scored is left out (and so out of every paired comparison)."""
    from toolworld.store.runstore import RunStore

    store = RunStore.open(run_dir)
    tally: dict[str, list[int]] = {}
    try:
        for traj, score, _ in store.trials():
            if traj.failed_by_infra or (score is not None and score.infra_error):
                continue
            tally.setdefault(traj.task_id, []).append(int(score is not None and score.success))
    finally:
        store.close()
    return {task: sum(wins) / len(wins) for task, wins in tally.items()}


#: a phrase that names a day ("the order I placed on April 16"), in the spoken form tasks and pick notes share
SAID_DATE = re.compile(rf"\b({'|'.join(MONTHS)}) \d{{1,2}}\b")


def _first_argument(messages: list[dict[str, Any]], arg: str) -> tuple[bool, Any]:
    """Whether any assistant tool call in ``messages`` took argument ``arg``, and the first value it was given."""
    for msg in messages:
        for call in (msg.get("tool_calls") or ()) if msg.get("role") == "assistant" else ():
            args = call["function"]["arguments"]  # a dict here; the text a model wrote when it was no JSON
            if isinstance(args, dict) and arg in args:
                return True, args[arg]
    return False, None


def made_up_outcomes(run_dir: Path) -> dict[str, Any]:
    """The evaluation run's trials that sent an argument value no earlier message held (an email the customer never
    gave, an order number no tool returned; ``toolworld.scoring.grounding``): how many, how many of them failed, and
    the values per ``tool.argument``. Most failures of a small policy share it, and a stage can trade one kind of
    made-up value for another while pass^1 stays put."""
    from toolworld.scoring.grounding import made_up_counts
    from toolworld.store.runstore import RunStore

    store = RunStore.open(run_dir)
    try:
        return made_up_counts((traj.messages, bool(score.success)) for traj, score, _facts in store.trials()
                              if score is not None)  # a trial lost to an infra error was not scored  # fmt: skip
    finally:
        store.close()


def pick_outcomes(run_dir: Path, tasks: list[Task]) -> dict[str, dict[str, int]]:
    """How the trials of an evaluation run picked the values their customers only described ("the order I placed
    on April 16"): for each such value, the first tool call given an argument gold fills with it was ``right`` or
    ``wrong``, or no call took that argument (``none``); ``all`` counts every described value, ``dated`` those whose
    phrase names a date. The pick is one step of a task, so this moves with far less noise than pass^1."""
    from toolworld.store.export import chat_records
    from toolworld.store.runstore import RunStore

    by_id = {t.id: t for t in tasks}
    counts = {kind: {"right": 0, "wrong": 0, "none": 0} for kind in ("all", "dated")}
    store = RunStore.open(run_dir)
    try:
        records = list(chat_records(store, include_failed=True))
    finally:
        store.close()
    for rec in records:
        task = by_id.get(rec["task_id"])
        for need, arg in task.described_arguments() if task is not None else ():
            taken, given = _first_argument(rec["messages"], arg)
            outcome = "none" if not taken else "right" if given == need.value else "wrong"
            kinds = ("all", "dated") if SAID_DATE.search(need.phrase) else ("all",)
            for kind in kinds:
                counts[kind][outcome] += 1
    return counts




def eval_folder(name: str, trials: int, temperature: float) -> str:
    """A stage's evaluation run: ``eval-NAME`` for one greedy trial per task (the recorded curves), else
    ``eval-NAME-kK-tT``, so a sampled evaluation never resumes, or overwrites, a greedy one."""
    return f"eval-{name}" if (trials, temperature) == (1, 0.0) else f"eval-{name}-k{trials}-t{temperature:g}"


def customer(task: Task) -> str:
    """Who the task's customer is (the name the user gives; two customers sharing a name are both held apart)."""
    return task.user.name


def make_tasks(out: Path, n_train: int, n_heldout: int, seed_train: int, seed_heldout: int,
               mix: str | None) -> tuple[list[Task], list[Task]]:  # fmt: skip
    """Training and held-out tasks from different seeds, no held-out customer among the training ones."""
    train_file, heldout_file = out / "train.jsonl", out / "heldout.jsonl"
    if train_file.is_file() and heldout_file.is_file():
        return TaskSet.load(train_file).tasks, TaskSet.load(heldout_file).tasks
    train = generate("retail", n_train, seed=seed_train, sampler=mix)
    seen = {customer(t) for t in train.tasks}
    pool = generate("retail", n_heldout * 3, seed=seed_heldout, sampler=mix)
    keep = [(t, line) for t, line in zip(pool.tasks, pool.lines, strict=True) if customer(t) not in seen][:n_heldout]
    if len(keep) < n_heldout:
        sys.exit(f"only {len(keep)} held-out tasks with unseen customers; lower --train or --heldout")
    train_file.write_text("".join(line + "\n" for line in train.lines), encoding="utf-8")
    heldout_file.write_text("".join(line + "\n" for _, line in keep), encoding="utf-8")
    return train.tasks, [t for t, _ in keep]


def fresh_tasks(out: Path, n: int, seed: int, mix: str | None, train: list[Task], heldout: list[Task]) -> list[Task]:
    """``n`` tasks SFT never saw, for RFT or GRPO to sample (``--rft-tasks``/``--grpo-tasks fresh``): another
    generator seed, no held-out customer and no training task among them (kept in ``OUT/fresh-pool.jsonl``, so a
    resumed run, and the later stage, sample the same pool)."""
    pool_file = out / "fresh-pool.jsonl"
    if pool_file.is_file():
        return TaskSet.load(pool_file).tasks
    held = {customer(t) for t in heldout}
    known = {t.id for t in train} | {t.id for t in heldout}
    pool = generate("retail", n * 2, seed=seed, sampler=mix)
    keep = [(t, line) for t, line in zip(pool.tasks, pool.lines, strict=True)
            if customer(t) not in held and t.id not in known][:n]  # fmt: skip
    if len(keep) < n:
        sys.exit(f"only {len(keep)} fresh tasks with customers outside the held-out set; lower --pool")
    pool_file.write_text("".join(line + "\n" for _, line in keep), encoding="utf-8")
    return [t for t, _ in keep]


#: What ``--start-from`` brings besides the stages: the task files (the same training, held-out and fresh tasks, so
#: the stages compare on the same held-out set) and SFT's rendered gold (what ``--grpo-sft`` and a guide replay).
SHARED = ("train.jsonl", "heldout.jsonl", "fresh-pool.jsonl", "gold-train")


def start_from(src: Path, out: Path, first: str) -> list[str]:
    """Bring into ``out`` the tasks of run ``src`` and its finished stages before ``first`` (``--start-from``), so a
    variant of a later stage trains from the very weights, and is compared on the very tasks, of the run it varies.

    A stage's record (``NAME.json``) and its evaluation folders (``eval-NAME*``) are copied, since they are small
    and a later evaluation may write beside them; its weights folder (``sft/``, ``rft/``: gigabytes, and never
    trained again once its record exists) is linked. Nothing in ``out`` is overwritten: anything already there must
    be the same (a file with the same bytes, a link to the same folder; a copied folder is kept as it is, the task
    files and stage records beside it being what tells two runs apart), else the whole call is refused before it
    copies anything, so a half-merged run never exists. Returns the names brought."""
    src, out = src.resolve(), out.resolve()
    if src == out:
        raise ValueError(f"--start-from {src} is --out itself")
    missing = [name for name in ("train.jsonl", "heldout.jsonl") if not (src / name).is_file()]
    if missing:
        raise ValueError(f"--start-from {src}: not a learning run (no {', '.join(missing)})")
    names = [name for name in SHARED if (src / name).exists()]
    for stage in STAGES[: STAGES.index(first)]:
        if not (src / f"{stage}.json").is_file():
            continue
        names.append(f"{stage}.json")
        names += sorted(p.name for p in src.glob(f"eval-{stage}*") if p.name == f"eval-{stage}"
                        or p.name.startswith(f"eval-{stage}-"))  # fmt: skip
        if (src / stage).is_dir():  # the weights (base has none: the model as shipped)
            names.append(stage)
    linked = set(STAGES) - {"base"}
    present = [name for name in names if (out / name).exists() or (out / name).is_symlink()]
    clashes = []
    for name in present:
        there, here = src / name, out / name
        if name in linked:
            same = here.resolve() == there.resolve()
        elif there.is_dir():  # a folder brought before (an evaluation may have gone on in it): its record decides
            same = here.is_dir() and (not here.is_symlink() or here.resolve() == there.resolve())
        else:
            same = here.is_file() and here.read_bytes() == there.read_bytes()
        if not same:
            clashes.append(name)
    if clashes:
        raise ValueError(f"--start-from {src}: {out} already has {', '.join(clashes)}, different from the run's; "
                         "give a new --out (nothing was copied)")  # fmt: skip
    out.mkdir(parents=True, exist_ok=True)
    brought = [name for name in names if name not in present]
    for name in brought:
        there, here = src / name, out / name
        if name in linked:
            here.symlink_to(there.resolve(), target_is_directory=True)
        elif there.is_dir():
            shutil.copytree(there, here, symlinks=True)
        else:
            shutil.copy2(there, here)
    return brought


class Bench:
    """The stages, their outputs under ``out`` and the curve so far."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.out: Path = args.out
        self.out.mkdir(parents=True, exist_ok=True)
        self.world = get_world("retail")
        self.train, self.heldout = make_tasks(self.out, args.train, args.heldout, args.seed_train, args.seed_heldout,
                                              args.mix)  # fmt: skip
        self.model: Any = None
        self.tokenizer: Any = None
        self.base_gguf: Path | None = None

    # -- model and exports

    def load(self, folder: Path | None = None) -> None:
        """The embedded model (or a stage's saved weights) in memory, for training."""
        from toolworld.train.sft import load_model

        if self.model is None or folder is not None:
            self.model, self.tokenizer, path = load_model(str(folder) if folder else "smollm2", device=self.args.device,
                                                              split_attention=self.args.split_attention)  # fmt: skip
            if folder is None:
                self.base_gguf = path
        if self.base_gguf is None:
            from toolworld.rollout.models import ensure_model

            self.base_gguf = ensure_model("smollm2")

    def export(self, name: str, dtype: str = "f16") -> Path:
        """The in-memory weights as a GGUF that llama.cpp samples (f16 to evaluate; f32 for GRPO's sampler, whose
        logprobs must be the trainer's)."""
        from toolworld.train.export import export_gguf

        assert self.base_gguf is not None
        path = self.out / name / "model.gguf"
        path.parent.mkdir(parents=True, exist_ok=True)
        return export_gguf(self.model, path, base_gguf=self.base_gguf, dtype=dtype, tool_prompt=TOOL_PROMPT)

    def weights(self, name: str) -> Path:
        """What stage ``name`` is evaluated from: a fresh GGUF export for llama.cpp, or (``--engine hf``) the
        weights as the stage saved them (the base: the embedded GGUF, which transformers dequantizes)."""
        if self.args.eval_engine == "llamacpp":
            return self.export(name)
        assert self.base_gguf is not None
        return self.base_gguf if name == "base" else self.out / name / "final"

    def spec(self, gguf: Path, *, temperature: float, kv_cache: str = "f16", engine: str = "llamacpp") -> str:
        """The llama.cpp policy: evaluation keeps its default f16 KV cache; the RFT and GRPO samplers take a
        float32 one, since GRPO's importance ratios compare their logprobs with the trainer's. ``--engine hf``:
        transformers on ``--device``, ``--batch`` episodes decoded together, in ``--hf-dtype``."""
        if engine == "hf":
            return (f"hf:{gguf},device={self.args.device},temperature={temperature},max_tokens={self.args.max_tokens},"
                    f"tool_prompt={TOOL_PROMPT},max_batch={self.args.batch},dtype={self.args.hf_dtype}")  # fmt: skip
        return (f"gguf:{gguf},temperature={temperature},max_tokens={self.args.max_tokens},tool_prompt={TOOL_PROMPT},"
                f"n_ctx={self.args.n_ctx},kv_cache={kv_cache}")  # fmt: skip

    def limits(self, *, sampling: bool = False) -> Any:
        """Episodes end (scored, as ``max_tokens``) before the conversation outgrows llama.cpp's context, and after
        ``--max-turns`` assistant turns: a model that loops on a read would otherwise spend minutes per episode to
        fail the same way. The trials RFT and GRPO sample stop at ``--sample-max-turns`` (default the same): at
        temperature 1 most failed trials loop to the limit, and a trial still going after it has failed anyway.
        No wall-clock limit: turns and tokens already bound an episode, and its wall time measures the machine, not
        the policy (two evaluations sharing 2 cores ran SFT's episodes past the default 600 s, and 19 of its 200
        sampled trials were scored as failed ``timeout`` that pass or fail on their merits on a quiet machine)."""
        from toolworld.env.limits import Limits

        turns = self.args.sample_max_turns if sampling and self.args.sample_max_turns else self.args.max_turns
        return Limits(max_turns=turns, max_tokens=self.args.n_ctx - self.args.max_tokens, max_wall_s=None)

    def cpu_sft(self) -> dict[str, Any]:
        """How SFT runs fastest on a CPU (``benchmarks/train.py``): one conversation per micro-batch under a plain
        causal mask (packed rows' explicit masks cost attention quadratically), bfloat16 autocast, and
        ``grad_accum`` conversations per optimizer step."""
        return {"packing": False, "bf16": self.args.bf16, "grad_accum": self.args.grad_accum, "save_every": 5}

    def hf_sampler(self, name: str) -> Any:
        """``--engine hf``: ``sampler(model, step)`` returning the policy that samples RFT's or GRPO's trials from
        the current weights, decoding ``--batch`` episodes together. When ``--hf-dtype`` is not the trained model's
        dtype (bfloat16 sampling of a float32 model on a CPU) it samples from a twin in that dtype whose weights are
        copied from the model before every step (the weight sync of a separate inference engine; GRPO's TIS weighs
        the twin's logprobs against the trainer's and logs the gap), else from the model itself."""
        import torch

        from toolworld.rollout.engines.hf import HFEngine
        from toolworld.rollout.token_policy import TokenPolicy
        from toolworld.train.lora import folded_state_dict, plain_copy

        a = self.args
        dtype = getattr(torch, a.hf_dtype)
        twin: list[Any] = []

        def sampler(model: Any, step: int = 0) -> Any:
            if next(model.parameters()).dtype == dtype:
                sampling = model
            elif twin:  # copy_ casts to the twin's dtype; LoRA adapters (--grpo-lora) are folded in
                twin[0].load_state_dict(folded_state_dict(model))
                sampling = twin[0]
            else:
                twin.append(plain_copy(model).to(dtype).eval().requires_grad_(False))
                sampling = twin[0]
            engine = HFEngine(model=sampling, tokenizer=self.tokenizer, device=a.device, max_batch=a.batch)
            return TokenPolicy(engine, self.tokenizer, name=name, max_tokens=a.max_tokens, temperature=a.temperature,
                               tool_prompt=TOOL_PROMPT)  # fmt: skip

        return sampler

    # -- stages

    def evaluate(self, name: str, gguf: Path, train_wall_s: float, extra: dict[str, Any]) -> dict[str, Any]:
        """Play the held-out tasks with stage ``name``'s weights: one greedy trial per task, or ``--eval-trials``
        trials each at ``--eval-temperature``; pass^1 is the mean over tasks of the fraction of their scored trials
        that passed (a trial lost to an infra error counts for nothing, and is counted in ``infra_errors``)."""
        started = time.perf_counter()
        a = self.args
        engine, k, temperature = a.eval_engine, a.eval_trials, a.eval_temperature
        folder = self.out / eval_folder(name, k, temperature)
        resumed = (folder / "run.db").is_file()  # an evaluation cut short goes on: its eval_wall_s is this call's
        result = run(self.world, self.heldout, self.spec(gguf, temperature=temperature, engine=engine), out=folder,
                     trials=k, resume=resumed, concurrency=a.batch if engine == "hf" else 1,
                     limits=self.limits())  # fmt: skip
        summary = result.summary.model_dump(mode="json")  # plain values all the way down (components too)
        rates = pass_rates(folder)
        scored = int(summary.get("scored", 0))
        wins = round(float(summary.get("success_rate", 0.0)) * scored)
        lo, hi = wilson(wins, scored) if k == 1 else task_interval(list(rates.values()), k)
        row = {"name": name, "pass1": statistics.fmean(rates.values()) if rates else 0.0, "lo": lo, "hi": hi,
               "n": len(rates), "successes": wins,
               "trials": k, "temperature": temperature,
               "infra_errors": int(summary.get("infra_errors", 0)), "mean_reward": summary.get("mean_reward"),
               # which part of the verdict moved: a stage can pass more while it identifies customers less
               "components": {c: v.get("pass_rate") for c, v in (summary.get("components") or {}).items()},
               # which skill moved: held-out tasks by the reasoning they demand (an order to pick from a date, ...)
               "by_demand": summary.get("by_demand") or {},
               # the described orders picked right: one step of a task, so it moves with less noise than pass^1
               "picks": pick_outcomes(folder, self.heldout),
               # the trials that made up an argument value (most failures share it), and which values
               "made_up": made_up_outcomes(folder),
               # how the trials ended: a stage that fails by running out of turns differs from one that answers wrong
               "terminations": summary.get("terminations") or {},
               "train_wall_s": round(train_wall_s, 1), "eval_wall_s": round(time.perf_counter() - started, 1),
               "eval_resumed": resumed, "run": folder.name, **extra}  # fmt: skip
        (self.out / f"{name}.json").write_text(json.dumps(row, indent=2), encoding="utf-8")
        picks = row["picks"]["all"]
        print(f"[{name}] held-out pass^1 {row['pass1']:.3f} [{lo:.3f}, {hi:.3f}] (n={row['n']}, k={k}), described values "
              f"picked right {picks['right']} of {sum(picks.values())}; {row['made_up']['trials']} trials made up "
              f"an argument; train {train_wall_s:.0f}s "
              f"eval {row['eval_wall_s']:.0f}s", flush=True)  # fmt: skip
        return row

    def base(self) -> dict[str, Any]:
        self.load()
        return self.evaluate("base", self.weights("base"), 0.0, {})

    def sft_data(self) -> list[Any]:
        """SFT's conversations: the gold of the training tasks (with pick notes under ``--explain-picks``),
        rendered through the loaded tokenizer as the policy is prompted."""
        from toolworld.train.sft import sft_samples

        a = self.args
        return sft_samples(self.out / "train.jsonl", self.tokenizer, gold_out=self.out / "gold-train",
                           max_len=a.max_len, tool_prompt=TOOL_PROMPT,
                           gold_policy="gold:explain=1" if a.explain_picks else "gold")  # fmt: skip

    def sft(self) -> dict[str, Any]:
        from toolworld.train.sft import SFTConfig, train_sft

        self.load()
        a = self.args
        started = time.perf_counter()
        samples = self.sft_data()
        config = SFTConfig(out=self.out / "sft", lr=a.sft_lr, epochs=a.sft_epochs, max_len=a.max_len,
                           batch_tokens=max(a.batch_tokens, a.max_len), tool_prompt=TOOL_PROMPT, seed=0, **self.cpu_sft(),
                           resume=(self.out / "sft" / "train.jsonl").exists())  # fmt: skip
        result = train_sft(self.model, self.tokenizer, samples, config)
        took = time.perf_counter() - started
        return self.evaluate("sft", self.weights("sft"), took, {"samples": len(samples), "steps": result.steps,
                                                               "first_loss": result.first_loss,
                                                               "final_loss": result.final_loss})  # fmt: skip

    def rft(self) -> dict[str, Any]:
        from toolworld.rollout.backends import make_policy
        from toolworld.train.rft import train_rft
        from toolworld.train.sft import SFTConfig, SFTError

        self.load(self.out / "sft" / "final")
        a = self.args
        started = time.perf_counter()
        hf = a.engine == "hf"  # transformers samples (no export); else llama.cpp over the SFT export
        if hf:
            sampler = self.hf_sampler("rft")(self.model)
        else:
            gguf = self.out / "sft" / "model.gguf"  # written by the SFT stage's llama.cpp evaluation
            sampler = make_policy(self.spec(gguf if gguf.is_file() else self.export("sft"), temperature=a.temperature,
                                            kv_cache="f32"))  # fmt: skip
        config = SFTConfig(out=self.out / "rft", lr=a.rft_lr, epochs=a.rft_epochs, max_len=a.max_len,
                           batch_tokens=max(a.batch_tokens, a.max_len), tool_prompt=TOOL_PROMPT, seed=1, **self.cpu_sft(),
                           resume=(self.out / "rft" / "rft.json").exists())  # fmt: skip
        try:
            result = train_rft(self.model, self.tokenizer, self.world, self.rft_tasks(), k=a.rft_k, config=config,
                               sampler=sampler, concurrency=a.batch if hf else 1, limits=self.limits(sampling=True),
                               max_tokens=a.max_tokens, temperature=a.temperature)  # fmt: skip
        except SFTError as exc:
            if exc.kind != "no_successful_trials":
                raise
            # nothing passed, so nothing to reinforce: the SFT model is the RFT model, and GRPO starts from it
            row = {**json.loads((self.out / "sft.json").read_text()), "name": "rft", "note": str(exc),
                   "train_wall_s": round(time.perf_counter() - started, 1)}  # fmt: skip
            row.pop("run", None)  # no evaluation run of its own: the SFT run's report must not mark it as this one
            (self.out / "rft.json").write_text(json.dumps(row, indent=2), encoding="utf-8")
            print(f"[rft] {exc}", flush=True)
            return row
        finally:
            if sampler is not None:
                sampler.engine.close()
        took = time.perf_counter() - started
        return self.evaluate("rft", self.weights("rft"), took, {"trials": result.trials, "passed": result.passed,
                                                               "kept": result.kept})  # fmt: skip

    def fresh(self) -> list[Task]:
        a = self.args
        return fresh_tasks(self.out, a.pool, a.seed_pool, a.mix, self.train, self.heldout)

    def rft_tasks(self) -> list[Task]:
        """The tasks RFT plays: SFT's own training tasks (``train``), or ``--pool`` new ones (``fresh``). SFT
        memorised its training conversations (loss ~0.02), so a passing trial on one of them mostly repeats a gold
        conversation already learnt; a passing trial on a task it never saw is a new example, in the policy's own
        words, of what held-out tasks ask."""
        return self.fresh() if self.args.rft_tasks == "fresh" else list(self.train)

    def grpo_tasks(self) -> list[Task]:
        """The training tasks GRPO samples from. ``unsolved``: those the RFT stage's k trials did not all pass. A
        task every trial passes gives a group with one reward, whose advantages are all zero: its sampling time
        teaches nothing, and on 2 cores sampling is half of a GRPO step. Tasks no trial passed stay (a group can
        still differ in partial reward, and these are what GRPO is for); after ``--rft-tasks fresh`` they are
        pool tasks. ``fresh``: ``--pool`` new tasks (:func:`fresh_tasks`). SFT drove the loss on its own training
        conversations to ~0.02, so the policy's trials on them show how it strays from a memorised answer; on
        tasks it never saw they show what it does on held-out ones, which is what GRPO should change.
        ``--grpo-demand``: then only those whose scenario makes one of these demands."""
        tasks = self.grpo_pool()
        wanted = set(self.args.grpo_demand)
        if not wanted:
            return tasks
        kept = [t for t in tasks if wanted & set(t.scenario.demands)]
        print(f"[grpo] {len(kept)} of {len(tasks)} make the demand {' or '.join(sorted(wanted))}", flush=True)
        if not kept:
            sys.exit(f"no GRPO task makes the demand {' or '.join(sorted(wanted))}: drop --grpo-demand or pick another")
        return kept

    def grpo_pool(self) -> list[Task]:
        if self.args.grpo_tasks == "all":
            return list(self.train)
        if self.args.grpo_tasks == "fresh":
            return self.fresh()
        rft = self.out / "rft" / "rft.json"
        if not rft.is_file():
            sys.exit(f"--grpo-tasks unsolved reads the RFT stage's trials ({rft}); run the rft stage first")
        record = json.loads(rft.read_text(encoding="utf-8"))
        k, passed = int(record["k"]), record.get("per_task", {})
        played = self.rft_tasks()
        keep = [t for t in played if int(passed.get(t.id, 0)) < k]
        print(f"[grpo] {len(keep)} of the {len(played)} tasks RFT played not passed by every RFT trial", flush=True)
        return keep or played

    def grpo(self) -> dict[str, Any]:
        from toolworld.rollout.backends import make_policy
        from toolworld.train.grpo import GRPOConfig, train_grpo

        start = self.out / "rft" / "final"
        self.load(start if start.is_dir() else self.out / "sft" / "final")
        a = self.args
        started = time.perf_counter()

        live: list[Any] = []

        def exported(model: Any, step: int) -> Any:  # weight sync: the current weights, exported for llama.cpp
            while live:  # the previous step's engine (an f16 model and its KV cache) goes before the next loads
                live.pop().engine.close()
            live.append(make_policy(self.spec(self.export("grpo-sampler", "f32"), temperature=a.temperature, kv_cache="f32")))
            return live[-1]

        tasks = self.grpo_tasks()
        config = GRPOConfig(out=self.out / "grpo", group=a.group, tasks_per_step=a.tasks_per_step,
                            steps=a.grpo_steps, lr=a.grpo_lr, optimizer=a.grpo_optimizer, max_tokens=a.max_tokens,
                            max_len=a.max_len,
                            updates=a.grpo_updates, min_groups=a.grpo_min_groups, max_draws=a.grpo_max_draws,
                            balance=a.grpo_balance, guide=a.grpo_guide or "", branch=a.grpo_branch or "",
                            branch_from_start=a.grpo_branch_from_start, branch_at=a.grpo_branch_at,
                            blame_invented=a.grpo_blame_invented, sft_coef=a.grpo_sft, sft_floor=a.grpo_sft_floor,
                            advantage=a.grpo_advantage, kl_coef=a.grpo_kl, kl_ties=a.grpo_kl_ties,
                            neg_weight=a.grpo_neg_weight,
                            overlong_penalty=a.grpo_overlong_penalty,
                            lora=a.grpo_lora, lora_r=a.grpo_lora_r, lora_alpha=2 * a.grpo_lora_r,
                            reward=a.grpo_reward, reward_control=a.grpo_reward_control,
                            temperature=a.temperature,
                            tool_prompt=TOOL_PROMPT, concurrency=a.batch if a.engine == "hf" else 1, seed=a.grpo_seed,
                            tensorboard=False, packing=False, bf16=a.bf16, save_every=2,
                            # the held-out tasks after every K-th step; the start and the end are stages of their own
                            eval_every=a.grpo_eval_every, eval_first=False, eval_last=False,
                            eval_trials=a.eval_trials, eval_temperature=a.eval_temperature,
                            resume=(self.out / "grpo" / "train.jsonl").exists())  # fmt: skip
        result = train_grpo(self.model, self.tokenizer, self.world, tasks, config,
                            sampler=exported if a.engine == "llamacpp" else self.hf_sampler("grpo"),
                            limits=self.limits(sampling=True),
                            eval_tasks=self.heldout if a.grpo_eval_every else None, eval_limits=self.limits(),
                            sft=self.sft_data() if a.grpo_sft or a.grpo_sft_floor else None)  # fmt: skip
        for policy in live:
            policy.engine.close()
        logged = grpo_log(self.out / "grpo", result.resumed_from, time.perf_counter() - started)
        took = logged.pop("train_wall_s")
        return self.evaluate("grpo", self.weights("grpo"), took, {**logged, "tasks": len(tasks),
                                                                 "evals": self.step_rows(result.evals)})  # fmt: skip

    def step_rows(self, evals: list[Any]) -> list[dict[str, Any]]:
        """GRPO's evaluations between its first and last step (``--grpo-eval-every``) as points of the curve, each
        with its paired gain over the stage GRPO started from (its evaluation played the same tasks)."""
        rows = [json.loads((self.out / f"{s}.json").read_text()) for s in ("rft", "sft") if (self.out / f"{s}.json").is_file()]
        # an RFT stage that had nothing to reinforce has no run of its own: GRPO started from the SFT model then
        run = next((self.out / r["run"] for r in rows if r.get("run") and (self.out / r["run"]).is_dir()), None)
        start = pass_rates(run) if run is not None else None
        return [{"name": f"grpo step {ev.step}", "step": ev.step, "pass1": ev.pass1, "lo": ev.lo, "hi": ev.hi,
                 "n": ev.tasks, "trials": ev.trials, "temperature": ev.temperature, "eval_wall_s": round(ev.seconds, 1),
                 "gain": paired_gain(start, ev.per_task) if start is not None else None} for ev in evals]  # fmt: skip

    def reevaluate(self, name: str) -> bool:
        """A stage trained before whose evaluation is not the one asked for (``--eval-trials``,
        ``--eval-temperature``) is evaluated again from its saved weights, its training figures kept; the earlier
        evaluation run stays in its own folder. False when there is nothing to evaluate (an RFT stage that had
        nothing to reinforce, whose row is the SFT model's)."""
        row = json.loads((self.out / f"{name}.json").read_text())
        if (row.get("trials", 1), row.get("temperature", 0.0)) == (self.args.eval_trials, self.args.eval_temperature):
            return False
        if "run" not in row:
            return False
        self.model = None  # the stage's own weights, not whatever an earlier stage left in memory
        self.load(None if name == "base" else self.out / name / "final")
        kept = {k: v for k, v in row.items() if k not in EVAL_FIELDS}
        self.evaluate(name, self.weights(name), float(row.get("train_wall_s", 0.0)), kept)
        return True

    # -- the curve

    def curve(self) -> dict[str, Any]:
        rows = [json.loads((self.out / f"{s}.json").read_text()) for s in STAGES if (self.out / f"{s}.json").is_file()]
        points: list[dict[str, Any]] = []
        for row in rows:
            if row["name"] == "grpo":  # its evaluations between the first and last step (--grpo-eval-every) first
                points += row.get("evals") or []
            points.append(row)
        mix = f" ({self.args.mix} tasks)" if self.args.mix else ""
        k, temperature = self.args.eval_trials, self.args.eval_temperature
        metric = "held-out pass^1" + (f" ({k} trials per task at T {temperature:g})" if k > 1 or temperature else "")
        return {"title": f"SmolLM2-135M-Instruct on retail{mix}", "metric": metric, "heldout_tasks": len(self.heldout),
                "train_tasks": len(self.train), "stages": points, "goal": GOAL}  # fmt: skip

    def publish(self) -> dict[str, Any]:
        """Write the curve into every evaluation run and re-render their reports, so each shows it."""
        from toolworld.pipeline import finish

        curve = self.curve()
        for row in curve["stages"]:
            if "run" not in row:  # a stage with no evaluation of its own (an RFT that had nothing to reinforce)
                continue
            folder = self.out / row["run"]
            if not folder.is_dir():  # a stage copied in without its evaluation run: its figures stand, say so
                print(f"[{row['name']}] no evaluation run {folder}: its report does not show the curve", flush=True)
                continue
            (folder / "learning.json").write_text(json.dumps(curve, indent=2), encoding="utf-8")
            try:
                finish(folder)
            except Exception as exc:  # the figures stand without the report; say so and go on
                print(f"report of {folder} not re-rendered: {exc}", flush=True)
        (self.out / "learning.json").write_text(json.dumps(curve, indent=2), encoding="utf-8")
        return curve


def resolve_precision(args: argparse.Namespace) -> argparse.Namespace:
    """Turn ``--bf16``'s and ``--hf-dtype``'s defaults into what ``--device`` runs fastest, in place, so that the
    run's record names the precision it used: bf16 where the hardware has bf16 instructions, float32 where bf16
    would be emulated (26x slower per matmul on an AVX2 CPU; an SFT step ~29 minutes instead of ~2.5). What was
    given explicitly stays."""
    from toolworld.rollout.engines.hf import native_bf16

    native = native_bf16(args.device)
    if args.bf16 is None:
        args.bf16 = native
    if args.hf_dtype == "auto":
        args.hf_dtype = "bfloat16" if native else "float32"
    return args


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--stages", default=",".join(STAGES), help="Stages to run, in order (finished ones are skipped).")
    p.add_argument("--start-from", type=Path, default=None, metavar="RUN",
                   help="Take another run's tasks and its finished stages before the first of --stages (weights "
                        "linked, records and evaluations copied) into a new --out, so a variant of a later stage "
                        "starts from the same weights and is judged on the same held-out tasks.")
    p.add_argument("--quick", action="store_true", help="A few tasks and steps: checks the pipeline, not learning.")
    p.add_argument("--train", type=int, default=150, help="Training tasks.")
    p.add_argument("--heldout", type=int, default=100, help="Held-out tasks.")
    p.add_argument("--mix", default=None, help="Task sampler mix (default: the generator's).")
    p.add_argument("--seed-train", type=int, default=101)
    p.add_argument("--seed-heldout", type=int, default=202)
    p.add_argument("--max-len", type=int, default=8192, help="Tokens per training conversation.")
    p.add_argument("--batch-tokens", type=int, default=8192, help="Tokens per packed micro-batch (memory grows with it).")
    p.add_argument("--max-tokens", type=int, default=160, help="Tokens per assistant turn.")
    p.add_argument("--n-ctx", type=int, default=8192)
    p.add_argument("--engine", choices=("llamacpp", "hf"), default="llamacpp",
                   help="What evaluates and samples: llama.cpp over GGUF exports, one episode at a time (the "
                        "default, as in the recorded curves), or transformers on --device, --batch episodes together "
                        "(~1.7x faster per episode on 2 CPU cores; the GPU recipe).")
    p.add_argument("--device", default="cpu", help="Where training (and --engine hf) runs: cpu, cuda, cuda:1, mps.")
    p.add_argument("--eval-engine", choices=("llamacpp", "hf"), default=None,
                   help="What evaluates the stages (default: --engine); e.g. sample with hf, evaluate with llama.cpp "
                        "like an earlier run's stages.")
    p.add_argument("--hf-dtype", choices=("auto", "bfloat16", "float16", "float32"), default="auto",
                   help="--engine hf: the dtype that evaluates and samples (training keeps its own). auto: bfloat16 "
                        "where --device has bf16 instructions (a GPU; AVX512-BF16 or AMX on a CPU), else float32.")
    p.add_argument("--batch", type=int, default=None,
                   help="hf engine: episodes in flight and decoded together in evaluation, RFT and GRPO (default 32 on "
                        "a GPU, 8 on a CPU; llama.cpp runs one at a time).")
    p.add_argument("--eval-trials", type=int, default=1,
                   help="Trials per held-out task in each stage's evaluation (pass^1 is the fraction that passed); "
                        "more than 1 needs --eval-temperature > 0. Two greedy checkpoints differ on 20-30 of 100 "
                        "tasks both ways, so a gain of a few points needs several sampled trials per task to show.")
    p.add_argument("--eval-temperature", type=float, default=0.0,
                   help="Temperature of the evaluation (0: greedy). A stage evaluated before another way is "
                        "evaluated again from its saved weights, into its own eval-NAME-kK-tT folder.")
    p.add_argument("--max-turns", type=int, default=30, help="Assistant turns per evaluated or sampled episode.")
    p.add_argument("--sample-max-turns", type=int, default=None,
                   help="Assistant turns per RFT or GRPO trial (default: --max-turns).")
    p.add_argument("--temperature", type=float, default=1.0, help="Sampling temperature of RFT and GRPO.")
    p.add_argument("--grad-accum", type=int, default=4, help="Conversations per SFT/RFT optimizer step.")
    p.add_argument("--bf16", action=argparse.BooleanOptionalAction, default=None,
                   help="bf16 autocast in SFT's, RFT's and GRPO's updates (default: where --device has bf16 "
                        "instructions; elsewhere PyTorch emulates bf16, many times slower than float32).")
    p.add_argument("--split-attention", action=argparse.BooleanOptionalAction, default=True,
                   help="In the updates, a conversation continued after the step's shared prompt attends to the "
                        "prompt's keys and its own in two unmasked kernel calls on a CPU (toolworld.train.attention; "
                        "the same values); --no-split-attention runs transformers' SDPA throughout.")
    p.add_argument("--sft-lr", type=float, default=1e-4)
    p.add_argument("--sft-epochs", type=int, default=2)
    p.add_argument("--explain-picks", action="store_true",
                   help="SFT's gold conversations say how each order the customer only described was picked from "
                        "the list, row by row (gold:explain=1); give turns room with --max-tokens 320.")
    p.add_argument("--rft-k", type=int, default=2)
    p.add_argument("--rft-lr", type=float, default=3e-5)
    p.add_argument("--rft-epochs", type=int, default=1)
    p.add_argument("--group", type=int, default=4)
    p.add_argument("--tasks-per-step", type=int, default=4)
    p.add_argument("--grpo-steps", type=int, default=8)
    p.add_argument("--grpo-lr", type=float, default=2e-6)
    p.add_argument("--grpo-optimizer", choices=["adamw", "sgd"], default="adamw",
                   help="adamw moves every weight ~lr a step; sgd in proportion to its gradient (its lr on another "
                        "scale: 0.05 ~ adamw's 2e-5 for this model; see benchmarks/grpo_step.py).")
    p.add_argument("--grpo-updates", type=int, default=1,
                   help="Optimizer steps per batch of GRPO trials (3 collapsed the policy onto one tool in a step "
                        "on 2 cores: keep 1 unless a step has many informative groups).")
    p.add_argument("--grpo-min-groups", type=int, default=0,
                   help="Dynamic sampling: a step draws --tasks-per-step more tasks until this many groups have "
                        "differing rewards (0: one draw).")
    p.add_argument("--grpo-max-draws", type=int, default=4, help="Draws a step makes at most for --grpo-min-groups.")
    p.add_argument("--grpo-balance", action="store_true",
                   help="Spread --grpo-min-groups evenly over the tasks' target tools, and train on as many of each.")
    p.add_argument("--grpo-advantage", default="grpo", choices=ADVANTAGES, help="Advantage estimator.")
    p.add_argument("--grpo-sft", type=float, default=0.0, metavar="COEF",
                   help="Mix SFT's loss on its own conversations into every GRPO update with this weight (PPO-ptx; "
                        "0: none), 4 conversations a step.")
    p.add_argument("--grpo-sft-floor", type=float, default=0.0, metavar="COEF",
                   help="Hold the same conversations' tokens at least as likely as the reference had them (a one-"
                        "sided k3 with this weight; 0: none): what the branch's lead plays stays learnt without "
                        "being fitted further; the pull is the drift times the weight, so it needs a large one "
                        "(100 kept the lookup for 4 steps, not for 8; 1 did nothing; 300 unsettled the update and lost the "
                        "pick). Needs --grpo-kl or --grpo-lora.")
    p.add_argument("--grpo-guide", default=None, metavar="SPEC",
                   help="Off-policy guidance: this policy's passing trial joins each group whose trials all failed, "
                        "with reward 1 (gold, or gold:explain=1 after --explain-picks: the conversations SFT learnt).")
    p.add_argument("--grpo-branch", default=None, metavar="SPEC",
                   help="Start each group's trials after this policy's first k turns of the task (k drawn per task "
                        "and step; gold:explain=1 after --explain-picks), so trials meet the late decisions "
                        "directly; see `toolworld train grpo --branch`.")
    p.add_argument("--grpo-branch-from-start", type=float, default=0.0, metavar="P",
                   help="With --grpo-branch: the chance that a task's group plays it from its start anyway, so the "
                        "first turns (the customer lookup) are trained too; see `toolworld train grpo "
                        "--branch-from-start`.")
    p.add_argument("--grpo-branch-at", default="uniform", choices=tuple(BRANCH_AT),
                   help="With --grpo-branch: where a group starts, after k uniformly drawn lead turns or at the "
                        "lead's pick of a described value; see `toolworld train grpo --branch-at`.")
    p.add_argument("--grpo-blame-invented", action="store_true",
                   help="In a failed trial's turn that sent an argument value no earlier message held, keep the "
                        "negative advantage on that value's tokens alone; see `toolworld train grpo "
                        "--blame-invented`.")
    p.add_argument("--grpo-eval-every", type=int, default=0,
                   help="Evaluate GRPO's policy on the held-out tasks after every K-th step, as the stages are "
                        "(--eval-trials at --eval-temperature): the curve shows each (0: only the stage's end).")
    p.add_argument("--grpo-neg-weight", type=float, default=1.0,
                   help="Scale of GRPO's negative advantages (1: the plain gradient, 0: successes only).")
    p.add_argument("--grpo-overlong-penalty", type=float, default=0.0,
                   help="Taken off GRPO's reward of a trial a turn's --max-tokens cut (0: none).")
    p.add_argument("--grpo-kl", type=float, default=0.0, help="KL coefficient to the RFT model (0: no reference).")
    p.add_argument("--grpo-kl-ties", type=int, default=0, metavar="K",
                   help="K trials of each group GRPO's update leaves out (tied rewards) carry the --grpo-kl term "
                        "alone, so the update also holds what the policy does consistently (0: none).")
    p.add_argument("--grpo-lora", action="store_true",
                   help="GRPO trains LoRA adapters (rank --grpo-lora-r, alpha 2r) instead of every weight; a step as "
                        "large as a full update's takes about thirty times its lr (benchmarks/grpo_step.py). Needs --engine hf.")
    p.add_argument("--grpo-lora-r", type=int, default=16, help="LoRA rank of --grpo-lora.")
    p.add_argument("--grpo-reward", choices=REWARDS, default="partial",
                   help="Reward of a GRPO trial: the score's weighted components, or 1 for success else 0.")
    p.add_argument("--grpo-reward-control", choices=tuple(REWARD_CONTROLS), default="none",
                   help="shuffle: GRPO trains on each group's rewards permuted among its trials (the control run: "
                        "what it gains, any update would have; a recipe learns where it beats this twin).")
    p.add_argument("--grpo-tasks", choices=("all", "unsolved", "fresh"), default="all",
                   help="GRPO samples all training tasks, those not every RFT trial passed, or --pool new ones.")
    p.add_argument("--grpo-demand", action="append", choices=DEMANDS, default=[], metavar="DEMAND",
                   help=f"Keep only GRPO tasks whose scenario makes this demand ({', '.join(DEMANDS)}); repeatable "
                        "(any of them). Aims GRPO at the skill the held-out breakdown (by_demand) shows missing; "
                        "alone, its tasks teach their script everywhere (piecemeal alone: 51 -> 17/100, the policy "
                        "asked every customer for a first name; docs/benchmarks.md).")
    p.add_argument("--grpo-seed", type=int, default=2, help="Seed of GRPO's task draws and sampling.")
    p.add_argument("--rft-tasks", choices=("train", "fresh"), default="train",
                   help="RFT plays SFT's training tasks, or --pool new ones (whose passing trials are new examples).")
    p.add_argument("--pool", "--grpo-pool", dest="pool", type=int, default=200,
                   help="New tasks RFT or GRPO sample from (--rft-tasks/--grpo-tasks fresh).")
    p.add_argument("--seed-pool", "--seed-grpo", dest="seed_pool", type=int, default=303,
                   help="Generator seed of the fresh pool.")
    args = p.parse_args()
    if args.quick:
        args.train, args.heldout, args.sft_epochs, args.rft_k = 6, 4, 1, 1
        args.group, args.tasks_per_step, args.grpo_steps, args.max_tokens, args.pool = 2, 2, 1, 64, 6
    if args.pool < 1:
        p.error(f"--pool must be >= 1, got {args.pool}")
    if args.eval_trials < 1:
        p.error(f"--eval-trials must be >= 1, got {args.eval_trials}")
    if args.eval_temperature < 0:
        p.error(f"--eval-temperature must be >= 0, got {args.eval_temperature}")
    if args.eval_trials > 1 and args.eval_temperature == 0:
        p.error(f"--eval-trials {args.eval_trials} at temperature 0 plays each task the same way every time: "
                "give --eval-temperature (e.g. 0.3, the GRPO sampler's)")
    if args.grpo_eval_every < 0:
        p.error(f"--grpo-eval-every must be >= 0 (0: no evaluation inside GRPO), got {args.grpo_eval_every}")
    if args.grpo_eval_every and "llamacpp" in (args.engine, args.eval_engine or args.engine):
        p.error("--grpo-eval-every evaluates with GRPO's sampler, the batched hf engine: give --engine hf and no "
                "other --eval-engine, so that its points are measured as the stages are")
    if args.grpo_lora and args.engine != "hf":
        p.error("--grpo-lora samples through the adapters with the batched hf engine: give --engine hf")
    if args.grpo_lora_r < 1:
        p.error(f"--grpo-lora-r must be >= 1, got {args.grpo_lora_r}")
    if args.grpo_kl_ties < 0:
        p.error(f"--grpo-kl-ties must be >= 0, got {args.grpo_kl_ties}")
    if args.grpo_kl_ties and not args.grpo_kl > 0:
        p.error(f"--grpo-kl-ties {args.grpo_kl_ties} holds trials with the KL term alone: give --grpo-kl > 0")
    if not 0 <= args.grpo_branch_from_start <= 1:
        p.error(f"--grpo-branch-from-start is a chance, in [0, 1]; got {args.grpo_branch_from_start}")
    if args.grpo_branch_at != "uniform" and not args.grpo_branch:
        p.error("--grpo-branch-at places the lead's branch point: give --grpo-branch SPEC")
    if args.grpo_branch_from_start and not args.grpo_branch:
        p.error("--grpo-branch-from-start plays some branched groups from the start: give --grpo-branch SPEC")
    if args.batch is not None and args.batch < 1:
        p.error(f"--batch must be >= 1, got {args.batch}")
    args.eval_engine = args.eval_engine or args.engine
    resolve_precision(args)
    if args.batch is None:  # llama.cpp runs one episode at a time: its batched decoding does not pay on 2 cores
        args.batch = 32 if args.device.startswith("cuda") else 8
    stages = [s.strip() for s in args.stages.split(",") if s.strip()]
    unknown = sorted(set(stages) - set(STAGES))
    if unknown:
        p.error(f"unknown stage(s) {unknown}; stages: {', '.join(STAGES)}")
    if args.start_from is not None:
        if not stages:
            p.error("--start-from brings the stages before the first of --stages: give --stages")
        try:
            brought = start_from(args.start_from, args.out, min(stages, key=STAGES.index))
        except ValueError as exc:
            p.error(str(exc))
        print(f"[start] from {args.start_from}: {', '.join(brought) or 'nothing new'}", flush=True)
    started = time.perf_counter()
    bench = Bench(args)
    for stage in stages:
        if (args.out / f"{stage}.json").is_file():
            if bench.reevaluate(stage):
                bench.publish()
            else:
                print(f"[{stage}] done before, kept", flush=True)
            continue
        getattr(bench, stage)()
        bench.publish()
    curve = bench.publish()
    by = {row["name"]: row for row in curve["stages"]}
    out: dict[str, Any] = {"benchmark": "learning", "train_tasks": len(bench.train), "heldout_tasks": len(bench.heldout),
                           "wall_s": round(time.perf_counter() - started, 1)}  # fmt: skip
    for name, row in by.items():
        if "step" in row:  # a point inside GRPO (--grpo-eval-every): listed below
            continue
        out[f"{name}_pass1"] = round(row["pass1"], 4)
        out[f"{name}_ci"] = [round(row["lo"], 4), round(row["hi"], 4)]
        out[f"{name}_train_s"] = row["train_wall_s"]
        if "picks" in row:  # rows written before the pick count have none
            out[f"{name}_picks"] = row["picks"]["all"]
    if "base" in by and "sft" in by:
        out["sft_gain"] = round(by["sft"]["pass1"] - by["base"]["pass1"], 4)
    for before in ("sft", "rft"):
        if "grpo" in by and before in by:
            out[f"grpo_gain_over_{before}"] = round(by["grpo"]["pass1"] - by[before]["pass1"], 4)
    # paired: on the same held-out tasks, what each stage gained over the one before it, how many tasks it fixed and
    # broke; GRPO also against SFT when an RFT stage sits between them
    rates = {name: pass_rates(args.out / by[name]["run"]) for name in STAGES
             if name in by and by[name].get("run") and (args.out / by[name]["run"]).is_dir()}  # fmt: skip
    pairs = list(itertools.pairwise(rates))
    if "grpo" in rates and "sft" in rates and ("sft", "grpo") not in pairs:
        pairs.append(("sft", "grpo"))
    for before, after in pairs:
        out[f"{after}_vs_{before}"] = paired_gain(rates[before], rates[after])
    if "grpo" in by and by["grpo"].get("evals"):
        out["grpo_steps"] = [{k: row[k] for k in ("step", "pass1", "lo", "hi", "gain")} for row in by["grpo"]["evals"]]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
