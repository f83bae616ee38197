"""Shared pieces of the command line: consoles and the one structured-error exit every command uses.

Errors a user can fix print one JSON object ``{"error": {"type", "message", ...}}`` on stdout and exit 1, so
scripts can branch on ``error.type`` whichever command failed.
"""

from __future__ import annotations

import json
import re
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


def fail_with(exc: ToolworldError, ctx: typer.Context | None = None) -> NoReturn:
    """Print a toolworld error as the structured error of its ``kind`` (extra fields included) and exit 1. Given
    the command's context, the configuration fields the message names are written as its options
    (:func:`as_options`)."""
    data = exc.to_dict()
    message = str(data.pop("message"))
    fail(str(data.pop("type")), as_options(message, ctx) if ctx is not None else message, **data)


#: Configuration fields whose command-line option is named otherwise than the field.
FIELD_OPTIONS = {"kl_coef": "kl"}
#: A field's name: snake_case, a whole word, and not part of a path or file name (``runs/eval_tasks.jsonl``).
_FIELD = re.compile(r"(?<![\w./-])[a-z][a-z0-9]*(?:_[a-z0-9]+)+(?![\w/-]|\.\w)")
#: A one-word field at the head of a config check's message ("balance must be ...", "lr must be > 0, got 0").
_HEAD = re.compile(r"^([a-z]+)(?= must be )")


def as_options(message: str, ctx: typer.Context) -> str:
    """``message`` as the user of the command ``ctx`` runs should read it. The configs behind the commands
    (``GRPOConfig``, ``SFTConfig``) check their fields by name (``eval_trials must be 1 at eval_temperature 0``),
    which is right from Python but names nothing a command-line user typed; here each field that is one of the
    command's options becomes that option (``--eval-trials must be 1 at --eval-temperature 0``). Words that are
    no option of the command, and paths, are left as they are."""
    options: dict[str, str] = {}
    for param in ctx.command.params:
        flags = [flag for flag in getattr(param, "opts", ()) if flag.startswith("--")]
        if param.name and flags:
            options[param.name] = flags[0]
    options.update({field: options[name] for field, name in FIELD_OPTIONS.items() if name in options})

    def option(match: re.Match[str]) -> str:
        return options.get(match.group(0), match.group(0))

    return _HEAD.sub(option, _FIELD.sub(option, message), count=1)


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
