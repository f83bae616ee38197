"""``toolworld tasks``: generate, verify, describe and export task sets."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from .kit import console, err_console, fail, world_or_fail

tasks_app = typer.Typer(
    help="Synthesize tasks whose correct end state is known (executed gold actions), verify them by replay, "
    "and describe task sets.",
    no_args_is_help=True,
)

FileArg = Annotated[Path, typer.Argument(help="A task file (JSONL, one task a line).")]


def _progress() -> Progress:
    return Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[extra]}"),
                    TimeElapsedColumn(), TimeRemainingColumn(), console=err_console, transient=False)  # fmt: skip


@tasks_app.command()
def generate(
    world: Annotated[str, typer.Argument(help="World name, e.g. retail.")],
    n: Annotated[int, typer.Option("-n", "--n", min=1, help="Number of distinct, verified tasks to write.")] = 100,
    seed: Annotated[int, typer.Option("--seed", help="World seed and sampling seed: same seed, same file.")] = 0,
    out: Annotated[Path, typer.Option("-o", "--out", help="Output JSONL file (written atomically).")] = Path("tasks.jsonl"),
    sampler: Annotated[str, typer.Option("--sampler", help="mixed (default), one of target, greedy, walk, compose, "
                                         "refusal, info (or a sampler an installed package registers), or weights such as "
                                         "'target=3,refusal=1'.")] = "mixed",
    workers: Annotated[int, typer.Option("--workers", min=1, help="Processes; the output does not depend on it.")] = 1,
    parquet: Annotated[Path | None, typer.Option("--parquet", help="Also write a Parquet export here.")] = None,
    phrasing: Annotated[str, typer.Option("--phrasing", help="template (default): requests as the world's templates "
                                          "say them; llm:SPEC: then let a model (any --policy SPEC, e.g. "
                                          "llm:openai:MODEL@URL) reword each one, keeping a rewrite only if it keeps "
                                          "every fact the task needs.")] = "template",
) -> None:
    """Generate N tasks: walk the tool graph to a target, execute the gold on a fresh episode, phrase the request.

    Every task is replayed once more before it is written; duplicates (same request, same end state) are dropped.
    With --phrasing llm:SPEC a model rewords the requests; a model that fails or drops a fact leaves the
    template text, so the task set is never lost to a model server.
    """
    from ..tasks.generate import generate as run_generate
    from ..tasks.generate import parse_mix

    w = world_or_fail(world)
    try:
        mix = parse_mix(sampler)
    except ValueError as exc:
        fail("invalid_option", str(exc))
    if out.is_dir():
        fail("invalid_option", f"--out {out} is a directory; give a file name such as {out / 'tasks.jsonl'}")
    rewriter = None
    if phrasing != "template":
        if not phrasing.startswith("llm:") or not phrasing[4:].strip():
            fail("invalid_option", f"--phrasing {phrasing!r}: use template or llm:SPEC (SPEC as for --policy, "
                 "e.g. llm:openai:MODEL@URL)")  # fmt: skip
        from ..rollout.backends import make_policy

        try:  # before generating: a bad SPEC should not cost a generation run
            rewriter = make_policy(phrasing[4:].strip())
        except ValueError as exc:
            fail("invalid_option", f"--phrasing: {exc}")
    if out.exists():
        err_console.print(f"[yellow]overwriting {out}[/yellow]")
    start = time.perf_counter()
    with _progress() as progress:
        bar = progress.add_task(f"generating {world} tasks", total=n, extra="")

        def tick(done: int, draws: int) -> None:
            progress.update(bar, completed=done, extra=f"{draws} draws")

        try:
            report = run_generate(w, n, seed=seed, sampler=mix, workers=workers, on_progress=tick)
        except ValueError as exc:
            fail("generation_failed", str(exc))
    lines, tasks = report.lines, None
    if rewriter is not None:
        from ..tasks.phrasing import rephrase

        with _progress() as progress:
            bar = progress.add_task(f"rewording with {rewriter.name}", total=len(report), extra="")

            def reworded(done: int, s) -> None:  # type: ignore[no-untyped-def]
                progress.update(bar, completed=done, extra=f"kept {s.kept}, rejected {s.rejected}, failed {s.failed}")

            tasks, rstats = rephrase(report.tasks, rewriter, on_progress=reworded)
        lines = [t.to_json() for t in tasks]
        err_console.print(f"reworded by {rewriter.name}: kept {rstats.kept}, rejected {rstats.rejected} (a fact "
                          f"missing), failed {rstats.failed} (model errors), skipped {rstats.skipped} (no facts "
                          "recorded); the others keep their template text")  # fmt: skip
        for error in rstats.errors:
            err_console.print(f"[yellow]model error: {error}[/yellow]")
    from ..tasks.model import write_jsonl

    out.parent.mkdir(parents=True, exist_ok=True)
    write_jsonl(out, lines)
    took = time.perf_counter() - start
    if parquet is not None:
        from ..tasks.model import export_parquet

        try:
            export_parquet(tasks if tasks is not None else report.tasks, parquet)
        except RuntimeError as exc:
            fail("missing_dependency", str(exc))
    drops = ", ".join(f"{k} {v}" for k, v in report.drops.most_common()) or "none"
    err_console.print(f"{len(report)} tasks from {report.draws} draws in {took:.1f} s "
                      f"({len(report) / max(took, 1e-9):.0f}/s); dropped: {drops}")  # fmt: skip
    print(f"wrote {len(report)} tasks to {out}")
    if len(report) < n:
        fail("too_few_tasks", f"only {len(report)} of {n} tasks could be generated in {report.draws} draws; "
             "try another --seed or sampler, or check the world's task kit")  # fmt: skip


def _load(path: Path):  # type: ignore[no-untyped-def]
    from ..tasks.model import TaskSet

    if not path.exists():
        fail("file_not_found", f"no such task file: {path}")
    if path.is_dir():
        fail("invalid_file", f"{path} is a directory, not a task file")
    try:
        ts = TaskSet.load(path)
    except UnicodeDecodeError as exc:
        fail("invalid_file", f"{path} is not UTF-8 text ({exc.reason} at byte {exc.start})")
    for err in ts.errors:
        err_console.print(f"[red]{path}:{err.line}:[/red] {err.message}")
    return ts


@tasks_app.command()
def verify(file: FileArg) -> None:
    """Replay every task's gold actions on a fresh episode and compare results and end state.

    Prints each failure with its task id, line and first differing step; the last line is
    `N verified, M failed` (unreadable lines count as failed) and the exit code is 1 when M > 0.
    """
    from ..tasks.verify import verify_tasks

    ts = _load(file)
    with _progress() as progress:
        bar = progress.add_task("verifying", total=len(ts), extra="")
        report = verify_tasks(zip(ts.lines, ts.tasks, strict=True),
                              on_progress=lambda k: progress.update(bar, completed=k))  # fmt: skip
    for f in report.failures:
        step = f"step {f.step}" if f.step is not None else "end state"
        print(f"FAILED {f.task_id} (line {f.line}, {step}): {f.message}")
    failed = len(report.failures) + len(ts.errors)
    print(f"{report.verified} verified, {failed} failed")
    if failed:
        raise typer.Exit(1)


@tasks_app.command()
def stats(file: FileArg, as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False) -> None:
    """Coverage, difficulty and quality of a task set.

    Targets, kinds, refusal share and difficulty histograms; then what makes tasks worth learning from:
    incoherent requests, gold reads that serve nothing, writes without the reads a careful agent makes first,
    reasoning demands, near-duplicate instructions and how many users carry the set.
    """
    from ..tasks.stats import task_stats

    ts = _load(file)
    # The replay behind the quality figures takes seconds per thousand tasks: small sets need no bar.
    if len(ts) >= 500:
        with _progress() as progress:
            bar = progress.add_task("analysing", total=len(ts), extra="")
            data = task_stats(ts.tasks, on_progress=lambda stage, done, total: progress.update(
                bar, description=stage, completed=done, total=total))  # fmt: skip
    else:
        data = task_stats(ts.tasks)
    data["unreadable_lines"] = len(ts.errors)
    if as_json:
        print(json.dumps(data, indent=2))
        return
    console.print(f"[bold]{file}[/bold]: {data['tasks']} tasks, kinds {data['kinds']}, "
                  f"refusals {data['refusal_share']:.1%}, unreadable lines {len(ts.errors)}")  # fmt: skip
    for title, key in (("target tool", "targets"), ("sampler", "samplers"), ("path length", "path_length"),
                       ("writes", "writes"), ("level", "level"), ("refusal rule", "refusal_rules"),
                       ("distractors (10 = 10+)", "distractors"), ("demand", ("demands", "by_demand")),
                       ("incoherent, by rule", ("incoherent", "by_rule")),
                       ("missing check before a write", ("missing_checks", "by_check"))):  # fmt: skip
        counts = data[key[0]][key[1]] if isinstance(key, tuple) else data[key]
        if not counts:
            continue
        table = Table(title=title, show_header=False, title_justify="left")
        total = max(sum(counts.values()), 1)
        for k, v in counts.items():
            table.add_row(str(k), str(v), "█" * max(1, round(30 * v / total)))
        console.print(table)
    n = max(data["tasks"], 1)
    quality = Table(title="quality", show_header=False, title_justify="left")
    for label, value in (
        ("incoherent tasks", f"{data['incoherent']['count']} ({data['incoherent']['count'] / n:.1%})"),
        ("tasks with purposeless reads", f"{data['purposeless_reads']['tasks']} "
         f"({data['purposeless_reads']['reads']} reads)"),
        ("tasks with a missing check", str(data["missing_checks"]["tasks"])),
        ("tasks with a reasoning demand", f"{data['demands']['share_any']:.1%}"),
        ("templates in use", str(data["templates_in_use"])),
        ("tasks with alternatives", str(data["alternatives"])),
        ("near-duplicate pairs", f"{data['near_duplicates']['pairs']} ({data['near_duplicates']['share']:.1%})"),
        ("users", f"{data['users']['distinct']} (at most {data['users']['max_tasks_per_user']} tasks each)"),
    ):  # fmt: skip
        quality.add_row(label, value)
    console.print(quality)
    for name, reason in data["skipped_worlds"].items():
        console.print(f"[yellow]world {name} not installed, its tasks have no quality figures: {reason}[/yellow]")
    for err in data["analysis_errors"]:
        console.print(f"[yellow]could not analyse {err['task']}: {err['error']}[/yellow]")
    if data["write_tools_never_targeted"]:
        console.print(f"[yellow]write tools never a target: {', '.join(data['write_tools_never_targeted'])}[/yellow]")


@tasks_app.command()
def export(
    file: FileArg,
    out: Annotated[Path, typer.Option("-o", "--out", help="Output .parquet file.")],
) -> None:
    """Export a task file to Parquet (needs the `data` extra: pip install 'toolworld\\[data]')."""
    from ..tasks.model import export_parquet

    ts = _load(file)
    try:
        rows = export_parquet(ts.tasks, out)
    except RuntimeError as exc:
        fail("missing_dependency", str(exc))
    print(f"wrote {rows} tasks to {out}")


def register(app: typer.Typer) -> None:
    """Add the ``tasks`` command group to the top-level app."""
    app.add_typer(tasks_app, name="tasks")
