"""The training core: samples from stored token buffers, exact sequence packing, advantage estimators against
hand-computed values, TIS and k3, and one GRPO step that moves logprobs the way the advantages say."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from gguf_kit import SMOLLM2  # noqa: E402
from toolworld.train import (  # noqa: E402
    Sample,
    TrainDataError,
    collate,
    pack,
    samples_from_sft,
    samples_from_tokens,
    truncate,
)
from toolworld.train.advantages import (  # noqa: E402
    Episode,
    Step,
    anchor_states,
    assign,
    gigpo,
    grpo,
    kl_k3,
    mc_grpo,
    tis_weights,
    turn_spans,
    weigh_negatives,
)
from toolworld.train.logprobs import logprob_gap, token_logprobs  # noqa: E402
from toolworld.train.losses import policy_loss, sft_loss  # noqa: E402

needs_shared = pytest.mark.skipif(not SMOLLM2.is_dir(), reason=f"needs the shared tokenizers at {SMOLLM2}")
R3 = 1 / math.sqrt(3)  # the unbiased std of [1, 0, 0, 1] and of [1, 0, 0]


def vocab_size() -> int:
    import json

    spec = json.loads((SMOLLM2 / "tokenizer.json").read_text())
    return max(len(spec["model"]["vocab"]), 1 + max(t["id"] for t in spec["added_tokens"]))


_MODELS: dict[str, Any] = {}


def tiny_llama(attn: str = "eager") -> Any:
    """A random-weight 2-layer Llama over SmolLM2's vocabulary (fresh per call: training tests change it)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=vocab_size(), hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=1024)  # fmt: skip
    config._attn_implementation = attn
    return LlamaForCausalLM(config).eval()


def sample(ids: list[int], first_sampled: int, *, advantage: float = 0.0, group: str = "t") -> Sample:
    mask = [0] * first_sampled + [1] * (len(ids) - first_sampled)
    return Sample(input_ids=ids, loss_mask=mask, logprobs=[-1.0 * m for m in mask], advantage=advantage, group=group)


# -- advantages, golden values -----------------------------------------------------------------------------


def test_grpo_normalises_within_the_group_and_dr_grpo_only_centres():
    assert grpo([1.0, 0.0, 0.0, 1.0]) == pytest.approx([0.5 / R3, -0.5 / R3, -0.5 / R3, 0.5 / R3], abs=1e-5)
    assert grpo([1.0, 0.0, 0.0, 1.0]) == pytest.approx([0.866025, -0.866025, -0.866025, 0.866025], abs=1e-5)
    assert grpo([1.0, 0.0, 0.0]) == pytest.approx([1.154700, -0.577350, -0.577350], abs=1e-5)
    assert grpo([1.0, 0.0, 0.0], scale=False) == pytest.approx([2 / 3, -1 / 3, -1 / 3])
    assert grpo([0.7, 0.7, 0.7]) == pytest.approx(
        [0.0, 0.0, 0.0], abs=1e-9
    )  # no spread, no signal (and no division by zero)
    assert grpo([1.0]) == [0.0] and grpo([]) == []


def test_mc_grpo_subtracts_the_median():
    assert mc_grpo([1.0, 0.0, 0.0]) == pytest.approx([1.0, 0.0, 0.0])  # the mean (1/3) would give -1/3 to failures
    assert mc_grpo([0.2, 0.5, 0.9, 1.0]) == pytest.approx([-0.5, -0.2, 0.2, 0.3])  # median 0.7
    assert mc_grpo([0.0, 10.0, 1.0]) == pytest.approx([-1.0, 9.0, 0.0])


def test_weigh_negatives_scales_only_what_pushes_down():
    plain = [Sample([1, 2], [0, 1], advantage=a) for a in (1.2, -0.4, 0.0)]
    per_token = Sample([1, 2, 3], [0, 1, 1], token_advantages=[0.5, -0.8, -0.2])
    weigh_negatives([*plain, per_token], 0.25)
    assert [s.advantage for s in plain] == pytest.approx([1.2, -0.1, 0.0])
    assert per_token.token_advantages == pytest.approx([0.5, -0.2, -0.05])
    weigh_negatives(plain, 0.0)  # successes only
    assert [s.advantage for s in plain] == pytest.approx([1.2, 0.0, 0.0])
    kept = Sample([1], [1], advantage=-0.7)
    assert weigh_negatives([kept], 1.0)[0].advantage == -0.7  # the plain gradient
    for bad in (-0.1, float("nan")):
        with pytest.raises(TrainDataError) as err:
            weigh_negatives([kept], bad)
        assert err.value.kind == "bad_negative_weight"


