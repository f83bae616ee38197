"""The world registry: built-ins, third-party worlds through the ``toolworld.worlds`` entry points, and
broken plugins that must not take listings down."""

from __future__ import annotations

import sys
from importlib.metadata import EntryPoint, entry_points

import pytest

import sdkworld
from toolworld.core import registry as core_registry
from toolworld.world import WorldError, registry


def fake_entry_points(monkeypatch, fake: list[EntryPoint]) -> None:
    """Pretend the installed packages declare ``fake`` (and nothing else) for the duration of the test."""
    monkeypatch.setattr(core_registry, "entry_points", lambda group: [e for e in fake if e.group == group])


@pytest.fixture
def plugins(monkeypatch):
    """Pretend two extra packages declared worlds: one good, one whose import fails."""
    fake = [
        EntryPoint("library", "sdkworld:world", registry.ENTRY_POINT_GROUP),
        EntryPoint("broken", "no_such_module_xyz:world", registry.ENTRY_POINT_GROUP),
        EntryPoint("factory", "sdkworld:make_world", registry.ENTRY_POINT_GROUP),
    ]
    with registry.WORLDS.isolated():
        fake_entry_points(monkeypatch, fake)
        yield fake


def test_installed_package_declares_retail():
    names = {e.name for e in entry_points(group=registry.ENTRY_POINT_GROUP)}
    assert "retail" in names, "pyproject.toml must declare the built-in worlds as entry points"


def test_third_party_world_is_found_by_name(plugins):
    assert registry.get_world("library") is sdkworld.world
    assert registry.get_world("factory").name == "library"  # a zero-argument factory works too
    assert set(registry.available()) >= {"retail", "library", "broken", "factory"}
    assert registry.available()["library"] == "sdkworld:world"


def test_broken_plugin_is_skipped_with_a_warning(plugins):
    with pytest.warns(UserWarning, match="world 'broken' failed to load: ModuleNotFoundError.*no_such_module_xyz"):
        names = [w.name for w in registry.list_worlds()]
    assert "retail" in names and "library" in names
    # asked for by name, it is an error that says the same (and no second warning)
    with pytest.raises(WorldError, match="world 'broken' failed to load"):
        registry.get_world("broken")


def test_unknown_world_lists_the_available_ones(plugins):
    with pytest.raises(WorldError, match=r"unknown world 'atlantis'; available worlds: .*library.*retail"):
        registry.get_world("atlantis")


def test_an_entry_point_that_is_not_a_world(monkeypatch):
    with registry.WORLDS.isolated():
        fake_entry_points(monkeypatch, [EntryPoint("notaworld", "sdkworld:CLOCK", registry.ENTRY_POINT_GROUP)])
        with pytest.raises(WorldError, match="sdkworld:CLOCK is not a toolworld World"):
            registry.get_world("notaworld")
    monkeypatch.undo()
    assert "notaworld" not in registry.available()  # the fake plugin is gone with the block


# -- the generic registry under the world registry -----------------------------------------------------------------


def test_lazy_entries_import_on_first_use_only(tmp_path, monkeypatch):
    (tmp_path / "lazy_gadgets.py").write_text(
        "from toolworld_test_registry import GADGETS\n"
        "GADGETS.register('spring', 'boing', size=3)\n"  # a module that registers itself
        "BOLT = 'clank'\n")  # fmt: skip
    module = type(sys)("toolworld_test_registry")
    module.GADGETS = core_registry.Registry("gadget")  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "toolworld_test_registry", module)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "lazy_gadgets", raising=False)
    gadgets = module.GADGETS  # type: ignore[attr-defined]
    gadgets.register_lazy("spring", "lazy_gadgets")
    gadgets.register_lazy("bolt", "lazy_gadgets:BOLT")
    assert gadgets.names() == ["spring", "bolt"] and "lazy_gadgets" not in sys.modules
    assert gadgets.origin("bolt") == "lazy_gadgets:BOLT" and "lazy_gadgets" not in sys.modules
    assert gadgets.get("spring") == "boing" and gadgets.meta("spring") == {"size": 3}  # its own registration
    assert gadgets.get("bolt") == "clank"
    with pytest.raises(core_registry.RegistryError, match="gadget 'spring' is already registered"):
        gadgets.register("spring", "sproing")  # loaded now: a second registration is a conflict


def test_a_module_that_registers_nothing_is_reported():
    gadgets: core_registry.Registry[str] = core_registry.Registry("gadget")
    gadgets.register_lazy("nothing", "json")
    with pytest.raises(core_registry.RegistryError, match="gadget 'nothing' failed to load: TypeError: importing json "
                       "did not register gadget 'nothing'"):  # fmt: skip
        gadgets.get("nothing")
    with pytest.warns(UserWarning, match="gadget 'nothing' failed to load"):
        assert gadgets.items() == []
