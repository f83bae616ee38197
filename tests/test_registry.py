"""The world registry: built-ins, third-party worlds through the ``toolworld.worlds`` entry points, and
broken plugins that must not take listings down."""

from __future__ import annotations

from importlib.metadata import EntryPoint, entry_points

import pytest

import sdkworld
from toolworld.world import WorldError, registry


@pytest.fixture
def plugins(monkeypatch):
    """Pretend two extra packages declared worlds: one good, one whose import fails."""
    fake = [
        EntryPoint("library", "sdkworld:world", registry.ENTRY_POINT_GROUP),
        EntryPoint("broken", "no_such_module_xyz:world", registry.ENTRY_POINT_GROUP),
        EntryPoint("factory", "sdkworld:make_world", registry.ENTRY_POINT_GROUP),
    ]
    monkeypatch.setattr(registry, "entry_points", lambda group: [e for e in fake if e.group == group])
    monkeypatch.setattr(registry, "_loaded", {})
    return fake


def test_installed_package_declares_retail():
    names = {e.name for e in entry_points(group=registry.ENTRY_POINT_GROUP)}
    assert "retail" in names, "pyproject.toml must declare the built-in worlds as entry points"


def test_third_party_world_is_found_by_name(plugins):
    assert registry.get_world("library") is sdkworld.world
    assert registry.get_world("factory").name == "library"  # a zero-argument factory works too
    assert set(registry.available()) >= {"retail", "library", "broken", "factory"}


def test_broken_plugin_is_skipped_with_a_warning(plugins):
    with pytest.warns(UserWarning, match="world 'broken' failed to load: ModuleNotFoundError"):
        names = [w.name for w in registry.list_worlds()]
    assert "retail" in names and "library" in names


def test_unknown_world_lists_the_available_ones(plugins):
    with pytest.raises(WorldError, match=r"unknown world 'atlantis'; available worlds: .*library.*retail"):
        registry.get_world("atlantis")


def test_an_entry_point_that_is_not_a_world(monkeypatch):
    fake = [EntryPoint("notaworld", "sdkworld:CLOCK", registry.ENTRY_POINT_GROUP)]
    monkeypatch.setattr(registry, "entry_points", lambda group: fake)
    monkeypatch.setattr(registry, "_loaded", {})
    with pytest.raises(WorldError, match="is not a toolworld World"):
        registry.get_world("notaworld")
