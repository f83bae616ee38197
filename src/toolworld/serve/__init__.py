"""Serving worlds to agents that live elsewhere: the MCP server (``toolworld serve WORLD``).

Importing this package needs nothing beyond toolworld itself; the ``mcp`` SDK and ``uvicorn`` (the ``serve``
extra, ``pip install 'toolworld[serve]'``) are imported when a server is built, so ``import toolworld`` never
pulls them in.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..core.errors import ToolworldError

if TYPE_CHECKING:
    from .mcp import EVALUATOR_TOOLS, build_server, http_app, serve_http, serve_stdio

__all__ = ["EVALUATOR_TOOLS", "ServeError", "build_server", "http_app", "serve_http", "serve_stdio"]


class ServeError(ToolworldError):
    """A server that cannot start as asked (the port is taken, a tool name clashes); the message says what to do."""

    default_kind = "serve_error"


def __getattr__(name: str) -> Any:
    # The server API lives in .mcp, which imports the SDK: resolve it only when someone asks for it.
    if name in {"EVALUATOR_TOOLS", "build_server", "http_app", "serve_http", "serve_stdio"}:
        from . import mcp

        return getattr(mcp, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
