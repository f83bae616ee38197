"""Trials that branch from the gold's path (``rollout/branch.py``, ``GRPOConfig.branch``): the lead's turns are
played live and kept out of the loss, the policy's are trained, and depths are drawn reproducibly."""

from __future__ import annotations

import json
from typing import Any

import pytest

from train_kit import smollm2_tokenizer, tiny_llama

torch = pytest.importorskip("torch")

from toolworld.rollout.backends.gold import GoldPolicy  # noqa: E402
from toolworld.rollout.branch import BranchPolicy  # noqa: E402
from toolworld.rollout.engines.hf import HFEngine  # noqa: E402
from toolworld.rollout.token_policy import TokenPolicy  # noqa: E402
from toolworld.scoring.model import Score  # noqa: E402
from toolworld.tasks.generate import generate  # noqa: E402
from toolworld.tokens import TokenBuffer  # noqa: E402
from toolworld.train.advantages import episode_from_trajectory, turn_spans  # noqa: E402
from toolworld.train.grpo import (  # noqa: E402
    TRIALS_FILE,
    GRPOConfig,
    GRPOError,
    branch_depths,
    rollouts,
    samples_from_trajectories,
    train_grpo,
)
from toolworld.world import get_world  # noqa: E402


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    return smollm2_tokenizer()


@pytest.fixture(scope="module")
def world() -> Any:
    return get_world("retail")


@pytest.fixture(scope="module")
def tasks() -> list[Any]:
    return generate("retail", 6, seed=0, sampler="target").tasks


@pytest.fixture(scope="module")
def gold_runs(world, tasks) -> dict[str, Any]:
    """Each task played by the gold alone: the path a branch starts on."""
    return {traj.task_id: traj for traj, _ in rollouts(world, tasks, GoldPolicy(), trials=1)}


def policy_of(tokenizer: Any) -> TokenPolicy:
    engine = HFEngine(model=tiny_llama(tokenizer), tokenizer=tokenizer, prefix_cache=True, max_batch=4)
    return TokenPolicy(engine, tokenizer, name="tiny", max_tokens=10, temperature=1.0)


def test_the_lead_plays_the_first_turns_live_and_the_policy_samples_the_rest(tokenizer, world, tasks, gold_runs):
    task = next(t for t in tasks if len(gold_runs[t.id].turns) >= 3)
    gold = gold_runs[task.id]
    depth = 2
    pairs = rollouts(world, [task], BranchPolicy(GoldPolicy(), policy_of(tokenizer), {task.id: depth}), trials=2,
                     salt=1)  # fmt: skip
    assert len(pairs) == 2
    said = [m for m in gold.messages if m["role"] == "assistant"]
    for traj, score in pairs:
        assert not traj.failed_by_infra, traj.infra_error
        mine = [m for m in traj.messages if m["role"] == "assistant"]
        # the lead's turns are the gold's own, and the world answered them as it answered the gold
        assert mine[:depth] == said[:depth]
        lead_end = [i for i, m in enumerate(traj.messages) if m["role"] == "assistant"][depth - 1]
        gold_end = [i for i, m in enumerate(gold.messages) if m["role"] == "assistant"][depth - 1]
        assert traj.messages[: lead_end + 2] == gold.messages[: gold_end + 2]
        assert [bool(t.meta.get("lead")) for t in traj.turns] == [True] * depth + [False] * (len(traj.turns) - depth)
        assert all(t.meta.get("no_sampled_ids") for t in traj.turns[:depth])
        # the buffer holds the lead's turns as prompt: the loss falls on the policy's sampled ids alone
        buf = TokenBuffer.from_dict(traj.token_buffer)
        spans = turn_spans(buf.mask)
        assert len(spans) == len(traj.turns) - depth >= 1
        assert sum(buf.mask) == sum(t.completion_tokens for t in traj.turns[depth:])
        assert all(lp != 0.0 for lp, m in zip(buf.logprobs, buf.mask, strict=True) if m)
        text = tokenizer.decode([i for i, m in zip(buf.ids, buf.mask, strict=True) if not m])
        for msg in said[:depth]:
            if msg.get("content"):
                assert msg["content"] in text
        # GiGPO pairs each sampled segment with the policy's turns and skips the lead's (no turns_mismatch)
        sample = samples_from_trajectories([(traj, score)])[0]
        assert len(episode_from_trajectory(traj, sample, 1.0).steps) == len(spans)


