"""The ``toolworld audit-template`` command: how token-exact a model's chat template lets rollouts be."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer


def register(app: typer.Typer) -> None:
    """Add this module's commands to the top-level app (kept import-light: heavy imports go inside commands)."""

    @app.command("audit-template")
    def audit_template_cmd(
        paths: Annotated[list[Path], typer.Argument(help="Tokenizer folder(s) with a chat template (tokenizer.json "
                                                         "+ tokenizer_config.json).", show_default=False)],
        as_json: Annotated[bool, typer.Option("--json", help="Print JSON for machines: one object for one folder, "
                                                             "a list for several.")] = False,
        turns: Annotated[int, typer.Option("--turns", min=2, max=200, help="Assistant turns in the synthetic "
                                                                           "conversation.")] = 20,
    ) -> None:
        """Audit chat templates for token-in-token-out rollouts: tool rendering, prefix stability, bridge breaks.

        Runs a synthetic tool conversation (unicode, emoji, JSON arguments) through the template with a perfect
        model and reports whether the token buffer stays a prefix of a full render. See docs/templates.md.
        """
        import logging

        from rich.table import Table

        from ..tokens.audit import audit_template, summary_row
        from ..tokens.tokenizers import TemplateError
        from .kit import console, err_console, fail

        logging.getLogger("toolworld.tito").setLevel(logging.ERROR)  # fallbacks are the audit's findings
        results = []
        for path in paths:
            try:
                if len(paths) > 1 and not as_json:
                    err_console.print(f"[dim]auditing {path} ...[/dim]")
                results.append(audit_template(path, turns=turns).to_dict())
            except TemplateError as exc:
                fail(exc.kind, str(exc), path=str(path))
        if as_json:
            print(json.dumps(results[0] if len(results) == 1 else results, indent=2, ensure_ascii=False))
            return
        table = Table(title="Chat templates for token-exact rollouts (a / b = without / with reasoning)")
        rows = [summary_row(r) for r in results]
        for col in rows[0]:
            table.add_column(col, overflow="fold")
        for row in rows:
            table.add_row(*row.values())
        console.print(table)
        for r in results:
            if r["notes"]:
                console.print(f"\n[bold]{r['name']}[/bold]")
                for note in r["notes"]:
                    console.print(f"  • {note}", highlight=False)
