"""The registry of worlds: built-ins plus anything installed under the ``toolworld.worlds`` entry points.

A package adds a world by declaring ``[project.entry-points."toolworld.worlds"] myworld = "pkg.mod:world"``
where ``world`` is a :class:`World` (or a zero-argument callable returning one). A broken third-party
world is reported and skipped so it cannot take the whole CLI down.
"""

from __future__ import annotations

from typing import Any

from ..core.registry import Registry
from .errors import WorldError
from .world import World

ENTRY_POINT_GROUP = "toolworld.worlds"
#: Built-in worlds by name -> "module:attribute"; also declared as entry points, listed here so that a
#: source checkout on ``PYTHONPATH`` (no installed metadata) still finds them.
BUILTIN: dict[str, str] = {"retail": "toolworld.worlds.retail:world", "crm": "toolworld.worlds.crm:world",
                           "helpdesk": "toolworld.worlds.helpdesk:world",
                           "projects": "toolworld.worlds.projects:world",
                           "hr": "toolworld.worlds.hr:world"}


def _as_world(obj: Any, name: str) -> World:
    world = obj() if callable(obj) and not isinstance(obj, World) else obj
    if not isinstance(world, World):
        raise WorldError(f"{WORLDS.origin(name)} is not a toolworld World")
    return world


#: Every world by name; worlds are imported (and built) on first use.
WORLDS: Registry[World] = Registry("world", group=ENTRY_POINT_GROUP, adapt=_as_world, error=WorldError)
for _name, _target in BUILTIN.items():
    WORLDS.register_lazy(_name, _target)


def available() -> dict[str, str]:
    """World name -> where it comes from (import target or entry point), without importing any world."""
    return {name: WORLDS.origin(name) for name in WORLDS.names()}


def get_world(name: str) -> World:
    """Load a world by name; a :class:`WorldError` lists the known names when it does not exist."""
    return WORLDS.get(name)


def list_worlds() -> list[World]:
    """Every world that loads; broken ones are skipped with a warning naming the entry point."""
    return [world for _, world in sorted(WORLDS.items(), key=lambda item: item[0])]