def test_depth_zero_is_the_policy_alone(tokenizer, world, tasks):
    policy = policy_of(tokenizer)
    plain = rollouts(world, tasks[:1], policy, trials=1, salt=3)[0][0]
    policy.engine.reset_cache()
    branched = rollouts(world, tasks[:1], BranchPolicy(GoldPolicy(), policy, {}), trials=1, salt=3)[0][0]
    assert branched.messages == plain.messages
    assert branched.token_buffer == plain.token_buffer
    assert not any(t.meta.get("lead") for t in branched.turns)
    with pytest.raises(ValueError, match="branch depth"):
        BranchPolicy(GoldPolicy(), policy, {"x": -1})


def test_depths_are_drawn_within_the_leads_turns_by_seed_and_step(world, tasks, gold_runs):
    first = branch_depths(world, tasks, GoldPolicy(), seed=0, step=0)
    assert first == branch_depths(world, tasks, GoldPolicy(), seed=0, step=0)
    assert set(first) == {t.id for t in tasks}
    assert all(0 <= first[t.id] < len(gold_runs[t.id].turns) for t in tasks)
    draws = [branch_depths(world, tasks, GoldPolicy(), seed=0, step=s) for s in range(1, 6)]
    assert any(d != first for d in draws)  # each step draws anew
    assert len({k for d in [first, *draws] for k in d.values()}) >= 3  # and the depths spread over the turns

    def failed(task: Any, traj: Any) -> Score:
        return Score(task_id=task.id, trial=traj.trial, reward=0.0, success=False)

    # a lead that failed leaves no passing path to start on: the trials play the task from its start
    assert set(branch_depths(world, tasks, GoldPolicy(), seed=0, step=0, scorer=failed).values()) == {0}


def test_from_start_sets_some_depths_to_zero_and_leaves_the_rest_as_drawn(world, tasks, tmp_path):
    """``branch_from_start``: a share of the groups play their task from its start (the lookup turns the lead
    otherwise plays), the others keep the depth the uniform draw gave them, so 0 reproduces a run made before it."""
    steps = range(6)
    plain = [branch_depths(world, tasks, GoldPolicy(), seed=0, step=s) for s in steps]
    assert plain == [branch_depths(world, tasks, GoldPolicy(), seed=0, step=s, from_start=0.0) for s in steps]
    half = [branch_depths(world, tasks, GoldPolicy(), seed=0, step=s, from_start=0.5) for s in steps]
    pairs = [(p[t], h[t]) for p, h in zip(plain, half, strict=True) for t in p]
    assert all(h in (0, p) for p, h in pairs)  # a task either starts at 0 or where it would have
    deep = [h for p, h in pairs if p > 0]
    assert 0.2 * len(deep) <= deep.count(0) <= 0.8 * len(deep)  # about half of the 36 draws, not none or all
    every = [branch_depths(world, tasks, GoldPolicy(), seed=0, step=s, from_start=1.0) for s in steps]
    assert all(set(d.values()) == {0} for d in every)
    with pytest.raises(GRPOError, match="branch_from_start"):
        GRPOConfig(out=tmp_path, branch_from_start=0.5)  # no lead: nothing to start after
    with pytest.raises(GRPOError, match="branch_from_start"):
        GRPOConfig(out=tmp_path, branch="gold", branch_from_start=1.5)


def _calls(message: dict[str, Any]) -> list[dict[str, Any]]:
    return [json.loads(c["function"]["arguments"]) for c in message.get("tool_calls") or ()]


