"""On-policy GRPO: the model being trained plays the tasks, its scored trials are its own training data.

One step of :func:`train_grpo`::

    tasks  = pick_tasks(tasks, N, seed, step)                 # deterministic per (seed, step)
    trials = G episodes per task, sampled by the model itself  # HFEngine over the same weights, scripted user
             (branch: the lead plays the task once, k ~ U{0..its turns - 1}; all G trials start after its k turns;
              branch_from_start: with that probability k = 0, the group plays the task from its start;
              branch_at="pick": k = the lead's turn that picks a value the customer only described, where one does)
    r_i    = score_trajectory(task, trial_i).reward            # reward="success": 1 if it succeeded, else 0
             - overlong_penalty if a turn ran into max_tokens      # termination "max_tokens" (penalize_overlong)
             (reward_control="shuffle": r permuted within each group, the control run; see REWARD_CONTROLS)
    while groups with a reward spread < min_groups            # dynamic sampling (min_groups 0: never)
          and draws < max_draws: N more tasks, G trials each   # pick_tasks(..., draw=d, taken=the step's so far)
    (balance: each target tool needs ceil(min_groups / targets) groups; later draws pick from targets still short,
     and the update keeps that many groups of each target, the first drawn)
    guide: a group whose G trials all failed gets the guide's passing trial as member G+1 (reward 1)
    loss   = policy_loss + sft_coef * sft_loss(sft_batch conversations of `sft`)   # drawn by (seed, step)
             + sft_floor * floor_loss(the same conversations)  # their tokens held at the reference's likelihood
    A_i    = advantage(r of the task's G trials)               # grpo | dr_grpo | mc_grpo | gigpo
             (gigpo adds, per turn's tokens, the step-level advantage over turns taken in the same situation:
              same world state, same user and tool messages so far)
    A_t    = neg_weight * A_t where A_t < 0                    # 1: the plain gradient (advantages.weigh_negatives)
    A_t    = 0 where A_t < 0 in a turn that made up an argument  # blame_invented: the blame stays on the made-up
             value, outside that value's tokens                #   value's tokens (advantages.blame_invented)
    pi_old = trainer logprobs of the sampled tokens (no grad, once)
    repeat `updates` times: one optimizer step on policy_loss  # clipped surrogate, TIS, optional k3 KL
                                                               # kl_ties: k trials of each group left out add
                                                               # their k3 KL alone (advantage 0)
                                                               # adamw (default) or sgd, see OPTIMIZERS
                                                               # lora: only the adapters train (lora.py), and
                                                               # the KL reference is the adapters switched off
    engine.reset_cache()                                       # the KV prefix cache holds the old weights' keys

The samples are the trials' token buffers exactly as sampled (ids, loss mask and sampler logprobs): decoding and
re-encoding the text could give other ids, and a gradient on ids the sampler never produced trains the wrong thing.
A group whose trials all got the same reward has zero advantage everywhere and teaches nothing, so it is left out
of the update; a step where every group ties makes no update. With ``min_groups`` the step also draws more tasks
until that many groups differ (DAPO's dynamic sampling, bounded by ``max_draws``): a policy that passes most tasks
all-or-nothing (SmolLM2-135M at T 0.3 differs on ~2 of 6) would otherwise update on one or two groups at a time.
Ties still cost their sampling; what the option buys is the size of each update.
``guide`` (a policy spec, e.g. ``gold:explain=1``) is off-policy guidance (LUFFY, Yan et al. 2025): where the policy
failed a task in every trial, on-policy GRPO has nothing to reinforce, and a small policy at a low temperature fails
the same way every time (the wrong order picked in all 8 trials), so it never sees the alternative. The guide plays
the task once; its passing conversation joins the group with reward 1, rendered through the policy's own chat
template and tool prompt (as SFT renders gold), so the update raises it and lowers the policy's own failures against
it, and with GiGPO the step-level advantage falls on the turn where they parted (the guide and the trials share
anchor states until then). A rendered trial was never sampled: it has no sampler logprobs, so truncated importance
sampling leaves it alone (weight 1) and ``logprob_gap`` is measured on the sampled trials only. Its ratio is taken
against the trainer before the update (``pi / pi_old``, clipped as any other), not against the guide's own
probability, which a conversation replayed from gold does not have. On SmolLM2-135M, 8 guided steps at lr 1e-5
took the held-out tasks from SFT's 51/100 to 55/100 (52 after 4), a gain its paired interval cannot yet tell from
luck (docs/benchmarks.md).
``sft_coef`` mixes the supervised loss on conversations the policy was fine-tuned on into every update (InstructGPT's
PPO-ptx, with SFT data instead of pre-training data). A small policy generalises an update on a handful of tasks to
requests of every kind (trained on tracking requests it tracks orders asked about for their status); SFT's loss on
its own data is near its minimum at the start, so the term costs nothing there and pulls back only what the update
moved away from the conversations SFT learnt, on all the kinds of request they hold, not only the step's. Being
near its minimum, its gradient is small too: on SmolLM2-135M a weight of 1 held nothing back, while 10 held the
tool choice of the requests the step did not train on for one step, then, over four, fitted its few conversations
further and left the date picks and the tool names worse than SFT's (docs/benchmarks.md).
``balance`` gathers them evenly over the tasks' target tools (``target_of``), so that one kind of request cannot
make up a step's update by the luck of the draw. Neither makes a single update safe for a small policy: on
SmolLM2-135M, six groups (balanced or not) moved the next step's tasks further from what they asked than three
did (docs/benchmarks.md, "Dynamic sampling").
``branch`` (a policy spec, e.g. ``gold:explain=1``) starts each group's trials part-way along a passing path: the lead
plays the task's first k turns live and the policy plays on from there (``rollout/branch.py``, the reset
distribution of learning from demonstrations). The decision a small policy gets wrong (the pick of a described
order, the answer read off a tool result) then comes first in a trial instead of after turns it already plays
well, the trials are shorter, and the group differs on that decision. The reward is the scorer's verdict on the whole
episode; the lead's turns are prompt in the token buffer (mask 0) and carry no gradient. Depths are drawn per
(seed, step, task), so a resumed run branches where an uninterrupted one would have; the held-out evaluations play
every task from its start, as a user's episode does. On SmolLM2-135M it made steps cheaper (~600 s against 750-1,360
s on 2 cores) and put the groups at the pick, but four full-weight steps at lr 1e-5 still swung the tool choice and
left the held-out tasks at 48/100 against SFT's 55; on LoRA with the KL anchors (``kl``, ``kl_ties``) it kept the pick
and the status requests' tool and moved the tracking requests' (right tool 64 -> 76 of 100), for 56/100 against the
same SFT's 55 (docs/benchmarks.md). ``branch_from_start`` plays a share of the groups from the start, for the
first turns the uniform depth trains least (the customer lookup); at 0.5 it left the lookup failures where they
were and lost the pick and the tracking requests' tool (50/100), so it defaults to 0. ``branch_at="pick"`` starts
every group of a task whose customer describes the order at the lead's turn that picks it (``BRANCH_AT``); four
steps of it did not teach the pick (22 right of 57 held-out against SFT's 27) and ended at 51/100, so the uniform
depth stays the default.
``kl_ties`` anchors what the update leaves out. A KL penalty on the trials of the trained groups holds only the
behaviour those trials show, while a small policy generalises the update to requests of every kind; the groups left
out are the ones the policy plays consistently (every trial passed, or all failed and no guide joined), and nothing
holds them. On SmolLM2-135M, balanced steps with a KL of 0.5 moved status requests onto the tracking tool (29 of 32
training trials on the right tool at step 1, 7 of 24 at step 4) while the KL they logged stayed under 0.003
(docs/benchmarks.md). The first ``kl_ties`` trials of each left-out group join the update with advantage 0: they
add ``kl_coef`` times their k3 to the reference, summed over their tokens and divided by the trained tokens'
count, so an anchored token weighs what a trained token's KL weighs and the policy gradient is not thinned by them.
A tied group has no advantage, so every update here leaves it out, and its KL with it (with or without dynamic
sampling); an implementation that keeps tied groups in its batch holds them with its KL by construction.
``sft_floor`` holds the conversations of ``sft`` without fitting them further: a one-sided k3 to the reference on their
assistant tokens (``losses.floor_loss``), so a token the update made less likely than the reference did is pulled
back and one it made more likely is left alone. Why: with branched groups (``branch``) the lead plays the opening
turns (the customer lookup) as prompt, so neither the policy term nor its KL (both on sampled tokens) reaches them,
and on SmolLM2-135M held-out failures that never looked the customer up rose from SFT's 3 to 10; SFT's loss at a
weight of 3 kept the lookup but, fitting the gold past the reference, moved the model away from SFT (KL 0.001 ->
0.012) and lost the pick (docs/benchmarks.md). The floor exerts no force until a gold token falls below the
reference, whatever its weight; what it pulls is the drift times the weight, so the weight must be large (at 1 the
pull per token was a fifth of a policy token's). At 100 it kept the lookup, the pick notes and SFT's rate of made-up
values, for 58/100 against SFT's 55 and b2's 56 (paired +3 over SFT, interval [-5.6, +11.6]); it did not teach the pick,
and run on to 8 steps it stood at 58 again with the lookup slipping (the drift it holds grows with the steps). A
larger weight is not a firmer hold: at 300 the floor's pull outweighed the groups' gradient and lost the pick (50/100).
``blame_invented`` moves a failed turn's blame onto what it made up. A small policy fills a call's arguments with
what it saw in training (an email for a customer who gave a name and a zip code, an order number no tool returned);
the episode fails, and the plain update lowers the whole turn, the tool with the value. On SmolLM2-135M the
email lookups that made up an address were all lowered, and the held-out policy then shunned ``find_user_by_email``
where the email was given (b2, docs/benchmarks.md). With it, in a turn that sent a value no earlier message held
(``scoring.grounding``) and carries a negative advantage, only that value's tokens keep it
(``advantages.blame_invented``); each step logs the turns it changed (``blamed``). On SmolLM2-135M it kept the
email lookup (failures that never used the email 10 -> 7) and moved the made-up values onto order ids instead: a
made-up value is often the symptom of a tool called too early, and sparing that tool spares the wrong decision
(16 held-out trials call ``get_order_details`` with an order number nobody gave, 14 before listing the orders; 55/100
against SFT's 55), so it is off by default.
Trials that ended on an infra error are not scored and take no part in their group.

The model stays in eval mode throughout: dropout would make ``pi`` and ``pi_old`` different functions of the
same weights, and the ratio between them noise. The policy trained is the one that sampled: ``softmax(logits / T)``
at the sampling ``temperature``, for the trainer's logprobs as for the sampler's, so that ``logprob_gap`` measures
the two disagreeing (kernels, precision, stale weights) and truncated importance sampling corrects only that. Taken
untempered, a trial sampled at T 0.3 would see the tokens it hesitated on weighted down by ``pi(x) / mu_T(x)``,
the very tokens where it chose. Greedy decoding picks the same token at every temperature, so sharpening the
tempered policy moves the greedy one.

Output folder (``GRPOConfig.out``): ``train.jsonl`` (one line per step, :class:`GRPOStep`), ``trials.jsonl``
(one line per trial: step, task, reward, the components it failed and the trajectory without its token buffer, so
that what the policy learned to do can be read afterwards; ``save_trials=False`` leaves it out), ``checkpoint-N/``
(weights, ``optimizer.pt`` with the optimizer and RNG states, ``trainer_state.json``), ``final/`` (a model folder
that ``--policy hf:OUT/final`` loads) and, when ``torch.utils.tensorboard`` imports, ``tensorboard/``. With
``eval_every`` and ``eval_tasks``: ``eval.jsonl`` (one line per evaluation, :class:`GRPOEval`) and, unless
``save_trials=False``, ``eval-trials.jsonl`` (its trials, as ``trials.jsonl``); each evaluation after a step
follows a checkpoint of that step. Since the
tasks and the sampling seeds of a step depend only on (seed, step), a resumed run samples what an uninterrupted
run would have sampled from the same weights.
"""

