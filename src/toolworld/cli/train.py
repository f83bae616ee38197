"""``toolworld train``: fine-tune a model on toolworld conversations.

``train sft`` learns the assistant turns of successful trials (a run folder), or of the gold conversations of a
task file (run first into ``OUT/gold-run``), rendered through the model's own chat template exactly as the model
sees them at rollout time. ``train rft`` lets the model play each task k times and learns its own passed trials
token for token; ``train grpo`` samples groups of trials with the model being trained, scores them in the world
and updates on group-relative advantages. The work is in :mod:`toolworld.train` (``sft``, ``rft``, ``grpo``);
this module parses options, draws progress and turns errors into structured ones. torch and transformers load
inside the commands, so ``--help`` stays fast.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..core.errors import ToolworldError
from .kit import err_console, fail, fail_with, world_or_fail

if TYPE_CHECKING:
    from rich.progress import Progress

    from ..tasks.model import Task
    from ..train.sft import SFTConfig, SFTResult
    from ..world import World

train_app = typer.Typer(help="Fine-tune a model on toolworld data (SFT, rejection fine-tuning, GRPO).",
                        no_args_is_help=True)  # fmt: skip


# Options the training commands share (one definition each).
ModelOpt = Annotated[str, typer.Option("--model", "-m", help="Model to train: a model folder, a .gguf file, "
    "hf:PATH, gguf:PATH or smollm2 (the embedded model).")]
LoraOpt = Annotated[bool, typer.Option("--lora", help="Train LoRA adapters instead of every weight; final/ holds "
    "them merged into the model.")]
LoraROpt = Annotated[int, typer.Option("--lora-r", min=1, help="LoRA rank.")]
EpochsOpt = Annotated[int, typer.Option("--epochs", min=1, help="Passes over the data (ignored with --max-steps).")]
MaxStepsOpt = Annotated[int | None, typer.Option("--max-steps", min=1, help="Optimizer steps to run, cycling "
    "the data as needed.")]
LrOpt = Annotated[float | None, typer.Option("--lr", min=0.0, help="Peak learning rate (default 2e-5, with --lora "
    "2e-4); linear warmup then linear decay.")]
BatchTokensOpt = Annotated[int | None, typer.Option("--batch-tokens", min=2, help="Tokens per packed micro-batch "
    "(default: --max-len).")]
GradAccumOpt = Annotated[int, typer.Option("--grad-accum", min=1, help="Micro-batches per optimizer step.")]
SaveEveryOpt = Annotated[int, typer.Option("--save-every", min=0, help="Write a checkpoint every N steps (0: at "
    "the end and on Ctrl-C only).")]
KeepOpt = Annotated[int, typer.Option("--keep-checkpoints", min=0, help="Checkpoints kept on disk, the newest (0: "
    "all). Each holds the weights and the optimizer state: ~1.6 GB for the 135M model.")]
SeedOpt = Annotated[int, typer.Option("--seed", help="Data order and initialisation: same seed, same run.")]
DeviceOpt = Annotated[str, typer.Option("--device", help="cpu, cuda, mps or auto.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print the result as JSON.")]
CheckpointingOpt = Annotated[bool, typer.Option("--gradient-checkpointing", help="Recompute layer activations in "
    "the backward pass: ~30% more compute, a fraction of the memory (long packed rows on a CPU need it).")]
PackingOpt = Annotated[bool, typer.Option("--packing/--no-packing", help="Pack several conversations into one "
    "row (exact masks). On a CPU with conversations of thousands of tokens, --no-packing is faster: one "
    "conversation per micro-batch keeps attention causal, and the prompt a step's conversations share runs once "
    "(continued through the KV cache).")]
Bf16Opt = Annotated[bool, typer.Option("--bf16", help="Forward pass under bfloat16 autocast (weights stay float32): "
    "~1.5x faster where the CPU or GPU has bf16 instructions; where it has none (AVX2 only) PyTorch "
    "emulates bf16, many times slower than float32, and a warning says so.")]
SplitAttentionOpt = Annotated[bool, typer.Option("--split-attention/--no-split-attention", help="On a CPU, run the "
    "attention of a conversation continued after the step's shared prompt (--no-packing) as two unmasked kernel "
    "calls, the prompt's keys and its own, instead of one masked call: the same values and gradients, ~1.3x faster "
    "steps on conversations of 5-6k tokens, a few percent on 3k. --no-split-attention runs transformers' SDPA.")]
ToolPromptOpt = Annotated[str | None, typer.Option("--tool-prompt", help="How the tools are stated in the prompt: "
    "auto (the chat template's own tool block, else JSON schemas in the system message), json, or compact (one "
    "signature per tool; a few times fewer tokens). Default: what the model says of itself (compact for smollm2 "
    "and models trained with it). Recorded in final/, so `--policy hf:OUT/final` samples with it.")]


def register(app: typer.Typer) -> None:
    """Add the ``train`` command group to the top-level app."""
    app.add_typer(train_app, name="train")


@train_app.command()
def sft(
    ctx: typer.Context,
    source: Annotated[Path, typer.Argument(help="A run folder (its successful trials are the data) or a task file "
                                           "(the gold policy is run on it first, into OUT/gold-run).")],
    model: ModelOpt,
    out: Annotated[Path, typer.Option("--out", "-o", help="Output folder: train.jsonl, checkpoint-N/, final/.")],
    lora: LoraOpt = False,
    lora_r: LoraROpt = 16,
    epochs: EpochsOpt = 1,
    max_steps: MaxStepsOpt = None,
    lr: LrOpt = None,
    max_len: Annotated[int, typer.Option("--max-len", min=2, help="Cut conversations to this many tokens.")] = 8192,
    batch_tokens: BatchTokensOpt = None,
    grad_accum: GradAccumOpt = 1,
    save_every: SaveEveryOpt = 0,
    keep_checkpoints: KeepOpt = 2,
    seed: SeedOpt = 0,
    resume: Annotated[bool, typer.Option("--resume", help="Continue from the latest checkpoint in OUT.")] = False,
    include_failed: Annotated[bool, typer.Option("--include-failed", help="Learn from unsuccessful trials too.")] = False,
    explain_picks: Annotated[bool, typer.Option("--explain-picks", help="With a task file: the gold conversations "
                                                "say how each value the customer only described was picked from the "
                                                "list it came from, row by row (policy gold:explain=1); a small "
                                                "model learns such a pick from the steps, not from the id alone.")] = False,
    device: DeviceOpt = "auto",
    tool_prompt: ToolPromptOpt = None,
    gradient_checkpointing: CheckpointingOpt = False,
    packing: PackingOpt = True,
    bf16: Bf16Opt = False,
    split_attention: SplitAttentionOpt = True,
    trl: Annotated[bool, typer.Option("--trl", help="Train with TRL's SFTTrainer on the same data instead of the "
                                      "built-in loop.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Supervised fine-tuning: learn the assistant turns (tool calls and answers) of successful conversations.

    The loss is on the tokens the model has to produce, rendered through its own chat template with the same
    token bridge as a rollout, so the trained model (OUT/final, loadable as --policy hf:OUT/final) produces them
    token for token. Ctrl-C writes a checkpoint; --resume continues from it.
    """
    from ..train.sft import GOLD_RUN_DIR, LOG_FILE, SFTConfig, latest_checkpoint

    try:
        config = SFTConfig(out=out, lr=lr if lr is not None else (2e-4 if lora else 2e-5), epochs=epochs,
                           max_steps=max_steps, batch_tokens=batch_tokens or max_len, grad_accum=grad_accum,
                           max_len=max_len, lora=lora, lora_r=lora_r, lora_alpha=2 * lora_r, seed=seed,
                           save_every=save_every, keep_checkpoints=keep_checkpoints, resume=resume,
                           gradient_checkpointing=gradient_checkpointing, packing=packing, bf16=bf16)  # fmt: skip
    except ToolworldError as exc:
        fail_with(exc, ctx)
    if out.exists() and not out.is_dir():
        fail("invalid_option", f"--out {out} is a file; give a folder")
    if trl and (bf16 or gradient_checkpointing or not packing):
        fail("invalid_option", "--bf16, --gradient-checkpointing and --no-packing belong to the built-in trainer; "
             "with --trl, set TRL's own options in Python (toolworld.train.sft.train_sft_trl)")  # fmt: skip
    if explain_picks and source.is_dir():
        fail("invalid_option", f"--explain-picks rewrites gold conversations, but {source} is a run folder whose "
             "conversations are already recorded; pass a task file, or drop --explain-picks")  # fmt: skip
    if not resume and (latest_checkpoint(out) is not None or (out / LOG_FILE).exists()):
        fail("output_exists", f"{out} already holds a training run: add --resume to continue it, or choose another "
             "--out")  # fmt: skip
    if not source.exists():
        fail("not_found", f"{source} does not exist; pass a run folder (`toolworld run ... --out DIR`) or a task file "
             "(`toolworld tasks generate ...`)")  # fmt: skip
    try:
        result = _train(source, model, config, device=device, include_failed=include_failed, trl=trl,
                        gold_out=out / GOLD_RUN_DIR, quiet=as_json, tool_prompt=tool_prompt,
                        gold_policy="gold:explain=1" if explain_picks else "gold",
                        split_attention=split_attention)  # fmt: skip
    except ToolworldError as exc:
        fail_with(exc, ctx)
    summary = {"steps": result.steps, "total_steps": result.total_steps, "resumed_from": result.resumed_from,
               "first_loss": result.first_loss, "final_loss": result.final_loss, "tokens": result.tokens,
               "trainable_params": result.trainable_params, "wall_s": round(result.wall_s, 2),
               "final": str(result.final) if result.final else None,
               "checkpoint": str(result.checkpoint) if result.checkpoint else None,
               "interrupted": result.interrupted}  # fmt: skip
    if as_json:
        print(json.dumps(summary))
    elif result.interrupted:
        err_console.print(f"[yellow]interrupted after step {result.steps}; checkpoint {result.checkpoint}. Continue "
                          "with the same command and --resume.[/yellow]")  # fmt: skip
    else:
        first = f"{result.first_loss:.4f}" if result.first_loss is not None else "-"
        last = f"{result.final_loss:.4f}" if result.final_loss is not None else "-"
        err_console.print(f"[green]trained {result.steps} steps[/green] (loss {first} → {last}); model in "
                          f"{result.final}; try it: toolworld run WORLD --tasks FILE --policy hf:{result.final}")  # fmt: skip
    if result.interrupted:
        raise typer.Exit(130)


