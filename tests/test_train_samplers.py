"""Trainers that sample through a separate policy (the weight sync of an inference engine), and the tool prompt a
training run records for the model it writes."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from toolworld.cli import app
from train_kit import smollm2_tokenizer, tiny_llama

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from toolworld.rollout.engines.hf import HFEngine  # noqa: E402
from toolworld.rollout.models import MODEL_CARD, model_tool_prompt  # noqa: E402
from toolworld.rollout.token_policy import TokenPolicy  # noqa: E402
from toolworld.scoring.model import Score  # noqa: E402
from toolworld.tasks.generate import generate  # noqa: E402
from toolworld.tasks.model import write_jsonl  # noqa: E402
from toolworld.tokens import TokenBuffer  # noqa: E402
from toolworld.train.grpo import GRPOConfig, train_grpo  # noqa: E402
from toolworld.train.rft import SAMPLES_FILE, train_rft  # noqa: E402
from toolworld.train.sft import SFTConfig, SFTError  # noqa: E402
from toolworld.world import get_world  # noqa: E402

SIGNATURE = "find_user_by_email(email: string)"  # a line of the compact tool prompt


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    return smollm2_tokenizer()


@pytest.fixture(scope="module")
def tasks() -> list[Any]:
    return generate("retail", 2, seed=0, sampler="target").tasks


def odd_trials_pass(seen: list[Any]) -> Any:
    def score(task: Any, traj: Any) -> Score:
        seen.append(traj)
        r = float(traj.trial % 2)
        return Score(task_id=task.id, trial=traj.trial, reward=r, success=r == 1.0)

    return score


def sampler_over(model: Any, tokenizer: Any, name: str) -> TokenPolicy:
    return TokenPolicy(HFEngine(model=model, tokenizer=tokenizer, device="cpu"), tokenizer, name=name, max_tokens=8,
                       tool_prompt="compact")  # fmt: skip


def test_rft_samples_with_the_given_policy_and_trains_the_model(tokenizer, tasks, tmp_path):
    model = tiny_llama(tokenizer)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    twin = copy.deepcopy(model)  # the same weights, sampled by another engine
    seen: list[Any] = []
    config = SFTConfig(out=tmp_path / "rft", max_steps=1, lr=1e-3, max_len=8192, batch_tokens=8192,
                       tool_prompt="compact")  # fmt: skip
    sampler = sampler_over(twin, tokenizer, "engine-twin")
    result = train_rft(model, tokenizer, get_world("retail"), tasks, k=2, config=config, scorer=odd_trials_pass(seen),
                       sampler=sampler)  # fmt: skip
    assert result.kept == 2 and {t.policy for t in seen} == {"engine-twin"}
    assert sampler.engine._cache is None  # the sampler's prefix cache went before training, not after
    rows = [json.loads(line) for line in (tmp_path / "rft" / SAMPLES_FILE).read_text().splitlines()]
    for row in rows:  # learned token for token as the sampler produced them, compact prompt included
        traj = next(t for t in seen if (t.task_id, t.trial) == (row["task_id"], row["trial"]))
        assert row["input_ids"] == TokenBuffer.from_dict(traj.token_buffer).ids
        assert SIGNATURE in tokenizer.decode(row["input_ids"][:3000])
    assert any(not torch.equal(before[k], v) for k, v in model.state_dict().items())  # the model itself learned
    assert all(torch.equal(before[k], v) for k, v in twin.state_dict().items())  # not the sampler's copy
    assert model_tool_prompt(tmp_path / "rft" / "final") == "compact"


def test_grpo_syncs_the_sampler_each_step_and_sees_no_gap_when_it_is_in_sync(tokenizer, tasks, tmp_path):
    model = tiny_llama(tokenizer)
    calls: list[tuple[int, int]] = []

    def sampler(current: Any, step: int) -> TokenPolicy:  # a fresh copy of the current weights: an exact sync
        calls.append((id(current), step))
        return sampler_over(copy.deepcopy(current), tokenizer, f"sync-{step}")

    seen: list[Any] = []
    config = GRPOConfig(out=tmp_path / "grpo", group=2, tasks_per_step=1, steps=2, lr=1e-3, max_tokens=8,
                        concurrency=2, tensorboard=False, tool_prompt="compact")  # fmt: skip
    result = train_grpo(model, tokenizer, get_world("retail"), tasks[:1], config, scorer=odd_trials_pass(seen),
                        sampler=sampler)  # fmt: skip
    assert calls == [(id(model), 0), (id(model), 1)]
    assert [t.policy for t in seen] == ["sync-0", "sync-0", "sync-1", "sync-1"]
    assert all(step.updated for step in result.log)
    # step 2 sampled with the weights after step 1's update: trainer and sampler agree
    assert result.log[1].logprob_gap is not None and result.log[1].logprob_gap < 1e-3
    assert json.loads((tmp_path / "grpo" / "final" / MODEL_CARD).read_text())["tool_prompt"] == "compact"


def test_grpo_with_a_stale_sampler_shows_the_gap(tokenizer, tasks, tmp_path):
    """The gap is what exposes a broken weight sync: sampling step 2 with step 1's weights is measurably off."""
    model = tiny_llama(tokenizer)
    stale = sampler_over(copy.deepcopy(model), tokenizer, "stale")
    config = GRPOConfig(out=tmp_path / "grpo", group=2, tasks_per_step=1, steps=2, lr=1e-2, max_tokens=8,
                        concurrency=2, tensorboard=False, tool_prompt="compact")  # fmt: skip
    result = train_grpo(model, tokenizer, get_world("retail"), tasks[:1], config, scorer=odd_trials_pass([]),
                        sampler=lambda current, step: stale)  # fmt: skip
    assert result.log[1].logprob_gap is not None and result.log[1].logprob_gap > 1e-3


