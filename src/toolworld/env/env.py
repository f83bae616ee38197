"""``ToolEnv``: one episode of a world, steppable from outside, with the user, limits, noise and scoring inside.

Whoever owns the model drives it: the rollout loop (``rollout.loop.run_episode``), a trainer that samples
itself, the Gymnasium env, an MCP server (which only needs the tool level). The contract is Gymnasium-sized::

    obs = await env.reset(task, trial=0)          # system prompt + the user's opening message, and the tools
    while not result.done:
        result = await env.step(assistant_turn)   # tool results and the user's reply; done, score, reward

``step`` takes what the model produced (an ``AssistantTurn``, an OpenAI-style assistant message, or raw text
whose tool calls are parsed), runs every tool call through the call-handler chain (``Episode.call`` wrapped by
noise and observation limits, see ``env.wrappers``), hands an answer without tool calls to the user simulator,
and ends the episode on the user's stop or a limit. When it ends, the change-set and state hash are taken and,
with ``score=True``, the trajectory is scored against the task. ``call_tool`` is the tool level alone (an MCP
client calls tools, it does not send assistant turns).

Nothing the model sends escapes as an exception: a malformed call costs an error observation; a failing user
simulator is retried, then ends the episode as ``infra_error`` (never scored as reward 0: ``reward`` is None).
The driver reports its own infrastructure failures (a model server that stays down) with ``record_infra`` and
ends the episode with ``end``. Tool calls are synchronous SQLite work of tens of microseconds, cheap enough to
run on the event loop.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

from ..core.errors import InfraError, ToolworldError
from ..core.retry import backoff_delay
from ..core.seeds import derive_seed
from ..records.messages import AssistantTurn, Message
from ..records.trajectory import NoiseEvent, Step, Termination, Trajectory, TurnRecord, Usage
from ..world.episode import Episode, ToolCall
from .limits import Limits
from .noise import NoiseConfig, NoiseInjector
from .user import ScriptedUser, UserReply, UserSession, UserSimulator
from .wrappers import ERROR_TEXT_LIMIT, CallHandler, InjectNoise, LimitObservation, RunCall

if TYPE_CHECKING:
    from ..scoring.model import Score
    from ..tasks.model import Task
    from ..world.world import World

T = TypeVar("T")
#: Endings where the episode was cut rather than finished: Gymnasium's ``truncated``.
TRUNCATIONS: frozenset[str] = frozenset({"max_turns", "max_tokens", "timeout", "infra_error"})


class EnvError(ToolworldError):
    """A misuse of the environment by its driver (stepping a finished episode, a task of another world)."""

    default_kind = "env_error"


@dataclass(slots=True)
class Observation:
    """What the agent sees after ``reset``: the conversation so far and the tools (OpenAI format)."""

    messages: list[Message]
    new_messages: list[Message]
    tools: list[dict[str, Any]]
    done: bool = False


@dataclass(slots=True)
class StepResult:
    """What one assistant turn led to. ``reward`` is set when the episode ended and was scored (None otherwise,
    and None after an infra error: such an episode says nothing about the agent)."""

    new_messages: list[Message]
    terminated: bool = False
    truncated: bool = False
    termination: Termination | None = None
    score: Score | None = None
    reward: float | None = None
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def done(self) -> bool:
        return self.terminated or self.truncated


@dataclass(slots=True)
class ToolObservation:
    """One tool call's result at the tool level (``ToolEnv.call_tool``)."""

    content: str
    ok: bool
    error: dict[str, Any] | None
    output: Any
    mutates: bool


_TOOLS_CACHE: dict[int, tuple[Any, list[dict[str, Any]]]] = {}


def openai_tools(world: World) -> list[dict[str, Any]]:
    """The world's tool list, built once per world object (it is the same for every episode)."""
    hit = _TOOLS_CACHE.get(id(world))
    if hit is None or hit[0] is not world:
        hit = (world, world.openai_tools())
        _TOOLS_CACHE[id(world)] = hit
    return hit[1]