def test_assign_groups_samples_by_task_and_needs_a_reward():
    samples = [Sample([1, 2], [0, 1], group=g, meta={"reward": r}) for g, r in
               [("a", 1.0), ("b", 1.0), ("a", 0.0), ("b", 1.0)]]  # fmt: skip
    assign(samples)
    assert [s.advantage for s in samples] == pytest.approx([0.707106, 0.0, -0.707106, 0.0], abs=1e-5)
    assign(samples, mc_grpo)
    assert [s.advantage for s in samples] == pytest.approx([0.5, 0.0, -0.5, 0.0])
    with pytest.raises(TrainDataError) as err:
        assign([Sample([1], [1], group="a", meta={})])
    assert err.value.kind == "missing_reward"


def test_gigpo_adds_step_advantages_within_anchor_states_of_one_task():
    # Task t: trial A (reward 1) and trial B (reward 0) both act in state s0 first, then in different states.
    # Episode level: grpo([1, 0]) = [+1/sqrt(2), -1/sqrt(2)] = [+0.70711, -0.70711].
    # Discounted returns (gamma 0.5, outcome on the last step): A: [0.5, 1.0], B: [0.0, 0.0].
    # Anchor s0 = {A step 0: 0.5, B step 0: 0.0} -> [+0.70711, -0.70711]; s1 and s2 are singletons -> 0.
    # Trial C of another task also passes through a state hashed s0: it must not join t's anchor group.
    a = Episode("t", 1.0, 9, [Step("s0", (2, 4)), Step("s1", (6, 8), reward=1.0)])
    b = Episode("t", 0.0, 6, [Step("s0", (1, 3)), Step("s2", (4, 5))])
    c = Episode("u", 0.3, 3, [Step("s0", (0, 3), reward=0.3)])
    h = 1 / math.sqrt(2)
    adv_a, adv_b, adv_c = gigpo([a, b, c], gamma=0.5)
    assert adv_a == pytest.approx([h, h, 2 * h, 2 * h, h, h, h, h, h], abs=1e-5)
    assert adv_b == pytest.approx([-h, -2 * h, -2 * h, -h, -h, -h], abs=1e-5)
    assert adv_c == [0.0, 0.0, 0.0]
    adv_a, adv_b, _ = gigpo([a, b, c], gamma=0.5, step_weight=0.5, scale=False)
    # unscaled: episode [0.5, -0.5]; anchor s0 returns [0.5, 0.0] -> [0.25, -0.25], weighted by 0.5
    assert adv_a[2:4] == pytest.approx([0.625, 0.625]) and adv_a[6] == pytest.approx(0.5)
    assert adv_b[1:3] == pytest.approx([-0.625, -0.625]) and adv_b[0] == pytest.approx(-0.5)
    with pytest.raises(TrainDataError) as err:
        gigpo([Episode("t", 1.0, 3, [Step("s0", (2, 5))])])
    assert err.value.kind == "bad_span"


def _read_only_trial(results: list[str], wording: str = "Let me look.", trial: int = 0, drop_turn: bool = False):  # type: ignore[no-untyped-def]
    """A hand-built info trial: every turn reads, so the world's state hash never changes."""
    from toolworld.records.trajectory import Trajectory

    messages: list[dict[str, Any]] = [{"role": "system", "content": "policy"}, {"role": "user", "content": "status?"}]
    for i, result in enumerate(results):
        call = {"id": f"c{trial}{i}", "type": "function", "function": {"name": "get", "arguments": "{}"}}
        messages += [{"role": "assistant", "content": f"{wording} {i}", "tool_calls": [call]},
                     {"role": "tool", "tool_call_id": call["id"], "content": result}]  # fmt: skip
    messages.append({"role": "assistant", "content": "done"})
    turns = [{"index": i, "latency_s": 0.1, "state_hash": "db0"} for i in range(len(results) + 1 - drop_turn)]
    return Trajectory.model_validate({"task_id": "t", "world": "retail", "seed": 0, "trial": trial, "policy": "p",
                                      "user": "scripted", "messages": messages, "turns": turns,
                                      "termination": "answered"})  # fmt: skip


