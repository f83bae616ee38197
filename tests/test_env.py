"""ToolEnv: the steppable environment under the loop, driven from outside as a trainer or a server would."""

from __future__ import annotations

import json
from typing import Any

import pytest

from rollout_kit import make_task, run
from toolworld.core import InfraError
from toolworld.env import CallOutcome, EnvError, Limits, NoiseConfig, ToolEnv, UserReply
from toolworld.records.messages import AssistantTurn
from toolworld.rollout.backends import GoldPolicy
from toolworld.rollout.loop import run_episode
from toolworld.world import ToolCall


@pytest.fixture(scope="module")
def tasks(world):
    return {kind: make_task(kind, world=world) for kind in ("cancel", "refusal", "info")}


async def drive_gold(env: ToolEnv, task, *, as_dicts: bool = False) -> tuple[Any, list[Any]]:
    """Drive ``env`` from outside with the gold policy's turns (as AssistantTurns or as plain message dicts)."""
    obs = await env.reset(task)
    session = GoldPolicy().start(tools=obs.tools, task=task, seed=env.policy_seed)
    results = []
    result = None
    while result is None or not result.done:
        turn = await session.respond(env.messages)
        result = await env.step(turn.to_message() if as_dicts else turn)
        results.append(result)
    return obs, results


@pytest.mark.parametrize("as_dicts", [False, True], ids=["turns", "message-dicts"])
@pytest.mark.parametrize("kind", ["cancel", "refusal", "info"])
def test_gold_driven_from_outside_ends_terminated_with_reward_one(world, tasks, kind, as_dicts):
    env = ToolEnv(world)
    obs, results = run(drive_gold(env, tasks[kind], as_dicts=as_dicts))
    assert [m["role"] for m in obs.messages] == ["system", "user"]
    assert obs.messages[0]["content"] == world.policy
    assert obs.tools == world.openai_tools()
    last = results[-1]
    assert last.terminated and not last.truncated and last.termination in ("answered", "user_stop")
    assert last.reward == 1.0 and last.score is not None and last.score.success, last.score
    assert all(r.reward is None and not r.done for r in results[:-1])
    assert last.info["success"] is True and set(last.info["components"]) >= {"identified"}
    run(env.close())


def test_step_reports_new_messages_tool_results_then_the_user(world, tasks):
    async def go():
        env = ToolEnv(world)
        await env.reset(tasks["cancel"])
        order = tasks["cancel"].user.known["order_ids"][0]
        res = await env.step({"role": "assistant", "content": "", "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "get_order_details",
                                                          "arguments": json.dumps({"order_id": order})}}]})  # fmt: skip
        assert [m["role"] for m in res.new_messages] == ["tool"] and res.new_messages[0]["tool_call_id"] == "a"
        res = await env.step("Is there anything else I can help with?")
        assert [m["role"] for m in res.new_messages] == ["user"] or res.done
        await env.close()

    run(go())


def test_text_action_tool_calls_are_parsed(world, tasks):
    async def go():
        env = ToolEnv(world)
        await env.reset(tasks["info"])
        email = tasks["info"].user.known["email"]
        text = f'<tool_call>\n{{"name": "find_user_by_email", "arguments": {{"email": "{email}"}}}}\n</tool_call>'
        res = await env.step(text)
        assert env.steps[-1].name == "find_user_by_email" and env.steps[-1].ok
        assert res.new_messages[0]["role"] == "tool" and json.loads(res.new_messages[0]["content"])["user_id"]
        await env.close()

    run(go())


def test_do_nothing_driver_is_not_rewarded(world, tasks):
    async def go():
        env = ToolEnv(world, limits=Limits(max_turns=6))
        await env.reset(tasks["cancel"])
        res = None
        while res is None or not res.done:
            res = await env.step("Thanks for reaching out.")
        await env.close()
        return res

    res = run(go())
    assert res.done and res.reward is not None and res.reward < 1.0 and not res.score.success


def test_max_turns_truncates_and_still_scores(world, tasks):
    async def go():
        env = ToolEnv(world, limits=Limits(max_turns=1))
        await env.reset(tasks["cancel"])
        email = tasks["cancel"].user.known["email"]
        res = await env.step(AssistantTurn(content="", tool_calls=[ToolCall("find_user_by_email", {"email": email})],
                                           finish_reason="tool_calls"))  # fmt: skip
        await env.close()
        return res

    res = run(go())
    assert res.truncated and not res.terminated and res.termination == "max_turns"
    assert res.reward is not None and res.reward < 1.0


def test_stepping_a_finished_episode_or_another_worlds_task_is_the_drivers_error(world, tasks):
    async def go():
        env = ToolEnv(world, limits=Limits(max_turns=1))
        await env.reset(tasks["info"])
        await env.step("hello")
        assert env.done
        with pytest.raises(EnvError) as exc:
            await env.step("again")
        assert exc.value.kind == "episode_done"
        with pytest.raises(EnvError) as exc:
            await env.step(42)  # type: ignore[arg-type]
        other = tasks["info"].model_copy(update={"world": "elsewhere"})
        with pytest.raises(EnvError) as exc:
            await env.reset(other)
        assert exc.value.kind == "wrong_world"
        await env.close()

    run(go())


def test_bad_action_is_refused_before_anything_changes(world, tasks):
    async def go():
        env = ToolEnv(world)
        await env.reset(tasks["info"])
        before = len(env.messages)
        for bad in (42, {"role": "user", "content": "hi"}, {"role": "assistant", "tool_calls": ["x"]}):
            with pytest.raises(EnvError) as exc:
                await env.step(bad)  # type: ignore[arg-type]
            assert exc.value.kind == "bad_action"
        assert len(env.messages) == before and not env.turns
        await env.close()

    run(go())


