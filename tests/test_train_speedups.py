"""Cheaper training steps that compute the same thing: the LM head only where a token carries loss, and a prefix
that samples share laid once per packed row. Each is checked against the plain computation it replaces."""

from __future__ import annotations

import random
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from toolworld.train import Sample, TrainDataError, collate, pack  # noqa: E402
from toolworld.train.logprobs import keeps_logits, token_logprobs  # noqa: E402
from toolworld.train.losses import policy_loss, sft_loss  # noqa: E402
from train_kit import smollm2_tokenizer, tiny_llama  # noqa: E402

SYSTEM = 100  # tokens of the shared system prompt


@pytest.fixture(scope="module")
def tok() -> Any:
    return smollm2_tokenizer()


def model_of(tok: Any, attn: str = "sdpa") -> Any:
    model = tiny_llama(tok)
    model.config._attn_implementation = attn
    return model.eval()


def conversation(rng: random.Random, system: list[int], user: int, turns: list[tuple[int, int]], *,
                 advantage: float = 0.0, group: str = "t") -> Sample:  # fmt: skip
    """``system`` + a user opening of ``user`` tokens, then (assistant with loss, tool/user without) per turn."""
    ids, mask = list(system), [0] * len(system)
    ids += [rng.randrange(100, 40000) for _ in range(user)]
    mask += [0] * user
    for said, heard in turns:
        ids += [rng.randrange(100, 40000) for _ in range(said + heard)]
        mask += [1] * said + [0] * heard
    logprobs = [-rng.uniform(0.1, 3.0) if m else 0.0 for m in mask]
    return Sample(input_ids=ids, loss_mask=mask, logprobs=logprobs, advantage=advantage, group=group)


def shared_samples(seed: int = 0) -> list[Sample]:
    """Samples opening with one 100-token system prompt, of different lengths; the third's own tokens start with
    a loss token, and the first two also share a user opening (a GRPO group)."""
    rng = random.Random(seed)
    system = [rng.randrange(100, 40000) for _ in range(SYSTEM)]
    first = conversation(rng, system, 12, [(7, 5), (4, 0)], advantage=1.0)
    second = Sample(input_ids=first.input_ids[: SYSTEM + 12] + [rng.randrange(100, 40000) for _ in range(20)],
                    loss_mask=[0] * (SYSTEM + 12) + [1] * 20, logprobs=[0.0] * (SYSTEM + 12) + [-0.7] * 20,
                    advantage=-1.0)  # fmt: skip
    third = conversation(rng, system, 0, [(9, 3), (2, 0)], advantage=0.5)
    fourth = conversation(rng, system, 30, [(3, 0)], advantage=-0.5)
    return [first, second, third, fourth]


def grads(model: Any) -> dict[str, torch.Tensor]:
    return {name: p.grad.detach().clone() for name, p in model.named_parameters() if p.grad is not None}


# -- logits only at loss positions ---------------------------------------------------------------------------


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_loss_position_logprobs_equal_full_logprobs_packed_and_unpacked(tok, attn):
    model = model_of(tok, attn)
    rng = random.Random(3)
    system = [rng.randrange(100, 40000) for _ in range(40)]
    samples = [conversation(rng, system, n, [(5, 4), (3, 0)]) for n in (2, 9, 17)]
    seen: list[int] = []
    model.lm_head.register_forward_hook(lambda _m, args, _out: seen.append(args[0].shape[1]))
    for batch in (collate(samples, 0), *pack(samples, 400, 0), *pack(samples, 400, 0, share_prefix=True)):
        with torch.no_grad():
            full = token_logprobs(model, batch, positions="all")
            loss_only = token_logprobs(model, batch)
        mask = batch.loss_mask > 0
        assert int(mask.sum()) == sum(sum(s.loss_mask) for s in samples)
        assert torch.allclose(loss_only[mask], full[mask], atol=1e-5), (loss_only[mask] - full[mask]).abs().max()
        assert bool((loss_only[mask] < 0).all()) and bool((loss_only[~mask] == 0).all())
        # the head ran on the positions that predict a loss token (their union over rows), not on every one
        predecessors = batch.predecessors()[mask]
        assert seen[-1] == len(set(predecessors.tolist())) < batch.input_ids.shape[1] - 1


