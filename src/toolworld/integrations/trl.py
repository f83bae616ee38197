"""TRL's ``GRPOTrainer`` on any toolworld world, through its ``rollout_func`` hook.

A toolworld episode is multi-turn: the agent calls tools, reads their results, asks the simulated user and waits
for a yes before it writes. TRL's own tool loop has no user turn, so the conduct checks of the scorer (identify
the customer first, confirm every write) could never pass there. Here the whole episode runs in toolworld
(``run_episode`` over ``ToolEnv``, sampling with ``HFEngine`` over the trainer's own weights) and TRL gets the
result token-exact::

    from trl import GRPOConfig
    from toolworld.integrations.trl import make_trainer

    trainer = make_trainer("retail", tasks, model, tokenizer, GRPOConfig(output_dir="out", num_generations=4))
    trainer.train()

What TRL receives per episode: the episode's ``TokenBuffer`` split at its first sampled token. ``prompt_ids``
is everything before it (system policy, tool schemas, the user's opening), ``completion_ids`` the rest of the
conversation, ``env_mask`` the buffer's loss mask over that rest (1 on sampled tokens, 0 on tool results and
user replies, so TRL trains only on what the model sampled) and ``logprobs`` the sampler's logprob of each
sampled token (0.0 on environment tokens). Nothing is re-tokenized. The scorer's verdict travels as the extra
fields ``toolworld_reward`` and ``toolworld_success``, which ``reward_function`` hands back to TRL.

How a prompt finds its task: TRL passes ``rollout_func`` the prompts only, never the other dataset columns. A
``task_dataset`` row's prompt is the task's instruction as one user message and its ``task`` column holds the
task's JSON, so the rollout indexes the trainer's datasets (and any ``tasks=`` given to it) by instruction.
``task_dataset`` therefore refuses two different tasks with the same instruction.

How many episodes: TRL's sampler repeats each prompt ``num_generations`` times in a row before the rollout sees
it, and TRL expects one completion per entry; the rollout runs one episode per entry. Should a TRL version hand
the prompts over unrepeated (its docstring says so), each is expanded ``num_generations`` times instead.

Needs the ``train`` and ``data`` extras (trl, datasets). Generation runs on the trainer's process with the
plain transformers model (DDP works; DeepSpeed ZeRO-3 gathers the weights for it as TRL's own generation does).
"""

from __future__ import annotations

import asyncio
import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

try:
    import datasets
    from trl import GRPOConfig, GRPOTrainer
    from trl.models import unwrap_model_for_generation
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError("toolworld.integrations.trl needs trl and datasets: pip install 'toolworld[train,data]'") from exc

from ..env import Limits, NoiseConfig, UserSimulator
from ..records.trajectory import Trajectory
from ..rollout.engines.hf import HFEngine
from ..rollout.loop import DEFAULT_LIMITS, run_episode
from ..rollout.token_policy import TokenPolicy
from ..scoring.model import Score
from ..scoring.verify import score_trajectory
from ..tasks.model import Task
from ..tokens.buffer import TokenBuffer
from ..world import World, get_world

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

__all__ = ["Episode", "ToolworldRollout", "make_trainer", "reward_function", "rollout_func", "task_dataset"]

#: Extra fields the rollout returns beside TRL's required ones; TRL forwards them to every reward function.
REWARD_FIELD = "toolworld_reward"
SUCCESS_FIELD = "toolworld_success"


def task_prompt(task: Task) -> list[dict[str, str]]:
    """The conversational prompt of a task's dataset row: its instruction as the user's one message."""
    return [{"role": "user", "content": task.instruction}]


def _prompt_key(prompt: Any) -> str:
    """The instruction a prompt carries: the last user message of a conversation, or a plain-text prompt."""
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, Sequence):
        for message in reversed(prompt):
            if isinstance(message, Mapping) and message.get("role") == "user":
                content = message.get("content")
                if isinstance(content, str):
                    return content
                if isinstance(content, Sequence):  # typed content blocks: the text parts, in order
                    return "".join(b.get("text", "") for b in content if isinstance(b, Mapping))
    raise ValueError(f"cannot read an instruction from prompt {str(prompt)[:120]!r}; build the dataset with "
                     "toolworld.integrations.trl.task_dataset")  # fmt: skip


def _index(tasks: Iterable[Task], into: dict[str, Task] | None = None) -> dict[str, Task]:
    """Tasks by instruction; two different tasks with one instruction are an error (a prompt could not pick)."""
    out = {} if into is None else into
    for task in tasks:
        seen = out.setdefault(task.instruction, task)
        if seen.id != task.id:
            raise ValueError(f"tasks {seen.id} and {task.id} share one instruction, so a prompt cannot tell them "
                             "apart; keep one of them (TRL passes the rollout prompts only)")  # fmt: skip
    return out