def _train(source: Path, model_spec: str, config: SFTConfig, *, device: str, include_failed: bool, trl: bool,
           gold_out: Path, quiet: bool, tool_prompt: str | None, gold_policy: str = "gold",
           split_attention: bool = True) -> SFTResult:  # fmt: skip
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from ..train.sft import SFTError, StepLog, sft_samples, train_sft, train_sft_trl

    model, tokenizer, path = _load_for_training(model_spec, device, quiet, split_attention=split_attention)
    config.tool_prompt = _tool_prompt(tool_prompt, path, SFTError, out=config.out, resume=config.resume)
    with err_console.status(f"rendering training data from {source}", spinner="dots") if not quiet else contextlib.nullcontext():
        samples = sft_samples(source, tokenizer, include_failed=include_failed, gold_out=gold_out,
                              max_len=config.max_len, tool_prompt=config.tool_prompt, gold_policy=gold_policy)  # fmt: skip
    progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                        TextColumn("{task.fields[extra]}"), TimeElapsedColumn(), TimeRemainingColumn(),
                        console=err_console, disable=quiet)  # fmt: skip
    with progress:
        bar = progress.add_task(f"sft on {len(samples)} conversations", total=None, extra="")

        def on_step(entry: StepLog) -> None:
            progress.update(bar, completed=entry.step, total=entry.total_steps,
                            extra=f"loss {entry.loss:.4f} · lr {entry.lr:.2e} · {entry.tokens_per_s:,.0f} tok/s")  # fmt: skip

        trainer = train_sft_trl if trl else train_sft
        return trainer(model, tokenizer, samples, config, on_step=on_step)


