"""The ``toolworld run`` command: run a policy on a task file, K trials per task, score every trial.

Every finished (task, trial) is scored and committed to the run store (``DIR/run.db``) at once, so killing a
run loses only the episodes in flight; ``--resume`` continues it, re-running only unfinished and infra-errored
trials. At the end ``DIR/summary.json`` and ``DIR/report.html`` are written. Bad task lines are reported with
their line numbers and the good tasks still run.

One process writes a run folder at a time (a second ``run`` or ``--resume`` on it is refused, naming the pid that
holds it). ``--resume`` refuses a configuration that would make different trials (policy and its options, user,
limits, noise, fewer trials, other tasks) and names each difference; damaged rows it finds are reported, run
again, and the readable ones carried over to a healthy file. A run whose trials all ended on infra errors exits 2
with the first cause, since it measured nothing.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from .kit import err_console, fail, world_or_fail

if TYPE_CHECKING:
    from ..records.trajectory import Trajectory
    from ..rollout.policy import Policy
    from ..store import RunStore
    from ..tasks.model import LineError, Task

def register(app: typer.Typer) -> None:
    """Add this module's commands to the top-level app (kept import-light: heavy imports go inside commands)."""
    app.command("run")(run)


def run(
    world: Annotated[str, typer.Argument(help="World name, e.g. retail.")],
    tasks: Annotated[Path, typer.Option("--tasks", help="Task file (JSONL), e.g. from `toolworld tasks generate`.")],
    out: Annotated[Path, typer.Option("--out", help="Run folder: run.db (trials, trajectories, scores), summary.json, report.html.")],
    policy: Annotated[str, typer.Option("--policy", help="Policy SPEC: gold, gold:drop=0.3, openai:MODEL@URL, "
                                        "vllm:MODEL@URL, hf:PATH, gguf:PATH, smollm2 (options after a comma).")] = "gold",
    trials: Annotated[int, typer.Option("--trials", min=1, help="Trials per task (for pass@k).")] = 1,
    concurrency: Annotated[int, typer.Option("--concurrency", min=1, help="Episodes run at once.")] = 8,
    max_turns: Annotated[int, typer.Option("--max-turns", min=1, help="Assistant turns per episode.")] = 30,
    max_tokens: Annotated[int | None, typer.Option("--max-tokens", min=1,
                                                   help="Conversation length in tokens that ends an episode.")] = None,
    time_limit: Annotated[float, typer.Option("--time-limit", min=0.001, help="Wall seconds per episode.")] = 600.0,
    noise_fail: Annotated[float, typer.Option("--noise-fail", min=0.0, max=1.0,
                                              help="Chance a tool call fails transiently.")] = 0.0,
    noise_latency_ms: Annotated[float, typer.Option("--noise-latency-ms", min=0.0,
                                                    help="Mean latency added to each tool call.")] = 0.0,
    noise_truncate: Annotated[float, typer.Option("--noise-truncate", min=0.0, max=1.0,
                                                  help="Chance a tool result is truncated.")] = 0.0,
    noise_seed: Annotated[int, typer.Option("--noise-seed", help="Seed of the injected noise.")] = 0,
    user: Annotated[str, typer.Option("--user", help="User simulator: scripted, or a policy SPEC to play the user "
                                      "with a model (e.g. openai:gpt-4o-mini).")] = "scripted",
    limit: Annotated[int | None, typer.Option("--limit", min=1, help="Run only the first N tasks.")] = None,
    resume: Annotated[bool, typer.Option("--resume", help="Continue the run in --out: re-run only its unfinished and "
                                         "infra-errored trials.")] = False,
) -> None:
    """Run a policy on tasks (K trials each), score each trial as it finishes, then write the summary and report.

    Example: toolworld run retail --tasks tasks.jsonl --policy smollm2 --trials 2 --out runs/smol
    """
    import asyncio

    from rich.markup import escape

    from ..env.noise import NoiseConfig
    from ..rollout.loop import Limits, run_many

    w = world_or_fail(world)
    good, errors = _load_tasks(tasks, w.name)
    for err in errors:
        err_console.print(f"[yellow]{escape(f'{tasks}: {err}')}[/yellow] (skipped)", highlight=False, soft_wrap=True)
    if limit is not None:
        good = good[:limit]
    if not good:
        fail("no_tasks", f"{tasks} has no valid task for world {w.name!r} ({len(errors)} bad line(s)); "
             f"generate some with `toolworld tasks generate {w.name} -n 10 -o tasks.jsonl`.",
             errors=[str(e) for e in errors[:20]])  # fmt: skip
    agent = _policy_or_fail(policy, "policy")
    simulator = _user_or_fail(user)
    try:
        limits = Limits(max_turns=max_turns, max_tokens=max_tokens, max_wall_s=time_limit)
        noise = NoiseConfig(tool_failure_p=noise_fail, latency_ms=noise_latency_ms, truncate_p=noise_truncate,
                            seed=noise_seed)  # fmt: skip
    except ValueError as exc:
        fail("invalid_option", str(exc))

    config = {
        "world": w.name, "policy": agent.name, "policy_spec": redact_spec(policy), "user": redact_spec(user),
        "trials": trials, "task_file": str(tasks), "tasks_digest": tasks_digest(good),
        "limits": {"max_turns": max_turns, "max_tokens": max_tokens, "time_limit_s": time_limit},
        "noise": {"fail": noise_fail, "latency_ms": noise_latency_ms, "truncate": noise_truncate, "seed": noise_seed},
    }  # fmt: skip
    store = _store_or_fail(out, config, good, resume)
    run_tasks = store.tasks()
    by_id = {t.id: t for t in run_tasks}
    wanted = {(t.id, k) for t in run_tasks for k in range(trials)}
    done = store.finished() & wanted
    _rebuild_if_damaged(store)
    todo = len(wanted) - len(done)
    if done:
        err_console.print(f"resuming: {len(done)} of {len(wanted)} trials already finished in {out}; "
                          f"running {todo}", markup=False)  # fmt: skip

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from ..scoring import score_trajectory

    tally = {"success": 0, "scored": 0, "infra": 0}
    first_cause: dict[str, Any] = {}
    progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                        TextColumn("{task.fields[status]}"), TimeElapsedColumn(), console=err_console)  # fmt: skip
    interrupted = False
    with progress:
        bar = progress.add_task(escape(f"{w.name} · {agent.name}"), total=todo, status="")

        def keep(traj: Trajectory) -> None:
            try:
                score = score_trajectory(by_id[traj.task_id], traj)
            except Exception as exc:  # a scorer crash is ours, not the agent's: keep it as an infra error to re-run
                traj = _as_infra_trajectory(traj, "scorer_crash", f"scoring failed: {type(exc).__name__}: {exc}")
                score = score_trajectory(by_id[traj.task_id], traj)
            store.record(traj, score)
            if score.infra_error:
                tally["infra"] += 1
                if not first_cause:
                    first_cause.update(_first_cause(traj))
            else:
                tally["scored"] += 1
                tally["success"] += int(score.success)
            status = f"success {tally['success']}/{tally['scored']}"
            progress.update(bar, advance=1, status=status + (f" · infra errors {tally['infra']}" if tally["infra"] else ""))

        try:
            asyncio.run(run_many(w, run_tasks, agent, trials=trials, concurrency=concurrency, limits=limits,
                                 user=simulator, noise=noise, on_done=keep, skip=done))  # fmt: skip
        except KeyboardInterrupt:
            interrupted = True
    from .store import finish_run, print_run_summary

    summary, report = finish_run(store, out, task_file_errors=[str(e) for e in errors])
    store.close()
    print_run_summary(summary, out, report)
    if interrupted:
        err_console.print(f"interrupted: {summary['finished']} trials kept in {out}; rerun with --resume to finish",
                          style="yellow", markup=False)  # fmt: skip
        raise typer.Exit(130)
    if todo and tally["infra"] and not tally["scored"]:
        _all_infra(tally["infra"], first_cause, out)


