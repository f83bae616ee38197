"""One tokenizer loader for every caller (``toolworld.tokens.load_tokenizer``), the policy layer saying which
tokenizer a ``--policy`` spec samples with (``tokenizer_source``), and exports that get their tokenizer from the
orchestration rather than reaching into the policy code themselves."""

from __future__ import annotations

import ast
import asyncio
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gguf_kit import SMOLLM2, write_sentencepiece_gguf
from rollout_kit import make_task
from toolworld import pipeline
from toolworld.rollout.backends import POLICIES, PolicySpec, make_policy, policy, tokenizer_source
from toolworld.rollout.loop import run_episode
from toolworld.scoring import score_trajectory
from toolworld.store import RunStore
from toolworld.tokens import TemplateError, load_tokenizer
from toolworld.world import get_world

SRC = Path(__file__).resolve().parents[1] / "src" / "toolworld"
needs_shared = pytest.mark.skipif(not SMOLLM2.is_dir(), reason=f"needs the shared tokenizers at {SMOLLM2}")


def kind_of(source: Any) -> str:
    with pytest.raises(TemplateError) as info:
        load_tokenizer(source)
    assert isinstance(info.value, ValueError)  # a bad tokenizer argument is a bad argument like any other
    return info.value.kind


# -- the loader -------------------------------------------------------------------------------------------


@needs_shared
def test_a_tokenizer_folder_loads_as_str_or_path():
    pytest.importorskip("transformers")
    a, b = load_tokenizer(SMOLLM2), load_tokenizer(str(SMOLLM2))
    text = "Order #W1234567 😀"
    assert a.encode(text, add_special_tokens=False) == b.encode(text, add_special_tokens=False)
    assert a.convert_tokens_to_ids("<|im_end|>") == 2 and a.chat_template


def test_a_gguf_file_loads_with_the_original_vocabulary_and_template(tiny_gguf):
    pytest.importorskip("transformers")
    ours, ref = load_tokenizer(tiny_gguf), load_tokenizer(SMOLLM2)
    for text in ("Hello, world! 1234567", "東京 😀👍🏽 café", "<|im_start|>user\nhi<|im_end|>\n"):
        assert ours.encode(text, add_special_tokens=False) == ref.encode(text, add_special_tokens=False), text
    chat = [{"role": "user", "content": "Où est ma commande?"}]
    assert ours.apply_chat_template(chat, tokenize=False, add_generation_prompt=True) == \
        ref.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)  # fmt: skip


def test_a_loaded_tokenizer_passes_through_untouched():
    class Tok:
        chat_template = "{{ messages }}"

    tok = Tok()
    assert load_tokenizer(tok) is tok


def test_nothing_and_a_missing_path_say_what_to_pass(tmp_path):
    assert kind_of(None) == "not_a_tokenizer"
    missing = tmp_path / "nowhere"
    assert kind_of(missing) == "not_found"
    with pytest.raises(TemplateError, match=r"nowhere does not exist; pass a tokenizer folder .* or a \.gguf"):
        load_tokenizer(str(missing))