def _task_file(path: Path) -> tuple[World, list[Task]]:
    """The world and tasks of a task file, or a structured error (missing, unreadable, empty, several worlds)."""
    from ..tasks.model import TaskSet

    if not path.is_file():
        fail("not_found", f"{path} is not a task file; make one with `toolworld tasks generate WORLD N --out FILE`")
    try:
        task_set = TaskSet.load(path)
    except (OSError, UnicodeDecodeError) as exc:
        fail("not_tasks", f"cannot read {path}: {exc}")
    if not task_set.tasks:
        first = "; ".join(str(e) for e in task_set.errors[:3])
        fail("not_tasks", f"{path} holds no valid task ({len(task_set.errors)} bad line(s){': ' if first else ''}"
             f"{first}); pass a task file from `toolworld tasks generate`")  # fmt: skip
    worlds = sorted({t.world for t in task_set.tasks})
    if len(worlds) > 1:
        fail("invalid_option", f"{path} holds tasks of several worlds ({', '.join(worlds)}): training plays one "
             "world; split the file by world")  # fmt: skip
    return world_or_fail(worlds[0]), task_set.tasks


def _tool_prompt(given: str | None, model_path: Path, error: type[ToolworldError], *, out: Path,
                 resume: bool) -> str:  # fmt: skip
    """``--tool-prompt`` as given; else, resuming, the one the run was started with; else what the loaded model
    says of itself, else ``auto``; checked."""
    from ..rollout.models import model_tool_prompt
    from ..train.sft import LAYOUT_KEYS, check_tool_prompt, stored_config

    stored = stored_config(out) if resume else None
    if given is not None:
        value = given
    elif stored is not None:
        value = str(stored.get("tool_prompt", LAYOUT_KEYS["tool_prompt"]))
    else:
        value = model_tool_prompt(model_path) or "auto"
    check_tool_prompt(value, error)
    return value


def _load_for_training(model_spec: str, device: str, quiet: bool, *,
                       split_attention: bool = True) -> tuple[Any, Any, Path]:  # fmt: skip
    from ..train.sft import load_model

    try:  # transformers' own bars (loading, writing shards) would interleave with this command's progress bar
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    except ImportError:  # load_model says what to install
        pass
    with err_console.status(f"loading {model_spec}", spinner="dots") if not quiet else contextlib.nullcontext():
        model, tokenizer, path = load_model(model_spec, device=device, split_attention=split_attention)
    return model, tokenizer, path


def _progress(quiet: bool) -> Progress:
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    return Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TextColumn("{task.fields[extra]}"), TimeElapsedColumn(), TimeRemainingColumn(),
                    console=err_console, disable=quiet)  # fmt: skip


