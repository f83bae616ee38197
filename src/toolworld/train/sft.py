"""Supervised fine-tuning on toolworld conversations: the built-in loop, its data sources, and a TRL path.

The loop reads top to bottom in :func:`train_sft`::

    for step in 1..T:                      # T = max_steps, or epochs x ceil(batches / grad_accum)
        for micro in the step's grad_accum packed batches:
            loss += (n_micro / n_step) * NLL(micro)      # masked NLL, weighted by loss tokens
        loss.backward(); clip_grad_norm(max_grad_norm); AdamW.step()
        lr = lr_max * min((s + 1) / W, (T - s) / (T - W))  # linear warmup over W steps, then linear decay

Only assistant tokens carry loss (``Sample.loss_mask``), so the model learns what it has to produce and never
the tool results or the user's words. Micro-batches are packed (:func:`toolworld.train.data.pack`) up to
``batch_tokens`` tokens, so short and long conversations cost the same padding-free compute.

The whole schedule (data order of every epoch, micro-batches of every step) is fixed by ``seed`` before the first
step. That is what makes a run on CPU deterministic and a resumed run exact: resuming from ``checkpoint-N``
restores weights, optimizer, scheduler and RNG, then skips the schedule's first N steps, so it ends where an
uninterrupted run ends.

Output folder (``SFTConfig.out``):

- ``train.jsonl``: one line per logged step (``step``, ``loss``, ``tokens``, ``tokens_per_s``, ``lr``,
  ``grad_norm``, ``epoch``).
- ``checkpoint-N/``: the model (or just the LoRA adapter) as ``save_pretrained`` writes it, ``optimizer.pt``
  (optimizer, scheduler and RNG states) and ``trainer_state.json`` (step, config). Written to a temporary folder
  and renamed, so a crash never leaves a checkpoint that looks complete but is not.
- ``final/``: a model folder any ``hf:`` policy loads (weights, config and tokenizer). With LoRA the adapter is
  merged into the base weights by default (``merge_lora=True``), so the result runs without peft; with
  ``merge_lora=False`` it holds the adapter only (``adapter_config.json``), for peft users.

torch, transformers and peft are imported inside the functions, so ``import toolworld`` stays light.
"""

from __future__ import annotations

import contextlib
import json
import math
import random
import shutil
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.errors import ToolworldError
from ..rollout.models import write_model_card
from ..tokens.template import TOOL_PROMPT_CHOICES
from .lora import DEFAULT_LORA_TARGETS, wrap_lora

if TYPE_CHECKING:
    from .data import Sample

__all__ = ["DEFAULT_LORA_TARGETS", "SFTConfig", "SFTError", "SFTResult", "StepLog", "latest_checkpoint",
           "load_model", "sft_samples", "train_sft", "train_sft_trl"]  # fmt: skip

LOG_FILE = "train.jsonl"
FINAL_DIR = "final"
GOLD_RUN_DIR = "gold-run"
STATE_FILE = "trainer_state.json"
OPTIM_FILE = "optimizer.pt"


def base_model(model: Any) -> Any:
    """The transformers model itself: the one a peft wrapper wraps, else ``model``."""
    return model.get_base_model() if hasattr(model, "get_base_model") else model


def checkpoints_layers(model: Any) -> bool:
    """Whether ``model`` (or the model a peft wrapper wraps) recomputes its layers in the backward pass (the
    newer transformers name first: the older one warns that it is deprecated)."""
    base = base_model(model)
    flag = getattr(base, "is_activation_checkpointing", None)
    return bool(getattr(base, "is_gradient_checkpointing", False) if flag is None else flag)


@contextlib.contextmanager
def layer_checkpointing(model: Any, enabled: bool = True) -> Iterator[None]:
    """Within the block, recompute each decoder layer in the backward pass instead of keeping its activations.

    A packed row's attention has a custom mask, which CPU attention kernels materialize as a heads x T x T matrix
    per layer: kept for the backward pass in every layer that is ~2.4 GB per layer for an 8k-token row of SmolLM2
    (9 heads), 72 GB for its 30 layers. Recomputed, one layer's worth is alive at a time, for ~30% more compute.
    Only the decoder layers' own ``training`` flag is raised (what transformers checks before checkpointing), so a
    model kept in eval mode (GRPO) keeps dropout off, and the flags and the setting are restored on exit, so a
    sampler over the same model keeps its KV cache.
    """
    if not enabled:
        yield
        return
    base = base_model(model)
    if checkpoints_layers(base):  # the caller's own setting: leave it as it is
        yield
        return
    base.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
    layers = [m for m in base.modules() if getattr(m, "gradient_checkpointing", False)]
    modes = [m.training for m in layers]
    for m in layers:
        m.training = True
    try:
        yield
    finally:
        for m, mode in zip(layers, modes, strict=True):
            m.training = mode
        base.activation_checkpointing_disable()
        if hasattr(base, "disable_input_require_grads"):  # the embedding hook enabling adds is not removed above
            base.disable_input_require_grads()


