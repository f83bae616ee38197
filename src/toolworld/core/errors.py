"""The base of every toolworld error: a ``kind`` that scripts branch on, and a message that says what to do.

The command line turns any ``ToolworldError`` into ``{"error": {"type": kind, "message": ...}}`` and exit 1, so a
new error class needs no handling of its own anywhere: subclass, pick a default ``kind``, raise.
"""

from __future__ import annotations

from typing import Any


class ToolworldError(Exception):
    """An error a caller can act on. ``kind`` is a short snake_case tag (``unknown_world``, ``run_locked``)."""

    #: The kind used when the raiser gives none; subclasses set their own.
    default_kind = "error"

    def __init__(self, message: str = "", *, kind: str | None = None) -> None:
        super().__init__(message)
        self.kind = kind or self.default_kind

    def to_dict(self) -> dict[str, Any]:
        """The structured form the command line prints: ``{"type": kind, "message": ...}``."""
        return {"type": self.kind, "message": str(self)}

    def __reduce__(self) -> tuple[Any, ...]:
        # Errors cross process boundaries (task generation in worker processes). The default pickling calls
        # ``cls(*args)``, which breaks for subclasses whose constructor takes ``(kind, message)``; rebuilding
        # from the instance's attributes works for every subclass.
        return (_rebuild, (type(self), self.args, self.__dict__))


def _rebuild(cls: type[ToolworldError], args: tuple[Any, ...], state: dict[str, Any]) -> ToolworldError:
    error = cls.__new__(cls)
    error.args = args
    error.__dict__.update(state)
    return error


class InfraError(ToolworldError):
    """A turn could not be produced for reasons that are not the agent's fault (a model server down, a timeout, a
    crashed user simulator): retried, recorded, never scored as reward 0.

    ``retryable`` tells the loop whether trying again can help (a 503 can; a missing model file cannot).
    """

    default_kind = "server_error"

    def __init__(self, message: str, *, retryable: bool = True, kind: str = "server_error") -> None:
        super().__init__(message, kind=kind)
        self.retryable = retryable

    def to_dict(self) -> dict[str, Any]:
        """The shape stored in trajectories (``kind``, not ``type``: stored runs are read back with these keys)."""
        return {"kind": self.kind, "message": str(self), "retryable": self.retryable}
