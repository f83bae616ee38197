"""The ``toolworld`` command line: Rich tables for people, ``--json`` for machines.

Errors a user can fix (unknown world, bad JSON, a failing tool call) print one structured JSON object
``{"error": {"type", "message"}}`` and exit 1, so scripts can branch on ``error.type``.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Annotated

import typer
from rich.panel import Panel
from rich.syntax import Syntax
from rich.table import Table

from ..core.errors import ToolworldError
from ..world import Episode, list_worlds
from .kit import console, err_console, fail, world_or_fail

app = typer.Typer(
    name="toolworld",
    help="Build realistic worlds for tool-using agents, synthesize verifiable tasks, run and score agents.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON for machines instead of a table.")]
SeedOpt = Annotated[int, typer.Option("--seed", help="World seed: the same seed always gives the same data.")]


@app.command()
def worlds(as_json: JsonFlag = False) -> None:
    """List the installed worlds with their tools, tables and row counts at seed 0."""
    stats = [w.stats(0) for w in list_worlds()]
    if as_json:
        print(json.dumps([{k: v for k, v in s.items() if k != "rows_by_table"} for s in stats], indent=2))
        return
    table = Table(title="toolworld worlds (seed 0)")
    for col in ("world", "tools (read/write)", "tables", "rows", "description"):
        table.add_column(col, overflow="fold")
    for s in stats:
        table.add_row(s["name"], f"{s['tools']} ({s['read_tools']}/{s['write_tools']})", str(s["tables"]),
                      f"{s['rows']:,}", s["description"])  # fmt: skip
    console.print(table)


@app.command()
def tools(world: Annotated[str, typer.Argument(help="World name, e.g. retail.")], as_json: JsonFlag = False) -> None:
    """List a world's tools; --json prints them in OpenAI function-tool format."""
    w = world_or_fail(world)
    if as_json:
        print(json.dumps(w.openai_tools(), indent=2, ensure_ascii=False))
        return
    table = Table(title=f"{w.name}: {len(w.tools)} tools")
    for col in ("tool", "kind", "arguments", "takes", "yields", "description"):
        table.add_column(col, overflow="fold")
    for s in w.specs():
        required = set(s.parameters.get("required", []))
        args = ", ".join(p if p in required else f"{p}?" for p in s.parameters.get("properties", {}))
        table.add_row(s.name, "write" if s.mutates else "read", args, ", ".join(sorted(s.consumes)),
                      ", ".join(sorted(s.produces)), s.description.split("\n")[0])  # fmt: skip
    console.print(table)


@app.command()
def policy(world: Annotated[str, typer.Argument(help="World name, e.g. retail.")]) -> None:
    """Print the rules an agent must follow in a world (its policy.md)."""
    from rich.markdown import Markdown

    console.print(Markdown(world_or_fail(world).policy))


@app.command()
def call(
    world: Annotated[str, typer.Argument(help="World name, e.g. retail.")],
    tool: Annotated[str, typer.Argument(help="Tool name (see `toolworld tools WORLD`).")],
    args: Annotated[str, typer.Option("--args", help='Arguments as a JSON object, e.g. \'{"order_id": "#W1234567"}\'.')] = "{}",
    seed: SeedOpt = 0,
) -> None:
    """Call one tool on a fresh episode and print its result as JSON (exit 1 with a JSON error on failure)."""
    w = world_or_fail(world)
    try:
        arguments = json.loads(args)
    except json.JSONDecodeError as exc:
        fail("invalid_arguments", f"--args is not valid JSON ({exc.msg} at char {exc.pos}); pass a JSON object "
              "such as '{\"order_id\": \"#W1234567\"}'.")  # fmt: skip
    except (RecursionError, ValueError):  # nesting past the recursion limit, an integer over 4,300 digits
        fail("invalid_arguments", "--args is JSON that is nested too deeply or holds a number too long to read; pass "
             "a flat JSON object such as '{\"order_id\": \"#W1234567\"}'.")  # fmt: skip
    if not isinstance(arguments, dict):
        fail("invalid_arguments", f"--args must be a JSON object, got {type(arguments).__name__}.")
    with w.episode(seed) as ep:
        result = ep.call(tool, arguments)
        if not result.ok:
            assert result.error is not None
            print(json.dumps({"error": result.error.to_dict()}, ensure_ascii=False, indent=2))
            raise typer.Exit(1)
        print(json.dumps(result.output, ensure_ascii=False, indent=2))
        if result.mutates:
            err_console.print(f"[dim]changes: {ep.changes().summary()} (on a throwaway episode)[/dim]")