#: Options that change what a step trains on or how it is rendered, with the value a run that predates them had:
#: a resume must keep them, or steps, the schedule and the recorded tool prompt would silently shift.
LAYOUT_KEYS: dict[str, Any] = {"tool_prompt": "auto", "packing": True, "share_prefix": False}


def stored_config(out: str | Path) -> dict[str, Any] | None:
    """The configuration recorded in the latest checkpoint of ``out`` (None when there is none)."""
    ckpt = latest_checkpoint(out)
    if ckpt is None:
        return None
    return dict(json.loads((ckpt / STATE_FILE).read_text(encoding="utf-8")).get("config", {}))


def same_prompt(sampler: Any, tool_prompt: str, error: type[ToolworldError]) -> None:
    """Refuse a sampler that states tools otherwise than the run trains and records (``tool_prompt``): its tokens
    would be learned under one prompt and the model card would name another."""
    theirs = getattr(sampler, "tool_prompt", None)
    if theirs is not None and theirs != tool_prompt:
        raise error(f"the sampler states tools as {theirs!r} but the run trains with tool_prompt={tool_prompt!r}: "
                    "give both the same tool prompt", kind="invalid_option")  # fmt: skip


def check_tool_prompt(value: str, error: type[ToolworldError]) -> None:
    """Refuse a ``tool_prompt`` that ``ChatTemplate`` does not know, with the trainer's own error class."""
    if value not in TOOL_PROMPT_CHOICES:
        raise error(f"tool_prompt must be one of {', '.join(TOOL_PROMPT_CHOICES)}, got {value!r}",
                    kind="invalid_option")  # fmt: skip


class SFTError(ToolworldError):
    """SFT that cannot run as asked; ``kind`` names why (``not_a_run``, ``not_tasks``, ``no_successful_trials``,
    ``bad_model``, ``no_checkpoint``, ``invalid_option``, ``missing_dependency``, ...)."""

    default_kind = "sft_error"


@dataclass(slots=True)
class SFTConfig:
    """Hyper-parameters and output folder of one SFT run.

    ``max_steps`` (when set) wins over ``epochs``: the data is then cycled, a fresh shuffle each epoch.
    ``batch_tokens`` bounds one packed micro-batch; a step is ``grad_accum`` micro-batches. ``save_every`` 0
    saves a checkpoint only at the end (and on Ctrl-C), so that ``resume`` always has one to continue from.
    """

    out: Path = Path("sft-out")
    lr: float = 2e-5
    epochs: int = 1
    max_steps: int | None = None
    batch_tokens: int = 8192
    grad_accum: int = 1
    max_len: int = 4096
    share_prefix: bool = True
    warmup_ratio: float = 0.05
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    lora: bool = False
    lora_r: int = 16
    lora_alpha: int = 32
    lora_dropout: float = 0.0
    lora_targets: tuple[str, ...] = DEFAULT_LORA_TARGETS
    merge_lora: bool = True
    seed: int = 0
    log_every: int = 1
    save_every: int = 0
    #: Checkpoints kept on disk, the newest (0: all); each holds the weights and the optimizer state.
    keep_checkpoints: int = 2
    resume: bool = False
    #: How tools were stated in the training data; recorded in ``final/`` so that policies sample with it.
    tool_prompt: str = "auto"
    #: Recompute layer activations in the backward pass (:func:`layer_checkpointing`): long packed rows fit in RAM.
    gradient_checkpointing: bool = False
    #: Pack several samples into a row (exact block-diagonal masks). Off: one sample per micro-batch, whose plain
    #: causal mask lets attention kernels skip the masked half and keep no T x T matrix, which on a CPU beats
    #: packing once conversations run to thousands of tokens (see ``docs/benchmarks.md``).
    packing: bool = True
    #: Run the forward pass under bfloat16 autocast (weights and optimizer stay float32): ~1.5x faster on CPUs
    #: with bf16 instructions (AVX512-BF16, AMX) and on GPUs, for logprobs a few 1e-3 off float32's.
    bf16: bool = False

    def __post_init__(self) -> None:
        self.out = Path(self.out)
        self.lora_targets = tuple(self.lora_targets)
        check_tool_prompt(self.tool_prompt, SFTError)
        checks = [("lr", self.lr > 0, "> 0"), ("epochs", self.epochs >= 1, ">= 1"),
                  ("max_steps", self.max_steps is None or self.max_steps >= 1, ">= 1"),
                  ("batch_tokens", self.batch_tokens >= 1, ">= 1"), ("grad_accum", self.grad_accum >= 1, ">= 1"),
                  ("max_len", self.max_len >= 2, ">= 2"), ("warmup_ratio", 0 <= self.warmup_ratio < 1, "in [0, 1)"),
                  ("max_grad_norm", self.max_grad_norm > 0, "> 0"), ("lora_r", self.lora_r >= 1, ">= 1"),
                  ("log_every", self.log_every >= 1, ">= 1"), ("save_every", self.save_every >= 0, ">= 0"),
                  ("keep_checkpoints", self.keep_checkpoints >= 0, ">= 0 (0 keeps all)"),
                  # a packed micro-batch holds whole samples, so it must fit the longest one
                  ("batch_tokens", self.batch_tokens >= self.max_len, f">= max_len ({self.max_len})")]  # fmt: skip
        for name, ok, want in checks:
            if not ok:
                raise SFTError(f"{name} must be {want}, got {getattr(self, name)!r}", kind="invalid_option")

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["out"], data["lora_targets"] = str(self.out), list(self.lora_targets)
        return data