from __future__ import annotations

import asyncio
import copy
import functools
import json
import math
import random
import shutil
import statistics
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.errors import ToolworldError
from ..core.seeds import derive_seed
from ..rollout.branch import BranchPolicy
from ..rollout.models import write_model_card
from ..scoring.grounding import tool_call_arguments
from ..scoring.metrics import paired_gain, task_interval, wilson
from ..scoring.verify import score_trajectory
from .data import one_world_tasks
from .lora import AdapterOff, wrap_lora
from .sft import (
    FINAL_DIR,
    LAYOUT_KEYS,
    LOG_FILE,
    OPTIM_FILE,
    STATE_FILE,
    check_tool_prompt,
    latest_checkpoint,
    layer_checkpointing,
    load_weights,
    same_prompt,
    trim_log,
    write_checkpoint,
)

if TYPE_CHECKING:
    from ..env.limits import Limits
    from ..env.user import UserSimulator
    from ..records.trajectory import Trajectory
    from ..rollout.engines.hf import HFEngine
    from ..scoring.model import Score
    from ..tasks.model import Task
    from ..world.world import World
    from .data import Sample

__all__ = ["ADVANTAGES", "BRANCH_AT", "OPTIMIZERS", "REWARDS", "REWARD_CONTROLS", "GRPOConfig", "GRPOError", "GRPOEval", "GRPOResult", "GRPOStep",
           "Scorer", "advantaged", "anchors_of", "at_temperature", "branch_depths", "estimator", "evaluate",
           "guide_renderer",
           "guide_trials", "make_optimizer", "penalize_overlong", "pick_tasks", "rollouts", "samples_from_trajectories", "success_only", "target_of",
           "train_grpo", "trial_record", "update"]  # fmt: skip

ADVANTAGES = ("grpo", "mc_grpo", "dr_grpo", "gigpo")
#: What a trial is rewarded with: the scorer's weighted components (``partial``) or 1 for success, else 0.
REWARDS = ("partial", "success")
TENSORBOARD_DIR = "tensorboard"
#: One line per sampled trial (``trial_record``): what each step's policy did and how it was scored.
TRIALS_FILE = "trials.jsonl"
#: One line per held-out evaluation (:class:`GRPOEval`), and the trials each played.
EVAL_FILE = "eval.jsonl"
EVAL_TRIALS_FILE = "eval-trials.jsonl"
#: ``(task, trajectory) -> Score``: how a trial is rewarded (default: ``score_trajectory`` in the training world).
Scorer = Callable[["Task", "Trajectory"], "Score"]
# Options a resumed run must share with its checkpoint: changing them mid-run would make it another experiment.
_RESUME_KEYS = ("group", "tasks_per_step", "seed", "advantage", "reward", "lr", "clip", "tis_cap", "kl_coef", "updates",
                "max_tokens", "temperature", "max_len", "optimizer", "min_groups", "max_draws", "balance", "guide",
                "sft_coef", "sft_floor", "sft_batch", "reward_control", "lora", "lora_r", "lora_alpha", "neg_weight",
                "overlong_penalty", "kl_ties", "branch", "branch_from_start", "branch_at", "blame_invented")  # fmt: skip
#: What a checkpoint written before a key was recorded was trained with: the value then, not today's default (an
#: AdamW checkpoint resumed as SGD would load Adam's moments into SGD and fail a whole sampling step later).
_LEGACY = {**LAYOUT_KEYS, "optimizer": "adamw", "min_groups": 0, "max_draws": 4, "balance": False, "guide": "",
           "sft_coef": 0.0, "sft_floor": 0.0, "sft_batch": 4, "reward_control": "none", "lora": False, "lora_r": 16,
           "lora_alpha": 32, "neg_weight": 1.0, "overlong_penalty": 0.0, "kl_ties": 0, "branch": "", "branch_from_start": 0.0,
           "branch_at": "uniform", "blame_invented": False}


def _adamw(params: list[Any], config: GRPOConfig) -> Any:
    """AdamW: ``m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2; w -= lr (m_hat / (sqrt(v_hat) + eps) + wd w)``.

    Bias correction makes its first step ``w -= lr sign(g)`` for every weight, however small its gradient: a
    GRPO run of a few steps moves weights whose gradient is sampling noise as far as those that carry the signal.
    """
    import torch

    return torch.optim.AdamW(params, lr=config.lr, weight_decay=config.weight_decay)


def _sgd(params: list[Any], config: GRPOConfig) -> Any:
    """Plain SGD: ``w -= lr (g + wd w)``, ``g`` after clipping to ``max_grad_norm``.

    Each weight moves in proportion to its gradient, so in a short run the weights the rewards agree on move
    most and the rest barely move. Its ``lr`` is on another scale than AdamW's: a step's length is
    ``lr * |g|`` (``grad_norm`` in the log), not ``lr`` per weight.
    """
    import torch

    return torch.optim.SGD(params, lr=config.lr, weight_decay=config.weight_decay)


#: The optimizers GRPO can update with (``GRPOConfig.optimizer``), each ``(params, config) -> torch optimizer``.
OPTIMIZERS: dict[str, Callable[[list[Any], GRPOConfig], Any]] = {"adamw": _adamw, "sgd": _sgd}


def _as_scored(samples: list[Sample], seed: int) -> None:
    """No control: each trial is trained on the reward it was scored with."""


def _shuffled(samples: list[Sample], seed: int) -> None:
    """The shuffled-reward control: ``r'_i = r_pi(i)``, ``pi`` a uniform permutation of each group's members
    (guided ones included) drawn by ``(seed, group)``; the scored reward stays in ``meta["scored_reward"]``.

    Why: a held-out gain can come from what an update does whatever the rewards say (any small step, a sharper
    tempered policy, the guide's gold conversations) as well as from the rewards. Shuffled, a group keeps its
    rewards' values, so the same groups train with advantages of the same sizes, with the same guided members
    among them, but which trial earned which is lost: what such a run gains is what the reward signal did not
    buy, and a recipe is learning only where it beats its own shuffled twin.
    """
    groups: dict[str, list[Sample]] = defaultdict(list)
    for s in samples:
        groups[s.group].append(s)
    for group, members in groups.items():
        rewards = [float(m.meta["reward"]) for m in members]
        random.Random(derive_seed("grpo-shuffle", seed, group)).shuffle(rewards)
        for m, r in zip(members, rewards, strict=True):
            m.meta["scored_reward"], m.meta["reward"] = m.meta["reward"], r


#: What the update is told each trial earned (``GRPOConfig.reward_control``), each ``(samples, seed) -> None``
#: rewriting ``meta["reward"]`` in place before the advantages: ``none`` (the score) or ``shuffle`` (a control).
REWARD_CONTROLS: dict[str, Callable[[list[Sample], int], None]] = {"none": _as_scored, "shuffle": _shuffled}


class GRPOError(ToolworldError):
    """GRPO that cannot run as asked; ``kind`` names why (``invalid_option``, ``no_tasks``, ``output_exists``,
    ``run_mismatch``, ``no_checkpoint``, ``missing_dependency``)."""

    default_kind = "grpo_error"