class ToolEnv:
    """A world as a steppable environment; one episode at a time (``reset`` starts the next).

    Args:
        world: a ``World`` or the name of an installed one.
        user: the user simulator (default ``ScriptedUser``); unused for free episodes (``reset()`` without a task).
        limits: turn, token, wall-time and error limits, and retries of the user simulator.
        noise: injected tool faults (seeded per task and trial); None or all-zero for none.
        score: score the trajectory against the task when the episode ends (the rollout loop scores later,
            in the run pipeline, and turns this off).
        wrap: an extra call-handler wrapper, applied outermost: ``wrap(handler) -> handler``.
    """

    def __init__(self, world: World | str, *, user: UserSimulator | None = None, limits: Limits | None = None,
                 noise: NoiseConfig | None = None, score: bool = True,
                 wrap: Callable[[CallHandler], CallHandler] | None = None) -> None:  # fmt: skip
        if isinstance(world, str):
            from ..world import get_world

            world = get_world(world)
        self.world = world
        self.user = user if user is not None else ScriptedUser()
        self.limits = limits if limits is not None else Limits()
        self.noise = noise if noise is not None and noise.active else None
        self.scoring = score
        self.wrap = wrap
        self.tools = openai_tools(world)
        self.task: Task | None = None
        self.trial = 0
        self.policy_seed = 0
        self.episode: Episode | None = None
        self.messages: list[Message] = []
        self.termination: Termination | None = None
        self.score: Score | None = None
        self._handler: CallHandler | None = None
        self._user_session: UserSession | None = None
        self._changes: dict[str, Any] = {}
        self._state_hash = ""
        self._closed = True

    # -- lifecycle -------------------------------------------------------------------------------------------
    async def reset(self, task: Task | None = None, *, trial: int = 0, seed: int | None = None) -> Observation:
        """Start an episode of ``task`` (trial ``trial``), closing any previous one.

        With a task, ``seed`` overrides the seed derived from (task id, trial) that the user simulator gets
        (and that a driver passes to its policy, ``policy_seed``); without one, the episode is a free episode of
        the world at seed ``seed`` (default 0): no user simulator, no scoring, ended by ``end`` or a limit.
        Raises ``EnvError`` for a task of another world (a caller's mistake, not the agent's).
        """
        await self.close()
        if task is not None and task.world != self.world.name:
            raise EnvError(f"task {task.id} is for world {task.world!r}, not {self.world.name!r}", kind="wrong_world")
        self.task, self.trial = task, trial
        if task is not None:
            self.policy_seed = derive_seed(task.id, trial) if seed is None else seed
        else:
            self.policy_seed = derive_seed(self.world.name, seed or 0, trial)
        self.messages = [{"role": "system", "content": self.world.policy}]
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
        self.termination = None
        self.score = None
        self._changes, self._state_hash = {}, ""
        self.started_at = datetime.now(UTC).isoformat(timespec="milliseconds")
        self._t0 = time.perf_counter()
        self._closed = False
        try:
            self.episode = self.world.episode(task.seed if task is not None else (seed or 0))
        except Exception as exc:  # the world could not even start (a broken seed image): ours, not the agent's
            self.episode = None
            self.record_infra(as_infra(exc), source="world", attempt=0, fatal=True)
            self.termination = "infra_error"
            return Observation(list(self.messages), [], self.tools, done=True)
        self._handler = self._build_handler(self.episode)
        if task is not None:
            try:
                self._user_session = self.user.start(task, seed=self.policy_seed)
            except Exception as exc:
                self.record_infra(as_infra(exc), source="user", attempt=0, fatal=True)
                self.end("infra_error")
                return Observation(list(self.messages), [], self.tools, done=True)
            self._hear_user(await self._user_turn(), opening=True)
        return Observation(list(self.messages), self.messages[1:], self.tools, done=self.done)

    def _build_handler(self, episode: Episode) -> CallHandler:
        handler: CallHandler = RunCall(episode)
        if self.noise is not None:
            key = self.task.id if self.task is not None else f"{self.world.name}:free"
            handler = InjectNoise(handler, NoiseInjector(self.noise, key, self.trial))
        handler = LimitObservation(handler, self.limits.max_observation_chars)
        return self.wrap(handler) if self.wrap is not None else handler

    @property
    def done(self) -> bool:
        return self.termination is not None

    def end(self, termination: Termination) -> None:
        """End the episode now (a driver's timeout or infra failure); the first ending wins. Takes the final
        change-set and state hash, and scores when scoring is on."""
        if self.termination is not None:
            return
        self.termination = termination
        if self.episode is not None:
            try:
                self._changes = self.episode.changes().to_dict()
                self._state_hash = self.episode.state_hash()
            except Exception as exc:  # a closed or broken episode must not cost the trajectory
                self.record_infra(as_infra(exc), source="world", attempt=0, fatal=False)
        if self.scoring and self.task is not None:
            from ..scoring import score_trajectory

            try:
                self.score = score_trajectory(self.task, self.trajectory(), world=self.world)
            except Exception as exc:  # a scorer crash is ours: recorded, and the episode counts as infra
                self.record_infra(InfraError(f"scoring failed: {type(exc).__name__}: {exc}", retryable=True,
                                             kind="scorer_crash"), source="loop", attempt=0, fatal=True)  # fmt: skip
                self.termination = "infra_error"
                self.score = None

    async def close(self) -> None:
        """Close the user session and the episode (idempotent). An open episode is ended first."""
        if self._closed:
            return
        if self.termination is None and self.episode is not None:
            self.end("user_stop" if self.task is None else "timeout")
        self._closed = True
        session, self._user_session = self._user_session, None
        if session is not None:
            try:
                await session.aclose()
            except Exception as exc:  # closing must not cost the finished trajectory
                self.record_infra(as_infra(exc), source="loop", attempt=0, fatal=False)
        if self.episode is not None:
            self.episode.close()

    # -- the agent's side ------------------------------------------------------------------------------------
    async def step(self, action: AssistantTurn | Message | str, *, latency_s: float | None = None,
                   attempts: int = 1) -> StepResult:  # fmt: skip
        """Apply one assistant turn: run its tool calls, or let the user answer; end on a limit.

        ``latency_s`` and ``attempts`` are the driver's measure of how the turn was obtained (recorded in the
        turn record); ``latency_s`` defaults to the turn's own.
        """
        start = len(self.messages)
        await self.advance(action if isinstance(action, AssistantTurn) else as_assistant_turn(action, self.tools),
                           latency_s=latency_s, attempts=attempts)  # fmt: skip
        return self.result(self.messages[start + 1:])

    async def advance(self, turn: AssistantTurn, *, latency_s: float | None = None, attempts: int = 1) -> None:
        """``step`` for a driver that reads ``messages`` and ``done`` itself (the rollout loop): the same work,
        without building a ``StepResult`` each turn."""
        if self.termination is not None:
            raise EnvError("the episode is over; call reset() to start another", kind="episode_done")
        if self.episode is None:
            raise EnvError("no episode: call reset() first", kind="not_started")
        if self.steps and not self.turns:
            raise EnvError("this episode is driven by call_tool(); assistant turns cannot join it", kind="mixed_levels")
        self._record_turn(turn, latency_s, attempts)
        limits = self.limits
        if turn.finish_reason == "length":  # cut mid-turn: its tool calls may be partial, do not run them
            self.end("max_tokens")
        elif turn.tool_calls:
            for call in turn.tool_calls:
                await self._run_call(call)
            if self.consecutive_errors >= limits.max_consecutive_errors:
                self.end("error_cap")
            elif self._over_tokens(turn):
                self.end("max_tokens")
        elif self.task is None:
            self.end("answered")
        else:
            reply = await self._user_turn()
            if reply is not None and not reply.done and self._over_tokens(turn):
                self.end("max_tokens")
            else:
                self._hear_user(reply)
        if self.termination is None:
            if len(self.turns) >= limits.max_turns:
                self.end("max_turns")
            elif limits.max_wall_s is not None and time.perf_counter() - self._t0 > limits.max_wall_s:
                self.end("timeout")

    async def call_tool(self, name: str, arguments: dict[str, Any] | str, *,
                        call_id: str | None = None) -> ToolObservation:  # fmt: skip
        """Run one tool call outside any assistant turn (an MCP client's call); recorded as a step with turn -1.

        The tool level and the turn level do not mix in one episode: a call here after ``step`` (or a ``step``
        after a call here) is refused, since the trajectory would then score writes its messages never show,
        and training data made from it would teach succeeding without calling tools. A finished episode takes
        no more calls.
        """
        if self.episode is None or self._closed:
            raise EnvError("no episode: call reset() first", kind="not_started")
        if self.termination is not None:
            raise EnvError("the episode is over; call reset() to start another", kind="episode_done")
        if self.turns:
            raise EnvError("this episode is driven by step(); tool-level calls cannot join it", kind="mixed_levels")
        cid = call_id if call_id and call_id not in self.call_ids else f"call_{len(self.steps)}"
        self.call_ids.add(cid)
        step, content = await self._run_call(ToolCall(name, arguments, cid), append=False)
        return ToolObservation(content=content, ok=step.ok, error=step.error, output=step.output,
                               mutates=step.mutates)  # fmt: skip

    def result(self, new: list[Message] | None = None) -> StepResult:
        """The ``StepResult`` for the episode as it stands, with ``new`` as its new messages (for a driver that
        learns from ``reset`` that the episode already ended, or that used ``advance``)."""
        new = [] if new is None else new
        term = self.termination
        if term is None:
            return StepResult(new)
        truncated = term in TRUNCATIONS
        info: dict[str, Any] = {"termination": term}
        if term == "infra_error":
            info["infra_error"] = True
        score = self.score
        if score is not None:
            info["components"] = {c.name: c.passed for c in score.components}
            info["success"] = score.success
        reward = score.reward if score is not None and not score.infra_error else None
        return StepResult(new, terminated=not truncated, truncated=truncated, termination=term, score=score,
                          reward=reward, info=info)  # fmt: skip

    def _record_turn(self, turn: AssistantTurn, latency_s: float | None, attempts: int) -> None:
        index = len(self.turns)
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
            index=index, latency_s=turn.latency_s if latency_s is None else latency_s, attempts=attempts,
            prompt_tokens=turn.prompt_tokens, completion_tokens=turn.completion_tokens,
            finish_reason=turn.finish_reason, tool_calls=len(turn.tool_calls), state_hash=self.episode.state_hash(),
            meta=meta,
        ))  # fmt: skip

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

    # -- tools -----------------------------------------------------------------------------------------------
    async def _run_call(self, call: ToolCall, *, append: bool = True) -> tuple[Step, str]:
        index = len(self.steps)
        turn = len(self.turns) - 1
        name = call.name if isinstance(call.name, str) else str(call.name)
        arguments = call.arguments if isinstance(call.arguments, dict | str) else _as_text(call.arguments)
        if name is not call.name or arguments is not call.arguments:
            call = ToolCall(name, arguments, call.id, call.problem)
        started = time.perf_counter()
        assert self._handler is not None
        out = await self._handler(call, index)
        kinds: list[Any] = []
        injected_failure = False
        for kind, detail in out.noise:
            kinds.append(kind)
            injected_failure = injected_failure or kind == "tool_failure"
            self.noise_events.append(NoiseEvent(kind=kind, turn=turn, step=index, tool=name, detail=detail))  # type: ignore[arg-type]
        mutates = out.mutates
        if injected_failure:  # noise is the environment's doing: neither an agent error nor an infra error
            tool = self.world.tools.get(name)
            mutates = tool.mutates if tool is not None else False
        elif out.error is not None:
            if out.internal:
                self.record_infra(InfraError(out.error.get("message", ""), retryable=False, kind="tool_internal_error"),
                                  source="tool", attempt=0, fatal=False, turn=turn)  # fmt: skip
            else:
                self.consecutive_errors += 1
                self.agent_errors.append({"turn": turn, "step": index, "tool": name, **out.error})
        else:
            self.consecutive_errors = 0
        step = Step(
            index=index, turn=turn, call_id=call.id or f"call_{turn}_{index}", name=name, arguments=arguments,
            ok=out.error is None, output=out.output, error=out.error, mutates=mutates,
            duration_s=time.perf_counter() - started, noise=kinds, observation_truncated=out.clipped,
        )  # fmt: skip
        self.steps.append(step)
        if append:
            self.messages.append({"role": "tool", "tool_call_id": call.id, "content": out.content})
        return step, out.content

    # -- the user's side -------------------------------------------------------------------------------------
    async def _user_turn(self) -> UserReply | None:
        session = self._user_session
        if session is None:
            return None
        got = await self.with_retries(lambda: session.respond(self.messages), source="user", turn=len(self.turns))
        return None if got is None else got[0]

    def _hear_user(self, reply: UserReply | None, *, opening: bool = False) -> None:
        if reply is None:
            self.end("infra_error")
        elif reply.done:
            self.end(reply.reason or "user_stop")
        else:
            self.messages.append({"role": "user", "content": reply.content})

    async def with_retries(self, make: Callable[[], Awaitable[T]], *, source: str, turn: int) -> tuple[T, int] | None:
        """Await ``make()``, retrying infra failures with backoff (``Limits.infra_retries``); returns (value,
        attempts), or None once the retries are spent (every failure recorded)."""
        retries = self.limits.infra_retries
        for attempt in range(retries + 1):
            try:
                return await make(), attempt + 1
            except Exception as exc:
                err = as_infra(exc)
            fatal = not err.retryable or attempt == retries
            self.record_infra(err, source=source, attempt=attempt, fatal=fatal, turn=turn)
            if fatal:
                return None
            await asyncio.sleep(backoff_delay(self.limits.infra_backoff_s, attempt, jitter=False, cap_s=float("inf")))
        return None  # pragma: no cover - the loop always returns

    # -- bookkeeping -----------------------------------------------------------------------------------------
    def _over_tokens(self, turn: AssistantTurn) -> bool:
        if self.limits.max_tokens is None:
            return False
        used = turn.prompt_tokens + turn.completion_tokens if turn.prompt_tokens else self.completion_tokens
        return used >= self.limits.max_tokens

    def record_infra(self, err: InfraError, *, source: str, attempt: int, fatal: bool, turn: int | None = None) -> None:
        """Record an infrastructure failure (the driver's model server, the user simulator, a tool's crash)."""
        entry = {**err.to_dict(), "source": source, "turn": len(self.turns) if turn is None else turn,
                 "attempt": attempt, "fatal": fatal}  # fmt: skip
        entry["message"] = entry["message"][:ERROR_TEXT_LIMIT]
        self.infra_errors.append(entry)

    def trajectory(self, *, policy: str = "external", token_buffer: dict[str, Any] | None = None) -> Trajectory:
        """The episode as a ``Trajectory`` (so far, if it is still running: termination then reads ``timeout``)."""
        if not hasattr(self, "steps"):
            raise EnvError("no episode: call reset() first", kind="not_started")
        task = self.task
        return Trajectory(
            task_id=task.id if task is not None else f"{self.world.name}:free", world=self.world.name,
            seed=task.seed if task is not None else 0, trial=self.trial, policy=policy, user=self.user.name,
            policy_seed=self.policy_seed, messages=self.messages, steps=self.steps, turns=self.turns,
            token_buffer=token_buffer,
            usage=Usage(prompt_tokens=self.prompt_tokens, completion_tokens=self.completion_tokens),
            agent_errors=self.agent_errors, infra_errors=self.infra_errors, noise_events=self.noise_events,
            perturbations=self.perturbations, termination=self.termination or "timeout", changes=self._changes,
            state_hash=self._state_hash, started_at=self.started_at, wall_s=time.perf_counter() - self._t0,
        )  # fmt: skip