@dataclass(frozen=True, slots=True)
class StepLog:
    """One optimizer step, as logged to ``train.jsonl`` and passed to ``on_step``."""

    step: int
    total_steps: int
    loss: float
    tokens: int  # tokens that carried loss in this step
    tokens_per_s: float  # all tokens processed (prompt included) per second of this step
    lr: float
    grad_norm: float
    epoch: int

    def to_dict(self) -> dict[str, Any]:
        return {"step": self.step, "loss": self.loss, "tokens": self.tokens, "tokens_per_s": self.tokens_per_s,
                "lr": self.lr, "grad_norm": self.grad_norm, "epoch": self.epoch}  # fmt: skip


@dataclass(slots=True)
class SFTResult:
    """What a training call did: steps run (``resumed_from`` of them restored), losses per step, and where the
    final model is (None when interrupted: the checkpoint of the last step is there instead)."""

    out: Path
    steps: int
    total_steps: int
    losses: list[float] = field(default_factory=list)
    resumed_from: int = 0
    final: Path | None = None
    checkpoint: Path | None = None
    interrupted: bool = False
    tokens: int = 0
    wall_s: float = 0.0
    trainable_params: int = 0

    @property
    def first_loss(self) -> float | None:
        return self.losses[0] if self.losses else None

    @property
    def final_loss(self) -> float | None:
        return self.losses[-1] if self.losses else None


# ------------------------------------------------------------------------------------------------ data sources


def sft_samples(source: str | Path, tokenizer: Any, *, include_failed: bool = False, gold_out: str | Path | None = None,
                max_len: int | None = None, tool_prompt: str = "auto", gold_policy: str = "gold") -> list[Sample]:  # fmt: skip
    """Training samples from a run folder or a task file, rendered through ``tokenizer``'s chat template.

    A run folder: its successful trials (all scored ones with ``include_failed``), rendered as
    :func:`toolworld.store.export.sft_records` renders them, with the token bridge used at rollout time. A task
    file: the gold policy is run on it first into ``gold_out`` (reused when it already holds that run), and that
    run is used (``gold_policy``: its spec, e.g. ``gold:explain=1`` for conversations that say how each
    described value was picked). ``max_len`` truncates each sample. ``tool_prompt`` is how the tools are stated (``ChatTemplate``):
    train with the one the model will be run with. Raises :class:`SFTError`: ``not_found``, ``not_a_run``,
    ``not_tasks``, ``no_successful_trials``.
    """
    from .data import samples_from_sft, truncate

    path = Path(source).expanduser()
    if not path.exists():
        raise SFTError(f"{path} does not exist; pass a run folder (from `toolworld run ... --out DIR`) or a task "
                       "file (from `toolworld tasks generate`)", kind="not_found")  # fmt: skip
    runs = [path] if path.is_dir() else _gold_runs(path, gold_out, gold_policy)
    records: list[dict[str, Any]] = []
    for run in runs:
        records.extend(_run_records(run, tokenizer, include_failed, tool_prompt))
    if not records:
        which = "scored" if include_failed else "successful"
        raise SFTError(f"{', '.join(map(str, runs))}: no {which} trial to learn from (infra errors and, without "
                       "--include-failed, failed trials are left out); run a policy that solves some tasks, e.g. "
                       "`toolworld run WORLD --tasks FILE --policy gold --out DIR`",
                       kind="no_successful_trials")  # fmt: skip
    samples = samples_from_sft(records)
    return _learnable([truncate(s, max_len) for s in samples] if max_len is not None else list(samples))


