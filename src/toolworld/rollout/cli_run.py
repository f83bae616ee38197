"""The ``toolworld run`` command: run a policy on a task file, K trials per task, trajectories to JSONL.

Every finished (task, trial) is appended to ``DIR/trajectories.jsonl`` and flushed at once, so killing a run
loses only the episodes in flight; ``--resume`` continues such a run where it stopped. Bad task lines are
reported with their line numbers and the good tasks still run.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..clikit import console, err_console, fail, world_or_fail

if TYPE_CHECKING:
    from ..tasks.model import LineError, Task
    from .policy import Policy
    from .trajectory import Trajectory

TRAJECTORIES = "trajectories.jsonl"
SUMMARY = "summary.json"


def register(app: typer.Typer) -> None:
    """Add this module's commands to the top-level app (kept import-light: heavy imports go inside commands)."""
    app.command("run")(run)


def run(
    world: Annotated[str, typer.Argument(help="World name, e.g. retail.")],
    tasks: Annotated[Path, typer.Option("--tasks", help="Task file (JSONL), e.g. from `toolworld tasks generate`.")],
    out: Annotated[Path, typer.Option("--out", help="Output folder for trajectories.jsonl and summary.json.")],
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
    resume: Annotated[bool, typer.Option("--resume", help="Continue a run in --out: skip the (task, trial) pairs "
                                         "already in its trajectories.jsonl.")] = False,
) -> None:
    """Run a policy on tasks (K trials each), write DIR/trajectories.jsonl as episodes finish, print a summary."""
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

    path = out / TRAJECTORIES
    try:
        out.mkdir(parents=True, exist_ok=True)
        previous = _previous_run(path, resume)
    except OSError as exc:
        fail("unwritable_output", f"cannot use {out} as the output folder: {exc}")
    wanted = {(t.id, k) for t in good for k in range(trials)}
    done = {key for key in previous if key in wanted}
    todo = len(wanted) - len(done)
    if done:
        err_console.print(f"resuming: {len(done)} of {len(wanted)} episodes already in {path}", markup=False)

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    written: list[dict[str, Any]] = [previous[key] for key in sorted(done)]
    progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                        TextColumn("{task.fields[status]}"), TimeElapsedColumn(), console=err_console)  # fmt: skip
    interrupted = False
    with path.open("a", encoding="utf-8", newline="\n") as fh, progress:
        bar = progress.add_task(escape(f"{w.name} · {agent.name}"), total=todo, status="")

        def keep(traj: Trajectory) -> None:
            fh.write(traj.to_json())
            fh.write("\n")
            fh.flush()
            written.append(_brief(traj))
            infra = sum(1 for s in written if s["termination"] == "infra_error")
            progress.update(bar, advance=1, status=f"infra errors: {infra}" if infra else "")

        try:
            asyncio.run(run_many(w, good, agent, trials=trials, concurrency=concurrency, limits=limits,
                                 user=simulator, noise=noise, on_done=keep, skip=done))  # fmt: skip
        except KeyboardInterrupt:
            interrupted = True
    summary = _summarize(written, tasks=len(good), trials=trials, policy=agent.name, world=w.name, errors=errors)
    try:
        (out / SUMMARY).write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    except OSError as exc:
        err_console.print(f"could not write {out / SUMMARY}: {exc}", style="red", markup=False)
    _print_summary(summary, path)
    if interrupted:
        err_console.print(f"interrupted: {summary['finished']} episodes kept in {path}; rerun with --resume to finish",
                          style="yellow", markup=False)  # fmt: skip
        raise typer.Exit(130)


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


def _previous_run(path: Path, resume: bool) -> dict[tuple[str, int], dict[str, Any]]:
    """Trajectories already in ``path`` by (task id, trial); refuses to mix runs unless resuming."""
    if not path.exists() or path.stat().st_size == 0:
        return {}
    if not resume:
        fail("output_exists", f"{path} already holds trajectories; pass --resume to continue that run, or choose "
             "another --out.")  # fmt: skip
    data = path.read_bytes()
    if not data.endswith(b"\n"):  # the line in flight when a run was killed: drop it so appends stay aligned
        cut = data.rfind(b"\n") + 1
        with path.open("r+b") as fh:
            fh.truncate(cut)
        data = data[:cut]
    found: dict[tuple[str, int], dict[str, Any]] = {}
    for raw in data.decode("utf-8", errors="replace").splitlines():
        try:
            row = json.loads(raw)
            found[(row["task_id"], int(row["trial"]))] = _brief_dict(row)
        except (json.JSONDecodeError, KeyError, TypeError, ValueError):
            continue
    return found


def _brief(traj: Trajectory) -> dict[str, Any]:
    return {"task_id": traj.task_id, "trial": traj.trial, "termination": traj.termination, "turns": traj.num_turns,
            "tokens": traj.usage.total_tokens, "steps": len(traj.steps), "agent_errors": len(traj.agent_errors)}  # fmt: skip


def _brief_dict(row: dict[str, Any]) -> dict[str, Any]:
    usage = row.get("usage") or {}
    return {"task_id": row["task_id"], "trial": int(row["trial"]), "termination": row.get("termination", ""),
            "turns": len(row.get("turns") or []),
            "tokens": int(usage.get("prompt_tokens", 0)) + int(usage.get("completion_tokens", 0)),
            "steps": len(row.get("steps") or []), "agent_errors": len(row.get("agent_errors") or [])}  # fmt: skip


def _summarize(rows: list[dict[str, Any]], *, tasks: int, trials: int, policy: str, world: str,
               errors: list[LineError]) -> dict[str, Any]:  # fmt: skip
    """Run-level counts (scores come from the scorer, which reads the trajectories)."""
    from .trajectory import TERMINATIONS

    n = len(rows)
    by_reason = {reason: sum(1 for r in rows if r["termination"] == reason) for reason in TERMINATIONS}
    return {
        "world": world,
        "policy": policy,
        "tasks": tasks,
        "trials": trials,
        "episodes": tasks * trials,
        "finished": n,
        "answered": by_reason["answered"],
        "infra_errors": by_reason["infra_error"],
        "terminations": by_reason,
        "mean_turns": round(sum(r["turns"] for r in rows) / n, 3) if n else 0.0,
        "mean_steps": round(sum(r["steps"] for r in rows) / n, 3) if n else 0.0,
        "agent_errors": sum(r["agent_errors"] for r in rows),
        "tokens": sum(r["tokens"] for r in rows),
        "task_file_errors": [str(e) for e in errors],
    }


def _print_summary(s: dict[str, Any], path: Path) -> None:
    from rich.table import Table

    table = Table(title=f"toolworld run · {s['world']} · {s['policy']}")
    for col in ("trials", "finished", "answered", "infra errors", "mean turns", "tokens"):
        table.add_column(col, justify="right")
    table.add_row(f"{s['tasks']} × {s['trials']}", f"{s['finished']}/{s['episodes']}", str(s["answered"]),
                  str(s["infra_errors"]), f"{s['mean_turns']:.1f}", f"{s['tokens']:,}")  # fmt: skip
    console.print(table)
    other = {k: v for k, v in s["terminations"].items() if v and k not in ("answered", "infra_error")}
    if other:
        console.print("other endings: " + ", ".join(f"{k} {v}" for k, v in other.items()), highlight=False)
    if s["task_file_errors"]:
        console.print(f"[yellow]{len(s['task_file_errors'])} task line(s) skipped (listed above)[/yellow]")
    console.print(f"trajectories: {path}", highlight=False, markup=False)
