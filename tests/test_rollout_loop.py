"""The episode loop: gold replay reaches the gold state, bad model output never crashes it, limits and
infra failures end episodes with the right reason, noise is recorded and reproducible, trajectories
round-trip exactly."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest

import sdkworld
from rollout_kit import make_task, run, tool_call_ids_answered
from toolworld.core import InfraError, derive_seed
from toolworld.env.noise import NoiseConfig
from toolworld.env.user import LLMUser, ScriptedUser
from toolworld.records.messages import AssistantTurn
from toolworld.records.trajectory import Trajectory
from toolworld.rollout.backends import GoldPolicy, ScriptedPolicy
from toolworld.rollout.loop import Limits, run_episode, run_many
from toolworld.world import ToolCall

FAST = Limits(infra_backoff_s=0.0)



@pytest.fixture(scope="module")
def tasks(world):
    return {kind: make_task(kind, world=world) for kind in ("cancel", "address", "refusal", "info")}


def error_of(message: dict[str, Any]) -> dict[str, Any]:
    return json.loads(message["content"])["error"]


# -- gold ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["cancel", "address", "refusal", "info"])
def test_gold_reaches_the_expected_changes(world, tasks, kind):
    task = tasks[kind]
    traj = run(run_episode(world, task, GoldPolicy()))
    assert traj.termination == "answered"
    assert traj.changes == task.expected_changes
    assert [s.name for s in traj.steps] == [a.name for a in task.gold_actions]
    assert all(s.ok for s in traj.steps) and not traj.agent_errors and not traj.infra_errors
    assert traj.messages[0] == {"role": "system", "content": world.policy}
    assert traj.messages[1] == {"role": "user", "content": task.instruction}
    assert tool_call_ids_answered(traj.messages)
    answer = traj.final_answer or ""
    for out in task.expected_outputs:
        assert out.value in answer
    if task.refusal is not None:
        assert task.refusal.reason in answer
    with world.episode(task.seed) as ep:  # the state hash is the one the gold actions give
        for a in task.gold_actions:
            ep.call(a.name, a.arguments)
        assert traj.state_hash == ep.state_hash()


def test_gold_drop_changes_the_outcome_and_records_the_dropped_steps(world, tasks):
    task = tasks["cancel"]
    traj = run(run_episode(world, task, GoldPolicy(drop=1.0)))
    assert traj.changes != task.expected_changes and traj.changes == {}
    assert not traj.steps
    assert [(p["kind"], p["step"], p["name"]) for p in traj.perturbations] == [
        ("drop", i, a.name) for i, a in enumerate(task.gold_actions)
    ]
    assert traj.turns[-1].meta["perturbations"][0]["kind"] == "drop"


def test_gold_drop_of_the_write_only(world, tasks):
    """Find a seed whose plan drops the write but keeps the reads: the state stays as at the start."""
    task = tasks["cancel"]
    for seed in range(200):
        policy = GoldPolicy(drop=0.4, seed=seed)
        calls, _ = policy.plan(task, seed=derive_seed(task.id, 0))  # the seed the loop hands to trial 0
        if [c.call.name for c in calls] == ["find_user_by_email", "get_order_details"]:
            break
    else:
        pytest.fail("no seed dropped exactly the write")
    traj = run(run_episode(world, task, policy))
    assert traj.changes == {} != task.expected_changes
    assert [p["step"] for p in traj.perturbations if p["kind"] == "drop"] == [2]


def test_gold_corrupt_and_repeat_are_recorded(world, tasks):
    task = tasks["cancel"]
    traj = run(run_episode(world, task, GoldPolicy(corrupt=1.0)))
    corrupted = [p for p in traj.perturbations if p["kind"] == "corrupt"]
    assert len(corrupted) == len(task.gold_actions)
    for p, step in zip(corrupted, traj.steps, strict=True):
        assert step.arguments[p["argument"]] == p["corrupted"] != p["original"]
    assert traj.agent_errors  # a corrupted id or email does not exist
    traj = run(run_episode(world, task, GoldPolicy(repeat=1.0)))
    assert [s.name for s in traj.steps] == [a.name for a in task.gold_actions for _ in range(2)]
    assert traj.steps[-1].error["type"] == "policy_violation"  # cancelling twice: the order is no longer pending
    assert sum(p["kind"] == "repeat" for p in traj.perturbations) == len(task.gold_actions)
    assert traj.changes == task.expected_changes


# -- malformed model output --------------------------------------------------------------------------------


def test_malformed_calls_become_error_observations(world, tasks):
    huge = json.dumps({"order_id": "#W" + "9" * 1_000_000})
    script = [
        ToolCall("get_order_details", '{"order_id": "#W1', "a"),  # bad JSON
        ToolCall("get_order_details", "[1, 2]", "b"),  # JSON, but not an object
        ToolCall("no_such_tool", {}, "c"),  # unknown tool
        ToolCall("get_order_details", {"order_id": 12345}, "d"),  # wrong type
        ToolCall("get_order_details", ["not", "a", "dict"], "e"),  # arguments of the wrong kind entirely
        ToolCall("get_order_details", huge, "f"),  # 1 MB of arguments
        ToolCall("x" * 200_000, "{}", "g"),  # 200 kB tool name
        "I could not do it.",
    ]
    limits = Limits(max_consecutive_errors=100, max_observation_chars=5_000)
    traj = run(run_episode(world, tasks["cancel"], ScriptedPolicy(script), limits=limits))
    assert traj.termination == "answered"
    assert len(traj.steps) == 7 and not any(s.ok for s in traj.steps)
    tool_msgs = [m for m in traj.messages if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_msgs] == list("abcdefg")
    types = [s.error["type"] for s in traj.steps]
    assert types == ["invalid_arguments", "invalid_arguments", "unknown_tool", "invalid_arguments",
                     "invalid_arguments", "not_found", "unknown_tool"]  # fmt: skip
    assert [e["type"] for e in traj.agent_errors] == types
    assert all(len(m["content"]) < 5_200 for m in tool_msgs)
    # Error messages quote a bad value in a few dozen characters: a 1 MB argument is never echoed back.
    assert not any(s.observation_truncated for s in traj.steps) and all(len(m["content"]) < 2_000 for m in tool_msgs)
    assert error_of(tool_msgs[0])["type"] == "invalid_arguments"
    assert isinstance(traj.steps[4].arguments, str)  # a list is kept as its JSON text
    assert traj.changes == {} and tool_call_ids_answered(traj.messages)
    assert Trajectory.from_json(traj.to_json()) == traj


def test_a_crashing_world_tool_is_an_infra_error_not_the_agents():
    lib = sdkworld.make_world()
    with lib.episode(0) as ep:
        member = ep.query("SELECT member_id FROM members ORDER BY member_id LIMIT 1")[0]["member_id"]
    task = make_task("cancel").model_copy(update={"world": lib.name, "id": "t_lib"})
    script = [ToolCall("buggy_upgrade_member", {"member_id": member}), "Done."]
    traj = run(run_episode(lib, task, ScriptedPolicy(script)))
    assert traj.steps[0].error["type"] == "internal_error"
    assert not traj.agent_errors
    assert [(e["source"], e["kind"], e["fatal"]) for e in traj.infra_errors] == [("tool", "tool_internal_error", False)]
    assert traj.changes == {}  # rolled back


def test_consecutive_error_cap_and_reset(world, tasks):
    bad = ToolCall("get_order_details", {"order_id": "#W0000000"})
    good = ToolCall("list_product_types", {})
    traj = run(run_episode(world, tasks["cancel"], ScriptedPolicy([bad] * 10), limits=Limits(max_consecutive_errors=3)))
    assert traj.termination == "error_cap" and len(traj.steps) == 3
    script = [bad, bad, good, bad, bad, good, bad, bad, bad, bad]
    traj = run(run_episode(world, tasks["cancel"], ScriptedPolicy(script), limits=Limits(max_consecutive_errors=3)))
    assert traj.termination == "error_cap" and len(traj.steps) == 9 and len(traj.agent_errors) == 7


def test_error_cap_waits_for_the_whole_turn(world, tasks):
    """All calls of a turn get their observation, so the conversation stays well formed."""
    calls = [ToolCall("nope", {}), ToolCall("nope", {}), ToolCall("nope", {})]
    traj = run(run_episode(world, tasks["cancel"], ScriptedPolicy([calls]), limits=Limits(max_consecutive_errors=2)))
    assert traj.termination == "error_cap" and len(traj.steps) == 3 and tool_call_ids_answered(traj.messages)


# -- limits --------------------------------------------------------------------------------------------------


def test_turn_limit(world, tasks):
    policy = ScriptedPolicy(lambda messages, task: ToolCall("list_product_types", {}))
    traj = run(run_episode(world, tasks["cancel"], policy, limits=Limits(max_turns=4)))
    assert traj.termination == "max_turns" and traj.num_turns == 4 and len(traj.steps) == 4


def test_token_limit_from_reported_usage(world, tasks):
    def grow(messages: list[dict[str, Any]], task: Any) -> AssistantTurn:
        n = len(messages)
        return AssistantTurn("", [ToolCall("list_product_types", {})], "tool_calls", prompt_tokens=40 * n,
                             completion_tokens=10)  # fmt: skip

    traj = run(run_episode(world, tasks["cancel"], ScriptedPolicy(grow), limits=Limits(max_tokens=300)))
    assert traj.termination == "max_tokens"
    last = traj.turns[-1]
    assert last.prompt_tokens + last.completion_tokens >= 300
    assert all(t.prompt_tokens + t.completion_tokens < 300 for t in traj.turns[:-1])
    assert traj.usage.prompt_tokens == sum(t.prompt_tokens for t in traj.turns)


def test_a_turn_cut_by_length_ends_the_episode_without_running_its_calls(world, tasks):
    cut = AssistantTurn("", [ToolCall("cancel_pending_order", '{"order_id": "#W1')], finish_reason="length")
    traj = run(run_episode(world, tasks["cancel"], ScriptedPolicy([cut])))
    assert traj.termination == "max_tokens" and not traj.steps and traj.changes == {}


def test_wall_time_limit(world, tasks):
    async def slow(messages: list[dict[str, Any]], task: Any) -> str:
        await asyncio.sleep(30)
        return "too late"

    started = time.perf_counter()
    traj = run(run_episode(world, tasks["cancel"], ScriptedPolicy(slow), limits=Limits(max_wall_s=0.05)))
    assert traj.termination == "timeout"
    assert time.perf_counter() - started < 10
    assert traj.messages[-1]["role"] == "user"


#: A turn that looks an order up (and goes on): an episode of them ends by its limits.
LOOKUP = AssistantTurn("", [ToolCall("get_order_details", '{"order_id": "#W0000000"}')])


def _hour_long_turns(monkeypatch: pytest.MonkeyPatch) -> ScriptedPolicy:
    """A policy whose every turn takes an hour of the episode's clock (a loaded machine, a busy server)."""
    import toolworld.env.env as env_module

    hours, real = [0.0], time.perf_counter
    monkeypatch.setattr(env_module.time, "perf_counter", lambda: real() + 3600.0 * hours[0])

    def slow_turn(messages: list[dict[str, Any]], task: Any) -> AssistantTurn:
        hours[0] += 1
        return LOOKUP

    return ScriptedPolicy(slow_turn)