def _learnable(samples: Sequence[Sample]) -> list[Sample]:
    """The samples that still hold a token to learn (a cut can leave only the prompt); an error when none does."""
    kept = [s for s in samples if any(s.loss_mask)]
    if samples and not kept:
        longest = max(len(s) for s in samples)
        raise SFTError(f"no sample has an assistant token left to learn within the length limit (samples are up to "
                       f"{longest} tokens; the first assistant turn comes after the system prompt): raise --max-len",
                       kind="nothing_to_learn")  # fmt: skip
    return kept


def _run_records(run: Path, tokenizer: Any, include_failed: bool, tool_prompt: str) -> list[dict[str, Any]]:
    from ..store import RunStore, StoreError
    from ..store.export import ExportError, sft_records

    try:
        store = RunStore.open(run)
    except StoreError as exc:
        kind = "not_a_run" if exc.kind == "no_run" else exc.kind
        raise SFTError(f"{exc} (toolworld train sft takes a run folder or a task file)", kind=kind) from exc
    try:
        return list(sft_records(store, tokenizer, include_failed=include_failed, tool_prompt=tool_prompt))
    except ExportError as exc:
        raise SFTError(str(exc), kind=exc.kind) from exc
    finally:
        store.close()


def _gold_runs(tasks_file: Path, gold_out: str | Path | None, gold_policy: str = "gold") -> list[Path]:
    """Run the gold policy on a task file (one run per world it holds); the run folders."""
    from ..pipeline import RunError
    from ..pipeline import run as run_pipeline
    from ..tasks.model import TaskSet

    try:
        task_set = TaskSet.load(tasks_file)
    except (OSError, UnicodeDecodeError) as exc:
        raise SFTError(f"cannot read {tasks_file}: {exc}", kind="not_tasks") from exc
    if not task_set.tasks:
        first = "; ".join(str(e) for e in task_set.errors[:3])
        raise SFTError(f"{tasks_file} holds no valid task ({len(task_set.errors)} bad line(s){': ' if first else ''}"
                       f"{first}); pass a task file from `toolworld tasks generate` or a run folder",
                       kind="not_tasks")  # fmt: skip
    if gold_out is None:
        raise SFTError("a task file needs a folder for its gold run (gold_out=)", kind="invalid_option")
    by_world: dict[str, list[Any]] = {}
    for task in task_set.tasks:
        by_world.setdefault(task.world, []).append(task)
    base = Path(gold_out)
    runs = []
    for world, tasks in by_world.items():
        out = base if len(by_world) == 1 else base / world
        try:  # a gold run already there (a resumed training) is reused, finishing only what it lacks
            run_pipeline(world, tasks, gold_policy, out=out, resume=(out / "run.db").is_file(), report=False)
        except RunError as exc:
            raise SFTError(f"gold run of {tasks_file} into {out}: {exc}", kind=exc.kind) from exc
        runs.append(out)
    return runs


# ----------------------------------------------------------------------------------------------------- models


def load_model(spec: str | Path, *, device: str = "cpu", dtype: str = "float32",
               split_attention: bool = True) -> tuple[Any, Any, Path]:  # fmt: skip
    """(model, tokenizer, path) for ``--model``: a model folder, a ``.gguf`` file, or a policy spec that names
    one (``hf:PATH``, ``gguf:PATH``, ``smollm2``: the embedded model, pulled on first use).

    Loading goes through the ``hf`` engine, so a model trains on exactly the weights and tokenizer it samples
    with at rollout time (a GGUF is dequantized by transformers). With ``split_attention`` a model on SDPA runs
    the attention of a conversation continued after a shared prompt as two unmasked flash calls on a CPU
    (:mod:`toolworld.train.attention`: the same values; a step of long conversations ~1.3x faster), and plain SDPA
    everywhere else. Raises :class:`SFTError` (``bad_model``).
    """
    from ..rollout.backends import parse_spec

    text = str(spec).strip()
    path = Path(text).expanduser()
    if not path.exists():
        try:
            parsed = parse_spec(text)
        except ValueError as exc:
            raise SFTError(str(exc), kind="bad_model") from exc
        if parsed.kind == "smollm2":
            from ..rollout.models import ensure_model

            path = ensure_model("smollm2")
        elif parsed.kind in ("hf", "gguf") and parsed.target:
            path = Path(parsed.target).expanduser()
        else:
            raise SFTError(f"--model {text!r} is neither an existing model folder or .gguf file nor a spec that names "
                           "one (hf:PATH, gguf:PATH, smollm2)", kind="bad_model")  # fmt: skip
    try:
        from ..rollout.engines.hf import HFEngine

        engine = HFEngine(path, device=device, dtype=dtype, prefix_cache=False)
    except ImportError as exc:
        raise SFTError(f"training needs torch and transformers ({exc}): pip install 'toolworld[train]'",
                       kind="missing_dependency") from exc  # fmt: skip
    except (ValueError, OSError) as exc:
        raise SFTError(str(exc), kind="bad_model") from exc
    model = engine.model
    if getattr(model, "hf_quantizer", None) is not None and path.suffix == ".gguf":
        # transformers dequantizes a GGUF into plain float weights but keeps its "quantized" marks, which make
        # save_pretrained refuse the trained model; what is trained here is an ordinary float model.
        model.hf_quantizer = None
        model.is_quantized = False
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
    if split_attention:
        from .attention import use_split_attention

        use_split_attention(model)
    return model, engine.tokenizer, path


