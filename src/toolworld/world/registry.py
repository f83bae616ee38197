"""The registry of worlds: built-ins plus anything installed under the ``toolworld.worlds`` entry points.

A package adds a world by declaring ``[project.entry-points."toolworld.worlds"] myworld = "pkg.mod:world"``
where ``world`` is a :class:`World` (or a zero-argument callable returning one). A broken third-party
world is reported and skipped so it cannot take the whole CLI down.
"""

from __future__ import annotations

import importlib
import warnings
from importlib.metadata import entry_points

from .errors import WorldError
from .world import World

ENTRY_POINT_GROUP = "toolworld.worlds"
#: Built-in worlds by name -> "module:attribute"; also declared as entry points, listed here so that a
#: source checkout on ``PYTHONPATH`` (no installed metadata) still finds them.
BUILTIN: dict[str, str] = {"retail": "toolworld.worlds.retail:world"}

_loaded: dict[str, World] = {}


def _load(target: str) -> World:
    module, _, attr = target.partition(":")
    obj = getattr(importlib.import_module(module), attr)
    world = obj() if callable(obj) and not isinstance(obj, World) else obj
    if not isinstance(world, World):
        raise WorldError(f"{target} is not a toolworld World")
    return world


def available() -> dict[str, str]:
    """World name -> import target, without importing any world."""
    targets = dict(BUILTIN)
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        targets.setdefault(ep.name, ep.value)
    return targets


def get_world(name: str) -> World:
    """Load a world by name; a :class:`WorldError` lists the known names when it does not exist."""
    if name in _loaded:
        return _loaded[name]
    targets = available()
    if name not in targets:
        raise WorldError(f"unknown world {name!r}; available worlds: {', '.join(sorted(targets)) or 'none'}")
    world = _load(targets[name])
    _loaded[name] = world
    return world


def list_worlds() -> list[World]:
    """Every world that loads; broken ones are skipped with a warning naming the entry point."""
    out = []
    for name in sorted(available()):
        try:
            out.append(get_world(name))
        except Exception as exc:  # a third-party world must not break listings
            warnings.warn(f"world {name!r} failed to load: {type(exc).__name__}: {exc}", stacklevel=2)
    return out
