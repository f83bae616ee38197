"""Gymnasium environments over ``ToolEnv``: ``gymnasium.make("toolworld/retail-v0", tasks="tasks.jsonl")``.

Importing this module registers ``toolworld/<world>-v0`` for every installed world (``register_envs``).
Gymnasium 1.x loads no plugins from entry points, so something must import it first: ``import
toolworld.integrations.gym``, or let ``make`` do it with its ``module:id`` form::

    env = gymnasium.make("toolworld.integrations.gym:toolworld/retail-v0", tasks="tasks.jsonl")
    obs, info = env.reset(seed=0)                 # a task drawn with the env's np_random
    history, tools = json.loads(obs), info["tools"]
    done = False
    while not done:
        turn = agent(history, tools)              # an OpenAI assistant message dict (step also takes raw text)
        obs, reward, terminated, truncated, info = env.step(turn)
        history += [turn, *json.loads(obs)]       # tool results or the user's reply
        done = terminated or truncated
    # reward: the episode's score (0.0 on every earlier step); info["score"] says why

Vector envs: ``gymnasium.make_vec(..., vectorization_mode="sync")`` works as is; with ``"async"`` pass
``vector_kwargs={"shared_memory": False}``, since Gymnasium's shared memory reads ``Text`` observations only
once, when the vector env is built.

Gymnasium is synchronous and ``ToolEnv`` is async: each ``ToolWorldEnv`` owns a private event loop and runs
every call to completion on it. Called from a thread whose own loop is running (a notebook cell, an async
trainer), it cannot block that loop's thread re-entrantly, so it runs its private loop in a helper thread and
waits; it is the same loop either way, so anything a user simulator bound to it (an HTTP client) stays valid.
Async code that can await should drive ``toolworld.env.ToolEnv`` directly instead.
"""

from __future__ import annotations

import asyncio
import copy
import json
import re
import time
import warnings
import weakref
from collections.abc import Coroutine, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from os import PathLike
from typing import Any, TypeVar

try:
    import gymnasium
    from gymnasium import spaces
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError("toolworld.integrations.gym needs Gymnasium: pip install 'toolworld[gym]'") from exc

from ..env import Limits, NoiseConfig, StepResult, ToolEnv, UserSimulator
from ..records.messages import AssistantTurn, Message
from ..records.trajectory import Trajectory
from ..tasks.model import Task, TaskSet
from ..world import World, get_world, list_worlds

T = TypeVar("T")

#: Observations are JSON written with ``ensure_ascii``: printable ASCII only (every other character, newlines
#: and lone surrogates included, is a ``\\u`` escape), so ``observation_space.contains`` holds for any text a
#: tool or user produces, and the charset stays small enough for Gymnasium to sample from and flatten.
OBSERVATION_CHARSET: frozenset[str] = frozenset(chr(c) for c in range(0x20, 0x7F))
#: Longest observation in characters (the observation space's ``max_length``). A step's new messages are
#: bounded by the tool observation limit (``Limits.max_observation_chars``) times the calls in the turn, far
#: below this in practice; a larger one keeps its JSON shape with contents cut (``encode_messages``). It is not
#: larger because Gymnasium's flattening and shared memory cost ``max_length`` per observation.
MAX_OBSERVATION_CHARS = 1 << 20
#: What ``action_space.sample()`` draws from: printable ASCII and newlines (any text is accepted by ``step``).
ACTION_CHARSET: frozenset[str] = frozenset(OBSERVATION_CHARSET | {"\n"})
#: Longest text action ``action_space.contains`` admits; ``step`` itself takes any length.
MAX_ACTION_CHARS = 1 << 16
_ENV_NAME = re.compile(r"^[\w.-]+$")  # what Gymnasium accepts as the name part of an id


def env_id(world: str) -> str:
    """The Gymnasium id of a world's environment: ``toolworld/<world>-v0``."""
    return f"toolworld/{world}-v0"


