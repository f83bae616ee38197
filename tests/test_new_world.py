"""``toolworld new-world``: the scaffold is a small real world that meets the bar untouched, whose own tests
pass, and whose name is validated with structured errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from rollout_kit import load_benchmark
from toolworld.check import check_world, load_world
from toolworld.cli import app
from toolworld.scaffold import ScaffoldError, new_world

runner = CliRunner()


@pytest.fixture(scope="module")
def scaffold(tmp_path_factory):  # type: ignore[no-untyped-def]
    return new_world("gym_scaffold", tmp_path_factory.mktemp("worlds"))


def test_the_scaffold_has_the_fixed_layout_and_meets_the_bar(scaffold):
    for name in ("__init__.py", "schema.sql", "data.py", "tools.py", "policy.md", "kit.py", "tour.py", "README.md",
                 "pyproject.toml", "tests/test_policy.py"):  # fmt: skip
        assert (scaffold / name).is_file(), name
    assert not list(scaffold.rglob("*.tmpl")) and "__WORLD__" not in (scaffold / "__init__.py").read_text()
    report = check_world(scaffold, tasks=20)
    assert report.ok and all(r.passed for r in report.results), {r.name: r.detail for r in report.results}
    world = load_world(scaffold).world
    writes = [t for t in world.tools.values() if t.mutates]
    assert world.name == "gym_scaffold" and len(world.tools) >= 8 and "calculate" in world.tools and len(writes) >= 3
    assert len(world.table_keys) >= 4 and world.synthesis == "gym_scaffold.kit:kit"
    assert 'gym_scaffold = "gym_scaffold:world"' in (scaffold / "pyproject.toml").read_text()


def test_the_scaffolds_own_tests_pass(scaffold):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"], cwd=scaffold,
                         env=env, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert "12 passed" in run.stdout


@pytest.mark.parametrize(("name", "kind"), [
    ("Gym", "invalid_name"), ("1gym", "invalid_name"), ("class", "invalid_name"), ("gym-desk", "invalid_name"),
    ("retail", "world_exists"), ("json", "name_taken"),
])  # fmt: skip
def test_bad_names_are_refused_with_a_structured_error(tmp_path, name, kind):
    with pytest.raises(ScaffoldError) as exc:
        new_world(name, tmp_path)
    assert exc.value.kind == kind
    assert not any(tmp_path.iterdir())


def test_an_existing_folder_needs_force(tmp_path):
    (tmp_path / "gym_twice").mkdir()
    (tmp_path / "gym_twice" / "notes.txt").write_text("mine")
    result = runner.invoke(app, ["new-world", "gym_twice", "--dir", str(tmp_path)])
    assert result.exit_code == 1 and json.loads(result.stdout)["error"]["type"] == "folder_exists"
    assert (tmp_path / "gym_twice" / "notes.txt").exists()
    result = runner.invoke(app, ["new-world", "gym_twice", "--dir", str(tmp_path), "--force"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "gym_twice" / "kit.py").is_file() and not (tmp_path / "gym_twice" / "notes.txt").exists()


def test_check_world_cli_takes_the_folder(scaffold):
    result = runner.invoke(app, ["check-world", str(scaffold), "--tasks", "10", "--skip", "determinism,tasks", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["world"] == "gym_scaffold" and "determinism" not in [c["name"] for c in data["checks"]]
    nowhere = runner.invoke(app, ["check-world", str(scaffold / "missing")])
    assert nowhere.exit_code == 1 and json.loads(nowhere.stdout)["error"]["type"] == "unknown_world"


def test_the_episode_benchmark_takes_its_calls_from_the_tour(scaffold, monkeypatch, capsys):
    bench = load_benchmark("episode")
    world = load_world(scaffold).world
    with world.episode(0) as ep:
        figures = bench.tour_calls(world, ep, 3)
    assert figures["read_call"] == "find_member_by_email" and figures["write_call"] == "book_class"
    assert figures["tour_writes"] == 1 and figures["changes_rows_after_tour_writes"] == 1
    assert all(figures[k] > 0 for k in ("read_call_us", "write_call_us", "state_hash_after_tour_writes_ms"))
    monkeypatch.setattr(sys, "argv", ["episode.py", "--world", "no_such_world", "--repeat", "1"])
    with pytest.raises(SystemExit) as exc:
        bench.main()
    assert exc.value.code == 2 and "available worlds: " in capsys.readouterr().err
