"""The async episode loop: a policy, a user simulator and a fresh episode talk until one of them stops.

One episode, top to bottom (``run_episode``):

1. open ``world.episode(task.seed)``; the system message is the world's policy text; the user opens;
2. the policy answers (an ``InfraError`` is retried with exponential backoff, then the episode ends as
   ``infra_error``: it says nothing about the agent and must never be scored as reward 0);
3. each tool call runs through ``Episode.call`` (which never raises), optionally through injected noise; the
   observation goes back as a ``tool`` message with the call's ``tool_call_id``; a malformed call is the
   agent's error and only costs it an error observation, but too many in a row end the episode (``error_cap``);
4. an answer without a tool call goes to the user simulator, which replies or ends the episode;
5. limits on turns, tokens and wall time end it otherwise; the trajectory keeps the final change-set and
   state hash, and the episode is closed whatever happened.

Nothing the model sends, and no failure of a backend, escapes ``run_episode`` as an exception: every
episode ends in a ``Trajectory`` with a termination reason, so a long run never loses finished work.
``run_many`` runs (task, trial) pairs concurrently under a semaphore and hands each trajectory to
``on_done`` as soon as it exists.

Tool calls are synchronous SQLite work of tens of microseconds, cheap enough to run on the event loop.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import time
from collections.abc import Awaitable, Callable, Collection, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

from ..core.seeds import derive_seed
from ..env.noise import UNAVAILABLE_TYPE, NoiseConfig, NoiseInjector, unavailable_observation
from ..env.user import ScriptedUser, UserReply, UserSession, UserSimulator
from ..records.messages import AssistantTurn, Message
from ..records.trajectory import NoiseEvent, Step, Termination, Trajectory, TurnRecord, Usage
from ..tokens.dialects import malformed_result
from ..world.episode import Episode, ToolCall
from .policy import AgentSession, InfraError, Policy

if TYPE_CHECKING:
    from ..tasks.model import Task
    from ..world.world import World

T = TypeVar("T")
_ERROR_TEXT_LIMIT = 2_000  # error messages kept in step and error records (the observation keeps more)


@dataclass(frozen=True, slots=True)
class Limits:
    """Per-episode limits.

    Args:
        max_turns: assistant turns before the episode ends as ``max_turns``.
        max_tokens: conversation length in tokens (prompt + completion of the latest turn, as the backend
            reports it) at which the episode ends as ``max_tokens``; None for no limit. A turn cut by the
            backend's own length limit (``finish_reason == "length"``) also ends it so.
        max_wall_s: wall-clock seconds for the whole episode (``timeout``); None for no limit.
        max_consecutive_errors: agent tool errors in a row that end the episode (``error_cap``).
        infra_retries: retries of a failed policy or user-simulator turn before ``infra_error``.
        infra_backoff_s: first retry delay; doubles each retry.
        max_observation_chars: longest tool observation shown to the model (longer ones are cut, saying so);
            it keeps a 1 MB echo of a bad argument from flooding the context.
    """

    max_turns: int = 30
    max_tokens: int | None = None
    max_wall_s: float | None = 600.0
    max_consecutive_errors: int = 5
    infra_retries: int = 2
    infra_backoff_s: float = 1.0
    max_observation_chars: int = 20_000

    def __post_init__(self) -> None:
        if self.max_turns < 1:
            raise ValueError("max_turns must be at least 1")
        if self.max_consecutive_errors < 1:
            raise ValueError("max_consecutive_errors must be at least 1")
        if self.infra_retries < 0 or self.infra_backoff_s < 0:
            raise ValueError("infra_retries and infra_backoff_s must be >= 0")
        if self.max_observation_chars < 100:
            raise ValueError("max_observation_chars must be at least 100")


_TOOLS_CACHE: dict[int, tuple[Any, list[dict[str, Any]]]] = {}


def _openai_tools(world: World) -> list[dict[str, Any]]:
    """The world's tool list, built once per world object (it is the same for every episode)."""
    hit = _TOOLS_CACHE.get(id(world))
    if hit is None or hit[0] is not world:
        hit = (world, world.openai_tools())
        _TOOLS_CACHE[id(world)] = hit
    return hit[1]


async def run_episode(world: World, task: Task, policy: Policy, *, trial: int = 0, limits: Limits = Limits(),
                      user: UserSimulator | None = None, noise: NoiseConfig | None = None) -> Trajectory:  # fmt: skip
    """Run one episode of ``task`` with ``policy`` and return its trajectory (never raises for a bad turn).

    ``user`` defaults to a ``ScriptedUser``; ``noise`` injects environment faults seeded per (task, trial).
    Raises ``ValueError`` only when the task belongs to another world (a caller's mistake).
    """
    if task.world != world.name:
        raise ValueError(f"task {task.id} is for world {task.world!r}, not {world.name!r}")
    return await _EpisodeRun(world, task, policy, trial, limits, user or ScriptedUser(), noise).run()