class AssistantActionSpace(spaces.Text):
    """Actions: what a model wrote, as text (any Unicode; tool calls in it are parsed), an OpenAI assistant
    message dict (``content`` and ``tool_calls``), or an ``AssistantTurn``.

    It is a ``Text`` space so that Gymnasium's samplers, checkers and vector wrappers handle it; ``sample()``
    draws printable ASCII text (a babbling agent), while ``contains`` admits everything ``step`` accepts, up to
    ``max_length`` characters of text.
    """

    def contains(self, x: Any) -> bool:
        if isinstance(x, str):
            return self.min_length <= len(x) <= self.max_length
        if isinstance(x, AssistantTurn):
            return True
        if isinstance(x, Mapping):
            calls = x.get("tool_calls")
            content = x.get("content")
            return (x.get("role", "assistant") == "assistant" and (content is None or isinstance(content, str))
                    and (calls is None or (isinstance(calls, list) and all(isinstance(c, Mapping) for c in calls))))  # fmt: skip
        return False

    def __repr__(self) -> str:
        return f"AssistantActionSpace(max_length={self.max_length})"


def encode_messages(messages: list[Message], limit: int = MAX_OBSERVATION_CHARS) -> str:
    """Messages as one line of ASCII JSON, at most ``limit`` characters.

    Over the limit (hundreds of long tool results in one turn), message contents are cut, saying so, rather
    than the JSON itself, so the observation always parses; the full messages are in ``info["messages"]``.
    """
    text = json.dumps(messages, ensure_ascii=True, default=str)
    budget = limit // max(1, len(messages))
    while len(text) > limit and budget > 0:
        budget //= 2
        cut = []
        for msg in messages:
            content = msg.get("content")
            if isinstance(content, str) and len(content) > budget:
                msg = {**msg, "content": f"{content[:budget]}... [cut: {len(content) - budget} more characters; "
                                         "the full message is in info['messages']]"}  # fmt: skip
            cut.append(msg)
        text = json.dumps(cut, ensure_ascii=True, default=str)
    if len(text) > limit:  # so many messages that even their cut forms do not fit: say so instead
        text = json.dumps([{"role": "system", "content": f"{len(messages)} messages did not fit the observation; "
                            "read them from info['messages']"}], ensure_ascii=True)[:limit]  # fmt: skip
    return text


def transcript(messages: list[Message]) -> str:
    """The conversation as plain text, one block per message (the ``ansi`` render)."""
    blocks = []
    for msg in messages:
        role = msg.get("role", "?")
        head = f"[{role}]" if role != "tool" else f"[tool {msg.get('tool_call_id', '')}]"
        body = msg.get("content") or ""
        for call in msg.get("tool_calls") or ():
            fn = call.get("function", {}) if isinstance(call, dict) else {}
            body += f"\n-> {fn.get('name', '?')}({fn.get('arguments', '')})"
        blocks.append(f"{head} {body.strip()}")
    return "\n".join(blocks) + "\n"


