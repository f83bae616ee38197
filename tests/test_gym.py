"""The Gymnasium env: made by id for every world, a gold episode earns 1.0 through step(), a do-nothing agent
less, limits truncate, seeded resets repeat, Gymnasium's own checker passes, bad input is refused clearly,
infra failures are truncations (never a score), and it runs from inside a running event loop."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import warnings
from collections.abc import Iterator
from typing import Any

import pytest

gymnasium = pytest.importorskip("gymnasium")

from gymnasium.utils.env_checker import check_env  # noqa: E402

from rollout_kit import make_task, tool_call_ids_answered  # noqa: E402
from toolworld.core import InfraError  # noqa: E402
from toolworld.env import EnvError, Limits, LLMUser  # noqa: E402
from toolworld.integrations.gym import (  # noqa: E402
    AssistantActionSpace,
    ToolWorldEnv,
    encode_messages,
    env_id,
    register_envs,
)
from toolworld.rollout.backends import ScriptedPolicy, confirmation_request, gold_answer  # noqa: E402
from toolworld.tokens.dialects import tool_call_text  # noqa: E402
from toolworld.world import ToolCall, list_worlds  # noqa: E402

KINDS = ("cancel", "address", "refusal", "info")


@pytest.fixture(scope="module")
def tasks(world):
    return {kind: make_task(kind, world=world) for kind in KINDS}


@pytest.fixture
def make(tasks):
    """``gymnasium.make`` of the retail env over the four tasks; every env made is closed afterwards."""
    made: list[Any] = []

    def _make(**kwargs: Any) -> Any:
        env = gymnasium.make("toolworld/retail-v0", tasks=list(tasks.values()), **kwargs)
        made.append(env)
        return env

    yield _make
    for env in made:
        env.close()


def gold_turns(task: Any, world: Any, form: str) -> Iterator[Any]:
    """A careful agent's turns for ``task``, written from its gold actions: identify and look up, say what a
    write will do and ask before making it (the scripted user says yes), then state the outcome. ``form`` is
    ``dict`` (OpenAI assistant messages) or ``text`` (Hermes tool-call markup, as a model writes it)."""
    consent = {name for name, t in world.tools.items() if t.mutates and getattr(t, "confirm", True)}
    for i, action in enumerate(task.gold_actions):
        call = ToolCall(action.name, action.arguments, f"call_{i}")
        if action.name in consent:
            yield confirmation_request(call)
        if form == "dict":
            yield {"role": "assistant", "content": "", "tool_calls": [{
                "id": call.id, "type": "function",
                "function": {"name": action.name, "arguments": json.dumps(action.arguments)}}]}  # fmt: skip
        else:
            yield tool_call_text([call])
    yield gold_answer(task)


def play(env: Any, turns: Iterator[Any]) -> list[tuple[str, float, bool, bool, dict[str, Any]]]:
    out = []
    for action in turns:
        out.append(env.step(action))
        if out[-1][2] or out[-1][3]:
            break
    return out


# -- registration ---------------------------------------------------------------------------------------


def test_every_installed_world_is_registered_and_makes_its_env():
    worlds = list_worlds()
    assert worlds, "no world installed"
    for w in worlds:
        assert env_id(w.name) in gymnasium.registry
        env = gymnasium.make(env_id(w.name))
        try:
            assert isinstance(env.unwrapped, ToolWorldEnv)
            assert env.unwrapped.world.name == w.name
            assert env.spec.id == f"toolworld/{w.name}-v0"
        finally:
            env.close()
    # registering again changes nothing and warns about nothing (no "Overriding environment")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert register_envs() == [env_id(w.name) for w in worlds]


def test_a_world_name_that_cannot_be_an_id_is_skipped_with_a_warning():
    with pytest.warns(UserWarning, match="no Gymnasium id"):
        assert register_envs(["two words"]) == []
    assert "toolworld/two words-v0" not in gymnasium.registry


def test_make_with_the_module_prefix_form(tasks):
    env = gymnasium.make("toolworld.integrations.gym:toolworld/retail-v0", tasks=[tasks["info"]])
    try:
        assert env.unwrapped.tasks == [tasks["info"]]
    finally:
        env.close()


# -- episodes ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("form", ["dict", "text"])
@pytest.mark.parametrize("kind", KINDS)
def test_a_gold_episode_through_step_ends_terminated_with_reward_one(make, world, tasks, kind, form):
    env = make()
    task = tasks[kind]
    obs, info = env.reset(options={"task": task.id})
    assert info["task_id"] == task.id and info["trial"] == 0
    assert env.observation_space.contains(obs)
    opening = json.loads(obs)
    assert [m["role"] for m in opening] == ["system", "user"]
    assert opening[0]["content"] == world.policy and opening[1]["content"] == task.instruction
    assert {t["function"]["name"] for t in info["tools"]} == set(world.tools)

    results = play(env, gold_turns(task, world, form))
    *middle, (obs, reward, terminated, truncated, info) = results
    assert terminated and not truncated
    assert reward == 1.0 and info["success"] is True and info["score"]["reward"] == 1.0
    assert info["termination"] == "answered" and info["infra_error"] is False
    assert all(info["components"].values())
    assert all(r == 0.0 and not te and not tr for _, r, te, tr, _ in middle)
    for o, *_ in results:
        assert env.observation_space.contains(o)
    # the observations, in order, are the whole conversation but for the agent's own turns
    observed = opening + [m for step in results for m in json.loads(step[0])]
    assert observed == [m for m in info["messages"] if m["role"] != "assistant"]
    assert tool_call_ids_answered(info["messages"])
    assert env.unwrapped.trajectory().changes == task.expected_changes


def test_a_do_nothing_agent_gets_less_than_one(make, tasks):
    env = make()
    for task in tasks.values():
        env.reset(options={"task": task})
        obs, reward, terminated, truncated, info = env.step("Thanks for reaching out.")
        assert terminated and not truncated and info["termination"] == "answered"
        assert obs == "[]"  # the user ended the conversation: nothing new to observe
        assert reward < 1.0 and info["success"] is False
        assert not all(info["components"].values())


def test_max_turns_truncates(make, tasks):
    env = make(max_turns=2)
    task = tasks["cancel"]
    env.reset(options={"task": task})
    look = {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {
        "name": "get_order_details", "arguments": {"order_id": task.user.known["order_ids"][0]}}}]}  # fmt: skip
    obs, reward, terminated, truncated, info = env.step(look)
    assert not terminated and not truncated and reward == 0.0 and info["termination"] is None
    assert [m["role"] for m in json.loads(obs)] == ["tool"]
    obs, reward, terminated, truncated, info = env.step(look)
    assert truncated and not terminated and info["termination"] == "max_turns" and info["turn"] == 2
    assert reward < 1.0 and info["score"]["success"] is False
    with pytest.raises(gymnasium.error.ResetNeeded, match="episode is over"):
        env.step(look)


def test_limits_and_max_turns_combine(tasks):
    env = ToolWorldEnv("retail", list(tasks.values()), limits=Limits(max_turns=9, max_consecutive_errors=3),
                       max_turns=4)  # fmt: skip
    try:
        assert env.limits.max_turns == 4 and env.limits.max_consecutive_errors == 3
        assert env.tool_env.limits == env.limits
    finally:
        env.close()


# -- seeding ----------------------------------------------------------------------------------------------


def test_reset_with_a_seed_is_reproducible_and_seeds_pick_different_tasks(make):
    env, other = make(), make()
    picked = {}
    for seed in range(12):
        obs, info = env.reset(seed=seed)
        obs2, info2 = other.reset(seed=seed)
        assert (obs, info["task_id"]) == (obs2, info2["task_id"])
        picked[seed] = info["task_id"]
    assert len(set(picked.values())) > 1  # the seed chooses among the tasks
    # after reset(seed=s), unseeded resets continue the same sequence in both envs
    env.reset(seed=3)
    other.reset(seed=3)
    assert [env.reset()[1]["task_id"] for _ in range(5)] == [other.reset()[1]["task_id"] for _ in range(5)]


def test_trial_option_reaches_the_episode(make, tasks):
    env = make()
    _, info = env.reset(options={"task": tasks["info"].id, "trial": 3})
    assert info["trial"] == 3 and env.unwrapped.tool_env.trial == 3
    with pytest.raises(ValueError, match="trial"):
        env.reset(options={"task": tasks["info"].id, "trial": -1})


def test_a_sync_vector_env_steps_episodes_side_by_side(tasks):
    envs = gymnasium.make_vec("toolworld/retail-v0", num_envs=2, vectorization_mode="sync", tasks=list(tasks.values()))
    try:
        obs, info = envs.reset(seed=[1, 2])
        assert len(obs) == 2 and all(envs.single_observation_space.contains(o) for o in obs)
        assert [json.loads(o)[1]["content"] for o in obs] == [
            next(t.instruction for t in tasks.values() if t.id == task_id) for task_id in info["task_id"]]  # fmt: skip
        obs, reward, terminated, truncated, info = envs.step(("Thanks for reaching out.", "Thanks."))
        assert terminated.tolist() == [True, True] and truncated.tolist() == [False, False]
        assert (reward < 1.0).all() and info["success"].tolist() == [False, False]
    finally:
        envs.close()


def test_an_async_vector_env_without_shared_memory(tasks):
    # Gymnasium's shared memory reads Text observations once, when the vector env is built; without it each
    # worker process sends its observations back
    envs = gymnasium.make_vec("toolworld/retail-v0", num_envs=2, vectorization_mode="async",
                              vector_kwargs={"shared_memory": False}, tasks=[tasks["info"]])  # fmt: skip
    try:
        obs, _ = envs.reset(seed=0)
        assert [json.loads(o)[1]["content"] for o in obs] == [tasks["info"].instruction] * 2
        _, reward, terminated, _, _ = envs.step(("Thanks for reaching out.", "Thanks."))
        assert terminated.tolist() == [True, True] and (reward < 1.0).all()
    finally:
        envs.close()


# -- Gymnasium's checker ----------------------------------------------------------------------------------


def test_gymnasium_env_checker_passes_without_warnings(make):
    # Every part of check_env applies to text spaces: the action space samples printable text (a babbling
    # agent), so the determinism checks step real episodes; the ansi render mode is exercised as well.
    env = make(render_mode="ansi")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env.unwrapped)
    assert [str(w.message) for w in caught] == []


def test_spaces_describe_what_flows(make, tasks):
    env = make()
    assert isinstance(env.observation_space, gymnasium.spaces.Text)
    assert isinstance(env.action_space, AssistantActionSpace)
    space = env.action_space
    assert space.contains("Grüße — 你好 <tool_call>{}</tool_call>")
    assert space.contains({"role": "assistant", "content": None, "tool_calls": [{"function": {"name": "x"}}]})
    assert not space.contains({"role": "user", "content": "hi"})
    assert not space.contains(42)
    assert space.contains(space.sample())


def test_observations_stay_in_the_space_whatever_the_text(make, tasks):
    # errors quote arguments back (non-ASCII here) or diagnose them (a lone surrogate): both reach the agent
    # intact, as ASCII JSON inside the space
    env = make()
    env.reset(options={"task": tasks["info"]})
    calls = [{"id": cid, "type": "function", "function": {"name": "find_user_by_email", "arguments": {"email": email}}}
             for cid, email in (("a", "zoë.李@exämple.com"), ("b", "zo\ud800@example.com"))]  # fmt: skip
    obs, *_ = env.step({"role": "assistant", "content": "", "tool_calls": calls})
    assert env.observation_space.contains(obs) and obs.isascii()
    first, second = json.loads(obs)
    assert first["tool_call_id"] == "a" and "zoë.李@exämple.com" in first["content"]
    assert second["tool_call_id"] == "b" and "surrogate" in second["content"]


def test_an_observation_over_its_limit_keeps_its_json_shape():
    messages = [{"role": "tool", "tool_call_id": f"c{i}", "content": "é" * 5_000} for i in range(20)]
    text = encode_messages(messages, limit=20_000)
    assert len(text) <= 20_000 and text.isascii()
    cut = json.loads(text)
    assert [m["tool_call_id"] for m in cut] == [f"c{i}" for i in range(20)]
    assert all("info['messages']" in m["content"] for m in cut)
    assert encode_messages(messages[:1]) == json.dumps(messages[:1])


def test_render_ansi_is_the_conversation(make, tasks):
    env = make(render_mode="ansi")
    env.reset(options={"task": tasks["info"]})
    *_, info = env.step(tool_call_text([ToolCall("find_user_by_email", {"email": tasks["info"].user.known["email"]})]))
    text = env.render()
    call_id = info["messages"][-1]["tool_call_id"]
    assert tasks["info"].instruction in text and "-> find_user_by_email(" in text and f"[tool {call_id}] " in text
    assert make().unwrapped.render() is None  # no render mode, no frame


# -- bad input --------------------------------------------------------------------------------------------


def test_a_bad_action_is_refused_before_the_episode_changes(make, tasks):
    env = make()
    env.reset(options={"task": tasks["info"]})
    before = list(env.unwrapped.tool_env.messages)
    for bad in (42, None, ["hello"], {"role": "user", "content": "hi"}):
        with pytest.raises(EnvError) as exc_info:
            env.step(bad)
        assert exc_info.value.kind == "bad_action"
        assert env.unwrapped.tool_env.messages == before
    _, _, terminated, _, _ = env.step("Thanks for reaching out.")  # the episode goes on after a refused action
    assert terminated


def test_malformed_tool_calls_are_the_models_error_observation(make, tasks):
    env = make()
    env.reset(options={"task": tasks["info"]})
    obs, reward, terminated, truncated, _ = env.step('<tool_call>{"name": "find_user_by_email", "arguments": {')
    assert (reward, terminated, truncated) == (0.0, False, False)
    [msg] = json.loads(obs)
    assert json.loads(msg["content"])["error"]["type"] == "malformed_call"


def test_reset_and_task_errors_say_what_to_do(tasks, make):
    bare = gymnasium.make("toolworld/retail-v0")
    try:
        with pytest.raises(ValueError, match="no task to run"):
            bare.reset()
        _, info = bare.reset(options={"task": tasks["info"].model_dump()})  # a task dict works without tasks=
        assert info["task_id"] == tasks["info"].id
    finally:
        bare.close()
    env = make()
    with pytest.raises(gymnasium.error.ResetNeeded):
        env.step("hello")
    with pytest.raises(ValueError, match="no task with id"):
        env.reset(options={"task": "t_nope"})
    with pytest.raises(ValueError, match="unknown reset option"):
        env.reset(options={"tsk": tasks["info"].id})
    foreign = tasks["info"].model_copy(update={"world": "airline"})
    with pytest.raises(ValueError, match="world 'airline'"):
        env.reset(options={"task": foreign})
    with pytest.raises(ValueError, match="not for world 'retail'"):
        ToolWorldEnv("retail", [foreign])


def test_tasks_from_a_file(tmp_path, tasks):
    path = tmp_path / "tasks.jsonl"
    path.write_text("".join(t.to_json() + "\n" for t in tasks.values()) + "{not json\n", encoding="utf-8")
    with pytest.warns(UserWarning, match="1 line"):
        env = gymnasium.make("toolworld/retail-v0", tasks=str(path))
    try:
        assert [t.id for t in env.unwrapped.tasks] == [t.id for t in tasks.values()]
    finally:
        env.close()
    empty = tmp_path / "empty.jsonl"
    empty.write_text("", encoding="utf-8")
    with pytest.raises(ValueError, match="holds no tasks"):
        ToolWorldEnv("retail", empty)


# -- infra errors, event loops, closing -------------------------------------------------------------------


def test_an_infra_error_truncates_with_no_score(tasks):
    # the user simulator opens, then its server stays down: the episode says nothing about the agent
    customer = ScriptedPolicy([tasks["info"].instruction, InfraError("user model down", retryable=False)])
    env = gymnasium.make("toolworld/retail-v0", tasks=[tasks["info"]], user=LLMUser(customer),
                         limits=Limits(infra_retries=0))  # fmt: skip
    try:
        env.reset(seed=0)
        _, reward, terminated, truncated, info = env.step("Could you tell me your email?")
        assert truncated and not terminated and reward == 0.0
        assert info["infra_error"] is True and info["termination"] == "infra_error"
        assert "score" not in info and info["infra_errors"][-1]["message"] == "user model down"
    finally:
        env.close()


def test_an_episode_that_fails_at_reset_ends_on_the_first_step(tasks):
    customer = ScriptedPolicy([InfraError("user model down", retryable=False)])
    env = gymnasium.make("toolworld/retail-v0", tasks=[tasks["info"]], user=LLMUser(customer),
                         limits=Limits(infra_retries=0))  # fmt: skip
    try:
        obs, info = env.reset(seed=0)
        assert info["termination"] == "infra_error"
        obs, reward, terminated, truncated, info = env.step("Hello?")
        assert obs == "[]" and reward == 0.0 and truncated and not terminated and info["infra_error"] is True
    finally:
        env.close()


def test_it_runs_when_called_from_a_running_event_loop(make, world, tasks):
    env = make()

    async def inside_a_notebook() -> float:
        asyncio.get_running_loop()  # a loop is running here, as in a notebook cell or an async trainer
        env.reset(options={"task": tasks["cancel"]})
        return play(env, gold_turns(tasks["cancel"], world, "dict"))[-1][1]

    assert asyncio.run(inside_a_notebook()) == 1.0
    assert env.unwrapped._helper is not None  # the private loop ran in the helper thread
    # and back in plain synchronous code the same env (and its loop) still works
    env.reset(options={"task": tasks["info"]})
    assert play(env, gold_turns(tasks["info"], world, "dict"))[-1][1] == 1.0


def test_close_is_idempotent_and_final(tasks):
    env = ToolWorldEnv("retail", [tasks["info"]])
    env.close()  # never reset: nothing to close
    env.close()
    env = ToolWorldEnv("retail", [tasks["info"]])
    env.reset(seed=0)
    episode = env.tool_env.episode
    env.close()
    env.close()
    assert env._loop.is_closed()
    with pytest.raises(RuntimeError, match="closed"):
        env.reset(seed=0)
    with pytest.raises(RuntimeError, match="closed"):
        env.step("hi")
    with pytest.raises(sqlite3.ProgrammingError):  # the episode was closed with the env
        episode.query("SELECT 1")