def task_dataset(tasks: Iterable[Task]) -> datasets.Dataset:
    """One row per task: ``prompt`` (the instruction as a user message, the column TRL requires) and ``task`` (the
    task as JSON, which the rollout reads back). Duplicate tasks (same id) are kept once.

    Raises ``ValueError`` for no tasks, or for two different tasks with the same instruction.
    """
    unique = list(_index(tasks).values())
    if not unique:
        raise ValueError("task_dataset needs at least one task")
    return datasets.Dataset.from_dict({"prompt": [task_prompt(t) for t in unique],
                                       "task": [t.to_json() for t in unique]})  # fmt: skip


def _dataset_tasks(dataset: Any) -> list[Task]:
    """The tasks in a ``task_dataset`` (or a dict of them, as ``eval_dataset`` may be); nothing for other data."""
    if dataset is None:
        return []
    if isinstance(dataset, Mapping):
        return [t for part in dataset.values() for t in _dataset_tasks(part)]
    names = getattr(dataset, "column_names", None) or []
    if "task" not in names or isinstance(dataset, datasets.IterableDataset):
        return []  # a stream cannot be indexed up front: pass tasks= to rollout_func
    return [Task.model_validate_json(text) for text in dataset["task"]]


@dataclass(slots=True)
class Episode:
    """One rollout of the latest batch: the trajectory, its score (None when it could not be scored) and what TRL
    received for it."""

    trajectory: Trajectory
    score: Score | None
    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float]
    env_mask: list[int]
    reward: float | None


def _split(trajectory: Trajectory, filler: int) -> tuple[list[int], list[int], list[float], list[int]] | None:
    """The buffer split at its first sampled token; None when the model sampled nothing (nothing to learn)."""
    if not trajectory.token_buffer:
        return None
    buffer = TokenBuffer.from_dict(trajectory.token_buffer)
    if 1 not in buffer.mask:
        return None
    first = buffer.mask.index(1)
    mask = buffer.mask[first:]
    logprobs = [float(lp) if m and lp is not None else 0.0 for lp, m in zip(buffer.logprobs[first:], mask, strict=True)]
    return buffer.ids[:first] or [filler], buffer.ids[first:], logprobs, mask