def test_by_default_the_clock_never_ends_an_episode_turns_and_tokens_do(world, tasks, monkeypatch):
    """A slow machine is not a bad policy: with default limits, hour-long turns end the episode as quick ones do."""
    quick = run(run_episode(world, tasks["cancel"], ScriptedPolicy(lambda m, t: LOOKUP), limits=Limits(max_turns=3)))
    slow = run(run_episode(world, tasks["cancel"], _hour_long_turns(monkeypatch), limits=Limits(max_turns=3)))
    assert slow.wall_s > 3600
    assert slow.termination == quick.termination == "max_turns" and len(slow.turns) == len(quick.turns) == 3


def test_a_wall_limit_set_on_purpose_counts_against_the_agent(world, tasks, monkeypatch):
    limits = Limits(max_turns=3, max_wall_s=600.0)
    traj = run(run_episode(world, tasks["cancel"], _hour_long_turns(monkeypatch), limits=limits))
    assert traj.termination == "timeout" and len(traj.turns) == 1 and not traj.failed_by_infra


# -- infra errors --------------------------------------------------------------------------------------------


def test_infra_errors_are_retried_then_recorded(world, tasks):
    flaky = ScriptedPolicy([InfraError("503 from server"), InfraError("503 again"), "All done."])
    traj = run(run_episode(world, tasks["cancel"], flaky, limits=FAST))
    assert traj.termination == "answered"
    assert [(e["attempt"], e["fatal"], e["source"]) for e in traj.infra_errors] == [(0, False, "policy"),
                                                                                  (1, False, "policy")]  # fmt: skip
    assert traj.turns[0].attempts == 3

    flaky = ScriptedPolicy([InfraError("down"), InfraError("down"), InfraError("down"), "never reached"])
    traj = run(run_episode(world, tasks["cancel"], flaky, limits=FAST))
    assert traj.termination == "infra_error" and traj.infra_errors[-1]["fatal"] and traj.failed_by_infra
    assert len(traj.infra_errors) == FAST.infra_retries + 1