@dataclass(slots=True)
class GRPOConfig:
    """Hyper-parameters and output folder of one GRPO run.

    Each step samples ``group`` trials of each of ``tasks_per_step`` tasks (all tasks when there are fewer) and
    makes ``updates`` optimizer steps on them (1: strictly on-policy). ``min_groups`` > 0: while fewer groups than
    that have differing rewards, the step draws ``tasks_per_step`` other tasks, ``max_draws`` draws at most (the
    first included); with ``balance``, ``min_groups`` is spread evenly over the tasks' target tools. ``kl_coef`` 0
    keeps no reference model.
    ``max_tokens`` bounds one assistant turn; ``max_len`` one trial's tokens in training (a longer one is cut, its
    later turns unlearned); ``batch_tokens`` (default ``max_len``) one packed micro-batch. ``save_every`` 0 saves
    a checkpoint only at the end and on Ctrl-C.
    """

    out: Path = Path("grpo-out")
    group: int = 8
    tasks_per_step: int = 8
    steps: int = 100
    lr: float = 1e-6
    clip: float = 0.2
    tis_cap: float | None = 2.0
    kl_coef: float = 0.0
    #: Trials of each group the update leaves out (its rewards tie, or ``balance`` dropped it) that still carry the
    #: KL term, with no advantage (0: none; needs ``kl_coef``): why, in the module docstring's ``kl_ties`` paragraph.
    kl_ties: int = 0
    advantage: str = "grpo"
    #: Scale of negative advantages (:func:`~toolworld.train.advantages.weigh_negatives`): 1 the plain gradient,
    #: below 1 failures push down less than successes pull up, 0 reinforces successes only.
    neg_weight: float = 1.0
    #: In a turn that sent an argument value no earlier message held, keep a negative advantage on that value's
    #: tokens alone (:func:`~toolworld.train.advantages.blame_invented`): the made-up address is lowered, not the
    #: lookup tool it was sent to.
    blame_invented: bool = False
    #: Taken off the reward of a trial that a turn's token cap cut (:func:`penalize_overlong`; 0: none).
    overlong_penalty: float = 0.0
    #: ``partial``: the score's reward (weighted components); ``success``: 1.0 when the trial succeeded, else 0.0.
    reward: str = "partial"
    updates: int = 1
    #: Dynamic sampling: groups with differing rewards a step gathers before it updates (0: one draw, as many as come).
    min_groups: int = 0
    #: Draws of ``tasks_per_step`` tasks a step makes at most while it gathers ``min_groups``.
    max_draws: int = 4
    #: Gather ``min_groups`` evenly over the tasks' target tools (``target_of``), and train on that many of each.
    balance: bool = False
    #: A policy spec (``gold``, ``gold:explain=1``, ``openai:MODEL@URL``...) whose passing trial joins every group
    #: where all sampled trials failed, with reward 1 (off-policy guidance; see the module docstring). "": none.
    guide: str = ""
    #: A policy spec (``gold:explain=1``) that plays each task's first turns before the policy takes over: every
    #: step, per task, the lead plays the task once and a depth ``k`` is drawn uniformly from 0 to its turn count
    #: less one (0 where the lead failed); the group's trials all start after the lead's first ``k`` turns (see
    #: ``rollout/branch.py`` and the module docstring). "": every trial plays the task from its start.
    branch: str = ""
    #: The chance that a task's group plays it from its start although the lead passed (k = 0), drawn per task and
    #: step with ``k``. The uniform ``k`` gives the first turns (who the customer is, the lookup) the fewest trials:
    #: the lead plays them whenever ``k`` falls after them, so the policy meets them in ~1/turns of the groups.
    branch_from_start: float = 0.0
    #: A rule of :data:`BRANCH_AT` for where a branched group starts: ``uniform`` (k drawn as above) or ``pick`` (at
    #: the lead's turn that picks a value the customer only described, k as drawn where the task has none).
    branch_at: str = "uniform"
    #: A name in :data:`REWARD_CONTROLS`: ``shuffle`` trains on rewards permuted within each group, the control run
    #: that tells a gain the rewards bought from one any update would have made (``none``: the scored rewards).
    reward_control: str = "none"
    #: Weight of the supervised loss on ``train_grpo(sft=...)`` conversations in each update (0: none; see above).
    sft_coef: float = 0.0
    #: Weight of a floor under the likelihood of the same conversations (``losses.floor_loss``: one-sided k3 to the
    #: reference on their assistant tokens; 0: none; needs ``kl_coef`` or ``lora`` for a reference). Why: the
    #: module docstring's ``sft_floor`` paragraph.
    sft_floor: float = 0.0
    #: Conversations of ``sft`` that each step's supervised terms are taken on, drawn by (seed, step).
    sft_batch: int = 4
    max_tokens: int = 512
    temperature: float = 1.0
    max_len: int = 8192
    batch_tokens: int | None = None
    #: Lay the opening that trials share (system prompt, user's first turn) once per packed row: same loss, less work.
    share_prefix: bool = True
    #: Unpacked, run a group's shared prompt once where that is less work than the step's (``share_sets``); False:
    #: one prefix for the whole step (the system prompt alone), the earlier layout. The same update either way, so a
    #: run may resume with the other.
    share_groups: bool = True
    max_grad_norm: float = 1.0
    weight_decay: float = 0.0
    #: What turns gradients into steps: a name in :data:`OPTIMIZERS` (``adamw``, ``sgd``).
    optimizer: str = "adamw"
    #: Train LoRA adapters (:func:`toolworld.train.lora.wrap_lora`) instead of every weight: ``lora_r`` directions
    #: per projection, scaled by ``lora_alpha / lora_r``, the rest frozen as given (why: ``lora.py``). Checkpoints
    #: hold the adapter and its optimizer state; ``final/`` the model with the adapter merged in, as is the model
    #: object once the run returns. A step as large as a full update's takes about thirty times its
    #: learning rate (rank 16 on SmolLM2-135M; benchmarks/grpo_step.py).
    lora: bool = False
    lora_r: int = 16
    lora_alpha: int = 32
    concurrency: int = 8
    seed: int = 0
    save_every: int = 0
    #: Checkpoints kept on disk, the newest (0: all); each holds the weights and the optimizer state.
    keep_checkpoints: int = 2
    resume: bool = False
    tensorboard: bool = True
    #: How tools are stated to the model in its rollouts (``ChatTemplate``); recorded in ``final/``.
    tool_prompt: str = "auto"
    #: Recompute layer activations in the update's backward pass (``sft.layer_checkpointing``): long rows fit in RAM.
    gradient_checkpointing: bool = False
    #: Run the update's forward passes under bfloat16 autocast (weights, optimizer and the logsumexp stay float32):
    #: ~1.8x faster on CPUs with bf16 instructions and on GPUs (``docs/benchmarks.md``). pi_old and the reference
    #: are computed under it too, so a ratio compares like with like; the logprob gap to the sampler then also holds
    #: bf16 rounding, which TIS weighs like any other mismatch.
    bf16: bool = False
    #: Pack trials into rows (see ``SFTConfig.packing``); off, each trial is its own micro-batch.
    packing: bool = True
    #: Write every scored trial to ``trials.jsonl`` (~10 KB each on retail): a reward curve says that the policy
    #: changed, the trials say into what (a shortcut the reward allows shows there first).
    save_trials: bool = True
    #: Evaluate the policy on ``train_grpo``'s ``eval_tasks`` before the first step, after every ``eval_every``-th
    #: step and after the last (0: never): the training reward is measured on the tasks being trained, the held-out
    #: pass^1 on tasks the policy never learned from, and only the second says whether it got better at the job.
    eval_every: int = 0
    #: Evaluate the model as given, before the first step, and as trained, after the last (False: a pipeline
    #: evaluates it anyway, as its stage before or after GRPO; gains are then over the first evaluation made).
    eval_first: bool = True
    eval_last: bool = True
    #: Trials per evaluation task, at ``eval_temperature`` (0: greedy, one trial is all it can give).
    eval_trials: int = 1
    eval_temperature: float = 0.0

    def __post_init__(self) -> None:
        self.out = Path(self.out)
        if self.batch_tokens is None:
            self.batch_tokens = self.max_len
        checks = [("group", self.group >= 2, ">= 2 (a group of one has no baseline to compare with)"),
                  ("tasks_per_step", self.tasks_per_step >= 1, ">= 1"), ("steps", self.steps >= 1, ">= 1"),
                  ("lr", self.lr > 0, "> 0"), ("clip", 0 < self.clip < 1, "in (0, 1)"),
                  ("tis_cap", self.tis_cap is None or self.tis_cap >= 1, ">= 1 or None"),
                  ("kl_coef", self.kl_coef >= 0, ">= 0"),
                  ("kl_ties", self.kl_ties >= 0 and (self.kl_ties == 0 or self.kl_coef > 0),
                   ">= 0, and 0 unless kl_coef > 0 (its trials carry the KL term alone)"),
                  ("neg_weight", self.neg_weight >= 0, ">= 0 (1: the plain gradient, 0: successes only)"),
                  ("overlong_penalty", self.overlong_penalty >= 0, ">= 0 (0: none)"),
                  ("branch_from_start", 0 <= self.branch_from_start <= 1 and (self.branch_from_start == 0 or self.branch),
                   "in [0, 1], and 0 unless branch is set (without a lead every trial starts at the start)"),
                  ("branch_at", self.branch_at in BRANCH_AT and (self.branch_at == "uniform" or self.branch),
                   f"one of {', '.join(BRANCH_AT)}, and uniform unless branch is set (without a lead there is "
                   "nothing to start after)"),
                  ("sft_coef", self.sft_coef >= 0, ">= 0 (0: none)"),
                  ("sft_floor", self.sft_floor >= 0 and (self.sft_floor == 0 or self.kl_coef > 0 or self.lora),
                   ">= 0, and 0 unless kl_coef > 0 or lora is on (it holds the conversations at a reference's "
                   "likelihood: the model as given, or its adapters switched off)"),
                  ("sft_batch", self.sft_batch >= 1, ">= 1"), ("advantage", self.advantage in ADVANTAGES,
                                                            f"one of {', '.join(ADVANTAGES)}"),
                  ("reward", self.reward in REWARDS, f"one of {', '.join(REWARDS)}"),
                  ("reward_control", self.reward_control in REWARD_CONTROLS,
                   f"one of {', '.join(REWARD_CONTROLS)}"),
                  ("optimizer", self.optimizer in OPTIMIZERS, f"one of {', '.join(OPTIMIZERS)}"),
                  ("lora_r", self.lora_r >= 1, ">= 1"), ("lora_alpha", self.lora_alpha > 0, "> 0"),
                  ("updates", self.updates >= 1, ">= 1"), ("max_tokens", self.max_tokens >= 1, ">= 1"),
                  ("min_groups", self.min_groups >= 0, ">= 0 (0: no dynamic sampling)"),
                  ("max_draws", self.max_draws >= 1, ">= 1"),
                  ("balance", not self.balance or self.min_groups >= 1, "off (False) unless min_groups >= 1 (it spreads "
                                                                         "min_groups over the targets)"),
                  ("temperature", self.temperature > 0, "> 0 (GRPO needs sampled, varied trials)"),
                  ("max_len", self.max_len >= 2, ">= 2"), ("max_grad_norm", self.max_grad_norm > 0, "> 0"),
                  ("concurrency", self.concurrency >= 1, ">= 1"), ("save_every", self.save_every >= 0, ">= 0"),
                  ("keep_checkpoints", self.keep_checkpoints >= 0, ">= 0 (0 keeps all)"),
                  ("eval_every", self.eval_every >= 0, ">= 0 (0: no evaluation)"),
                  ("eval_temperature", self.eval_temperature >= 0, ">= 0 (0: greedy)"),
                  ("eval_trials", self.eval_trials >= 1 and (self.eval_trials == 1 or self.eval_temperature > 0),
                   ">= 1, and 1 at eval_temperature 0 (greedy trials of a task repeat each other)"),
                  # a packed micro-batch holds whole samples, so it must fit the longest one
                  ("batch_tokens", self.batch_tokens >= self.max_len, f">= max_len ({self.max_len})")]  # fmt: skip
        for name, ok, want in checks:
            if not ok:
                raise GRPOError(f"{name} must be {want}, got {getattr(self, name)!r}", kind="invalid_option")
        check_tool_prompt(self.tool_prompt, GRPOError)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["out"] = str(self.out)
        return data


@dataclass(frozen=True, slots=True)
class GRPOStep:
    """One step, as logged to ``train.jsonl`` and passed to ``on_step``.

    ``reward`` and ``pass1`` are over the scored trials of the step (before the update). ``kl``, ``clip_frac``,
    ``logprob_gap`` (mean |trainer - sampler| logprob of the sampled tokens, before the update) and ``loss`` are
    token means over the groups that were trained on, None when the step made no update (``updated`` False).
    ``loss`` is the objective on them alone; the anchors' KL (``kl_ties``) is added to what the update descends, and
    ``grad_norm`` is the norm of that whole gradient.
    ``tokens`` counts the sampled tokens of the step; ``tokens_per_s`` is that over the whole step's ``seconds``.
    ``reward``, ``pass1``, ``trials`` and ``tokens`` are the policy's own trials: a guide's are counted in ``guided``.
    """

    step: int
    total_steps: int
    reward: float
    pass1: float
    trials: int
    infra_errors: int
    groups: int  # groups with a reward spread that were trained on (balance leaves a target's extra ones out)
    guided: int  # groups whose trials all failed and that the guide's passing trial joined (0 without a guide)
    updated: bool
    tasks: int  # tasks played this step (more than tasks_per_step when dynamic sampling drew again)
    draws: int
    loss: float | None
    sft_loss: float | None  # the supervised term's loss (before its weight), None without one or without an update
    sft_floor: float | None  # the floor's loss on the same conversations (before its weight), None without one
    sft_below: float | None  # the share of their assistant tokens less likely than under the reference
    kl: float | None
    anchored: int  # trials of groups left out of the update that carried the KL term alone (kl_ties)
    kl_ties: float | None  # their mean k3 to the reference, None without any
    clip_frac: float | None
    logprob_gap: float | None
    grad_norm: float | None
    tokens: int
    tokens_per_s: float
    seconds: float
    sample_s: float
    update_s: float
    #: Turns of the trained groups whose negative advantage ``blame_invented`` held to a made-up value (0 without it).
    blamed: int = 0
    #: Tokens of the conversations the update ran (trained and anchored), whole; the tokens its forward passes ran,
    #: each shared prompt once (a group's own where that pays, else the step's: ``share_sets``); and the tokens every
    #: one of them shares (the system prompt: what a prefix shared by the whole step runs once). Work, not time: the
    #: saving on any machine.
    update_whole: int = 0
    update_run: int = 0
    step_prefix: int = 0

    def to_dict(self) -> dict[str, Any]:
        data = {name: getattr(self, name) for name in self.__slots__}  # type: ignore[attr-defined]
        data.pop("total_steps")
        return data


