"""Tool errors: the structured failures an agent sees when a call cannot be carried out.

A tool error is the *agent's* error (bad arguments, a rule broken, an id that does not exist): the rollout
loop turns it into an observation for the model. Its ``type`` is a stable string that scorers and reports
aggregate on, so the set below only grows; the ``message`` tells the agent what to do instead.
"""

from __future__ import annotations

from typing import Any, Literal

from ..core.errors import ToolworldError

ErrorType = Literal[
    "unknown_tool",
    "malformed_call",
    "invalid_arguments",
    "not_found",
    "policy_violation",
    "conflict",
    "internal_error",
]

#: Every error type a tool call can end in, with what it means. ``internal_error`` is the only one that is
#: not the agent's fault: the tool itself crashed (a bug of the world), the call was rolled back, and the
#: rollout loop records it as an infra error rather than scoring it.
ERROR_TYPES: dict[str, str] = {
    "unknown_tool": "the tool name does not exist in this world",
    "malformed_call": "the model wrote a tool call that cannot be read (cut-off or invalid JSON, a broken tag, no name)",
    "invalid_arguments": "arguments are missing, unexpected or of the wrong type",
    "not_found": "an id or key given as an argument does not exist",
    "policy_violation": "the request breaks a rule of the world's policy",
    "conflict": "the request contradicts the current state (e.g. the value is already set)",
    "internal_error": "the tool crashed; the call was rolled back (a bug of the world, not of the agent)",
}


class ToolError(ToolworldError):
    """A failed tool call, raised inside tools and returned (not raised) by ``Episode.call``.

    Raise it from a tool with the type that fits and a message that says what the agent should do next,
    e.g. ``ToolError("policy_violation", "Order #W1 is delivered; only pending orders can be cancelled.
    Use return_delivered_order_items to return its items.")``. Its ``kind`` is its ``type``.
    """

    def __init__(self, type: ErrorType, message: str, **details: Any) -> None:
        if type not in ERROR_TYPES:
            raise ValueError(f"unknown tool error type {type!r}; use one of {sorted(ERROR_TYPES)}")
        super().__init__(message, kind=type)
        self.message = message
        self.details = details

    @property
    def type(self) -> str:
        """The stable error type scorers and reports aggregate on (the same value as ``kind``)."""
        return self.kind

    @property
    def is_infra(self) -> bool:
        """True when the failure is the world's, not the agent's (never score it as reward 0)."""
        return self.type == "internal_error"

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape used on the CLI and in observations: ``{"type", "message", ...details}``."""
        out: dict[str, Any] = {"type": self.type, "message": self.message}
        if self.details:
            out["details"] = self.details
        return out

    def __repr__(self) -> str:
        return f"ToolError({self.type!r}, {self.message!r})"


class WorldError(ToolworldError):
    """A problem with a world definition or its use (not a tool call): bad schema, unknown world, ..."""

    default_kind = "world_error"