def test_non_retryable_and_crashing_policies_end_at_once(world, tasks):
    bad = ScriptedPolicy([InfraError("model file missing", retryable=False, kind="missing_model"), "x"])
    traj = run(run_episode(world, tasks["cancel"], bad, limits=FAST))
    assert traj.termination == "infra_error" and len(traj.infra_errors) == 1
    assert traj.infra_errors[0]["kind"] == "missing_model"

    def crash(messages: list[dict[str, Any]], task: Any) -> str:
        raise KeyError("bug in a backend")

    traj = run(run_episode(world, tasks["cancel"], ScriptedPolicy(crash), limits=FAST))
    assert traj.termination == "infra_error" and traj.infra_errors[0]["kind"] == "crash"
    assert "KeyError" in traj.infra_errors[0]["message"]


def test_a_policy_whose_start_fails_still_gives_a_trajectory(world, tasks):
    class Broken:
        name = "broken"

        def start(self, **kwargs: Any) -> Any:
            raise InfraError("cannot load the model", retryable=False, kind="missing_model")

    traj = run(run_episode(world, tasks["cancel"], Broken()))  # type: ignore[arg-type]
    assert traj.termination == "infra_error" and traj.infra_errors[0]["kind"] == "missing_model"
    assert traj.state_hash  # the episode was still measured and closed


