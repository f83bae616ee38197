"""Extension by registration: a policy backend written as one file runs through ``make_policy`` and ``toolworld
run``, whether imported or found through an entry point; a broken plugin is named and skipped; an installed
scorer component changes no reward unless a scoring call asks for it; a sampler plugin draws tasks when named
and leaves the default mix byte-identical."""

from __future__ import annotations

import asyncio
import hashlib
import json
import sys
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from rollout_kit import make_task, retail
from toolworld.cli import app
from toolworld.core import registry as core_registry
from toolworld.core.registry import Registry, RegistryError
from toolworld.rollout.backends import POLICIES, GoldPolicy, make_policy, policy, spec_forms
from toolworld.rollout.loop import run_episode
from toolworld.scoring import COMPONENTS, SCORER_VERSION, score_trajectory
from toolworld.store import RunStore
from toolworld.tasks.generate import generate, parse_mix
from toolworld.tasks.model import write_jsonl
from toolworld.tasks.sampling import SAMPLERS, Drop, sampler

PLUGINS = Path(__file__).parent / "plugins"


@pytest.fixture
def plugin_path(monkeypatch):
    """The one-file plugins importable by name, each imported afresh (so that it registers again)."""
    monkeypatch.syspath_prepend(str(PLUGINS))
    for name in ("echo_policy", "politeness_scorer"):
        monkeypatch.delitem(sys.modules, name, raising=False)


def fake_entry_points(monkeypatch, *eps: EntryPoint) -> None:
    monkeypatch.setattr(core_registry, "entry_points", lambda group: [e for e in eps if e.group == group])


# -- the generic registry ----------------------------------------------------------------------------------------


def test_registry_basics():
    reg: Registry[int] = Registry("gadget", error=KeyError)
    reg.register("one", 1, colour="red")

    @reg.register("two")
    def two() -> int:
        return 2

    assert reg.names() == ["one", "two"] and reg.get("one") == 1 and reg.meta("one") == {"colour": "red"}
    assert reg.get("two") is two and "two" in reg and "three" not in reg and len(reg) == 2
    with pytest.raises(KeyError, match="unknown gadget 'three'; available gadgets: one, two"):
        reg.get("three")
    with pytest.raises(RegistryError, match="gadget 'one' is already registered") as info:
        reg.register("one", 11)
    assert info.value.kind == "duplicate_name"
    reg.register("one", 11, replace=True)
    assert reg.get("one") == 11 and reg.items() == [("one", 11), ("two", two)]


# -- a policy backend in one file ------------------------------------------------------------------------------------


def test_a_one_file_backend_registers_its_kind(plugin_path):
    with POLICIES.isolated():
        import echo_policy

        p = make_policy("echo:prefix=you said: ")
        assert isinstance(p, echo_policy.EchoPolicy) and p.prefix == "you said:" and p.name == "echo:prefix=you said:"
        assert make_policy("echo").name == "echo"
        assert any(line.startswith("echo[:prefix=TEXT]") and "repeats" in line for line in spec_forms())
        with pytest.raises(ValueError, match=r"unknown echo option\(s\) \['volume'\]; echo takes prefix") as info:
            make_policy("echo:volume=11")
        assert "Valid forms" in str(info.value) and "echo[:prefix=TEXT]" in str(info.value)
        with pytest.raises(RegistryError, match="policy kind 'echo' is already registered"):
            policy("echo")(echo_policy.make_echo)
    assert "echo" not in POLICIES  # gone with the block
    with pytest.raises(ValueError, match="unknown policy kind 'echo'"):
        make_policy("echo")


def test_a_one_file_backend_runs_through_the_cli(plugin_path, tmp_path):
    tasks = [make_task("cancel", 0), make_task("info", 0)]
    write_jsonl(tmp_path / "tasks.jsonl", tasks)
    out = tmp_path / "run"
    with POLICIES.isolated():
        import echo_policy  # noqa: F401

        res = CliRunner().invoke(app, ["run", "retail", "--tasks", str(tmp_path / "tasks.jsonl"), "--policy",
                                       "echo:prefix=ECHO ", "--out", str(out)], catch_exceptions=False)  # fmt: skip
    assert res.exit_code == 0, res.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["finished"] == 2 and summary["success_rate"] == 0.0 and summary["infra_errors"] == 0
    with RunStore.open(out) as store:
        trials = list(store.trials())
    assert {t.policy for t, _s, _f in trials} == {"echo:prefix=ECHO"}
    by_id = {t.id: t for t in tasks}
    for traj, score, _facts in trials:
        first_reply = next(m for m in traj.messages if m["role"] == "assistant")
        assert first_reply["content"] == "ECHO" + by_id[traj.task_id].instruction  # the plugin's own words
        assert not score.success and not traj.steps


