"""The ``toolworld audit-template`` command(s)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add this module's commands to the top-level app (kept import-light: heavy imports go inside commands)."""
