"""A step's shared prompt run once (``toolworld.train.prefix``) gives the losses and gradients of running every
conversation whole, with a tiny random Llama around SmolLM2's real tokenizer."""

from __future__ import annotations

from typing import Any

import pytest

from train_kit import conversations, count_split_calls, grads, prefix_step, smollm2_tokenizer, tiny_llama

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from toolworld.train.attention import use_split_attention  # noqa: E402
from toolworld.train.data import Sample, collate, pack  # noqa: E402
from toolworld.train.losses import policy_loss, sft_loss  # noqa: E402
from toolworld.train.prefix import SharedPrefix, shared_length  # noqa: E402


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    return smollm2_tokenizer()


@pytest.mark.parametrize("kind", ["sft", "policy"])
def test_a_shared_prefix_gives_the_losses_and_gradients_of_whole_conversations(tokenizer, kind):
    model = tiny_llama(tokenizer).eval()
    samples = conversations(len(tokenizer))
    micro = [collate([s], 0) for s in samples]

    def loss_of(m: Any, b: Any) -> Any:
        return sft_loss(m, b) if kind == "sft" else policy_loss(m, b)[0]

    whole, g_whole = prefix_step(model, micro, loss_of, share=False)
    shared, g_shared = prefix_step(model, micro, loss_of, share=True)
    assert SharedPrefix(model, micro, min_tokens=1).length == 60  # where the conversations part
    assert shared == pytest.approx(whole, rel=1e-5, abs=1e-6)
    assert g_shared.keys() == g_whole.keys() and len(g_whole) > 10
    for name, g in g_whole.items():
        assert float(g.norm()) > 0, name
        assert float((g_shared[name] - g).norm()) <= 1e-4 * float(g.norm()), name
    # the prefix's own share of the gradient is not lost: without it the embeddings of its tokens get less
    model.zero_grad(set_to_none=True)
    prefix = SharedPrefix(model, micro, min_tokens=1)
    for batch in prefix.batches:
        loss_of(model, batch).backward()
    partial = grads(model)
    name = "model.layers.0.self_attn.k_proj.weight"
    assert float((partial[name] - g_whole[name]).norm()) > 0.05 * float(g_whole[name].norm())


def test_what_is_not_shared(tokenizer):
    samples = conversations(len(tokenizer))
    micro = [collate([s], 0) for s in samples]
    assert shared_length(micro[:1]) == 0  # one conversation: nothing to share
    other = Sample(input_ids=[7, *samples[1].input_ids[1:]], loss_mask=samples[1].loss_mask)
    assert shared_length([micro[0], collate([other], 0)]) == 0  # different first token
    early = Sample(input_ids=samples[1].input_ids, loss_mask=[0] * 10 + [1] * (len(samples[1]) - 10))
    assert shared_length([micro[0], collate([early], 0)]) == 9  # never a learnt token, nor the one before it
    packed = pack(samples, 4096, 0, share_prefix=True)
    assert shared_length(packed + micro) == 0  # packed rows share inside the row
    model = tiny_llama(tokenizer)
    plain = SharedPrefix(model, micro[:1])
    assert plain.batches == micro[:1] and plain.length == 0
    plain.backward()  # nothing to do


def spy_on_prefixes(monkeypatch: Any) -> list[int]:
    """The length of every shared prefix the training code builds from now on, in order."""
    import toolworld.train.prefix as prefix_module

    shared: list[int] = []

    class Spy(SharedPrefix):
        def __init__(self, *args: Any, **kw: Any) -> None:
            super().__init__(*args, **kw)
            shared.append(self.length)

    monkeypatch.setattr(prefix_module, "SharedPrefix", Spy)
    return shared


def weights_after(train: Any) -> dict[str, Any]:
    model = train()
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def same_weights(a: dict[str, Any], b: dict[str, Any], start: dict[str, Any]) -> None:
    moved = 0
    for name, value in a.items():
        delta_a, delta_b = value - start[name], b[name] - start[name]
        assert float((delta_a - delta_b).norm()) <= 1e-3 * float(delta_b.norm()) + 1e-9, name
        moved += int(float(delta_b.norm()) > 0)
    assert moved > 10  # the steps changed the weights, so agreeing says something


