"""``toolworld rescore / report / export``: work on a stored run without running the model again.

Also the end of ``toolworld run`` (:func:`finish_run`): the summary and the report are always computed from
the store, so a resumed run, a re-scored run and a fresh run give the same files for the same trials. A stored
row that cannot be read is skipped with one warning line on stderr naming it (:func:`print_damage`); a file that
is not a readable store at all is a structured ``damaged_run`` error.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from .kit import console, err_console, fail

if TYPE_CHECKING:
    from ..store.runstore import RunStore

SUMMARY = "summary.json"
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


def _open_or_fail(out: Path, *, writer: bool = False) -> RunStore:
    """The run store in ``out`` (``writer``: locked against a run or another rescore), or a structured error."""
    from ..store.runstore import RunStore, StoreError

    try:
        return RunStore.open(out, writer=writer, on_damage=print_damage)
    except StoreError as exc:
        fail(exc.kind, str(exc))


def _rows(store: RunStore) -> tuple[dict[str, Any], list[Any], list[Any], list[dict[str, Any]]]:
    tasks = {t.id: t for t in store.tasks()}
    trajectories, scores, rows = [], [], []
    for traj, score, _facts in store.trials():
        if score is None:  # stored without a score (should not happen): score it now rather than drop it
            from ..scoring import score_trajectory

            score = score_trajectory(tasks[traj.task_id], traj)
        trajectories.append(traj)
        scores.append(score)
        rows.append({"task": tasks[traj.task_id].model_dump(mode="json"), "trajectory": traj.model_dump(mode="json"),
                     "score": score.model_dump(mode="json")})  # fmt: skip
    return tasks, trajectories, scores, rows


def finish_run(store: RunStore, out: Path, *, task_file_errors: list[str] | None = None,
               with_report: bool = True) -> tuple[dict[str, Any], Path | None]:  # fmt: skip
    """Write ``summary.json`` (and ``report.html``) for everything in the store; returns (summary, report path).

    A report that cannot be written (a full disk, an unwritable folder) is reported on stderr and never costs the
    summary: the trials are already safe in the store and ``toolworld report DIR`` can be run later.
    """
    from ..scoring import summarize

    config = store.config
    tasks, trajectories, scores, rows = _rows(store)
    summary = summarize(tasks, trajectories, scores, trials=int(config.get("trials", 1)))
    summary = {"world": config.get("world"), "policy": config.get("policy"), **summary,
               "finished": len(trajectories), "task_file_errors": list(task_file_errors or [])}  # fmt: skip
    try:
        tmp = out / f".{SUMMARY}.tmp"
        tmp.write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        tmp.replace(out / SUMMARY)
    except OSError as exc:
        err_console.print(f"could not write {out / SUMMARY}: {exc}", style="red", markup=False)
    report_path: Path | None = None
    if with_report:
        try:
            from ..report import write_report  # without matplotlib it still writes the tables, with a note

            report_path = write_report(out, summary, rows, config=config)
        except Exception as exc:  # the report is a view of the store: never lose the run over it
            err_console.print(f"could not write the report: {type(exc).__name__}: {exc}", style="red", markup=False)
    return summary, report_path


def _pct(value: Any) -> str:
    return "—" if value is None else f"{100 * float(value):.1f}%"


def print_run_summary(summary: dict[str, Any], out: Path, report: Path | None) -> None:
    """The rich table ``toolworld run`` and ``rescore`` end with."""
    from rich.table import Table

    trials = int(summary.get("trials", 1))
    table = Table(title=f"toolworld run · {summary.get('world')} · {summary.get('policy')}")
    columns = ["tasks×k", "done", "success", *(f"pass^{k}" for k in sorted({1, trials})), "infra", "reward",
               "tokens"]  # fmt: skip
    for col in columns:
        table.add_column(col, justify="right")
    hat = summary.get("pass_hat_k") or {}
    tokens = summary.get("tokens") or {}
    table.add_row(f"{summary.get('tasks', 0)} × {trials}", f"{summary.get('finished', 0)}/{summary.get('episodes', 0)}",
                  _pct(summary.get("success_rate")), *(_pct(hat.get(str(k))) for k in sorted({1, trials})),
                  str(summary.get("infra_errors", 0)),
                  "—" if summary.get("mean_reward") is None else f"{summary['mean_reward']:.3f}",
                  f"{int(tokens.get('prompt', 0)) + int(tokens.get('completion', 0)):,}")  # fmt: skip
    console.print(table)
    ends = {k: v for k, v in (summary.get("terminations") or {}).items() if v}
    if ends:
        console.print("endings: " + ", ".join(f"{k} {v}" for k, v in ends.items()), highlight=False)
    if summary.get("infra_errors"):
        console.print(f"[yellow]{summary['infra_errors']} trial(s) ended on infra errors: excluded from the scores; "
                      f"`toolworld run ... --out {out} --resume` re-runs them[/yellow]")  # fmt: skip
    if summary.get("task_file_errors"):
        console.print(f"[yellow]{len(summary['task_file_errors'])} task line(s) skipped (listed above)[/yellow]")
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
    from ..store.runstore import StoreError

    store = _open_or_fail(out, writer=not check)
    try:
        tasks = {t.id: t for t in store.tasks()}
        new, changed = _rescored(store, tasks)
    except StoreError as exc:
        store.close()
        fail(exc.kind, str(exc))
    if check:
        store.close()
        for task_id, trial in changed[:20]:
            console.print(f"differs: {task_id} trial {trial}", highlight=False, markup=False)
        console.print(f"{len(new)} trials re-scored, {len(changed)} differ from the stored scores", highlight=False)
        raise typer.Exit(1 if changed else 0)
    try:
        store.replace_scores(new)
        summary, report_path = finish_run(store, out)
    except StoreError as exc:
        fail(exc.kind, str(exc))
    finally:
        store.close()
    print_run_summary(summary, out, report_path)
    console.print(f"{len(new)} trials re-scored, {len(changed)} changed", highlight=False)


def _rescored(store: RunStore, tasks: dict[str, Any]) -> tuple[list[Any], list[tuple[str, int]]]:
    """New scores of every readable trial, and the (task, trial) pairs whose score changed."""
    from ..scoring import score_trajectory

    new, changed = [], []
    for traj, old, _facts in store.trials():
        score = score_trajectory(tasks[traj.task_id], traj)
        new.append(score)
        if old is None or old.model_dump(mode="json") != score.model_dump(mode="json"):
            changed.append((traj.task_id, traj.trial))
    return new, changed


def report(out: RunDir) -> None:
    """Write DIR/report.html (self-contained, works offline) from the stored run; also refreshes summary.json."""
    from ..store.runstore import StoreError

    store = _open_or_fail(out)
    try:
        _summary, path = finish_run(store, out)
    except StoreError as exc:
        fail(exc.kind, str(exc))
    finally:
        store.close()
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
) -> None:
    """Export a stored run for training or analysis.

    Example: toolworld export runs/gold --format sft --tokenizer ./Qwen3-8B
    """
    from ..store.export import DEFAULT_NAMES, EXPORT_FORMATS, ExportError, export_run
    from ..store.runstore import StoreError

    fmt = fmt.strip().lower()
    if fmt not in EXPORT_FORMATS:
        fail("invalid_option", f"--format must be one of {', '.join(EXPORT_FORMATS)}, not {fmt!r}")
    if tokenizer is not None and fmt != "sft":
        fail("invalid_option", f"--tokenizer applies to --format sft only, not {fmt}")
    store = _open_or_fail(out)
    target = output or out / DEFAULT_NAMES[fmt]
    try:
        n = export_run(store, fmt, target, include_failed=include_failed, tokenizer=tokenizer)
    except (ExportError, StoreError) as exc:
        fail(exc.kind, str(exc))
    except OSError as exc:
        fail("unwritable_output", f"cannot write {target}: {exc}")
    finally:
        store.close()
    console.print(f"wrote {n} {'conversations' if fmt in ('chat', 'sft') else 'trials'} to {target}",
                  highlight=False, markup=False)  # fmt: skip