# --------------------------------------------------------------------------------------------------- the loop


def latest_checkpoint(out: str | Path) -> Path | None:
    """The complete ``checkpoint-N`` with the highest N in ``out`` (None when there is none)."""
    best: tuple[int, Path] | None = None
    for child in Path(out).glob("checkpoint-*"):
        suffix = child.name.split("-", 1)[1]
        if suffix.isdigit() and (child / STATE_FILE).is_file() and (best is None or int(suffix) > best[0]):
            best = (int(suffix), child)
    return best[1] if best else None


def _schedule(samples: Sequence[Sample], config: SFTConfig, pad_id: int) -> tuple[list[list[Any]], list[int]]:
    """Every step's micro-batches, fixed by the seed; and the epoch of each step."""
    from .data import collate, pack

    order = list(range(len(samples)))
    per_epoch: list[list[Any]] = []
    steps: list[list[Any]] = []
    epochs: list[int] = []
    epoch = 0
    while True:
        random.Random(config.seed * 1_000_003 + epoch).shuffle(order)
        ordered = [samples[i] for i in order]
        if config.packing:
            batches = pack(ordered, config.batch_tokens, pad_id, share_prefix=config.share_prefix)
        else:
            batches = [collate([s], pad_id) for s in ordered if len(s)]
        if not batches:
            raise SFTError("no batch could be packed from the samples", kind="no_successful_trials")
        per_epoch = [batches[k : k + config.grad_accum] for k in range(0, len(batches), config.grad_accum)]
        for micro in per_epoch:
            steps.append(micro)
            epochs.append(epoch)
            if config.max_steps is not None and len(steps) == config.max_steps:
                return steps, epochs
        epoch += 1
        if config.max_steps is None and epoch == config.epochs:
            return steps, epochs


def _lr_factor(step: int, total: int, warmup: int) -> float:
    """Linear warmup over ``warmup`` steps, then linear decay that reaches 0 just after the last step."""
    if step < warmup:
        return (step + 1) / warmup
    return max(0.0, (total - step) / max(1, total - warmup))


def _batch_tokens(batch: Any) -> tuple[int, int]:
    """(loss tokens, the samples' tokens) of a packed batch; a shared prefix counts for every sample continuing it,
    so tokens/s measures the data trained on whatever the layout."""
    return int(batch.loss_mask.sum().item()), batch.sample_tokens


def write_checkpoint(out: Path, step: int, model: Any, state: dict[str, Any], config: dict[str, Any], *,
                     tool_prompt: str, keep: int) -> Path:  # fmt: skip
    """Write ``out/checkpoint-{step}`` (the model as ``save_pretrained`` writes it, ``state`` as ``optimizer.pt``,
    the step and ``config``) and return it; then delete all but the newest ``keep`` checkpoints (0 keeps all).

    Written to a temporary folder and renamed, so a crash never leaves a half checkpoint that ``resume`` would
    read; a temporary folder a crash left behind goes at the next save. The pruning matters: a checkpoint holds the
    weights and the optimizer's two moments, ~12 bytes a parameter (1.6 GB for a 135M model), and a run that
    saves every few steps would otherwise fill the disk and die mid-save.
    """
    import torch

    final = out / f"checkpoint-{step}"
    tmp = out / f".checkpoint-{step}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    torch.save(state, tmp / OPTIM_FILE)
    (tmp / STATE_FILE).write_text(json.dumps({"step": step, "config": config}, indent=2))
    write_model_card(tmp, tool_prompt=tool_prompt)  # a checkpoint is a model too (--policy hf:OUT/checkpoint-N)
    shutil.rmtree(final, ignore_errors=True)
    tmp.rename(final)
    for stale in out.glob(".checkpoint-*.tmp"):
        shutil.rmtree(stale, ignore_errors=True)
    if keep:
        done = sorted((int(c.name.split("-", 1)[1]), c) for c in out.glob("checkpoint-*")
                      if c.name.split("-", 1)[1].isdigit() and (c / STATE_FILE).is_file())  # fmt: skip
        for _, old in done[:-keep]:
            if old != final:
                shutil.rmtree(old, ignore_errors=True)
    return final