def as_assistant_turn(action: AssistantTurn | Message | str, tools: list[dict[str, Any]] | None = None) -> AssistantTurn:
    """An assistant turn from what a driver sends: an ``AssistantTurn`` as is; an OpenAI-style assistant message
    (its ``tool_calls`` read, arguments kept raw when they are not JSON); or text, whose tool calls are parsed in
    any dialect ``parse_tool_calls`` knows. Anything else is an ``EnvError`` (the driver's mistake)."""
    if isinstance(action, AssistantTurn):
        return action
    if isinstance(action, str):
        from ..tokens.dialects import parse_tool_calls

        parsed = parse_tool_calls(action, "auto", tools=tools)
        return AssistantTurn(content=parsed.content, tool_calls=list(parsed.calls), text=action,
                             reasoning=parsed.reasoning, finish_reason="tool_calls" if parsed.calls else "stop")  # fmt: skip
    if isinstance(action, dict):
        role = action.get("role", "assistant")
        if role != "assistant":
            raise EnvError(f"step() takes an assistant message, got role {role!r}", kind="bad_action")
        calls = []
        for i, raw in enumerate(action.get("tool_calls") or []):
            if not isinstance(raw, dict):
                raise EnvError(f"tool_calls[{i}] is not an object", kind="bad_action")
            fn = raw.get("function") if isinstance(raw.get("function"), dict) else raw
            args = fn.get("arguments", {})
            if isinstance(args, str):
                try:
                    parsed_args = json.loads(args)
                    args = parsed_args if isinstance(parsed_args, dict) else args
                except (ValueError, RecursionError):
                    pass  # kept raw: Episode.call answers it with invalid_arguments, the agent's error
            calls.append(ToolCall(str(fn.get("name", "")), args, raw.get("id")))
        content = action.get("content")
        reasoning = action.get("reasoning_content") or action.get("reasoning")
        return AssistantTurn(content=content if isinstance(content, str) else "", tool_calls=calls,
                             reasoning=reasoning if isinstance(reasoning, str) else None,
                             finish_reason="tool_calls" if calls else "stop")  # fmt: skip
    raise EnvError(f"step() takes an AssistantTurn, an assistant message dict or text, got {type(action).__name__}",
                   kind="bad_action")  # fmt: skip


def as_infra(exc: BaseException) -> InfraError:
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
