"""TRL's GRPOTrainer driven through ``toolworld.integrations.trl`` with a tiny random model (CPU)."""

from __future__ import annotations

import math
from typing import Any

import pytest

pytest.importorskip("trl")
pytest.importorskip("datasets")
torch = pytest.importorskip("torch")

from toolworld.env import Limits  # noqa: E402
from toolworld.env.user import UserReply  # noqa: E402
from toolworld.integrations import trl as bridge  # noqa: E402
from toolworld.rollout.loop import run_episode  # noqa: E402
from toolworld.tasks import Task  # noqa: E402
from toolworld.tasks.generate import generate  # noqa: E402
from toolworld.tokens.buffer import TokenBuffer  # noqa: E402
from toolworld.world import get_world  # noqa: E402
from train_kit import smollm2_tokenizer, tiny_llama  # noqa: E402


@pytest.fixture(scope="module")
def tasks() -> list[Any]:
    return generate("retail", 2, seed=0, sampler="target").tasks


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    return smollm2_tokenizer()


def tiny_model(tokenizer: Any) -> Any:
    """A random Llama whose head favours ``<|im_end|>``: turns end after a few tokens with a stop, so episodes go
    on past the first turn (a random model that never stops ends every episode at its first length cut)."""
    hidden = 32
    model = tiny_llama(tokenizer, hidden=hidden, heads=2, kv_heads=1, tie=False, max_positions=32768)
    head = torch.nn.Linear(hidden, len(tokenizer), bias=True)
    with torch.no_grad():
        head.weight.normal_(0, 0.02)
        head.bias.zero_()
        head.bias[tokenizer.convert_tokens_to_ids("<|im_end|>")] = 11.0  # about even odds against the whole vocab
    model.lm_head = head
    return model


class ChattyUser:
    """Opens with the instruction and answers every turn, so each episode holds user tokens between the model's
    turns (the scripted user stops at the first turn that is not a question, which random text never is)."""

    name = "chatty"

    def start(self, task: Any, *, seed: int = 0) -> ChattyUser.Session:
        return ChattyUser.Session(task)

    class Session:
        def __init__(self, task: Any) -> None:
            self.task, self.turns = task, 0

        async def respond(self, messages: list[dict[str, Any]]) -> UserReply:
            self.turns += 1
            return UserReply(self.task.instruction if self.turns == 1 else "Please go on.")

        async def aclose(self) -> None:
            return None


def test_grpo_trains_on_whole_episodes_with_scorer_rewards(tasks, tokenizer, tmp_path, monkeypatch):
    from trl import GRPOConfig

    real_score = bridge.score_trajectory
    scored: list[tuple[str, int, float]] = []

    def alternating(task: Any, traj: Any, **kw: Any) -> Any:
        # The real verdict with its reward set by trial parity: each group of two gets one success, one failure.
        score = real_score(task, traj, **kw)
        reward = 1.0 if traj.trial % 2 == 0 else 0.0
        scored.append((task.id, traj.trial, reward))
        return score.model_copy(update={"reward": reward, "success": bool(reward)})

    monkeypatch.setattr(bridge, "score_trajectory", alternating)
    resets: list[int] = []
    real_reset = bridge.HFEngine.reset_cache

    def counted_reset(engine: Any) -> None:
        resets.append(len(engine._cache_ids))
        real_reset(engine)

    monkeypatch.setattr(bridge.HFEngine, "reset_cache", counted_reset)
    model = tiny_model(tokenizer)
    before = [p.detach().clone() for p in model.parameters()]
    args = GRPOConfig(output_dir=str(tmp_path / "out"), num_generations=2, per_device_train_batch_size=2,
                      max_steps=2, learning_rate=1e-2, logging_steps=1, save_strategy="no", report_to=[],
                      use_cpu=True, bf16=False, seed=0, temperature=1.0)  # fmt: skip
    trainer = bridge.make_trainer("retail", tasks, model, tokenizer, args, max_tokens=16, user=ChattyUser(),
                                  limits=Limits(max_turns=3))  # fmt: skip
    rollout = trainer.rollout_func
    outputs: list[tuple[dict[str, Any], list[bridge.Episode]]] = []

    def recorded(prompts: list[Any], trainer_: Any) -> dict[str, Any]:
        out = rollout(prompts, trainer_)
        outputs.append((out, list(rollout.episodes)))
        return out

    trainer.rollout_func = recorded
    trainer.train()

    assert len(outputs) == 2  # one generation per step
    assert len(resets) == 2 and resets[1] > 0  # the second call dropped the prefix the first one left behind
    saw_env_tokens = False
    for out, episodes in outputs:
        assert len(out["prompt_ids"]) == len(episodes) == 2
        for i, ep in enumerate(episodes):
            prompt, completion = out["prompt_ids"][i], out["completion_ids"][i]
            mask, logprobs = out["env_mask"][i], out["logprobs"][i]
            assert len(completion) == len(mask) == len(logprobs) > 0
            buffer = TokenBuffer.from_dict(ep.trajectory.token_buffer)
            assert prompt + completion == buffer.ids  # token-exact: the buffer as sampled, split, nothing re-encoded
            assert mask == buffer.mask[len(prompt) :] and mask[0] == 1 and 1 not in buffer.mask[: len(prompt)]
            assert [lp for lp, m in zip(logprobs, mask, strict=True) if m] == buffer.sampled_logprobs()
            assert all(lp == 0.0 for lp, m in zip(logprobs, mask, strict=True) if not m)
            assert all(lp < 0 for lp, m in zip(logprobs, mask, strict=True) if m)
            saw_env_tokens |= 0 in mask
        # Both episodes of the group are of one task, with distinct trials (distinct sampling seeds).
        assert len({ep.trajectory.task_id for ep in episodes}) == 1
        assert len({ep.trajectory.trial for ep in episodes}) == 2
        expected = [r for tid, trial, r in scored for ep in episodes
                    if (tid, trial) == (ep.trajectory.task_id, ep.trajectory.trial)]  # fmt: skip
        assert out["toolworld_reward"] == expected and sorted(expected) == [0.0, 1.0]
        assert out["toolworld_success"] == [r == 1.0 for r in expected]
    assert saw_env_tokens  # user replies sit inside completions, masked out

    logs = [entry for entry in trainer.state.log_history if "reward" in entry]
    assert len(logs) == 2
    for entry in logs:
        assert entry["reward"] == pytest.approx(0.5)
        assert entry["reward_std"] > 0.5  # two rewards 0 and 1: a real advantage signal, not a flat group
        assert entry["toolworld/success"] == pytest.approx(0.5)
        assert entry["grad_norm"] > 0
    after = list(model.parameters())
    assert any(not torch.equal(a, b.detach()) for a, b in zip(before, after, strict=True))
    assert model.training  # generation's eval mode did not leak into training


