"""``toolworld check-world`` (hold a world to the bar) and ``toolworld new-world`` (scaffold one that meets it)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from .kit import console, err_console, fail_with

#: The built-in checks in the order they run (the registry in toolworld.check is the source; this is for --help,
#: which must not import the checks to render).
_CHECKS = "determinism, fork_isolation, read_only, reachable, rules_tested, guidance, tasks"


def _names(text: str | None) -> list[str] | None:
    return None if text is None else [n.strip() for n in text.split(",") if n.strip()]


def _clip(text: str, limit: int = 240) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def check_world_cmd(
    world: Annotated[str, typer.Argument(help="An installed world's name, or the folder of a world package.")],
    tasks: Annotated[int, typer.Option("--tasks", min=0, help="Tasks to generate at --seed, verify, and run with the "
                                       "gold and literal policies (0 skips the tasks check).")] = 100,
    seed: Annotated[int, typer.Option("--seed", help="World seed the checks use (determinism also builds seed+1).")] = 0,
    only: Annotated[str | None, typer.Option("--only", help=f"Run only these checks, comma-separated: {_CHECKS} (or a "
                                             "plugin's).")] = None,
    skip: Annotated[str | None, typer.Option("--skip", help="Skip these checks, e.g. 'determinism,tasks' for a "
                                             "quick look while editing.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON instead of a table.")] = False,
) -> None:
    """Check that a world meets the bar: deterministic data and tasks (two fresh processes), isolated forks,
    read tools that do not write, writes reachable from what a user knows, a test per policy rule, described
    tools and actionable errors, and tasks that verify and that the gold policy passes (literal pass^1 shown as a
    difficulty probe). Exit 0 when no check fails (a skipped check says why), 1 otherwise; a bad world, path or
    check name prints a JSON error.

    Example: toolworld check-world retail --tasks 100; toolworld check-world ./my_world --skip tasks --json
    """
    from rich.status import Status

    from ..check import CheckError, CheckResult, check_world

    style = {"passed": "green", "failed": "red", "skipped": "yellow"}
    spinner: list[Status] = []

    def progress(name: str, result: CheckResult | None) -> None:
        # stderr only, and not with --json: stdout stays one JSON document (or the table) for scripts
        if as_json:
            return
        if result is None:
            spinner.append(err_console.status(f"checking {name} ..."))
            spinner[-1].start()
            return
        while spinner:
            spinner.pop().stop()
        err_console.print(f"[{style[result.status]}]{result.status:>7}[/] {name} ({result.seconds:.1f} s)")

    try:
        report = check_world(world, tasks=tasks, seed=seed, only=_names(only), skip=_names(skip) or (),
                             on_progress=progress)  # fmt: skip
    except CheckError as exc:
        fail_with(exc)
    finally:
        while spinner:
            spinner.pop().stop()
    if as_json:
        print(json.dumps(report.to_dict(), indent=2, ensure_ascii=False))
    else:
        table = Table(title=f"check-world {report.world} (seed {seed}, {tasks} tasks)")
        for col in ("check", "status", "seconds", "detail"):
            table.add_column(col, overflow="fold")
        for r in report.results:
            # the table is for a glance: --json has the warnings in full
            detail = r.detail + "".join(f"\n[yellow]warning:[/yellow] {_clip(w)}" for w in r.warnings)
            table.add_row(r.name, f"[{style[r.status]}]{r.status}[/]", f"{r.seconds:.2f}", detail)
        console.print(table)
        verdict = "[green]meets the bar[/green]" if report.ok else f"[red]{len(report.failures())} checks failed[/red]"
        console.print(f"{report.world}: {verdict} in {report.seconds:.1f} s")
    raise typer.Exit(0 if report.ok else 1)


def new_world_cmd(
    name: Annotated[str, typer.Argument(help="The new world's name, also its package "
                                                  "name: a lower-case Python identifier, e.g. gym_desk.")],
    directory: Annotated[Path, typer.Option("--dir", help="Folder to create the world package in.")] = Path("."),
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing folder of that name.")] = False,
) -> None:
    """Scaffold a small, working world package (a gym membership desk: schema, seed data, 11 tools enforcing 7
    numbered rules, a task kit, a tour, one test per rule) to grow into your own. It passes `toolworld check-world
    DIR/NAME` and its own tests as written; its README says what to change first. A bad name or an existing
    folder prints a JSON error.

    Example: toolworld new-world gym_desk --dir worlds/ && toolworld check-world worlds/gym_desk
    """
    from ..scaffold import ScaffoldError, new_world

    try:
        folder = new_world(name, directory, force=force)
    except ScaffoldError as exc:
        fail_with(exc)
    console.print(f"created world [bold]{name}[/bold] in {folder}")
    console.print(f"next: read {folder / 'README.md'}, then run `toolworld check-world {folder}`")


def register(app: typer.Typer) -> None:
    app.command("check-world")(check_world_cmd)
    app.command("new-world")(new_world_cmd)
