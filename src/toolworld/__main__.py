"""``python -m toolworld`` is the same as the ``toolworld`` command."""

from .cli import main

main()