def test_configs_refuse_an_unknown_tool_prompt(tmp_path):
    with pytest.raises(SFTError, match="tool_prompt must be one of"):
        SFTConfig(out=tmp_path, tool_prompt="terse")
    from toolworld.train.grpo import GRPOError

    with pytest.raises(GRPOError, match="tool_prompt must be one of"):
        GRPOConfig(out=tmp_path, tool_prompt="terse")


def compact_model(tokenizer: Any, tasks: list[Any], tmp_path: Path) -> tuple[Path, Path]:
    """A tiny model folder whose card says it was trained with the compact tool prompt, and a one-task file."""
    folder = tmp_path / "tiny"
    tiny_llama(tokenizer).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    (folder / MODEL_CARD).write_text(json.dumps({"tool_prompt": "compact"}))
    task_file = tmp_path / "one.jsonl"
    write_jsonl(task_file, [min(tasks, key=lambda t: len(t.gold_actions))])
    return folder, task_file


def test_cli_sft_takes_the_models_tool_prompt_unless_told(tokenizer, tasks, tmp_path):
    folder, task_file = compact_model(tokenizer, tasks, tmp_path)
    runner = CliRunner()

    def sft(out: Path, *extra: str) -> Any:
        return runner.invoke(app, ["train", "sft", str(task_file), "--model", str(folder), "--out", str(out),
                                   "--max-steps", "1", "--max-len", "8192", "--json", *extra], catch_exceptions=False)  # fmt: skip

    res = sft(tmp_path / "a")
    assert res.exit_code == 0, res.output
    assert model_tool_prompt(tmp_path / "a" / "final") == "compact"
    res = sft(tmp_path / "b", "--tool-prompt", "json")
    assert res.exit_code == 0, res.output
    assert model_tool_prompt(tmp_path / "b" / "final") == "json"
    bad = sft(tmp_path / "c", "--tool-prompt", "tiny")
    assert bad.exit_code == 1 and json.loads(bad.output.strip().splitlines()[-1])["error"]["type"] == "invalid_option"


