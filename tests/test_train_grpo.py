"""On-policy GRPO and rejection fine-tuning with a tiny random Llama around SmolLM2's real tokenizer.

A random model solves nothing, so the learning signal is a stub scorer (reward by trial number) wherever an update
must happen; the real scorer is used where ties (no update) are the point. Every trial is one turn cut at
``max_tokens`` after the ~4.5k-token retail system prompt, which is what the update's cost is made of.
"""

from __future__ import annotations

import copy
import json
import math
import shutil
import warnings
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from toolworld.cli import app
from train_kit import smollm2_tokenizer, tiny_llama

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from toolworld.core.seeds import derive_seed  # noqa: E402
from toolworld.rollout.backends.gold import GoldPolicy  # noqa: E402
from toolworld.rollout.engines.hf import HFEngine  # noqa: E402
from toolworld.rollout.token_policy import TokenPolicy  # noqa: E402
from toolworld.scoring.model import Score  # noqa: E402
from toolworld.tasks.generate import generate  # noqa: E402
from toolworld.tasks.model import write_jsonl  # noqa: E402
from toolworld.tokens import TokenBuffer  # noqa: E402
from toolworld.train.advantages import turn_spans  # noqa: E402
from toolworld.train.data import Sample, collate  # noqa: E402
from toolworld.train.grpo import (  # noqa: E402
    REWARD_CONTROLS,
    TRIALS_FILE,
    GRPOConfig,
    GRPOError,
    anchors_of,
    at_temperature,
    branch_depths,
    guide_renderer,
    make_optimizer,
    penalize_overlong,
    pick_tasks,
    success_only,
    target_of,
    train_grpo,
    update,
)
from toolworld.train.logprobs import logprob_gap, token_logprobs  # noqa: E402
from toolworld.train.losses import floor_loss, sft_loss  # noqa: E402
from toolworld.train.rft import SAMPLES_FILE, SUMMARY_FILE, train_rft  # noqa: E402
from toolworld.train.sft import SFTConfig, SFTError  # noqa: E402
from toolworld.world import get_world  # noqa: E402

LOG_FIELDS = {"step", "reward", "pass1", "kl", "clip_frac", "logprob_gap", "tokens", "tokens_per_s", "seconds"}
runner = CliRunner()


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    return smollm2_tokenizer()


def tiny_model(tokenizer: Any) -> Any:
    return tiny_llama(tokenizer)


@pytest.fixture(scope="module")
def world() -> Any:
    return get_world("retail")


@pytest.fixture(scope="module")
def tasks() -> list[Any]:
    return generate("retail", 2, seed=0, sampler="target").tasks


@pytest.fixture(scope="module")
def held() -> list[Any]:
    """Evaluation tasks: another seed, so none is a training task."""
    return generate("retail", 1, seed=1, sampler="target").tasks


class Recorder:
    """A scorer stub: reward 1 to odd trials, 0 to even ones (so every group has a spread); keeps what it saw."""

    def __init__(self, reward: Any = None) -> None:
        self.seen: list[Any] = []
        self.reward = reward or (lambda traj: float(traj.trial % 2))

    def __call__(self, task: Any, traj: Any) -> Score:
        self.seen.append(traj)
        r = self.reward(traj)
        return Score(task_id=task.id, trial=traj.trial, reward=r, success=r == 1.0)


def config(out: Path, **kw: Any) -> GRPOConfig:
    base: dict[str, Any] = {"out": out, "group": 2, "tasks_per_step": 2, "steps": 2, "lr": 1e-3, "max_tokens": 12,
                            "concurrency": 4, "tensorboard": False}  # fmt: skip
    return GRPOConfig(**{**base, **kw})


def weights(model: Any) -> dict[str, Any]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def sampled_logprob(model: Any, traj: Any) -> float:
    """Sum of the model's logprobs of a trajectory's sampled tokens (its token buffer as stored)."""
    buf = TokenBuffer.from_dict(traj.token_buffer)
    batch = collate([Sample(input_ids=buf.ids, loss_mask=buf.mask)], 0)
    with torch.no_grad():
        return float((token_logprobs(model, batch) * batch.loss_mask).sum())


@pytest.fixture(scope="module")
def two_steps(tokenizer, world, tasks, tmp_path_factory) -> dict[str, Any]:
    """Two GRPO steps on one task with a checkpoint after each; the scorer's view of every trial."""
    out = tmp_path_factory.mktemp("grpo")
    model = tiny_model(tokenizer)
    start = copy.deepcopy(model)
    scorer = Recorder()
    steps: list[Any] = []
    result = train_grpo(model, tokenizer, world, tasks[:1], config(out, save_every=1), scorer=scorer,
                        on_step=steps.append)  # fmt: skip
    return {"out": out, "model": model, "start": start, "scorer": scorer, "result": result, "steps": steps}


# ------------------------------------------------------------------------------------------------ the loop


def test_two_steps_log_checkpoint_and_save_a_loadable_final_model(two_steps, tokenizer):
    out, result = two_steps["out"], two_steps["result"]
    lines = [json.loads(line) for line in (out / "train.jsonl").read_text().splitlines()]
    assert [line["step"] for line in lines] == [1, 2]
    for line in lines:
        assert set(line) >= LOG_FIELDS
        assert line["updated"] and line["trials"] == 2 and line["reward"] == 0.5 and line["pass1"] == 0.5
        assert line["tokens"] > 0 and line["tokens_per_s"] > 0 and line["kl"] == 0.0
    assert [s.step for s in two_steps["steps"]] == [1, 2] and result.steps == 2 and not result.interrupted
    for name in ("checkpoint-1", "checkpoint-2", "final"):
        assert (out / name / "config.json").is_file()
    assert (out / "checkpoint-1" / "optimizer.pt").is_file()
    # the final folder is what `--policy hf:OUT/final` loads: weights and tokenizer, and they are the trained ones
    engine = HFEngine(out / "final", device="cpu", dtype="float32")
    trained = two_steps["model"].state_dict()
    assert all(torch.equal(v, trained[k]) for k, v in engine.model.state_dict().items())
    assert engine.tokenizer.encode("find_user") == tokenizer.encode("find_user")


def test_every_scored_trial_is_written_with_its_step_and_verdict(two_steps):
    """trials.jsonl: what each step's policy did, readable back as a Trajectory, without the token buffer."""
    from toolworld.records.trajectory import Trajectory

    out, seen = two_steps["out"], two_steps["scorer"].seen
    lines = [json.loads(line) for line in (out / "trials.jsonl").read_text().splitlines()]
    assert [(r["step"], r["trial"]) for r in lines] == [(1, 0), (1, 1), (2, 0), (2, 1)]
    for record, traj in zip(lines, seen, strict=True):
        assert record["reward"] == float(traj.trial % 2) and record["success"] == (traj.trial == 1)
        back = Trajectory.model_validate(record["trajectory"])
        assert back.messages == traj.messages and back.token_buffer is None and traj.token_buffer is not None
        assert record["turns"] == traj.num_turns and record["task_id"] == traj.task_id


def test_each_step_samples_anew_with_the_model_being_trained(two_steps):
    seen = two_steps["scorer"].seen
    assert len(seen) == 4 and {t.trial for t in seen} == {0, 1}
    first, second = seen[:2], seen[2:]
    # the same (task, trial) samples other tokens in the next step: seeds are salted by the step
    for a, b in zip(first, second, strict=True):
        assert (a.task_id, a.trial) == (b.task_id, b.trial)
        assert TokenBuffer.from_dict(a.token_buffer).sampled_ids() != TokenBuffer.from_dict(b.token_buffer).sampled_ids()


def test_sampler_and_trainer_agree_after_an_update(two_steps):
    # Step 2 samples after step 1's update. Its stored logprobs match the trainer's only if the engine's KV prefix
    # cache (the long system prompt, computed by the old weights) was dropped after the update.
    gaps = [s.logprob_gap for s in two_steps["steps"]]
    assert all(g is not None and g < 1e-4 for g in gaps), gaps


def test_trials_sampled_at_a_temperature_are_trained_as_the_tempered_policy(tokenizer, world, tasks, tmp_path):
    """At T 0.5 the trainer scores the sampled tokens under ``softmax(logits / 0.5)``, the policy that drew them:
    its logprobs match the sampler's stored ones, where the untempered model's are far off (which truncated
    importance sampling would have taken for a mismatch and used to weigh the tokens down)."""
    steps: list[Any] = []
    scorer = Recorder()
    model = tiny_model(tokenizer)
    start = copy.deepcopy(model)
    train_grpo(model, tokenizer, world, tasks[:1], config(tmp_path / "t05", steps=1, temperature=0.5), scorer=scorer,
               on_step=steps.append)  # fmt: skip
    assert steps[0].updated and steps[0].logprob_gap is not None and steps[0].logprob_gap < 1e-4, steps[0]
    buf = TokenBuffer.from_dict(scorer.seen[0].token_buffer)
    batch = collate([Sample(input_ids=buf.ids, loss_mask=buf.mask, logprobs=[lp or 0.0 for lp in buf.logprobs])], 0)
    with torch.no_grad():
        untempered = token_logprobs(start, batch)
        tempered = token_logprobs(start, batch, temperature=0.5)
    mask = batch.loss_mask > 0
    assert float((tempered - batch.old_logprobs)[mask].abs().max()) < 1e-4
    assert float((untempered - batch.old_logprobs)[mask].abs().mean()) > 0.05
    # the gap helper reads trials the same way: at their temperature it sees no mismatch
    sample = Sample(input_ids=buf.ids, loss_mask=buf.mask, logprobs=[lp or 0.0 for lp in buf.logprobs])
    assert logprob_gap(start, [sample], 0, temperature=0.5)["mean"] < 1e-4 < 0.05 < logprob_gap(start, [sample], 0)["mean"]


def test_a_sampler_at_another_temperature_is_refused_before_it_samples(tokenizer, world, tasks, tmp_path):
    """The trainer takes its logprobs at ``config.temperature``; trials drawn at another one (greedy included)
    would be weighed against a distribution that never drew them."""
    model = tiny_model(tokenizer)
    scorer = Recorder()
    cfg = config(tmp_path / "g", temperature=0.7)

    def greedy(m: Any, step: int) -> Any:
        return TokenPolicy(HFEngine(model=m, tokenizer=tokenizer, device="cpu"), tokenizer, name="g", max_tokens=12,
                           temperature=0.0, tool_prompt=cfg.tool_prompt)  # fmt: skip

    with pytest.raises(GRPOError) as info:
        train_grpo(model, tokenizer, world, tasks[:1], cfg, sampler=greedy, scorer=scorer)
    assert info.value.kind == "invalid_option" and "0.7" in str(info.value) and not scorer.seen


def test_the_update_raises_the_rewarded_trial_against_the_other(two_steps, tasks):
    """Step 1's update moves each task's rewarded trial (odd) up relative to its unrewarded one."""
    from toolworld.train.sft import load_weights

    after = copy.deepcopy(two_steps["start"])
    load_weights(after, two_steps["out"] / "checkpoint-1", lora=False)
    first = two_steps["scorer"].seen[:2]
    task = tasks[0].id
    good = next(t for t in first if t.task_id == task and t.trial == 1)
    bad = next(t for t in first if t.task_id == task and t.trial == 0)
    before_good, before_bad = sampled_logprob(two_steps["start"], good), sampled_logprob(two_steps["start"], bad)
    after_good, after_bad = sampled_logprob(after, good), sampled_logprob(after, bad)
    assert (after_good - before_good) - (after_bad - before_bad) > 0


