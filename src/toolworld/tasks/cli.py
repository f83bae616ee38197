"""``toolworld tasks``: generate, verify and describe task sets."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add the ``tasks`` command group to the top-level app."""