def _save_checkpoint(model: Any, optimizer: Any, scheduler: Any, step: int, config: SFTConfig) -> Path:
    import torch

    state = {"optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(), "rng": torch.get_rng_state()}
    return write_checkpoint(config.out, step, model, state, config.to_dict(), tool_prompt=config.tool_prompt,
                            keep=config.keep_checkpoints)  # fmt: skip


def load_weights(model: Any, folder: Path, lora: bool) -> None:
    """Put a checkpoint's saved weights into ``model`` (the full model, or the adapter of a peft model)."""
    from safetensors.torch import load_file

    files = sorted(folder.glob("adapter_model.safetensors" if lora else "model*.safetensors"))
    if not files:
        raise SFTError(f"{folder} holds no {'adapter' if lora else 'model'} weights; was it written with "
                       f"{'--lora' if not lora else 'no --lora'}?", kind="no_checkpoint")  # fmt: skip
    state: dict[str, Any] = {}
    for f in files:
        state.update(load_file(str(f)))
    if lora:
        from peft import set_peft_model_state_dict

        result = set_peft_model_state_dict(model, state)
        unexpected = list(getattr(result, "unexpected_keys", []))
    else:
        result = model.load_state_dict(state, strict=False)
        # save_pretrained leaves out weights tied to others (lm_head = embeddings); only those may be missing
        tied = {k for k in result.missing_keys if "lm_head" in k} if model.config.tie_word_embeddings else set()
        unexpected = list(result.unexpected_keys) + [k for k in result.missing_keys if k not in tied]
    if unexpected:
        raise SFTError(f"{folder} does not fit this model (mismatched weights: {unexpected[:5]}); resume with the "
                       "model and options the checkpoint was trained with", kind="no_checkpoint")  # fmt: skip


def _resume(model: Any, optimizer: Any, scheduler: Any, config: SFTConfig, lora: bool) -> int:
    import torch

    ckpt = latest_checkpoint(config.out)
    if ckpt is None:  # steps logged by a run that died before its first checkpoint are run again: log them once
        trim_log(config.out / LOG_FILE, 0)
        return 0
    state = json.loads((ckpt / STATE_FILE).read_text())
    saved = state.get("config", {})
    for key in ("lora", "seed", "batch_tokens", "grad_accum", "max_len", "epochs", "max_steps", "lr", *LAYOUT_KEYS):
        was = saved.get(key, LAYOUT_KEYS.get(key)) if key in LAYOUT_KEYS else saved.get(key, getattr(config, key))
        if was != getattr(config, key):
            raise SFTError(f"{ckpt} was trained with {key}={was!r}, not {getattr(config, key)!r}: resume with "
                           "the same options, or train into a new --out", kind="run_mismatch")  # fmt: skip
    load_weights(model, ckpt, lora)
    extra = torch.load(ckpt / OPTIM_FILE, weights_only=False)
    optimizer.load_state_dict(extra["optimizer"])
    scheduler.load_state_dict(extra["scheduler"])
    torch.set_rng_state(extra["rng"])
    trim_log(config.out / LOG_FILE, int(state["step"]))
    return int(state["step"])


def trim_log(log: Path, step: int) -> None:
    """Drop log lines of steps after the checkpoint: they will be run, and logged, again. A line cut off by a
    killed process (no valid JSON) goes too: it was never a finished record."""

    def kept(line: str) -> bool:
        try:
            return json.loads(line).get("step", 0) <= step
        except (json.JSONDecodeError, AttributeError):
            return False

    if not log.is_file():
        return
    log.write_text("".join(line + "\n" for line in log.read_text().splitlines() if line.strip() and kept(line)))


def train_sft(model: Any, tokenizer: Any, samples: Sequence[Sample], config: SFTConfig, *,
              on_step: Callable[[StepLog], Any] | None = None) -> SFTResult:  # fmt: skip
    """Fine-tune ``model`` on ``samples`` (loss on their ``loss_mask`` tokens); see the module docstring.

    ``model`` is trained in place (wrapped in a peft model with ``config.lora``); ``tokenizer`` is saved with the
    final model. ``on_step`` sees each step's :class:`StepLog`. Ctrl-C (``KeyboardInterrupt``, also from
    ``on_step``) saves a checkpoint of the last finished step and returns with ``interrupted=True``; run again
    with ``resume=True`` to continue. With ``resume`` and no checkpoint in ``config.out``, training starts fresh.
    """
    import torch

    from .data import truncate
    from .losses import sft_loss
    from .prefix import SharedPrefix, kv_shareable

    if not samples:
        raise SFTError("no samples to train on", kind="no_successful_trials")
    samples = _learnable([truncate(s, config.max_len) for s in samples])
    config.out.mkdir(parents=True, exist_ok=True)
    if not config.resume and (latest_checkpoint(config.out) or (config.out / LOG_FILE).exists()):
        raise SFTError(f"{config.out} already holds a training run: pass resume=True (--resume) to continue it, or "
                       "choose another output folder", kind="output_exists")  # fmt: skip
    torch.manual_seed(config.seed)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else (tokenizer.eos_token_id or 0)
    steps, epochs = _schedule(samples, config, pad_id)
    total = len(steps)
    warmup = math.ceil(config.warmup_ratio * total)
    if config.lora:
        model = wrap_lora(model, r=config.lora_r, alpha=config.lora_alpha, dropout=config.lora_dropout,
                          targets=config.lora_targets, error=SFTError)  # fmt: skip
    model.train()
    first = next(model.parameters())
    device, dtype = first.device, first.dtype
    if config.bf16:
        from ..rollout.engines.hf import warn_unless_native_bf16

        warn_unless_native_bf16(device.type, "SFT's forward passes")
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=config.lr, weight_decay=config.weight_decay)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: _lr_factor(s, total, warmup))
    start = _resume(model, optimizer, scheduler, config, config.lora) if config.resume else 0
    result = SFTResult(config.out, start, total, resumed_from=start,
                       trainable_params=sum(p.numel() for p in params))  # fmt: skip
    t_start = time.perf_counter()
    log = (config.out / LOG_FILE).open("a", encoding="utf-8")
    step = start
    checkpointing = contextlib.ExitStack()
    checkpointing.enter_context(layer_checkpointing(model, config.gradient_checkpointing))
    try:
        for step in range(start, total):
            t0 = time.perf_counter()
            micro = [b.to(device, dtype=dtype) for b in steps[step]]
            counts = [_batch_tokens(b) for b in micro]
            n_loss = sum(c[0] for c in counts) or 1
            optimizer.zero_grad(set_to_none=True)
            total_loss = 0.0
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=config.bf16):
                prefix = SharedPrefix(model, micro, enabled=kv_shareable(config))  # the shared prompt, run once
            for batch, (n, _) in zip(prefix.batches, counts, strict=True):
                with torch.autocast(device.type, dtype=torch.bfloat16, enabled=config.bf16):
                    loss = _loss_of(sft_loss(model, batch)) * (n / n_loss)  # token-weighted mean over the step
                loss.backward()
                total_loss += float(loss.detach())
            prefix.backward()
            grad_norm = float(torch.nn.utils.clip_grad_norm_(params, config.max_grad_norm))
            lr = optimizer.param_groups[0]["lr"]
            optimizer.step()
            scheduler.step()
            took = time.perf_counter() - t0
            entry = StepLog(step + 1, total, total_loss, n_loss, sum(c[1] for c in counts) / max(took, 1e-9), lr,
                            grad_norm, epochs[step])  # fmt: skip
            result.losses.append(total_loss)
            result.tokens += n_loss
            result.steps = step + 1
            if (step + 1) % config.log_every == 0 or step + 1 == total:
                log.write(json.dumps(entry.to_dict()) + "\n")
                log.flush()
            if config.save_every and (step + 1) % config.save_every == 0 and step + 1 < total:
                result.checkpoint = _save_checkpoint(model, optimizer, scheduler, step + 1, config)
            if on_step is not None:
                on_step(entry)
    except KeyboardInterrupt:
        result.interrupted = True
        if result.steps > start and (
            result.checkpoint is None or result.checkpoint.name != f"checkpoint-{result.steps}"
        ):
            result.checkpoint = _save_checkpoint(model, optimizer, scheduler, result.steps, config)
        result.wall_s = time.perf_counter() - t_start
        return result
    finally:
        log.close()
        checkpointing.close()
    result.checkpoint = _save_checkpoint(model, optimizer, scheduler, total, config)
    result.final = _save_final(model, tokenizer, config)
    result.wall_s = time.perf_counter() - t_start
    return result