@dataclass(frozen=True, slots=True)
class GRPOEval:
    """One evaluation of the policy on the evaluation tasks after ``step`` updates (0: the model as given), as logged
    to ``eval.jsonl`` and passed to ``on_eval``.

    ``pass1`` is the mean over tasks of their pass rates (the fraction of trials that passed when every trial was
    scored; trials lost to an infra error count for nothing), ``lo``/``hi`` its 95% interval (Wilson's with one
    trial per task; with several, Wilson's at the effective number of draws, since a task's trials fail or pass
    together); ``reward`` the mean of the scorer's reward (partial credit, whatever the run trains on);
    ``per_task`` each task's pass rate; ``gain`` the paired gain over the run's first evaluation
    (``toolworld.scoring.metrics.paired_gain``: mean per-task change with its interval, tasks fixed and broken, sign
    test), None for the first. Every evaluation plays the same tasks with the same sampling seeds, so two of them
    differ by what the updates between them did, not by the draw.
    """

    step: int
    pass1: float
    lo: float
    hi: float
    reward: float
    tasks: int
    trials: int
    temperature: float
    infra_errors: int
    seconds: float
    per_task: dict[str, float]
    gain: dict[str, Any] | None

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}  # type: ignore[attr-defined]


@dataclass(slots=True)
class GRPOResult:
    """What a training call did: steps run (``resumed_from`` of them restored), each step's log, and where the
    final model is (None when interrupted: the checkpoint of the last finished step is there instead)."""

    out: Path
    steps: int
    total_steps: int
    log: list[GRPOStep] = field(default_factory=list)
    resumed_from: int = 0
    final: Path | None = None
    checkpoint: Path | None = None
    interrupted: bool = False
    wall_s: float = 0.0
    #: Every evaluation of the run (a resumed run's earlier ones included), in step order.
    evals: list[GRPOEval] = field(default_factory=list)

    @property
    def rewards(self) -> list[float]:
        """Mean reward of each step run by this call."""
        return [s.reward for s in self.log]


# ------------------------------------------------------------------------------------------------ pieces


def estimator(name: str) -> Callable[[Sequence[float]], list[float]]:
    """The advantage function called ``name`` (one of :data:`ADVANTAGES`); ``dr_grpo`` is GRPO without the std."""
    from .advantages import grpo, mc_grpo

    # gigpo's episode level is grpo's; its step level is added per token in ``train_grpo``
    table: dict[str, Callable[[Sequence[float]], list[float]]] = {
        "grpo": grpo, "dr_grpo": partial(grpo, scale=False), "mc_grpo": mc_grpo, "gigpo": grpo}  # fmt: skip
    if name not in table:
        raise GRPOError(f"advantage must be one of {', '.join(ADVANTAGES)}, got {name!r}", kind="invalid_option")
    return table[name]


def pick_tasks(tasks: Sequence[Task], n: int, seed: int, step: int, *, draw: int = 0,
               taken: Iterable[str] = ()) -> list[Task]:  # fmt: skip
    """The tasks of ``step`` (0-based): ``n`` distinct ones drawn by ``(seed, step)`` alone (all when there are no
    more than ``n``), so a resumed run trains on the tasks an uninterrupted one would have. A further ``draw`` of
    the same step (dynamic sampling) picks by ``(seed, step, draw)`` among the tasks whose ids are not ``taken``."""
    if draw:
        skip = set(taken)
        tasks = [t for t in tasks if t.id not in skip]
    if n >= len(tasks):
        return list(tasks)
    rng = random.Random(derive_seed("grpo-tasks", seed, step, *([draw] if draw else [])))
    return [tasks[i] for i in sorted(rng.sample(range(len(tasks)), n))]


def target_of(task: Task) -> str:
    """What a task asks for, as ``balance`` counts it: the tool calls its synthesis walked to
    (``provenance.targets``), e.g. ``track_order`` for a tracking request, ``get_order_details`` for a status one."""
    return ",".join(task.provenance.targets)


def _even(groups: Sequence[str], target: dict[str, str], quota: int) -> list[str]:
    """The first ``quota`` of ``groups`` (task ids in draw order) of each target: what a balanced update keeps."""
    kept: list[str] = []
    count: dict[str, int] = defaultdict(int)
    for g in groups:
        if count[target[g]] < quota:
            kept.append(g)
            count[target[g]] += 1
    return kept


class _Salted:
    """A policy whose sampling seeds also depend on a salt (the step): trial k of a task gets the same episode
    seed every step, and without the salt every step would draw the same random numbers for it."""

    def __init__(self, policy: Any, salt: int) -> None:
        self._policy, self._salt = policy, salt
        self.name = policy.name

    def start(self, *, tools: list[dict[str, Any]], task: Task | None = None, seed: int = 0) -> Any:
        return self._policy.start(tools=tools, task=task, seed=derive_seed("grpo-sample", self._salt, seed))


def rollouts(world: World, tasks: Sequence[Task], policy: Any, *, trials: int, scorer: Scorer | None = None,
             salt: int | None = None, concurrency: int = 8, limits: Limits | None = None,
             user: UserSimulator | None = None) -> list[tuple[Trajectory, Score]]:  # fmt: skip
    """Run ``trials`` episodes of every task with ``policy`` (scripted user unless ``user``) and score each one.

    ``salt`` (when given) varies the policy's sampling seeds, so that the same (task, trial) samples anew each
    training step. ``scorer`` defaults to ``score_trajectory`` in ``world``. Pairs come in (task, trial) order.
    """
    from ..rollout.loop import DEFAULT_LIMITS, run_many

    runner = _Salted(policy, salt) if salt is not None else policy
    trajectories = asyncio.run(run_many(world, tasks, runner, trials=trials, concurrency=concurrency,
                                        limits=limits or DEFAULT_LIMITS, user=user))  # fmt: skip
    by_id = {t.id: t for t in tasks}
    score = scorer or (lambda task, traj: score_trajectory(task, traj, world=world))
    return [(traj, score(by_id[traj.task_id], traj)) for traj in trajectories]


def samples_from_trajectories(pairs: Iterable[tuple[Trajectory, Score]], *, max_len: int | None = None,
                              render: Callable[[Trajectory], tuple[list[int], list[int]]] | None = None,
                              ) -> list[Sample]:  # fmt: skip
    """Training samples from scored trials' token buffers: the sampled ids, loss mask and sampler logprobs as they
    are, ``group`` the task id, the score in ``meta`` (``task_id``, ``trial``, ``reward``, ``success``).

    Trials that ended on an infra error (unscored: their reward says nothing) are left out, and so are those that
    hold no token buffer (a message-level policy) unless ``render`` is given: ``render(trajectory) -> (ids, mask)``
    then makes their tokens from their messages (a guide's trial, see :func:`guide_renderer`), with no sampler
    logprobs (0.0) and ``meta["rendered"]`` True. ``max_len`` cuts each sample to its first tokens.
    """
    from ..tokens import TokenBuffer
    from .data import Sample, truncate

    out = []
    for traj, score in pairs:
        if traj.failed_by_infra or score.infra_error or not (traj.token_buffer or render):
            continue
        meta = {"task_id": traj.task_id, "trial": traj.trial, "reward": float(score.reward),
                "success": bool(score.success), "termination": traj.termination}  # fmt: skip
        if traj.token_buffer:
            buf = TokenBuffer.from_dict(traj.token_buffer)
            ids, mask = list(buf.ids), list(buf.mask)
            logprobs = [lp if m and lp is not None else 0.0 for lp, m in zip(buf.logprobs, buf.mask, strict=True)]
        else:
            assert render is not None
            ids, mask = render(traj)
            logprobs, meta["rendered"] = [0.0] * len(ids), True
        sample = Sample(input_ids=ids, loss_mask=mask, logprobs=logprobs, group=traj.task_id, meta=meta)
        out.append(truncate(sample, max_len) if max_len is not None else sample)
    return out


def guide_renderer(tokenizer: Any, world: World, tool_prompt: str) -> Callable[[Trajectory], tuple[list[int], list[int]]]:
    """``render(trajectory) -> (ids, mask)`` for :func:`samples_from_trajectories`: a message-level trial (a guide's)
    as the policy would have produced it, through ``tokenizer``'s chat template with the tools stated as
    ``tool_prompt`` states them and the token bridge of a live episode (``store.export.render_sft``, what SFT trains
    on); the mask is 1 on the assistant turns' tokens, one run per turn, as a sampled buffer's."""
    from ..store.export import chat_messages, render_sft
    from ..tokens import ChatTemplate

    template = ChatTemplate(tokenizer, world.openai_tools(), tool_prompt=tool_prompt)

    def render(trajectory: Trajectory) -> tuple[list[int], list[int]]:
        ids, mask, _ = render_sft(template, chat_messages(trajectory.messages))
        return ids, mask

    return render


def guide_trials(world: World, tasks: Sequence[Task], guide: Any, *, number: int, scorer: Scorer | None = None,
                 concurrency: int = 8, limits: Limits | None = None,
                 user: UserSimulator | None = None) -> list[tuple[Trajectory, Score]]:  # fmt: skip
    """The guide policy's passing trial of each of ``tasks`` (those whose sampled trials all failed), numbered
    trial ``number`` (the group's size: it comes after the group's own trials). A guide trial that failed or ended
    on an infra error is dropped: it would only add one more failure to a group of failures."""
    pairs = rollouts(world, tasks, guide, trials=1, scorer=scorer, concurrency=concurrency, limits=limits, user=user)
    return [(traj.model_copy(update={"trial": number}), score.model_copy(update={"trial": number}))
            for traj, score in pairs if score.success and not (traj.failed_by_infra or score.infra_error)]  # fmt: skip


def _uniform_depth(task: Task, lead: Trajectory, drawn: int) -> int:
    """k ~ U{0..turns - 1}: every turn of the lead's path starts a group equally often."""
    return drawn


def _pick_depth(task: Task, lead: Trajectory, drawn: int) -> int:
    """The lead's first turn that calls a tool with a value the customer only described
    (:meth:`Task.described_arguments`: "the order I placed on April 16" read off the listed orders), so the group's
    trials all start at the pick, the decision a small policy gets wrong most; a task with no described value, or
    whose lead passed no such call, keeps the uniform draw. Why not always the uniform depth: with k uniform over
    five or six turns, about one group in five starts at the pick, and a step's update holds one or two of them."""
    described = task.described_arguments()
    turn = 0
    for msg in lead.messages if described else ():
        if msg.get("role") != "assistant":
            continue
        for call in msg.get("tool_calls") or ():
            _, args = tool_call_arguments(call)
            if isinstance(args, dict) and any(args.get(arg) == need.value for need, arg in described):
                return turn
        turn += 1
    return drawn