def _store_or_fail(out: Path, config: dict[str, Any], tasks: list[Task], resume: bool) -> RunStore:
    """The run store in ``out``, locked for this process: a new one, or (with ``--resume``) the existing one if it
    is the same run (every difference that shapes trials is named)."""
    from ..store import RunStore, StoreError
    from .store import print_damage

    try:
        if not RunStore.exists(out):
            return RunStore.create(out, config, tasks, on_damage=print_damage)
        if not resume:
            fail("output_exists", f"{out} already holds a run; pass --resume to continue it, or choose another --out.")
        store = RunStore.open(out, writer=True, on_damage=print_damage)
    except StoreError as exc:
        fail(exc.kind, str(exc))
    except OSError as exc:
        fail("unwritable_output", f"cannot use {out} as the output folder: {exc}")
    try:
        stored = store.config
        differences = config_differences(stored, config, store.task_ids, [t.id for t in tasks])
    except StoreError as exc:
        store.close()
        fail(exc.kind, str(exc))
    if differences:
        store.close()
        fail("run_mismatch", f"{out} holds a run with another configuration: {'; '.join(differences)}. Resume it "
             "with the same arguments, or choose another --out.", differences=differences)  # fmt: skip
    if stored.get("tasks_digest") == config["tasks_digest"]:
        # The file holds the run's very tasks: a stored task row that is damaged (read and reported here, so the
        # store gets rebuilt) is recovered from it instead of costing its trials.
        try:
            store.task_ids()
        except StoreError as exc:
            store.close()
            fail(exc.kind, str(exc))
        store.use_tasks(tasks)
    if config["trials"] > int(stored.get("trials", 0)):
        store.update_config(trials=config["trials"])
    return store