def test_a_model_without_logits_to_keep_gets_full_logits_and_the_same_answer(tok):
    model = model_of(tok)
    batch = pack(shared_samples(), 400, 0, share_prefix=True)[0]
    with torch.no_grad():
        expected = token_logprobs(model, batch)
    inner = model.forward

    def forward(input_ids: Any, attention_mask: Any, position_ids: Any) -> Any:
        return inner(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids)

    model.forward = forward
    assert not keeps_logits(model)
    with torch.no_grad():
        got = token_logprobs(model, batch)
    assert torch.allclose(got, expected, atol=1e-5)

    def swallowing(input_ids: Any, attention_mask: Any, position_ids: Any, logits_to_keep: Any = 0) -> Any:
        return inner(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids)

    model.forward = swallowing  # takes the keyword, returns every position anyway
    with torch.no_grad():
        assert torch.allclose(token_logprobs(model, batch), expected, atol=1e-5)


def test_a_peft_model_is_looked_through(tok):
    peft = pytest.importorskip("peft")
    model = peft.get_peft_model(model_of(tok), peft.LoraConfig(r=2, target_modules=["q_proj"], task_type="CAUSAL_LM"))
    assert keeps_logits(model)
    batch = collate(shared_samples()[:2], 0)
    with torch.no_grad():
        full = token_logprobs(model, batch, positions="all")
        mask = batch.loss_mask > 0
        assert torch.allclose(token_logprobs(model, batch)[mask], full[mask], atol=1e-5)


def test_positions_must_be_loss_or_all(tok):
    with pytest.raises(TrainDataError) as err:
        token_logprobs(model_of(tok), collate(shared_samples()[:1], 0), positions="some")
    assert err.value.kind == "bad_positions" and "'loss' or 'all'" in str(err.value)


# -- shared prefix: layout ---------------------------------------------------------------------------------------


def test_a_shared_row_lays_the_prefix_once_and_continues_every_sample_from_it():
    a = Sample(input_ids=[5] * 40 + [1, 2, 3], loss_mask=[0] * 40 + [0, 1, 1])
    b = Sample(input_ids=[5] * 40 + [7, 8], loss_mask=[0] * 40 + [1, 1])  # its own tokens open with a loss token
    (batch,) = pack([a, b], 100, 0, share_prefix=True)
    assert batch.input_ids[0].tolist() == [5] * 40 + [1, 2, 3, 7, 8]
    assert batch.segment_ids[0].tolist() == [-1] * 40 + [1, 1, 1, 2, 2]
    assert batch.position_ids[0].tolist() == [*range(43), 40, 41]
    assert batch.prev_index[0].tolist() == [*range(-1, 42), 39, 43]  # b's first token follows the prefix
    assert batch.loss_mask[0].tolist() == [0] * 41 + [1, 1, 1, 1]
    allowed = (batch.attention_mask[0, 0] == 0).int()
    assert allowed[43].tolist() == [1] * 40 + [0, 0, 0, 1, 0]  # b sees the prefix and itself, never a
    assert allowed[42].tolist() == [1] * 43 + [0, 0]
    assert allowed[10].tolist() == [1] * 11 + [0] * 34  # the prefix is causal
    assert batch.n_samples == 2 and batch.computed_tokens == 45 and batch.sample_tokens == 43 + 42
    moved = batch.to("cpu", dtype=torch.bfloat16)
    assert moved.prev_index is not None and torch.equal(moved.prev_index, batch.prev_index)


def test_a_row_holds_more_samples_when_they_share_the_prompt():
    rng = random.Random(5)
    system = [rng.randrange(100, 40000) for _ in range(SYSTEM)]
    samples = [conversation(rng, system, 0, [(20, 10)]) for _ in range(6)]  # 130 tokens each
    plain = pack(samples, 400, 0)
    shared = pack(samples, 400, 0, share_prefix=True)
    assert [b.n_samples for b in plain] == [3, 3]
    assert [b.n_samples for b in shared] == [6] and shared[0].input_ids.shape[1] == SYSTEM + 6 * 30
    assert sum(b.sample_tokens for b in shared) == sum(b.sample_tokens for b in plain) == 6 * 130


