"""Find the world ``check_world`` is asked about: a ``World``, the name of an installed one, or a folder.

A folder is a world package outside toolworld (what ``toolworld new-world`` writes): its parent goes on
``sys.path`` and the folder is imported by its name, so that the world's ``synthesis="NAME.kit:kit"`` resolves
exactly as it will once the package is installed. The same target string is handed to the subprocesses of the
determinism check, which is why a loaded world keeps the ``spec`` it can be loaded again from.
"""

from __future__ import annotations

import importlib
import inspect
import sys
from dataclasses import dataclass
from pathlib import Path

from ..core.errors import ToolworldError
from ..world import World, WorldError
from ..world.registry import WORLDS


class CheckError(ToolworldError):
    """A world that cannot be found or loaded for checking."""

    default_kind = "unknown_world"


@dataclass(frozen=True, slots=True)
class LoadedWorld:
    """A world and how to load it again in another process (``spec``: a name, a folder or ``module:attr``;
    None when it cannot be found again, e.g. a world built inside a function)."""

    world: World
    spec: str | None

    @property
    def source_dir(self) -> Path | None:
        """The folder of the world's seed generator: where its policy, tools and tests live."""
        return source_dir(self.world)


def source_dir(world: World) -> Path | None:
    try:
        src = inspect.getsourcefile(world.seed_data)
    except TypeError:  # a builtin or C function has no source file
        return None
    return Path(src).resolve().parent if src else None


def load_world(target: World | str | Path) -> LoadedWorld:
    """Resolve ``target`` (see the module doc); raise :class:`CheckError` saying what exists when it is unknown."""
    if isinstance(target, World):
        return LoadedWorld(target, _spec_of(target))
    text = str(target)
    path = Path(text).expanduser()
    bare = not isinstance(target, Path) and "/" not in text and not text.startswith(".")
    if bare and text in WORLDS.names():  # an installed world wins over a folder of that name in the current dir
        return LoadedWorld(WORLDS.get(text), text)
    if path.is_dir():
        return LoadedWorld(_load_folder(path), str(path.resolve()))
    if isinstance(target, Path) or "/" in text or text.startswith("."):
        raise CheckError(f"{text!r} is not a folder; give the folder of a world package (with __init__.py) or the "
                         f"name of an installed world ({', '.join(WORLDS.names())})")  # fmt: skip
    if ":" in text:
        module, _, attr = text.partition(":")
        try:
            obj = getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError) as exc:
            raise CheckError(f"cannot import {text!r} ({type(exc).__name__}: {exc}); give 'module:attribute' of a "
                             "World that is importable from here") from exc  # fmt: skip
        return LoadedWorld(_as_world(obj, text), text)
    try:
        return LoadedWorld(WORLDS.get(text), text)
    except WorldError as exc:
        raise CheckError(f"{exc}; or give the folder of a world package") from exc


def _as_world(obj: object, where: str) -> World:
    world = obj() if callable(obj) and not isinstance(obj, World) else obj
    if not isinstance(world, World):
        raise CheckError(f"{where} is {type(world).__name__}, not a toolworld World; export `world = World(...)`",
                         kind="not_a_world")  # fmt: skip
    return world


def _load_folder(path: Path) -> World:
    folder = path.resolve()
    name = folder.name
    if not (folder / "__init__.py").is_file():
        raise CheckError(f"{folder} has no __init__.py; a world folder is a Python package exporting `world`",
                         kind="not_a_world")  # fmt: skip
    if not name.isidentifier():
        raise CheckError(f"folder name {name!r} is not a Python identifier, so the package cannot be imported; "
                         "rename the folder", kind="not_a_world")  # fmt: skip
    loaded = sys.modules.get(name)
    if loaded is not None:
        where = Path(getattr(loaded, "__file__", "") or "").resolve().parent
        if where != folder:
            raise CheckError(f"a module named {name!r} is already imported from {where}; rename the world folder "
                             "so that its package name is unique", kind="name_clash")  # fmt: skip
    parent = str(folder.parent)
    if parent not in sys.path:
        sys.path.insert(0, parent)
    try:
        module = importlib.import_module(name)
    except Exception as exc:
        raise CheckError(f"importing the world package {name!r} from {folder.parent} failed: "
                         f"{type(exc).__name__}: {exc}", kind="not_a_world") from exc  # fmt: skip
    if not hasattr(module, "world"):
        raise CheckError(f"package {name!r} exports no `world`; add `world = World(...)` to its __init__.py",
                         kind="not_a_world")  # fmt: skip
    return _as_world(module.world, name)


def _spec_of(world: World) -> str | None:
    """How another process can load this very world: its registered name, else a module attribute holding it."""
    if world.name in WORLDS.names():
        try:
            if WORLDS.get(world.name) is world:
                return world.name
        except WorldError:
            pass
    for module_name, module in list(sys.modules.items()):
        if module is None or module_name == "__main__":
            continue
        for attr in ("world", world.name):
            # vars(), not getattr: a module-level __getattr__ (lazy imports) must not run for a lookup
            if vars(module).get(attr) is world:
                return f"{module_name}:{attr}"
    return None