def test_sft_and_grpo_loops_train_alike_with_and_without_the_shared_prompt(tokenizer, tmp_path, monkeypatch):
    from toolworld.train.grpo import GRPOConfig, update
    from toolworld.train.sft import SFTConfig, train_sft

    shared = spy_on_prefixes(monkeypatch)
    samples = conversations(len(tokenizer), n=4)
    start = tiny_llama(tokenizer).state_dict()

    def sft(share: bool) -> Any:
        model = tiny_llama(tokenizer)
        config = SFTConfig(out=tmp_path / f"sft-{share}", lr=1e-3, max_steps=2, grad_accum=4, packing=False,
                           share_prefix=share, max_len=512)  # fmt: skip
        train_sft(model, tokenizer, samples, config)
        return model

    same_weights(weights_after(lambda: sft(True)), weights_after(lambda: sft(False)), start)
    assert shared == [60, 60, 0, 0]  # two steps shared the prompt, two ran every conversation whole
    shared.clear()

    def grpo(share: bool, split: bool = False) -> Any:
        model = tiny_llama(tokenizer).eval()
        assert not split or use_split_attention(model)
        params = [p for p in model.parameters() if p.requires_grad]
        optimizer = torch.optim.AdamW(params, lr=1e-3)
        config = GRPOConfig(out=tmp_path / f"grpo-{share}", packing=False, share_prefix=share, updates=2,
                            batch_tokens=512, max_len=512)  # fmt: skip
        stats = update(model, None, samples, optimizer, params, config, 0)
        assert stats["loss"] == stats["loss"] and stats["grad_norm"] > 0
        return model

    same_weights(weights_after(lambda: grpo(True)), weights_after(lambda: grpo(False)), start)
    assert shared == [60, 60, 60, 0, 0, 0]  # pi_old's pass, then recomputed for each of the two updates
    # the same updates with each continuation's attention split in two (toolworld.train.attention)
    calls = count_split_calls(monkeypatch)
    same_weights(weights_after(lambda: grpo(True, split=True)), weights_after(lambda: grpo(False)), start)
    assert len(calls) == 2 * 3 * len(samples)  # two layers, every conversation, pi_old's pass and the two updates


def test_a_model_checkpointing_its_own_layers_trains_unshared_and_a_finished_prefix_cannot_be_reused(tokenizer,
                                                                                                    tmp_path):  # fmt: skip
    from toolworld.train.sft import SFTConfig, train_sft

    samples = conversations(len(tokenizer))
    model = tiny_llama(tokenizer)
    model.activation_checkpointing_enable()
    config = SFTConfig(out=tmp_path / "o", lr=1e-3, max_steps=1, grad_accum=3, packing=False, max_len=512)
    assert train_sft(model, tokenizer, samples, config).steps == 1  # transformers keeps no cache: nothing shared
    model = tiny_llama(tokenizer).eval()
    prefix = SharedPrefix(model, [collate([s], 0) for s in samples])
    stale = prefix.batches[0]
    sft_loss(model, stale).backward()
    prefix.backward()
    assert prefix.batches == []
    with pytest.raises(RuntimeError, match="step is over"):
        sft_loss(model, stale)


def test_the_cache_goes_under_the_keyword_the_installed_transformers_takes(tokenizer):
    """transformers 5.24 renamed a forward's ``past_key_values`` to ``cache`` (the old name goes in 5.40): the shared
    prefix, the logprobs of a continued batch and the hf engine pass the cache under whichever name the model's
    forward has, so nothing runs on a deprecated keyword that a later release removes."""
    import inspect
    import warnings

    from toolworld.rollout.engines.hf import BatchRequest, HFEngine, cache_keyword, returned_cache
    from toolworld.train.logprobs import token_logprobs

    model = tiny_llama(tokenizer).eval()
    params = inspect.signature(model.forward).parameters
    assert cache_keyword(model) == ("cache" if "cache" in params else "past_key_values")

    class Old(torch.nn.Module):
        def forward(self, input_ids: Any, past_key_values: Any = None) -> Any: ...

    class New(torch.nn.Module):
        def forward(self, input_ids: Any, cache: Any = None) -> Any: ...

    class Wrapped(torch.nn.Module):  # a peft model: **kwargs passed on to the model it wraps
        def get_base_model(self) -> Any:
            return New()

        def forward(self, *args: Any, **kwargs: Any) -> Any: ...

    assert (cache_keyword(Old()), cache_keyword(New()), cache_keyword(Wrapped())) == (
        "past_key_values", "cache", "cache")  # fmt: skip
    micro = [collate([s], 0) for s in conversations(len(tokenizer))]
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*past_key_values.*")
        out = model(input_ids=micro[0].input_ids[:, :5], use_cache=True)
        assert returned_cache(out) is not None
        with torch.no_grad():
            prefix = SharedPrefix(model, micro, min_tokens=1)
            assert prefix.length == 60
            shared = [token_logprobs(model, b) for b in prefix.batches]
        whole = [prefix.slice(token_logprobs(model, b)) for b in micro]
        for a, b in zip(shared, whole, strict=True):
            assert torch.allclose(a, b, atol=1e-5)
        ids = micro[0].input_ids[0, :30].tolist()
        one = HFEngine(model=model, tokenizer=tokenizer, device="cpu")
        assert len(one.generate_sync(ids, max_tokens=3, temperature=0.0, stop_ids=[], seed=0).ids) == 3
        assert len(one.generate_sync([*ids, 5], max_tokens=3, temperature=0.0, stop_ids=[], seed=0).ids) == 3
        batched = HFEngine(model=model, tokenizer=tokenizer, device="cpu", max_batch=2)
        rows = batched.generate_batch_sync([BatchRequest(ids, 3, 0.0), BatchRequest(ids[:20], 4, 0.0)])
        assert [len(g.ids) for g in rows] == [3, 4]