def test_an_episode_without_sampled_tokens_gets_no_reward(tasks, tokenizer):
    class Broken:
        name = "broken"

        def start(self, **kw: Any) -> Any:
            raise RuntimeError("backend down")

    import asyncio

    world = get_world("retail")
    traj = asyncio.run(run_episode(world, tasks[0], Broken()))  # type: ignore[arg-type]
    assert traj.failed_by_infra
    rollout = bridge.rollout_func(world, tokenizer=tokenizer)
    ep = rollout._episode(tasks[0], traj, filler=tokenizer.pad_token_id)
    assert ep.reward is None and ep.score is None
    assert ep.env_mask == [0] and len(ep.completion_ids) == len(ep.logprobs) == 1 and ep.prompt_ids


def test_reward_function_passes_the_scorer_reward_and_drops_unscored_episodes():
    metrics: dict[str, float] = {}
    got = bridge.reward_function(prompts=[[]] * 3, completions=[[]] * 3, toolworld_reward=[1.0, None, math.nan],
                                 toolworld_success=[True, False, False], log_metric=metrics.__setitem__)  # fmt: skip
    assert got == [1.0, None, None]
    assert metrics == {"toolworld/success": pytest.approx(1 / 3)}
    with pytest.raises(ValueError, match="toolworld_reward"):
        bridge.reward_function(prompts=[[]], completions=[[]])


def test_task_dataset_rows_find_their_tasks(tasks):
    ds = bridge.task_dataset([*tasks, tasks[0]])
    assert ds.num_rows == 2
    assert ds[0]["prompt"] == [{"role": "user", "content": tasks[0].instruction}]
    assert [Task.model_validate_json(t).id for t in ds["task"]] == [t.id for t in tasks]
    twin = tasks[1].model_copy(update={"id": "other", "instruction": tasks[0].instruction})
    with pytest.raises(ValueError, match="share one instruction"):
        bridge.task_dataset([tasks[0], twin])
    with pytest.raises(ValueError, match="at least one task"):
        bridge.task_dataset([])


def test_prompts_expand_to_one_entry_per_episode():
    a, b = [{"role": "user", "content": "a"}], [{"role": "user", "content": "b"}]
    assert bridge.ToolworldRollout._expand([a, a, b, b], 2) == [a, a, b, b]  # TRL's sampler repeated them
    assert bridge.ToolworldRollout._expand([a, b], 2) == [a, a, b, b]  # unrepeated: repeated here
    assert bridge.ToolworldRollout._expand([a, b, a], 1) == [a, b, a]
