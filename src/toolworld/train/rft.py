"""Rejection fine-tuning: the model plays every task ``k`` times, and learns its own trials that passed.

It is SFT on self-generated data (expert iteration with one round): no reward model, no advantage, and the
data is in the model's own distribution, which the gold conversations of ``train sft`` are not. The samples are
the passed trials' token buffers exactly as sampled, with the buffer's loss mask, so the model learns the very
ids it produced and never the tool results or the user's words; re-rendering their text could give other ids.

Output folder (``SFTConfig.out``): ``rft_samples.jsonl`` (the kept trials: task, trial, reward, ids, mask,
sampler logprobs), ``rft.json`` (how many trials ran, passed and were kept, per task) and what
:func:`toolworld.train.sft.train_sft` writes (``train.jsonl``, ``checkpoint-N/``, ``final/``). With
``config.resume`` and a ``rft_samples.jsonl`` already there, the sampling is not repeated: the kept trials are
read back, so a resumed run trains on exactly the data it started with.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .data import one_world_tasks
from .grpo import Scorer, rollouts, samples_from_trajectories
from .sft import SFTConfig, SFTError, SFTResult, StepLog, same_prompt, train_sft

if TYPE_CHECKING:
    from ..env.limits import Limits
    from ..env.user import UserSimulator
    from ..tasks.model import Task
    from ..world.world import World
    from .data import Sample

__all__ = ["SAMPLES_FILE", "SUMMARY_FILE", "RFTResult", "train_rft"]

SAMPLES_FILE = "rft_samples.jsonl"
SUMMARY_FILE = "rft.json"


@dataclass(slots=True)
class RFTResult:
    """The sampling (``trials`` run, ``passed``, ``kept`` as samples, ``infra_errors``) and the SFT run on the kept
    trials (``sft``; None when the call was interrupted before training began)."""

    trials: int
    passed: int
    kept: int
    infra_errors: int
    per_task: dict[str, int] = field(default_factory=dict)  # task id -> kept trials
    sft: SFTResult | None = None
    reused_samples: bool = False


def _write_samples(path: Path, samples: Sequence[Sample]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        for s in samples:
            fh.write(json.dumps({**s.meta, "input_ids": s.input_ids, "loss_mask": s.loss_mask,
                                 "logprobs": s.logprobs}) + "\n")  # fmt: skip
    tmp.replace(path)  # a crash mid-write must not leave a file that resume would take as the whole data


def _read_samples(path: Path) -> list[Sample]:
    from .data import samples_from_tokens

    return samples_from_tokens(json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line)


def train_rft(model: Any, tokenizer: Any, world: World, tasks: Sequence[Task], *, k: int, config: SFTConfig,
              out: str | Path | None = None, max_tokens: int = 1024, temperature: float = 1.0,
              concurrency: int = 8, scorer: Scorer | None = None, limits: Limits | None = None,
              user: UserSimulator | None = None, on_sampled: Callable[[RFTResult], Any] | None = None,
              on_step: Callable[[StepLog], Any] | None = None, sampler: Any = None) -> RFTResult:  # fmt: skip
    """Sample ``k`` trials of every task with ``model`` (token level, at ``temperature``), keep the passed ones and
    fine-tune ``model`` on them with :func:`~toolworld.train.sft.train_sft` under ``config``.

    ``out`` (when given) replaces ``config.out``. ``scorer`` replaces ``score_trajectory`` as the judge of a pass
    (``Score.success``). ``sampler`` (a token-level policy over the same weights and tokenizer, e.g. a GGUF export
    of ``model`` run by llama.cpp, several times faster on a CPU) samples instead of ``model`` itself; its
    ``max_tokens``, ``temperature`` and tool prompt are its own. ``on_sampled`` sees the counts before training starts; ``on_step`` each SFT step.
    Raises :class:`~toolworld.train.sft.SFTError`: ``invalid_option``, ``no_tasks``, ``no_successful_trials``
    (no trial passed: a model that never solves a task has nothing to reinforce; start from an SFT model) and
    those of ``train_sft``.
    """
    from ..rollout.engines.hf import sampling_engine
    from ..rollout.token_policy import TokenPolicy
    from ..tokens.tokenizers import load_tokenizer

    if k < 1:
        raise SFTError(f"k must be >= 1, got {k}", kind="invalid_option")
    if out is not None:
        config.out = Path(out)
    tasks = one_world_tasks(tasks, world, error=SFTError, what="sample")
    config.out.mkdir(parents=True, exist_ok=True)
    tokenizer = load_tokenizer(tokenizer)
    samples_path = config.out / SAMPLES_FILE
    summary_path = config.out / SUMMARY_FILE
    if config.resume and samples_path.is_file() and summary_path.is_file():
        summary = json.loads(summary_path.read_text(encoding="utf-8"))
        kept = _read_samples(samples_path)
        result = RFTResult(trials=int(summary["trials"]), passed=int(summary["passed"]), kept=len(kept),
                           infra_errors=int(summary["infra_errors"]), per_task=dict(summary["per_task"]),
                           reused_samples=True)  # fmt: skip
    else:
        if not config.resume and ((config.out / "train.jsonl").exists() or samples_path.exists()):
            raise SFTError(f"{config.out} already holds a training run: pass resume=True (--resume) to continue it, "
                           "or choose another output folder", kind="output_exists")  # fmt: skip
        same_prompt(sampler, config.tool_prompt, SFTError)
        if sampler is None:
            engine = sampling_engine(model, tokenizer, concurrency=concurrency)
            sampler = TokenPolicy(engine, tokenizer, name="rft", max_tokens=max_tokens, temperature=temperature,
                                  tool_prompt=config.tool_prompt)  # fmt: skip
        pairs = rollouts(world, tasks, sampler, trials=k, scorer=scorer, concurrency=concurrency, limits=limits,
                         user=user)  # fmt: skip
        # the weights are about to change, and the prefix cache is GBs the training step needs more
        reset = getattr(getattr(sampler, "engine", None), "reset_cache", None)
        if reset is not None:
            reset()
        infra = sum(1 for traj, score in pairs if traj.failed_by_infra or score.infra_error)
        passed = [(traj, score) for traj, score in pairs if score.success and not score.infra_error]
        # a passed trial cut below its first sampled token has nothing left to learn
        kept = [s for s in samples_from_trajectories(passed, max_len=config.max_len) if any(s.loss_mask)]
        result = RFTResult(trials=len(pairs), passed=len(passed), kept=len(kept), infra_errors=infra,
                           per_task=dict(Counter(s.group for s in kept)))  # fmt: skip
        summary_path.write_text(json.dumps({"trials": result.trials, "passed": result.passed, "kept": result.kept,
                                            "infra_errors": result.infra_errors, "k": k, "temperature": temperature,
                                            "max_tokens": max_tokens, "per_task": result.per_task}, indent=2))  # fmt: skip
        if kept:
            _write_samples(samples_path, kept)
    if on_sampled is not None:
        on_sampled(result)
    if not kept:
        raise SFTError(f"none of {result.trials} trials ({len(tasks)} tasks x {k}) passed ({result.infra_errors} "
                       "infra errors), so there is nothing to reinforce: raise k, or start from a model that solves "
                       "some tasks (e.g. after `toolworld train sft`)", kind="no_successful_trials")  # fmt: skip
    result.sft = train_sft(model, tokenizer, kept, config, on_step=on_step)
    return result
