"""GiGPO on real trials: each turn records the world state it was taken in, and a token-level trial becomes an
Episode whose steps pair those states with the turn's sampled tokens."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

pytest.importorskip("torch")

from rollout_kit import make_task
from toolworld.rollout.backends import make_policy
from toolworld.rollout.loop import run_many
from toolworld.tokens import TokenBuffer
from toolworld.train.advantages import episode_from_trajectory, gigpo
from toolworld.train.data import Sample, TrainDataError


def test_trials_of_one_task_share_anchor_states_and_gigpo_compares_them(world, tiny_gguf: Path) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("xllamacpp")
    task = make_task("cancel", 0)
    policy = make_policy(f"gguf:{tiny_gguf},n_ctx=8192,max_tokens=24,temperature=1.0")
    trajs = asyncio.run(run_many(world, [task], policy, trials=2))
    episodes, samples = [], []
    for traj, reward in zip(trajs, (1.0, 0.0), strict=True):
        assert traj.turns and all(t.state_hash for t in traj.turns)
        buf = TokenBuffer.from_dict(traj.token_buffer)
        sample = Sample(input_ids=buf.ids, loss_mask=buf.mask, group=task.id)
        episodes.append(episode_from_trajectory(traj, sample, reward))
        samples.append(sample)
    # Both trials start from the seed state: their first turns are one anchor group.
    assert episodes[0].steps[0].state == episodes[1].steps[0].state
    assert episodes[0].steps[-1].reward == 1.0 and episodes[1].steps[-1].reward == 0.0
    adv = gigpo(episodes, step_weight=1.0)
    first0, first1 = episodes[0].steps[0].span, episodes[1].steps[0].span
    # The winner's first turn gets more than the episode advantage alone; the loser's less.
    assert adv[0][first0[0]] > adv[1][first1[0]]
    assert [len(a) for a in adv] == [len(s.input_ids) for s in samples]
    # A buffer with one sampled segment more than the trial has turns does not pair up with them.
    segments = len(trajs[0].turns) + 1
    mask = [0, 1] * segments
    with pytest.raises(TrainDataError) as err:
        episode_from_trajectory(trajs[0], Sample(input_ids=list(range(len(mask))), loss_mask=mask, group=task.id), 1.0)
    assert err.value.kind == "turns_mismatch"


def test_the_grpo_loop_runs_with_gigpo_advantages(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """`--advantage gigpo`: the loop gives each turn's tokens its step-level advantage on top of the episode's."""
    from toolworld.tasks.generate import generate
    from toolworld.train import grpo as grpo_mod
    from toolworld.train.grpo import GRPOConfig, train_grpo
    from toolworld.world import get_world
    from train_kit import smollm2_tokenizer, tiny_llama

    tokenizer = smollm2_tokenizer()
    model = tiny_llama(tokenizer)
    tasks = generate("retail", 1, seed=0, sampler="target").tasks
    seen: list[list[float]] = []
    real = grpo_mod._step_level

    def spy(samples, pairs):  # type: ignore[no-untyped-def]
        real(samples, pairs)
        seen.extend(s.token_advantages for s in samples)

    monkeypatch.setattr(grpo_mod, "_step_level", spy)
    rewards = iter([1.0, 0.0])

    def scorer(task, traj):  # type: ignore[no-untyped-def]
        from toolworld.scoring.verify import score_trajectory

        score = score_trajectory(task, traj)
        return score.model_copy(update={"reward": next(rewards)})

    config = GRPOConfig(out=tmp_path / "gigpo", group=2, tasks_per_step=1, steps=1, advantage="gigpo", max_tokens=8,
                        lr=1e-3)
    result = train_grpo(model, tokenizer, get_world("retail"), tasks, config, scorer=scorer)
    assert len(result.log) == 1 and result.final is not None
    assert len(seen) == 2 and all(adv is not None for adv in seen)
    # the rewarded trial's tokens carry a positive advantage, the other's a negative one
    assert max(seen[0]) > 0 > min(seen[1])