def _run(coro: Any) -> Any:
    """Run a coroutine to completion from synchronous code, also where this thread's event loop is running (a
    notebook): that loop cannot be re-entered, so the coroutine gets a fresh loop in a helper thread."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coro).result()


class ToolworldRollout:
    """A TRL ``rollout_func``: ``(prompts, trainer) -> dict``; build it with ``rollout_func``.

    ``episodes`` holds the latest batch's episodes in the order TRL received them (for logging or inspection).
    Trial numbers count up per task over the whole run (interleaved across processes), so every episode of a
    task samples with a fresh seed and the user simulator's seed differs too.
    """

    def __init__(self, world: World | str, *, tokenizer: PreTrainedTokenizerBase, max_tokens: int = 512,
                 temperature: float = 1.0, user: UserSimulator | None = None, limits: Limits | None = None,
                 noise: NoiseConfig | None = None, concurrency: int = 8, tasks: Iterable[Task] = (),
                 tool_format: str = "auto", template_kwargs: Mapping[str, Any] | None = None,
                 tool_prompt: str = "auto") -> None:  # fmt: skip
        self.world = get_world(world) if isinstance(world, str) else world
        self.tokenizer = tokenizer
        if max_tokens < 1:
            raise ValueError(f"max_tokens must be at least 1, got {max_tokens}")
        if temperature <= 0:
            # TRL's loss treats completions as samples of the policy; greedy decoding gives every generation of a
            # group the same episode, hence zero advantage and nothing to learn.
            raise ValueError(f"temperature must be > 0 for GRPO, got {temperature}")
        if concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, got {concurrency}")
        self.max_tokens, self.temperature = max_tokens, temperature
        self.user, self.limits, self.noise, self.concurrency = user, limits or DEFAULT_LIMITS, noise, concurrency
        self.tool_format, self.template_kwargs = tool_format, dict(template_kwargs or {})
        self.tool_prompt = tool_prompt
        self._given = _index(tasks)
        self._tasks: dict[str, Task] = dict(self._given)
        self._indexed: set[int] = set()
        self._trials: Counter[str] = Counter()
        self._engine: HFEngine | None = None
        self._policy: TokenPolicy | None = None
        self.episodes: list[Episode] = []

    # -- the pieces a call needs ---------------------------------------------------------------------------
    def _task_for(self, prompt: Any, trainer: Any) -> Task:
        key = _prompt_key(prompt)
        if key not in self._tasks:
            for dataset in (getattr(trainer, "train_dataset", None), getattr(trainer, "eval_dataset", None)):
                if dataset is not None and id(dataset) not in self._indexed:
                    _index(_dataset_tasks(dataset), self._tasks)
                    self._indexed.add(id(dataset))
        task = self._tasks.get(key)
        if task is None:
            raise ValueError(f"no task has the instruction {key[:120]!r}; build the trainer's dataset with "
                             "task_dataset(tasks) or pass tasks= to rollout_func")  # fmt: skip
        if task.world != self.world.name:
            raise ValueError(f"task {task.id} is for world {task.world!r}, but this rollout drives {self.world.name!r}")
        return task

    def _policy_for(self, model: Any, device: str) -> TokenPolicy:
        """One engine and policy per model object (the template probes run once per training run), its KV prefix
        cache dropped."""
        if self._engine is None or self._engine.model is not model:
            self._engine = HFEngine(model=model, tokenizer=self.tokenizer, device=device)
            self._policy = TokenPolicy(self._engine, name="trl", max_tokens=self.max_tokens,
                                       temperature=self.temperature, tool_format=self.tool_format,
                                       template_kwargs=self.template_kwargs, tool_prompt=self.tool_prompt)  # fmt: skip
        else:
            self._engine.model = model.to(device).eval()
        # The optimizer changed the weights since the last call: a KV prefix kept from then is stale.
        self._engine.reset_cache()
        assert self._policy is not None
        return self._policy

    @staticmethod
    def _expand(prompts: list[Any], group: int) -> list[Any]:
        """One entry per episode: TRL repeats each prompt ``group`` times in a row already; a list that is not
        made of such runs is taken as unrepeated and each prompt repeated here."""
        keys = [_prompt_key(p) for p in prompts]
        repeated = len(keys) % group == 0 and all(
            len(set(keys[i : i + group])) == 1 for i in range(0, len(keys), group)
        )
        return list(prompts) if repeated else [p for p in prompts for _ in range(group)]

    # -- the call ------------------------------------------------------------------------------------------
    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, list[Any]]:
        """Run one episode per (repeated) prompt and return TRL's rollout dict (see the module docstring)."""
        training = bool(getattr(trainer.model, "training", True))
        group = int(trainer.num_generations if training else trainer.num_generations_eval)
        entries = self._expand(prompts, max(group, 1))
        tasks = [self._task_for(p, trainer) for p in entries]
        accelerator = trainer.accelerator
        rank, world_size = int(accelerator.process_index), int(accelerator.num_processes)
        trials: list[int] = []
        for task in tasks:
            trials.append(self._trials[task.id] * world_size + rank)
            self._trials[task.id] += 1

        with unwrap_model_for_generation(
            trainer.model_wrapped, accelerator, gather_deepspeed3_params=trainer.args.ds3_gather_for_generation,
            gradient_checkpointing_kwargs=trainer.args.gradient_checkpointing_kwargs,
        ) as model:  # fmt: skip
            was_training = model.training
            try:
                policy = self._policy_for(model, str(accelerator.device))
                trajectories = _run(self._episodes(tasks, trials, policy))
            finally:
                model.train(was_training)  # the engine switched it to eval mode (no dropout while sampling)

        filler = _filler_id(getattr(trainer, "processing_class", None) or self.tokenizer)
        self.episodes = [self._episode(task, traj, filler) for task, traj in zip(tasks, trajectories, strict=True)]
        return {
            "prompt_ids": [e.prompt_ids for e in self.episodes],
            "completion_ids": [e.completion_ids for e in self.episodes],
            "logprobs": [e.logprobs for e in self.episodes],
            "env_mask": [e.env_mask for e in self.episodes],
            REWARD_FIELD: [e.reward for e in self.episodes],
            SUCCESS_FIELD: [bool(e.score and e.score.success) for e in self.episodes],
        }

    async def _episodes(self, tasks: list[Task], trials: list[int], policy: TokenPolicy) -> list[Trajectory]:
        """Every (task, trial) of the batch, ``concurrency`` at a time, in batch order."""
        gate = asyncio.Semaphore(self.concurrency)

        async def one(task: Task, trial: int) -> Trajectory:
            async with gate:
                return await run_episode(self.world, task, policy, trial=trial, limits=self.limits, user=self.user,
                                         noise=self.noise)  # fmt: skip

        return list(await asyncio.gather(*(one(t, k) for t, k in zip(tasks, trials, strict=True))))

    def _episode(self, task: Task, traj: Trajectory, filler: int) -> Episode:
        score = None if traj.failed_by_infra else score_trajectory(task, traj, world=self.world)
        parts = _split(traj, filler)
        if parts is None:
            # Nothing sampled: one environment token (mask 0) keeps TRL's tensors well formed, and no reward means
            # TRL leaves the row out of the group baseline instead of scoring it as a failure.
            ids = TokenBuffer.from_dict(traj.token_buffer).ids if traj.token_buffer else []
            return Episode(traj, score, ids or [filler], [filler], [0.0], [0], None)
        prompt_ids, completion_ids, logprobs, env_mask = parts
        reward = None if score is None or score.infra_error else float(score.reward)
        return Episode(traj, score, prompt_ids, completion_ids, logprobs, env_mask, reward)


