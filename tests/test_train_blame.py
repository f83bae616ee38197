"""``blame_invented``: a failed trial's negative advantage stays on the argument value it made up, not on the
tool it sent it to (``toolworld.train.advantages.blame_invented``, ``GRPOConfig.blame_invented``)."""

from __future__ import annotations

import asyncio
import functools
from typing import Any

import pytest

from rollout_kit import make_task
from train_kit import smollm2_tokenizer

torch = pytest.importorskip("torch")

from toolworld.records.trajectory import Trajectory  # noqa: E402
from toolworld.rollout.loop import Limits, run_episode  # noqa: E402
from toolworld.rollout.token_policy import Generation, TokenPolicy  # noqa: E402
from toolworld.scoring.grounding import invented_arguments  # noqa: E402
from toolworld.scoring.verify import score_trajectory  # noqa: E402
from toolworld.train.advantages import blame_invented, turn_spans  # noqa: E402
from toolworld.train.grpo import GRPOConfig, GRPOError, advantaged, samples_from_trajectories  # noqa: E402

MADE_UP = "jane.madeup@example.com"


class TextEngine:
    """Samples each scripted text as real SmolLM2 token ids, as a model that wrote it would have."""

    def __init__(self, tokenizer: Any, texts: list[str]) -> None:
        self.tokenizer, self.texts = tokenizer, list(texts)
        self.end = tokenizer.convert_tokens_to_ids("<|im_end|>")

    async def generate(self, prompt_ids: list[int], **kwargs: Any) -> Generation:
        text = self.texts.pop(0) if self.texts else "I could not find your account, sorry."
        ids = [*self.tokenizer.encode(text, add_special_tokens=False), self.end]
        return Generation(ids, [-1.0] * len(ids), "stop")


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    return smollm2_tokenizer()


def lookup(email: str) -> str:
    return f'<tool_call>{{"name": "find_user_by_email", "arguments": {{"email": "{email}"}}}}</tool_call>'


def play(world: Any, tokenizer: Any, texts: list[str]) -> tuple[Trajectory, Any]:
    task = make_task("info", world=world)
    policy = TokenPolicy(TextEngine(tokenizer, texts), tokenizer, name="scripted")
    traj = asyncio.run(run_episode(world, task, policy, limits=Limits(max_turns=3, infra_retries=0, max_wall_s=None)))
    return traj, score_trajectory(task, traj, world=world)


def test_the_blame_stays_on_the_made_up_value_and_leaves_the_tool_and_the_other_turns(world, tokenizer):
    traj, score = play(world, tokenizer, [lookup(MADE_UP)])
    assert not score.success and [i.value for i in invented_arguments(traj.messages)] == [MADE_UP]
    decode = functools.partial(tokenizer.decode, skip_special_tokens=False)
    sample = samples_from_trajectories([(traj, score)])[0]
    sample.advantage = -1.0
    assert blame_invented(sample, traj, decode) == 1
    (a0, b0), (a1, b1) = turn_spans(sample.loss_mask)
    first = sample.token_advantages[a0:b0]
    blamed = [sample.input_ids[a0 + k] for k, a in enumerate(first) if a < 0]
    spared = [sample.input_ids[a0 + k] for k, a in enumerate(first) if a == 0]
    assert MADE_UP in decode(blamed) and len(decode(blamed)) < len(MADE_UP) + 6  # the address, at most its quotes
    assert "find_user_by_email" in decode(spared) and "<tool_call>" in decode(spared)
    assert sample.token_advantages[a1:b1] == [-1.0] * (b1 - a1)  # the second turn made nothing up: as it was
    assert sample.token_advantages[:a0] == [-1.0] * a0  # outside the turns nothing moves either (mask 0 anyway)


def test_positive_advantages_and_copied_values_are_left_alone(world, tokenizer):
    decode = functools.partial(tokenizer.decode, skip_special_tokens=False)
    traj, score = play(world, tokenizer, [lookup(MADE_UP)])
    sample = samples_from_trajectories([(traj, score)])[0]
    sample.advantage = 0.5  # a made-up value in a trial that is raised: nothing to blame
    assert blame_invented(sample, traj, decode) == 0 and sample.token_advantages is None
    email = make_task("info", world=world).user.known["email"]
    copied, score = play(world, tokenizer, ["Could you tell me the email address on your account?", lookup(email)])
    assert invented_arguments(copied.messages) == [] and any(email in str(m["content"]) for m in copied.messages
                                                             if m["role"] == "user")  # fmt: skip
    sample = samples_from_trajectories([(copied, score)])[0]
    sample.advantage = -1.0  # a failed trial whose values were all given: the whole turn is blamed, as without it
    assert blame_invented(sample, copied, decode) == 0 and sample.token_advantages is None


def test_grpo_blames_through_advantaged_and_needs_the_decoder(world, tokenizer, tmp_path):
    made_up, failed = play(world, tokenizer, [lookup(MADE_UP)])
    passed = failed.model_copy(update={"success": True, "reward": 1.0})
    other = made_up.model_copy(update={"trial": 1})
    pairs = [(made_up, failed), (other, passed)]  # one group, rewards 0 and 1: the first trial's advantage < 0
    config = GRPOConfig(out=tmp_path, blame_invented=True, reward="success")
    with pytest.raises(GRPOError, match="decode"):
        advantaged(pairs, config)
    decode = functools.partial(tokenizer.decode, skip_special_tokens=False)
    samples, train_on, _ = advantaged(pairs, config, decode=decode)
    assert [s.meta["blamed_turns"] for s in samples] == [1, 0] and len(train_on) == 2
    plain, _, _ = advantaged(pairs, GRPOConfig(out=tmp_path, reward="success"), decode=decode)
    lowered = [a for a in samples[0].token_advantage_list() if a < 0]
    assert 0 < len(lowered) < sum(a < 0 for a in plain[0].token_advantage_list())


def test_a_value_is_found_where_the_call_writes_it_and_nowhere_else(tokenizer):
    """Quoted values are found between their quotes, numbers standing alone: a made-up ``order`` is not inside
    ``get_order_details`` nor the ``order_id`` key, a made-up ``2`` not inside ``#W2234562``, and every byte token of
    a character split over several (CJK in SmolLM2's byte-level vocabulary) is the value's."""
    from toolworld.train.advantages import value_positions

    decode = functools.partial(tokenizer.decode, skip_special_tokens=False)

    def found(text: str, values: list[str]) -> str:
        ids = tokenizer.encode(text, add_special_tokens=False)
        return decode([ids[k] for k in sorted(value_positions(decode, ids, values))])

    call = '<tool_call>{"name": "get_order_details", "arguments": {"order_id": "order"}}</tool_call>'
    assert found(call, ["order"]).strip() == "order"
    counted = '<tool_call>{"name": "return_items", "arguments": {"order_id": "#W2234562", "quantity": 2}}</tool_call>'
    assert found(counted, ["2"]).strip() == "2"
    name = '<tool_call>{"name": "find_user_by_name_zip", "arguments": {"first_name": "李小龍"}}</tool_call>'
    assert found(name, ["李小龍"]).strip() == "李小龍"
    assert found(call, ["absent"]) == ""
