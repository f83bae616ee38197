"""Shared pieces of the command line: consoles and the one structured-error exit every command uses.

Errors a user can fix print one JSON object ``{"error": {"type", "message", ...}}`` on stdout and exit 1, so
scripts can branch on ``error.type`` whichever command failed.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console

from ..core.errors import ToolworldError
from ..world import World, WorldError, get_world

console = Console()
err_console = Console(stderr=True)


def fail(type_: str, message: str, **extra: Any) -> NoReturn:
    """Print a structured error and exit 1."""
    print(json.dumps({"error": {"type": type_, "message": message, **extra}}, ensure_ascii=False))
    raise typer.Exit(1)


def fail_with(exc: ToolworldError) -> NoReturn:
    """Print a toolworld error as the structured error of its ``kind`` (extra fields included) and exit 1."""
    data = exc.to_dict()
    fail(str(data.pop("type")), str(data.pop("message")), **data)


def world_or_fail(name: str) -> World:
    """The named world, or a structured ``unknown_world`` error listing what is installed."""
    try:
        return get_world(name)
    except WorldError as exc:
        fail("unknown_world", str(exc))


#: The injected-noise options, shared by every command that runs episodes (``run``, ``serve``).
NoiseFail = Annotated[float, typer.Option("--noise-fail", min=0.0, max=1.0, help="Chance a tool call fails transiently.")]
NoiseLatencyMs = Annotated[float, typer.Option("--noise-latency-ms", min=0.0, help="Mean latency added to each tool call.")]
NoiseTruncate = Annotated[float, typer.Option("--noise-truncate", min=0.0, max=1.0,
                                              help="Chance a tool result is truncated.")]
NoiseSeed = Annotated[int, typer.Option("--noise-seed", help="Seed of the injected noise.")]
