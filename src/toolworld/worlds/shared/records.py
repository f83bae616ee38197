"""What write tools need when they add a row: the next id of a prefixed series, and free text that is not blank.

Both guard the database against what a schema's types cannot: an id one past the largest on file never
collides with a seeded or freshly written row, and text that is only spaces would be stored as '' although the
caller sent something (``Field(min_length=1)`` counts the spaces, so it has to be checked after stripping).
"""

from __future__ import annotations

from toolworld.world import Ctx, ToolError


def next_id(ctx: Ctx, table: str, column: str, prefix: str) -> str:
    """The next id of a prefixed numeric series such as ``LR-1041`` (one above the largest on file, so it never
    collides). ``table`` and ``column`` come from the world's own code, never from a caller."""
    top = ctx.value(f"SELECT max(CAST(substr({column}, {len(prefix) + 1}) AS INTEGER)) FROM {table}")
    return f"{prefix}{int(top or 0) + 1}"


def required_text(value: str, name: str, what: str) -> str:
    """``value`` without surrounding spaces; blank (empty or only whitespace) is refused as ``invalid_arguments``
    naming the argument and saying what to send (``what``, e.g. "the customer's message in their words")."""
    text = value.strip()
    if not text:
        raise ToolError("invalid_arguments", f"{name} is blank; send {what}.")
    return text
