"""Episodes of a real model through ``toolworld run``: llama.cpp one episode at a time against the hf engine
decoding batches of episodes together.

    python benchmarks/engines.py --model runs/learning-fast/sft/final --gguf runs/learning-fast/sft/model.gguf
    python benchmarks/engines.py --tasks 16                      # the embedded model (its GGUF, both engines)
    python benchmarks/engines.py --model M --configs hf-bf16-b8-untrimmed,hf-bf16-b8 --tasks 48   # memory

Each configuration is one ``toolworld run`` subprocess (the path users take: the CLI, the policy spec, the scripted
user, scoring and the run store) on the same retail info tasks (generator seed 202), at temperature 0, evaluation
limits of the learning benchmark (12 assistant turns). ``--model`` is a transformers folder and ``--gguf`` the same
weights for llama.cpp; by default both engines read the embedded SmolLM2 GGUF (transformers dequantizes it), whose
untrained episodes ramble to the turn limit, so a trained model is the realistic load. The anchor is llama.cpp
(``gguf``), the fastest single-sequence path on a CPU. Wall time includes loading the model.

Why batches pay on a CPU: decoding one token of one sequence reads every weight once; a batch of 8 reads them once
for 8 tokens. The hf engine keeps each episode's keys and values between its turns (a turn reads only its new
tokens) and copies the system prompt episodes share.

Each configuration also reports its peak resident memory (``peak_rss_gb``, the subprocess's own ``ru_maxrss``).
``hf-bf16-b8-untrimmed`` is ``hf-bf16-b8`` with the engine's heap trim after each batch switched off
(``toolworld.core.memory``): the same command, started through a wrapper that replaces the trim by a no-op.
``*-static`` is the hf engine with ``hand_back=0``: a batch runs until its longest reply ends, while the episodes
whose replies stopped early wait for it (the default hands those replies back once half of a batch has stopped
and continues the running rows beside the next turns). ``*-solo`` is the hf engine with ``batch_prefill=0``: each
prompt of a batch is read by a forward of its own (the default reads the new ids of all the prompts that extend a
kept turn in one forward).

The last line printed is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

#: name -> (engine, dtype, batch, heap trim after each batch, extra spec options); the first is the anchor.
CONFIGS: dict[str, tuple[str, str, int, bool, str]] = {
    "gguf": ("gguf", "f16", 1, True, ""),
    "hf-bf16-b8": ("hf", "bfloat16", 8, True, ""),
    "hf-bf16-b16": ("hf", "bfloat16", 16, True, ""),
    "hf-fp32-b8": ("hf", "float32", 8, True, ""),
    "hf-bf16-b1": ("hf", "bfloat16", 1, True, ""),
    "hf-bf16-b8-untrimmed": ("hf", "bfloat16", 8, False, ""),
    # a batch runs until its longest reply ends (no hand back of the running rows once half have stopped)
    "hf-bf16-b8-static": ("hf", "bfloat16", 8, True, ",hand_back=0"),
    "hf-fp32-b8-static": ("hf", "float32", 8, True, ",hand_back=0"),
    # every prompt of a batch read by a forward of its own (no batched read of the next turns' new ids)
    "hf-bf16-b8-solo": ("hf", "bfloat16", 8, True, ",batch_prefill=0"),
    "hf-fp32-b8-solo": ("hf", "float32", 8, True, ",batch_prefill=0"),
}

#: ``python -m toolworld`` with the hf engine's heap trim replaced by a no-op (the engine as it was without one).
UNTRIMMED = ("import sys, toolworld.rollout.engines.hf as hf; hf.release_freed_memory = lambda: False; "
             "sys.argv[0] = 'toolworld'; from toolworld.cli import main; main()")  # fmt: skip


def spec(engine: str, dtype: str, batch: int, model: str, gguf: str, max_tokens: int) -> str:
    common = f"temperature=0,max_tokens={max_tokens},tool_prompt=compact"
    if engine == "gguf":
        return f"gguf:{gguf},{common},n_ctx=8192"
    return f"hf:{model},{common},device=cpu,dtype={dtype},max_batch={batch}"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", help="transformers folder (default: the embedded GGUF, dequantized)")
    p.add_argument("--gguf", help="the same weights as GGUF for llama.cpp (default: the embedded model)")
    p.add_argument("--tasks", type=int, default=32, help="retail info tasks to run (default 32)")
    p.add_argument("--configs", default="gguf,hf-bf16-b8,hf-bf16-b16",
                   help=f"comma-separated, the first is the anchor; known: {', '.join(CONFIGS)}")
    p.add_argument("--max-tokens", type=int, default=160, help="tokens per assistant turn")
    p.add_argument("--out", type=Path, default=None, help="keep the runs here (default: a temporary folder)")
    a = p.parse_args()
    names = [n.strip() for n in a.configs.split(",") if n.strip()]
    unknown = [n for n in names if n not in CONFIGS]
    if unknown or not names:
        p.error(f"unknown config(s) {unknown}; known: {', '.join(CONFIGS)}")
    if a.tasks < 1:
        p.error("--tasks must be >= 1")
    from toolworld.rollout.models import ensure_model
    from toolworld.tasks.generate import generate

    embedded = str(ensure_model("smollm2"))
    model, gguf = a.model or embedded, a.gguf or embedded
    for path in (model, gguf):
        if not Path(path).exists():
            p.error(f"{path} does not exist")
    out = a.out or Path(tempfile.mkdtemp(prefix="toolworld-engines-"))
    out.mkdir(parents=True, exist_ok=True)
    tasks = out / "tasks.jsonl"
    if not tasks.is_file():
        tasks.write_text("".join(line + "\n" for line in generate("retail", a.tasks, seed=202, sampler="info").lines),
                         encoding="utf-8")  # fmt: skip
    results: dict[str, Any] = {}
    for name in names:
        engine, dtype, batch, trim, extra = CONFIGS[name]
        run_dir = out / name
        toolworld = ["-m", "toolworld"] if trim else ["-c", UNTRIMMED]
        cmd = [sys.executable, *toolworld, "run", "retail", "--tasks", str(tasks), "--out", str(run_dir),
               "--policy", spec(engine, dtype, batch, model, gguf, a.max_tokens) + extra, "--concurrency", str(batch),
               "--max-turns", "12", "--max-tokens", "8032"]  # fmt: skip
        if run_dir.exists():
            sys.exit(f"{run_dir} exists: pass another --out")
        started = time.perf_counter()
        log = run_dir.with_suffix(".log")
        with log.open("w", encoding="utf-8") as sink:
            proc = subprocess.Popen(cmd, stdout=sink, stderr=subprocess.STDOUT)
            _, status, usage = os.wait4(proc.pid, 0)  # this child's own peak memory (RUSAGE_CHILDREN is a max)
        wall = time.perf_counter() - started
        code = os.waitstatus_to_exitcode(status)
        if code != 0:
            sys.exit(f"{name} failed ({code}):\n{log.read_text(encoding='utf-8', errors='replace')[-2000:]}")
        summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
        peak = usage.ru_maxrss / 1024**2  # KiB on Linux
        results[name] = {"wall_s": round(wall, 1), "episodes": summary.get("scored"),
                         "success_rate": summary.get("success_rate"), "peak_rss_gb": round(peak, 2)}  # fmt: skip
        print(f"{name}: {wall:.1f} s, success {summary.get('success_rate')}, peak RSS {peak:.2f} GB", file=sys.stderr,
              flush=True)  # fmt: skip
    anchor = results[names[0]]["wall_s"]
    for row in results.values():
        row["speedup_vs_anchor"] = round(anchor / row["wall_s"], 2) if row["wall_s"] else None
    print(json.dumps({"benchmark": "engines", "model": model, "gguf": gguf, "tasks": a.tasks, "anchor": names[0],
                      "runs": results}))  # fmt: skip


if __name__ == "__main__":
    main()
