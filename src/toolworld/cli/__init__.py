"""The ``toolworld`` command line, thin: each command parses its options, calls the library, prints the result.

``app`` is the Typer application; ``main`` is the console-script entry point.
"""

from .app import app, main

__all__ = ["app", "main"]