class ToolWorldEnv(gymnasium.Env[str, "str | Message | AssistantTurn"]):
    """A toolworld world as a Gymnasium environment: one task per episode, one assistant turn per step.

    Observations (``Text`` over printable ASCII): JSON lists of OpenAI-style messages. ``reset`` observes the
    conversation so far (the system message with the world's policy and the user's opening request); each
    ``step`` observes what the environment added after the action: the ``tool`` messages answering its calls,
    or the user's reply (an empty list ``[]`` when the user ended the conversation). An agent appends them
    to its own history. The env's copy of the whole conversation is ``info["messages"]`` (it has any call ids
    the env had to assign: a call without an id, or reusing one, is renamed, and the tool message answers the
    new id); the tools (OpenAI function-tool format) are ``info["tools"]`` after ``reset``.

    Actions (``AssistantActionSpace``): the model's turn as text (tool calls in any dialect
    ``toolworld.tokens.dialects.parse_tool_calls`` reads), an OpenAI assistant message dict, or an
    ``AssistantTurn`` (token-level drivers keep their sampled ids in it). A malformed tool call is the model's
    mistake and comes back as an error observation. Anything else (a number, a user message) is the driver's
    mistake and raises ``toolworld.env.EnvError`` (kind ``bad_action``) before the episode changes.

    Rewards: 0.0 on every step but the last; the last gives the episode's score in [0, 1] (1.0 only when every
    component passed; ``info["score"]`` says which did not and why, ``info["components"]`` has pass/fail by
    name). An episode that ended on an infrastructure failure (a user simulator that stayed down, a crash of
    the world or the scorer) says nothing about the agent: it ends ``truncated`` (never ``terminated``), with
    reward 0.0, ``info["infra_error"]`` True and the failures in ``info["infra_errors"]``. Trainers must drop
    such episodes rather than learn from their 0.0.

    ``terminated`` means the conversation ended (the user was answered or gave up, too many tool errors in a
    row); ``truncated`` means a limit cut it (``max_turns``, ``max_tokens``, ``timeout``) or an infra error.
    ``info["termination"]`` names the reason.

    Args:
        world: a ``World`` or an installed world's name (``gymnasium.make`` passes the one in the id).
        tasks: a task file (JSONL), a ``TaskSet``, or Tasks (or task dicts); ``reset`` draws from them. Without
            tasks, every ``reset`` needs ``options={"task": ...}``.
        user: the user simulator (default ``ScriptedUser``).
        limits: episode limits; ``max_turns`` overrides its ``max_turns``.
        noise: injected tool faults, seeded per (task, trial).
        render_mode: None or ``"ansi"`` (``render()`` returns the conversation as text).
        max_observation_chars: the observation space's ``max_length``.
    """

    # Gymnasium's checkers ask for a frame rate whenever a render mode exists; a transcript has none, so one
    # frame per second is only there to satisfy them.
    metadata = {"render_modes": ["ansi"], "render_fps": 1}  # noqa: RUF012 - Gymnasium's own class attribute

    def __init__(self, world: World | str, tasks: str | PathLike[str] | TaskSet | Iterable[Task | Mapping[str, Any]] | None = None,
                 *, user: UserSimulator | None = None, limits: Limits | None = None, max_turns: int | None = None,
                 noise: NoiseConfig | None = None, render_mode: str | None = None,
                 max_observation_chars: int = MAX_OBSERVATION_CHARS) -> None:  # fmt: skip
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be None or one of {self.metadata['render_modes']}, got {render_mode!r}")
        if max_observation_chars < 1_000:  # below this not even a cut observation of a few messages fits
            raise ValueError(f"max_observation_chars must be at least 1000, got {max_observation_chars}")
        self.world = world if isinstance(world, World) else get_world(world)
        self.tasks: list[Task] = load_tasks(tasks, self.world.name)
        self._by_id = {t.id: t for t in self.tasks}
        limits = limits if limits is not None else Limits()
        self.limits = replace(limits, max_turns=max_turns) if max_turns is not None else limits
        self.render_mode = render_mode
        self.observation_space = spaces.Text(max_observation_chars, min_length=0, charset=OBSERVATION_CHARSET)
        self.action_space = AssistantActionSpace(MAX_ACTION_CHARS, min_length=0, charset=ACTION_CHARSET)
        self.tool_env = ToolEnv(self.world, user=user, limits=self.limits, noise=noise, score=True)
        self._loop: asyncio.AbstractEventLoop | None = None  # made on first use: a never-used env holds none
        self._helper: ThreadPoolExecutor | None = None
        self._closed = False
        self._started = False
        self._over = False  # the end of the episode has been returned by step()
        self._observed_at = 0.0  # when the last observation was handed out

    # -- Gymnasium API --------------------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """Start an episode. ``options``: ``task`` (a Task, a task id from ``tasks``, or a task dict) and
        ``trial`` (default 0: it seeds the user simulator and the noise). Without a task option, the task is
        drawn from ``tasks`` with ``np_random``, so ``reset(seed=s)`` always starts the same episode."""
        super().reset(seed=seed)
        options = dict(options or {})
        unknown = sorted(set(options) - {"task", "trial"})
        if unknown:
            raise ValueError(f"unknown reset option(s) {', '.join(map(repr, unknown))}; "
                             "the options are 'task' and 'trial'")  # fmt: skip
        task = self._pick_task(options.get("task"))
        trial = options.get("trial", 0)
        if isinstance(trial, bool) or not isinstance(trial, int) or trial < 0:
            raise ValueError(f"options['trial'] must be an integer >= 0, got {trial!r}")
        obs = self._run(self.tool_env.reset(task, trial=trial))
        self._started, self._over = True, False
        info: dict[str, Any] = {
            "task_id": task.id, "trial": trial, "world": self.world.name, "kind": task.kind,
            "messages": copy.deepcopy(obs.messages), "tools": copy.deepcopy(obs.tools),
            "termination": self.tool_env.termination,
        }  # fmt: skip
        text = encode_messages(obs.messages, self.observation_space.max_length)
        self._observed_at = time.perf_counter()
        return text, info

    def step(self, action: str | Message | AssistantTurn) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Apply one assistant turn; see the class docstring for what comes back."""
        self._check_open()
        if not self._started:
            raise gymnasium.error.ResetNeeded("call reset() before step()")
        if self._over:
            raise gymnasium.error.ResetNeeded("the episode is over; call reset() to start another")
        env = self.tool_env
        # The agent's time to answer is the time since it was handed the last observation; a turn that carries
        # its own measure (an AssistantTurn from a backend) keeps that.
        latency = None if isinstance(action, AssistantTurn) else time.perf_counter() - self._observed_at
        # An episode that ended inside reset (the world or the user simulator failed to start) ends here.
        result = env.result() if env.done else self._run(env.step(action, latency_s=latency))
        return self._transition(result)

    def render(self) -> str | None:
        """The conversation so far as text (``render_mode="ansi"``); None without a render mode."""
        if self.render_mode is None:
            return None
        return transcript(self.tool_env.messages)

    def close(self) -> None:
        """Close the episode and the private event loop; safe to call more than once."""
        if self._closed:
            return
        self._closed = True
        if self._loop is None:  # never reset: there is no episode and no loop
            return
        try:
            self._run(self.tool_env.close(), closing=True)
            self._run(self._loop.shutdown_asyncgens(), closing=True)
        finally:
            self._loop.close()
            if self._helper is not None:
                self._helper.shutdown(wait=True)

    # -- more than Gymnasium asks for -----------------------------------------------------------------------
    @property
    def task(self) -> Task | None:
        """The task of the current episode."""
        return self.tool_env.task

    def trajectory(self, *, policy: str = "gym") -> Trajectory:
        """The current episode as a ``Trajectory`` (to store, score again or export), ``policy`` naming the agent."""
        return self.tool_env.trajectory(policy=policy)

    # -- internals ------------------------------------------------------------------------------------------
    def _transition(self, result: StepResult) -> tuple[str, float, bool, bool, dict[str, Any]]:
        env = self.tool_env
        infra = result.termination == "infra_error"
        terminated = result.terminated and not infra
        truncated = result.truncated or infra
        reward = float(result.reward) if result.done and result.reward is not None else 0.0
        info: dict[str, Any] = copy.deepcopy(result.info)
        info.update({"messages": copy.deepcopy(env.messages), "turn": len(env.turns),
                     "termination": result.termination, "infra_error": infra})  # fmt: skip
        if result.done:
            self._over = True
            if infra:  # no verdict on the agent: leave out anything a trainer could mistake for one
                for key in ("score", "success", "components"):
                    info.pop(key, None)
                info["infra_errors"] = copy.deepcopy(env.infra_errors)
            elif result.score is not None:
                info["score"] = result.score.model_dump(mode="json")
                info["success"] = result.score.success
        obs = encode_messages(result.new_messages, self.observation_space.max_length)
        self._observed_at = time.perf_counter()
        return obs, reward, terminated, truncated, info

    def _pick_task(self, choice: Any) -> Task:
        if choice is None:
            if not self.tasks:
                raise ValueError("no task to run: pass tasks= when making the env, or reset(options={'task': ...})")
            return self.tasks[int(self.np_random.integers(len(self.tasks)))]
        if isinstance(choice, Task):
            task = choice
        elif isinstance(choice, str):
            if choice not in self._by_id:
                raise ValueError(f"no task with id {choice!r} among the env's {len(self.tasks)} tasks; pass the Task "
                                 "itself (or its dict) to run a task that is not in tasks=")  # fmt: skip
            task = self._by_id[choice]
        elif isinstance(choice, Mapping):
            task = _task_from_dict(choice)
        else:
            raise TypeError(f"options['task'] must be a Task, a task id or a task dict, got {type(choice).__name__}")
        if task.world != self.world.name:
            raise ValueError(f"task {task.id} is for world {task.world!r}; this env runs {self.world.name!r} "
                             f"(make {env_id(task.world)!r} for it)")  # fmt: skip
        return task

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("this env is closed; make a new one")

    def _run(self, coro: Coroutine[Any, Any, T], *, closing: bool = False) -> T:
        """Run ``coro`` to completion on the env's private loop (in a helper thread when this thread's own loop
        is running, since a running loop cannot be re-entered from its own thread)."""
        if not closing:
            try:
                self._check_open()
            except RuntimeError:
                coro.close()  # never started: close it so it is not reported as never awaited
                raise
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.new_event_loop()
            # An env dropped without close() (as Gymnasium's own checkers do with the copies they make) must not
            # leak the loop's selector: close it when the env is collected.
            weakref.finalize(self, loop.close)
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return loop.run_until_complete(coro)
        if self._helper is None:
            self._helper = ThreadPoolExecutor(max_workers=1, thread_name_prefix="toolworld-gym")
        return self._helper.submit(loop.run_until_complete, coro).result()