def test_anchor_states_tell_read_only_turns_apart_and_match_the_same_situation_across_trials():
    a = anchor_states(_read_only_trial(["orders: #1, #2", "#1: delivered"]))
    # one world state throughout, yet each turn stands in its own situation (what it had been shown differs)
    assert len(a) == 3 and len(set(a)) == 3
    # another trial shown the same things, in its own words and call ids: the same anchors, turn for turn
    assert anchor_states(_read_only_trial(["orders: #1, #2", "#1: delivered"], wording="Checking", trial=1)) == a
    # a trial that read another order shares the situations up to the differing result, not after
    b = anchor_states(_read_only_trial(["orders: #1, #2", "#2: pending"], trial=2))
    assert b[:2] == a[:2] and b[2] != a[2]
    with pytest.raises(TrainDataError) as err:
        anchor_states(_read_only_trial(["orders: #1, #2"], drop_turn=True))
    assert err.value.kind == "turns_mismatch"


def test_gigpo_on_read_only_trials_has_no_bias_by_turn_position():
    """With the world's state as the only anchor, every turn of these trials would be one group, and a first turn
    (discounted return gamma^2 R) would be pushed below a last one (R) in the winner itself. With observation
    anchors each turn is compared with the same turn of the other trial."""
    from toolworld.train.advantages import episode_from_trajectory

    episodes = []
    for trial, reward in ((0, 1.0), (1, 0.0)):
        traj = _read_only_trial(["orders: #1, #2", "#1: delivered"], trial=trial)
        mask = [0, 1, 1, 0, 1, 1, 0, 1, 1]  # three turns of two sampled tokens
        sample = Sample(input_ids=list(range(len(mask))), loss_mask=mask, group="t")
        episodes.append(episode_from_trajectory(traj, sample, reward))
    win, lose = gigpo(episodes, gamma=0.5)
    h = 1 / math.sqrt(2)
    # every sampled token of the winner: episode +h plus step +h; of the loser: -h - h; prompt tokens: the episode's
    assert [win[i] for i in (1, 4, 7)] == pytest.approx([2 * h] * 3, abs=1e-4)
    assert [lose[i] for i in (1, 4, 7)] == pytest.approx([-2 * h] * 3, abs=1e-4)
    assert win[0] == pytest.approx(h, abs=1e-4) and lose[0] == pytest.approx(-h, abs=1e-4)


def test_turn_spans_are_the_runs_of_sampled_tokens():
    assert turn_spans([0, 1, 1, 0, 0, 1, 0, 1]) == [(1, 3), (5, 6), (7, 8)]
    assert turn_spans([0, 0]) == []


def test_tis_caps_the_weight_and_k3_is_a_nonnegative_kl():
    new = torch.tensor([0.0, -1.0, 2.0, 0.5])
    old = torch.tensor([0.0, 0.0, 0.0, 0.0])
    assert tis_weights(new, old, cap=2.0).tolist() == pytest.approx([1.0, math.exp(-1), 2.0, math.exp(0.5)])
    assert tis_weights(new, old, cap=1.5).max().item() == pytest.approx(1.5)
    # d = ref - logp = -1: e^-1 + 1 - 1 = 0.367879; d = +1: e - 2 = 0.718282; d = 0: 0
    k3 = kl_k3(torch.tensor([-1.0, -2.0, -3.0]), torch.tensor([-2.0, -1.0, -3.0]))
    assert k3.tolist() == pytest.approx([0.367879, 0.718282, 0.0], abs=1e-6)


# -- samples and batches -----------------------------------------------------------------------------------