def test_files_and_folders_that_are_not_tokenizers_are_refused_with_the_way_out(tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("hello")
    assert kind_of(notes) == "not_a_tokenizer"

    # The tokenizer.json itself rather than its folder: the message names the folder.
    folder = tmp_path / "tok"
    folder.mkdir()
    (folder / "tokenizer.json").write_text("{}")
    with pytest.raises(TemplateError, match="pass its folder " + re.escape(str(folder))):
        load_tokenizer(folder / "tokenizer.json")

    empty = tmp_path / "empty"
    empty.mkdir()
    assert kind_of(empty) == "not_a_tokenizer"
    # A model folder holding only a GGUF file: the message names the file to pass.
    (empty / "model.Q4.gguf").write_bytes(b"GGUF")
    with pytest.raises(TemplateError, match=r"pass the model file itself \(.*model\.Q4\.gguf\)"):
        load_tokenizer(empty)

    # A folder that claims to be a tokenizer but is broken: refused as such, not a transformers traceback.
    pytest.importorskip("transformers")
    (folder / "tokenizer.json").write_text("{not json")
    assert kind_of(folder) == "not_a_tokenizer"


def test_a_file_named_gguf_that_is_not_one_is_refused(tmp_path):
    pytest.importorskip("gguf")
    pytest.importorskip("transformers")
    fake = tmp_path / "model.gguf"
    fake.write_bytes(b"this is not a GGUF file at all" * 10)
    with pytest.raises(TemplateError, match="is not a readable GGUF file") as info:
        load_tokenizer(fake)
    assert info.value.kind == "not_a_tokenizer"


def test_a_gguf_whose_vocabulary_cannot_be_rebuilt_asks_for_the_tokenizer_folder(tmp_path):
    pytest.importorskip("gguf")
    pytest.importorskip("transformers")
    write_sentencepiece_gguf(tmp_path / "spm.gguf")
    with pytest.raises(TemplateError, match=r"'llama' cannot be rebuilt.*tokenizer=PATH") as info:
        load_tokenizer(tmp_path / "spm.gguf")
    assert info.value.kind == "unsupported_tokenizer"


def test_importing_toolworld_tokens_loads_no_tokenizer_library():
    code = ("import sys, toolworld.tokens; from toolworld.tokens import load_tokenizer; "
            "print(sorted(m for m in ('transformers', 'tokenizers', 'gguf', 'torch') if m in sys.modules))")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stderr


def test_a_policy_spec_with_a_bad_tokenizer_is_a_bad_spec(tmp_path):
    """The engines load through the same loader: its error reaches the user as a bad --policy spec."""
    with pytest.raises(pipeline.RunError, match="does not exist") as info:
        pipeline.make_policy(f"vllm:m@http://vllm.test:8000,tokenizer={tmp_path / 'missing'}")
    assert info.value.kind == "bad_policy_spec"
    notes = tmp_path / "notes.txt"
    notes.write_text("x")
    with pytest.raises(ValueError, match="is a file, not a tokenizer"):
        make_policy(f"vllm:m@http://vllm.test:8000,tokenizer={notes}")


# -- which tokenizer a policy spec samples with ---------------------------------------------------------------


def test_tokenizer_source_of_each_built_in_kind(tmp_path, monkeypatch):
    monkeypatch.setenv("TOOLWORLD_CACHE", str(tmp_path / "cache"))  # nothing pulled here
    for spec in ("gold", "gold:drop=0.3", "noop", "gibberish:seed=2", "openai:gpt-4o@http://x/v1", None, "  "):
        assert tokenizer_source(spec) is None, spec
    assert tokenizer_source("hf:./models/m") == "./models/m"
    assert tokenizer_source("hf:./models/m,tokenizer=./tok,temperature=0.7") == "./tok"  # the option wins
    assert tokenizer_source("gguf:/models/m.gguf,n_ctx=4096") == "/models/m.gguf"
    assert tokenizer_source(PolicySpec("gguf", "/m.gguf")) == "/m.gguf"  # an already parsed spec
    # vllm: a served model that is a local folder carries its tokenizer; a hub name does not say
    served = tmp_path / "Qwen3-8B"
    served.mkdir()
    assert tokenizer_source(f"vllm:{served}@http://gpu:8000") == str(served)
    assert tokenizer_source("vllm:Qwen/Qwen3-8B@http://gpu:8000") is None
    assert tokenizer_source("vllm:Qwen/Qwen3-8B@http://gpu:8000,tokenizer=./qwen3") == "./qwen3"
    # a tokenizer= option answers for any kind, even one that samples no tokens itself
    assert tokenizer_source("openai:gpt@http://x,tokenizer=./t") == "./t"

    # smollm2: the pulled model file, and only once it is pulled (nothing is fetched to answer)
    from toolworld.rollout.models import SMOLLM2 as SPEC
    from toolworld.rollout.models import model_path

    assert tokenizer_source("smollm2") is None and tokenizer_source("smollm2,engine=hf") is None
    path = model_path("smollm2")
    path.parent.mkdir(parents=True)
    with path.open("wb") as fh:
        fh.truncate(SPEC.size)  # the size the cache checks; sparse, so nothing is written
    assert tokenizer_source("smollm2") == str(path) == tokenizer_source("smollm2,engine=hf,temperature=0")
    assert tokenizer_source("smollm2,tokenizer=/elsewhere") == "/elsewhere"


def test_tokenizer_source_of_plugins_and_unknown_kinds():
    with POLICIES.isolated():

        @policy("local", usage="local:PATH", takes_target="a path", options=("depth",),
                tokenizer=lambda spec: f"{spec.target}/tokenizer")  # fmt: skip
        def make_local(target: str, **options: Any) -> Any:
            raise AssertionError("tokenizer_source must not build the policy")

        @policy("remote", usage="remote:MODEL", takes_target="MODEL")
        def make_remote(target: str, **options: Any) -> Any:
            raise AssertionError("tokenizer_source must not build the policy")

        assert tokenizer_source("local:/m,depth=2") == "/m/tokenizer"
        assert tokenizer_source("remote:big") is None  # registered without saying
        assert tokenizer_source("remote:big,tokenizer=/t") == "/t"
    assert tokenizer_source("local:/m") is None  # a stored spec whose plugin is gone
    with pytest.raises(ValueError, match="not key=value"):
        tokenizer_source("hf:./m,oops")


# -- exports get their tokenizer from the orchestration ------------------------------------------------------


def test_the_store_scoring_and_report_do_not_import_the_policy_code():
    offenders = []
    for package in ("store", "scoring", "report"):
        for path in sorted((SRC / package).rglob("*.py")):
            depth = len(path.relative_to(SRC).parts) - 1  # how many dots reach the toolworld package
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                names: list[str] = []
                if isinstance(node, ast.ImportFrom):
                    base = node.module or ""
                    if node.level == depth + 1:
                        names = [f"toolworld.{base}" if base else "toolworld"]
                        if not base:  # from .. import rollout
                            names = [f"toolworld.{a.name}" for a in node.names]
                    elif node.level == 0:
                        names = [base]
                elif isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                offenders += [f"{path.relative_to(SRC)}: {n}" for n in names if n.startswith("toolworld.rollout")]
    assert offenders == []


def gold_store(out: Path, spec: str) -> Path:
    """A run stored as if ``spec`` had sampled it (the trajectories are the gold's: exports only read them)."""
    tasks = [make_task("cancel", 0)]
    config = {"world": "retail", "policy": spec, "policy_spec": spec, "trials": 1}
    with RunStore.create(out, config, tasks) as store:
        for task in tasks:
            traj = asyncio.run(run_episode(get_world("retail"), task, make_policy("gold")))
            store.record(traj, score_trajectory(task, traj))
    return out


def test_sft_export_of_a_gguf_run_renders_through_the_gguf_it_sampled_with(tiny_gguf, tmp_path):
    pytest.importorskip("transformers")
    out = gold_store(tmp_path / "run", f"gguf:{tiny_gguf},n_ctx=2048")
    result = pipeline.export(out, "sft", output=tmp_path / "own.jsonl")
    assert (result.path, result.fmt, result.records) == (tmp_path / "own.jsonl", "sft", 1)
    own = json.loads(result.path.read_text())
    ref = json.loads(pipeline.export(out, "SFT", output=tmp_path / "ref.jsonl", tokenizer=SMOLLM2).path.read_text())
    assert own["tokenizer"] == tiny_gguf.name and ref["tokenizer"] == SMOLLM2.name
    # the GGUF's rebuilt tokenizer and template give the very ids of the original tokenizer folder
    assert own["input_ids"] == ref["input_ids"] and own["assistant_masks"] == ref["assistant_masks"]
    assert 0 < sum(own["assistant_masks"]) < len(own["input_ids"])


def test_export_errors_are_run_errors_of_the_exports_kind_and_leave_no_file(tmp_path):
    out = gold_store(tmp_path / "run", "gold")
    with pytest.raises(pipeline.RunError, match="--format chat") as info:
        pipeline.export(out, "sft")
    assert info.value.kind == "no_tokenizer" and not (out / "sft.parquet").exists()
    notes = tmp_path / "notes.txt"
    notes.write_text("x")
    with pytest.raises(pipeline.RunError, match="is a file, not a tokenizer") as info:
        pipeline.export(out, "sft", output=tmp_path / "sft.jsonl", tokenizer=notes)
    assert info.value.kind == "bad_tokenizer" and not (tmp_path / "sft.jsonl").exists()
    for fmt, tok in (("csv", None), ("chat", notes)):
        with pytest.raises(pipeline.RunError) as info:
            pipeline.export(out, fmt, tokenizer=tok)
        assert info.value.kind == "invalid_option"
    # the store on its own renders nothing without being handed a tokenizer
    from toolworld.store.export import ExportError, export_run

    with RunStore.open(out) as store, pytest.raises(ExportError) as err:
        export_run(store, "sft", tmp_path / "x.jsonl")
    assert err.value.kind == "no_tokenizer"