def _filler_id(tokenizer: Any) -> int:
    for name in ("pad_token_id", "eos_token_id"):
        value = getattr(tokenizer, name, None)
        if isinstance(value, int):
            return value
    return 0


def rollout_func(world: World | str, *, tokenizer: PreTrainedTokenizerBase, max_tokens: int = 512,
                 temperature: float = 1.0, user: UserSimulator | None = None, limits: Limits | None = None,
                 noise: NoiseConfig | None = None, concurrency: int = 8, tasks: Iterable[Task] = (),
                 tool_format: str = "auto", template_kwargs: Mapping[str, Any] | None = None,
                 tool_prompt: str = "auto") -> ToolworldRollout:  # fmt: skip
    """A TRL ``rollout_func`` that plays whole toolworld episodes with the trainer's model.

    Args:
        world: the world (or its name) every task belongs to.
        tokenizer: the model's tokenizer; its chat template renders the conversation.
        max_tokens: tokens the model may sample per assistant turn (a turn cut there ends the episode).
        temperature: sampling temperature (> 0: a group of identical greedy episodes teaches nothing).
        user: the user simulator (default ``ScriptedUser``); limits, noise: as for ``run_episode``.
        concurrency: episodes in flight at once (generation itself is serialized on the one model).
        tasks: tasks to look prompts up in besides the trainer's datasets (needed for streamed datasets).
        tool_format, template_kwargs, tool_prompt: as for ``TokenPolicy``.
    """
    return ToolworldRollout(world, tokenizer=tokenizer, max_tokens=max_tokens, temperature=temperature, user=user,
                            limits=limits, noise=noise, concurrency=concurrency, tasks=tasks, tool_format=tool_format,
                            template_kwargs=template_kwargs, tool_prompt=tool_prompt)  # fmt: skip


def reward_function(prompts: list[Any], completions: list[Any], **kwargs: Any) -> list[float | None]:
    """TRL reward function: the scorer's reward that the rollout forwarded, None where it could not score.

    None (an episode that ended on an infra error, or sampled nothing) makes TRL leave the episode out of its
    group's baseline and give it zero advantage: a crashed backend says nothing about the agent. Logs the batch's
    success rate as ``toolworld/success`` when TRL offers ``log_metric``.
    """
    rewards = kwargs.get(REWARD_FIELD)
    if rewards is None:
        raise ValueError(f"reward_function needs the {REWARD_FIELD!r} field; pass rollout_func(...) as the "
                         "trainer's rollout_func (make_trainer does)")  # fmt: skip
    out = [None if r is None or (isinstance(r, float) and math.isnan(r)) else float(r) for r in rewards]
    log_metric: Callable[[str, float], None] | None = kwargs.get("log_metric")
    successes = kwargs.get(SUCCESS_FIELD)
    if log_metric is not None and successes:
        log_metric("toolworld/success", sum(bool(s) for s in successes) / len(successes))
    return out


def make_trainer(world: World | str, tasks: Iterable[Task], model: Any, tokenizer: PreTrainedTokenizerBase,
                 args: GRPOConfig, *, max_tokens: int = 512, temperature: float | None = None,
                 user: UserSimulator | None = None, limits: Limits | None = None, noise: NoiseConfig | None = None,
                 concurrency: int = 8, **trainer_kwargs: Any) -> GRPOTrainer:  # fmt: skip
    """A ``GRPOTrainer`` over ``tasks``: ``task_dataset`` as the train set, ``rollout_func`` for generation and
    ``reward_function`` as the reward (add more with ``reward_funcs=[reward_function, ...]``).

    ``temperature`` defaults to ``args.temperature``. Other keyword arguments go to ``GRPOTrainer`` (e.g.
    ``eval_dataset``, ``peft_config``, ``callbacks``).
    """
    task_list = list(tasks)
    rollout = rollout_func(world, tokenizer=tokenizer, max_tokens=max_tokens,
                           temperature=args.temperature if temperature is None else temperature, user=user,
                           limits=limits, noise=noise, concurrency=concurrency, tasks=task_list)  # fmt: skip
    trainer_kwargs.setdefault("reward_funcs", [reward_function])
    trainer_kwargs.setdefault("train_dataset", task_dataset(task_list))
    return GRPOTrainer(model=model, args=args, processing_class=tokenizer, rollout_func=rollout, **trainer_kwargs)