def test_samples_from_rows_keep_the_stored_tokens_and_reject_ragged_ones():
    rows = [{"task_id": "t1", "trial": 0, "reward": 1.0, "success": True, "input_ids": [5, 6, 7],
             "loss_mask": [0, 1, 1], "logprobs": [0.0, -0.5, None]}]  # fmt: skip
    (s,) = samples_from_tokens(rows)
    assert (s.input_ids, s.loss_mask, s.logprobs, s.group) == ([5, 6, 7], [0, 1, 1], [0.0, -0.5, 0.0], "t1")
    assert s.meta == {"task_id": "t1", "trial": 0, "reward": 1.0, "success": True}
    (f,) = samples_from_sft([{"task_id": "t2", "input_ids": [1, 2], "assistant_masks": [0, 1], "messages": []}])
    assert (f.loss_mask, f.logprobs, f.meta) == ([0, 1], None, {"task_id": "t2", "messages": []})
    with pytest.raises(TrainDataError) as err:
        samples_from_tokens([{**rows[0], "loss_mask": [0, 1]}])
    assert err.value.kind == "length_mismatch" and "t1" in str(err.value)
    with pytest.raises(TrainDataError) as err:
        samples_from_sft([{"input_ids": [1]}])
    assert err.value.kind == "missing_column"


def test_truncate_cuts_every_per_token_list():
    s = Sample([1, 2, 3, 4], [0, 1, 1, 1], [0.0, -1.0, -2.0, -3.0], token_advantages=[0.0, 1.0, 2.0, 3.0])
    t = truncate(s, 2)
    assert (t.input_ids, t.loss_mask, t.logprobs, t.token_advantages) == ([1, 2], [0, 1], [0.0, -1.0], [0.0, 1.0])
    assert t.meta["truncated_from"] == 4 and len(s) == 4
    assert truncate(s, 10) is s


def test_collate_pads_right_and_spreads_advantages_over_the_loss_mask():
    b = collate([sample([3, 4, 5], 1, advantage=2.0), Sample([6, 7], [1, 1], token_advantages=[0.5, -0.5])], 9)
    assert b.input_ids.tolist() == [[3, 4, 5], [6, 7, 9]]
    assert b.attention_mask.tolist() == [[1, 1, 1], [1, 1, 0]]
    assert b.advantages.tolist() == [[0.0, 2.0, 2.0], [0.5, -0.5, 0.0]]
    assert b.old_logprobs.tolist() == [[0.0, -1.0, -1.0], [0.0, 0.0, 0.0]] and b.n_samples == 2


def test_pack_fills_rows_greedily_and_keeps_samples_apart():
    samples = [sample([1, 2, 3], 1), sample([4, 5], 1), sample([6, 7, 8, 9], 1), sample([10], 0)]
    batches = pack(samples, 5, 0)
    assert [b.input_ids.tolist() for b in batches] == [[[1, 2, 3, 4, 5]], [[6, 7, 8, 9, 10]]]
    first = batches[0]
    assert first.position_ids.tolist() == [[0, 1, 2, 0, 1]] and first.segment_ids.tolist() == [[1, 1, 1, 2, 2]]
    allowed = (first.attention_mask[0, 0] == 0).int().tolist()
    assert allowed == [[1, 0, 0, 0, 0], [1, 1, 0, 0, 0], [1, 1, 1, 0, 0], [0, 0, 0, 1, 0], [0, 0, 0, 1, 1]]
    two_rows = pack(samples, 5, 0, rows_per_batch=2)
    assert len(two_rows) == 1 and tuple(two_rows[0].attention_mask.shape) == (2, 1, 5, 5)
    padded = pack([sample([1, 2, 3], 1), sample([4, 5], 1), sample([6, 7, 8], 1)], 5, 0, rows_per_batch=2)[0]
    assert padded.segment_ids.tolist() == [[1, 1, 1, 2, 2], [1, 1, 1, 0, 0]]
    assert padded.loss_mask[1].tolist() == [0, 1, 1, 0, 0]
    assert (padded.attention_mask[1, 0, 3] == 0).int().tolist() == [0, 0, 0, 1, 0]  # padding attends to itself only
    with pytest.raises(TrainDataError) as err:
        pack(samples, 3, 0)
    assert err.value.kind == "sample_too_long" and "truncate" in str(err.value)