@train_app.command()
def grpo(
    ctx: typer.Context,
    tasks: Annotated[Path, typer.Argument(help="A task file (`toolworld tasks generate`): the tasks to play.")],
    model: ModelOpt,
    out: Annotated[Path, typer.Option("--out", "-o", help="Output folder: train.jsonl, trials.jsonl, "
                                      "checkpoint-N/, final/.")],
    group: Annotated[int, typer.Option("--group", "-g", min=2, help="Trials per task in a step (the group whose "
                                       "rewards are compared).")] = 8,
    tasks_per_step: Annotated[int, typer.Option("--tasks-per-step", min=1, help="Tasks sampled per step.")] = 8,
    steps: Annotated[int, typer.Option("--steps", min=1, help="Training steps (sample, score, update).")] = 100,
    lr: Annotated[float | None, typer.Option("--lr", min=0.0, help="Learning rate (constant; default 1e-6, with "
                                             "--lora 3e-5: a rank-16 update of SmolLM2-135M moves the "
                                             "policy as far as a full one at about thirty times its lr).")] = None,
    lora: Annotated[bool, typer.Option("--lora", help="Train LoRA adapters instead of every weight (the KL "
                                       "reference is then the adapters switched off, no second model); "
                                       "checkpoints hold the adapter, final/ the model with it merged.")] = False,
    lora_r: LoraROpt = 16,
    optimizer: Annotated[str, typer.Option("--optimizer", help="adamw (every weight moves ~lr a step) or sgd "
                                           "(weights move in proportion to their gradient; its lr is on another "
                                           "scale: on SmolLM2-135M sgd 0.05 gains what adamw 2e-5 does in one "
                                           "step and 1.0 wrecks the model; benchmarks/grpo_step.py measures "
                                           "it).")] = "adamw",
    advantage: Annotated[str, typer.Option("--advantage", help="grpo (mean/std baseline), dr_grpo (mean only), "
                                           "mc_grpo (median) or gigpo (grpo plus a step-level advantage over turns "
                                           "taken in the same situation: world state and what the user and tools "
                                           "had said).")] = "grpo",
    reward: Annotated[str, typer.Option("--reward", help="partial (the score's weighted components) or success "
                                        "(1 for a passed trial, else 0: only groups with both train).")] = "partial",
    reward_control: Annotated[str, typer.Option("--reward-control", help="none, or shuffle: train on each "
                                                "group's rewards permuted among its trials, the control run a gain "
                                                "must beat to be credited to the rewards (same groups, same "
                                                "advantage sizes, no credit assignment).")] = "none",
    kl: Annotated[float, typer.Option("--kl", min=0.0, help="KL penalty to the starting model (0: no reference "
                                      "model is kept).")] = 0.0,
    kl_ties: Annotated[int, typer.Option("--kl-ties", min=0, help="Trials of each group the update leaves out "
                                         "(its rewards tie, or --balance-targets dropped it) that still carry the "
                                         "--kl term, with no advantage: the update then also holds what the policy "
                                         "already does consistently, which a small policy otherwise drifts on "
                                         "(0: none; needs --kl).")] = 0,
    neg_weight: Annotated[float, typer.Option("--neg-weight", min=0.0, help="Scale of negative advantages: 1 "
                                              "the plain gradient; below 1 failed trials push their tokens down "
                                              "less than passing ones pull theirs up (0: successes only), which "
                                              "keeps a few updates from spreading mass into text no trial "
                                              "sampled.")] = 1.0,
    overlong_penalty: Annotated[float, typer.Option("--overlong-penalty", min=0.0, help="Taken off the reward of "
                                                    "a trial that a turn's --max-tokens cut, so a reply that never "
                                                    "ends ranks below a wrong answer (0: none).")] = 0.0,
    clip: Annotated[float, typer.Option("--clip", help="PPO clip range of the probability ratio.")] = 0.2,
    updates: Annotated[int, typer.Option("--updates", min=1, help="Optimizer steps per batch of trials. With few "
                                         "informative groups per step keep 1: 3 made SmolLM2-135M call one tool "
                                         "for every request after one step (docs/benchmarks.md).")] = 1,
    min_groups: Annotated[int, typer.Option("--min-groups", min=0, help="Dynamic sampling: while fewer groups "
                                            "than this have differing rewards, the step plays --tasks-per-step "
                                            "more tasks (0: one draw; tied groups teach nothing, so a policy "
                                            "that passes tasks all-or-nothing otherwise updates on one or two "
                                            "groups).")] = 0,
    max_draws: Annotated[int, typer.Option("--max-draws", min=1, help="Draws of --tasks-per-step tasks a step "
                                           "makes at most for --min-groups (it bounds a step's sampling).")] = 4,
    balance: Annotated[bool, typer.Option("--balance-targets", help="Spread --min-groups evenly over the tasks' "
                                          "target tools (their synthesis targets): later draws pick from targets "
                                          "still short, and the update trains on as many groups of each, so no "
                                          "kind of request makes up an update by the luck of the draw.")] = False,
    guide: Annotated[str | None, typer.Option("--guide", help="A policy SPEC whose passing trial joins every group "
                                              "in which all the model's trials failed, with reward 1, so that the "
                                              "update has an alternative to raise against them (off-policy "
                                              "guidance): gold, gold:explain=1 (the conversations SFT learnt with "
                                              "--explain-picks), or a stronger model, openai:MODEL@URL.")] = None,
    branch: Annotated[str | None, typer.Option("--branch", help="A policy SPEC (gold:explain=1) that plays each "
                                               "task's first turns before the model takes over: per task and step "
                                               "it plays the task once, and the group's trials start after its "
                                               "first k turns, k drawn uniformly (0: from the start). Trials then "
                                               "meet the late decisions (the pick, the answer) directly; the reward "
                                               "is still the whole episode's, and the lead's turns carry no "
                                               "gradient.")] = None,
    branch_from_start: Annotated[float, typer.Option("--branch-from-start", min=0.0, max=1.0,
                                                     help="With --branch: the chance that a task's group plays it "
                                                     "from its start anyway (k = 0), so that the first turns (the "
                                                     "customer lookup), which the lead plays whenever k falls after "
                                                     "them, are trained too.")] = 0.0,
    branch_at: Annotated[str, typer.Option("--branch-at", help="With --branch: where a group starts. uniform: after "
                                           "k of the lead's turns, k drawn uniformly; pick: at the lead's turn that "
                                           "picks a value the customer only described (the order 'I placed on "
                                           "April 16'), the decision small policies get wrong most (uniform where "
                                           "a task has none).")] = "uniform",
    blame_invented: Annotated[bool, typer.Option("--blame-invented", help="In a failed trial's turn that sent an "
                                                 "argument value no earlier message held (an email the customer "
                                                 "never gave), keep the negative advantage on that value's tokens "
                                                 "alone: the update lowers the made-up value, not the tool it was "
                                                 "sent to. Each step logs the turns it changed (blamed).")] = False,
    sft_source: Annotated[Path | None, typer.Option("--sft", help="Conversations to stay close to: a run folder (its "
                                                    "passed trials) or a task file (its gold, played by --sft-gold), "
                                                    "as `train sft` takes; each update adds --sft-coef times their "
                                                    "supervised loss (PPO-ptx), so a few tasks' update does not "
                                                    "undo what SFT taught on other kinds of request.")] = None,
    sft_coef: Annotated[float | None, typer.Option("--sft-coef", min=0.0, help="Weight of the --sft loss in each "
                                                   "update (default 1.0 with --sft).")] = None,
    sft_floor: Annotated[float, typer.Option("--sft-floor", min=0.0, help="Weight of a floor under the --sft "
                                             "conversations' likelihood: a token the update made less likely than "
                                             "the reference did is pulled back, one made more likely is left alone "
                                             "(one-sided k3; 0: none). Unlike --sft-coef it does not fit them "
                                             "further. The pull is the drift times the weight: on SmolLM2-135M 100 held "
                                             "the gold's turns for 4 steps (not 8), 1 did nothing, 300 unsettled the "
                                             "update and lost what 100 held. Needs --kl or "
                                             "--lora for the reference.")] = 0.0,
    sft_batch: Annotated[int, typer.Option("--sft-batch", min=1, help="--sft conversations per update, drawn by "
                                           "seed and step.")] = 4,
    sft_gold: Annotated[str, typer.Option("--sft-gold", help="The gold policy that plays a task file given to --sft "
                                          "(gold:explain=1: the conversations `train sft --explain-picks` "
                                          "learnt).")] = "gold",
    max_tokens: Annotated[int, typer.Option("--max-tokens", min=1, help="Tokens per assistant turn.")] = 512,
    temperature: Annotated[float, typer.Option("--temperature", help="Sampling temperature; the update "
                                               "trains the policy at the same temperature (softmax(logits / T)), "
                                               "the one that drew the trials.")] = 1.0,
    max_len: Annotated[int, typer.Option("--max-len", min=2, help="Cut trials to this many tokens in "
                                         "training.")] = 8192,
    save_every: SaveEveryOpt = 0,
    keep_checkpoints: KeepOpt = 2,
    concurrency: Annotated[int, typer.Option("--concurrency", min=1, help="Episodes in flight while "
                                             "sampling.")] = 8,
    seed: Annotated[int, typer.Option("--seed", help="Task choice and sampling: same seed, same run.")] = 0,
    resume: Annotated[bool, typer.Option("--resume", help="Continue from the latest checkpoint in OUT.")] = False,
    device: DeviceOpt = "auto",
    tool_prompt: ToolPromptOpt = None,
    gradient_checkpointing: CheckpointingOpt = False,
    packing: PackingOpt = True,
    bf16: Bf16Opt = False,
    split_attention: SplitAttentionOpt = True,
    save_trials: Annotated[bool, typer.Option("--save-trials/--no-save-trials", help="Write every scored trial "
                                              "(messages, reward, failed components) to OUT/trials.jsonl.")] = True,
    eval_tasks: Annotated[Path | None, typer.Option("--eval-tasks", help="A task file of held-out tasks (none of "
                                                    "TASKS): the model plays them before the first step, every "
                                                    "--eval-every steps and after the last; pass^1 with its 95% "
                                                    "interval and the paired gain over the start go to "
                                                    "OUT/eval.jsonl.")] = None,
    eval_every: Annotated[int | None, typer.Option("--eval-every", min=1, help="Steps between evaluations on "
                                                   "--eval-tasks (default 10).")] = None,
    eval_trials: Annotated[int, typer.Option("--eval-trials", min=1, help="Trials per evaluation task; more than "
                                             "1 needs --eval-temperature above 0.")] = 1,
    eval_temperature: Annotated[float, typer.Option("--eval-temperature", min=0.0, help="Temperature the "
                                                    "evaluation decodes at (0: greedy, as a deployed model "
                                                    "answers).")] = 0.0,
    as_json: JsonOpt = False,
) -> None:
    """On-policy GRPO: the model plays each task --group times, and learns from how its trials compare.

    Each step samples trials with the model being trained (token level, scripted user), scores them, and makes
    a clipped policy-gradient update with group-relative advantages. The final model is OUT/final (loadable as
    --policy hf:OUT/final); Ctrl-C writes a checkpoint and --resume continues from it. The training reward is
    measured on the tasks being trained; --eval-tasks measures what the policy does on tasks it never trains on.
    """
    from ..train.grpo import GRPOConfig, GRPOError, GRPOEval, GRPOStep, train_grpo
    from ..train.sft import LOG_FILE, latest_checkpoint, sft_samples

    if eval_every is not None and eval_tasks is None:
        fail("invalid_option", "--eval-every needs --eval-tasks FILE: the held-out tasks to evaluate on")
    eval_every = (eval_every or 10) if eval_tasks is not None else 0
    if sft_coef is not None and sft_source is None:
        fail("invalid_option", "--sft-coef needs --sft PATH: the conversations whose loss it weighs")
    if sft_floor and sft_source is None:
        fail("invalid_option", "--sft-floor needs --sft PATH: the conversations it holds")
    if sft_coef == 0 and sft_source is not None and not sft_floor:
        fail("invalid_option", "--sft-coef 0 weighs the --sft conversations at nothing: drop --sft, or give a weight > 0 "
             "(or --sft-floor)")
    # with a floor alone the conversations are held, not fitted: the supervised loss then defaults to none
    sft_coef = (sft_coef if sft_coef is not None else 0.0 if sft_floor else 1.0) if sft_source is not None else 0.0
    try:
        config = GRPOConfig(out=out, group=group, tasks_per_step=tasks_per_step, steps=steps, clip=clip,
                            lr=lr if lr is not None else (3e-5 if lora else 1e-6), optimizer=optimizer,
                            lora=lora, lora_r=lora_r, lora_alpha=2 * lora_r,
                            kl_coef=kl, kl_ties=kl_ties, neg_weight=neg_weight, overlong_penalty=overlong_penalty,
                            advantage=advantage, reward=reward, reward_control=reward_control,
                            updates=updates, min_groups=min_groups,
                            max_draws=max_draws, balance=balance, guide=guide or "", branch=branch or "",
                            branch_from_start=branch_from_start, branch_at=branch_at, blame_invented=blame_invented,
                            sft_coef=sft_coef, sft_floor=sft_floor,
                            sft_batch=sft_batch, max_tokens=max_tokens,
                            temperature=temperature, max_len=max_len, concurrency=concurrency, seed=seed,
                            save_every=save_every, keep_checkpoints=keep_checkpoints, resume=resume,
                            gradient_checkpointing=gradient_checkpointing, packing=packing, bf16=bf16,
                            save_trials=save_trials, eval_every=eval_every, eval_trials=eval_trials,
                            eval_temperature=eval_temperature)  # fmt: skip
    except ToolworldError as exc:
        fail_with(exc, ctx)
    if out.exists() and not out.is_dir():
        fail("invalid_option", f"--out {out} is a file; give a folder")
    if not resume and (latest_checkpoint(out) is not None or (out / LOG_FILE).exists()):
        fail("output_exists", f"{out} already holds a training run: add --resume to continue it, or choose another "
             "--out")  # fmt: skip
    world, task_list = _task_file(tasks)
    held = _task_file(eval_tasks)[1] if eval_tasks is not None else None
    try:
        trained, tokenizer, path = _load_for_training(model, device, as_json,
                                                       split_attention=split_attention)
        config.tool_prompt = _tool_prompt(tool_prompt, path, GRPOError, out=config.out, resume=config.resume)
        kept = sft_samples(sft_source, tokenizer, gold_out=out / "sft-gold", max_len=max_len,
                           tool_prompt=config.tool_prompt, gold_policy=sft_gold) if sft_source is not None else None
        with _progress(as_json) as progress:
            bar = progress.add_task(f"grpo on {len(task_list)} tasks", total=steps,
                                    extra=f"evaluating on {len(held)} held-out tasks" if held else "")  # fmt: skip
            said = {"eval": ""}  # the latest evaluation, kept in the bar beside each step's figures

            def on_step(entry: GRPOStep) -> None:
                gap = f" · gap {entry.logprob_gap:.3f}" if entry.logprob_gap is not None else ""
                due = held and (entry.step % eval_every == 0 or entry.step == steps)
                guided = f" ({entry.guided} guided)" if entry.guided else ""
                progress.update(bar, completed=entry.step, extra=f"reward {entry.reward:.3f} · pass^1 "
                                f"{entry.pass1:.2f} · {entry.groups}/{entry.tasks} groups differ{guided}{gap} · "
                                f"{entry.tokens_per_s:,.0f} tok/s{said['eval']}"
                                f"{' · evaluating' if due else ''}")  # fmt: skip

            def on_eval(ev: GRPOEval) -> None:
                gain = f" ({ev.gain['gain']:+.2f})" if ev.gain else ""
                said["eval"] = f" · held-out {ev.pass1:.2f}{gain} at step {ev.step}"
                progress.update(bar, extra=said["eval"].removeprefix(" · "))

            result = train_grpo(trained, tokenizer, world, task_list, config, on_step=on_step, eval_tasks=held,
                                on_eval=on_eval, sft=kept)  # fmt: skip
    except ToolworldError as exc:
        fail_with(exc, ctx)
    summary = {"steps": result.steps, "total_steps": result.total_steps, "resumed_from": result.resumed_from,
               "rewards": [round(r, 4) for r in result.rewards], "wall_s": round(result.wall_s, 2),
               "final": str(result.final) if result.final else None,
               "checkpoint": str(result.checkpoint) if result.checkpoint else None,
               "interrupted": result.interrupted,
               "evals": [{k: v for k, v in ev.to_dict().items() if k != "per_task"} for ev in result.evals]}  # fmt: skip
    for ev in result.evals if not as_json else ():
        gain = (f"; {ev.gain['gain']:+.3f} [{ev.gain['ci'][0]:+.3f}, {ev.gain['ci'][1]:+.3f}] over step "
                f"{result.evals[0].step}, {ev.gain['fixed']} tasks fixed and {ev.gain['broke']} broken"
                if ev.gain else "")  # fmt: skip
        err_console.print(f"held-out after step {ev.step}: pass^1 {ev.pass1:.3f} [{ev.lo:.3f}, {ev.hi:.3f}] on "
                          f"{ev.tasks} tasks{gain}")  # fmt: skip
    if as_json:
        print(json.dumps(summary))
    elif result.interrupted:
        err_console.print(f"[yellow]interrupted after step {result.steps}; checkpoint {result.checkpoint}. Continue "
                          "with the same command and --resume.[/yellow]")  # fmt: skip
    else:
        err_console.print(f"[green]trained {result.steps} GRPO steps[/green]; model in {result.final}; try it: "
                          f"toolworld run {world.name} --tasks FILE --policy hf:{result.final}")  # fmt: skip
    if result.interrupted:
        raise typer.Exit(130)