def test_rows_group_samples_by_their_opening_and_short_ones_stay_plain():
    rng = random.Random(7)
    one, two = ([rng.randrange(100, 40000) for _ in range(60)] for _ in range(2))
    a1, b1, a2, b2 = (conversation(rng, s, 0, [(5, 0)]) for s in (one, two, one, two))
    short = [conversation(rng, [9] * 10, 0, [(5, 0)]) for _ in range(2)]  # 10 shared tokens: not worth it
    batches = pack([a1, b1, a2, b2, *short], 1000, 0, share_prefix=True)
    shapes = [(b.n_samples, int((b.segment_ids < 0).sum())) for b in batches]
    assert shapes == [(2, 60), (2, 60), (2, 0)]
    assert batches[0].input_ids[0, :60].tolist() == one and batches[1].input_ids[0, :60].tolist() == two
    # a GRPO group: trials of one task share the user's opening as well, and the row shares all of it
    trials = shared_samples()[:2]
    (batch,) = pack(trials, 1000, 0, share_prefix=True)
    assert int((batch.segment_ids < 0).sum()) == SYSTEM + 12


def test_the_budget_counts_the_shared_layout_and_still_refuses_a_sample_too_long():
    samples = shared_samples()
    for budget in (160, 200, 260):
        for batch in pack(samples, budget, 0, share_prefix=True):
            assert batch.input_ids.shape[1] <= budget
        assert sum(b.n_samples for b in pack(samples, budget, 0, share_prefix=True)) == 4
    with pytest.raises(TrainDataError) as err:
        pack(samples, 120, 0, share_prefix=True)
    assert err.value.kind == "sample_too_long"


# -- shared prefix: the same losses and gradients ------------------------------------------------------------


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_shared_prefix_gives_the_same_losses_and_gradients_as_unshared_rows(tok, attn):
    samples = shared_samples()
    (shared,) = pack(samples, 1000, 0, share_prefix=True)
    assert int((shared.segment_ids < 0).sum()) == SYSTEM and shared.n_samples == 4
    plain = collate(samples, 0)
    model = model_of(tok, attn)
    results = []
    for batch in (plain, shared):
        model.zero_grad(set_to_none=True)
        loss = sft_loss(model, batch)
        loss.backward()
        sft = (loss.item(), grads(model))
        model.zero_grad(set_to_none=True)
        with torch.no_grad():
            old = token_logprobs(model, batch) - 0.05 * batch.loss_mask  # a little drift, so ratios are not 1
        loss, stats = policy_loss(model, batch, old_logprobs=old, kl_coef=0.1, ref_logprobs=old - 0.2)
        loss.backward()
        results.append((sft, (loss.item(), grads(model)), stats))
    (sft_a, pg_a, stats_a), (sft_b, pg_b, stats_b) = results
    for (loss_a, grad_a), (loss_b, grad_b) in ((sft_a, sft_b), (pg_a, pg_b)):
        assert loss_a == pytest.approx(loss_b, abs=1e-5)
        assert grad_a.keys() == grad_b.keys() and len(grad_a) > 5
        for name in grad_a:
            assert torch.allclose(grad_a[name], grad_b[name], atol=1e-4, rtol=1e-3), name
    assert stats_a == pytest.approx(stats_b, abs=1e-5)
    assert pg_a[0] != pytest.approx(0.0, abs=1e-3)  # the surrogate is not trivially zero


def test_sft_schedules_fewer_micro_batches_with_a_shared_prompt():
    from toolworld.train.sft import SFTConfig, _schedule

    rng = random.Random(11)
    system = [rng.randrange(100, 40000) for _ in range(SYSTEM)]
    samples = [conversation(rng, system, 0, [(20, 10)]) for _ in range(8)]  # 130 tokens: 100 shared
    shared, _ = _schedule(samples, SFTConfig(batch_tokens=360, max_len=200, epochs=1), 0)
    plain, _ = _schedule(samples, SFTConfig(batch_tokens=360, max_len=200, epochs=1, share_prefix=False), 0)
    assert len(plain) == 4 and len(shared) == 1
    assert sum(b.n_samples for step in shared for b in step) == 8