@needs_shared
@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_packed_rows_give_the_same_logprobs_as_unpacked_ones(attn):
    model = tiny_llama(attn)
    gen = torch.Generator().manual_seed(1)
    samples = [sample(torch.randint(0, 49000, (n,), generator=gen).tolist(), 2) for n in (7, 12, 5, 9)]
    with torch.no_grad():
        alone = [token_logprobs(model, collate([s], 0), positions="all")[0] for s in samples]
        padded = token_logprobs(model, collate(samples, 0), positions="all")
        packed = [token_logprobs(model, b, positions="all") for b in pack(samples, 21, 0, rows_per_batch=2)]
    assert [tuple(p.shape) for p in packed] == [(2, 19)]  # rows: 7 + 12 and 5 + 9, padded to the longer
    rows = packed[0]
    spans = [(0, 0, 7), (0, 7, 19), (1, 0, 5), (1, 5, 14)]
    for k, (s, (r, a, b)) in enumerate(zip(samples, spans, strict=True)):
        assert alone[k][0] == 0.0 and bool((alone[k][1:] < 0).all())
        assert torch.allclose(rows[r, a:b], alone[k], atol=1e-5), (k, rows[r, a:b], alone[k])
        assert torch.allclose(padded[k, : len(s)], alone[k], atol=1e-5)
    assert bool((rows[1, 14:] == 0).all())  # padding scores nothing


@needs_shared
def test_sft_loss_is_the_mean_nll_of_the_masked_tokens():
    model = tiny_llama()
    s = sample([11, 12, 13, 14, 15], 3)
    with torch.no_grad():
        lp = token_logprobs(model, collate([s], 0))[0]
        loss = sft_loss(model, pack([s, sample([1, 2], 1)], 8, 0)[0])
    # the packed batch holds both samples: (-lp[3] - lp[4] - lp_other[1]) / 3
    other = token_logprobs(model, collate([sample([1, 2], 1)], 0))[0, 1].item()
    assert loss.item() == pytest.approx((-lp[3].item() - lp[4].item() - other) / 3, abs=1e-5)
    with pytest.raises(TrainDataError) as err:
        sft_loss(model, collate([sample([1, 2], 2)], 0))
    assert err.value.kind == "empty_loss_mask"


# -- policy loss -------------------------------------------------------------------------------------------


@needs_shared
def test_one_grpo_step_raises_the_positive_sample_and_lowers_the_negative_one():
    model = tiny_llama()
    # different tokens, so one sample's update barely touches the other's logprobs
    up, down = (
        sample([100, 200, 300, 400, 500, 600], 2, advantage=1.0),
        sample([7, 8, 9, 10, 11, 12], 2, advantage=-1.0),
    )
    batch = collate([up, down], 0)
    mask = batch.loss_mask.bool()
    with torch.no_grad():
        before = token_logprobs(model, batch)
    batch.old_logprobs = before.clone() * batch.loss_mask  # the sampler was the trainer: no mismatch
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    model.train()
    loss, stats = policy_loss(model, batch)
    opt.zero_grad()
    loss.backward()
    opt.step()
    with torch.no_grad():
        after = token_logprobs(model.eval(), batch)
    delta = ((after - before) * batch.loss_mask).sum(dim=1)
    assert delta[0] > 1e-4 and delta[1] < -1e-4, delta
    assert bool((after - before)[0][mask[0]].gt(0).all()) and bool((after - before)[1][mask[1]].lt(0).all())
    assert stats["ratio"] == pytest.approx(1.0) and stats["clip_frac"] == 0.0
    assert stats["logprob_gap"] == pytest.approx(0.0, abs=1e-6) and stats["tis"] == pytest.approx(1.0)


