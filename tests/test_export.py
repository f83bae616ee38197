"""Exports for training: ``sft`` rendered through each model family's own chat template and read by TRL's
``SFTTrainer``; ``tokens`` from a token-level run; ``chat``; one fixed Arrow schema per format, so the exports
of different runs load together.

The SFT check per family builds TRL's trainer around a tiny random-weight model whose vocabulary matches the real
tokenizer (nothing is trained: the trainer's processed dataset is what is checked) and compares the tokens that
carry loss with the assistant turns as the tokenizer's own ``apply_chat_template`` renders them.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from rollout_kit import make_task
from toolworld.cli import app
from toolworld.pipeline import export_run
from toolworld.rollout.backends import tokenizer_source as policy_tokenizer_source
from toolworld.rollout.loop import run_episode
from toolworld.rollout.token_policy import Generation, TokenPolicy
from toolworld.scoring import score_trajectory
from toolworld.store import RunStore
from toolworld.store.export import SCHEMAS
from toolworld.tasks.model import write_jsonl
from toolworld.tokens import TokenBuffer, tool_call_text
from toolworld.world import get_world

TOKENIZERS = Path(__file__).resolve().parents[2] / "shared" / "tokenizers"
FAMILIES = ["qwen2.5-instruct", "qwen3", "qwen3-coder", "deepseek-v3.1", "gpt-oss", "smollm2-135m-instruct",
            "mistral-nemo-instruct-2407"]  # fmt: skip
# Text of the tokens that end an assistant turn in these families.
TURN_ENDS = ("<|im_end|>", "<|call|>", "<|return|>", "<|end|>", "<｜end▁of▁sentence｜>", "</s>")

runner = CliRunner()


def invoke(*args: str | Path) -> Any:
    return runner.invoke(app, [str(a) for a in args], catch_exceptions=False)


def shared(name: str) -> Path:
    path = TOKENIZERS / name
    if not path.is_dir():
        pytest.skip(f"needs the real tokenizers of ../shared/tokenizers (see its README); {path} is absent")
    return path


def gold_run(folder: Path, kinds: list[tuple[str, int]]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    write_jsonl(folder / "tasks.jsonl", [make_task(kind, i) for kind, i in kinds])
    res = invoke("run", "retail", "--tasks", folder / "tasks.jsonl", "--policy", "gold", "--out", folder / "run")
    assert res.exit_code == 0, res.output
    return folder / "run"


def needs_parquet() -> None:
    """Parquet exports need pyarrow with its JSON type (>= 19); reading them back, datasets' Json (>= 4.7)."""
    pa = pytest.importorskip("pyarrow")
    pytest.importorskip("datasets")
    if not hasattr(pa, "json_"):
        pytest.skip(f"pyarrow {pa.__version__} has no JSON type (needs >= 19)")


def load_parquet(files: list[Path], cache: Path) -> Any:
    datasets = pytest.importorskip("datasets")
    return datasets.load_dataset("parquet", data_files=[str(f) for f in files], split="train", cache_dir=str(cache))