def _task_from_dict(data: Mapping[str, Any]) -> Task:
    from pydantic import ValidationError

    try:
        return Task.model_validate(dict(data))
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or '(task)'}: {e['msg']}" for e in exc.errors()[:3])
        raise ValueError(f"not a valid task ({problems})") from None


def load_tasks(tasks: str | PathLike[str] | TaskSet | Iterable[Task | Mapping[str, Any]] | None,
               world: str) -> list[Task]:  # fmt: skip
    """The env's tasks from a JSONL file, a ``TaskSet`` or an iterable of Tasks or task dicts, all of ``world``.

    A file whose lines all fail to read, or an empty one, is an error; some bad lines only warn (the rest run),
    as everywhere task files are read.
    """
    if tasks is None:
        return []
    if isinstance(tasks, str | PathLike):
        taskset = TaskSet.load(tasks)
        if taskset.errors:
            listed = "; ".join(str(e) for e in taskset.errors[:3])
            if not taskset.tasks:
                raise ValueError(f"no task could be read from {tasks}: {listed}")
            warnings.warn(f"{tasks}: {len(taskset.errors)} line(s) skipped: {listed}", stacklevel=3)
        if not taskset.tasks:
            raise ValueError(f"{tasks} holds no tasks; make some with `toolworld tasks generate {world} -o FILE`")
        out = list(taskset.tasks)
    elif isinstance(tasks, TaskSet):
        out = list(tasks.tasks)
    elif isinstance(tasks, Task | Mapping):
        raise TypeError("tasks= takes a file, a TaskSet or a list of tasks; wrap a single task in a list")
    else:
        out = [t if isinstance(t, Task) else _task_from_dict(t) for t in tasks]
    wrong = [t for t in out if t.world != world]
    if wrong:
        raise ValueError(f"{len(wrong)} of {len(out)} tasks are not for world {world!r} (task {wrong[0].id} is for "
                         f"{wrong[0].world!r}); give each world's env its own tasks")  # fmt: skip
    return out


def register_envs(worlds: Iterable[str] | None = None) -> list[str]:
    """Register ``toolworld/<world>-v0`` for ``worlds`` (default: every installed world) and return the ids.

    Idempotent: an id already registered is left as it is. Call it again after installing a world at run time.
    """
    names = [w.name for w in list_worlds()] if worlds is None else list(worlds)
    ids = []
    for name in names:
        if not _ENV_NAME.match(name):
            warnings.warn(f"world {name!r} has no Gymnasium id: its name has characters an env id cannot hold",
                          stacklevel=2)  # fmt: skip
            continue
        eid = env_id(name)
        if eid not in gymnasium.registry:
            gymnasium.register(id=eid, entry_point=f"{__name__}:ToolWorldEnv", kwargs={"world": name})
        ids.append(eid)
    return ids


ENV_IDS: list[str] = register_envs()

__all__ = ["ENV_IDS", "AssistantActionSpace", "ToolWorldEnv", "encode_messages", "env_id", "load_tasks",
           "register_envs", "transcript"]  # fmt: skip