class _EpisodeRun:
    """The state of one running episode (kept out of ``run_episode`` so each phase reads as one method)."""

    def __init__(self, world: World, task: Task, policy: Policy, trial: int, limits: Limits,
                 user: UserSimulator, noise: NoiseConfig | None) -> None:  # fmt: skip
        self.world, self.task, self.policy, self.trial, self.limits, self.user = world, task, policy, trial, limits, user
        self.policy_seed = derive_seed(task.id, trial)
        self.injector = NoiseInjector(noise, task.id, trial) if noise is not None and noise.active else None
        self.messages: list[Message] = [{"role": "system", "content": world.policy}]
        self.steps: list[Step] = []
        self.turns: list[TurnRecord] = []
        self.agent_errors: list[dict[str, Any]] = []
        self.infra_errors: list[dict[str, Any]] = []
        self.noise_events: list[NoiseEvent] = []
        self.perturbations: list[dict[str, Any]] = []
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.consecutive_errors = 0
        self.call_ids: set[str] = set()

    async def run(self) -> Trajectory:
        started_at = datetime.now(UTC).isoformat(timespec="milliseconds")
        t0 = time.perf_counter()
        try:
            ep = self.world.episode(self.task.seed)
        except Exception as exc:  # the world could not even start (a broken seed image): ours, not the agent's
            self._infra(_as_infra(exc), source="world", attempt=0, fatal=True)
            return self._trajectory("infra_error", None, {}, "", started_at, t0)
        session: AgentSession | None = None
        user_session: UserSession | None = None
        termination: Termination = "infra_error"
        token_buffer: dict[str, Any] | None = None
        try:
            try:
                async with asyncio.timeout(self.limits.max_wall_s):
                    session = self.policy.start(tools=_openai_tools(self.world), task=self.task, seed=self.policy_seed)
                    user_session = self.user.start(self.task, seed=self.policy_seed)
                    termination = await self._converse(ep, session, user_session)
            except TimeoutError:
                termination = "timeout"
            except Exception as exc:  # a crash of a backend's start() or of our own code: recorded, not raised
                self._infra(_as_infra(exc), source="loop", attempt=0, fatal=True)
                termination = "infra_error"
            token_buffer = _buffer_dict(session, self.infra_errors)
            changes = ep.changes().to_dict()
            state_hash = ep.state_hash()
        finally:
            for s in (session, user_session):
                if s is not None:
                    try:
                        await s.aclose()
                    except Exception as exc:  # closing must not cost the finished trajectory
                        self._infra(_as_infra(exc), source="loop", attempt=0, fatal=False)
            ep.close()
        return self._trajectory(termination, token_buffer, changes, state_hash, started_at, t0)

    def _trajectory(self, termination: Termination, token_buffer: dict[str, Any] | None, changes: dict[str, Any],
                    state_hash: str, started_at: str, t0: float) -> Trajectory:  # fmt: skip
        return Trajectory(
            task_id=self.task.id, world=self.world.name, seed=self.task.seed, trial=self.trial,
            policy=self.policy.name, user=self.user.name, policy_seed=self.policy_seed, messages=self.messages,
            steps=self.steps, turns=self.turns, token_buffer=token_buffer,
            usage=Usage(prompt_tokens=self.prompt_tokens, completion_tokens=self.completion_tokens),
            agent_errors=self.agent_errors, infra_errors=self.infra_errors, noise_events=self.noise_events,
            perturbations=self.perturbations, termination=termination, changes=changes, state_hash=state_hash,
            started_at=started_at, wall_s=time.perf_counter() - t0,
        )  # fmt: skip

    # -- the conversation -----------------------------------------------------------------------------------
    async def _converse(self, ep: Episode, session: AgentSession, user_session: UserSession) -> Termination:
        reply = await self._user_turn(user_session)
        if reply is None:
            return "infra_error"
        if reply.done:
            return reply.reason or "user_stop"
        self.messages.append({"role": "user", "content": reply.content})
        while True:
            if len(self.turns) >= self.limits.max_turns:
                return "max_turns"
            turn = await self._agent_turn(session)
            if turn is None:
                return "infra_error"
            if turn.finish_reason == "length":  # cut mid-turn: its tool calls may be partial, do not run them
                return "max_tokens"
            if turn.tool_calls:
                for call in turn.tool_calls:
                    await self._run_call(ep, call)
                if self.consecutive_errors >= self.limits.max_consecutive_errors:
                    return "error_cap"
                if self._over_tokens(turn):
                    return "max_tokens"
                continue
            reply = await self._user_turn(user_session)
            if reply is None:
                return "infra_error"
            if reply.done:
                return reply.reason or "user_stop"
            if self._over_tokens(turn):
                return "max_tokens"
            self.messages.append({"role": "user", "content": reply.content})

    async def _agent_turn(self, session: AgentSession) -> AssistantTurn | None:
        index = len(self.turns)
        started = time.perf_counter()
        got = await self._with_retries(lambda: session.respond(self.messages), source="policy", turn=index)
        if got is None:
            return None
        turn, attempts = got
        renamed = self._unique_call_ids(turn, index)
        self.messages.append(turn.to_message())
        self.prompt_tokens += turn.prompt_tokens
        self.completion_tokens += turn.completion_tokens
        # Whatever a backend reports goes into a JSON line later: make it plain JSON now, so an odd value (a
        # numpy float) cannot fail the write of a finished trajectory.
        meta = json.loads(json.dumps(turn.meta, default=str)) if isinstance(turn.meta, dict) and turn.meta else {}
        if renamed:
            meta["renamed_call_ids"] = renamed
        if turn.token_ids is not None and not turn.token_ids:  # a token-level turn that recorded nothing sampled
            meta["no_sampled_ids"] = True
        for note in meta.get("perturbations", ()):
            self.perturbations.append({**note, "turn": index})
        self.turns.append(TurnRecord(
            index=index, latency_s=time.perf_counter() - started, attempts=attempts,
            prompt_tokens=turn.prompt_tokens, completion_tokens=turn.completion_tokens,
            finish_reason=turn.finish_reason, tool_calls=len(turn.tool_calls), meta=meta,
        ))  # fmt: skip
        return turn

    def _unique_call_ids(self, turn: AssistantTurn, index: int) -> dict[str, str]:
        """Give every call of ``turn`` an id no other call of the episode has; returns {new id: id the model gave}.

        Tool messages answer a call by ``tool_call_id``, so two calls sharing one (a model that writes "call_0"
        every turn) or a call without one would make the conversation ambiguous. A missing or reused id becomes
        ``call_{turn}_{i}`` (suffixed if even that is taken), the same way on every rerun; the token buffer keeps
        what was sampled, and the renames are recorded in the turn's meta.
        """
        renamed: dict[str, str] = {}
        calls = []
        for i, c in enumerate(turn.tool_calls):
            given = c.id if isinstance(c.id, str) else ("" if c.id is None else str(c.id))
            cid = given
            if not cid or cid in self.call_ids:
                cid, n = f"call_{index}_{i}", 1
                while cid in self.call_ids:
                    cid, n = f"call_{index}_{i}_{n}", n + 1
                if given:
                    renamed[cid] = given
            self.call_ids.add(cid)
            calls.append(c if cid == c.id else ToolCall(str(c.name), c.arguments, cid, c.problem))
        turn.tool_calls = calls
        return renamed

    async def _user_turn(self, user_session: UserSession) -> UserReply | None:
        got = await self._with_retries(lambda: user_session.respond(self.messages), source="user",
                                       turn=len(self.turns))  # fmt: skip
        return None if got is None else got[0]

    async def _with_retries(self, make: Callable[[], Awaitable[T]], *, source: str, turn: int) -> tuple[T, int] | None:
        """Await ``make()``, retrying infra failures with backoff; None once they are spent (recorded)."""
        retries = self.limits.infra_retries
        for attempt in range(retries + 1):
            try:
                return await make(), attempt + 1
            except Exception as exc:
                err = _as_infra(exc)
            fatal = not err.retryable or attempt == retries
            self._infra(err, source=source, attempt=attempt, fatal=fatal, turn=turn)
            if fatal:
                return None
            await asyncio.sleep(self.limits.infra_backoff_s * 2**attempt)
        return None  # pragma: no cover - the loop always returns

    # -- tools ----------------------------------------------------------------------------------------------
    async def _run_call(self, ep: Episode, call: ToolCall) -> None:
        index = len(self.steps)
        turn = len(self.turns) - 1
        name = call.name if isinstance(call.name, str) else str(call.name)
        arguments = call.arguments if isinstance(call.arguments, dict | str) else _as_text(call.arguments)
        # a call that could not be read never reaches the tool, so no tool fault can hide its diagnosis
        noise = self.injector.draw(index) if self.injector is not None and call.problem is None else None
        kinds: list[Any] = []
        started = time.perf_counter()
        if noise is not None and noise.latency_s > 0:
            await asyncio.sleep(noise.latency_s)
            kinds.append("latency")
            self.noise_events.append(NoiseEvent(kind="latency", turn=turn, step=index, tool=name,
                                                detail={"ms": round(noise.latency_s * 1000, 3)}))  # fmt: skip
        output: Any = None
        error: dict[str, Any] | None = None
        tool = self.world.tools.get(name)
        mutates = tool.mutates if tool is not None else False
        if noise is not None and noise.fail:
            content = unavailable_observation(name)
            error = {"type": UNAVAILABLE_TYPE, "message": f"{name} is temporarily unavailable (injected)"}
            kinds.append("tool_failure")
            self.noise_events.append(NoiseEvent(kind="tool_failure", turn=turn, step=index, tool=name))
        else:
            # A call the parser could not read is not run: the model gets the parser's diagnosis as its error.
            result = ep.call(name, arguments, call_id=call.id) if call.problem is None else malformed_result(call)
            content = result.content
            mutates = result.mutates
            if result.error is not None:
                error = _clip_error(result.error.to_dict())
                if result.error.is_infra:
                    self._infra(InfraError(result.error.message, retryable=False, kind="tool_internal_error"),
                                source="tool", attempt=0, fatal=False, turn=turn)  # fmt: skip
                else:
                    self.consecutive_errors += 1
                    self.agent_errors.append({"turn": turn, "step": index, "tool": name, **error})
            else:
                # The parsed observation, not the tool's object: JSON-plain (tuples become lists), so the step
                # equals itself after a to_json/from_json round trip, and later mutation cannot reach it.
                output = result.output if isinstance(result.output, str) else json.loads(content)
                self.consecutive_errors = 0
                if noise is not None and noise.truncate:
                    cut = self.injector.truncate(content)  # type: ignore[union-attr]
                    if cut != content:
                        kinds.append("truncate")
                        self.noise_events.append(NoiseEvent(kind="truncate", turn=turn, step=index, tool=name,
                                                            detail={"chars": len(content), "kept": len(cut)}))  # fmt: skip
                        content = cut
        clipped = len(content) > self.limits.max_observation_chars
        if clipped:
            keep = self.limits.max_observation_chars
            content = f"{content[:keep]}... [observation cut: {len(content) - keep} more characters]"
        self.steps.append(Step(
            index=index, turn=turn, call_id=call.id or f"call_{turn}_{index}", name=name, arguments=arguments,
            ok=error is None, output=output, error=error, mutates=mutates,
            duration_s=time.perf_counter() - started, noise=kinds, observation_truncated=clipped,
        ))  # fmt: skip
        self.messages.append({"role": "tool", "tool_call_id": call.id, "content": content})

    # -- bookkeeping ----------------------------------------------------------------------------------------
    def _over_tokens(self, turn: AssistantTurn) -> bool:
        if self.limits.max_tokens is None:
            return False
        used = turn.prompt_tokens + turn.completion_tokens if turn.prompt_tokens else self.completion_tokens
        return used >= self.limits.max_tokens

    def _infra(self, err: InfraError, *, source: str, attempt: int, fatal: bool, turn: int | None = None) -> None:
        entry = {**err.to_dict(), "source": source, "turn": len(self.turns) if turn is None else turn,
                 "attempt": attempt, "fatal": fatal}  # fmt: skip
        entry["message"] = entry["message"][:_ERROR_TEXT_LIMIT]
        self.infra_errors.append(entry)