def test_wrong_world_is_a_caller_error(tasks):
    with pytest.raises(ValueError, match="for world 'retail'"):
        run(run_episode(sdkworld.make_world(), tasks["cancel"], GoldPolicy()))


# -- noise ------------------------------------------------------------------------------------------------


def test_injected_failures_leave_the_state_unchanged_and_are_not_agent_errors(world, tasks):
    task = tasks["cancel"]
    traj = run(run_episode(world, task, GoldPolicy(), noise=NoiseConfig(tool_failure_p=1.0)))
    assert traj.changes == {}
    assert len(traj.noise_events) == len(task.gold_actions)
    assert all(e.kind == "tool_failure" for e in traj.noise_events)
    assert all(s.noise == ["tool_failure"] and not s.agent_error for s in traj.steps)
    assert not traj.agent_errors and traj.termination == "answered"
    observation = next(m for m in traj.messages if m["role"] == "tool")
    assert "temporarily unavailable" in observation["content"] and "retry" in observation["content"]


def test_noise_is_deterministic_per_seed_and_varies_with_trial(world, tasks):
    noise = NoiseConfig(tool_failure_p=0.4, truncate_p=0.5, truncate_chars=40, latency_ms=0.2, seed=7)
    retry = ScriptedPolicy(lambda messages, task: ToolCall("get_order_details",
                                                           {"order_id": task.gold_actions[1].arguments["order_id"]}))  # fmt: skip
    limits = Limits(max_turns=12)
    a = run(run_episode(world, tasks["cancel"], retry, noise=noise, limits=limits))
    b = run(run_episode(world, tasks["cancel"], retry, noise=noise, limits=limits))
    c = run(run_episode(world, tasks["cancel"], retry, noise=noise, limits=limits, trial=1))
    d = run(run_episode(world, tasks["cancel"], retry, noise=NoiseConfig(tool_failure_p=0.4, truncate_p=0.5,
                                                                       truncate_chars=40, latency_ms=0.2, seed=8),
                        limits=limits))  # fmt: skip
    assert a.noise_events == b.noise_events and a.messages == b.messages
    kinds = {e.kind for e in a.noise_events}
    assert kinds == {"tool_failure", "truncate", "latency"}
    assert a.noise_events != c.noise_events or a.noise_events != d.noise_events
    truncated = [s for s in a.steps if "truncate" in s.noise]
    for s in truncated:
        assert "[truncated:" in a.messages[[m.get("tool_call_id") for m in a.messages].index(s.call_id)]["content"]
    assert Trajectory.from_json(a.to_json()).to_json() == a.to_json()


# -- users ------------------------------------------------------------------------------------------------


def test_scripted_user_answers_from_known_facts_and_confirms(world, tasks):
    task = tasks["cancel"]
    email = task.user.known["email"]
    order = task.gold_actions[1].arguments["order_id"]

    def agent(messages: list[dict[str, Any]], t: Any) -> Any:
        last = messages[-1]
        if len([m for m in messages if m["role"] == "user"]) == 1:
            return "Happy to help. Could you tell me your email address?"
        if last["role"] == "user" and email in last["content"]:
            return ToolCall("find_user_by_email", {"email": email})
        if last["role"] == "tool" and "user_id" in last["content"] and "cancel" not in last["content"]:
            return f"I will cancel order {order} because it is no longer needed. Shall I proceed (yes/no)?"
        if last["role"] == "user" and last["content"].lower().startswith("yes"):
            return ToolCall("cancel_pending_order", {"order_id": order, "reason": "no longer needed"})
        return "Your order is cancelled and the refund is on its way."

    traj = run(run_episode(world, task, ScriptedPolicy(agent)))
    users = [m["content"] for m in traj.messages if m["role"] == "user"]
    assert users[0] == task.instruction and email in users[1] and users[2].startswith("Yes")
    assert traj.termination == "answered" and traj.changes == task.expected_changes


