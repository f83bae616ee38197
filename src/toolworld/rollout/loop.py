"""The rollout driver: a policy talks to a ``ToolEnv`` until the episode ends.

One episode (``run_episode``): ``ToolEnv.reset`` opens the world's episode, puts the world's policy text in the
system message and lets the user simulator open; then, until the env says done, the policy answers the whole
conversation so far (an ``InfraError`` is retried with backoff, then the episode ends as ``infra_error``: it says
nothing about the agent and must never be scored as reward 0) and ``ToolEnv.step`` applies the turn (tool calls
through ``Episode.call`` and its wrappers, the user's reply, limits). A wall-clock limit covers the whole episode.
Token-level sessions keep their ``TokenBuffer`` as they sampled it; the trajectory carries it.

Nothing the model sends, and no failure of a backend, escapes ``run_episode`` as an exception: every episode
ends in a ``Trajectory`` with a termination reason, so a long run never loses finished work. ``run_many`` runs
(task, trial) pairs concurrently under a semaphore and hands each trajectory to ``on_done`` as soon as it exists.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable, Collection, Iterable
from typing import TYPE_CHECKING, Any

from ..env.env import ToolEnv, as_infra
from ..env.limits import Limits
from ..env.noise import NoiseConfig
from ..env.user import UserSimulator
from ..records.trajectory import Trajectory
from .policy import AgentSession, Policy

if TYPE_CHECKING:
    from ..tasks.model import Task
    from ..world.world import World

__all__ = ["Limits", "OnDone", "run_episode", "run_many"]

DEFAULT_LIMITS = Limits()


async def run_episode(world: World, task: Task, policy: Policy, *, trial: int = 0, limits: Limits = DEFAULT_LIMITS,
                      user: UserSimulator | None = None, noise: NoiseConfig | None = None) -> Trajectory:  # fmt: skip
    """Run one episode of ``task`` with ``policy`` and return its trajectory (never raises for a bad turn).

    ``user`` defaults to a ``ScriptedUser``; ``noise`` injects environment faults seeded per (task, trial).
    Raises ``ValueError`` only when the task belongs to another world (a caller's mistake).
    """
    if task.world != world.name:
        raise ValueError(f"task {task.id} is for world {task.world!r}, not {world.name!r}")
    env = ToolEnv(world, user=user, limits=limits, noise=noise, score=False)
    session: AgentSession | None = None
    try:
        try:
            async with asyncio.timeout(limits.max_wall_s):
                obs = await env.reset(task, trial=trial)
                if not obs.done:
                    session = policy.start(tools=env.tools, task=task, seed=env.policy_seed)
                    await _drive(env, session)
        except TimeoutError:
            env.end("timeout")
        except Exception as exc:  # a crash of a backend's start() or of our own code: recorded, not raised
            env.record_infra(as_infra(exc), source="loop", attempt=0, fatal=True)
            env.end("infra_error")
        token_buffer = _buffer_dict(session, env)
    finally:
        if session is not None:
            try:
                await session.aclose()
            except Exception as exc:  # closing must not cost the finished trajectory
                env.record_infra(as_infra(exc), source="loop", attempt=0, fatal=False)
        await env.close()
    return env.trajectory(policy=policy.name, token_buffer=token_buffer)


async def _drive(env: ToolEnv, session: AgentSession) -> None:
    """Policy turns into ``env.step`` until the episode ends."""
    while not env.done:
        started = time.perf_counter()
        got = await env.with_retries(lambda: session.respond(env.messages), source="policy", turn=len(env.turns))
        if got is None:
            env.end("infra_error")
            return
        turn, attempts = got
        await env.advance(turn, latency_s=time.perf_counter() - started, attempts=attempts)


def _buffer_dict(session: Any, env: ToolEnv) -> dict[str, Any] | None:
    buffer = getattr(session, "buffer", None) if session is not None else None
    if buffer is None:
        return None
    try:
        return buffer.to_dict()
    except Exception as exc:  # a buffer that cannot serialise must not cost the rest of the trajectory
        env.infra_errors.append({**as_infra(exc).to_dict(), "source": "loop", "turn": None, "attempt": 0,
                                 "fatal": False})  # fmt: skip
        return None


OnDone = Callable[[Trajectory], Any]


async def run_many(world: World, tasks: Iterable[Task], policy: Policy, *, trials: int = 1, concurrency: int = 8,
                   limits: Limits = DEFAULT_LIMITS, user: UserSimulator | None = None, noise: NoiseConfig | None = None,
                   on_done: OnDone | None = None, skip: Collection[tuple[str, int]] = ()) -> list[Trajectory]:  # fmt: skip
    """Run every (task, trial) pair, at most ``concurrency`` at once; trajectories in (task, trial) order.

    ``on_done`` (sync or async) gets each trajectory the moment it finishes, e.g. to append it to a file, so
    a killed run keeps everything finished before. ``skip`` holds (task id, trial) pairs already done (resume).
    A failing ``on_done`` (a full disk) stops the run: continuing would produce work that cannot be kept.
    """
    if trials < 1 or concurrency < 1:
        raise ValueError("trials and concurrency must be at least 1")
    jobs = [(task, k) for task in tasks for k in range(trials) if (task.id, k) not in skip]
    gate = asyncio.Semaphore(concurrency)

    async def one(task: Task, trial: int) -> Trajectory:
        async with gate:
            traj = await run_episode(world, task, policy, trial=trial, limits=limits, user=user, noise=noise)
        if on_done is not None:
            out = on_done(traj)
            if inspect.isawaitable(out):
                await out
        return traj

    async with asyncio.TaskGroup() as group:
        running = [group.create_task(one(task, k)) for task, k in jobs]
    return [r.result() for r in running]