def test_a_bf16_update_moves_the_weights_as_the_float32_one_does_up_to_rounding(two_steps, tokenizer, world, tasks,
                                                                                 tmp_path, monkeypatch):  # fmt: skip
    """``bf16=True`` runs the update's forward passes under bfloat16 autocast (the CPU's fast path): the same trials,
    a step that points where float32's points but is not identical to it (so autocast was on), and the rewarded
    trial still goes up against the other. On a CPU without bf16 instructions it warns first and trains as asked."""
    from toolworld.rollout.engines import hf

    monkeypatch.setattr(hf, "native_bf16", lambda device: False)
    steps = {}
    for bf16 in (False, True):
        model = copy.deepcopy(two_steps["start"])
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            train_grpo(model, tokenizer, world, tasks[:1], config(tmp_path / str(bf16), steps=1, bf16=bf16),
                       scorer=Recorder())  # fmt: skip
        emulated = [w for w in caught if "GRPO's updates: bfloat16 on 'cpu'" in str(w.message)]
        assert len(emulated) == int(bf16), [str(w.message) for w in caught]
        start = two_steps["start"].state_dict()
        steps[bf16] = torch.cat([(v.float() - start[k].float()).flatten() for k, v in model.state_dict().items()])
        if bf16:
            first = two_steps["scorer"].seen[:2]  # the same seeds and weights sample the same two trials
            good = next(t for t in first if t.trial == 1)
            bad = next(t for t in first if t.trial == 0)
            moved = (sampled_logprob(model, good) - sampled_logprob(two_steps["start"], good)) - (
                sampled_logprob(model, bad) - sampled_logprob(two_steps["start"], bad))  # fmt: skip
            assert moved > 0
    full, half = steps[False], steps[True]
    assert float(full.norm()) > 0 and not torch.equal(full, half)
    assert float(torch.nn.functional.cosine_similarity(full, half, dim=0)) > 0.9


def test_sgd_moves_weights_by_their_gradient_where_adamw_moves_each_by_about_lr(two_steps, tokenizer, world, tasks,
                                                                               tmp_path):  # fmt: skip
    """``optimizer="sgd"``: the same trials (same seeds and weights), a step that still raises the rewarded trial
    against the other, but whose size follows the gradient: AdamW's first step moves nearly every weight by ``lr``
    (bias correction makes it ``lr * sign(g)``), SGD's moves a few weights far and most of them hardly at all."""
    start = two_steps["start"].state_dict()
    moves = {}
    for name, lr in (("adamw", 1e-3), ("sgd", 0.1)):
        model = copy.deepcopy(two_steps["start"])
        train_grpo(model, tokenizer, world, tasks[:1], config(tmp_path / name, steps=1, lr=lr, optimizer=name),
                   scorer=Recorder())  # fmt: skip
        moves[name] = torch.cat([(v.float() - start[k].float()).abs().flatten() for k, v in model.state_dict().items()])
        first = two_steps["scorer"].seen[:2]
        good = next(t for t in first if t.trial == 1)
        bad = next(t for t in first if t.trial == 0)
        moved = (sampled_logprob(model, good) - sampled_logprob(two_steps["start"], good)) - (
            sampled_logprob(model, bad) - sampled_logprob(two_steps["start"], bad))  # fmt: skip
        assert moved > 0, name
    adam, sgd = moves["adamw"], moves["sgd"]
    near_lr = ((adam[adam > 0] - 1e-3).abs() < 2e-4).float().mean()
    assert near_lr > 0.9  # every weight with a gradient moved ~lr
    changed = sgd[sgd > 0]
    assert changed.numel() > 0 and float(changed.max()) > 100 * float(changed.median())


def test_resume_continues_at_the_next_step_and_ends_where_an_uninterrupted_run_ends(two_steps, tokenizer, world,
                                                                                       tasks, tmp_path):  # fmt: skip
    out = tmp_path / "run"
    shutil.copytree(two_steps["out"], out)
    shutil.rmtree(out / "checkpoint-2")
    shutil.rmtree(out / "final")
    model = tiny_model(tokenizer)
    with pytest.raises(GRPOError) as info:
        train_grpo(model, tokenizer, world, tasks[:1], config(out), scorer=Recorder())
    assert info.value.kind == "output_exists"
    steps: list[Any] = []
    result = train_grpo(model, tokenizer, world, tasks[:1], config(out, resume=True), scorer=Recorder(),
                        on_step=steps.append)  # fmt: skip
    assert result.resumed_from == 1 and [s.step for s in steps] == [2] and result.final is not None
    assert [json.loads(line)["step"] for line in (out / "train.jsonl").read_text().splitlines()] == [1, 2]
    # step 2's trials were cut back with its log line and written once more by the resumed run
    assert [json.loads(line)["step"] for line in (out / "trials.jsonl").read_text().splitlines()] == [1, 1, 2, 2]
    reference = two_steps["model"].state_dict()
    assert all(torch.allclose(v, reference[k], atol=1e-6) for k, v in model.state_dict().items())
    with pytest.raises(GRPOError) as mismatch:
        train_grpo(tiny_model(tokenizer), tokenizer, world, tasks[:1], config(out, resume=True, group=3))
    assert mismatch.value.kind == "run_mismatch"
    with pytest.raises(GRPOError) as optimizer:  # Adam's moments cannot continue as SGD, or the reverse
        train_grpo(tiny_model(tokenizer), tokenizer, world, tasks[:1], config(out, resume=True, optimizer="sgd"))
    assert optimizer.value.kind == "run_mismatch" and "optimizer" in str(optimizer.value)
    with pytest.raises(GRPOError) as dynamic:  # drawing until N groups differ makes another experiment
        train_grpo(tiny_model(tokenizer), tokenizer, world, tasks[:1], config(out, resume=True, min_groups=4))
    assert dynamic.value.kind == "run_mismatch" and "min_groups" in str(dynamic.value)
    # a checkpoint written before the optimizer was recorded was trained with AdamW, whatever today's default, ...
    state = out / "checkpoint-1" / "trainer_state.json"
    saved = json.loads(state.read_text())
    for key in ("optimizer", "min_groups", "max_draws"):  # ... nor the dynamic sampling, which did not exist
        del saved["config"][key]
    state.write_text(json.dumps(saved))
    shutil.rmtree(out / "checkpoint-2")
    with pytest.raises(GRPOError) as legacy:
        train_grpo(tiny_model(tokenizer), tokenizer, world, tasks[:1], config(out, resume=True, optimizer="sgd"))
    assert legacy.value.kind == "run_mismatch" and "'adamw'" in str(legacy.value)
    with pytest.raises(GRPOError) as before_dynamic:  # ... and with one draw a step
        train_grpo(tiny_model(tokenizer), tokenizer, world, tasks[:1], config(out, resume=True, min_groups=2))
    assert before_dynamic.value.kind == "run_mismatch" and "min_groups=0" in str(before_dynamic.value)


def test_a_run_killed_before_its_first_checkpoint_starts_over_and_logs_each_step_once(two_steps, tokenizer, world,
                                                                                        tasks, tmp_path):  # fmt: skip
    out = tmp_path / "run"
    shutil.copytree(two_steps["out"], out)
    for folder in [*out.glob("checkpoint-*"), out / "final"]:
        shutil.rmtree(folder)
    steps: list[Any] = []
    result = train_grpo(tiny_model(tokenizer), tokenizer, world, tasks[:1], config(out, resume=True),
                        scorer=Recorder(), on_step=steps.append)  # fmt: skip
    assert result.resumed_from == 0 and [s.step for s in steps] == [1, 2]
    assert [json.loads(line)["step"] for line in (out / "train.jsonl").read_text().splitlines()] == [1, 2]
    assert [json.loads(line)["step"] for line in (out / "trials.jsonl").read_text().splitlines()] == [1, 1, 2, 2]


# ------------------------------------------------------------------------------------------------ LoRA

LORA = {"lora": True, "lora_r": 2, "lora_alpha": 4, "lr": 1e-2}


@pytest.fixture(scope="module")
def lora_steps(tokenizer, world, tasks, tmp_path_factory) -> dict[str, Any]:
    """Two LoRA steps with a KL term to the start (the adapters switched off), a checkpoint after each."""
    pytest.importorskip("peft")
    out = tmp_path_factory.mktemp("grpo-lora")
    model = tiny_model(tokenizer)
    start = copy.deepcopy(model)
    scorer = Recorder()
    steps: list[Any] = []
    result = train_grpo(model, tokenizer, world, tasks[:1], config(out, save_every=1, kl_coef=0.1, **LORA),
                        scorer=scorer, on_step=steps.append)  # fmt: skip
    return {"out": out, "model": model, "start": start, "scorer": scorer, "result": result, "steps": steps}


def test_a_lora_run_trains_its_adapters_alone_and_returns_the_model_with_them_merged(lora_steps):
    """Only the adapted projections move, each by a matrix of rank <= r; the model object and final/ hold the
    merged weights under the plain model's names, and the checkpoints hold the adapter alone."""
    from toolworld.train.lora import DEFAULT_LORA_TARGETS

    out, start = lora_steps["out"], lora_steps["start"].state_dict()
    after = lora_steps["model"].state_dict()
    assert set(after) == set(start)  # no adapter layers left in the caller's model
    adapted = [k for k in start if any(f".{t}." in k for t in DEFAULT_LORA_TARGETS)]
    assert adapted and len(adapted) < len(start)
    for key, before in start.items():
        if key in adapted:
            delta = after[key] - before
            assert float(delta.abs().max()) > 0 and int(torch.linalg.matrix_rank(delta, atol=1e-7)) <= 2, key
        else:
            assert torch.equal(after[key], before), key  # embeddings, norms: as given
    for ckpt in ("checkpoint-1", "checkpoint-2"):
        assert (out / ckpt / "adapter_model.safetensors").is_file() and not list((out / ckpt).glob("model*.safetensors"))
    assert not (out / "final" / "adapter_config.json").exists()
    engine = HFEngine(out / "final", device="cpu", dtype="float32")
    assert all(torch.equal(v, after[k]) for k, v in engine.model.state_dict().items())


def test_a_lora_step_raises_the_rewarded_trial_against_the_start_and_measures_kl_to_it(lora_steps, tokenizer, tasks):
    """Step 1's adapter raises the rewarded trial against the other; its KL to the start is 0 (the adapters begin
    at zero) and step 2's is not (the reference stayed where the run began); the sampler that drew step 2 was the
    updated one."""
    from toolworld.train.lora import wrap_lora
    from toolworld.train.sft import load_weights

    start = lora_steps["start"]
    peft = wrap_lora(copy.deepcopy(start), r=2, alpha=4)
    load_weights(peft, lora_steps["out"] / "checkpoint-1", lora=True)
    after = peft.get_base_model()
    first = lora_steps["scorer"].seen[:2]
    good = next(t for t in first if t.trial == 1)
    bad = next(t for t in first if t.trial == 0)
    moved = (sampled_logprob(after, good) - sampled_logprob(start, good)) - (
        sampled_logprob(after, bad) - sampled_logprob(start, bad))  # fmt: skip
    assert moved > 0
    kls = [s.kl for s in lora_steps["steps"]]
    assert abs(kls[0]) < 1e-7 and kls[1] > 1e-6, kls
    assert all(s.logprob_gap is not None and s.logprob_gap < 1e-4 for s in lora_steps["steps"])