def _rebuild_if_damaged(store: RunStore) -> None:
    """After a resume read damaged rows: carry what is readable over to a healthy file, since the trials to re-run
    would otherwise be written onto the very pages that are torn."""
    from ..store import StoreError

    if not store.damaged:
        return
    try:
        kept = store.rebuild()
    except (OSError, sqlite3.Error, StoreError) as exc:
        err_console.print(f"could not rebuild the damaged {store.path} ({exc}); continuing in it", style="yellow",
                          markup=False, soft_wrap=True)  # fmt: skip
    else:
        err_console.print(f"{len(store.damaged)} damaged row(s) found: the run's readable rows are now in a fresh "
                          f"{store.path} (unreadable trials run again); the damaged file is kept as {kept}",
                          markup=False, soft_wrap=True)  # fmt: skip


#: What shapes a trial, as (path in the stored configuration, the option that sets it).
RESUME_KEYS = (("world", "WORLD"), ("policy_spec", "--policy"), ("user", "--user"),
               ("limits.max_turns", "--max-turns"), ("limits.max_tokens", "--max-tokens"),
               ("limits.time_limit_s", "--time-limit"), ("noise.fail", "--noise-fail"),
               ("noise.latency_ms", "--noise-latency-ms"), ("noise.truncate", "--noise-truncate"),
               ("noise.seed", "--noise-seed"))  # fmt: skip