def _as_infra(exc: BaseException) -> InfraError:
    """Any failure of a policy or user turn as an ``InfraError`` (a backend's own timeout can be retried)."""
    if isinstance(exc, InfraError):
        return exc
    if isinstance(exc, TimeoutError):
        return InfraError(f"timed out: {exc}" if str(exc) else "timed out", retryable=True, kind="timeout")
    return InfraError(f"{type(exc).__name__}: {exc}", retryable=False, kind="crash")


def _as_text(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)


def _clip_error(error: dict[str, Any]) -> dict[str, Any]:
    """A tool error as plain JSON data (its details hold tuples), with a bounded message."""
    message = error.get("message")
    if isinstance(message, str) and len(message) > _ERROR_TEXT_LIMIT:
        error = {**error, "message": message[:_ERROR_TEXT_LIMIT] + "..."}
    return json.loads(json.dumps(error, ensure_ascii=False, default=str))


def _buffer_dict(session: Any, infra_errors: list[dict[str, Any]]) -> dict[str, Any] | None:
    buffer = getattr(session, "buffer", None) if session is not None else None
    if buffer is None:
        return None
    try:
        return buffer.to_dict()
    except Exception as exc:  # a buffer that cannot serialise must not cost the rest of the trajectory
        infra_errors.append({**_as_infra(exc).to_dict(), "source": "loop", "turn": None, "attempt": 0, "fatal": False})
        return None


OnDone = Callable[[Trajectory], Any]


async def run_many(world: World, tasks: Iterable[Task], policy: Policy, *, trials: int = 1, concurrency: int = 8,
                   limits: Limits = Limits(), user: UserSimulator | None = None, noise: NoiseConfig | None = None,
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