def test_failing_user_simulator_ends_as_infra_with_no_reward(world, tasks):
    class Down:
        name = "down"

        def start(self, task, *, seed=0):
            return self

        async def respond(self, messages):
            raise InfraError("user model down", retryable=False)

        async def aclose(self):
            return None

    async def go():
        env = ToolEnv(world, user=Down())
        obs = await env.reset(tasks["info"])
        await env.close()
        return env, obs

    env, obs = run(go())
    assert obs.done and env.termination == "infra_error" and env.score is not None and env.score.infra_error
    assert env.result().reward is None and env.result().truncated and env.result().info["infra_error"]


def test_free_episode_tool_level_calls_are_isolated_per_env(world):
    async def go():
        a, b = ToolEnv(world), ToolEnv(world)
        await a.reset(seed=0)
        await b.reset(seed=0)
        start_hash = a.episode.state_hash()
        found = await a.call_tool("get_order_details", {"order_id": "#W0000000"})
        assert not found.ok and found.error["type"] and "error" in json.loads(found.content)
        order = a.episode.query("SELECT order_id FROM orders WHERE status = 'pending' LIMIT 1")[0]["order_id"]
        out = await a.call_tool("cancel_pending_order", {"order_id": order, "reason": "no longer needed"})
        assert out.ok and out.mutates and a.steps[-1].name == "cancel_pending_order"
        assert a.episode.state_hash() != start_hash and b.episode.state_hash() == start_hash
        await a.close()
        await b.close()
        with pytest.raises(EnvError):
            await a.call_tool("get_order_details", {"order_id": order})

    run(go())


def test_noise_and_a_custom_wrapper_sit_around_episode_call(world, tasks):
    seen: list[str] = []

    def wrap(inner):
        async def handler(call, index) -> CallOutcome:
            seen.append(call.name)
            out = await inner(call, index)
            out.content = out.content + " "  # visible proof the wrapper's result reached the model
            return out

        return handler

    async def go():
        env = ToolEnv(world, noise=NoiseConfig(tool_failure_p=1.0), wrap=wrap)
        await env.reset(tasks["info"])
        email = tasks["info"].user.known["email"]
        res = await env.step(AssistantTurn(content="", tool_calls=[ToolCall("find_user_by_email", {"email": email})],
                                           finish_reason="tool_calls"))  # fmt: skip
        await env.close()
        return env, res

    env, res = run(go())
    assert seen == ["find_user_by_email"]
    assert res.new_messages[0]["content"].endswith(" ") and "temporarily_unavailable" in res.new_messages[0]["content"]
    assert env.steps[0].noise == ["tool_failure"] and not env.agent_errors  # the environment's fault, not the agent's


def test_run_episode_is_a_driver_over_the_env(world, tasks):
    """The loop and an outside driver give the same episode for the same policy."""
    traj = run(run_episode(world, tasks["cancel"], GoldPolicy()))

    async def outside():
        env = ToolEnv(world, score=False)
        await drive_gold(env, tasks["cancel"])
        await env.close()
        return env.trajectory(policy="gold")

    mine = run(outside())
    assert [m for m in mine.messages] == traj.messages
    assert mine.changes == traj.changes and mine.state_hash == traj.state_hash
    assert mine.termination == traj.termination and mine.policy_seed == traj.policy_seed


def test_user_that_stops_at_once_ends_the_episode_at_reset(world, tasks):
    class Silent:
        name = "silent"

        def start(self, task, *, seed=0):
            return self

        async def respond(self, messages):
            return UserReply(content="", done=True, reason="user_stop")

        async def aclose(self):
            return None

    async def go():
        env = ToolEnv(world, user=Silent())
        obs = await env.reset(tasks["info"])
        await env.close()
        return env, obs

    env, obs = run(go())
    assert obs.done and env.termination == "user_stop" and obs.new_messages == []


def test_tool_level_and_turn_level_do_not_mix_and_a_finished_episode_takes_no_calls(world, tasks):
    """A write made through call_tool in a stepped episode would be scored without any message showing it."""

    async def go():
        email = tasks["cancel"].user.known["email"]
        stepped = ToolEnv(world)
        await stepped.reset(tasks["cancel"])
        await stepped.step(AssistantTurn(content="", tool_calls=[ToolCall("find_user_by_email", {"email": email})],
                                         finish_reason="tool_calls"))  # fmt: skip
        with pytest.raises(EnvError) as exc:
            await stepped.call_tool("find_user_by_email", {"email": email})
        assert exc.value.kind == "mixed_levels" and len(stepped.steps) == 1
        await stepped.close()

        tooled = ToolEnv(world, limits=Limits(max_turns=1))
        await tooled.reset(tasks["cancel"])
        await tooled.call_tool("find_user_by_email", {"email": email}, call_id="x")
        again = await tooled.call_tool("find_user_by_email", {"email": email}, call_id="x")
        assert again.ok and [s.call_id for s in tooled.steps] == ["x", "call_1"]  # ids stay unique
        assert [s.turn for s in tooled.steps] == [-1, -1]
        with pytest.raises(EnvError) as exc:
            await tooled.step("I found you.")
        assert exc.value.kind == "mixed_levels"
        tooled.end("user_stop")
        with pytest.raises(EnvError) as exc:
            await tooled.call_tool("cancel_pending_order", {"order_id": "#W0000000", "reason": "no longer needed"})
        assert exc.value.kind == "episode_done" and len(tooled.steps) == 2
        await tooled.close()
        with pytest.raises(EnvError):
            ToolEnv(world).trajectory()

    run(go())
