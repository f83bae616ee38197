"""``toolworld train``: fine-tune a model on toolworld conversations.

``train sft`` learns the assistant turns of successful trials (a run folder), or of the gold conversations of a
task file (run first into ``OUT/gold-run``), rendered through the model's own chat template exactly as the model
sees them at rollout time. The work is :mod:`toolworld.train.sft`; this module parses options, draws progress and
turns errors into structured ones. torch and transformers load inside the command, so ``--help`` stays fast.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ..core.errors import ToolworldError
from .kit import err_console, fail, fail_with

if TYPE_CHECKING:
    from ..train.sft import SFTConfig, SFTResult

train_app = typer.Typer(help="Fine-tune a model on toolworld data (SFT on successful conversations).",
                        no_args_is_help=True)  # fmt: skip


def register(app: typer.Typer) -> None:
    """Add the ``train`` command group to the top-level app."""
    app.add_typer(train_app, name="train")


@train_app.command()
def sft(
    source: Annotated[Path, typer.Argument(help="A run folder (its successful trials are the data) or a task file "
                                           "(the gold policy is run on it first, into OUT/gold-run).")],
    model: Annotated[str, typer.Option("--model", "-m", help="Model to train: a model folder, a .gguf file, "
                                       "hf:PATH, gguf:PATH or smollm2 (the embedded model).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Output folder: train.jsonl, checkpoint-N/, final/.")],
    lora: Annotated[bool, typer.Option("--lora", help="Train LoRA adapters instead of every weight; final/ holds "
                                       "them merged into the model.")] = False,
    lora_r: Annotated[int, typer.Option("--lora-r", min=1, help="LoRA rank.")] = 16,
    epochs: Annotated[int, typer.Option("--epochs", min=1, help="Passes over the data (ignored with --max-steps).")] = 1,
    max_steps: Annotated[int | None, typer.Option("--max-steps", min=1, help="Optimizer steps to run, cycling "
                                                  "the data as needed.")] = None,
    lr: Annotated[float | None, typer.Option("--lr", min=0.0, help="Peak learning rate (default 2e-5, with --lora "
                                             "2e-4); linear warmup then linear decay.")] = None,
    max_len: Annotated[int, typer.Option("--max-len", min=2, help="Cut conversations to this many tokens.")] = 8192,
    batch_tokens: Annotated[int | None, typer.Option("--batch-tokens", min=2, help="Tokens per packed micro-batch "
                                                     "(default: --max-len).")] = None,
    grad_accum: Annotated[int, typer.Option("--grad-accum", min=1, help="Micro-batches per optimizer step.")] = 1,
    save_every: Annotated[int, typer.Option("--save-every", min=0, help="Write a checkpoint every N steps (0: at "
                                            "the end and on Ctrl-C only).")] = 0,
    seed: Annotated[int, typer.Option("--seed", help="Data order and initialisation: same seed, same run.")] = 0,
    resume: Annotated[bool, typer.Option("--resume", help="Continue from the latest checkpoint in OUT.")] = False,
    include_failed: Annotated[bool, typer.Option("--include-failed", help="Learn from unsuccessful trials too.")] = False,
    device: Annotated[str, typer.Option("--device", help="cpu, cuda, mps or auto.")] = "auto",
    trl: Annotated[bool, typer.Option("--trl", help="Train with TRL's SFTTrainer on the same data instead of the "
                                      "built-in loop.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
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
                           save_every=save_every, resume=resume)  # fmt: skip
    except ToolworldError as exc:
        fail_with(exc)
    if out.exists() and not out.is_dir():
        fail("invalid_option", f"--out {out} is a file; give a folder")
    if not resume and (latest_checkpoint(out) is not None or (out / LOG_FILE).exists()):
        fail("output_exists", f"{out} already holds a training run: add --resume to continue it, or choose another "
             "--out")  # fmt: skip
    if not source.exists():
        fail("not_found", f"{source} does not exist; pass a run folder (`toolworld run ... --out DIR`) or a task file "
             "(`toolworld tasks generate ...`)")  # fmt: skip
    try:
        result = _train(source, model, config, device=device, include_failed=include_failed, trl=trl,
                        gold_out=out / GOLD_RUN_DIR, quiet=as_json)  # fmt: skip
    except ToolworldError as exc:
        fail_with(exc)
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
           gold_out: Path, quiet: bool) -> SFTResult:  # fmt: skip
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from ..train.sft import StepLog, load_model, sft_samples, train_sft, train_sft_trl

    try:  # transformers' own bars (loading, writing shards) would interleave with this command's progress bar
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    except ImportError:  # load_model says what to install
        pass
    with err_console.status(f"loading {model_spec}", spinner="dots") if not quiet else contextlib.nullcontext():
        model, tokenizer, _path = load_model(model_spec, device=device)
    with err_console.status(f"rendering training data from {source}", spinner="dots") if not quiet else contextlib.nullcontext():
        samples = sft_samples(source, tokenizer, include_failed=include_failed, gold_out=gold_out,
                              max_len=config.max_len)  # fmt: skip
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

