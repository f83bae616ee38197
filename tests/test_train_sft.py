"""SFT on toolworld data: a tiny random Llama around SmolLM2's real tokenizer learns gold tool calls.

The retail system prompt alone is ~4.5k tokens and the loss's full-vocabulary softmax costs vocab x tokens, so the
learning checks train on each gold conversation's first assistant turn (the identification tool call) with the
last ``CONTEXT`` tokens before it, and generate from that same context. The CLI checks use the full rendering.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from toolworld.cli import app
from train_kit import count_split_calls, smollm2_tokenizer, tiny_llama

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from toolworld.train.data import Sample  # noqa: E402
from toolworld.train.sft import SFTConfig, SFTError, sft_samples, train_sft, train_sft_trl  # noqa: E402

CONTEXT = 96
runner = CliRunner()


def invoke(*args: str | Path) -> Any:
    return runner.invoke(app, [str(a) for a in args], catch_exceptions=False)


def error_of(res: Any) -> dict[str, Any]:
    assert res.exit_code == 1, res.output
    return json.loads(res.output.strip().splitlines()[-1])["error"]


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    return smollm2_tokenizer()


def tiny_model(tokenizer: Any) -> Any:
    return tiny_llama(tokenizer)


@pytest.fixture(scope="module")
def tiny_dir(tokenizer: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny model and its tokenizer saved as a model folder, as ``--model FOLDER`` takes it."""
    folder = tmp_path_factory.mktemp("tiny")
    tiny_model(tokenizer).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def gold(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Three retail tasks, their gold run, and a task file with just the shortest conversation (for the CLI)."""
    from toolworld.pipeline import run
    from toolworld.tasks.generate import generate
    from toolworld.tasks.model import write_jsonl

    folder = tmp_path_factory.mktemp("gold")
    tasks = generate("retail", 3, seed=0, sampler="target").tasks
    write_jsonl(folder / "tasks.jsonl", tasks)
    result = run("retail", tasks, "gold", out=folder / "run", report=False)
    assert result.successes == 3
    shortest = min(tasks, key=lambda t: len(t.gold_actions))
    write_jsonl(folder / "one.jsonl", [shortest])
    (folder / "not_tasks.jsonl").write_text("this is not a task\n")
    return {"run": folder / "run", "tasks": folder / "tasks.jsonl", "one": folder / "one.jsonl",
            "not_tasks": folder / "not_tasks.jsonl", "root": folder}  # fmt: skip


def first_turn(sample: Sample) -> tuple[list[int], list[int]]:
    """(the last CONTEXT tokens before the first assistant turn, that turn through its end-of-turn token)."""
    start = sample.loss_mask.index(1)
    end = start
    while end < len(sample.loss_mask) and sample.loss_mask[end]:
        end += 1
    return sample.input_ids[start - CONTEXT:start], sample.input_ids[start:end]


@pytest.fixture(scope="module")
def turns(gold: dict[str, Path], tokenizer: Any) -> list[tuple[list[int], list[int]]]:
    samples = sft_samples(gold["run"], tokenizer)
    assert len(samples) == 3 and all(any(s.loss_mask) for s in samples)
    return [first_turn(s) for s in samples]


def short_samples(turns: list[tuple[list[int], list[int]]]) -> list[Sample]:
    return [Sample(input_ids=p + t, loss_mask=[0] * len(p) + [1] * len(t)) for p, t in turns]


def config(out: Path, **kw: Any) -> SFTConfig:
    base: dict[str, Any] = {"out": out, "lr": 1e-2, "max_steps": 60, "batch_tokens": 512, "max_len": 512,
                            "warmup_ratio": 0.1, "seed": 0}  # fmt: skip
    return SFTConfig(**{**base, **kw})


def greedy(model: Any, prompt: list[int], n: int) -> list[int]:
    model.eval()
    with torch.no_grad():
        out = model.generate(torch.tensor([prompt]), attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
                             max_new_tokens=n, do_sample=False, pad_token_id=0)  # fmt: skip
    return out[0, len(prompt):].tolist()


# ------------------------------------------------------------------------------------------------- learning


def test_learns_the_gold_identification_call(turns, tokenizer, tmp_path):
    assert all("<tool_call>" in tokenizer.decode(t) or "find_user" in tokenizer.decode(t) for _, t in turns)
    model = tiny_model(tokenizer)
    before = [greedy(model, p, len(t)) for p, t in turns]
    assert all(b != t for b, (_, t) in zip(before, turns, strict=True))  # a random model does not know them
    result = train_sft(model, tokenizer, short_samples(turns), config(tmp_path / "out"))
    assert result.steps == 60 and not result.interrupted
    assert result.final_loss < 0.5 * result.first_loss, result.losses
    for prompt, turn in turns:
        assert greedy(model, prompt, len(turn)) == turn, tokenizer.decode(turn)
    log = [json.loads(x) for x in (tmp_path / "out" / "train.jsonl").read_text().splitlines()]
    assert [e["step"] for e in log] == list(range(1, 61))
    assert set(log[0]) >= {"step", "loss", "tokens", "tokens_per_s", "lr"} and log[0]["tokens"] > 0
    assert log[0]["lr"] < log[3]["lr"] and log[-1]["lr"] < log[10]["lr"]  # warmup, then decay
    final = tmp_path / "out" / "final"
    reloaded = transformers.AutoModelForCausalLM.from_pretrained(str(final))
    prompt, turn = turns[0]
    assert greedy(reloaded, prompt, len(turn)) == turn  # final/ holds the trained weights
    assert (final / "tokenizer_config.json").is_file()


def test_same_seed_same_run_and_resume_continues_from_the_checkpoint(turns, tokenizer, tmp_path):
    samples = short_samples(turns)
    straight = train_sft(tiny_model(tokenizer), tokenizer, samples, config(tmp_path / "a", max_steps=6))
    again = train_sft(tiny_model(tokenizer), tokenizer, samples, config(tmp_path / "b", max_steps=6))
    assert again.losses == straight.losses  # deterministic on CPU for a seed

    def stop_after_3(entry: Any) -> None:
        if entry.step == 3:
            raise KeyboardInterrupt

    cut = train_sft(tiny_model(tokenizer), tokenizer, samples, config(tmp_path / "c", max_steps=6),
                    on_step=stop_after_3)  # fmt: skip
    assert cut.interrupted and cut.steps == 3 and cut.final is None
    assert cut.checkpoint == tmp_path / "c" / "checkpoint-3"
    with pytest.raises(SFTError) as exc:  # the folder holds a run: continuing it must be asked for
        train_sft(tiny_model(tokenizer), tokenizer, samples, config(tmp_path / "c", max_steps=6))
    assert exc.value.kind == "output_exists"
    resumed = train_sft(tiny_model(tokenizer), tokenizer, samples, config(tmp_path / "c", max_steps=6, resume=True))
    assert resumed.resumed_from == 3 and resumed.steps == 6
    assert resumed.losses == pytest.approx(straight.losses[3:], rel=1e-5, abs=1e-6)
    steps = [json.loads(x)["step"] for x in (tmp_path / "c" / "train.jsonl").read_text().splitlines()]
    assert steps == [1, 2, 3, 4, 5, 6]
    with pytest.raises(SFTError) as exc:
        train_sft(tiny_model(tokenizer), tokenizer, samples, config(tmp_path / "c", max_steps=6, seed=1, resume=True))
    assert exc.value.kind == "run_mismatch"
    shutil.copytree(tmp_path / "c", tmp_path / "killed")  # killed before its first checkpoint: starts over
    for folder in [*(tmp_path / "killed").glob("checkpoint-*"), tmp_path / "killed" / "final"]:
        shutil.rmtree(folder)
    again = train_sft(tiny_model(tokenizer), tokenizer, samples, config(tmp_path / "killed", max_steps=6, resume=True))
    assert again.resumed_from == 0 and again.losses == straight.losses
    steps = [json.loads(x)["step"] for x in (tmp_path / "killed" / "train.jsonl").read_text().splitlines()]
    assert steps == [1, 2, 3, 4, 5, 6]


def test_only_the_newest_checkpoints_stay_on_disk(turns, tokenizer, tmp_path):
    samples = short_samples(turns)
    (tmp_path / "k").mkdir()
    (tmp_path / "k" / ".checkpoint-9.tmp").mkdir()  # what a crash mid-save leaves behind
    train_sft(tiny_model(tokenizer), tokenizer, samples, config(tmp_path / "k", max_steps=5, save_every=1))
    assert sorted(c.name for c in (tmp_path / "k").glob("*checkpoint-*")) == ["checkpoint-4", "checkpoint-5"]
    kept = train_sft(tiny_model(tokenizer), tokenizer, samples,
                     config(tmp_path / "all", max_steps=5, save_every=1, keep_checkpoints=0))  # fmt: skip
    assert sorted(c.name for c in (tmp_path / "all").glob("checkpoint-*")) == [f"checkpoint-{i}" for i in range(1, 6)]
    # what is left is enough to resume: cut at 3 with one kept, then continue to the same end
    def stop_after_3(entry: Any) -> None:
        if entry.step == 3:
            raise KeyboardInterrupt

    one = config(tmp_path / "one", max_steps=5, save_every=1, keep_checkpoints=1)
    train_sft(tiny_model(tokenizer), tokenizer, samples, one, on_step=stop_after_3)
    assert [c.name for c in (tmp_path / "one").glob("checkpoint-*")] == ["checkpoint-3"]
    resumed = train_sft(tiny_model(tokenizer), tokenizer, samples,
                        config(tmp_path / "one", max_steps=5, save_every=1, keep_checkpoints=1, resume=True))  # fmt: skip
    assert resumed.losses == pytest.approx(kept.losses[3:], rel=1e-5, abs=1e-6)
    with pytest.raises(SFTError) as exc:
        config(tmp_path / "x", keep_checkpoints=-1)
    assert exc.value.kind == "invalid_option"


def test_lora_trains_only_the_adapters(turns, tokenizer, tmp_path):
    pytest.importorskip("peft")
    model = tiny_model(tokenizer)
    base = {k: v.clone() for k, v in model.state_dict().items()}
    seen: dict[str, int] = {}

    def trainable_now(_entry: Any) -> None:  # the adapters live in the model until final/ merges them
        seen.update({n: p.numel() for n, p in model.named_parameters() if p.requires_grad})

    result = train_sft(model, tokenizer, short_samples(turns), config(tmp_path / "lora", lora=True, lora_r=8,
                                                                      max_steps=8, save_every=4),
                       on_step=trainable_now)  # fmt: skip
    assert seen and all("lora_" in n for n in seen)
    assert result.trainable_params == sum(seen.values())
    assert result.final_loss < result.first_loss
    merged = transformers.AutoModelForCausalLM.from_pretrained(str(tmp_path / "lora" / "final"))
    changed = [k for k, v in merged.state_dict().items() if k in base and not torch.equal(v, base[k])]
    assert changed and all("proj" in k for k in changed)  # only the adapted projections moved
    assert (tmp_path / "lora" / "checkpoint-4" / "adapter_model.safetensors").is_file()


def test_trl_path_runs_and_writes_the_same_layout(turns, tokenizer, tmp_path):
    pytest.importorskip("trl")
    pytest.importorskip("datasets")
    result = train_sft_trl(tiny_model(tokenizer), tokenizer, short_samples(turns),
                           config(tmp_path / "trl", max_steps=2, lr=1e-3))  # fmt: skip
    assert result.steps == 2
    log = [json.loads(x) for x in (tmp_path / "trl" / "train.jsonl").read_text().splitlines()]
    assert [e["step"] for e in log] == [1, 2] and all(e["loss"] > 0 for e in log)
    assert (tmp_path / "trl" / "final" / "config.json").is_file()


# ------------------------------------------------------------------------------------------------------ CLI


def test_cli_trains_from_a_task_file(gold, tiny_dir, tmp_path):
    out = tmp_path / "cli"
    res = invoke("train", "sft", gold["one"], "--model", tiny_dir, "--out", out, "--max-steps", "3", "--max-len",
                 "5200", "--lr", "1e-3", "--json")  # fmt: skip
    assert res.exit_code == 0, res.output
    summary = json.loads(res.output.strip().splitlines()[-1])
    assert summary["steps"] == 3 and summary["final"] == str(out / "final")
    assert (out / "gold-run" / "run.db").is_file()  # the gold policy was run on the task file first
    assert len((out / "train.jsonl").read_text().splitlines()) == 3
    assert (out / "final" / "config.json").is_file() and (out / "final" / "tokenizer_config.json").is_file()
    again = invoke("train", "sft", gold["one"], "--model", tiny_dir, "--out", out, "--max-steps", "3")
    assert error_of(again)["type"] == "output_exists"


def test_cli_split_attention_trains_the_weights_plain_sdpa_does(gold, tiny_dir, tmp_path, monkeypatch):
    """Unpacked, the three gold conversations share their system prompt; by default each continuation's attention
    runs split (toolworld.train.attention), with --no-split-attention as transformers' SDPA: the same update."""
    from safetensors.torch import load_file

    calls = count_split_calls(monkeypatch)
    weights, logs = {}, {}
    for flag in ("--split-attention", "--no-split-attention"):
        calls.clear()
        out = tmp_path / flag
        res = invoke("train", "sft", gold["run"], "--model", tiny_dir, "--out", out, "--max-steps", "1", "--max-len",
                     "5200", "--lr", "1e-3", "--no-packing", "--grad-accum", "3", "--json", flag)  # fmt: skip
        assert res.exit_code == 0, res.output
        weights[flag] = load_file(out / "final" / "model.safetensors")
        logs[flag] = json.loads((out / "train.jsonl").read_text().splitlines()[0])
        if flag == "--split-attention":
            assert len(calls) == 3 * 2  # each conversation after the shared prompt, in both layers
        else:
            assert not calls
    split, plain = logs.values()
    assert split["loss"] == pytest.approx(plain["loss"], rel=1e-5)
    assert split["grad_norm"] == pytest.approx(plain["grad_norm"], rel=1e-4)
    start = load_file(tiny_dir / "model.safetensors")
    moved = torch.cat([(w - start[k]).flatten() for k, w in weights["--no-split-attention"].items()])
    apart = torch.cat([(w - weights["--no-split-attention"][k]).flatten() for k, w in weights["--split-attention"].items()])
    assert float(moved.norm()) > 0 and float(apart.norm()) < 1e-2 * float(moved.norm())


def test_cli_errors_are_structured(gold, tiny_dir, tmp_path):
    cases = [
        (("train", "sft", tmp_path, "--model", tiny_dir, "--out", tmp_path / "o1"), "not_a_run"),
        (("train", "sft", gold["not_tasks"], "--model", tiny_dir, "--out", tmp_path / "o2"), "not_tasks"),
        (("train", "sft", tmp_path / "missing", "--model", tiny_dir, "--out", tmp_path / "o3"), "not_found"),
        (("train", "sft", gold["run"], "--model", "nope:x", "--out", tmp_path / "o4"), "bad_model"),
        (("train", "sft", gold["run"], "--model", tiny_dir, "--out", tmp_path / "o5", "--max-len", "64"),
         "nothing_to_learn"),
        (("train", "sft", gold["run"], "--model", tiny_dir, "--out", tmp_path / "o6", "--max-len", "64",
          "--batch-tokens", "32"), "invalid_option"),
        (("train", "sft", gold["run"], "--model", tiny_dir, "--out", tmp_path / "o7", "--explain-picks"),
         "invalid_option"),
    ]  # fmt: skip
    for args, kind in cases:
        err = error_of(invoke(*args))
        assert err["type"] == kind, err
        assert err["message"]


def test_a_run_without_successes_is_refused(gold, tokenizer, tmp_path):
    from toolworld.pipeline import run

    run("retail", gold["tasks"], "noop", out=tmp_path / "noop", report=False)
    with pytest.raises(SFTError) as exc:
        sft_samples(tmp_path / "noop", tokenizer)
    assert exc.value.kind == "no_successful_trials"
    assert len(sft_samples(tmp_path / "noop", tokenizer, include_failed=True)) == 3


def test_cli_explain_picks_trains_on_the_pick_notes(tokenizer, tiny_dir, tmp_path):
    """``--explain-picks``: the gold run says how the described order was picked, and that note is learnt."""
    from toolworld.tasks.generate import generate
    from toolworld.tasks.model import write_jsonl

    described = next(t for t in generate("retail", 40, seed=3, sampler="info").tasks
                     if any(n.slot == "order" for n in t.scenario.needs))  # fmt: skip
    write_jsonl(tmp_path / "one.jsonl", [described])
    out = tmp_path / "notes"
    res = invoke("train", "sft", tmp_path / "one.jsonl", "--model", tiny_dir, "--out", out, "--max-steps", "1",
                 "--max-len", "6144", "--explain-picks", "--json")  # fmt: skip
    assert res.exit_code == 0, res.output
    [sample] = sft_samples(out / "gold-run", tokenizer)
    learnt = tokenizer.decode([t for t, m in zip(sample.input_ids, sample.loss_mask, strict=True) if m])
    assert 'Looking for "' in learnt and ", this one." in learnt
    [plain] = sft_samples(tmp_path / "one.jsonl", tokenizer, gold_out=tmp_path / "plain")
    assert "Looking for" not in tokenizer.decode(plain.input_ids)