#: Where a branched group starts (``GRPOConfig.branch_at``): ``(task, the lead's passing trial, the uniformly drawn
#: depth) -> the number of turns the lead plays``. The uniform depth is drawn for every task whatever the rule, so
#: the per-(seed, step, task) draws that follow it (``branch_from_start``) do not depend on the rule.
BRANCH_AT: dict[str, Callable[[Task, Trajectory, int], int]] = {"uniform": _uniform_depth, "pick": _pick_depth}


def branch_depths(world: World, tasks: Sequence[Task], lead: Any, *, seed: int, step: int,
                  scorer: Scorer | None = None, concurrency: int = 8, limits: Limits | None = None,
                  user: UserSimulator | None = None, from_start: float = 0.0,
                  at: str = "uniform") -> dict[str, int]:  # fmt: skip
    """Per task, the number of turns ``lead`` plays before the policy takes over (``BranchPolicy``): the lead plays
    each task once, and a depth is drawn uniformly from 0 to its number of turns less one, by (seed, step, task)
    alone, so a resumed run branches where an uninterrupted one would have; ``at`` (a rule of :data:`BRANCH_AT`)
    may move it (``pick``: to the turn that picks a described value). A task the lead failed (or that ended on
    an infra error) gets 0: its path is not one that passes, and the trials play the task from its start.
    ``from_start`` is the chance that a task gets 0 anyway (``GRPOConfig.branch_from_start``): its draw comes after
    the depth's from the same generator, so 0 leaves every depth as it was."""
    rule = BRANCH_AT[at]
    by_id = {t.id: t for t in tasks}
    depths: dict[str, int] = {}
    for traj, score in rollouts(world, tasks, lead, trials=1, scorer=scorer, concurrency=concurrency, limits=limits,
                                user=user):  # fmt: skip
        ok = score.success and not (traj.failed_by_infra or score.infra_error) and traj.turns
        rng = random.Random(derive_seed("grpo-branch", seed, step, traj.task_id))
        depth = rule(by_id[traj.task_id], traj, rng.randrange(len(traj.turns))) if ok else 0
        depths[traj.task_id] = 0 if from_start and rng.random() < from_start else depth
    return depths


def _all_failed(pairs: Sequence[tuple[Trajectory, Score]]) -> list[str]:
    """Task ids (in order) whose scored trials all failed: the groups a guide joins."""
    verdicts: dict[str, list[bool]] = defaultdict(list)
    for traj, score in pairs:
        if not (traj.failed_by_infra or score.infra_error):
            verdicts[traj.task_id].append(bool(score.success))
    return [task for task, passed in verdicts.items() if not any(passed)]


def _trial_of(pairs: Sequence[tuple[Trajectory, Score]]) -> Callable[[Sample], Trajectory]:
    """The trajectory each sample of ``pairs`` was made from, by its (task, trial)."""
    trajectories = {(t.task_id, t.trial): t for t, _ in pairs}
    return lambda s: trajectories[(s.meta["task_id"], s.meta["trial"])]


def _step_level(samples: Sequence[Sample], pairs: Sequence[tuple[Trajectory, Score]]) -> None:
    """GiGPO: per-token advantages from the episode level plus the step level, the anchor states being the world
    state each turn was taken in and what the agent had been shown by then (``advantages.anchor_states``); see
    :func:`toolworld.train.advantages.gigpo`."""
    from .advantages import episode_from_trajectory, gigpo

    trial_of = _trial_of(pairs)
    episodes = [episode_from_trajectory(trial_of(s), s, float(s.meta["reward"]), truncated="truncated_from" in s.meta)
                for s in samples]  # fmt: skip
    for s, advantages in zip(samples, gigpo(episodes), strict=True):
        s.token_advantages = advantages


def _spread_groups(samples: Sequence[Sample]) -> set[str]:
    """Groups whose rewards differ: only they carry an advantage (a tie gives exactly zero, up to rounding)."""
    rewards: dict[str, list[float]] = defaultdict(list)
    for s in samples:
        rewards[s.group].append(float(s.meta["reward"]))
    return {g for g, rs in rewards.items() if len(rs) > 1 and max(rs) - min(rs) > 1e-9}


def advantaged(pairs: Sequence[tuple[Trajectory, Score]], config: GRPOConfig, *,
               render: Callable[[Trajectory], tuple[list[int], list[int]]] | None = None, step: int = 0,
               decode: Callable[[list[int]], str] | None = None,
               ) -> tuple[list[Sample], list[Sample], set[str]]:  # fmt: skip
    """One step's scored trials as training samples with ``config.advantage``'s advantages: all of them, those the
    update trains on (groups whose rewards differ, with a token to learn), and those groups. ``render`` makes the
    tokens of trials without a buffer (a guide's, :func:`guide_renderer`); each is a member of its task's group.
    ``config.reward_control`` rewrites the rewards first, by ``(config.seed, step)``. ``decode`` (the tokenizer's,
    special tokens kept) is needed with ``config.blame_invented``, which records per sample the turns it changed
    in ``meta["blamed_turns"]``."""
    from .advantages import assign, blame_invented, weigh_negatives

    samples = samples_from_trajectories(pairs, max_len=config.max_len, render=render)
    REWARD_CONTROLS[config.reward_control](samples, derive_seed("grpo-control", config.seed, step))
    assign(samples, estimator(config.advantage))
    if config.advantage == "gigpo":
        _step_level(samples, pairs)
    weigh_negatives(samples, config.neg_weight)
    if config.blame_invented:
        if decode is None:
            raise GRPOError("blame_invented needs the tokenizer's decode: it finds the made-up values' tokens",
                            kind="invalid_option")  # fmt: skip
        trial_of = _trial_of(pairs)
        for s in samples:
            if not s.meta.get("rendered"):  # a guide's trial passed: nothing to blame
                s.meta["blamed_turns"] = blame_invented(s, trial_of(s), decode, truncated="truncated_from" in s.meta)
    spread = _spread_groups(samples)
    return samples, [s for s in samples if s.group in spread and any(s.loss_mask)], spread


def anchors_of(samples: Sequence[Sample], trained: set[str], per_group: int) -> list[Sample]:
    """The first ``per_group`` sampled trials (with a token to learn) of each group not in ``trained``: the groups
    whose rewards tied, or that ``balance`` left out, whose tokens :func:`update` holds to the reference with the KL
    term alone (``kl_ties``). A guide's rendered trial is never one: the policy did not sample it."""
    count: dict[str, int] = defaultdict(int)
    out = []
    for s in samples:
        if s.group in trained or s.meta.get("rendered") or not any(s.loss_mask) or count[s.group] >= per_group:
            continue
        count[s.group] += 1
        out.append(s)
    return out


def make_optimizer(params: list[Any], config: GRPOConfig) -> Any:
    """``config.optimizer`` (a name in :data:`OPTIMIZERS`) over ``params``."""
    return OPTIMIZERS[config.optimizer](params, config)


# --------------------------------------------------------------------------------------------------- update


def update(model: Any, ref_model: Any, samples: Sequence[Sample], optimizer: Any, params: list[Any],
           config: GRPOConfig, pad_id: int, sft: Sequence[Sample] = (),
           anchors: Sequence[Sample] = ()) -> dict[str, float]:  # fmt: skip
    """``config.updates`` optimizer steps of ``policy_loss`` on ``samples`` (with their advantages, see
    :func:`advantaged`), plus ``config.sft_coef`` times ``sft_loss`` on ``sft`` (conversations to stay close to),
    ``ref_model`` the KL reference or None; token-weighted stats of them all (``sft_loss`` over ``sft``'s).

    ``anchors`` (trials of groups the update leaves out, :func:`anchors_of`) carry the KL term alone: their advantage
    is zero, and their tokens join the sum of the KL penalty but not the token count the loss is divided by, so each
    anchored token weighs as much as a trained token's KL and the policy gradient of ``samples`` is not thinned by
    them. ``kl_ties`` in the stats is their mean k3."""
    import torch

    from .logprobs import token_logprobs
    from .prefix import kv_shareable, shared_length

    first = next(model.parameters())
    assert config.batch_tokens is not None
    if (anchors or config.sft_floor) and ref_model is None:
        raise GRPOError("anchors (the KL term alone) and sft_floor compare with a reference: give a reference model",
                        kind="invalid_option")  # fmt: skip
    # a rendered trial (a guide's) goes in micro-batches of its own: it has no sampler logprobs to weigh against;
    # so do anchors, whose loss is the KL term alone
    families = {"sampled": [s for s in samples if not s.meta.get("rendered")],
                "rendered": [s for s in samples if s.meta.get("rendered")],
                "anchor": [replace(s, advantage=0.0, token_advantages=None) for s in anchors]}  # fmt: skip
    packed, kinds, keys = [], [], []
    for kind, family in families.items():
        rows = _rows(family, config, pad_id)
        packed += rows
        kinds += [kind] * len(rows)
        keys += [None] * len(rows) if config.packing else [s.group for s in family if len(s)]  # a row per trial
    micro = [b.to(first.device, dtype=first.dtype) for b in packed]
    step_prefix = shared_length(micro) if kv_shareable(config) else 0  # what every row shares, logged as such
    sets = share_sets(keys, lambda rows: shared_length([micro[i] for i in rows]), everyone=step_prefix) \
        if kv_shareable(config) and config.share_groups else [list(range(len(micro)))]
    supervised = [b.to(first.device, dtype=first.dtype) for b in _rows(sft, config, pad_id)] \
        if config.sft_coef or config.sft_floor else []
    counts = [float(b.loss_mask.sum()) for b in micro]
    lengths = [b.computed_tokens for b in micro]
    tokens = {kind: sum(n for n, k in zip(counts, kinds, strict=True) if k == kind) for kind in families}
    total = tokens["sampled"] + tokens["rendered"] or 1.0  # the loss is a token mean over these: anchors add KL only
    none: list[Any] = [None] * len(micro)
    autocast = functools.partial(torch.autocast, first.device.type, dtype=torch.bfloat16, enabled=config.bf16)
    with torch.no_grad(), autocast():
        # pi_old: the trainer before any update of this step, fixed for all of them. With one update policy_loss
        # takes the current logprobs detached, which are exactly that, and the extra forward pass is saved.
        # an anchor has no advantage to weigh by a ratio: it takes none (ratio 1), and costs no forward pass here
        olds = _shared_logprobs(model, micro, sets, config, skip=[k == "anchor" for k in kinds]) \
            if config.updates > 1 else none
        refs = _shared_logprobs(ref_model, micro, sets, config) if ref_model is not None and config.kl_coef else none
        # the floor compares the supervised conversations' likelihood at temperature 1, as SFT learnt it
        floors = [token_logprobs(ref_model, b) for b in supervised] if config.sft_floor else []
    sums: dict[str, float] = defaultdict(float)
    with layer_checkpointing(model, config.gradient_checkpointing), autocast():
        _steps(model, micro, olds, refs, counts, total, optimizer, params, config, sums, kinds, supervised, sets,
               floors)
    weight = total * config.updates
    work = {"update_run": sums.pop("update_run", 0.0) / config.updates, "update_whole": float(sum(lengths)),
            "step_prefix": float(step_prefix)}
    # the supervised terms are means over their own conversations, the ties' KL over the anchors' tokens: neither is
    # divided by the trials' token count as the rest is
    supervised_stats = ("sft_loss", "sft_floor", "sft_below")
    own = (*supervised_stats, "kl_ties")
    stats = {key: value / weight for key, value in sums.items() if key not in own} | work
    if supervised:
        stats |= {key: sums[key] / config.updates for key in supervised_stats if key in sums}
    if tokens["anchor"]:
        stats["kl_ties"] = sums["kl_ties"] / (tokens["anchor"] * config.updates)
    stats["logprob_gap"] = sums["logprob_gap"] / max(tokens["sampled"] * config.updates, 1.0)  # the sampled alone
    return stats