def adapted_tiny_model(tokenizer: Any) -> tuple[Any, Any, Any]:
    """A tiny model, a copy of it wrapped in rank-2 adapters whose B matrices are random (peft starts them at
    zero, where the adapted model is the plain one and no test of folding or switching off could fail), and a
    batch to compare their logprobs on."""
    from toolworld.train.lora import wrap_lora

    start = tiny_model(tokenizer)
    peft = wrap_lora(copy.deepcopy(start), r=2, alpha=4)
    with torch.no_grad():
        for name, param in peft.named_parameters():
            if "lora_B" in name:
                param.normal_(0, 0.5)
    return start, peft, collate([Sample(input_ids=list(range(100, 140)), loss_mask=[0] * 10 + [1] * 30)], 0)


def test_the_adapters_switched_off_are_the_model_they_were_put_on(tokenizer):
    pytest.importorskip("peft")
    from toolworld.train.lora import AdapterOff

    start, peft, batch = adapted_tiny_model(tokenizer)
    with torch.no_grad():
        plain, off, on = (token_logprobs(m, batch) for m in (start, AdapterOff(peft), peft.get_base_model()))
    assert torch.equal(off, plain) and not torch.allclose(on, plain, atol=1e-3)


def test_a_plain_copy_with_the_adapters_folded_in_is_the_adapted_model(tokenizer):
    """What a separate sampler loads: the plain model's names, no adapter layers, the adapted model's logprobs (up
    to float rounding), and the adapted model left as it was."""
    pytest.importorskip("peft")
    from toolworld.train.lora import folded_state_dict, plain_copy

    start, peft, batch = adapted_tiny_model(tokenizer)
    adapted = peft.get_base_model()
    before = weights(adapted)
    twin = plain_copy(adapted)
    assert set(twin.state_dict()) == set(start.state_dict()) == set(folded_state_dict(peft))
    assert not any("lora" in name for name, _ in twin.named_modules())
    with torch.no_grad():
        plain, folded, on = (token_logprobs(m, batch) for m in (start, twin, adapted))
    assert torch.allclose(folded, on, atol=1e-5) and not torch.allclose(folded, plain, atol=1e-3)
    assert all(torch.equal(v, before[k]) for k, v in adapted.state_dict().items())
    assert all(torch.equal(v, start.state_dict()[k]) for k, v in folded_state_dict(start).items())


def test_a_lora_run_resumes_from_its_adapter_and_refuses_to_go_on_as_a_full_one(lora_steps, tokenizer, world, tasks,
                                                                                  tmp_path):  # fmt: skip
    out = tmp_path / "run"
    shutil.copytree(lora_steps["out"], out)
    shutil.rmtree(out / "checkpoint-2")
    shutil.rmtree(out / "final")
    model = tiny_model(tokenizer)
    with pytest.raises(GRPOError) as full:  # Adam's moments of an adapter cannot go on as a full update
        train_grpo(model, tokenizer, world, tasks[:1], config(out, resume=True, kl_coef=0.1, lr=1e-2))
    assert full.value.kind == "run_mismatch" and "lora" in str(full.value)
    result = train_grpo(model, tokenizer, world, tasks[:1], config(out, resume=True, kl_coef=0.1, **LORA),
                        scorer=Recorder())  # fmt: skip
    assert result.resumed_from == 1 and result.steps == 2
    reference = lora_steps["model"].state_dict()
    assert set(model.state_dict()) == set(reference)
    assert all(torch.allclose(v, reference[k], atol=1e-6) for k, v in model.state_dict().items())


def test_tied_rewards_make_no_update(tokenizer, world, tasks, tmp_path):
    model = tiny_model(tokenizer)
    before = weights(model)
    steps: list[Any] = []
    train_grpo(model, tokenizer, world, tasks[:1], config(tmp_path / "o", steps=1, save_trials=False),
               scorer=Recorder(lambda t: 0.25), on_step=steps.append)  # fmt: skip
    assert not (tmp_path / "o" / "trials.jsonl").exists()  # save_trials=False
    assert not steps[0].updated and steps[0].groups == 0 and steps[0].loss is None and steps[0].reward == 0.25
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())


def test_a_success_reward_trains_only_groups_that_both_passed_and_failed(tokenizer, world, tasks, tmp_path):
    """reward="success": partial credit (0.25 vs 0.75, neither a pass) is a tie, so no update; a pass against a
    failure is a spread. The verdict's components are kept, only the reward is binary."""
    partial = Recorder(lambda t: 0.25 + 0.5 * (t.trial % 2))  # rewards differ, nothing passes
    model = tiny_model(tokenizer)
    before = weights(model)
    steps: list[Any] = []
    train_grpo(model, tokenizer, world, tasks[:1], config(tmp_path / "tie", steps=1, reward="success"),
               scorer=partial, on_step=steps.append)  # fmt: skip
    assert not steps[0].updated and steps[0].groups == 0 and steps[0].reward == 0.0
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())
    lines = [json.loads(line) for line in (tmp_path / "tie" / "trials.jsonl").read_text().splitlines()]
    assert [r["reward"] for r in lines] == [0.0, 0.0]
    # the same partial rewards under reward="partial" do train
    train_grpo(model, tokenizer, world, tasks[:1], config(tmp_path / "partial", steps=1), scorer=partial,
               on_step=steps.append)  # fmt: skip
    assert steps[1].updated and steps[1].reward == 0.5
    # a pass against a failure is a spread under reward="success" too
    train_grpo(model, tokenizer, world, tasks[:1], config(tmp_path / "pass", steps=1, reward="success"),
               scorer=Recorder(lambda t: 0.3 + 0.7 * (t.trial % 2)), on_step=steps.append)  # fmt: skip
    assert steps[2].updated and steps[2].groups == 1 and steps[2].reward == 0.5


def test_the_shuffle_control_permutes_rewards_within_each_group_by_seed():
    """Each group keeps its rewards' values (so the same groups train, with advantages of the same sizes) while
    which member earned which is redrawn per seed; the scored reward is kept beside the one trained on."""
    scored = {"a": [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0], "b": [0.2, 0.5, 0.9, 0.0]}

    def members() -> list[Sample]:
        return [Sample(input_ids=[1, 2], loss_mask=[0, 1], group=g, meta={"reward": r})
                for g, rs in scored.items() for r in rs]  # fmt: skip

    untouched = members()
    REWARD_CONTROLS["none"](untouched, 7)
    assert [s.meta for s in untouched] == [s.meta for s in members()]
    winners = set()
    for seed in range(12):
        shuffled = members()
        REWARD_CONTROLS["shuffle"](shuffled, seed)
        for g, rs in scored.items():
            group = [s for s in shuffled if s.group == g]
            assert sorted(s.meta["reward"] for s in group) == sorted(rs)
            assert [s.meta["scored_reward"] for s in group] == rs
        again = members()
        REWARD_CONTROLS["shuffle"](again, seed)
        assert [s.meta for s in again] == [s.meta for s in shuffled]
        winners.add(next(i for i, s in enumerate(shuffled) if s.group == "a" and s.meta["reward"] == 1.0))
    assert len(winners) >= 4  # the pass lands on many members across seeds, not on the one that earned it


def test_a_shuffled_control_run_trains_on_the_permuted_rewards_and_logs_the_scored_ones(tokenizer, world, tasks,
                                                                                        tmp_path):  # fmt: skip
    """reward_control="shuffle": the trials file and the step's pass^1 say what the trials scored, the update
    follows the permuted rewards (raising a trial that failed where the permutation rewarded it), and a resumed
    run must keep the control."""
    model = tiny_model(tokenizer)
    start = copy.deepcopy(model)
    scorer = Recorder()  # odd trials pass
    steps: list[Any] = []
    out = tmp_path / "shuffled"
    cfg = config(out, steps=1, group=4, seed=3, reward_control="shuffle", save_every=1)
    train_grpo(model, tokenizer, world, tasks[:1], cfg, scorer=scorer, on_step=steps.append)
    assert steps[0].updated and steps[0].pass1 == 0.5 and steps[0].groups == 1
    lines = [json.loads(line) for line in (out / "trials.jsonl").read_text().splitlines()]
    assert [(r["trial"], r["reward"]) for r in lines] == [(0, 0.0), (1, 1.0), (2, 0.0), (3, 1.0)]
    # the rewards the update saw: the same permutation of this group, drawn by (seed, step 0)
    trained = [Sample(input_ids=[1], loss_mask=[1], group=tasks[0].id, meta={"reward": float(k % 2)}) for k in range(4)]
    REWARD_CONTROLS["shuffle"](trained, derive_seed("grpo-control", 3, 0))
    shown = [s.meta["reward"] for s in trained]
    assert shown != [0.0, 1.0, 0.0, 1.0]  # this seed moves credit, so the test can tell the two apart
    moved = {t.trial: sampled_logprob(model, t) - sampled_logprob(start, t) for t in scorer.seen}
    assert min(moved[k] for k in range(4) if shown[k]) > max(moved[k] for k in range(4) if not shown[k])
    with pytest.raises(GRPOError) as mismatch:
        train_grpo(tiny_model(tokenizer), tokenizer, world, tasks[:1], config(out, steps=2, group=4, seed=3,
                                                                              resume=True), scorer=Recorder())  # fmt: skip
    assert mismatch.value.kind == "run_mismatch" and "reward_control" in str(mismatch.value)
    with pytest.raises(GRPOError) as bad:
        config(tmp_path / "bad", reward_control="reverse")
    assert bad.value.kind == "invalid_option" and "none, shuffle" in str(bad.value)


def guide_logprob(model: Any, sample: Any) -> float:
    batch = collate([Sample(input_ids=sample.input_ids, loss_mask=sample.loss_mask)], 0)
    with torch.no_grad():
        return float((token_logprobs(model, batch) * batch.loss_mask).sum())


@pytest.mark.parametrize("advantage", ["grpo", "gigpo"])
def test_a_guide_joins_a_group_that_failed_every_trial_and_is_raised_against_its_trials(
        advantage, tokenizer, world, tasks, tmp_path):  # fmt: skip
    """Every sampled trial fails (a tie: no update without a guide); with guide="gold" the gold conversation joins
    the group as trial G with reward 1, rendered as the policy would produce it, and the update raises it and lowers
    the sampled trials. GiGPO pairs the rendered turns with the gold trajectory's anchors (no turns_mismatch)."""
    scorer = Recorder(lambda t: 1.0 if t.policy == "gold" else 0.0)
    model = tiny_model(tokenizer)
    start = copy.deepcopy(model)
    steps: list[Any] = []
    out = tmp_path / advantage
    train_grpo(model, tokenizer, world, tasks[:1], config(out, steps=1, guide="gold", advantage=advantage,
                                                          reward="success"),
               scorer=scorer, on_step=steps.append)  # fmt: skip
    step = steps[0]
    assert step.updated and step.groups == 1 and step.guided == 1
    assert step.trials == 2 and step.pass1 == 0.0 and step.reward == 0.0  # the policy's own trials only
    lines = [json.loads(line) for line in (out / "trials.jsonl").read_text().splitlines()]
    assert [(r["trial"], r.get("guide", False), r["success"]) for r in lines] == [(0, False, False), (1, False, False),
                                                                                   (2, True, True)]  # fmt: skip
    sampled = [t for t in scorer.seen if t.policy != "gold"]
    gold = next(t for t in scorer.seen if t.policy == "gold")
    render = guide_renderer(tokenizer, world, "auto")
    ids, mask = render(gold)
    assert len(turn_spans(mask)) == gold.num_turns  # one learnt run per assistant turn, as a sampled buffer has
    rendered = Sample(input_ids=ids, loss_mask=mask)
    assert guide_logprob(model, rendered) > guide_logprob(start, rendered)
    for traj in sampled:
        assert sampled_logprob(model, traj) < sampled_logprob(start, traj)


