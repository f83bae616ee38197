"""Run → score → store → summary → report: the one place a run of a policy on tasks is put together.

``run`` is what ``toolworld run`` does, callable from Python (a trainer, a notebook, a server) without the
command line::

    import toolworld
    result = toolworld.run("retail", "tasks.jsonl", "gold", out="runs/gold", trials=2)
    result.summary.success_rate, result.summary.pass_hat(2), result.report

Every finished (task, trial) is scored at once and committed to the run store (``OUT/run.db``), so a crash
loses only the episodes in flight and ``resume=True`` re-runs only unfinished and infra-errored trials. A scorer
that crashes is our bug, not the agent's failure: that trial is kept as an infra error, to be run again. At the
end ``summary.json`` and ``report.html`` are written from the store, so a fresh, a resumed and a re-scored run
give the same files for the same trials. Ctrl-C (``KeyboardInterrupt``) during the episodes keeps every finished
trial, still writes the summary and report, and returns with ``RunResult.interrupted`` set. ``export`` writes a
stored run for training (``toolworld export``); SFT data renders through the run's own policy's tokenizer unless
told another.

Everything a caller can get wrong is a :class:`RunError` whose ``kind`` names it (``no_tasks``,
``output_exists``, ``run_mismatch``, ``bad_policy_spec``, ...): the command line prints it as
``{"error": {"type": kind, ...}}`` unchanged.

This module imports neither typer nor rich: progress and notices go to callbacks (``on_progress``).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from .core.errors import ToolworldError

if TYPE_CHECKING:
    from .env import Limits, NoiseConfig, UserSimulator
    from .records.trajectory import Trajectory
    from .rollout.policy import Policy
    from .scoring.model import Score
    from .scoring.summary import Summary
    from .store.runstore import RunStore
    from .tasks.model import LineError, Task
    from .world.world import World

__all__ = [
    "REPORT_FILE",
    "RESUME_KEYS",
    "SUMMARY_FILE",
    "ExportResult",
    "Notice",
    "RescoreResult",
    "RunError",
    "RunEvent",
    "RunResult",
    "RunStarted",
    "TaskFile",
    "TrialFinished",
    "all_infra_error",
    "canonical_spec",
    "config_differences",
    "export",
    "export_run",
    "finish",
    "load_tasks",
    "make_policy",
    "make_user",
    "redact_spec",
    "rescore",
    "run",
    "run_async",
    "select_tasks",
    "tasks_digest",
]

SUMMARY_FILE = "summary.json"
REPORT_FILE = "report.html"

_log = logging.getLogger("toolworld.pipeline")


class RunError(ToolworldError):
    """A run that cannot be started or finished as asked. ``kind`` says why (``no_tasks``, ``output_exists``,
    ``run_mismatch``, ``bad_policy_spec``, ``policy_unavailable``, ``missing_dependency``, a store's own kinds
    such as ``run_locked``, ...); ``details`` are extra fields of the structured error (``differences``)."""

    default_kind = "run_error"

    def __init__(self, message: str = "", *, kind: str | None = None, **details: Any) -> None:
        super().__init__(message, kind=kind)
        self.details = details

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), **self.details}


# -- progress events ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RunStarted:
    """The episodes are about to run: ``total`` trials now, ``already_done`` of ``wanted`` kept from before."""

    world: str
    policy: str
    out: Path
    total: int
    already_done: int
    wanted: int


@dataclass(frozen=True, slots=True)
class TrialFinished:
    """One trial was scored and committed. The tallies count this call's trials only."""

    finished: int
    total: int
    success: int
    scored: int
    infra: int
    trajectory: Trajectory
    score: Score

    @property
    def status(self) -> str:
        """A short status line: ``success 3/4`` (``· infra errors 1`` when there are some)."""
        return f"success {self.success}/{self.scored}" + (f" · infra errors {self.infra}" if self.infra else "")


@dataclass(frozen=True, slots=True)
class Notice:
    """Something the person running should read (a damaged store rebuilt, a report that could not be written)."""

    message: str
    level: Literal["info", "warning", "error"] = "info"


RunEvent = RunStarted | TrialFinished | Notice
OnProgress = Callable[[RunEvent], Any]
OnDamage = Callable[[str], Any]