def share_sets(keys: Sequence[str | None], common: Callable[[Sequence[int]], int], *,
               everyone: int | None = None) -> list[list[int]]:  # fmt: skip
    """Which micro-batches run their shared prompt together (:class:`~toolworld.train.prefix.SharedPrefix`), by
    each one's group (None: a packed row, which shares inside itself) and ``common(rows)``, the tokens those rows
    share: a group of two or more rows is a set of its own where that is less work, and the rest (lone anchors,
    packed rows, groups that share little more than the system prompt) one set, in order.

    The trials of a group open with the same task, so they share the user's first words, and a branched group
    (``branch``) the lead's turns too; a prefix shared by the whole step holds the system prompt alone. A group's
    ``m`` rows sharing ``L`` tokens run ``L + sum(n_i - L)`` in a set of their own and ``sum(n_i - P)`` in the
    step's (``P``: what every row shares), so their own set pays when ``(m - 1) L > m P``: for a group of 8 beside a
    2,134-token system prompt, when it shares ~305 tokens more. On the info tasks a branched group's common part
    beyond the system prompt is often less than that (the lead's turns are short), so many groups stay in the
    step's set. ``everyone`` is ``P`` where the caller has it already (else ``common`` of all rows)."""
    groups: dict[str | None, list[int]] = defaultdict(list)
    for i, key in enumerate(keys):
        groups[key].append(i)
    if everyone is None:
        everyone = common(range(len(keys)))
    sets = [rows for key, rows in groups.items()
            if key is not None and len(rows) > 1 and (len(rows) - 1) * common(rows) > len(rows) * everyone]  # fmt: skip
    own = {i for rows in sets for i in rows}
    rest = [i for i in range(len(keys)) if i not in own]
    return sets + ([rest] if rest else [])


def _shared_logprobs(model: Any, micro: Sequence[Any], sets: Sequence[Sequence[int]], config: GRPOConfig, *,
                     skip: Sequence[bool] = ()) -> list[Any]:  # fmt: skip
    """``token_logprobs`` of each micro-batch (no grad, ``config.temperature``), each of ``sets`` running the prompt
    its rows share once; whole ``[B, T]`` tensors, 0 over the prefix as over every token without loss. None where
    ``skip`` says so."""
    import torch

    from .logprobs import token_logprobs
    from .prefix import SharedPrefix, kv_shareable

    out: list[Any] = [None] * len(micro)
    for part in sets:
        part = [i for i in part if not (skip and skip[i])]
        prefix = SharedPrefix(model, [micro[i] for i in part], enabled=kv_shareable(config))
        for i, batch in zip(part, prefix.batches, strict=True):
            lp = token_logprobs(model, batch, temperature=config.temperature)
            out[i] = torch.cat([lp.new_zeros(lp.shape[0], prefix.length), lp], dim=1) if prefix.length else lp
    return out


def _rows(samples: Sequence[Sample], config: GRPOConfig, pad_id: int) -> list[Any]:
    """``samples`` as micro-batches the way ``config`` lays them out (packed rows, or one sample each)."""
    from .data import collate, pack

    assert config.batch_tokens is not None
    if config.packing:
        return pack(samples, config.batch_tokens, pad_id, share_prefix=config.share_prefix) if samples else []
    return [collate([s], pad_id) for s in samples if len(s)]


def _steps(model: Any, micro: list[Any], olds: list[Any], refs: list[Any], counts: list[float], total: float,
           optimizer: Any, params: list[Any], config: GRPOConfig, sums: dict[str, float],
           kinds: list[str], supervised: list[Any], sets: Sequence[Sequence[int]],
           floors: Sequence[Any] = ()) -> None:  # fmt: skip
    """The optimizer steps of :func:`update`, adding each one's token-weighted stats to ``sums``; a ``rendered``
    micro-batch (a guide's trials) takes no importance weight and adds nothing to the logprob gap; an ``anchor`` one
    adds its KL penalty to the loss and its k3 to ``kl_ties`` alone; ``supervised`` micro-batches add
    ``config.sft_coef`` times their token-mean NLL and ``config.sft_floor`` times their ``floor_loss`` against
    ``floors`` (the reference's logprobs of them); each of ``sets`` (:func:`share_sets`) runs its shared prompt
    once."""
    import torch

    from .logprobs import token_logprobs
    from .losses import floor_loss, policy_loss, sft_loss
    from .prefix import SharedPrefix, kv_shareable

    learnt = sum(float(b.loss_mask.sum()) for b in supervised) or 1.0  # the supervised term's own token count
    for _ in range(config.updates):
        optimizer.zero_grad(set_to_none=True)
        for part in sets:
            # unpacked trials run the prompt they share once per update (it changes with the weights)
            prefix = SharedPrefix(model, [micro[i] for i in part], enabled=kv_shareable(config))
            sums["update_run"] += sum(b.computed_tokens for b in prefix.batches) + prefix.length
            for i, batch in zip(part, prefix.batches, strict=True):
                kind, n = kinds[i], counts[i]
                loss, stats = policy_loss(model, batch, clip=config.clip,
                                          tis_cap=config.tis_cap if kind == "sampled" else None,
                                          kl_coef=config.kl_coef, ref_logprobs=prefix.slice(refs[i]),
                                          old_logprobs=prefix.slice(olds[i]), temperature=config.temperature)  # fmt: skip
                # each micro-batch's loss is its token mean: weighting by its share of tokens makes the step's loss
                # the token mean over all of them, as one batch would give (an anchor's share is over the same total)
                (loss * (n / total)).backward()
                if kind == "anchor":
                    sums["kl_ties"] += stats["kl"] * n
                    continue
                sums["loss"] += float(loss.detach()) * n
                for key in ("kl", "clip_frac", *(("logprob_gap",) if kind == "sampled" else ())):
                    sums[key] += stats[key] * n
            prefix.backward()
        # the supervised terms are their own token means, whatever the trials' length; one forward pass serves both
        for j, batch in enumerate(supervised):
            logp = token_logprobs(model, batch)
            nll = sft_loss(model, batch, logprobs=logp)
            share = float(batch.loss_mask.sum()) / learnt
            term = nll * config.sft_coef
            if config.sft_floor:
                floor, below = floor_loss(logp, floors[j], batch.loss_mask)
                term = term + floor * config.sft_floor
                sums["sft_floor"] += float(floor.detach()) * share
                sums["sft_below"] += below * share
            (term * share).backward()
            sums["sft_loss"] += float(nll.detach()) * share
        sums["grad_norm"] += float(torch.nn.utils.clip_grad_norm_(params, config.max_grad_norm)) * total
        optimizer.step()


# ----------------------------------------------------------------------------------------------- checkpoints


def _save_checkpoint(model: Any, optimizer: Any, step: int, config: GRPOConfig) -> Path:
    """``checkpoint-N`` (see ``sft.write_checkpoint``: atomic, older ones pruned to ``keep_checkpoints``)."""
    import torch

    state = {"optimizer": optimizer.state_dict(), "rng": torch.get_rng_state()}
    return write_checkpoint(config.out, step, model, state, config.to_dict(), tool_prompt=config.tool_prompt,
                            keep=config.keep_checkpoints)  # fmt: skip


def same_temperature(sampler: Any, temperature: float) -> None:
    """Refuse a sampler that draws at another temperature than the run trains: the trainer's logprobs are taken
    under ``softmax(logits / temperature)``, and against trials drawn otherwise (greedy ones included) the ratio
    and TIS would correct a difference that is the configuration's, not the kernels'."""
    theirs = getattr(sampler, "temperature", None)
    if theirs is not None and not math.isclose(float(theirs), temperature, rel_tol=1e-6):
        raise GRPOError(f"the sampler draws at temperature {theirs} but the run trains the policy at "
                        f"temperature={temperature}: give both the same temperature", kind="invalid_option")  # fmt: skip


#: What a step writes, trimmed back to the checkpoint on resume (an evaluation of step N counts as step N's).
_LOGS = (LOG_FILE, TRIALS_FILE, EVAL_FILE, EVAL_TRIALS_FILE)


def _resume(model: Any, optimizer: Any, config: GRPOConfig) -> int:
    """Restore the latest checkpoint of ``config.out`` into ``model`` (the peft model with ``config.lora``); the
    step it ends (0 when there is none)."""
    import torch

    from .sft import SFTError

    ckpt = latest_checkpoint(config.out)
    if ckpt is None:  # steps logged by a run that died before its first checkpoint are run again: log them once
        for log in _LOGS:
            trim_log(config.out / log, 0)
        return 0
    state = json.loads((ckpt / STATE_FILE).read_text())
    saved = state.get("config", {})
    for key in (*_RESUME_KEYS, *LAYOUT_KEYS):
        was = saved.get(key, _LEGACY.get(key, getattr(config, key)))
        if was != getattr(config, key):
            raise GRPOError(f"{ckpt} was trained with {key}={was!r}, not {getattr(config, key)!r}: resume "
                            "with the same options, or train into a new --out", kind="run_mismatch")  # fmt: skip
    try:
        load_weights(model, ckpt, lora=config.lora)
    except SFTError as exc:
        raise GRPOError(str(exc), kind=exc.kind) from exc
    extra = torch.load(ckpt / OPTIM_FILE, weights_only=False)
    optimizer.load_state_dict(extra["optimizer"])
    torch.set_rng_state(extra["rng"])
    for log in _LOGS:
        trim_log(config.out / log, int(state["step"]))
    return int(state["step"])


def penalize_overlong(scorer: Scorer, penalty: float) -> Scorer:
    """``scorer`` with ``penalty`` taken off the reward of a trial that ended because a turn ran into its token
    cap (termination ``max_tokens``): ``r' = r - penalty`` there, ``r' = r`` elsewhere; verdict and components kept.

    Why (DAPO's overlong punishment, Yu et al. 2025): under a success reward a reply that never ends and a reply
    that ends on the wrong answer both earn 0, so where a group's winners stopped a row-by-row reading at the row
    they meant, the update pushes down the losers' stopping as hard as their rambling, and a few steps teach the
    policy to read on past the match until the cap cuts it. With the penalty the cut trial ranks below the wrong
    answer, so the group's advantages say "stop" as well as "stop at the right row"; a group whose trials all
    failed trains when some of them were cut. It only lowers rewards, so there is nothing to gain by seeking it.
    """
    if not penalty >= 0:
        raise GRPOError(f"the overlong penalty must be >= 0, got {penalty}", kind="invalid_option")

    def penalized(task: Task, trajectory: Trajectory) -> Score:
        score = scorer(task, trajectory)
        if trajectory.termination != "max_tokens":
            return score
        return score.model_copy(update={"reward": score.reward - penalty})

    return penalized


