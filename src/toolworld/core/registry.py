"""Named extension points: a ``Registry`` maps names to items (worlds, policy factories, scorer components,
task samplers), filled by built-ins, by decorators in third-party modules, and by installed packages through
an entry-point group.

Entry points are read once, on the first lookup, and each is imported only when its name is asked for (or when
everything is listed), so a command that needs one world does not import every plugin installed. An entry
point's target may be the item itself (``myworld = "pkg.mod:world"``) or a module whose import registers its
items with the decorator (``echo = "pkg.echo_policy"``); either way the name it is listed under is the name it
is known by. A plugin that fails to import, or that does not provide what it promised, is reported once with
a warning naming the entry point and skipped by listings; asking for it by name raises an error that says the
same. Built-ins win over plugins of the same name: installing a package must not silently replace behaviour
people rely on.
"""

from __future__ import annotations

import contextlib
import importlib
import threading
import types
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint, entry_points
from typing import Any, Generic, TypeVar

from .errors import ToolworldError

T = TypeVar("T")

__all__ = ["Entry", "Registry", "RegistryError"]


class RegistryError(ToolworldError, LookupError):
    """An unknown name, a name registered twice, or a plugin that failed to load."""

    default_kind = "unknown_name"


@dataclass(slots=True)
class Entry(Generic[T]):
    """One registration: the item (None until a lazy target is imported), its metadata and where it came from."""

    name: str
    item: T | None
    meta: dict[str, Any] = field(default_factory=dict)
    #: ``"builtin"``, ``"decorator"`` or ``"entry point NAME = VALUE"``: said in errors and warnings.
    source: str = "decorator"
    #: ``"module:attribute"`` (or a module) to import for a lazy entry.
    target: str | None = None
    #: The entry point a plugin was declared by.
    entry_point: EntryPoint | None = None

    @property
    def loaded(self) -> bool:
        return self.item is not None