@needs_shared
def test_policy_loss_clips_drifted_ratios_and_weights_the_sampler_mismatch():
    model = tiny_llama()
    s = sample([21, 22, 23, 24], 1, advantage=1.0)
    batch = collate([s], 0)
    with torch.no_grad():
        lp = token_logprobs(model, batch)
    mask = batch.loss_mask
    # pi_old far below pi (ratio e^1 > 1.2) with A > 0: every token clipped, no gradient from the surrogate
    loss, stats = policy_loss(model, batch, old_logprobs=lp - 1.0)
    assert stats["clip_frac"] == 1.0 and stats["ratio"] == pytest.approx(math.e, rel=1e-4)
    loss.backward()
    assert all(p.grad is None or float(p.grad.abs().max()) == 0.0 for p in model.parameters())
    # the sampler found the tokens far less likely than the trainer does: the weight sits at the cap
    batch.old_logprobs = (lp - 3.0) * mask
    loss, stats = policy_loss(model, batch, tis_cap=2.0)
    assert stats["tis"] == pytest.approx(2.0) and stats["tis_capped"] == 1.0
    assert stats["logprob_gap"] == pytest.approx(3.0, abs=1e-5)
    assert loss.item() == pytest.approx(-2.0, abs=1e-5)  # -w * r * A = -2 * 1 * 1 on every token
    loss, stats = policy_loss(model, batch, tis_cap=None)
    assert loss.item() == pytest.approx(-1.0, abs=1e-5) and stats["tis"] == 1.0
    # k3 against a reference 0.5 nats below on every token: e^-0.5 + 0.5 - 1 = 0.106531
    loss, stats = policy_loss(model, batch, tis_cap=None, kl_coef=0.1, ref_logprobs=lp - 0.5)
    assert stats["kl"] == pytest.approx(0.106531, abs=1e-5)
    assert loss.item() == pytest.approx(-1.0 + 0.1 * 0.106531, abs=1e-5)
    with pytest.raises(TrainDataError) as err:
        policy_loss(model, batch, kl_coef=0.1)
    assert err.value.kind == "missing_reference"


# -- a real stored run -------------------------------------------------------------------------------------


def test_samples_from_a_stored_gguf_run_match_its_token_buffers(tmp_path: Path, tiny_gguf: Path):
    pytest.importorskip("xllamacpp")
    from typer.testing import CliRunner

    from rollout_kit import make_task
    from toolworld.cli import app
    from toolworld.store import RunStore
    from toolworld.store.export import token_records
    from toolworld.tasks.model import write_jsonl
    from toolworld.tokens import TokenBuffer

    tasks = tmp_path / "tasks.jsonl"
    write_jsonl(tasks, [make_task("cancel", 0), make_task("info", 1)])
    out = tmp_path / "run"
    spec = f"gguf:{tiny_gguf},n_ctx=8192,max_tokens=24,temperature=1.0"
    res = CliRunner().invoke(app, ["run", "retail", "--tasks", str(tasks), "--out", str(out), "--policy", spec,
                                   "--max-turns", "2", "--concurrency", "2"], catch_exceptions=False)  # fmt: skip
    assert res.exit_code == 0, res.output
    with RunStore.open(out) as store:
        samples = samples_from_tokens(token_records(store))
        buffers = {(t.task_id, t.trial): TokenBuffer.from_dict(t.token_buffer) for t, _s, _r in store.trials()}
    assert len(samples) == 2 and len({s.group for s in samples}) == 2
    for s in samples:
        buf = buffers[(s.meta["task_id"], s.meta["trial"])]
        assert s.logprobs is not None
        assert len(s.input_ids) == len(s.loss_mask) == len(s.logprobs) == len(buf.ids)
        assert s.input_ids == buf.ids and s.loss_mask == buf.mask
        sampled = [lp for lp, m in zip(s.logprobs, s.loss_mask, strict=True) if m]
        assert sampled == pytest.approx(buf.sampled_logprobs(), abs=1e-6)  # float32 storage
        assert all(lp == 0.0 for lp, m in zip(s.logprobs, s.loss_mask, strict=True) if not m)
        assert {"reward", "success", "trial"} <= s.meta.keys()
        assert turn_spans(s.loss_mask) and sum(b - a for a, b in turn_spans(s.loss_mask)) == sum(s.loss_mask)
    # the sampler's own weights, loaded by transformers, score the stored ids as llama.cpp did: the buffers hold
    # the sampled ids exactly, positions line up, and only kernel-level differences remain (llama.cpp keeps its
    # KV cache in f16: about 3e-3 nats on average here)
    from transformers import AutoModelForCausalLM

    same = AutoModelForCausalLM.from_pretrained(str(tiny_gguf.parent), gguf_file=tiny_gguf.name)
    gap = logprob_gap(same, samples, 0)
    assert gap["tokens"] == sum(sum(s.loss_mask) for s in samples) > 0
    assert gap["mean"] < 0.02 and gap["max"] < 0.1, gap
    other = logprob_gap(tiny_llama(), samples, 0)  # a different model: the gap is large
    assert other["mean"] > 20 * gap["mean"], other
