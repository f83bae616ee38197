"""The ``toolworld serve`` command: a world as an MCP server, over stdio or streamable HTTP.

Everything a user can get wrong (an unknown world, a task file or id that is not there, a port in use, a missing
``serve`` extra) is reported as one structured JSON error before anything is served, so a client configuration
that launches the command sees why it exited.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from .kit import NoiseFail, NoiseLatencyMs, NoiseSeed, NoiseTruncate, err_console, fail, world_or_fail

if TYPE_CHECKING:
    from ..tasks.model import Task


def register(app: typer.Typer) -> None:
    """Add this module's commands to the top-level app (the MCP SDK is imported only when the command runs)."""
    app.command("serve")(serve)


def serve(
    world: Annotated[str, typer.Argument(help="World name, e.g. retail.")],
    seed: Annotated[int | None, typer.Option("--seed", help="World seed of every session's episode (default 0; "
                                             "with --task, the task's seed).")] = None,
    task: Annotated[Path | None, typer.Option("--task", help="Task file (JSONL): every session starts the episode "
                                              "of the task given by --task-id.")] = None,
    task_id: Annotated[str | None, typer.Option("--task-id", help="Id of the task in --task (may be left out when "
                                                "the file holds one task of the world).")] = None,
    http: Annotated[int | None, typer.Option("--http", metavar="PORT", min=0, max=65535,
                                             help="Serve streamable HTTP on PORT (0: a free port) instead of "
                                             "stdio; the URL is printed on stderr.")] = None,
    host: Annotated[str, typer.Option("--host", help="Address to listen on with --http.")] = "127.0.0.1",
    token: Annotated[str | None, typer.Option("--token", envvar="TOOLWORLD_TOKEN", show_envvar=True,
                                              help="With --http, every request must send 'Authorization: Bearer "
                                              "TOKEN'.")] = None,
    evaluator_tools: Annotated[bool, typer.Option("--evaluator-tools", help="Add toolworld_changes, "
                                                  "toolworld_state_hash and (with --task) toolworld_score.")] = False,
    noise_fail: NoiseFail = 0.0,
    noise_latency_ms: NoiseLatencyMs = 0.0,
    noise_truncate: NoiseTruncate = 0.0,
    noise_seed: NoiseSeed = 0,
) -> None:
    """Serve a world's tools over MCP (stdio by default), one fresh episode per client session.

    The world's policy is the server's instructions; a failing tool call is an MCP tool error with the message a
    model would see. The --noise-* options inject the same seeded faults as `toolworld run` (each session's draws
    follow its calls in order). Example for an MCP client's configuration: command `toolworld`, args `serve retail`.
    """
    from ..core.errors import ToolworldError
    from ..env.noise import NoiseConfig

    w = world_or_fail(world)
    try:
        noise = NoiseConfig(tool_failure_p=noise_fail, latency_ms=noise_latency_ms, truncate_p=noise_truncate,
                            seed=noise_seed)  # fmt: skip
    except ValueError as exc:
        fail("invalid_option", str(exc))
    chosen = _task_or_fail(task, task_id, w.name) if task is not None or task_id is not None else None
    if chosen is not None and seed is not None and seed != chosen.seed:
        fail("conflicting_options", f"--seed {seed} conflicts with task {chosen.id}, whose episode starts at seed "
             f"{chosen.seed}; leave --seed out when serving a task.")  # fmt: skip
    try:
        from ..serve import mcp as server
    except ImportError as exc:
        if (exc.name or "").startswith("toolworld"):  # our own import bug, not a missing extra: show it
            raise
        fail("missing_dependency", f"`toolworld serve` needs the {exc.name or 'mcp'!r} package, which is not "
             "installed; pip install 'toolworld[serve]'.")  # fmt: skip
    where = f"task {chosen.id}" if chosen is not None else f"seed {seed or 0}"
    try:
        if http is None:
            err_console.print(f"toolworld: serving {w.name} ({where}) over MCP on stdio", highlight=False,
                              soft_wrap=True)  # fmt: skip
            server.run(server.serve_stdio(w, seed=seed or 0, task=chosen, evaluator_tools=evaluator_tools,
                                          noise=noise))  # fmt: skip
            return
        if not token and host not in server.LOOPBACK:
            err_console.print(f"[yellow]toolworld: {host} is reachable from other machines and no --token is set: "
                              "anyone who can connect can drive episodes[/yellow]", highlight=False)  # fmt: skip
        guard = "bearer token required" if token else "no token"

        def announce(url: str) -> None:
            err_console.print(f"toolworld: serving {w.name} ({where}) over MCP at {url} ({guard})", highlight=False,
                              soft_wrap=True)  # fmt: skip

        server.run(server.serve_http(w, seed=seed or 0, task=chosen, evaluator_tools=evaluator_tools, host=host,
                                     port=http, token=token or None, noise=noise, announce=announce))  # fmt: skip
    except ToolworldError as exc:
        fail(exc.kind, str(exc))


def _task_or_fail(path: Path | None, task_id: str | None, world: str) -> Task:
    """The task ``task_id`` of ``path``, or a structured error naming what is there."""
    from ..tasks.model import TaskSet

    if path is None:
        fail("missing_option", "--task-id needs --task FILE, the task file that holds it.")
    try:
        tasks = TaskSet.load(path)
    except FileNotFoundError:
        fail("file_not_found", f"task file {path} does not exist; create one with `toolworld tasks generate {world} "
             f"-n 10 -o {path}`.")  # fmt: skip
    except (OSError, UnicodeDecodeError) as exc:
        fail("unreadable_file", f"cannot read task file {path}: {exc}")
    mine = [t for t in tasks if t.world == world]
    if task_id is None:
        if len(mine) == 1:
            return mine[0]
        fail("missing_option", f"{path} holds {len(mine)} tasks of world {world!r}; pick one with --task-id "
             f"(e.g. {', '.join(t.id for t in mine[:3]) or 'none'}).")  # fmt: skip
    for t in tasks:
        if t.id == task_id:
            if t.world != world:
                fail("wrong_world", f"task {task_id} is for world {t.world!r}, not {world!r}; serve "
                     f"`toolworld serve {t.world} --task {path} --task-id {task_id}`.")  # fmt: skip
            return t
    bad = f" ({len(tasks.errors)} unreadable line(s), first: {tasks.errors[0]})" if tasks.errors else ""
    fail("unknown_task", f"no task {task_id!r} in {path}{bad}; its tasks of {world!r} include "
         f"{', '.join(t.id for t in mine[:3]) or 'none'}.")  # fmt: skip