@train_app.command()
def rft(
    ctx: typer.Context,
    tasks: Annotated[Path, typer.Argument(help="A task file (`toolworld tasks generate`): the tasks to play.")],
    model: ModelOpt,
    out: Annotated[Path, typer.Option("--out", "-o", help="Output folder: rft_samples.jsonl, rft.json, "
                                      "train.jsonl, checkpoint-N/, final/.")],
    k: Annotated[int, typer.Option("--k", "-k", min=1, help="Trials per task; the passed ones are learned.")],
    max_tokens: Annotated[int, typer.Option("--max-tokens", min=1, help="Tokens per assistant turn.")] = 1024,
    temperature: Annotated[float, typer.Option("--temperature", min=0.0, help="Sampling temperature.")] = 1.0,
    concurrency: Annotated[int, typer.Option("--concurrency", min=1, help="Episodes in flight while "
                                             "sampling.")] = 8,
    lora: LoraOpt = False,
    lora_r: LoraROpt = 16,
    epochs: EpochsOpt = 1,
    max_steps: MaxStepsOpt = None,
    lr: LrOpt = None,
    max_len: Annotated[int, typer.Option("--max-len", min=2, help="Cut trials to this many tokens.")] = 8192,
    batch_tokens: BatchTokensOpt = None,
    grad_accum: GradAccumOpt = 1,
    save_every: SaveEveryOpt = 0,
    keep_checkpoints: KeepOpt = 2,
    seed: SeedOpt = 0,
    resume: Annotated[bool, typer.Option("--resume", help="Continue from the latest checkpoint in OUT (the kept "
                                         "trials are read back, not sampled again).")] = False,
    device: DeviceOpt = "auto",
    tool_prompt: ToolPromptOpt = None,
    gradient_checkpointing: CheckpointingOpt = False,
    packing: PackingOpt = True,
    bf16: Bf16Opt = False,
    split_attention: SplitAttentionOpt = True,
    as_json: JsonOpt = False,
) -> None:
    """Rejection fine-tuning: the model plays each task --k times and is fine-tuned on its own passed trials.

    The passed trials are learned token for token as the model sampled them (only its own turns carry loss).
    The final model is OUT/final (loadable as --policy hf:OUT/final); Ctrl-C writes a checkpoint and --resume
    continues from it.
    """
    from ..train.rft import RFTResult, train_rft
    from ..train.sft import SFTConfig, SFTError, StepLog

    try:
        config = SFTConfig(out=out, lr=lr if lr is not None else (2e-4 if lora else 2e-5), epochs=epochs,
                           max_steps=max_steps, batch_tokens=batch_tokens or max_len, grad_accum=grad_accum,
                           max_len=max_len, lora=lora, lora_r=lora_r, lora_alpha=2 * lora_r, seed=seed,
                           save_every=save_every, keep_checkpoints=keep_checkpoints, resume=resume,
                           gradient_checkpointing=gradient_checkpointing, packing=packing, bf16=bf16)  # fmt: skip
    except ToolworldError as exc:
        fail_with(exc, ctx)
    if out.exists() and not out.is_dir():
        fail("invalid_option", f"--out {out} is a file; give a folder")
    world, task_list = _task_file(tasks)
    try:
        trained, tokenizer, path = _load_for_training(model, device, as_json,
                                                       split_attention=split_attention)
        config.tool_prompt = _tool_prompt(tool_prompt, path, SFTError, out=config.out, resume=config.resume)
        with _progress(as_json) as progress:
            bar = progress.add_task(f"sampling {len(task_list)} tasks x {k}", total=None, extra="")

            def on_sampled(sampled: RFTResult) -> None:
                progress.update(bar, description=f"rft on {sampled.kept} passed trials (of {sampled.trials})")

            def on_step(entry: StepLog) -> None:
                progress.update(bar, completed=entry.step, total=entry.total_steps,
                                extra=f"loss {entry.loss:.4f} · lr {entry.lr:.2e} · {entry.tokens_per_s:,.0f} tok/s")  # fmt: skip

            result = train_rft(trained, tokenizer, world, task_list, k=k, config=config, max_tokens=max_tokens,
                               temperature=temperature, concurrency=concurrency, on_sampled=on_sampled,
                               on_step=on_step)  # fmt: skip
    except ToolworldError as exc:
        fail_with(exc, ctx)
    sft_result = result.sft
    assert sft_result is not None
    summary = {"trials": result.trials, "passed": result.passed, "kept": result.kept,
               "infra_errors": result.infra_errors, "reused_samples": result.reused_samples,
               "steps": sft_result.steps, "total_steps": sft_result.total_steps,
               "first_loss": sft_result.first_loss, "final_loss": sft_result.final_loss,
               "wall_s": round(sft_result.wall_s, 2), "final": str(sft_result.final) if sft_result.final else None,
               "checkpoint": str(sft_result.checkpoint) if sft_result.checkpoint else None,
               "interrupted": sft_result.interrupted}  # fmt: skip
    if as_json:
        print(json.dumps(summary))
    elif sft_result.interrupted:
        err_console.print(f"[yellow]interrupted after step {sft_result.steps}; checkpoint {sft_result.checkpoint}. "
                          "Continue with the same command and --resume.[/yellow]")  # fmt: skip
    else:
        err_console.print(f"[green]kept {result.kept} of {result.trials} trials, trained {sft_result.steps} "
                          f"steps[/green]; model in {sft_result.final}; try it: toolworld run {world.name} --tasks "
                          f"FILE --policy hf:{sft_result.final}")  # fmt: skip
    if sft_result.interrupted:
        raise typer.Exit(130)