class Registry(Generic[T]):
    """Items of one kind by name.

    Args:
        what: the noun for messages ("world", "policy", "scorer component"); ``plural`` when not ``what + "s"``.
        group: the entry-point group third-party packages declare items under (None: no plugins).
        adapt: turns what an entry point or lazy target loaded into an item, raising ``TypeError`` or
            ``ValueError`` when it is not one (a world factory is called; anything else is refused). Objects
            registered with :meth:`register` are taken as they are.
        error: the exception type raised for an unknown name or a broken plugin (called with one message);
            each domain keeps its own (``WorldError``, ``ValueError`` for ``--policy`` specs).
    """

    def __init__(self, what: str, *, plural: str | None = None, group: str | None = None,
                 adapt: Callable[[Any, str], T] | None = None,
                 error: Callable[[str], Exception] = RegistryError) -> None:  # fmt: skip
        self.what = what
        self.plural = plural or what + "s"
        self.group = group
        self._adapt = adapt
        self._error = error
        self._entries: dict[str, Entry[T]] = {}
        self._discovered = group is None
        self._broken: dict[str, str] = {}  # name -> why, for entries that failed to load
        self._warned: set[str] = set()  # broken names a listing has warned about (once each)
        # Lazy loading can be reached from several threads (an async run's executor): one import at a time.
        self._lock = threading.RLock()
        self._loading: str | None = None  # the lazy entry being imported (its own registration is not a duplicate)
        self._version = 0

    # -- registering ----------------------------------------------------------------------------------------

    def register(self, name: str, item: T | None = None, *, replace: bool = False, **meta: Any) -> Any:
        """Register ``item`` under ``name``; without ``item``, a decorator that registers what it decorates.

        A name already taken is refused (``RegistryError``) unless ``replace=True``: two plugins claiming one
        name is a conflict to resolve, not something to settle by import order. ``meta`` is kept with the item
        (``entry(name).meta``) for listings, help texts and validation.
        """
        if item is not None:
            self._add(Entry(name, item, dict(meta)), replace)
            return item

        def decorate(obj: T) -> T:
            self._add(Entry(name, obj, dict(meta)), replace)
            return obj

        return decorate

    def register_lazy(self, name: str, target: str, *, replace: bool = False, **meta: Any) -> None:
        """Register ``name`` as ``"module:attribute"`` (or ``"module"``, whose import registers ``name``),
        imported on first use: built-ins whose import is heavy stay unimported until asked for."""
        self._add(Entry(name, None, dict(meta), source="builtin", target=target), replace)

    def unregister(self, name: str) -> None:
        """Remove ``name`` (no error when absent)."""
        with self._lock:
            self._entries.pop(name, None)
            self._broken.pop(name, None)
            self._version += 1

    def _add(self, entry: Entry[T], replace: bool) -> None:
        with self._lock:
            old = self._entries.get(entry.name)
            if old is not None and not replace and not self._is_own_lazy_load(old, entry):
                raise RegistryError(f"{self.what} {entry.name!r} is already registered ({old.source}); pick "
                                    "another name, or pass replace=True to replace it on purpose",
                                    kind="duplicate_name")  # fmt: skip
            if old is not None and not old.loaded and old.entry_point is not None and entry.entry_point is None:
                # a plugin module registering the name its entry point promised: still that plugin
                entry.source, entry.entry_point = old.source, old.entry_point
            self._entries[entry.name] = entry
            self._broken.pop(entry.name, None)
            self._version += 1

    def _is_own_lazy_load(self, old: Entry[T], new: Entry[T]) -> bool:
        """Filling a placeholder is not a duplicate: a lazy entry whose import registers the very name it stands
        for, or a plugin module registering a name its package declared (whichever entry point imported it)."""
        return not old.loaded and new.loaded and (self._loading == old.name or old.entry_point is not None)

    # -- looking up -----------------------------------------------------------------------------------------

    @property
    def version(self) -> int:
        """A number that changes whenever an entry is added, loaded or removed: callers that derive tables from
        the registry on a hot path (the scorer's weights) keep them until it moves."""
        return self._version

    def __contains__(self, name: object) -> bool:
        self._discover()
        return isinstance(name, str) and name in self._entries

    def __len__(self) -> int:
        self._discover()
        return len(self._entries)

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def names(self) -> list[str]:
        """Every registered name in registration order (built-ins first), plugins included, none imported."""
        self._discover()
        return list(self._entries)

    def entry(self, name: str) -> Entry[T]:
        """The loaded entry for ``name`` (item and metadata); raises the registry's error when unknown or
        broken, listing the names that exist."""
        self._discover()
        with self._lock:
            entry = self._entries.get(name)
            if entry is None:
                known = ", ".join(sorted(self._entries)) or "none"
                raise self._error(f"unknown {self.what} {name!r}; available {self.plural}: {known}")
            if not entry.loaded:
                self._load(entry)
            return self._entries[name]

    def get(self, name: str) -> T:
        """The item registered as ``name`` (see :meth:`entry`)."""
        item = self.entry(name).item
        assert item is not None
        return item

    def meta(self, name: str) -> dict[str, Any]:
        """The metadata ``name`` was registered with (loading it if it is lazy)."""
        return self.entry(name).meta

    def origin(self, name: str) -> str:
        """Where ``name`` comes from, without importing it: its ``module:attribute`` target, its entry point's
        value, or how it was registered."""
        self._discover()
        entry = self._entries.get(name)
        if entry is None:
            raise self._error(f"unknown {self.what} {name!r}")
        if entry.target is not None:
            return entry.target
        return entry.entry_point.value if entry.entry_point is not None else entry.source

    def items(self) -> list[tuple[str, T]]:
        """Every item that loads, in registration order; a broken plugin is skipped with a warning (once) that
        names its entry point."""
        out = []
        for name in self.names():
            try:
                entry = self.entry(name)
            except Exception:  # one broken plugin must not take the listing down: say so (once) and go on
                why = self._broken.get(name)
                if why is not None and name not in self._warned:
                    self._warned.add(name)
                    warnings.warn(why, stacklevel=2)
                continue
            assert entry.item is not None
            out.append((name, entry.item))
        return out

    def entries(self) -> list[Entry[T]]:
        """Like :meth:`items`, with each item's metadata."""
        return [self._entries[name] for name, _ in self.items()]

    # -- plugins --------------------------------------------------------------------------------------------

    def _discover(self) -> None:
        if self._discovered:
            return
        with self._lock:
            if self._discovered:
                return
            self._discovered = True
            try:
                found = list(entry_points(group=self.group))
            except Exception as exc:  # broken installed metadata: built-ins still work
                warnings.warn(f"cannot read the {self.group!r} entry points: {type(exc).__name__}: {exc}",
                              stacklevel=3)  # fmt: skip
                return
            for ep in found:
                if ep.name in self._entries:  # built-ins and explicit registrations win
                    continue
                self._entries[ep.name] = Entry(ep.name, None, {}, source=f"entry point {ep.name} = {ep.value}",
                                               entry_point=ep)  # fmt: skip
                self._version += 1

    def _load(self, entry: Entry[T]) -> None:
        """Import a lazy entry; on failure remember why and raise the registry's error (listings warn)."""
        name = entry.name
        if name in self._broken:
            raise self._error(self._broken[name])
        previous, self._loading = self._loading, name  # a plugin's import may look up another plugin
        try:
            obj = entry.entry_point.load() if entry.entry_point is not None else _import(entry.target or "")
            current = self._entries.get(name)
            if current is not None and current.loaded:  # the import registered it with the decorator
                return
            item = self._adapt(obj, name) if self._adapt is not None else obj
            if item is None or isinstance(item, types.ModuleType):
                raise TypeError(f"importing {entry.target or entry.entry_point.value} did not register "  # type: ignore[union-attr]
                                f"{self.what} {name!r}")  # fmt: skip
            self._entries[name] = Entry(name, item, entry.meta, source=entry.source, target=entry.target,
                                        entry_point=entry.entry_point)  # fmt: skip
            self._version += 1
        except Exception as exc:
            why = f"{self.what} {name!r} failed to load: {type(exc).__name__}: {exc}"
            if entry.entry_point is not None:  # say which installed package to blame
                why += f" (entry point {entry.entry_point.name} = {entry.entry_point.value} in group {self.group})"
            self._broken[name] = why
            raise self._error(why) from exc
        finally:
            self._loading = previous

    @contextlib.contextmanager
    def isolated(self) -> Iterator[Registry[T]]:
        """A block whose registrations are undone on exit: inside, entry points are read again on the next lookup
        (so that a package installed meanwhile, or a faked entry point, is seen); on exit the registry is as it
        was before. For tests, and for tools that load a plugin for one job."""
        with self._lock:
            saved = (dict(self._entries), dict(self._broken), set(self._warned), self._discovered)
            # Forget plugins found so far, so that lookups inside see the entry points as they are now.
            self._entries = {k: e for k, e in self._entries.items() if e.entry_point is None}
            self._discovered = self.group is None
            self._version += 1
        try:
            yield self
        finally:
            with self._lock:
                self._entries, self._broken, self._warned, self._discovered = saved
                self._version += 1


def _import(target: str) -> Any:
    module, _, attr = target.partition(":")
    obj = importlib.import_module(module)
    return getattr(obj, attr) if attr else obj