@pytest.fixture(scope="module")
def cancel_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A gold run of a cancellation (three tool-call turns, then an answer) and an order-status question."""
    return gold_run(tmp_path_factory.mktemp("cancel"), [("cancel", 0), ("info", 1)])


# ----------------------------------------------------------------------------------------------- chat


def test_chat_export_has_object_arguments_and_skips_failures(cancel_run, tmp_path):
    res = invoke("export", cancel_run, "--format", "chat", "-o", tmp_path / "chat.jsonl")
    assert res.exit_code == 0, res.output
    rows = [json.loads(x) for x in (tmp_path / "chat.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and all(r["success"] for r in rows)
    calls = [c for m in rows[0]["messages"] for c in m.get("tool_calls", [])]
    assert [c["function"]["name"] for c in calls] == ["find_user_by_email", "get_order_details", "cancel_pending_order"]
    assert all(isinstance(c["function"]["arguments"], dict) for c in calls)  # objects, not JSON strings
    assert calls[2]["function"]["arguments"]["reason"] == "no longer needed"
    assert set(rows[0]) == {name for name, _ in SCHEMAS["chat"]}


# ------------------------------------------------------------------------------------- sft through TRL


def _decode(tok: Any, ids: list[int]) -> str:
    return tok.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)


def _spans(labels: list[int]) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    for pos, label in enumerate(labels):
        if label == -100:
            continue
        if spans and spans[-1][1] == pos:
            spans[-1] = (spans[-1][0], pos + 1)
        else:
            spans.append((pos, pos + 1))
    return spans


def _expected_turn(tok: Any, messages: list[dict[str, Any]], tools: list[Any], index: int) -> str | None:
    """Assistant message ``index`` as the tokenizer's own template renders it after its generation prompt, through
    its end-of-turn token; None where that render does not continue the prompt (no model could produce it)."""
    prompt = tok.apply_chat_template(messages[:index], tools=tools, tokenize=False, add_generation_prompt=True)
    turn = tok.apply_chat_template(messages[: index + 1], tools=tools, tokenize=False)
    if not turn.startswith(prompt):
        return None
    tail = turn[len(prompt):]
    end = max(tail.rfind(t) + len(t) if tail.rfind(t) >= 0 else -1 for t in TURN_ENDS)
    return tail[:end] if end > 0 else tail


_MODELS: dict[int, Any] = {}


def tiny_model(vocab: int) -> Any:
    """One tiny random-weight Llama per vocabulary size (Qwen3 and Qwen3-Coder share one)."""
    if vocab not in _MODELS:
        torch = pytest.importorskip("torch")
        from transformers import LlamaConfig, LlamaForCausalLM

        torch.manual_seed(0)
        _MODELS[vocab] = LlamaForCausalLM(LlamaConfig(vocab_size=vocab, hidden_size=16, intermediate_size=32,
                                                      num_hidden_layers=1, num_attention_heads=2,
                                                      num_key_value_heads=1, max_position_embeddings=16384))  # fmt: skip
    return _MODELS[vocab]


@pytest.mark.parametrize("family", FAMILIES)
def test_sft_export_of_a_gold_run_loads_in_trl_and_trains_only_assistant_turns(family, cancel_run, tmp_path):
    folder = shared(family)
    needs_parquet()
    pytest.importorskip("trl")
    transformers = pytest.importorskip("transformers")
    from trl import SFTConfig, SFTTrainer

    out = tmp_path / "sft.parquet"
    res = invoke("export", cancel_run, "--format", "sft", "--tokenizer", folder, "-o", out)
    assert res.exit_code == 0, res.output
    ds = load_parquet([out], tmp_path / "cache")
    assert ds.num_rows == 2 and set(ds.column_names) == {name for name, _ in SCHEMAS["sft"]}

    tok = transformers.AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    model = tiny_model(len(tok))
    trainer = None
    for assistant_only in (True, False):
        config = SFTConfig(output_dir=str(tmp_path / "trl"), report_to=[], max_length=None, use_cpu=True,
                           assistant_only_loss=assistant_only, per_device_train_batch_size=1, save_strategy="no",
                           dataset_num_proc=None)  # fmt: skip
        try:
            trainer = SFTTrainer(model=model, args=config, train_dataset=ds, processing_class=tok)
            break
        except ValueError as exc:
            # TRL only enables assistant_only_loss for templates it can patch with {% generation %} markers; the
            # exported assistant_masks apply either way.
            assert assistant_only and "not training-compatible" in str(exc), exc
    assert trainer is not None
    processed = trainer.train_dataset
    assert processed.num_rows == 2

    for row, done in zip(ds, processed, strict=True):
        ids, mask = row["input_ids"], row["assistant_masks"]
        assert done["input_ids"] == ids
        assert done["labels"] == [i if m else -100 for i, m in zip(ids, mask, strict=True)]
        messages = row["messages"]
        assistant = [k for k, m in enumerate(messages) if m["role"] == "assistant"]
        spans = [_decode(tok, ids[a:b]) for a, b in _spans(done["labels"])]
        assert len(spans) == len(assistant), spans
        untrained = _decode(tok, [i for i, m in zip(ids, mask, strict=True) if not m])
        request = next(m["content"] for m in messages if m["role"] == "user")
        for k, text in zip(assistant, spans, strict=True):
            msg = messages[k]
            expected = _expected_turn(tok, messages, row["tools"], k)
            if expected is not None:
                assert text == expected, (family, k)
            assert text.endswith(TURN_ENDS), text
            for call in msg.get("tool_calls") or []:  # native calls; inline ones are in the content
                args = call["function"]["arguments"]
                assert isinstance(args, dict)  # every family here takes objects (DeepSeek gets inline calls)
                assert call["function"]["name"] in text and all(str(v) in text for v in args.values())
            if msg["content"]:
                assert msg["content"] in text
            assert "placed_at" not in text and request not in text  # tool results and the user stay unmasked
        assert "placed_at" in untrained and request in untrained
        final = messages[assistant[-1]]["content"]
        assert final.startswith("Here is what you asked for") and final not in untrained
        # The retail tools reach the model: in the template's own tool block or in the system message.
        assert "cancel_pending_order" in untrained and "modify_pending_order_address" in untrained


# ------------------------------------------------------------------------------ a token-level run (fake)


class GoldEngine:
    """Samples, turn after turn, the task's gold calls written inline (Hermes), then an answer; distinct logprobs."""

    def __init__(self, tokenizer: Any, turns: list[str], end_id: int) -> None:
        self.tokenizer = tokenizer
        self.turns = list(turns)
        self.end_id = end_id
        self.sampled: list[tuple[list[int], list[float]]] = []

    async def generate(self, prompt_ids: list[int], **kwargs: Any) -> Generation:
        ids = [*self.tokenizer.encode(self.turns.pop(0), add_special_tokens=False), self.end_id]
        logprobs = [-(len(self.sampled) + 1) - k / 1000 for k in range(len(ids))]
        self.sampled.append((ids, logprobs))
        return Generation(ids, logprobs, "stop")