def test_layer_checkpointing_gives_the_same_gradients_and_restores_the_model(tokenizer):
    from toolworld.train.data import Sample, pack
    from toolworld.train.losses import sft_loss
    from toolworld.train.sft import layer_checkpointing

    model = tiny_llama(tokenizer).eval()
    gen = torch.Generator().manual_seed(0)
    prefix = torch.randint(5, 1000, (40,), generator=gen).tolist()
    samples = [Sample(input_ids=prefix + torch.randint(5, 1000, (n,), generator=gen).tolist(),
                      loss_mask=[0] * 40 + [1] * n) for n in (12, 20, 7)]  # fmt: skip
    batch = pack(samples, 256, 0, share_prefix=True)[0]

    def grads(checkpointed: bool) -> dict[str, Any]:
        model.zero_grad(set_to_none=True)
        with layer_checkpointing(model, checkpointed):
            assert all(m.training for m in model.modules() if getattr(m, "gradient_checkpointing", False)) or not checkpointed
            sft_loss(model, batch).backward()
        return {k: p.grad.clone() for k, p in model.named_parameters() if p.grad is not None}

    plain, recomputed = grads(False), grads(True)
    assert set(plain) == set(recomputed)
    assert all(torch.allclose(plain[k], recomputed[k], atol=1e-6) for k in plain)
    assert not model.training and not any(m.training for m in model.modules())  # eval mode is back everywhere
    assert not model.is_gradient_checkpointing


def test_sft_without_packing_takes_the_same_step_one_conversation_at_a_time(tokenizer, tmp_path):
    """One sample per micro-batch (plain causal attention, what a CPU runs fastest) is the same step as one packed
    row: the step's loss is the token mean over all of them either way."""
    from toolworld.train.data import Sample
    from toolworld.train.sft import _schedule, train_sft

    gen = torch.Generator().manual_seed(1)
    samples = [Sample(input_ids=torch.randint(5, 1000, (n,), generator=gen).tolist(),
                      loss_mask=[0] * (n // 2) + [1] * (n - n // 2)) for n in (30, 45, 18)]  # fmt: skip
    start = tiny_llama(tokenizer)
    results, models = [], []
    for packing in (True, False):
        model = copy.deepcopy(start)
        config = SFTConfig(out=tmp_path / f"p{packing}", max_steps=1, lr=1e-3, max_len=64, batch_tokens=256,
                           grad_accum=1 if packing else 3, packing=packing, warmup_ratio=0.0)  # fmt: skip
        steps, _ = _schedule(samples, config, 0)
        assert len(steps[0]) == (1 if packing else 3)
        assert all(b.attention_mask.dim() == (4 if packing else 2) for b in steps[0])
        results.append(train_sft(model, tokenizer, samples, config))
        models.append(model)
    assert results[0].losses[0] == pytest.approx(results[1].losses[0], abs=1e-5)
    packed, single = (dict(m.named_parameters()) for m in models)
    assert all(torch.allclose(packed[k], single[k], atol=1e-5) for k in packed)


def test_a_resumed_run_keeps_the_tool_prompt_it_started_with(tokenizer, tasks, tmp_path):
    folder, task_file = compact_model(tokenizer, tasks, tmp_path)
    runner = CliRunner()

    def sft(*extra: str) -> Any:
        return runner.invoke(app, ["train", "sft", str(task_file), "--model", str(folder), "--out", str(tmp_path / "o"),
                                   "--max-steps", "1", "--max-len", "8192", "--json", *extra], catch_exceptions=False)  # fmt: skip

    assert sft("--tool-prompt", "json").exit_code == 0
    again = sft("--resume")  # the model says compact, the run was started with json: json it stays
    assert again.exit_code == 0, again.output
    assert model_tool_prompt(tmp_path / "o" / "final") == "json"
    assert model_tool_prompt(tmp_path / "o" / "checkpoint-1") == "json"  # a checkpoint says it too
    changed = sft("--resume", "--tool-prompt", "compact")
    assert json.loads(changed.output.strip().splitlines()[-1])["error"]["type"] == "run_mismatch"
    trl = sft("--trl", "--bf16")
    assert json.loads(trl.output.strip().splitlines()[-1])["error"]["type"] == "invalid_option"


def test_a_sampler_with_another_tool_prompt_is_refused(tokenizer, tasks, tmp_path):
    model = tiny_llama(tokenizer)
    config = SFTConfig(out=tmp_path / "rft", max_steps=1, max_len=8192, batch_tokens=8192)  # tool_prompt auto
    with pytest.raises(SFTError, match="the sampler states tools as 'compact'"):
        train_rft(model, tokenizer, get_world("retail"), tasks, k=1, config=config,
                  sampler=sampler_over(copy.deepcopy(model), tokenizer, "s"))  # fmt: skip
