"""``toolworld rescore / report / export``: work on a stored run without running the model again.

The work is :mod:`toolworld.pipeline` (``rescore``, ``finish``, ``export``); the summary and the report are always
computed from the store, so a resumed run, a re-scored run and a fresh run give the same files for the same trials.
A stored row that cannot be read is skipped with one warning line on stderr naming it (:func:`print_damage`); a
file that is not a readable store at all is a structured ``damaged_run`` error.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from .kit import console, err_console, fail, fail_with

if TYPE_CHECKING:
    from ..scoring.summary import Summary

REPORT = "report.html"

RunDir = Annotated[Path, typer.Argument(help="Run folder written by `toolworld run --out DIR`.")]


def register(app: typer.Typer) -> None:
    """Add this module's commands to the top-level app."""
    app.command("rescore")(rescore)
    app.command("report")(report)
    app.command("export")(export)


def print_damage(line: str) -> None:
    """How every command reports a stored row it had to skip: one line on stderr, and the command goes on."""
    err_console.print(f"warning: {line}", style="yellow", markup=False, highlight=False, soft_wrap=True)


def print_notice(event: Any) -> None:
    """How commands show the pipeline's notices (a report that could not be written, a rebuilt store)."""
    from ..pipeline import Notice

    if isinstance(event, Notice):
        style = {"warning": "yellow", "error": "red"}.get(event.level)
        err_console.print(event.message, style=style, markup=False, soft_wrap=True)


def _pct(value: Any) -> str:
    return "—" if value is None else f"{100 * float(value):.1f}%"


def print_run_summary(summary: Summary, out: Path, report: Path | None) -> None:
    """The rich table ``toolworld run`` and ``rescore`` end with."""
    from rich.table import Table

    trials = summary.trials
    ks = sorted({1, trials})
    table = Table(title=f"toolworld run · {summary.world} · {summary.policy}")
    for col in ["tasks×k", "done", "success", *(f"pass^{k}" for k in ks), "infra", "reward", "tokens"]:
        table.add_column(col, justify="right")
    table.add_row(f"{summary.tasks} × {trials}", f"{summary.finished or 0}/{summary.episodes}",
                  _pct(summary.success_rate), *(_pct(summary.pass_hat(k)) for k in ks), str(summary.infra_errors),
                  f"{summary.mean_reward:.3f}", f"{summary.tokens.total:,}")  # fmt: skip
    console.print(table)
    ends = {k: v for k, v in summary.terminations.items() if v}
    if ends:
        console.print("endings: " + ", ".join(f"{k} {v}" for k, v in ends.items()), highlight=False)
    if summary.infra_errors:
        console.print(f"[yellow]{summary.infra_errors} trial(s) ended on infra errors: excluded from the scores; "
                      f"`toolworld run ... --out {out} --resume` re-runs them[/yellow]")  # fmt: skip
    if summary.task_file_errors:
        console.print(f"[yellow]{len(summary.task_file_errors)} task line(s) skipped (listed in summary.json, "
                      "task_file_errors)[/yellow]")  # fmt: skip
    console.print(f"run: {out}  (summary.json, run.db)", highlight=False, markup=False, soft_wrap=True)
    if report is not None:
        console.print(f"report: {report}", highlight=False, markup=False, soft_wrap=True)


def rescore(
    out: RunDir,
    check: Annotated[bool, typer.Option("--check", help="Only compare: exit 1 if any new score differs from "
                                        "the stored one; store nothing.")] = False,
) -> None:
    """Re-score every stored trajectory without running the model (after a scorer change, or to audit a run).

    Rewrites the scores in run.db, summary.json and report.html; prints how many scores changed.
    """
    from .. import pipeline

    try:
        result = pipeline.rescore(out, check=check, on_progress=print_notice, on_damage=print_damage)
    except pipeline.RunError as exc:
        fail_with(exc)
    if check:
        for task_id, trial in result.changed[:20]:
            console.print(f"differs: {task_id} trial {trial}", highlight=False, markup=False)
        console.print(f"{result.rescored} trials re-scored, {len(result.changed)} differ from the stored scores",
                      highlight=False)  # fmt: skip
        raise typer.Exit(1 if result.changed else 0)
    assert result.summary is not None
    print_run_summary(result.summary, out, result.report)
    console.print(f"{result.rescored} trials re-scored, {len(result.changed)} changed", highlight=False)


def report(out: RunDir) -> None:
    """Write DIR/report.html (self-contained, works offline) from the stored run; also refreshes summary.json."""
    from .. import pipeline

    try:
        _summary, path = pipeline.finish(out, on_progress=print_notice, on_damage=print_damage)
    except pipeline.RunError as exc:
        fail_with(exc)
    if path is None:
        fail("report_failed", f"could not write {out / REPORT} (see the message above)")
    console.print(f"report: {path}", highlight=False, markup=False, soft_wrap=True)


def export(
    out: RunDir,
    fmt: Annotated[str, typer.Option("--format", help="jsonl (trajectories with scores and token buffers), parquet "
                                     "(one row per trial), chat (OpenAI-shape conversations with tools), sft "
                                     "(conversations rendered through a model's chat template: input_ids and "
                                     "assistant_masks), or tokens (a token-level run's ids, loss mask, logprobs and "
                                     "reward per trial).")] = "jsonl",
    output: Annotated[Path | None, typer.Option("-o", "--output", help="File to write; default DIR/trajectories.jsonl, "
                                                "DIR/trajectories.parquet, or DIR/FORMAT.parquet for chat, sft and "
                                                "tokens (which write JSON lines to a .jsonl name).")] = None,
    include_failed: Annotated[bool, typer.Option("--all", help="chat, sft: include unsuccessful trials too (never "
                                                 "infra-errored ones).")] = False,
    tokenizer: Annotated[Path | None, typer.Option("--tokenizer", help="sft: tokenizer folder (or .gguf file) of "
                                                   "the model to train; default: the run's own policy's.")] = None,
    tool_prompt: Annotated[str | None, typer.Option("--tool-prompt", help="sft: how the tools are stated (auto, json "
                                                    "or compact); default: as the run's own policy stated them.")] = None,
) -> None:
    """Export a stored run for training or analysis.

    Example: toolworld export runs/gold --format sft --tokenizer ./Qwen3-8B
    """
    from .. import pipeline

    try:
        result = pipeline.export(out, fmt, output=output, include_failed=include_failed, tokenizer=tokenizer,
                                 on_damage=print_damage, tool_prompt=tool_prompt)  # fmt: skip
    except pipeline.RunError as exc:
        fail_with(exc)
    what = "conversations" if result.fmt in ("chat", "sft") else "trials"
    console.print(f"wrote {result.records} {what} to {result.path}", highlight=False, markup=False)