def token_run(folder: Path, tokenizer_folder: Path, kinds: list[tuple[str, int]],
              answer: str) -> tuple[Path, list[GoldEngine]]:  # fmt: skip
    """A run of a token-level policy whose engine replays the gold, stored like ``toolworld run`` stores it."""
    transformers = pytest.importorskip("transformers")
    tok = transformers.AutoTokenizer.from_pretrained(str(tokenizer_folder), local_files_only=True)
    tasks = [make_task(kind, i) for kind, i in kinds]
    world = get_world("retail")
    out = folder / "run"
    engines = []
    config = {"world": "retail", "policy": "fake", "policy_spec": f"hf:{tokenizer_folder}", "trials": 1}
    with RunStore.create(out, config, tasks) as store:
        for task in tasks:
            turns = [tool_call_text([a]) for a in task.gold_actions] + [answer]
            engine = GoldEngine(tok, turns, tok.convert_tokens_to_ids("<|im_end|>"))
            policy = TokenPolicy(engine, tok, name="fake-smollm2")
            traj = asyncio.run(run_episode(world, task, policy))
            store.record(traj, score_trajectory(task, traj))
            engines.append(engine)
    return out, engines


def test_tokens_export_holds_the_sampled_ids_mask_logprobs_and_reward(tmp_path):
    folder = shared("smollm2-135m-instruct")
    needs_parquet()
    out, engines = token_run(tmp_path, folder, [("cancel", 0), ("info", 1)], "Your order is cancelled.")
    target = tmp_path / "tokens.parquet"
    res = invoke("export", out, "--format", "tokens", "-o", target)
    assert res.exit_code == 0, res.output
    ds = load_parquet([target], tmp_path / "cache")
    assert ds.num_rows == 2 and set(ds.column_names) == {name for name, _ in SCHEMAS["tokens"]}
    with RunStore.open(out) as store:
        stored = list(store.trials())
    for row, (traj, score, _), engine in zip(ds, stored, engines, strict=True):
        buf = TokenBuffer.from_dict(traj.token_buffer or {})
        assert (row["task_id"], row["trial"], row["reward"], row["success"]) == (traj.task_id, 0, score.reward,
                                                                                 score.success)  # fmt: skip
        assert row["input_ids"] == buf.ids and row["loss_mask"] == buf.mask
        # Exactly the engine's ids and logprobs sit under the mask, in order; 0 elsewhere.
        sampled = [(i, lp) for i, m, lp in zip(row["input_ids"], row["loss_mask"], row["logprobs"], strict=True) if m]
        want = [(i, lp) for ids, lps in engine.sampled for i, lp in zip(ids, lps, strict=True)]
        assert [i for i, _ in sampled] == [i for i, _ in want]
        assert [lp for _, lp in sampled] == pytest.approx([lp for _, lp in want], abs=1e-6)  # stored as float32
        assert all(lp == 0.0 for lp, m in zip(row["logprobs"], row["loss_mask"], strict=True) if not m)
    # The info task's answer lacks the order status it must report: failed trials are exported too (RL needs them).
    assert ds[1]["success"] is False

    # A run without token buffers says what to do instead.
    gold = gold_run(tmp_path / "gold", [("info", 0)])
    res = invoke("export", gold, "--format", "tokens")
    assert res.exit_code == 1 and json.loads(res.stdout)["error"]["type"] == "no_token_buffers"
    assert not (gold / "tokens.parquet").exists()