def success_only(scorer: Scorer) -> Scorer:
    """``scorer`` with its reward replaced by 1.0 for a success and 0.0 otherwise (components and verdict kept).

    Why: partial credit ranks failures against each other (customer identified but the wrong order read, 0.4,
    above a failed look-up, 0.15), so groups in which nothing succeeded still train, on components that are not
    the point of the task, and a policy can trade one component for another (skip identifying the customer and
    still state the answer: 0.75). With a binary reward only groups where some trials succeeded and others failed
    carry an advantage; the tokens those trials share get advantages that sum to zero, so the update falls where
    winners and losers parted. The price: fewer groups train (none where every trial failed).
    """

    def rewarded(task: Task, trajectory: Trajectory) -> Score:
        score = scorer(task, trajectory)
        return score.model_copy(update={"reward": 1.0 if score.success and not score.infra_error else 0.0})

    return rewarded


def trial_record(step: int, trajectory: Trajectory, score: Score) -> dict[str, Any]:
    """One line of ``trials.jsonl``: the step that sampled the trial, its verdict (reward, success, each failed
    component with its reason), the turns a branch's lead played before the policy (``lead_turns``, 0 for a trial
    the policy played from the start) and the trajectory without its token buffer (the ids are the training data,
    kept in memory only; the messages say what happened). ``Trajectory.model_validate(line["trajectory"])`` reads
    it."""
    return {"step": step, "lead_turns": sum(bool(t.meta.get("lead")) for t in trajectory.turns),
            "task_id": trajectory.task_id, "trial": trajectory.trial, "reward": score.reward,
            "success": score.success, "infra_error": score.infra_error or trajectory.failed_by_infra,
            "failed": {c.name: c.reason for c in score.components if not c.passed},
            "termination": trajectory.termination, "turns": trajectory.num_turns,
            "trajectory": trajectory.model_dump(mode="json", exclude={"token_buffer"})}  # fmt: skip


def at_temperature(policy: Any, temperature: float) -> Any:
    """``policy`` (the same engine and weights) decoding at ``temperature``: training samples at its temperature,
    evaluation at its own (greedy by default), from one set of weights."""
    if not hasattr(policy, "temperature"):
        raise GRPOError(f"the sampler's policy ({type(policy).__name__}) has no temperature to evaluate at: return a "
                        "TokenPolicy from sampler=", kind="invalid_option")  # fmt: skip
    clone = copy.copy(policy)
    clone.temperature = temperature
    return clone


def evaluate(world: World, tasks: Sequence[Task], policy: Any, config: GRPOConfig, *, step: int,
             scorer: Scorer | None = None, limits: Limits | None = None, user: UserSimulator | None = None,
             first: GRPOEval | None = None) -> tuple[GRPOEval, list[tuple[Trajectory, Score]]]:  # fmt: skip
    """Play ``tasks`` ``config.eval_trials`` times each with ``policy`` at ``config.eval_temperature`` and judge
    them: the :class:`GRPOEval` of step ``step`` (its gain over ``first`` when given) and the scored trials.

    The sampling seeds depend on ``config.seed`` only, never on the step, so every evaluation of a run draws the
    same random numbers and two of them differ only by the weights.
    """
    t0 = time.perf_counter()
    pairs = rollouts(world, tasks, at_temperature(policy, config.eval_temperature), trials=config.eval_trials,
                     scorer=scorer, salt=derive_seed(config.seed, "eval"), concurrency=config.concurrency,
                     limits=limits, user=user)  # fmt: skip
    wins: dict[str, list[int]] = defaultdict(list)
    rewards = []
    for traj, score in pairs:
        if not (traj.failed_by_infra or score.infra_error):
            wins[traj.task_id].append(int(score.success))
            rewards.append(score.reward)
    per_task = {task: sum(w) / len(w) for task, w in wins.items()}
    passed, scored = sum(map(sum, wins.values())), len(rewards)
    lo, hi = (wilson(passed, scored) if config.eval_trials == 1
              else task_interval(list(per_task.values()), config.eval_trials))  # fmt: skip
    result = GRPOEval(step=step, pass1=statistics.fmean(per_task.values()) if per_task else 0.0, lo=lo, hi=hi,
                      reward=statistics.fmean(rewards) if rewards else 0.0, tasks=len(tasks),
                      trials=config.eval_trials, temperature=config.eval_temperature,
                      infra_errors=len(pairs) - scored, seconds=time.perf_counter() - t0, per_task=per_task,
                      gain=paired_gain(first.per_task, per_task) if first is not None else None)  # fmt: skip
    return result, pairs