def config_differences(stored: dict[str, Any], config: dict[str, Any], run_task_ids: Callable[[], list[str]],
                       file_task_ids: list[str]) -> list[str]:  # fmt: skip
    """Each way ``config`` (this command) differs from ``stored`` (the run's) in what shapes trials, one phrase
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
            out.append(f"{option} {old} -> {new}")
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


def tasks_digest(tasks: list[Task]) -> str:
    """sha256 of the tasks in order: a resumed run must run the very tasks it started with."""
    import hashlib

    h = hashlib.sha256()
    for task in tasks:
        h.update(task.to_json().encode("utf-8", "surrogatepass"))
        h.update(b"\n")
    return h.hexdigest()


def redact_spec(spec: str) -> str:
    """The spec with any ``api_key=`` value hidden: the configuration is stored in run.db and shown in reports."""
    parts = spec.split(",")
    return ",".join(p.split("=", 1)[0] + "=***" if p.strip().lower().startswith("api_key=") else p for p in parts)


def canonical_spec(spec: str) -> str:
    """A spec in one spelling (kind lower-cased, options sorted, keys hidden), so that resuming with
    ``gold:seed=1,drop=0.3`` after ``gold:drop=0.3,seed=1`` is not taken for another policy."""
    head, *options = redact_spec(spec.strip()).split(",")
    kind, _sep, target = head.partition(":")
    kind, target = kind.strip().lower(), target.strip()
    if kind == "gold" and "=" in target:  # 'gold:drop=0.3': the first option sits where a target would
        options, target = [target, *options], ""
    opts = sorted(o.strip().replace(" ", "") for o in options if o.strip())
    return ",".join([kind + (f":{target}" if target else ""), *opts])


def _as_infra_trajectory(traj: Trajectory, kind: str, message: str) -> Trajectory:
    entry = {"kind": kind, "message": message[:1000], "retryable": True, "source": "loop", "turn": None,
             "attempt": 0, "fatal": True}  # fmt: skip
    return traj.model_copy(update={"termination": "infra_error", "infra_errors": [*traj.infra_errors, entry]})


def _first_cause(traj: Trajectory) -> dict[str, Any]:
    """The infra error that ended ``traj`` (its fatal one, else the last), as {kind, message}."""
    errors = traj.infra_errors
    cause = next((e for e in errors if e.get("fatal")), errors[-1] if errors else {})
    return {"kind": str(cause.get("kind", "unknown")), "message": str(cause.get("message", "no message recorded")),
            "task_id": traj.task_id, "trial": traj.trial}  # fmt: skip


def _all_infra(n: int, cause: dict[str, Any], out: Path) -> None:
    """Every trial of this run ended on an infra error: nothing was measured, so say why and exit 2."""
    import json

    message = (f"all {n} trial(s) ended on infra errors, nothing was scored; first cause ({cause.get('kind')}, task "
               f"{cause.get('task_id')} trial {cause.get('trial')}): {cause.get('message')}. Fix it, then rerun with "
               f"--out {out} --resume")  # fmt: skip
    err_console.print(message, style="red", markup=False, highlight=False, soft_wrap=True)
    print(json.dumps({"error": {"type": "all_trials_infra_error", "message": message, "cause": cause}},
                     ensure_ascii=False))  # fmt: skip
    raise typer.Exit(2)


def _load_tasks(path: Path, world: str) -> tuple[list[Task], list[LineError]]:
    """Good tasks of ``world`` and per-line errors (bad JSON, invalid task, other world, duplicate id)."""
    from ..tasks.model import LineError, TaskSet

    try:
        task_set = TaskSet.load(path)
    except FileNotFoundError:
        fail("file_not_found", f"task file {path} does not exist; create one with `toolworld tasks generate "
             f"{world} -n 10 -o {path}`.")  # fmt: skip
    except (OSError, UnicodeDecodeError) as exc:
        fail("unreadable_file", f"cannot read task file {path}: {exc}")
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
    return good, errors


def _policy_or_fail(spec: str, what: str) -> Policy:
    from ..rollout.backends import make_policy
    from ..rollout.policy import InfraError

    try:
        return make_policy(spec)
    except ValueError as exc:
        fail(f"bad_{what}_spec", str(exc))
    except InfraError as exc:
        fail(f"{what}_unavailable", str(exc))
    except ImportError as exc:
        fail("missing_dependency", f"--{what} {spec} needs a package that is not installed ({exc}); "
             "try pip install 'toolworld[models]'.")  # fmt: skip
    except Exception as exc:
        fail(f"{what}_error", f"cannot start --{what} {spec}: {type(exc).__name__}: {exc}")


def _user_or_fail(spec: str) -> Any:
    from ..env.user import LLMUser, ScriptedUser

    if spec.strip().lower() == "scripted":
        return ScriptedUser()
    return LLMUser(_policy_or_fail(spec, "user"))