def test_sft_defaults_to_the_run_policy_tokenizer_and_matches_its_rollout_buffer(tmp_path):
    """For a token-level run whose engine sampled exactly the template's own rendering of each turn, the SFT
    render of the stored conversation is token for token the rollout's buffer, and the mask its loss mask."""
    folder = shared("smollm2-135m-instruct")
    out, _ = token_run(tmp_path, folder, [("cancel", 0)], "Your order #W is cancelled.")
    assert policy_tokenizer_source(f"hf:{folder}") == str(folder)
    with RunStore.open(out) as store:
        n = export_run(store, "sft", tmp_path / "sft.jsonl", include_failed=True)  # no tokenizer: the policy's
        traj = next(iter(store.trials()))[0]
    assert n == 1
    row = json.loads((tmp_path / "sft.jsonl").read_text())
    buf = TokenBuffer.from_dict(traj.token_buffer or {})
    assert row["input_ids"] == buf.ids and row["assistant_masks"] == buf.mask
    assert row["tokenizer"] == folder.name and row["unsampleable_turns"] == 0
    # SmolLM2's template renders no tools: the prepared messages state them in the system message, calls inline.
    assert "<tools>" in row["messages"][0]["content"] and "tool_calls" not in row["messages"][2]


# ------------------------------------------------------------------------------ one schema across runs


def test_exports_of_different_runs_load_together(cancel_run, tmp_path):
    """Runs whose conversations differ in shape (different tools, so different argument keys; a change of
    address; an answer-only turn) give files with the same schema, which load as one dataset."""
    needs_parquet()
    other = gold_run(tmp_path / "other", [("address", 0), ("refusal", 0)])
    families = [f for f in ("qwen2.5-instruct",) if (TOKENIZERS / f).is_dir()]
    for fmt in ("chat", "parquet", *(["sft"] if families else [])):
        files = []
        for k, run in enumerate((cancel_run, other)):
            extra = ["--tokenizer", TOKENIZERS / families[0]] if fmt == "sft" else []
            files.append(tmp_path / f"{fmt}{k}.parquet")
            res = invoke("export", run, "--format", fmt, "--all", "-o", files[-1], *extra) if fmt != "parquet" else \
                invoke("export", run, "--format", fmt, "-o", files[-1])  # fmt: skip
            assert res.exit_code == 0, res.output
        ds = load_parquet(files, tmp_path / f"cache_{fmt}")
        assert ds.num_rows == 4
        if fmt == "parquet":
            continue
        calls = {c["function"]["name"]: c["function"]["arguments"] for row in ds for m in row["messages"]
                 for c in m.get("tool_calls") or []}  # fmt: skip
        # Each call keeps exactly its own arguments: no keys of other tools filled in with nulls.
        assert calls["find_user_by_email"].keys() == {"email"}
        assert calls["modify_pending_order_address"].keys() == {"order_id", "line1", "city", "state", "zip"}
        assert calls["cancel_pending_order"].keys() == {"order_id", "reason"}
        assert all(set(m) <= {"role", "content", "tool_calls", "tool_call_id", "name", "reasoning_content"}
                   for row in ds for m in row["messages"])  # fmt: skip


def test_export_options_are_checked(cancel_run, tmp_path):
    res = invoke("export", cancel_run, "--format", "chat", "--tokenizer", tmp_path)
    assert res.exit_code == 1 and json.loads(res.stdout)["error"]["type"] == "invalid_option"
    res = invoke("export", cancel_run, "--format", "sft", "--tokenizer", tmp_path / "missing")
    assert res.exit_code == 1 and json.loads(res.stdout)["error"]["type"] == "bad_tokenizer"
    res = invoke("export", cancel_run, "--format", "sft")  # a gold run has no tokenizer of its own
    err = json.loads(res.stdout)["error"]
    assert res.exit_code == 1 and err["type"] == "no_tokenizer" and "--tokenizer" in err["message"]
    assert policy_tokenizer_source("gold:drop=0.3") is None and policy_tokenizer_source("openai:gpt@http://x") is None
    assert policy_tokenizer_source("vllm:Qwen/Qwen3-8B@http://gpu:8000,tokenizer=./qwen3") == "./qwen3"
    assert policy_tokenizer_source("gguf:/models/m.gguf,n_ctx=4096") == "/models/m.gguf"