def test_a_group_with_a_pass_gets_no_guide_and_a_failing_guide_is_left_out(tokenizer, world, tasks, tmp_path):
    steps: list[Any] = []
    model = tiny_model(tokenizer)
    train_grpo(model, tokenizer, world, tasks[:1], config(tmp_path / "a", steps=1, guide="gold"),
               scorer=Recorder(), on_step=steps.append)  # fmt: skip
    assert steps[0].guided == 0 and steps[0].groups == 1
    before = weights(model)
    train_grpo(model, tokenizer, world, tasks[:1], config(tmp_path / "b", steps=1, guide="noop"),
               scorer=Recorder(lambda t: 0.0), on_step=steps.append)  # fmt: skip
    assert steps[1].guided == 0 and not steps[1].updated  # the guide failed too: still a tie
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())


def test_a_rendered_trial_takes_no_importance_weight_and_no_part_in_the_logprob_gap(tokenizer):
    """A guide's trial has no sampler logprobs (stored as 0.0): weighed by TIS it would count exp(log pi) ~ 0 of
    its gradient, and in the gap it would read as a mismatch of the sampler's."""
    model = tiny_model(tokenizer)
    ids = tokenizer("a rendered conversation to learn from")["input_ids"]
    mask = [0, 0] + [1] * (len(ids) - 2)
    probe = collate([Sample(input_ids=ids, loss_mask=mask)], 0)
    with torch.no_grad():
        own = [float(x) for x in token_logprobs(model, probe)[0]]
    sampled = Sample(input_ids=ids, loss_mask=mask, logprobs=[lp * m for lp, m in zip(own, mask, strict=True)], advantage=0.0,
                     group="t", meta={"reward": 0.0})  # fmt: skip
    moved = {}
    for is_rendered in (False, True):
        m = copy.deepcopy(model)
        guide = Sample(input_ids=ids, loss_mask=mask, logprobs=[0.0] * len(ids), advantage=1.0, group="t",
                       meta={"reward": 1.0, **({"rendered": True} if is_rendered else {})})  # fmt: skip
        cfg = config(Path("unused"), lr=0.05, optimizer="sgd", packing=False)  # a step in proportion to the gradient
        params = [p for p in m.parameters() if p.requires_grad]
        stats = update(m, None, [sampled, guide], make_optimizer(params, cfg), params, cfg, 0)
        moved[is_rendered] = guide_logprob(m, guide) - guide_logprob(model, guide)
        if is_rendered:
            assert stats["logprob_gap"] < 1e-4  # the sampled trial's own gap: the trainer is the sampler here
        else:
            assert stats["logprob_gap"] > 1.0
    assert moved[True] > 10 * max(moved[False], 1e-6)


def test_a_guide_that_does_not_build_is_refused_before_anything_is_sampled(tokenizer, world, tasks, tmp_path):
    scorer = Recorder()
    with pytest.raises(GRPOError) as err:
        train_grpo(tiny_model(tokenizer), tokenizer, world, tasks[:1], config(tmp_path / "o", guide="nope:x"),
                   scorer=scorer)  # fmt: skip
    assert err.value.kind == "invalid_option" and "guide" in str(err.value) and not scorer.seen


def unadvantaged_and_kept(tokenizer: Any) -> tuple[Sample, Sample]:
    """A sampled trial with no advantage (the policy term has no gradient on it) and a conversation to keep."""
    ids = tokenizer("a conversation SFT learnt and GRPO should not forget")["input_ids"]
    mask = [0, 0] + [1] * (len(ids) - 2)
    trial = Sample(input_ids=ids, loss_mask=mask, logprobs=[0.0] * len(ids), advantage=0.0, group="t",
                   meta={"reward": 0.0})  # fmt: skip
    return trial, Sample(input_ids=ids[::-1], loss_mask=mask)


def test_the_supervised_term_pulls_towards_its_conversations_and_is_logged_before_its_weight(tokenizer):
    """With no advantage anywhere the policy term has no gradient; sft_coef > 0 alone then moves the model, raising
    the supervised conversation, and the step reports that conversation's NLL (not times the coefficient)."""
    model = tiny_model(tokenizer)
    trial, kept = unadvantaged_and_kept(tokenizer)
    start = -guide_logprob(model, kept) / sum(kept.loss_mask)
    moved = {}
    for coef in (0.0, 1.0):
        m = copy.deepcopy(model)
        cfg = config(Path("unused"), lr=1e-3, packing=False, sft_coef=coef)
        params = [p for p in m.parameters() if p.requires_grad]
        stats = update(m, None, [trial], make_optimizer(params, cfg), params, cfg, 0, sft=[kept])
        moved[coef] = guide_logprob(m, kept) - guide_logprob(model, kept)
        assert ("sft_loss" in stats) == bool(coef)
        if coef:
            assert stats["sft_loss"] == pytest.approx(start, rel=1e-4)
    assert moved[0.0] == 0.0 and moved[1.0] > 0.1


def test_a_run_with_a_supervised_term_logs_it_every_update_and_refuses_half_of_it(tokenizer, world, tasks, tmp_path):
    ids = tokenizer("kept conversation")["input_ids"]
    kept = [Sample(input_ids=ids, loss_mask=[0] + [1] * (len(ids) - 1)) for _ in range(3)]
    steps: list[Any] = []
    train_grpo(tiny_model(tokenizer), tokenizer, world, tasks[:1], config(tmp_path / "o", steps=1, sft_coef=0.5,
                                                                          sft_batch=2),
               scorer=Recorder(), on_step=steps.append, sft=kept)  # fmt: skip
    assert steps[0].updated and steps[0].sft_loss is not None and steps[0].sft_loss > 0
    assert json.loads((tmp_path / "o" / "train.jsonl").read_text().splitlines()[0])["sft_loss"] == steps[0].sft_loss
    # the floor alone on LoRA: the reference is the adapters switched off, which at the first update is the model
    train_grpo(tiny_model(tokenizer), tokenizer, world, tasks[:1], config(tmp_path / "f", steps=1, lora=True,
                                                                          sft_floor=1.0, sft_batch=2),
               scorer=Recorder(), on_step=steps.append, sft=kept)  # fmt: skip
    assert steps[1].updated and steps[1].sft_loss is not None and steps[1].sft_loss > 0
    assert (steps[1].sft_floor, steps[1].sft_below) == (0.0, 0.0)
    with pytest.raises(GRPOError) as err:  # another floor is another experiment
        train_grpo(tiny_model(tokenizer), tokenizer, world, tasks[:1], config(tmp_path / "f", steps=2, lora=True,
                                                                              sft_floor=2.0, resume=True),
                   scorer=Recorder(), sft=kept)  # fmt: skip
    assert "sft_floor" in str(err.value)
    for kw, given in (({"sft_coef": 0.5}, None), ({}, kept)):
        with pytest.raises(GRPOError) as err:
            train_grpo(tiny_model(tokenizer), tokenizer, world, tasks[:1], config(tmp_path / "x", **kw),
                       scorer=Recorder(), sft=given)  # fmt: skip
        assert err.value.kind == "invalid_option" and "sft_coef" in str(err.value)


def test_the_floor_pulls_a_conversation_back_up_to_the_reference_and_exerts_no_force_at_it(tokenizer):
    """sft_floor alone (no advantage, no supervised loss): against the model it starts from, every token sits at the
    reference, so the step leaves the weights as they are whatever the weight; against a reference under which the
    conversation was likelier, it raises the conversation and logs the loss before its weight."""
    model = tiny_model(tokenizer)
    trial, kept = unadvantaged_and_kept(tokenizer)
    cfg = config(Path("unused"), lr=1e-3, packing=False, kl_coef=0.1, sft_floor=5.0)
    m = copy.deepcopy(model)
    params = [p for p in m.parameters() if p.requires_grad]
    stats = update(m, copy.deepcopy(model), [trial], make_optimizer(params, cfg), params, cfg, 0, sft=[kept])
    assert stats["sft_floor"] == 0.0 and stats["sft_below"] == 0.0
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in m.state_dict().items())
    # a reference fitted to the conversation, which is likelier there than under the model
    ref = copy.deepcopy(model)
    fit = torch.optim.SGD(ref.parameters(), lr=0.5)
    for _ in range(5):
        fit.zero_grad()
        sft_loss(ref, collate([kept], 0)).backward()
        fit.step()
    assert guide_logprob(ref, kept) > guide_logprob(model, kept) + 1.0
    m = copy.deepcopy(model)
    params = [p for p in m.parameters() if p.requires_grad]
    stats = update(m, ref, [trial], make_optimizer(params, cfg), params, cfg, 0, sft=[kept])
    assert stats["sft_floor"] > 0 and 0 < stats["sft_below"] <= 1
    assert guide_logprob(m, kept) > guide_logprob(model, kept) + 0.1


def test_the_floor_is_a_one_sided_k3_on_the_masked_tokens():
    """Golden values: only the masked token below the reference counts, with k3 = e^d - d - 1 at d = 0.5."""
    logp = torch.tensor([[-1.0, -2.0, -0.5, -3.0]], requires_grad=True)
    ref = torch.tensor([[-0.5, -2.5, -0.5, -1.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0]])  # the last token is far below, but not learnt
    loss, below = floor_loss(logp, ref, mask)
    k3 = math.exp(0.5) - 0.5 - 1.0
    assert float(loss.detach()) == pytest.approx(k3 / 3) and below == pytest.approx(1 / 3)
    loss.backward()
    assert logp.grad is not None
    assert logp.grad[0].tolist() == pytest.approx([-(math.exp(0.5) - 1.0) / 3, 0.0, 0.0, 0.0])


def anchored_k3(model: Any, ref: Any, sample: Sample) -> float:
    """Mean k3 (``exp(ref - logp) - (ref - logp) - 1``) of ``model`` to ``ref`` over ``sample``'s learnt tokens."""
    batch = collate([Sample(input_ids=sample.input_ids, loss_mask=sample.loss_mask)], 0)
    with torch.no_grad():
        d = token_logprobs(ref, batch) - token_logprobs(model, batch)
        return float(((torch.exp(d) - d - 1.0) * batch.loss_mask).sum() / batch.loss_mask.sum())