def test_grpo_groups_run_their_own_shared_prompt_and_train_as_whole_conversations(tokenizer, tmp_path, monkeypatch):
    """Per group (``share_sets``): the trials of a group share more than the step's system prompt (the task's
    opening, a branch lead's turns); each group runs its part once, in the update and in the reference's logprobs
    (the KL term, anchors included), and the weights move as when every conversation runs whole."""
    from toolworld.train.grpo import GRPOConfig, share_sets, update

    keys = ["a", "b", "a", None, "c", "b", "d", "e", "e", "e"]
    shares = {"a": 10, "b": 4, "e": 5}  # what each group's rows have in common; all rows share 3

    def common(rows: Any) -> int:
        named = {keys[i] for i in rows}
        return shares[next(iter(named))] if len(named) == 1 else 3

    # a: 1 * 10 > 2 * 3, its own set; b: 1 * 4 < 2 * 3, it stays with the rest; e: 2 * 5 > 3 * 3
    assert share_sets(keys, common) == [[0, 2], [7, 8, 9], [1, 3, 4, 5, 6]]
    assert share_sets([None, None], common) == [[0, 1]] and share_sets([], common) == []
    # a caller that knows what every row shares passes it, in place of common(all rows): at 4, a keeps its set
    # (1 * 10 > 2 * 4) and e does not (2 * 5 < 3 * 4); at 6 neither does
    assert share_sets(keys, common, everyone=4) == [[0, 2], [1, 3, 4, 5, 6, 7, 8, 9]]
    assert share_sets(keys, common, everyone=6) == [list(range(10))]
    shared = spy_on_prefixes(monkeypatch)
    vocab = len(tokenizer)
    head = conversations(vocab, prefix=40, n=1, seed=1)[0].input_ids[:40]  # the step's system prompt
    samples, anchors = [], []
    for g, lead in enumerate((50, 35, 10)):  # each group's own opening after the system prompt
        opening = conversations(vocab, prefix=lead, n=1, seed=10 + g)[0].input_ids[:lead]
        for k, trial in enumerate(conversations(vocab, prefix=0, n=3, seed=20 + g)):
            ids = head + opening + trial.input_ids
            mask = [0] * (40 + lead) + trial.loss_mask
            samples.append(Sample(input_ids=ids, loss_mask=mask, logprobs=[-0.7 if m else 0.0 for m in mask],
                                  advantage=(-1.0) ** k, group=f"g{g}"))  # fmt: skip
    for g, trial in enumerate(conversations(vocab, prefix=0, n=2, seed=30)):  # one left-out trial of two groups
        mask = [0] * 40 + trial.loss_mask
        anchors.append(Sample(input_ids=head + trial.input_ids, loss_mask=mask,
                              logprobs=[-0.7 if m else 0.0 for m in mask], advantage=0.0, group=f"tie{g}"))  # fmt: skip
    start = tiny_llama(tokenizer).state_dict()
    ref = tiny_llama(tokenizer, seed=7).eval().requires_grad_(False)

    def grpo(share: bool, groups: bool = True) -> Any:
        model = tiny_llama(tokenizer).eval()
        params = [p for p in model.parameters() if p.requires_grad]
        optimizer = torch.optim.AdamW(params, lr=1e-3)
        config = GRPOConfig(out=tmp_path / f"g-{share}", packing=False, share_prefix=share, batch_tokens=512,
                            max_len=512, kl_coef=0.5, kl_ties=1, share_groups=groups)  # fmt: skip
        stats = update(model, ref, samples, optimizer, params, config, 0, anchors=anchors)
        assert stats["kl"] > 0 and stats["kl_ties"] > 0
        assert stats["update_whole"] == sum(len(x) for x in samples + anchors)
        # each set's prompt run once instead of once per member; the third group's 10 tokens do not pay for a set of
        # its own (2 * 50 < 3 * 40), so it runs with the anchors; one set for the step shares the system prompt
        saved = (2 * 90 + 2 * 75 + 4 * 40 if groups else 10 * 40) if share else 0
        assert stats["update_run"] == stats["update_whole"] - saved
        assert stats["step_prefix"] == (40 if share else 0)  # what one prefix for the whole step would share
        return model

    same_weights(weights_after(lambda: grpo(True)), weights_after(lambda: grpo(False)), start)
    # the reference's logprobs, then the update: two groups past the system prompt and their own opening, the
    # third group and the two anchors past the system prompt alone; then the unshared run, both passes
    assert shared == [40 + 50, 40 + 35, 40] * 2 + [0] * 2
    shared.clear()
    same_weights(weights_after(lambda: grpo(True, groups=False)), weights_after(lambda: grpo(False)), start)
    assert shared == [40, 40, 0, 0]  # the earlier layout: the step's system prompt once