def _notify(on_progress: OnProgress | None, message: str, level: Literal["info", "warning", "error"] = "info") -> None:
    if on_progress is None:
        _log.log({"info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}[level], "%s", message)
    else:
        on_progress(Notice(message, level))


# -- results -----------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RunResult:
    """What a run left in ``out``: the summary of every stored trial, the report, and this call's tallies."""

    summary: Summary
    out: Path
    report: Path | None
    interrupted: bool = False
    ran: int = 0  # trials this call set out to run (resumed runs skip the finished ones)
    finished: int = 0
    scored: int = 0
    successes: int = 0
    infra_errors: int = 0
    first_infra_cause: dict[str, Any] | None = None
    task_file_errors: list[str] = field(default_factory=list)

    @property
    def measured_nothing(self) -> bool:
        """Every trial this call finished ended on an infra error: the run says nothing about the agent."""
        return self.infra_errors > 0 and self.scored == 0


@dataclass(frozen=True, slots=True)
class RescoreResult:
    """New scores of every readable stored trial; ``summary``/``report`` are None for a check-only rescore."""

    rescored: int
    changed: list[tuple[str, int]]
    summary: Summary | None = None
    report: Path | None = None


@dataclass(frozen=True, slots=True)
class ExportResult:
    """An export written: the file, its format and how many records (conversations or trials) it holds."""

    path: Path
    fmt: str
    records: int


# -- tasks -------------------------------------------------------------------------------------------------


@dataclass(slots=True)
class TaskFile:
    """The good tasks of a task file for one world, and its lines that could not be used (with their numbers)."""

    path: Path
    world: str
    tasks: list[Task]
    errors: list[LineError]


def load_tasks(path: str | Path, world: str) -> TaskFile:
    """Read a JSONL task file for ``world``: bad JSON, invalid tasks, tasks of another world and duplicate ids
    become line errors (the rest still run). A missing or unreadable file is a :class:`RunError`."""
    from .tasks.model import LineError, TaskSet

    path = Path(path)
    try:
        task_set = TaskSet.load(path)
    except FileNotFoundError:
        raise RunError(f"task file {path} does not exist; create one with `toolworld tasks generate {world} -n 10 "
                       f"-o {path}`.", kind="file_not_found") from None  # fmt: skip
    except (OSError, UnicodeDecodeError) as exc:
        raise RunError(f"cannot read task file {path}: {exc}", kind="unreadable_file") from exc
    errors = list(task_set.errors)
    good: list[Task] = []
    first_line: dict[str, int] = {}
    for task, line in zip(task_set.tasks, task_set.lines, strict=True):
        if task.world != world:
            errors.append(LineError(line, f"task {task.id} is for world {task.world!r}, not {world!r}"))
        elif task.id in first_line:
            errors.append(LineError(line, f"duplicate task id {task.id} (first on line {first_line[task.id]})"))
        else:
            first_line[task.id] = line
            good.append(task)
    errors.sort(key=lambda e: e.line)
    return TaskFile(path, world, good, errors)


def select_tasks(task_file: TaskFile, limit: int | None = None) -> list[Task]:
    """The tasks to run (the first ``limit``); ``no_tasks`` when there is none, with the first line errors."""
    tasks = task_file.tasks if limit is None else task_file.tasks[:limit]
    if not tasks:
        raise RunError(f"{task_file.path} has no valid task for world {task_file.world!r} ({len(task_file.errors)} "
                       f"bad line(s)); generate some with `toolworld tasks generate {task_file.world} -n 10 -o "
                       "tasks.jsonl`.", kind="no_tasks", errors=[str(e) for e in task_file.errors[:20]])  # fmt: skip
    return tasks


def _task_list(tasks: Sequence[Task], world: str, limit: int | None) -> list[Task]:
    """Tasks given in Python: unlike a file's lines, a wrong one is the caller's bug, so it is refused whole."""
    seen: set[str] = set()
    for i, task in enumerate(tasks):
        if task.world != world:
            raise RunError(f"tasks[{i}] ({task.id}) is for world {task.world!r}, not {world!r}", kind="invalid_task")
        if task.id in seen:
            raise RunError(f"tasks[{i}] repeats task id {task.id}; each task runs once per trial", kind="invalid_task")
        seen.add(task.id)
    chosen = list(tasks) if limit is None else list(tasks)[:limit]
    if not chosen:
        raise RunError(f"no task to run for world {world!r}", kind="no_tasks", errors=[])
    return chosen


def tasks_digest(tasks: Sequence[Task]) -> str:
    """sha256 of the tasks in order: a resumed run must run the very tasks it started with."""
    h = hashlib.sha256()
    for task in tasks:
        h.update(task.to_json().encode("utf-8", "surrogatepass"))
        h.update(b"\n")
    return h.hexdigest()


# -- policies and users ------------------------------------------------------------------------------------


def make_policy(spec: str, *, role: Literal["policy", "user"] = "policy") -> Policy:
    """The policy of a ``--policy`` SPEC, or a :class:`RunError`: ``bad_{role}_spec`` (does not parse),
    ``{role}_unavailable`` (a server or file that is not there), ``missing_dependency``, ``{role}_error``."""
    from .core.errors import InfraError
    from .rollout.backends import make_policy as build

    try:
        return build(spec)
    except ValueError as exc:
        raise RunError(str(exc), kind=f"bad_{role}_spec") from exc
    except InfraError as exc:
        raise RunError(str(exc), kind=f"{role}_unavailable") from exc
    except ImportError as exc:
        raise RunError(f"--{role} {spec} needs a package that is not installed ({exc}); try pip install "
                       "'toolworld[models]'.", kind="missing_dependency") from exc  # fmt: skip
    except Exception as exc:
        raise RunError(f"cannot start --{role} {spec}: {type(exc).__name__}: {exc}", kind=f"{role}_error") from exc


def make_user(spec: str, *, policy_factory: Callable[[str], Policy] | None = None) -> UserSimulator:
    """The user simulator of a ``--user`` SPEC: ``scripted`` (answers from the task's known facts) or a policy
    SPEC that plays the user with a model (built by ``policy_factory``, default :func:`make_policy`)."""
    from .env.user import LLMUser, ScriptedUser

    if spec.strip().lower() == "scripted":
        return ScriptedUser()
    factory = policy_factory or (lambda s: make_policy(s, role="user"))
    return LLMUser(factory(spec))


def redact_spec(spec: str) -> str:
    """The spec with any ``api_key=`` value hidden: the configuration is stored in run.db and shown in reports."""
    parts = spec.split(",")
    return ",".join(p.split("=", 1)[0] + "=***" if p.strip().lower().startswith("api_key=") else p for p in parts)


def canonical_spec(spec: str) -> str:
    """A spec in one spelling (kind lower-cased, options sorted, keys hidden), so that resuming with
    ``gold:seed=1,drop=0.3`` after ``gold:drop=0.3,seed=1`` is not taken for another policy. Which part is a
    target and which are options comes from the kind's registration (``takes_target``)."""
    from .rollout.backends import parse_spec

    try:
        return parse_spec(redact_spec(spec)).canonical
    except ValueError:  # a spec that does not parse compares as written
        return redact_spec(spec.strip())


# -- run configuration and resume checks -------------------------------------------------------------------

#: What shapes a trial, as (path in the stored configuration, the option that sets it).
RESUME_KEYS = (("world", "WORLD"), ("policy_spec", "--policy"), ("user", "--user"),
               ("limits.max_turns", "--max-turns"), ("limits.max_tokens", "--max-tokens"),
               ("limits.time_limit_s", "--time-limit"), ("noise.fail", "--noise-fail"),
               ("noise.latency_ms", "--noise-latency-ms"), ("noise.truncate", "--noise-truncate"),
               ("noise.seed", "--noise-seed"))  # fmt: skip


def _shown(value: Any) -> str:
    """A stored option as its flag would take it: an unset limit (None) reads ``none`` (no such limit)."""
    return "none" if value is None else str(value)


def config_differences(stored: dict[str, Any], config: dict[str, Any], run_task_ids: Callable[[], list[str]],
                       file_task_ids: list[str]) -> list[str]:  # fmt: skip
    """Each way ``config`` (this run) differs from ``stored`` (the run's) in what shapes trials, one phrase
    each (``--noise-fail 0.1 -> 0.2``). Keys a run stored by an older toolworld lacks are not compared.
    ``run_task_ids`` is called only when the tasks must be compared one by one (it reads every stored task)."""
    out = []
    for path, option in RESUME_KEYS:
        old, new, present = stored, config, True
        for part in path.split("."):
            present = present and isinstance(old, dict) and part in old
            old = old.get(part) if isinstance(old, dict) else None
            new = new.get(part) if isinstance(new, dict) else None
        if not present:
            continue
        if path in ("policy_spec", "user"):
            if canonical_spec(str(old)) != canonical_spec(str(new)):
                out.append(f"{option} {old} -> {new}")
        elif old != new:
            out.append(f"{option} {_shown(old)} -> {_shown(new)}")
    if _draws_matter(stored) and int(stored.get("draws", 1)) != int(config.get("draws", DRAWS_VERSION)):
        out.append(f"random draws {stored.get('draws', 1)} -> {config.get('draws', DRAWS_VERSION)} (the run was started "
                   "by a toolworld whose seeds draw other noise, gold perturbations, probe output or sampling seeds; "
                   "finish it with that version)")  # fmt: skip
    if int(config.get("trials", 1)) < int(stored.get("trials", 1)):
        out.append(f"--trials {stored.get('trials')} -> {config.get('trials')} (a resumed run may add trials, not drop "
                   "them)")  # fmt: skip
    if "tasks_digest" in stored and stored["tasks_digest"] != config.get("tasks_digest"):
        run_ids = run_task_ids()
        gone = len(set(run_ids) - set(file_task_ids))
        new_ids = len(set(file_task_ids) - set(run_ids))
        detail = (f"{gone} of the run's tasks missing, {new_ids} new" if gone or new_ids
                  else "same task ids, different contents or order")  # fmt: skip
        out.append(f"--tasks {stored.get('task_file')} -> {config.get('task_file')}: the tasks differ ({detail})")
    elif "tasks_digest" not in stored:
        missing = sorted(set(file_task_ids) - set(run_task_ids()))
        if missing:
            out.append(f"--tasks: {len(missing)} task(s) of the task file are not in the run (e.g. {missing[0]})")
    return out


#: The version of the random streams behind a trial (injected noise, gold perturbations, the gibberish probe, token
#: sampling seeds): bumped when the same seed starts giving other draws, so that a resumed run never mixes two.
#: Runs stored before the version was recorded drew from version 1.
DRAWS_VERSION = 2
#: Policy and user kinds whose trials use none of those streams.
_DRAWLESS_KINDS = frozenset({"noop", "openai", "scripted"})


def _draws_matter(config: dict[str, Any]) -> bool:
    """Whether a run's trials depend on the random streams (noise on, a perturbed gold, a probe, a sampling model)."""
    noise = config.get("noise") if isinstance(config.get("noise"), dict) else {}
    if any(_number(noise.get(key)) > 0 for key in ("fail", "latency_ms", "truncate")):
        return True
    for key in ("policy_spec", "user"):
        spec = canonical_spec(str(config.get(key) or "scripted"))
        kind = spec.split(",", 1)[0].split(":", 1)[0]
        if not (kind in _DRAWLESS_KINDS or spec == "gold"):
            return True
    return False


def _number(value: Any) -> float:
    try:
        return float(value or 0)
    except (TypeError, ValueError):
        return 0.0


def _run_config(world: str, agent: Policy, policy_spec: str, user_spec: str, trials: int, task_file: str | None,
                tasks: list[Task], limits: Limits, noise: NoiseConfig | None) -> dict[str, Any]:  # fmt: skip
    """The configuration stored in run.db: what a resume must match, and what the report shows."""
    return {
        "world": world, "policy": agent.name, "policy_spec": redact_spec(policy_spec), "user": redact_spec(user_spec),
        "trials": trials, "task_file": task_file, "tasks_digest": tasks_digest(tasks),
        "limits": {"max_turns": limits.max_turns, "max_tokens": limits.max_tokens, "time_limit_s": limits.max_wall_s},
        "noise": {"fail": noise.tool_failure_p if noise else 0.0, "latency_ms": noise.latency_ms if noise else 0.0,
                  "truncate": noise.truncate_p if noise else 0.0, "seed": noise.seed if noise else 0},
        "draws": DRAWS_VERSION,
    }  # fmt: skip


def _store_error(exc: Exception) -> RunError:
    return RunError(str(exc), kind=getattr(exc, "kind", "store_error"))


def _open_store(out: Path, config: dict[str, Any], tasks: list[Task], resume: bool,
                on_damage: OnDamage | None) -> RunStore:  # fmt: skip
    """The run store in ``out``, locked for this process: a new one, or (``resume``) the existing one if it is the
    same run (every difference that shapes trials is named in a ``run_mismatch`` error)."""
    from .store import RunStore, StoreError

    try:
        if not RunStore.exists(out):
            return RunStore.create(out, config, tasks, on_damage=on_damage)
        if not resume:
            raise RunError(f"{out} already holds a run; pass --resume to continue it, or choose another --out.",
                           kind="output_exists")  # fmt: skip
        store = RunStore.open(out, writer=True, on_damage=on_damage)
    except StoreError as exc:
        raise _store_error(exc) from exc
    except OSError as exc:
        raise RunError(f"cannot use {out} as the output folder: {exc}", kind="unwritable_output") from exc
    try:
        stored = store.config
        differences = config_differences(stored, config, store.task_ids, [t.id for t in tasks])
        if differences:
            raise RunError(f"{out} holds a run with another configuration: {'; '.join(differences)}. Resume it with "
                           "the same arguments, or choose another --out.", kind="run_mismatch",
                           differences=differences)  # fmt: skip
        if stored.get("tasks_digest") == config["tasks_digest"]:
            # The file holds the run's very tasks: a stored task row that is damaged (read and reported here, so
            # the store gets rebuilt) is recovered from it instead of costing its trials.
            store.task_ids()
            store.use_tasks(tasks)
        if config["trials"] > int(stored.get("trials", 0)):
            store.update_config(trials=config["trials"])
    except BaseException as exc:
        store.close()
        if isinstance(exc, StoreError):
            raise _store_error(exc) from exc
        raise
    return store


def _rebuild_if_damaged(store: RunStore, on_progress: OnProgress | None) -> None:
    """After a resume read damaged rows: carry what is readable over to a healthy file, since the trials to re-run
    would otherwise be written onto the very pages that are torn."""
    from .store import StoreError

    if not store.damaged:
        return
    try:
        kept = store.rebuild()
    except (OSError, sqlite3.Error, StoreError) as exc:
        _notify(on_progress, f"could not rebuild the damaged {store.path} ({exc}); continuing in it", "warning")
    else:
        _notify(on_progress, f"{len(store.damaged)} damaged row(s) found: the run's readable rows are now in a fresh "
                f"{store.path} (unreadable trials run again); the damaged file is kept as {kept}")  # fmt: skip


# -- infra errors ------------------------------------------------------------------------------------------


def _as_infra_trajectory(traj: Trajectory, kind: str, message: str) -> Trajectory:
    entry = {"kind": kind, "message": message[:1000], "retryable": True, "source": "loop", "turn": None,
             "attempt": 0, "fatal": True}  # fmt: skip
    return traj.model_copy(update={"termination": "infra_error", "infra_errors": [*traj.infra_errors, entry]})


def _first_cause(traj: Trajectory) -> dict[str, Any]:
    """The infra error that ended ``traj`` (its fatal one, else the last), as {kind, message, task_id, trial}."""
    errors = traj.infra_errors
    cause = next((e for e in errors if e.get("fatal")), errors[-1] if errors else {})
    return {"kind": str(cause.get("kind", "unknown")), "message": str(cause.get("message", "no message recorded")),
            "task_id": traj.task_id, "trial": traj.trial}  # fmt: skip


def all_infra_error(result: RunResult) -> RunError | None:
    """The ``all_trials_infra_error`` of a run that measured nothing (every trial ended on an infra error), with
    its first cause; None when something was measured."""
    if not result.measured_nothing:
        return None
    cause = result.first_infra_cause or {}
    message = (f"all {result.infra_errors} trial(s) ended on infra errors, nothing was scored; first cause "
               f"({cause.get('kind')}, task {cause.get('task_id')} trial {cause.get('trial')}): {cause.get('message')}. "
               f"Fix it, then rerun with --out {result.out} --resume")  # fmt: skip
    return RunError(message, kind="all_trials_infra_error", cause=cause)


# -- the run -----------------------------------------------------------------------------------------------


def _resolve_world(world: World | str) -> World:
    from .world import World, WorldError, get_world

    if isinstance(world, World):
        return world
    try:
        return get_world(world)
    except WorldError as exc:
        raise RunError(str(exc), kind="unknown_world") from exc


@dataclass(slots=True)
class _Run:
    """A run whose store is open and locked: everything the episodes and the finish need."""

    world: World
    tasks: list[Task]
    agent: Policy
    user: UserSimulator
    limits: Limits
    noise: NoiseConfig | None
    trials: int
    concurrency: int
    store: RunStore
    out: Path
    done: set[tuple[str, int]]
    total: int
    task_file_errors: list[str]
    on_progress: OnProgress | None
    with_report: bool
    by_id: dict[str, Task] = field(default_factory=dict)
    success: int = 0
    scored: int = 0
    infra: int = 0
    first_cause: dict[str, Any] | None = None

    def keep(self, traj: Trajectory) -> None:
        """Score one finished trajectory and commit it (run_many calls this the moment the episode ends)."""
        from . import scoring

        task = self.by_id[traj.task_id]
        try:
            score = scoring.score_trajectory(task, traj)
        except Exception as exc:  # a scorer crash is ours, not the agent's: keep it as an infra error to re-run
            traj = _as_infra_trajectory(traj, "scorer_crash", f"scoring failed: {type(exc).__name__}: {exc}")
            score = scoring.score_trajectory(task, traj)
        self.store.record(traj, score)
        if score.infra_error:
            self.infra += 1
            if self.first_cause is None:
                self.first_cause = _first_cause(traj)
        else:
            self.scored += 1
            self.success += int(score.success)
        if self.on_progress is not None:
            self.on_progress(TrialFinished(self.scored + self.infra, self.total, self.success, self.scored, self.infra,
                                           traj, score))  # fmt: skip

    async def episodes(self) -> None:
        from .rollout.loop import run_many

        await run_many(self.world, self.tasks, self.agent, trials=self.trials, concurrency=self.concurrency,
                       limits=self.limits, user=self.user, noise=self.noise, on_done=self.keep, skip=self.done)  # fmt: skip

    def finish(self, interrupted: bool) -> RunResult:
        try:
            summary, report = _finish(self.store, self.out, task_file_errors=self.task_file_errors,
                                      with_report=self.with_report, on_progress=self.on_progress)  # fmt: skip
        finally:
            self.store.close()
        return RunResult(summary=summary, out=self.out, report=report, interrupted=interrupted, ran=self.total,
                         finished=self.scored + self.infra, scored=self.scored, successes=self.success,
                         infra_errors=self.infra, first_infra_cause=self.first_cause,
                         task_file_errors=list(self.task_file_errors))  # fmt: skip


def _prepare(world: World | str, tasks: str | Path | TaskFile | Sequence[Task], policy: str | Policy, *,
             out: str | Path, trials: int, concurrency: int, limits: Limits | None, user: str | UserSimulator,
             noise: NoiseConfig | None, resume: bool, limit: int | None, on_progress: OnProgress | None,
             policy_spec: str | None, user_spec: str | None, on_damage: OnDamage | None, report: bool) -> _Run:  # fmt: skip
    from .env import Limits
    from .store import StoreError

    if trials < 1 or concurrency < 1:
        raise RunError(f"trials and concurrency must be at least 1, got {trials} and {concurrency}",
                       kind="invalid_option")  # fmt: skip
    if limit is not None and limit < 1:
        raise RunError(f"limit must be at least 1, got {limit}", kind="invalid_option")
    w = _resolve_world(world)
    task_file: str | None
    if isinstance(tasks, (str, Path)):
        tasks = load_tasks(tasks, w.name)
    if isinstance(tasks, TaskFile):
        if tasks.world != w.name:
            raise RunError(f"{tasks.path} was loaded for world {tasks.world!r}, not {w.name!r}; load it with "
                           f"load_tasks(path, {w.name!r})", kind="invalid_task")  # fmt: skip
        chosen, task_file, line_errors = select_tasks(tasks, limit), str(tasks.path), [str(e) for e in tasks.errors]
    else:
        chosen, task_file, line_errors = _task_list(tasks, w.name, limit), None, []
    if isinstance(policy, str):
        agent, spec = make_policy(policy), policy
    else:
        agent, spec = policy, policy_spec or policy.name
    if isinstance(user, str):
        simulator, uspec = make_user(user), user
    else:
        simulator, uspec = user, user_spec or getattr(user, "name", type(user).__name__)
    limits = limits if limits is not None else Limits()
    config = _run_config(w.name, agent, spec, uspec, trials, task_file, chosen, limits, noise)
    out = Path(out)
    store = _open_store(out, config, chosen, resume, on_damage)
    try:
        run_tasks = store.tasks()
        wanted = {(t.id, k) for t in run_tasks for k in range(trials)}
        done = store.finished() & wanted
        _rebuild_if_damaged(store, on_progress)
    except BaseException as exc:
        store.close()
        if isinstance(exc, StoreError):
            raise _store_error(exc) from exc
        raise
    state = _Run(w, run_tasks, agent, simulator, limits, noise, trials, concurrency, store, out, done,
                 len(wanted) - len(done), line_errors, on_progress, report, {t.id: t for t in run_tasks})  # fmt: skip
    if on_progress is not None:
        on_progress(RunStarted(w.name, agent.name, out, state.total, len(done), len(wanted)))
    return state


def run(world: World | str, tasks: str | Path | TaskFile | Sequence[Task], policy: str | Policy = "gold", *,
        out: str | Path, trials: int = 1, concurrency: int = 8, limits: Limits | None = None,
        user: str | UserSimulator = "scripted", noise: NoiseConfig | None = None, resume: bool = False,
        limit: int | None = None, on_progress: OnProgress | None = None, policy_spec: str | None = None,
        user_spec: str | None = None, on_damage: OnDamage | None = None, report: bool = True) -> RunResult:  # fmt: skip
    """Run ``policy`` on ``tasks`` in ``world``, ``trials`` times each; score, store, summarize and report.

    Args:
        world: a :class:`~toolworld.world.World` or the name of an installed one.
        tasks: a task file (JSONL; bad lines are skipped and listed in ``task_file_errors``), a :class:`TaskFile`
            from :func:`load_tasks`, or a list of ``Task`` (one of another world or a repeated id is refused).
        policy: a ``--policy`` SPEC (``gold``, ``smollm2``, ``openai:MODEL@URL``, ...) or a ``Policy`` object;
            for an object, ``policy_spec`` (default: its ``name``) is what the run records and a resume compares.
        out: the run folder (``run.db``, ``summary.json``, ``report.html``).
        limits, noise: per-episode limits (default ``Limits()``) and injected tool noise (default none).
        user: ``scripted``, a policy SPEC to play the user with a model, or a ``UserSimulator`` (recorded as
            ``user_spec``, default its ``name``).
        resume: continue the run in ``out`` (same configuration, or a ``run_mismatch`` error naming each
            difference): only unfinished and infra-errored trials run.
        limit: run only the first ``limit`` tasks.
        on_progress: called with :class:`RunStarted` once, :class:`TrialFinished` after each trial is stored, and
            :class:`Notice` for what a person should read (without it notices go to the ``toolworld.pipeline``
            logger).
        on_damage: called with one line per unreadable stored row that was skipped (default: a warning).
        report: write ``report.html`` too (the summary is always written).

    Returns a :class:`RunResult`; Ctrl-C during the episodes returns one with ``interrupted=True`` after the
    finished trials are summarized. Raises :class:`RunError` for anything the caller can fix.
    """
    state = _prepare(world, tasks, policy, out=out, trials=trials, concurrency=concurrency, limits=limits, user=user,
                     noise=noise, resume=resume, limit=limit, on_progress=on_progress, policy_spec=policy_spec,
                     user_spec=user_spec, on_damage=on_damage, report=report)  # fmt: skip
    interrupted = False
    try:
        asyncio.run(state.episodes())
    except KeyboardInterrupt:  # finished trials are in the store: summarize them, let the caller decide the rest
        interrupted = True
    except BaseException:
        state.store.close()
        raise
    return state.finish(interrupted)


async def run_async(world: World | str, tasks: str | Path | TaskFile | Sequence[Task], policy: str | Policy = "gold",
                    *, out: str | Path, trials: int = 1, concurrency: int = 8, limits: Limits | None = None,
                    user: str | UserSimulator = "scripted", noise: NoiseConfig | None = None, resume: bool = False,
                    limit: int | None = None, on_progress: OnProgress | None = None, policy_spec: str | None = None,
                    user_spec: str | None = None, on_damage: OnDamage | None = None,
                    report: bool = True) -> RunResult:  # fmt: skip
    """:func:`run` for a caller already inside an event loop (a trainer, a server). Cancelling it keeps the
    finished trials and writes the summary and report before the cancellation goes on."""
    state = _prepare(world, tasks, policy, out=out, trials=trials, concurrency=concurrency, limits=limits, user=user,
                     noise=noise, resume=resume, limit=limit, on_progress=on_progress, policy_spec=policy_spec,
                     user_spec=user_spec, on_damage=on_damage, report=report)  # fmt: skip
    try:
        await state.episodes()
    except asyncio.CancelledError:
        state.finish(interrupted=True)
        raise
    except BaseException:
        state.store.close()
        raise
    return state.finish(interrupted=False)


# -- summary, report, rescore ------------------------------------------------------------------------------


def _rows(store: RunStore) -> tuple[dict[str, Task], list[Trajectory], list[Score], list[dict[str, Any]]]:
    from . import scoring

    tasks = {t.id: t for t in store.tasks()}
    trajectories, scores, rows = [], [], []
    for traj, score, _facts in store.trials():
        if score is None:  # stored without a score (should not happen): score it now rather than drop it
            score = scoring.score_trajectory(tasks[traj.task_id], traj)
        trajectories.append(traj)
        scores.append(score)
        rows.append({"task": tasks[traj.task_id].model_dump(mode="json"), "trajectory": traj.model_dump(mode="json"),
                     "score": score.model_dump(mode="json")})  # fmt: skip
    return tasks, trajectories, scores, rows


def _finish(store: RunStore, out: Path, *, task_file_errors: Sequence[str] = (), with_report: bool = True,
            on_progress: OnProgress | None = None) -> tuple[Summary, Path | None]:  # fmt: skip
    """Write ``summary.json`` (and ``report.html``) for everything in the store.

    A report that cannot be written (a full disk, an unwritable folder) is a notice and never costs the
    summary: the trials are already safe in the store and ``toolworld report DIR`` can be run later.
    """
    from .core.files import atomic_write_text
    from .scoring.summary import Summary

    config = store.config
    tasks, trajectories, scores, rows = _rows(store)
    summary = Summary.compute(tasks, trajectories, scores, trials=int(config.get("trials", 1)),
                              world=config.get("world"), policy=config.get("policy"), finished=len(trajectories),
                              task_file_errors=list(task_file_errors))  # fmt: skip
    try:
        atomic_write_text(out / SUMMARY_FILE, summary.to_json())
    except OSError as exc:
        _notify(on_progress, f"could not write {out / SUMMARY_FILE}: {exc}", "error")
    report_path: Path | None = None
    if with_report:
        try:
            from .report import write_report  # without matplotlib it still writes the tables, with a note

            report_path = write_report(out, summary, rows, config=config)
        except Exception as exc:  # the report is a view of the store: never lose the run over it
            _notify(on_progress, f"could not write the report: {type(exc).__name__}: {exc}", "error")
    return summary, report_path


def _open(out: str | Path, *, writer: bool, on_damage: OnDamage | None) -> RunStore:
    from .store import RunStore, StoreError

    try:
        return RunStore.open(out, writer=writer, on_damage=on_damage)
    except StoreError as exc:
        raise _store_error(exc) from exc


def _previous_task_file_errors(out: Path) -> list[str]:
    """The task-file line errors the run recorded in its summary: the task file is not read again when a summary
    is rewritten (it may have changed or gone since), so they are carried over."""
    try:
        errors = json.loads((out / SUMMARY_FILE).read_text(encoding="utf-8")).get("task_file_errors")
    except (OSError, ValueError, AttributeError):
        return []
    return [str(e) for e in errors] if isinstance(errors, list) else []


def finish(out: str | Path, *, report: bool = True, task_file_errors: Sequence[str] | None = None,
           on_progress: OnProgress | None = None, on_damage: OnDamage | None = None) -> tuple[Summary, Path | None]:  # fmt: skip
    """(Re)write ``out/summary.json`` and ``out/report.html`` from the stored run; returns the summary and the
    report path (None when it could not be written: a :class:`Notice` says why). ``task_file_errors`` default to
    those of the summary being replaced."""
    from .store import StoreError

    out = Path(out)
    store = _open(out, writer=False, on_damage=on_damage)
    if task_file_errors is None:
        task_file_errors = _previous_task_file_errors(out)
    try:
        return _finish(store, out, task_file_errors=task_file_errors, with_report=report, on_progress=on_progress)
    except StoreError as exc:
        raise _store_error(exc) from exc
    finally:
        store.close()


def rescore(out: str | Path, *, check: bool = False, on_progress: OnProgress | None = None,
            on_damage: OnDamage | None = None) -> RescoreResult:  # fmt: skip
    """Score every stored trajectory again, without the model (after a scorer change, or to audit a run).

    ``check``: only compare (the folder is not locked, nothing is written); otherwise the new scores replace the
    stored ones and the summary and report are rewritten. ``changed`` lists the (task, trial) pairs whose score
    differs from the stored one.
    """
    from . import scoring
    from .store import StoreError

    out = Path(out)
    store = _open(out, writer=not check, on_damage=on_damage)
    try:
        tasks = {t.id: t for t in store.tasks()}
        new, changed = [], []
        for traj, old, _facts in store.trials():
            score = scoring.score_trajectory(tasks[traj.task_id], traj)
            new.append(score)
            if old is None or old.model_dump(mode="json") != score.model_dump(mode="json"):
                changed.append((traj.task_id, traj.trial))
        if check:
            return RescoreResult(len(new), changed)
        store.replace_scores(new)
        summary, report_path = _finish(store, out, task_file_errors=_previous_task_file_errors(out),
                                       on_progress=on_progress)  # fmt: skip
    except StoreError as exc:
        raise _store_error(exc) from exc
    finally:
        store.close()
    return RescoreResult(len(new), changed, summary, report_path)


# -- exports -----------------------------------------------------------------------------------------------


def export_run(store: RunStore, fmt: str, path: str | Path, *, include_failed: bool = False,
               tokenizer: Any = None, tool_prompt: str | None = None) -> int:  # fmt: skip
    """The store's export (:func:`toolworld.store.export.export_run`), with the run's own policy's tokenizer as the
    default for ``sft``: the one its ``--policy`` spec samples with
    (:func:`toolworld.rollout.backends.tokenizer_source`), so a token-level run renders through its own template
    without being told which, and ``tool_prompt`` likewise (:func:`toolworld.rollout.backends.tool_prompt_of`): the
    exported rows state the tools as the run's model saw them. The store itself knows nothing of policies.

    Raises ``ExportError`` (``no_tokenizer`` when neither ``tokenizer`` nor the run's policy names one, pointing at
    ``--tokenizer`` and ``--format chat``; the store's own kinds otherwise).
    """
    from .store.export import ExportError
    from .store.export import export_run as write_export

    if fmt == "sft" and tokenizer is None:
        from .rollout.backends import tokenizer_source

        spec = store.config.get("policy_spec") or store.config.get("policy")
        try:
            tokenizer = tokenizer_source(spec)
        except ValueError:  # a stored spec that no longer parses names no tokenizer
            tokenizer = None
        if tokenizer is None:
            raise ExportError("no_tokenizer", f"the run's policy {spec!r} has no tokenizer to render with: pass "
                              "--tokenizer FOLDER (the tokenizer of the model to train, a folder with "
                              "tokenizer_config.json, or a .gguf file), or export plain conversations with "
                              "--format chat")  # fmt: skip
    if fmt == "sft" and tool_prompt is None:
        from .rollout.backends import tool_prompt_of

        tool_prompt = tool_prompt_of(store.config.get("policy_spec") or store.config.get("policy"))
    return write_export(store, fmt, path, include_failed=include_failed, tokenizer=tokenizer,
                        tool_prompt=tool_prompt or "auto")  # fmt: skip


def export(out: str | Path, fmt: str = "jsonl", *, output: str | Path | None = None, include_failed: bool = False,
           tokenizer: Any = None, on_damage: OnDamage | None = None, tool_prompt: str | None = None) -> ExportResult:  # fmt: skip
    """Export the run stored in ``out`` for training or analysis: what ``toolworld export`` does.

    ``fmt``: ``jsonl``, ``parquet``, ``chat``, ``sft`` or ``tokens`` (see :mod:`toolworld.store.export`);
    ``output``: the file (default ``out/<DEFAULT_NAMES[fmt]>``); ``include_failed``: unsuccessful trials too
    (``chat``, ``sft``); ``tokenizer`` (``sft`` only): a tokenizer object, folder or .gguf file, default the run's
    own policy's (:func:`export_run`). Everything a caller can get wrong is a :class:`RunError` of the export's
    or the store's kind (``invalid_option``, ``no_tokenizer``, ``bad_tokenizer``, ``no_token_buffers``,
    ``missing_dependency``, ``unwritable_output``, ``damaged_run``, ...); a failed export leaves no file behind.
    """
    from .store import StoreError
    from .store.export import DEFAULT_NAMES, EXPORT_FORMATS, ExportError

    out = Path(out)
    fmt = fmt.strip().lower()
    if fmt not in EXPORT_FORMATS:
        raise RunError(f"--format must be one of {', '.join(EXPORT_FORMATS)}, not {fmt!r}", kind="invalid_option")
    if tokenizer is not None and fmt != "sft":
        raise RunError(f"--tokenizer applies to --format sft only, not {fmt}", kind="invalid_option")
    if tool_prompt is not None:
        from .tokens.template import TOOL_PROMPT_CHOICES

        if fmt != "sft" or tool_prompt not in TOOL_PROMPT_CHOICES:
            raise RunError(f"--tool-prompt applies to --format sft and is one of {', '.join(TOOL_PROMPT_CHOICES)}; "
                           f"got {tool_prompt!r} with --format {fmt}", kind="invalid_option")  # fmt: skip
    store = _open(out, writer=False, on_damage=on_damage)
    target = Path(output) if output is not None else out / DEFAULT_NAMES[fmt]
    try:
        records = export_run(store, fmt, target, include_failed=include_failed, tokenizer=tokenizer,
                             tool_prompt=tool_prompt)  # fmt: skip
    except (ExportError, StoreError) as exc:
        raise RunError(str(exc), kind=exc.kind) from exc
    except OSError as exc:
        raise RunError(f"cannot write {target}: {exc}", kind="unwritable_output") from exc
    finally:
        store.close()
    return ExportResult(target, fmt, records)