def test_anchors_carry_the_kl_term_alone_and_do_not_thin_the_policy_gradient(tokenizer):
    """A tied group's trial held by ``kl_ties`` joins the update with its k3 to the reference and nothing else.

    Against a reference equal to the model (k3 and its gradient are 0) the update is the one without it, although
    the anchor is handed in with an advantage of 5 and GiGPO token advantages of 3: it trains as no policy sample
    and takes no share of the token mean the policy gradient is divided by. Against a moved reference, the SGD step
    with the anchor differs from the one without by exactly ``lr * kl_coef * grad(sum of its k3) / N``, N the
    trained tokens: an anchored token weighs what a trained token's KL weighs. The trained trials' stats stay
    theirs, and ``kl_ties`` is the anchor's mean k3, averaged over the updates."""
    model = tiny_model(tokenizer)

    def sample(text: str, advantage: float, group: str) -> Sample:
        ids = tokenizer(text)["input_ids"]
        mask = [0, 0] + [1] * (len(ids) - 2)
        probe = collate([Sample(input_ids=ids, loss_mask=mask)], 0)
        with torch.no_grad():
            own = [float(x) * m for x, m in zip(token_logprobs(model, probe)[0], mask, strict=True)]
        return Sample(input_ids=ids, loss_mask=mask, logprobs=own, advantage=advantage, group=group,
                      meta={"reward": max(advantage, 0.0)})  # fmt: skip

    trained = [sample("the customer asks where order W123 is", 1.0, "a"),
               sample("I cancelled the order and refunded the card", -1.0, "a")]  # fmt: skip
    held = sample("what is the status of my last order, please", 5.0, "b")
    held.token_advantages = [3.0] * len(held.input_ids)
    lr, beta = 0.05, 1.0
    cfg = config(Path("unused"), lr=lr, optimizer="sgd", packing=False, kl_coef=beta, kl_ties=1, max_grad_norm=1e9)

    def step(ref: Any, anchors: list[Sample], **kw: Any) -> tuple[Any, dict[str, float]]:
        m = copy.deepcopy(model)
        params = [p for p in m.parameters() if p.requires_grad]
        c = config(Path("unused"), **{**{k: getattr(cfg, k) for k in ("lr", "optimizer", "packing", "kl_coef",
                                                                          "kl_ties", "max_grad_norm")}, **kw})  # fmt: skip
        stats = update(m, ref, trained, make_optimizer(params, c), params, c, 0, anchors=anchors)
        return m, stats

    same = copy.deepcopy(model).eval()
    (plain, plain_stats), (held_, held_stats) = step(same, []), step(same, [held])
    assert all(torch.allclose(a, b, atol=1e-7) for a, b in zip(weights(plain).values(), weights(held_).values(),
                                                               strict=True))  # fmt: skip
    assert "kl_ties" not in plain_stats and held_stats["kl_ties"] == pytest.approx(0.0, abs=1e-6)
    assert held_stats["loss"] == pytest.approx(plain_stats["loss"], rel=1e-5)

    moved = copy.deepcopy(model).eval()
    with torch.no_grad():
        for p in moved.parameters():
            p.add_(0.02 * torch.randn_like(p))
    before = anchored_k3(model, moved, held)
    (plain, plain_stats), (kept, stats) = step(moved, []), step(moved, [held])
    # the gradient of the anchor's summed k3, by hand, over the trained tokens' count
    probe = copy.deepcopy(model)
    batch = collate([Sample(input_ids=held.input_ids, loss_mask=held.loss_mask)], 0)
    with torch.no_grad():
        ref_lp = token_logprobs(moved, batch)
    d = ref_lp - token_logprobs(probe, batch)
    ((torch.exp(d) - d - 1.0) * batch.loss_mask).sum().backward()
    count = sum(sum(s.loss_mask) for s in trained)
    grads, base = dict(probe.named_parameters()), dict(plain.named_parameters())
    want = torch.cat([(-lr * beta * grads[name].grad / count).flatten() for name, _ in kept.named_parameters()])
    got = torch.cat([(w.detach() - base[name].detach()).flatten() for name, w in kept.named_parameters()])
    # float32 weights near 1 resolve a ~1e-5 step to ~1%: the whole step's relative error is what is pinned
    assert float(want.norm()) > 0 and float((got - want).norm() / want.norm()) < 0.02
    assert before > 1e-3 and stats["kl_ties"] == pytest.approx(before, rel=1e-3)
    for key in ("loss", "kl", "clip_frac", "logprob_gap"):  # the trained trials' own figures
        assert stats[key] == pytest.approx(plain_stats[key], rel=1e-5, abs=1e-9), key
    _, twice = step(moved, [held], updates=2)  # a mean over the updates, not their sum
    assert twice["kl_ties"] == pytest.approx(before, rel=0.1)
    with pytest.raises(GRPOError) as info:
        step(None, [held])
    assert info.value.kind == "invalid_option" and "reference" in str(info.value)


def test_anchors_are_the_first_sampled_trials_of_each_group_left_out():
    def trial(group: str, number: int, **meta: Any) -> Sample:
        return Sample(input_ids=[1, 2, 3], loss_mask=[0, 1, 1] if meta.pop("learnt", True) else [0, 0, 0],
                      group=group, meta={"trial": number, **meta})  # fmt: skip

    samples = [trial("a", 0), trial("b", 0, rendered=True), trial("b", 1, learnt=False), trial("b", 2),
               trial("c", 0), trial("b", 3), trial("b", 4), trial("a", 1)]  # fmt: skip
    picked = [(s.group, s.meta["trial"]) for s in anchors_of(samples, {"a"}, 2)]
    assert picked == [("b", 2), ("c", 0), ("b", 3)]
    assert anchors_of(samples, {"a"}, 0) == [] and anchors_of(samples, {"a", "b", "c"}, 5) == []


def test_a_run_anchors_the_first_trials_of_each_tied_group_and_a_resume_must_keep_it(tokenizer, world, tasks,
                                                                                    tmp_path, monkeypatch):  # fmt: skip
    """Four tasks, two whose trials differ (trained on) and two that tie: with kl_ties 1 the update is handed trial
    0 of each tied group as its anchors and nothing of the trained ones; the step logs how many and their k3
    (0 at the first step, where the model is its own reference). Without kl_ties nothing is anchored."""
    import toolworld.train.grpo as grpo_mod

    many = [tasks[0].model_copy(update={"id": f"t{i}"}) for i in range(4)]
    spread = {"t0", "t1"}
    handed: list[tuple[set[str], list[tuple[str, int]]]] = []
    real = grpo_mod.update

    def spy(model, ref, samples, *args, **kwargs):  # type: ignore[no-untyped-def]
        handed.append(({s.group for s in samples}, [(s.group, s.meta["trial"]) for s in kwargs["anchors"]]))
        return real(model, ref, samples, *args, **kwargs)

    monkeypatch.setattr(grpo_mod, "update", spy)
    scorer = Recorder(lambda t: float(t.trial % 2) if t.task_id in spread else 0.0)
    runs = {}
    for ties in (1, 0):
        steps: list[Any] = []
        out = tmp_path / f"ties{ties}"
        train_grpo(tiny_model(tokenizer), tokenizer, world, many,
                   config(out, steps=1, tasks_per_step=4, kl_coef=0.5, kl_ties=ties, save_every=1), scorer=scorer,
                   on_step=steps.append)  # fmt: skip
        runs[ties] = (steps[0], json.loads((out / "train.jsonl").read_text().splitlines()[0]))
    (groups, anchors), (groups0, anchors0) = handed
    assert groups == groups0 == spread and sorted(anchors) == [("t2", 0), ("t3", 0)] and anchors0 == []
    step, line = runs[1]
    assert step.anchored == line["anchored"] == 2 and step.kl_ties == line["kl_ties"] == pytest.approx(0.0, abs=1e-6)
    step, line = runs[0]
    assert step.anchored == line["anchored"] == 0 and step.kl_ties is None and line["kl_ties"] is None
    tied: list[Any] = []  # every group tied: no update, so nothing was anchored either
    train_grpo(tiny_model(tokenizer), tokenizer, world, many,
               config(tmp_path / "tied", steps=1, tasks_per_step=4, kl_coef=0.5, kl_ties=1, save_trials=False),
               scorer=Recorder(lambda t: 0.0), on_step=tied.append)  # fmt: skip
    assert not tied[0].updated and tied[0].anchored == 0 and tied[0].kl_ties is None
    with pytest.raises(GRPOError) as info:
        train_grpo(tiny_model(tokenizer), tokenizer, world, many,
                   config(tmp_path / "ties1", steps=2, tasks_per_step=4, kl_coef=0.5, kl_ties=2, resume=True),
                   scorer=scorer)  # fmt: skip
    assert "kl_ties" in str(info.value)


def test_infra_errors_take_no_part(tokenizer, world, tasks, tmp_path):
    """An unscored trial (infra error) is neither in the reward mean nor in a group: its group is left alone."""

    class Broken(Recorder):
        def __call__(self, task: Any, traj: Any) -> Score:
            score = super().__call__(task, traj)
            return score.model_copy(update={"infra_error": traj.trial == 1, "reward": 0.0 if traj.trial else 0.5})

    model = tiny_model(tokenizer)
    before = weights(model)
    steps: list[Any] = []
    train_grpo(model, tokenizer, world, tasks[:1], config(tmp_path / "o", steps=1), scorer=Broken(),
               on_step=steps.append)  # fmt: skip
    assert steps[0].infra_errors == 1 and steps[0].reward == 0.5 and not steps[0].updated
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())


def test_reset_cache_drops_keys_of_old_weights(tokenizer):
    model = tiny_model(tokenizer).eval()
    engine = HFEngine(model=model, tokenizer=tokenizer, device="cpu", prefix_cache=True)
    prompt = tokenizer.encode("The customer asks to cancel order W123 and wants a refund to the card on file.")
    kw: dict[str, Any] = {"max_tokens": 6, "temperature": 1.0, "stop_ids": [], "seed": 3}
    engine.generate_sync(prompt, **kw)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    longer = [*prompt, *tokenizer.encode(" Thanks.")]
    stale = engine.generate_sync(longer, **kw)  # continues from keys the old weights computed
    fresh = HFEngine(model=model, tokenizer=tokenizer, device="cpu", prefix_cache=True).generate_sync(longer, **kw)
    engine.generate_sync(prompt, **kw)
    engine.reset_cache()
    reset = engine.generate_sync(longer, **kw)
    assert reset.ids == fresh.ids and reset.logprobs == pytest.approx(fresh.logprobs, abs=1e-5)
    assert stale.logprobs != pytest.approx(fresh.logprobs, abs=1e-5)


def test_pick_tasks_is_fixed_by_seed_and_step(tasks):
    many = [tasks[0].model_copy(update={"id": f"t{i}"}) for i in range(10)]
    assert pick_tasks(many, 3, 0, 5) == pick_tasks(many, 3, 0, 5)
    picks = [tuple(t.id for t in pick_tasks(many, 3, 0, s)) for s in range(6)]
    assert all(len(set(p)) == 3 for p in picks) and len(set(picks)) > 1
    assert pick_tasks(tasks, 8, 0, 0) == list(tasks)


def test_a_further_draw_picks_other_tasks_and_is_fixed_by_seed_step_and_draw(tasks):
    many = [tasks[0].model_copy(update={"id": f"t{i}"}) for i in range(10)]
    first = [t.id for t in pick_tasks(many, 3, 0, 5)]
    assert [t.id for t in pick_tasks(many, 3, 0, 5, draw=0, taken=["t0", "t1"])] == first  # draw 0: as before
    again = [t.id for t in pick_tasks(many, 3, 0, 5, draw=1, taken=first)]
    assert again == [t.id for t in pick_tasks(many, 3, 0, 5, draw=1, taken=first)]
    assert len(set(again)) == 3 and not set(again) & set(first)
    rest = [t.id for t in pick_tasks(many, 8, 0, 5, draw=2, taken=first + again)]
    assert sorted(rest) == sorted(set(t.id for t in many) - set(first) - set(again))  # fewer left than asked: all