@app.command()
def tour(
    world: Annotated[str, typer.Argument(help="World name.")] = "retail",
    seed: SeedOpt = 0,
) -> None:
    """A scripted walk through a world: look-ups, a write, a refused write, a fork and the change-set."""
    w = world_or_fail(world)
    if w.tour is None:
        fail("unsupported", f"world {world!r} has no scripted tour; try `toolworld tools {world}`.")
    t0 = time.perf_counter()
    ep = w.episode(seed)
    console.print(Panel.fit(f"[bold]{w.name}[/bold] (seed {seed}): {w.description}\n\n"
                            f"{len(w.tools)} tools, {len(w.table_keys)} tables; episode ready in "
                            f"{(time.perf_counter() - t0) * 1000:.1f} ms", title="toolworld tour"))  # fmt: skip
    fork: Episode | None = None
    for step in w.tour(ep):
        if step.kind == "fork":
            fork = ep.fork()
            console.print(f"\n[bold cyan]{step.note}[/bold cyan]")
            continue
        console.print(f"\n[bold cyan]{step.note}[/bold cyan]")
        assert step.call is not None
        console.print(f"[bold]→ {step.call.name}[/bold]({json.dumps(step.call.arguments, ensure_ascii=False)})")
        start = time.perf_counter()
        result = ep.call(step.call.name, step.call.arguments)
        took = (time.perf_counter() - start) * 1e6
        text = result.content if result.ok else json.dumps({"error": result.error.to_dict()}, ensure_ascii=False)  # type: ignore[union-attr]
        pretty = json.dumps(json.loads(text), indent=2, ensure_ascii=False) if text[:1] in "[{" else text
        lines = pretty.splitlines()
        if len(lines) > 28:
            pretty = "\n".join([*lines[:28], f"... ({len(lines) - 28} more lines)"])
        style = "green" if result.ok else "red"
        console.print(Panel(Syntax(pretty, "json", word_wrap=True), border_style=style,
                            title=f"{'ok' if result.ok else result.error.type} · {took:.0f} µs"))  # type: ignore[union-attr]  # fmt: skip
    changes = ep.changes()
    table = Table(title="Change-set of the episode (what a verifier compares with the gold)")
    for col in ("table", "op", "key", "changed"):
        table.add_column(col, overflow="fold")
    for c in changes:
        detail = c.changed if c.op == "update" else (c.after if c.op == "insert" else c.before)
        table.add_row(c.table, c.op, json.dumps(list(c.key)), json.dumps(detail, ensure_ascii=False)[:160])
    console.print(table)
    if fork is not None:
        console.print(f"fork taken before the writes: {len(fork.changes())} changes, state hash "
                      f"{fork.state_hash()[:16]} (untouched); episode state hash {ep.state_hash()[:16]}")  # fmt: skip
        fork.close()
    ep.close()


def _register_command_groups() -> None:
    """Each command group is one module of this package; it adds its commands here."""
    from . import check as cli_check
    from . import models as cli_models
    from . import run as cli_run
    from . import serve as cli_serve
    from . import store as store_cli
    from . import tasks as tasks_cli
    from . import tokens as cli_tokens
    from . import train as cli_train

    for module in (tasks_cli, cli_run, store_cli, cli_tokens, cli_models, cli_serve, cli_train, cli_check):
        module.register(app)


_register_command_groups()


def main() -> None:
    """Console-script entry point: any toolworld error a command does not handle itself still ends as one
    structured JSON error (its ``kind`` as ``error.type``) and exit 1, never as a traceback."""
    try:
        app()
    except ToolworldError as exc:
        print(json.dumps({"error": {"type": exc.kind, "message": str(exc)}}, ensure_ascii=False))
        sys.exit(1)


if __name__ == "__main__":
    main()