def _read_evals(out: Path) -> list[GRPOEval]:
    """The evaluations a run logged so far (after ``_resume`` trimmed those of steps it will run again)."""
    path = out / EVAL_FILE
    if not path.is_file():
        return []
    return [GRPOEval(**json.loads(line)) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _tensorboard(config: GRPOConfig) -> Any:
    """A SummaryWriter when tensorboard is installed and wanted; None otherwise (it is optional)."""
    if not config.tensorboard:
        return None
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        return None
    return SummaryWriter(str(config.out / TENSORBOARD_DIR))


# --------------------------------------------------------------------------------------------------- the loop


def _sft_batch(samples: Sequence[Sample], config: GRPOConfig, step: int) -> list[Sample]:
    """The ``config.sft_batch`` conversations of ``samples`` that step ``step`` (0-based) mixes in, drawn by
    (seed, step) alone, so a resumed run takes the ones an uninterrupted run would have."""
    if not (config.sft_coef or config.sft_floor):
        return []
    if config.sft_batch >= len(samples):
        return list(samples)
    rng = random.Random(derive_seed("grpo-sft", config.seed, step))
    return [samples[i] for i in sorted(rng.sample(range(len(samples)), config.sft_batch))]


def _policy_spec(spec: str, option: str) -> Any:
    """The policy of a spec option (``guide``, ``branch``), None for ""; a spec that does not build is refused
    before anything is sampled."""
    if not spec:
        return None
    from ..rollout.backends import make_policy

    try:
        return make_policy(spec)
    except ValueError as exc:
        raise GRPOError(f"{option}: {exc}", kind="invalid_option") from exc


def _guide(config: GRPOConfig, tokenizer: Any, world: World) -> tuple[Any, Any]:
    """The guide policy of ``config.guide`` and the renderer of its trials, or (None, None) without one."""
    guide = _policy_spec(config.guide, "guide")
    return (guide, guide_renderer(tokenizer, world, config.tool_prompt)) if guide is not None else (None, None)


def train_grpo(model: Any, tokenizer: Any, world: World, tasks: Sequence[Task], config: GRPOConfig, *,
               on_step: Callable[[GRPOStep], Any] | None = None, scorer: Scorer | None = None,
               limits: Limits | None = None, user: UserSimulator | None = None,
               engine: HFEngine | None = None, sampler: Callable[[Any, int], Any] | None = None,
               eval_tasks: Sequence[Task] | None = None, on_eval: Callable[[GRPOEval], Any] | None = None,
               eval_limits: Limits | None = None, sft: Sequence[Sample] | None = None) -> GRPOResult:  # fmt: skip
    """Train ``model`` in place with on-policy GRPO on ``tasks`` of ``world``; see the module docstring.

    ``tokenizer`` is the model's (saved with the final model). ``scorer`` replaces ``score_trajectory`` as the
    reward (a custom reward, or a stub in tests). ``engine`` is the :class:`HFEngine` that samples: by default one
    is built over ``model``; pass your own to watch it, but it must wrap this very model. ``on_step`` sees each
    step's :class:`GRPOStep`. ``sampler(model, step)`` (when given) returns the policy that samples step ``step``
    instead of ``engine``: the weight sync of a separate inference engine (e.g. export the weights to GGUF and
    open a llama.cpp policy on them, several times faster on a CPU). It must sample with the same weights and
    tokenizer; its logprobs are what truncated importance sampling weighs against the trainer's.
    ``eval_tasks`` (with ``config.eval_every``): tasks the run never trains on, played by the current weights before
    the first step, after every ``eval_every``-th and after the last (see ``eval_first``, ``eval_last``), by
    :func:`evaluate` with ``eval_limits`` (default ``limits``), the same ``user`` and the scorer's own verdict
    whatever ``config.reward`` is; ``on_eval`` sees each :class:`GRPOEval`, and ``result.evals`` holds them. A
    resumed run must evaluate the same tasks the same way as it did (else ``run_mismatch``). ``sft`` (with
    ``config.sft_coef``): conversations (``sft.sft_samples``, those the model was fine-tuned on) whose supervised loss
    each update mixes in, ``config.sft_batch`` of them a step. Ctrl-C (``KeyboardInterrupt``, also from ``on_step``) saves a checkpoint of the
    last finished step and returns ``interrupted=True``; run again with ``resume=True`` to continue (an evaluation
    cut short is made again). Raises :class:`GRPOError`.
    """
    import torch

    from ..rollout.engines.hf import sampling_engine, warn_unless_native_bf16
    from ..rollout.token_policy import TokenPolicy
    from ..tokens.tokenizers import load_tokenizer
    if config.bf16:
        warn_unless_native_bf16(next(model.parameters()).device.type, "GRPO's updates")
    tasks = one_world_tasks(tasks, world, error=GRPOError, what="train on")
    if bool(config.eval_every) != bool(eval_tasks):
        raise GRPOError("eval_every and eval_tasks go together: give both to evaluate during training, or neither",
                        kind="invalid_option")  # fmt: skip
    if bool(config.sft_coef or config.sft_floor) != bool(sft):
        raise GRPOError("sft_coef (or sft_floor) and sft go together: give both conversations (sft=) and a weight "
                        "(sft_coef > 0 or sft_floor > 0) to mix a supervised term into the updates, or neither",
                        kind="invalid_option")  # fmt: skip
    if eval_tasks:
        eval_tasks = one_world_tasks(eval_tasks, world, error=GRPOError, what="evaluate on")
        shared = sorted({t.id for t in eval_tasks} & {t.id for t in tasks})
        if shared:
            raise GRPOError(f"{len(shared)} evaluation task(s) are training tasks too (first: {shared[0]}): a "
                            "held-out pass rate needs tasks the run does not train on", kind="eval_overlap")  # fmt: skip
    config.out.mkdir(parents=True, exist_ok=True)
    if not config.resume and (latest_checkpoint(config.out) or any((config.out / f).exists() for f in _LOGS)):
        raise GRPOError(f"{config.out} already holds a training run: pass resume=True (--resume) to continue it, or "
                        "choose another output folder", kind="output_exists")  # fmt: skip
    tokenizer = load_tokenizer(tokenizer)
    torch.manual_seed(config.seed)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else (tokenizer.eos_token_id or 0)
    if engine is None:
        engine = sampling_engine(model, tokenizer, concurrency=config.concurrency)
    elif engine.model is not model:
        raise GRPOError("engine= must wrap the model being trained (HFEngine(model=model, ...)), or GRPO would "
                        "train on another policy's samples", kind="invalid_option")  # fmt: skip
    # with LoRA, peft puts the adapters inside ``model``'s own layers: the sampler, the update and the logprobs keep
    # using ``model``; saving, loading, switching off and merging the adapter go through ``peft``
    peft = wrap_lora(model, r=config.lora_r, alpha=config.lora_alpha, error=GRPOError) if config.lora else None
    saved = model if peft is None else peft  # what a checkpoint holds: the model, or the adapter alone
    model.eval()  # see the module docstring: no dropout, so pi and pi_old are one function
    ref_model: Any = None
    if config.kl_coef or config.sft_floor:  # the model as given, before any update (also when resuming)
        ref_model = AdapterOff(peft) if peft is not None else copy.deepcopy(model).eval().requires_grad_(False)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = make_optimizer(params, config)
    start = _resume(saved, optimizer, config) if config.resume else 0
    engine.reset_cache()
    policy = TokenPolicy(engine, tokenizer, name="grpo", max_tokens=config.max_tokens, temperature=config.temperature,
                         tool_prompt=config.tool_prompt)  # fmt: skip
    judge = scorer  # evaluations report the scorer's own reward, whatever the run trains on
    if config.reward == "success" or config.overlong_penalty:
        scorer = scorer or (lambda task, traj: score_trajectory(task, traj, world=world))
    if config.reward == "success":
        scorer = success_only(scorer)
    if config.overlong_penalty:
        scorer = penalize_overlong(scorer, config.overlong_penalty)
    guide, render = _guide(config, tokenizer, world)
    decode = functools.partial(tokenizer.decode, skip_special_tokens=False)  # blame_invented's value tokens
    lead = _policy_spec(config.branch, "branch")
    by_id = {t.id: t for t in tasks}
    result = GRPOResult(config.out, start, config.steps, resumed_from=start, evals=_read_evals(config.out))
    if result.evals and eval_tasks:  # gains are over the first evaluation: every later one must be its like
        was = result.evals[0]
        if (was.trials, was.temperature, was.tasks) != (config.eval_trials, config.eval_temperature, len(eval_tasks)) \
                or not set(was.per_task) <= {t.id for t in eval_tasks}:  # fmt: skip
            raise GRPOError(f"{config.out / EVAL_FILE} holds evaluations of {was.tasks} tasks, {was.trials} trial(s) "
                            f"each at temperature {was.temperature:g}: resume with the same evaluation tasks and "
                            "options, or train into a new --out", kind="run_mismatch")  # fmt: skip
    target = {t.id: target_of(t) for t in tasks}
    targets = sorted(set(target.values()))
    quota = math.ceil(config.min_groups / len(targets)) if config.balance else 0
    writer = _tensorboard(config)
    log = (config.out / LOG_FILE).open("a", encoding="utf-8")
    trials_log = (config.out / TRIALS_FILE).open("a", encoding="utf-8") if config.save_trials else None
    t_start = time.perf_counter()
    synced: list[Any] = []  # the policy an evaluation synced to the current weights, which the next step samples

    def evaluate_now(done: int) -> None:
        if done > start and not (result.checkpoint and result.checkpoint.name == f"checkpoint-{done}"):
            result.checkpoint = _save_checkpoint(saved, optimizer, done, config)  # a failed evaluation loses no step
        if sampler is not None:
            synced[:] = [sampler(model, done)]
        ev, pairs = evaluate(world, eval_tasks or (), synced[0] if synced else policy, config, step=done,
                             scorer=judge, limits=eval_limits or limits, user=user,
                             first=result.evals[0] if result.evals else None)  # fmt: skip
        if config.save_trials:
            with (config.out / EVAL_TRIALS_FILE).open("a", encoding="utf-8") as f:
                f.writelines(json.dumps(trial_record(done, traj, score)) + "\n" for traj, score in pairs)
        with (config.out / EVAL_FILE).open("a", encoding="utf-8") as f:  # last: its line says the evaluation is done
            f.write(json.dumps(ev.to_dict()) + "\n")
        result.evals.append(ev)
        if writer is not None:
            writer.add_scalar("eval/pass1", ev.pass1, done)
            writer.add_scalar("eval/reward", ev.reward, done)
        if on_eval is not None:
            on_eval(ev)

    def due(done: int) -> bool:  # is the policy after ``done`` steps one to evaluate?
        if not config.eval_every or (done == 0 and not config.eval_first):
            return False
        return config.eval_last if done == config.steps else done % config.eval_every == 0

    try:
        if due(start) and all(ev.step != start for ev in result.evals):  # the start, or one cut short by Ctrl-C
            trim_log(config.out / EVAL_TRIALS_FILE, start - 1)  # the trials a cut-short evaluation wrote
            evaluate_now(start)
        for step in range(start, config.steps):
            t0 = time.perf_counter()
            step_policy = synced.pop() if synced else sampler(model, step) if sampler is not None else policy
            same_prompt(step_policy, config.tool_prompt, GRPOError)
            same_temperature(step_policy, config.temperature)
            if eval_tasks and step == start:  # a policy that cannot decode greedily is refused now, not steps later
                at_temperature(step_policy, config.eval_temperature)
            pairs: list[tuple[Trajectory, Score]] = []
            guided: list[tuple[Trajectory, Score]] = []  # the guide's passing trials, one per group it joined
            taken: list[str] = []
            differ: list[str] = []  # groups with a reward spread, in draw order
            draws = 0
            for draw in range(config.max_draws if config.min_groups else 1):
                have = Counter(target[g] for g in differ)
                pool = [t for t in tasks if have[target[t.id]] < quota] if quota and draw else tasks
                chosen = pick_tasks(pool, config.tasks_per_step, config.seed, step, draw=draw, taken=taken)
                if not chosen:  # every task of the set is in this step already
                    break
                draws = draw + 1
                taken += [t.id for t in chosen]
                runner = step_policy
                if lead is not None:
                    runner = BranchPolicy(lead, step_policy, branch_depths(
                        world, chosen, lead, seed=config.seed, step=step, scorer=scorer,
                        concurrency=config.concurrency, limits=limits, user=user,
                        from_start=config.branch_from_start, at=config.branch_at))  # fmt: skip
                drawn = rollouts(world, chosen, runner, trials=config.group, scorer=scorer,
                                 salt=derive_seed(config.seed, step), concurrency=config.concurrency, limits=limits,
                                 user=user)  # fmt: skip
                pairs += drawn
                helped = guide_trials(world, [by_id[i] for i in _all_failed(drawn)], guide, number=config.group,
                                      scorer=scorer, concurrency=config.concurrency, limits=limits,
                                      user=user) if guide is not None else []  # fmt: skip
                guided += helped
                if trials_log is not None:  # per draw: a run stopped mid-step keeps what it sampled
                    trials_log.writelines(json.dumps(trial_record(step + 1, traj, score)) + "\n"
                                          for traj, score in drawn)  # fmt: skip
                    trials_log.writelines(json.dumps({**trial_record(step + 1, traj, score), "guide": True}) + "\n"
                                          for traj, score in helped)  # fmt: skip
                    trials_log.flush()
                spread = _spread_groups(samples_from_trajectories(pairs)) | {t.task_id for t, _ in guided}
                differ = [g for g in taken if g in spread]
                have = Counter(target[g] for g in differ)
                if all(have[t] >= quota for t in targets) if quota else len(differ) >= config.min_groups:
                    break
            t_sampled = time.perf_counter()
            samples, train_on, spread = advantaged([*pairs, *guided], config, render=render, step=step,
                                                   decode=decode)  # fmt: skip
            if quota:
                spread = set(_even([g for g in taken if g in spread], target, quota))
                train_on = [s for s in train_on if s.group in spread]
            scored = [score for traj, score in pairs if not (traj.failed_by_infra or score.infra_error)]
            stats: dict[str, float] = {}
            anchors = anchors_of(samples, {s.group for s in train_on}, config.kl_ties)
            if train_on:
                stats = update(model, ref_model, train_on, optimizer, params, config, pad_id,
                               sft=_sft_batch(sft or (), config, step), anchors=anchors)  # fmt: skip
                engine.reset_cache()
            took = time.perf_counter() - t0
            tokens = sum(sum(s.loss_mask) for s in samples if not s.meta.get("rendered"))
            entry = GRPOStep(
                step=step + 1, total_steps=config.steps,
                reward=statistics.fmean(s.reward for s in scored) if scored else 0.0,
                pass1=statistics.fmean(float(s.success) for s in scored) if scored else 0.0,
                trials=len(pairs), infra_errors=len(pairs) - len(scored), groups=len(spread),
                guided=len(guided), updated=bool(train_on),
                tasks=len(taken), draws=draws,
                loss=stats.get("loss"), sft_loss=stats.get("sft_loss"), sft_floor=stats.get("sft_floor"),
                sft_below=stats.get("sft_below"), kl=stats.get("kl"), clip_frac=stats.get("clip_frac"),
                anchored=len(anchors) if train_on else 0, kl_ties=stats.get("kl_ties"),
                logprob_gap=stats.get("logprob_gap"), grad_norm=stats.get("grad_norm"), tokens=tokens,
                tokens_per_s=tokens / max(took, 1e-9), seconds=took, sample_s=t_sampled - t0,
                update_s=time.perf_counter() - t_sampled,
                blamed=sum(s.meta.get("blamed_turns", 0) for s in train_on),
                **{k: int(stats.get(k, 0)) for k in ("update_whole", "update_run", "step_prefix")})  # fmt: skip
            result.log.append(entry)
            result.steps = step + 1
            log.write(json.dumps(entry.to_dict()) + "\n")
            log.flush()
            if writer is not None:
                for key, value in entry.to_dict().items():
                    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
                        writer.add_scalar(f"grpo/{key}", value, step + 1)
            if config.save_every and (step + 1) % config.save_every == 0 and step + 1 < config.steps:
                result.checkpoint = _save_checkpoint(saved, optimizer, step + 1, config)
            if on_step is not None:
                on_step(entry)
            if due(step + 1):
                evaluate_now(step + 1)
    except KeyboardInterrupt:
        result.interrupted = True
        engine.reset_cache()
        done = result.checkpoint is not None and result.checkpoint.name == f"checkpoint-{result.steps}"
        if result.steps > start and not done:
            result.checkpoint = _save_checkpoint(saved, optimizer, result.steps, config)
        result.wall_s = time.perf_counter() - t_start
        return result
    finally:
        log.close()
        if trials_log is not None:
            trials_log.close()
        if writer is not None:
            writer.close()
        if peft is not None and result.interrupted:  # the caller's model holds what was trained, adapter merged in
            peft.merge_and_unload()
    if not (result.checkpoint and result.checkpoint.name == f"checkpoint-{config.steps}"):  # an evaluation made it
        result.checkpoint = _save_checkpoint(saved, optimizer, config.steps, config)
    if peft is not None:
        peft.merge_and_unload()
    final = config.out / FINAL_DIR
    shutil.rmtree(final, ignore_errors=True)
    model.save_pretrained(final)
    tokenizer.save_pretrained(final)
    write_model_card(final, tool_prompt=config.tool_prompt)
    result.final = final
    result.wall_s = time.perf_counter() - t_start
    return result