def test_dynamic_sampling_draws_more_tasks_until_enough_groups_differ(tokenizer, world, tasks, tmp_path):
    """Only tasks t6..t9 give a spread: each draw of 2 tasks adds its groups, and the step stops drawing once 2
    groups differ (or after max_draws); every drawn trial is logged, and the update trains on the spread groups."""
    many = [tasks[0].model_copy(update={"id": f"t{i}"}) for i in range(10)]
    spread = {"t6", "t7", "t8", "t9"}
    scorer = Recorder(lambda t: float(t.trial % 2) if t.task_id in spread else 0.0)
    steps: list[Any] = []
    out = tmp_path / "dyn"
    model = tiny_model(tokenizer)
    before = weights(model)
    train_grpo(model, tokenizer, world, many, config(out, steps=2, min_groups=2, max_draws=4), scorer=scorer,
               on_step=steps.append)  # fmt: skip
    trials = [json.loads(line) for line in (out / "trials.jsonl").read_text().splitlines()]
    for entry in steps:
        played = [r["task_id"] for r in trials if r["step"] == entry.step][::2]
        draws = [played[i:i + 2] for i in range(0, len(played), 2)]
        hits = [sum(t in spread for t in d) for d in draws]
        assert len(set(played)) == len(played) == entry.tasks == 2 * entry.draws
        assert draws[0] == [t.id for t in pick_tasks(many, 2, 0, entry.step - 1)]  # draw 0 is the plain step's
        # it drew until 2 groups differed (or ran out of draws), and not once more
        assert all(sum(hits[:k]) < 2 for k in range(1, len(hits))) and (sum(hits) >= 2 or entry.draws == 4)
        assert entry.groups == sum(hits) and entry.updated == (sum(hits) > 0)
    assert any(e.draws > 1 for e in steps)  # the draws above need it: t0..t5 are 6 of 10
    assert any(not torch.equal(v, before[k]) for k, v in model.state_dict().items())
    log = [json.loads(line) for line in (out / "train.jsonl").read_text().splitlines()]
    assert [(e["tasks"], e["draws"]) for e in log] == [(e.tasks, e.draws) for e in steps]


def test_balanced_sampling_gathers_and_trains_as_many_groups_of_each_target(tokenizer, world, tasks, tmp_path):
    """Ten tasks, t0..t4 towards tool "a" and t5..t9 towards "b"; every group differs. min_groups 4 over 2 targets
    asks for 2 of each: a draw of 3 tasks that falls on one target is followed by draws from the other target
    only, and a target's groups beyond 2 are sampled but not trained on."""
    many = [tasks[0].model_copy(update={"id": f"t{i}", "provenance": tasks[0].provenance.model_copy(
        update={"targets": ["a" if i < 5 else "b"]})}) for i in range(10)]  # fmt: skip
    target = {t.id: target_of(t) for t in many}
    steps: list[Any] = []
    out = tmp_path / "bal"
    train_grpo(tiny_model(tokenizer), tokenizer, world, many,
               config(out, steps=3, tasks_per_step=3, min_groups=4, max_draws=4, balance=True), scorer=Recorder(),
               on_step=steps.append)  # fmt: skip
    trials = [json.loads(line) for line in (out / "trials.jsonl").read_text().splitlines()]
    lopsided = 0
    for entry in steps:
        played = [r["task_id"] for r in trials if r["step"] == entry.step][::2]
        first, later = played[:3], played[3:]
        assert first == [t.id for t in pick_tasks(many, 3, 0, entry.step - 1)]
        counts = {k: sum(target[t] == k for t in first) for k in "ab"}
        if min(counts.values()) < 2:  # one target short after the first draw: the next draws are all of it
            lopsided += 1
            short = min(counts, key=counts.get)
            assert later and all(target[t] == short for t in later)
        else:
            assert not later and entry.draws == 1
        assert entry.groups == 4 and entry.updated  # 2 of each, whatever more was drawn
    assert lopsided  # the seeds above give at least one such step
    with pytest.raises(GRPOError) as info:
        GRPOConfig(balance=True)
    assert info.value.kind == "invalid_option" and "min_groups" in str(info.value)


def test_dynamic_sampling_stops_at_max_draws_when_every_group_ties(tokenizer, world, tasks, tmp_path):
    many = [tasks[0].model_copy(update={"id": f"t{i}"}) for i in range(10)]
    steps: list[Any] = []
    train_grpo(tiny_model(tokenizer), tokenizer, world, many,
               config(tmp_path / "o", steps=1, min_groups=1, max_draws=3, save_trials=False),
               scorer=Recorder(lambda t: 0.5), on_step=steps.append)  # fmt: skip
    assert (steps[0].draws, steps[0].tasks, steps[0].trials, steps[0].groups) == (3, 6, 12, 0)
    assert not steps[0].updated
    # without min_groups a step makes its one draw, however many groups tie
    train_grpo(tiny_model(tokenizer), tokenizer, world, many, config(tmp_path / "p", steps=1, save_trials=False),
               scorer=Recorder(lambda t: 0.5), on_step=steps.append)  # fmt: skip
    assert (steps[1].draws, steps[1].tasks) == (1, 2)


# ---------------------------------------------------------------------------------------------- evaluation


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_evaluations_come_before_the_first_step_every_n_steps_and_after_the_last_on_the_same_seeds(
        tokenizer, world, tasks, held, tmp_path):  # fmt: skip
    """Tied training rewards make no update, so the weights never change and every evaluation must replay the
    very same trials (the seeds do not depend on the step); the evaluation reports the scorer's own reward
    (0.25, partial credit) where training turns it into success (0)."""
    out = tmp_path / "ev"
    scorer = Recorder(lambda t: 0.25)
    seen: list[Any] = []
    cfg = config(out, steps=3, eval_every=2, eval_trials=2, eval_temperature=0.8, reward="success")
    result = train_grpo(tiny_model(tokenizer), tokenizer, world, tasks[:1], cfg, scorer=scorer, eval_tasks=held,
                        on_eval=seen.append)  # fmt: skip
    assert [e.step for e in seen] == [e.step for e in result.evals] == [0, 2, 3]
    logged = lines(out / "eval.jsonl")
    assert [e["step"] for e in logged] == [0, 2, 3] and logged[0]["gain"] is None
    for e in logged:
        assert (e["pass1"], e["reward"], e["tasks"], e["trials"], e["temperature"]) == (0.0, 0.25, 1, 2, 0.8)
        assert e["per_task"] == {held[0].id: 0.0} and 0.0 == e["lo"] < e["hi"] < 1.0
    assert logged[1]["gain"]["gain"] == 0.0 and logged[1]["gain"]["tasks"] == 1
    trials = lines(out / "eval-trials.jsonl")
    assert [(t["step"], t["task_id"], t["trial"]) for t in trials] == [
        (step, held[0].id, k) for step in (0, 2, 3) for k in (0, 1)]
    by_step = {step: [t["trajectory"]["messages"] for t in trials if t["step"] == step] for step in (0, 2, 3)}
    assert by_step[0] == by_step[2] == by_step[3] and by_step[0][0] != by_step[0][1]  # same seeds, two draws
    # training never played an evaluation task, and evaluation trials are not training trials
    assert {t["task_id"] for t in lines(out / "trials.jsonl")} == {tasks[0].id}


def test_a_pipeline_that_evaluates_the_start_and_the_end_itself_can_skip_them(tokenizer, world, tasks, held, tmp_path):
    cfg = config(tmp_path / "fl", steps=3, eval_every=1, eval_first=False, eval_last=False)
    result = train_grpo(tiny_model(tokenizer), tokenizer, world, tasks[:1], cfg, scorer=Recorder(lambda t: 0.0),
                        eval_tasks=held)  # fmt: skip
    assert [e.step for e in result.evals] == [1, 2] and result.evals[0].gain is None
    assert result.evals[1].gain is not None and result.evals[1].gain["gain"] == 0.0


def test_an_evaluation_plays_the_weights_just_updated_at_its_own_temperature(tokenizer, world, tasks, held, tmp_path):
    """With a separate sampler (a twin synced from the trained weights), the evaluation after step 1 samples from
    the weights step 1 left: its stored logprobs are the trained model's at the evaluation's temperature. The
    policy synced for an evaluation then samples the next step, so nothing is synced twice."""
    model = tiny_model(tokenizer)
    cfg = config(tmp_path / "tw", steps=2, temperature=0.7, eval_every=1, eval_trials=2, eval_temperature=1.3)
    calls: list[int] = []

    def synced(m: Any, step: int) -> Any:
        calls.append(step)
        twin = copy.deepcopy(m).eval()
        return TokenPolicy(HFEngine(model=twin, tokenizer=tokenizer, device="cpu"), tokenizer, name="twin",
                           max_tokens=12, temperature=0.7, tool_prompt=cfg.tool_prompt)  # fmt: skip

    scorer = Recorder()
    after: list[Any] = []
    result = train_grpo(model, tokenizer, world, tasks[:1], cfg, sampler=synced, scorer=scorer, eval_tasks=held,
                        on_step=lambda e: after.append(copy.deepcopy(model)))  # fmt: skip
    assert calls == [0, 1, 2] and [e.step for e in result.evals] == [0, 1, 2]
    evaluated = [t for t in scorer.seen if t.task_id == held[0].id]
    assert len(evaluated) == 6
    for traj, weights_then in ((evaluated[2], after[0]), (evaluated[4], after[1])):
        buf = TokenBuffer.from_dict(traj.token_buffer)
        sample = Sample(input_ids=buf.ids, loss_mask=buf.mask, logprobs=[lp or 0.0 for lp in buf.logprobs])
        assert logprob_gap(weights_then, [sample], 0, temperature=1.3)["mean"] < 1e-4
        assert logprob_gap(weights_then, [sample], 0, temperature=0.7)["mean"] > 1e-2
    # the step-0 evaluation was not made by the updated weights
    buf = TokenBuffer.from_dict(evaluated[0].token_buffer)
    first = Sample(input_ids=buf.ids, loss_mask=buf.mask, logprobs=[lp or 0.0 for lp in buf.logprobs])
    assert logprob_gap(after[1], [first], 0, temperature=1.3)["mean"] > 1e-4


def test_a_resumed_run_keeps_its_evaluations_makes_each_once_and_redoes_one_cut_short(tokenizer, world, tasks, held,
                                                                                        tmp_path):  # fmt: skip
    out = tmp_path / "r"
    cfg = {"steps": 2, "eval_every": 1}  # no save_every: each evaluation after a step follows a checkpoint of it
    first = train_grpo(tiny_model(tokenizer), tokenizer, world, tasks[:1], config(out, **cfg), scorer=Recorder(),
                       eval_tasks=held)  # fmt: skip
    assert (out / "checkpoint-1").is_dir() and (out / "checkpoint-2").is_dir()
    shutil.rmtree(out / "checkpoint-2")
    shutil.rmtree(out / "final")
    # step 1's evaluation was cut short by Ctrl-C: its trials half written, its line (written last) not at all
    trials = (out / "eval-trials.jsonl").read_text().splitlines()
    (out / "eval-trials.jsonl").write_text("\n".join(trials[:2]) + "\n" + trials[2][:40])  # the last line cut off
    (out / "eval.jsonl").write_text((out / "eval.jsonl").read_text().splitlines()[0] + "\n")
    seen: list[Any] = []
    result = train_grpo(tiny_model(tokenizer), tokenizer, world, tasks[:1], config(out, resume=True, **cfg),
                        scorer=Recorder(), eval_tasks=held, on_eval=seen.append)  # fmt: skip
    assert result.resumed_from == 1 and [e.step for e in seen] == [1, 2]
    assert [e.step for e in result.evals] == [0, 1, 2]
    assert [e["step"] for e in lines(out / "eval.jsonl")] == [0, 1, 2]
    assert [t["step"] for t in lines(out / "eval-trials.jsonl")] == [0, 1, 2]
    assert result.evals[2].per_task == first.evals[2].per_task and result.evals[2].gain is not None
    # gains are over the first evaluation, so a resumed run must evaluate as it did
    shutil.rmtree(out / "final")
    shutil.rmtree(out / "checkpoint-2")
    for kw, eval_tasks in (({"eval_trials": 2, "eval_temperature": 0.5}, held), ({}, [*held, *tasks[1:]])):
        with pytest.raises(GRPOError) as info:
            train_grpo(tiny_model(tokenizer), tokenizer, world, tasks[:1], config(out, resume=True, **{**cfg, **kw}),
                       scorer=Recorder(), eval_tasks=eval_tasks)  # fmt: skip
        assert info.value.kind == "run_mismatch" and "eval.jsonl" in str(info.value)


