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