def _loss_of(value: Any) -> Any:
    """The scalar loss from what ``sft_loss`` returns (a tensor, or a tuple/dict holding it first)."""
    if isinstance(value, tuple):
        return value[0]
    if isinstance(value, dict):
        return value["loss"]
    return value


def _save_final(model: Any, tokenizer: Any, config: SFTConfig) -> Path:
    final = config.out / FINAL_DIR
    shutil.rmtree(final, ignore_errors=True)
    to_save = model
    if config.lora and config.merge_lora:
        to_save = model.merge_and_unload()
    to_save.save_pretrained(final)
    tokenizer.save_pretrained(final)
    write_model_card(final, tool_prompt=config.tool_prompt)
    return final


# ---------------------------------------------------------------------------------------------------- TRL path


def train_sft_trl(model: Any, tokenizer: Any, samples: Sequence[Sample], config: SFTConfig, *,
                  on_step: Callable[[StepLog], Any] | None = None) -> SFTResult:  # fmt: skip
    """The same training through TRL's ``SFTTrainer``, for users who want its trainer (callbacks, integrations).

    TRL gets the rendered data as it is (``input_ids`` and ``assistant_masks``, which it turns into labels), so
    both paths learn exactly the same tokens. Its Trainer writes ``checkpoint-N`` in its own layout (resumable
    with ``resume=True``); ``train.jsonl`` and ``final/`` are written as by :func:`train_sft`. TRL batches
    sequences padded (``per_device_train_batch_size`` 1 here) rather than packed, so ``batch_tokens`` is not
    used; ``grad_accum`` is.
    """
    try:
        from datasets import Dataset
        from transformers import TrainerCallback
        from trl import SFTConfig as TRLConfig
        from trl import SFTTrainer
    except ImportError as exc:
        raise SFTError(f"--trl needs trl and datasets ({exc}): pip install 'toolworld[train,data]'",
                       kind="missing_dependency") from exc  # fmt: skip
    from .data import truncate

    if not samples:
        raise SFTError("no samples to train on", kind="no_successful_trials")
    samples = _learnable([truncate(s, config.max_len) for s in samples])
    config.out.mkdir(parents=True, exist_ok=True)
    data = Dataset.from_dict({"input_ids": [list(map(int, s.input_ids)) for s in samples],
                              "assistant_masks": [list(map(int, s.loss_mask)) for s in samples]})  # fmt: skip
    result = SFTResult(config.out, 0, 0)
    log_path = config.out / LOG_FILE

    class _Log(TrainerCallback):  # type: ignore[misc]
        """TRL's log records as train.jsonl lines and StepLogs."""

        def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **_: Any) -> None:
            if not logs or "loss" not in logs:
                return
            entry = StepLog(state.global_step, state.max_steps, float(logs["loss"]),
                            int(logs.get("num_tokens", 0)), 0.0, float(logs.get("learning_rate", 0.0)),
                            float(logs.get("grad_norm", 0.0)), int(logs.get("epoch", 0)))  # fmt: skip
            result.losses.append(entry.loss)
            with log_path.open("a", encoding="utf-8") as fh:
                fh.write(json.dumps(entry.to_dict()) + "\n")
            if on_step is not None:
                on_step(entry)

    peft_config = None
    if config.lora:
        from peft import LoraConfig

        peft_config = LoraConfig(r=config.lora_r, lora_alpha=config.lora_alpha, lora_dropout=config.lora_dropout,
                                 target_modules=list(config.lora_targets), task_type="CAUSAL_LM")  # fmt: skip
    args = TRLConfig(output_dir=str(config.out), learning_rate=config.lr, num_train_epochs=config.epochs,
                     max_steps=config.max_steps or -1, per_device_train_batch_size=1,
                     gradient_accumulation_steps=config.grad_accum, lr_scheduler_type="linear",
                     warmup_steps=config.warmup_ratio, weight_decay=config.weight_decay,
                     max_grad_norm=config.max_grad_norm, logging_steps=config.log_every,
                     save_strategy="steps" if config.save_every else "no", save_steps=config.save_every or 500,
                     save_total_limit=config.keep_checkpoints or None,
                     seed=config.seed, report_to=[], max_length=config.max_len, dataset_num_proc=None,
                     use_cpu=next(model.parameters()).device.type == "cpu", disable_tqdm=True)  # fmt: skip
    trainer = SFTTrainer(model=model, args=args, train_dataset=data, processing_class=tokenizer,
                         peft_config=peft_config, callbacks=[_Log()])  # fmt: skip
    has_checkpoint = any(config.out.glob("checkpoint-*"))
    output = trainer.train(resume_from_checkpoint=True if config.resume and has_checkpoint else None)
    result.steps = result.total_steps = int(trainer.state.global_step)
    result.tokens = int(getattr(output, "metrics", {}).get("num_tokens", 0) or 0)
    result.final = _save_final(trainer.model, tokenizer, config)
    result.trainable_params = sum(p.numel() for p in trainer.model.parameters() if p.requires_grad)
    return result