def test_a_task_whose_trials_were_lost_to_infra_errors_weighs_as_any_other(tokenizer, world, tasks, tmp_path):
    """pass^1 over several trials a task is the mean of the tasks' pass rates, the quantity its interval is about: a
    task with one scored trial of two counts once, not half (pass^1 stays inside its interval)."""
    held2 = generate("retail", 2, seed=1, sampler="target").tasks

    class Flaky(Recorder):
        def __call__(self, task: Any, traj: Any) -> Score:
            score = super().__call__(task, traj)
            if task.id == held2[0].id:
                return score.model_copy(update={"success": True, "reward": 1.0})
            if task.id == held2[1].id:
                return score.model_copy(update={"success": False, "reward": 0.0, "infra_error": traj.trial == 0})
            return score

    cfg = config(tmp_path / "fl", steps=1, eval_every=1, eval_trials=2, eval_temperature=0.5, eval_last=False)
    result = train_grpo(tiny_model(tokenizer), tokenizer, world, tasks[:1], cfg, scorer=Flaky(), eval_tasks=held2)
    ev = result.evals[0]
    assert ev.per_task == {held2[0].id: 1.0, held2[1].id: 0.0} and ev.infra_errors == 1
    assert ev.pass1 == 0.5 and ev.lo <= ev.pass1 <= ev.hi  # 2 of 3 scored trials passed, but one task of two


def test_evaluation_options_are_refused_before_anything_is_played(tokenizer, world, tasks, held, tmp_path):
    for bad in ({"eval_trials": 2}, {"eval_every": -1}, {"eval_temperature": -0.5}):
        with pytest.raises(GRPOError) as info:
            GRPOConfig(**bad)
        assert info.value.kind == "invalid_option" and next(iter(bad)) in str(info.value)
    scorer = Recorder()
    cases = [({"eval_every": 1}, None, "invalid_option"), ({}, held, "invalid_option"),
             ({"eval_every": 1}, [*held, tasks[0]], "eval_overlap")]  # fmt: skip
    for i, (kw, eval_tasks, kind) in enumerate(cases):
        with pytest.raises(GRPOError) as info:
            train_grpo(tiny_model(tokenizer), tokenizer, world, tasks[:1], config(tmp_path / str(i), **kw),
                       scorer=scorer, eval_tasks=eval_tasks)  # fmt: skip
        assert info.value.kind == kind
    assert not scorer.seen

    class NoTemperature:  # a policy that cannot be told to decode greedily: refused before any step is trained
        def __init__(self, policy: Any) -> None:
            self.inner, self.name, self.tool_prompt = policy, policy.name, policy.tool_prompt

        def start(self, **kw: Any) -> Any:
            return self.inner.start(**kw)

    def wrapped(m: Any, step: int) -> Any:
        return NoTemperature(TokenPolicy(HFEngine(model=m, tokenizer=tokenizer, device="cpu"), tokenizer, name="n",
                                         max_tokens=4, temperature=1.0))  # fmt: skip

    with pytest.raises(GRPOError) as info:
        train_grpo(tiny_model(tokenizer), tokenizer, world, tasks[:1],
                   config(tmp_path / "nt", eval_every=1, eval_first=False), sampler=wrapped, scorer=scorer,
                   eval_tasks=held)  # fmt: skip
    assert info.value.kind == "invalid_option" and "temperature" in str(info.value) and not scorer.seen


def test_a_policy_at_another_temperature_shares_its_engine_and_leaves_the_original_alone(tokenizer):
    engine = HFEngine(model=tiny_model(tokenizer), tokenizer=tokenizer, device="cpu")
    policy = TokenPolicy(engine, tokenizer, name="p", max_tokens=4, temperature=0.7)
    greedy = at_temperature(policy, 0.0)
    assert (greedy.temperature, policy.temperature) == (0.0, 0.7) and greedy.engine is policy.engine
    with pytest.raises(GRPOError) as info:
        at_temperature(object(), 0.0)
    assert info.value.kind == "invalid_option"


def test_config_errors_are_structured():
    for bad in ({"group": 1}, {"advantage": "ppo"}, {"reward": "pass"}, {"temperature": 0.0}, {"optimizer": "lion"},
                {"max_len": 100, "batch_tokens": 50}, {"min_groups": -1}, {"max_draws": 0},
                {"neg_weight": -0.5}, {"overlong_penalty": -0.1}, {"overlong_penalty": float("nan")},
                {"kl_ties": -1}, {"kl_ties": 1}, {"sft_floor": -1.0}, {"sft_floor": 1.0}):
        with pytest.raises(GRPOError) as info:
            GRPOConfig(**bad)
        assert info.value.kind == "invalid_option" and next(iter(bad)) in str(info.value)


def test_neg_weight_reaches_the_update_and_a_resume_must_keep_it(tokenizer, world, tasks, tmp_path, monkeypatch):
    """--neg-weight 0: the update sees the failed trial of each group at advantage 0, the passed one as GRPO gives
    it; resuming the run with another weight is refused (it would be another experiment)."""
    import toolworld.train.grpo as grpo_mod

    seen: list[list[float]] = []
    real = grpo_mod.update

    def spy(model, ref, samples, *args, **kwargs):  # type: ignore[no-untyped-def]
        seen.extend([s.meta["reward"], s.advantage] for s in samples)
        return real(model, ref, samples, *args, **kwargs)

    monkeypatch.setattr(grpo_mod, "update", spy)
    out = tmp_path / "neg"
    train_grpo(tiny_model(tokenizer), tokenizer, world, tasks[:1], config(out, steps=1, neg_weight=0.0, save_every=1),
               scorer=Recorder())  # fmt: skip
    assert [x for pair in sorted(seen) for x in pair] == pytest.approx([0.0, 0.0, 1.0, 0.7071], abs=1e-4)
    with pytest.raises(GRPOError) as info:
        train_grpo(tiny_model(tokenizer), tokenizer, world, tasks[:1],
                   config(out, steps=2, neg_weight=0.5, resume=True), scorer=Recorder())  # fmt: skip
    assert "neg_weight" in str(info.value)


def test_overlong_penalty_ranks_a_cut_trial_below_a_wrong_answer():
    """Only a trial a turn's token cap ended loses the penalty; its verdict is kept, and under a success reward a
    cut failure ends below a failure that answered, so the two no longer tie at 0."""
    from types import SimpleNamespace

    def verdict(task: Any, traj: Any) -> Score:
        return Score(task_id="t", trial=traj.trial, reward=0.6 if traj.ok else 0.2, success=traj.ok)

    scorer = penalize_overlong(success_only(verdict), 0.5)
    got = {(ok, end): scorer(None, SimpleNamespace(trial=0, ok=ok, termination=end))
           for ok in (True, False) for end in ("answered", "max_tokens", "max_turns")}  # fmt: skip
    assert {k: v.reward for k, v in got.items()} == {
        (True, "answered"): 1.0, (True, "max_tokens"): 0.5, (True, "max_turns"): 1.0,
        (False, "answered"): 0.0, (False, "max_tokens"): -0.5, (False, "max_turns"): 0.0}
    assert [v.success for v in got.values()] == [True] * 3 + [False] * 3
    assert penalize_overlong(verdict, 0.0)(None, SimpleNamespace(trial=0, ok=False, termination="max_tokens")).reward \
        == 0.2  # fmt: skip
    with pytest.raises(GRPOError) as info:
        penalize_overlong(verdict, -1.0)
    assert info.value.kind == "invalid_option"


def test_overlong_penalty_reaches_the_update_and_a_resume_must_keep_it(tokenizer, world, tasks, tmp_path, monkeypatch):
    """The update is told each trial's reward less the penalty where its turn was cut (at max_tokens 12 a random
    model's turns are), and a resume with another penalty is refused."""
    import toolworld.train.grpo as grpo_mod

    seen: list[tuple[int, str, float]] = []
    real = grpo_mod.update

    def spy(model, ref, samples, *args, **kwargs):  # type: ignore[no-untyped-def]
        seen.extend((s.meta["trial"], s.meta["termination"], s.meta["reward"]) for s in samples)
        return real(model, ref, samples, *args, **kwargs)

    monkeypatch.setattr(grpo_mod, "update", spy)
    out = tmp_path / "overlong"
    train_grpo(tiny_model(tokenizer), tokenizer, world, tasks[:1],
               config(out, steps=1, overlong_penalty=0.25, save_every=1), scorer=Recorder())  # fmt: skip
    assert seen and any(end == "max_tokens" for _, end, _ in seen)
    assert all(r == pytest.approx(trial % 2 - (0.25 if end == "max_tokens" else 0.0)) for trial, end, r in seen)
    with pytest.raises(GRPOError) as info:
        train_grpo(tiny_model(tokenizer), tokenizer, world, tasks[:1],
                   config(out, steps=2, overlong_penalty=0.5, resume=True), scorer=Recorder())  # fmt: skip
    assert "overlong_penalty" in str(info.value)


# ----------------------------------------------------------------------------------------------------- rft


def test_rft_learns_only_the_passed_trials_token_for_token(tokenizer, world, tasks, tmp_path):
    model = tiny_model(tokenizer)
    scorer = Recorder()  # odd trials pass
    sft = SFTConfig(out=tmp_path / "rft", max_steps=1, lr=1e-3, max_len=8192, batch_tokens=8192)
    result = train_rft(model, tokenizer, world, tasks, k=2, config=sft, max_tokens=8, scorer=scorer)
    assert (result.trials, result.passed, result.kept) == (4, 2, 2)
    rows = [json.loads(line) for line in (tmp_path / "rft" / SAMPLES_FILE).read_text().splitlines()]
    assert {r["trial"] for r in rows} == {1} and {r["task_id"] for r in rows} == {t.id for t in tasks}
    for row in rows:
        traj = next(t for t in scorer.seen if (t.task_id, t.trial) == (row["task_id"], row["trial"]))
        buf = TokenBuffer.from_dict(traj.token_buffer)
        assert row["input_ids"] == buf.ids and row["loss_mask"] == buf.mask
    assert json.loads((tmp_path / "rft" / SUMMARY_FILE).read_text())["kept"] == 2
    assert result.sft is not None and result.sft.steps == 1 and (tmp_path / "rft" / "final" / "config.json").is_file()


def test_rft_without_a_passed_trial_says_so(tokenizer, world, tasks, tmp_path):
    sft = SFTConfig(out=tmp_path / "rft", max_steps=1, max_len=8192, batch_tokens=8192)
    with pytest.raises(SFTError) as info:
        train_rft(tiny_model(tokenizer), tokenizer, world, tasks[:1], k=2, config=sft, max_tokens=4,
                  scorer=Recorder(lambda t: 0.0))  # fmt: skip
    assert info.value.kind == "no_successful_trials"


# ----------------------------------------------------------------------------------------------------- CLI