@train_app.command()
def export(
    model: Annotated[Path, typer.Argument(help="A trained model folder (a trainer's OUT/final).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="The .gguf file to write (replaced if it exists).")],
    base: Annotated[Path | None, typer.Option("--base", help="The GGUF the model was trained from, whose tokenizer "
                                              "and metadata are copied (default: the embedded smollm2, pulled on "
                                              "first use).")] = None,
    dtype: Annotated[str, typer.Option("--dtype", help="f32 (what the trainer computes) or f16 (half the file).")] = "f16",
    tool_prompt: Annotated[str | None, typer.Option("--tool-prompt", help="Record this tool prompt in the file "
                                                     "(default: what OUT/final/toolworld.json says).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Write a trained model as a GGUF that llama.cpp samples: `--policy gguf:FILE`, several times faster on a CPU.

    The base GGUF's tokenizer, chat template and hyper-parameters are copied; the trained weights replace its
    tensors. The tool prompt the model was trained with is recorded, so the policy states tools the same way.
    """
    from ..train.export import export_gguf
    from ..train.sft import SFTError

    try:
        if tool_prompt is not None:
            from ..train.sft import check_tool_prompt

            check_tool_prompt(tool_prompt, SFTError)
        if base is None:
            from ..rollout.models import ensure_model

            base = ensure_model("smollm2")
        written = export_gguf(model, out, base_gguf=base, dtype=dtype, tool_prompt=tool_prompt)  # type: ignore[arg-type]
    except ToolworldError as exc:
        fail_with(exc)
    summary = {"gguf": str(written), "bytes": written.stat().st_size, "dtype": dtype}
    if as_json:
        print(json.dumps(summary))
    else:
        err_console.print(f"[green]wrote {written}[/green] ({summary['bytes'] / 1e6:,.0f} MB); try it: toolworld run "
                          f"WORLD --tasks FILE --policy gguf:{written}")  # fmt: skip
