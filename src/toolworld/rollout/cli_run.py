"""The ``toolworld run`` command: run a policy on a task file, K trials per task, score every trial.

Every finished (task, trial) is scored and committed to the run store (``DIR/run.db``) at once, so killing a
run loses only the episodes in flight; ``--resume`` continues it, re-running only unfinished and infra-errored
trials. At the end ``DIR/summary.json`` and ``DIR/report.html`` are written. Bad task lines are reported with
their line numbers and the good tasks still run.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..clikit import err_console, fail, world_or_fail

if TYPE_CHECKING:
    from ..store import RunStore
    from ..tasks.model import LineError, Task
    from .policy import Policy
    from .trajectory import Trajectory

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

    from .loop import Limits, run_many
    from .noise import NoiseConfig

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
        "world": w.name, "policy": agent.name, "policy_spec": policy, "user": user, "trials": trials,
        "task_file": str(tasks), "limits": {"max_turns": max_turns, "max_tokens": max_tokens, "time_limit_s": time_limit},
        "noise": {"fail": noise_fail, "latency_ms": noise_latency_ms, "truncate": noise_truncate, "seed": noise_seed},
    }  # fmt: skip
    store = _store_or_fail(out, config, good, resume)
    run_tasks = store.tasks()
    by_id = {t.id: t for t in run_tasks}
    wanted = {(t.id, k) for t in run_tasks for k in range(trials)}
    done = store.finished() & wanted
    todo = len(wanted) - len(done)
    if done:
        err_console.print(f"resuming: {len(done)} of {len(wanted)} trials already finished in {out}; "
                          f"running {todo}", markup=False)  # fmt: skip

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from ..score import score_trajectory

    tally = {"success": 0, "scored": 0, "infra": 0}
    progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                        TextColumn("{task.fields[status]}"), TimeElapsedColumn(), console=err_console)  # fmt: skip
    interrupted = False
    with progress:
        bar = progress.add_task(escape(f"{w.name} · {agent.name}"), total=todo, status="")

        def keep(traj: Trajectory) -> None:
            score = score_trajectory(by_id[traj.task_id], traj)
            store.record(traj, score)
            if score.infra_error:
                tally["infra"] += 1
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
    from ..store.cli import finish_run, print_run_summary

    summary, report = finish_run(store, out, task_file_errors=[str(e) for e in errors])
    store.close()
    print_run_summary(summary, out, report)
    if interrupted:
        err_console.print(f"interrupted: {summary['finished']} trials kept in {out}; rerun with --resume to finish",
                          style="yellow", markup=False)  # fmt: skip
        raise typer.Exit(130)


def _store_or_fail(out: Path, config: dict[str, Any], tasks: list[Task], resume: bool) -> RunStore:
    """The run store in ``out``: a new one, or (with ``--resume``) the existing one if it is the same run."""
    from ..store import RunStore, StoreError

    try:
        if not RunStore.exists(out):
            return RunStore.create(out, config, tasks)
        if not resume:
            fail("output_exists", f"{out} already holds a run; pass --resume to continue it, or choose another --out.")
        store = RunStore.open(out)
    except StoreError as exc:
        fail(exc.kind, str(exc))
    except OSError as exc:
        fail("unwritable_output", f"cannot use {out} as the output folder: {exc}")
    stored = store.config
    for key in ("world", "policy_spec", "user"):
        if stored.get(key) != config[key]:
            store.close()
            fail("run_mismatch", f"{out} holds a run with {key}={stored.get(key)!r}, not {config[key]!r}; resume it "
                 "with the same arguments, or choose another --out.")  # fmt: skip
    missing = sorted({t.id for t in tasks} - set(store.task_ids()))
    if missing:
        store.close()
        fail("run_mismatch", f"{len(missing)} task(s) of the task file are not in the run in {out} (e.g. "
             f"{missing[0]}); resume with the run's own task file, or choose another --out.")  # fmt: skip
    if config["trials"] > int(stored.get("trials", 0)):
        store.update_config(trials=config["trials"])
    return store


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
    from .backends import make_policy
    from .policy import InfraError

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
    from .user import LLMUser, ScriptedUser

    if spec.strip().lower() == "scripted":
        return ScriptedUser()
    return LLMUser(_policy_or_fail(spec, "user"))