def test_cli_grpo_one_step(tokenizer, tasks, tmp_path):
    model_dir = tmp_path / "tiny"
    tiny_model(tokenizer).save_pretrained(model_dir)
    tokenizer.save_pretrained(model_dir)
    task_file = tmp_path / "tasks.jsonl"
    write_jsonl(task_file, tasks[:1])
    out = tmp_path / "out"
    args = ["train", "grpo", str(task_file), "--model", str(model_dir), "--out", str(out), "--steps", "1", "--group",
            "2", "--max-tokens", "6", "--device", "cpu", "--json"]  # fmt: skip
    res = runner.invoke(app, [*args, "--bf16"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    summary = json.loads(res.output.strip().splitlines()[-1])
    assert summary["steps"] == 1 and summary["final"] == str(out / "final") and not summary["interrupted"]
    assert (out / "final" / "config.json").is_file() and (out / "train.jsonl").is_file()
    again = runner.invoke(app, args, catch_exceptions=False)
    assert again.exit_code == 1 and json.loads(again.output.strip().splitlines()[-1])["error"]["type"] == "output_exists"
    bad = runner.invoke(app, [*args[:6], str(tmp_path / "o2"), "--advantage", "ppo"], catch_exceptions=False)
    assert json.loads(bad.output.strip().splitlines()[-1])["error"]["type"] == "invalid_option"
    lion = runner.invoke(app, [*args[:6], str(tmp_path / "o4"), "--optimizer", "lion"], catch_exceptions=False)
    error = json.loads(lion.output.strip().splitlines()[-1])["error"]
    assert error["type"] == "invalid_option" and "adamw, sgd" in error["message"]
    control = runner.invoke(app, [*args[:6], str(tmp_path / "o14"), "--reward-control", "reverse"],
                            catch_exceptions=False)  # fmt: skip
    error = json.loads(control.output.strip().splitlines()[-1])["error"]
    assert error["type"] == "invalid_option" and error["message"].startswith("--reward-control must be one of none")
    ties = runner.invoke(app, [*args[:6], str(tmp_path / "o-ties"), "--kl-ties", "1"], catch_exceptions=False)
    error = json.loads(ties.output.strip().splitlines()[-1])["error"]
    assert ties.exit_code != 0 and error["type"] == "invalid_option"
    assert error["message"].startswith("--kl-ties must be") and "unless --kl > 0" in error["message"]
    assert not (tmp_path / "o-ties" / "train.jsonl").exists()
    # dynamic sampling from the command line: a random model passes nothing, so the step draws until --max-draws
    write_jsonl(tmp_path / "two.jsonl", tasks[:2])
    dyn = runner.invoke(app, [*args[:2], str(tmp_path / "two.jsonl"), *args[3:6], str(tmp_path / "o5"), *args[7:],
                              "--tasks-per-step", "1", "--min-groups", "1", "--max-draws", "2"], catch_exceptions=False)
    assert dyn.exit_code == 0, dyn.output
    step = json.loads((tmp_path / "o5" / "train.jsonl").read_text().splitlines()[0])
    assert (step["draws"], step["tasks"], step["trials"], step["groups"]) == (2, 2, 4, 0)
    # a guide from the command line: the random model fails the task twice, gold passes it, and that group trains
    gui = runner.invoke(app, [*args[:6], str(tmp_path / "o9"), *args[7:], "--guide", "gold", "--reward", "success",
                              "--blame-invented"], catch_exceptions=False)  # fmt: skip
    assert gui.exit_code == 0, gui.output
    step = json.loads((tmp_path / "o9" / "train.jsonl").read_text().splitlines()[0])
    assert (step["trials"], step["pass1"], step["guided"], step["groups"], step["updated"]) == (2, 0.0, 1, 1, True)
    # --blame-invented reaches the run (a resume must keep it) and each step logs the turns it changed
    assert "blamed" in step
    assert json.loads((tmp_path / "o9" / "checkpoint-1" / "trainer_state.json").read_text())["config"]["blame_invented"]
    # a branch from the command line: the gold plays the task's first turns, the model the rest (0 turns: a task
    # the gold plays in one turn or a depth of 0 drawn; either way every trial's lead_turns is the drawn depth)
    br = runner.invoke(app, [*args[:6], str(tmp_path / "o-br"), *args[7:], "--branch", "gold"], catch_exceptions=False)
    assert br.exit_code == 0, br.output
    state = json.loads((tmp_path / "o-br" / "checkpoint-1" / "trainer_state.json").read_text())
    assert state["config"]["branch"] == "gold"
    depth = branch_depths(get_world("retail"), tasks[:1], GoldPolicy(), seed=0, step=0)[tasks[0].id]
    trials = [json.loads(x) for x in (tmp_path / "o-br" / TRIALS_FILE).read_text().splitlines()]
    assert [t["lead_turns"] for t in trials] == [depth, depth]
    bad_branch = runner.invoke(app, [*args[:6], str(tmp_path / "o-br2"), *args[7:], "--branch", "gold:bogus=1"],
                               catch_exceptions=False)  # fmt: skip
    error = json.loads(bad_branch.output.strip().splitlines()[-1])["error"]
    assert bad_branch.exit_code == 1 and error["type"] == "invalid_option" and "branch" in error["message"]
    # --branch-from-start plays some groups from the start instead of after the lead: without a lead it means nothing
    lone = runner.invoke(app, [*args[:6], str(tmp_path / "o-br3"), *args[7:], "--branch-from-start", "0.5"],
                         catch_exceptions=False)  # fmt: skip
    error = json.loads(lone.output.strip().splitlines()[-1])["error"]
    assert lone.exit_code == 1 and error["type"] == "invalid_option" and "--branch-from-start" in error["message"]
    assert not (tmp_path / "o-br3" / TRIALS_FILE).exists()
    lone = runner.invoke(app, [*args[:6], str(tmp_path / "o-br4"), *args[7:], "--branch-at", "pick"],
                         catch_exceptions=False)  # fmt: skip
    error = json.loads(lone.output.strip().splitlines()[-1])["error"]
    assert lone.exit_code == 1 and error["type"] == "invalid_option" and "--branch-at" in error["message"]
    # a supervised term from the command line: the task file's gold, played into OUT/sft-gold, in every update
    mix = runner.invoke(app, [*args[:6], str(tmp_path / "o11"), *args[7:], "--sft", str(task_file), "--sft-batch", "1",
                              "--guide", "gold", "--reward", "success"], catch_exceptions=False)  # the guide: an update
    assert mix.exit_code == 0, mix.output
    step = json.loads((tmp_path / "o11" / "train.jsonl").read_text().splitlines()[0])
    assert step["updated"] and step["sft_loss"] > 0
    assert (tmp_path / "o11" / "sft-gold" / "run.db").is_file()
    state = json.loads((tmp_path / "o11" / "checkpoint-1" / "trainer_state.json").read_text())
    assert (state["config"]["sft_coef"], state["config"]["sft_batch"]) == (1.0, 1)
    alone = runner.invoke(app, [*args[:6], str(tmp_path / "o12"), *args[7:], "--sft-coef", "0.5"], catch_exceptions=False)
    assert alone.exit_code == 1 and "--sft PATH" in json.loads(alone.output.strip().splitlines()[-1])["error"]["message"]
    naught = runner.invoke(app, [*args[:6], str(tmp_path / "o13"), *args[7:], "--sft", str(task_file), "--sft-coef", "0"],
                           catch_exceptions=False)  # fmt: skip
    assert naught.exit_code == 1 and "nothing" in json.loads(naught.output.strip().splitlines()[-1])["error"]["message"]
    assert not (tmp_path / "o13" / "sft-gold").exists()
    # the floor: it needs the conversations, and a reference (--kl or --lora), before anything is played
    floor = runner.invoke(app, [*args[:6], str(tmp_path / "o14"), *args[7:], "--sft-floor", "1"], catch_exceptions=False)
    assert floor.exit_code == 1 and "--sft PATH" in json.loads(floor.output.strip().splitlines()[-1])["error"]["message"]
    floor = runner.invoke(app, [*args[:6], str(tmp_path / "o15"), *args[7:], "--sft", str(task_file), "--sft-coef", "0",
                                "--sft-floor", "1"], catch_exceptions=False)  # fmt: skip
    error = json.loads(floor.output.strip().splitlines()[-1])["error"]
    assert floor.exit_code == 1 and error["type"] == "invalid_option" and error["message"].startswith("--sft-floor")
    assert "--kl" in error["message"]
    assert not (tmp_path / "o15" / "sft-gold").exists()
    bad_guide = runner.invoke(app, [*args[:6], str(tmp_path / "o10"), *args[7:], "--guide", "gold:bogus=1"],
                              catch_exceptions=False)  # fmt: skip
    error = json.loads(bad_guide.output.strip().splitlines()[-1])["error"]
    assert bad_guide.exit_code == 1 and error["type"] == "invalid_option" and "guide" in error["message"]
    # held-out evaluation from the command line: before the step and after it, in the JSON summary and eval.jsonl
    write_jsonl(tmp_path / "held.jsonl", generate("retail", 1, seed=1, sampler="target").tasks)
    ev = runner.invoke(app, [*args[:6], str(tmp_path / "o6"), *args[7:], "--eval-tasks", str(tmp_path / "held.jsonl")],
                       catch_exceptions=False)  # fmt: skip
    assert ev.exit_code == 0, ev.output
    evals = json.loads(ev.output.strip().splitlines()[-1])["evals"]
    assert [e["step"] for e in evals] == [0, 1] and evals[1]["gain"]["tasks"] == 1 and "per_task" not in evals[0]
    assert [e["step"] for e in lines(tmp_path / "o6" / "eval.jsonl")] == [0, 1]
    lone = runner.invoke(app, [*args[:6], str(tmp_path / "o7"), *args[7:], "--eval-every", "1"], catch_exceptions=False)
    assert lone.exit_code == 1 and "--eval-tasks" in json.loads(lone.output.strip().splitlines()[-1])["error"]["message"]
    # a config check names the options the user typed, not GRPOConfig's fields
    greedy = runner.invoke(app, [*args[:6], str(tmp_path / "o8"), *args[7:], "--eval-tasks",
                                 str(tmp_path / "held.jsonl"), "--eval-trials", "2"], catch_exceptions=False)  # fmt: skip
    said = json.loads(greedy.output.strip().splitlines()[-1])["error"]["message"]
    assert said.startswith("--eval-trials must be") and "at --eval-temperature 0" in said and "eval_" not in said
    lopsided = runner.invoke(app, [*args[:6], str(tmp_path / "o9"), *args[7:], "--balance-targets"],
                             catch_exceptions=False)  # fmt: skip
    said = json.loads(lopsided.output.strip().splitlines()[-1])["error"]["message"]
    assert said.startswith("--balance-targets must be") and "--min-groups >= 1" in said and "min_groups" not in said
    # LoRA from the command line (with --neg-weight, --overlong-penalty): its own default lr, the adapter in the
    # checkpoint, a merged final model
    lora = runner.invoke(app, [*args[:6], str(tmp_path / "o15"), *args[7:], "--lora", "--lora-r", "2",
                                "--neg-weight", "0.5", "--overlong-penalty", "0.25"], catch_exceptions=False)  # fmt: skip
    assert lora.exit_code == 0, lora.output
    saved = json.loads((tmp_path / "o15" / "checkpoint-1" / "trainer_state.json").read_text())["config"]
    assert (saved["lora"], saved["lora_r"], saved["lora_alpha"], saved["lr"], saved["neg_weight"],
            saved["overlong_penalty"]) == (True, 2, 4, 3e-5, 0.5, 0.25)  # fmt: skip
    assert (tmp_path / "o15" / "checkpoint-1" / "adapter_model.safetensors").is_file()
    assert (tmp_path / "o15" / "final" / "config.json").is_file()
    assert not (tmp_path / "o15" / "final" / "adapter_config.json").exists()
    missing = runner.invoke(app, ["train", "rft", str(tmp_path / "nope.jsonl"), "--model", str(model_dir), "--out",
                                  str(tmp_path / "o3"), "--k", "2"], catch_exceptions=False)  # fmt: skip
    assert json.loads(missing.output.strip().splitlines()[-1])["error"]["type"] == "not_found"