def test_scripted_user_gives_up_after_its_turn_cap(world, tasks):
    asker = ScriptedPolicy(lambda messages, task: "What is your favourite colour?")
    traj = run(run_episode(world, tasks["cancel"], asker, user=ScriptedUser(max_turns=3)))
    assert traj.termination == "user_stop" and sum(m["role"] == "user" for m in traj.messages) == 3


def test_llm_user_plays_through_a_policy_and_stops_on_the_marker(world, tasks):
    seen: list[list[dict[str, Any]]] = []

    def customer(messages: list[dict[str, Any]], task: Any) -> str:
        seen.append(messages)
        return "I want to cancel my order." if len(seen) == 1 else "Thanks! ###STOP###"

    user = LLMUser(ScriptedPolicy(customer, name="customer"))
    traj = run(run_episode(world, tasks["cancel"], ScriptedPolicy(["Sure, which order?", "Done."]), user=user))
    assert traj.user == "llm:customer"
    assert traj.termination == "user_stop"
    assert seen[0][0]["role"] == "system" and tasks["cancel"].instruction in seen[0][0]["content"]
    assert [m["role"] for m in seen[1][1:]] == ["user", "assistant", "user"]  # roles swapped for the user model
    assert seen[1][-1]["content"] == "Sure, which order?"


# -- many episodes ---------------------------------------------------------------------------------------


def test_run_many_runs_every_pair_and_reports_each_as_it_finishes(world, tasks):
    done: list[tuple[str, int]] = []
    all_tasks = list(tasks.values())
    trajs = run(run_many(world, all_tasks, GoldPolicy(), trials=3, concurrency=5,
                         on_done=lambda t: done.append((t.task_id, t.trial))))  # fmt: skip
    assert [(t.task_id, t.trial) for t in trajs] == [(task.id, k) for task in all_tasks for k in range(3)]
    assert sorted(done) == sorted((t.task_id, t.trial) for t in trajs)
    assert all(t.changes == tasks_by_id(all_tasks)[t.task_id].expected_changes for t in trajs)
    skip = {(all_tasks[0].id, 0), (all_tasks[0].id, 1)}
    rest = run(run_many(world, all_tasks[:1], GoldPolicy(), trials=3, skip=skip))
    assert [(t.task_id, t.trial) for t in rest] == [(all_tasks[0].id, 2)]


def tasks_by_id(tasks: list[Any]) -> dict[str, Any]:
    return {t.id: t for t in tasks}


def test_run_many_limits_concurrency(world, tasks):
    live = peak = 0

    async def slowly(messages: list[dict[str, Any]], task: Any) -> str:
        nonlocal live, peak
        live += 1
        peak = max(peak, live)
        await asyncio.sleep(0.01)
        live -= 1
        return "ok."

    run(run_many(world, [tasks["cancel"]], ScriptedPolicy(slowly), trials=8, concurrency=3))
    assert peak == 3


def test_scripted_user_speaks_of_one_order_in_the_singular():
    from toolworld.env.user import answer_from_known

    one = answer_from_known("What is your order number?", {"order_ids": ["#W1234567"]})
    two = answer_from_known("What are your order numbers?", {"order_ids": ["#W1234567", "#W7654321"]})
    assert one == "My order number is #W1234567."
    assert two == "My order numbers are #W1234567, #W7654321."


def test_injected_tool_failures_never_hide_a_malformed_call_diagnosis(world, tasks):
    broken = ToolCall("", {}, None, "Your <tool_call> JSON is cut off at char 41.")
    script = [AssistantTurn(content="", tool_calls=[broken], finish_reason="tool_calls"), "Done."]
    traj = run(run_episode(world, tasks["cancel"], ScriptedPolicy(script), noise=NoiseConfig(tool_failure_p=1.0)))
    (step,) = traj.steps
    assert step.error["type"] == "malformed_call" and "cut off at char 41" in step.error["message"]
    assert step.noise == [] and not traj.noise_events