def test_an_entry_point_backend_loads_on_first_use(plugin_path, monkeypatch):
    with POLICIES.isolated():
        fake_entry_points(monkeypatch,
                          EntryPoint("echo", "echo_policy", "toolworld.policies"),  # a module that registers
                          EntryPoint("parrot", "echo_policy:make_echo", "toolworld.policies"),  # a bare factory
                          EntryPoint("gold", "no_such_module_abc:gold", "toolworld.policies"))  # fmt: skip
        assert "echo_policy" not in sys.modules  # listed, not imported
        assert {"echo", "parrot"} <= set(POLICIES.names())
        assert "echo_policy" not in sys.modules
        assert make_policy("echo:prefix=>").name == "echo:prefix=>"
        assert POLICIES.entry("echo").source == "entry point echo = echo_policy"
        # a factory without the decorator: its kind takes no target, and it checks its own options
        assert make_policy("parrot:prefix=!").prefix == "!"
        assert any(line.startswith("parrot[,k=v...]") for line in spec_forms())
        assert isinstance(make_policy("gold"), GoldPolicy)  # a plugin cannot take a built-in's name
        listed = CliRunner().invoke(app, ["policies", "--json"], catch_exceptions=False)
        kinds = {k["kind"]: k for k in json.loads(listed.output)}
        assert kinds["echo"]["origin"] == "plugin echo_policy" and kinds["echo"]["options"] == ["prefix"]
        assert kinds["gold"]["origin"] == "toolworld.rollout.backends.gold" and kinds["hf"]["takes_target"] is True


def test_a_broken_backend_is_named_and_the_rest_still_work(monkeypatch):
    with POLICIES.isolated():
        fake_entry_points(monkeypatch, EntryPoint("bad", "no_such_module_abc", "toolworld.policies"))
        with pytest.warns(UserWarning, match=r"policy kind 'bad' failed to load: ModuleNotFoundError.*"
                          r"\(entry point bad = no_such_module_abc in group toolworld.policies\)"):  # fmt: skip
            forms = spec_forms()
        assert not any(line.startswith("bad") for line in forms) and any(line.startswith("gold") for line in forms)
        assert isinstance(make_policy("gold:drop=0.1"), GoldPolicy)
        with pytest.raises(ValueError, match="policy kind 'bad' failed to load: ModuleNotFoundError"):
            make_policy("bad")


# -- scorer components: opt-in ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def gold_run() -> tuple[Any, Any]:
    task = make_task("cancel")
    return task, asyncio.run(run_episode(retail(), task, GoldPolicy()))


def test_an_installed_scorer_changes_no_reward_unless_asked_for(plugin_path, monkeypatch, gold_run):
    task, traj = gold_run
    before = score_trajectory(task, traj)
    with COMPONENTS.isolated():
        fake_entry_points(monkeypatch, EntryPoint("politeness", "politeness_scorer", "toolworld.scorers"))
        assert "politeness" in COMPONENTS.names()
        assert score_trajectory(task, traj).model_dump_json() == before.model_dump_json()
        assert "politeness_scorer" not in sys.modules  # the default scorer did not even import it

        polite = score_trajectory(task, traj, extra=["politeness"])
        assert [c.name for c in polite.components] == ["state", "outputs", "identified", "confirmed", "politeness"]
        assert polite.success and polite.reward == 1.0 and polite.scorer_version == SCORER_VERSION + "+politeness"
        # the weights are rescaled over the components that apply: 0.5 of 1.1 for state
        assert polite.components[0].weight == round(0.5 / 1.1, 6)

        messages = [dict(m) for m in traj.messages]
        last = max(i for i, m in enumerate(messages) if m["role"] == "assistant")
        messages[last]["content"] += " Next time read your own receipt, stupid."
        rude = traj.model_copy(update={"messages": messages})
        assert score_trajectory(task, rude).success  # not judged unless named
        judged = score_trajectory(task, rude, extra=["politeness"])
        assert not judged.success and judged.reward == round(1 - judged.components[-1].weight, 6)
        assert "a rude reply" in judged.components[-1].reason
        with pytest.raises(ValueError, match=r"unknown scorer component 'charm'; available scorer components: .*state"):
            score_trajectory(task, traj, extra=["charm"])


def test_a_component_must_say_where_it_weighs():
    from toolworld.scoring import component

    with pytest.raises(ValueError, match="positive weight per task kind"):
        component("nothing", kinds={})
    with pytest.raises(ValueError, match="positive weight per task kind"):
        component("negative", kinds={"action": -1})


# -- task samplers -----------------------------------------------------------------------------------------------


def _digest(lines: list[str]) -> str:
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def test_a_sampler_plugin_draws_when_named_and_the_default_mix_is_unchanged():
    world = retail()
    default = _digest(generate(world, 12, seed=5).lines)
    with SAMPLERS.isolated():

        @sampler("cancel_only")
        def cancel_only(synth: Any, conv: Any, index: int) -> list[Any]:
            target = conv.attempt("cancel_pending_order", "action")
            if target is None:
                raise Drop("no_pending_order")
            return [target]

        assert "cancel_only" in SAMPLERS.names() and parse_mix("cancel_only=2,target=1") == {"cancel_only": 2,
                                                                                              "target": 1}  # fmt: skip
        assert _digest(generate(world, 12, seed=5).lines) == default
        tasks = generate(world, 4, seed=5, sampler="cancel_only").tasks
        assert len(tasks) == 4
        assert all(t.provenance.sampler == "cancel_only" and t.provenance.targets == ["cancel_pending_order"]
                   and t.kind == "action" for t in tasks)  # fmt: skip
        with pytest.raises(ValueError, match=r"unknown sampler 'nope'; choose from mixed, target, .*cancel_only"):
            parse_mix("nope")
    with pytest.raises(ValueError, match="unknown sampler 'cancel_only'"):
        parse_mix("cancel_only")