def test_pick_starts_the_group_at_the_turn_that_picks_a_described_value(world, tmp_path):
    """``branch_at="pick"``: where the customer only describes the order, the lead plays up to the turn that calls
    a tool with it and the policy makes the pick itself; elsewhere the uniform depth stands, and so do the draws
    that follow it."""
    tasks = generate("retail", 16, seed=5, sampler="info").tasks
    described = [t for t in tasks if t.described_arguments()]
    plain = [t for t in tasks if not t.described_arguments()]
    assert len(described) >= 3 and plain
    golds = {traj.task_id: traj for traj, _ in rollouts(world, tasks, GoldPolicy(), trials=1)}
    moved = 0
    for step in range(3):
        uniform = branch_depths(world, tasks, GoldPolicy(), seed=0, step=step)
        pick = branch_depths(world, tasks, GoldPolicy(), seed=0, step=step, at="pick")
        assert uniform == branch_depths(world, tasks, GoldPolicy(), seed=0, step=step, at="uniform")
        for t in described:
            said = [m for m in golds[t.id].messages if m["role"] == "assistant"]
            k = pick[t.id]
            takes = [any(a.get(arg) == need.value for need, arg in t.described_arguments() for a in _calls(m))
                     for m in said]  # fmt: skip
            assert takes[k] and not any(takes[:k])  # the policy's first turn is the pick, the lead made none
            assert k > 0  # the customer lookup and the listing come first: the lead plays them
            moved += pick[t.id] != uniform[t.id]
        assert {t.id: pick[t.id] for t in plain} == {t.id: uniform[t.id] for t in plain}
        # from_start draws after the depth from the same generator: the rule does not shift which groups it zeroes
        both = branch_depths(world, tasks, GoldPolicy(), seed=0, step=step, at="pick", from_start=0.5)
        alone = branch_depths(world, tasks, GoldPolicy(), seed=0, step=step, from_start=0.5)
        assert all(both[t] in (0, pick[t]) and alone[t] in (0, uniform[t]) for t in pick)
        deep = [t for t in pick if pick[t] and uniform[t]]
        assert [both[t] == 0 for t in deep] == [alone[t] == 0 for t in deep]
    assert moved  # the rule is not the uniform draw under another name
    with pytest.raises(GRPOError, match="branch_at"):
        GRPOConfig(out=tmp_path, branch_at="pick")  # no lead: nothing to start after
    with pytest.raises(GRPOError, match="branch_at"):
        GRPOConfig(out=tmp_path, branch="gold", branch_at="late")


def test_a_branched_grpo_step_trains_the_policys_turns_and_logs_the_leads(tokenizer, world, tasks, tmp_path, gold_runs):
    model = tiny_llama(tokenizer)
    before = {k: v.clone() for k, v in model.state_dict().items()}

    def odd(task: Any, traj: Any) -> Score:  # the lead's own trial passes; the policy's odd trials do
        r = float(traj.policy == "gold" or traj.trial % 2)
        return Score(task_id=task.id, trial=traj.trial, reward=r, success=r == 1.0)

    config = GRPOConfig(out=tmp_path / "g", group=2, tasks_per_step=3, steps=1, lr=1e-3, max_tokens=8,
                        concurrency=4, tensorboard=False, branch="gold", advantage="gigpo")  # fmt: skip
    steps: list[Any] = []
    train_grpo(model, tokenizer, world, tasks, config, scorer=odd, on_step=steps.append)
    assert steps[0].updated
    assert any(not torch.equal(before[k], v) for k, v in model.state_dict().items())
    lines = [json.loads(x) for x in (tmp_path / "g" / TRIALS_FILE).read_text().splitlines()]
    chosen = {line["task_id"] for line in lines}
    depths = branch_depths(world, [t for t in tasks if t.id in chosen], GoldPolicy(), seed=0, step=0, scorer=odd)
    assert any(depths.values())
    for line in lines:  # every trial of a group started after the lead's turns drawn for its task
        assert line["lead_turns"] == depths[line["task_id"]] or line["turns"] < depths[line["task_id"]]


def test_a_branch_spec_that_does_not_build_is_refused_before_sampling(tokenizer, world, tasks, tmp_path):
    config = GRPOConfig(out=tmp_path / "g", group=2, tasks_per_step=1, steps=1, tensorboard=False,
                        branch="no-such-policy")  # fmt: skip
    with pytest.raises(GRPOError, match="branch"):
        train_grpo(tiny_llama(tokenizer), tokenizer, world, tasks[:1], config)
