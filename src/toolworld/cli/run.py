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

The work itself is :func:`toolworld.pipeline.run`; this module parses options, draws progress and maps the
pipeline's errors to structured errors and exit codes (1 for a usage error, 130 on Ctrl-C, 2 when every trial
ended on an infra error).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ClassVar

import typer

from .kit import NoiseFail, NoiseLatencyMs, NoiseSeed, NoiseTruncate, err_console, fail, fail_with, world_or_fail
from .store import print_damage, print_run_summary

if TYPE_CHECKING:
    from .. import pipeline
    from ..rollout.policy import Policy


def register(app: typer.Typer) -> None:
    """Add this module's commands to the top-level app (kept import-light: heavy imports go inside commands)."""
    app.command("run")(run)
    app.command("policies")(policies)


def policies(as_json: Annotated[bool, typer.Option("--json", help="Print JSON for machines instead of a table.")]
             = False) -> None:  # fmt: skip
    """List the policy kinds --policy accepts: built in, and those installed packages register (entry-point group
    toolworld.policies), each with its spec form and options."""
    from rich.table import Table

    from ..rollout.backends import POLICIES, policy_kinds

    kinds = policy_kinds()
    if as_json:
        print(json.dumps(kinds, indent=2, ensure_ascii=False))
        return
    table = Table(title=f"policy kinds ({len(POLICIES)})")
    for col in ("kind", "spec", "options", "what runs", "from"):
        table.add_column(col, overflow="fold")
    for k in kinds:
        options = "any" if k["options"] is None else ", ".join(k["options"]) or "none"
        table.add_row(k["kind"], k["usage"], options, k["help"], k["origin"])
    from .kit import console

    console.print(table)


def run(
    world: Annotated[str, typer.Argument(help="World name, e.g. retail.")],
    tasks: Annotated[Path, typer.Option("--tasks", help="Task file (JSONL), e.g. from `toolworld tasks generate`.")],
    out: Annotated[Path, typer.Option("--out", help="Run folder: run.db (trials, trajectories, scores), summary.json, report.html.")],
    policy: Annotated[str, typer.Option("--policy", help="Policy SPEC: gold, gold:drop=0.3, openai:MODEL@URL, "
                                        "vllm:MODEL@URL, hf:PATH, gguf:PATH, smollm2 (options after a comma); "
                                        "`toolworld policies` lists every kind, plugins included.")] = "gold",
    trials: Annotated[int, typer.Option("--trials", min=1, help="Trials per task (for pass@k).")] = 1,
    concurrency: Annotated[int, typer.Option("--concurrency", min=1, help="Episodes run at once.")] = 8,
    max_turns: Annotated[int, typer.Option("--max-turns", min=1, help="Assistant turns per episode.")] = 30,
    max_tokens: Annotated[int | None, typer.Option("--max-tokens", min=1,
                                                   help="Conversation length in tokens that ends an episode.")] = None,
    time_limit: Annotated[float | None, typer.Option(
        "--time-limit", min=0.001, help="Wall seconds per episode, counted against the agent (ends it as `timeout`, "
        "reward 0); off by default, since the clock also measures the machine's load.")] = None,
    noise_fail: NoiseFail = 0.0,
    noise_latency_ms: NoiseLatencyMs = 0.0,
    noise_truncate: NoiseTruncate = 0.0,
    noise_seed: NoiseSeed = 0,
    user: Annotated[str, typer.Option("--user", help="User simulator: scripted, or a policy SPEC to play the user "
                                      "with a model (e.g. openai:gpt-4o-mini).")] = "scripted",
    limit: Annotated[int | None, typer.Option("--limit", min=1, help="Run only the first N tasks.")] = None,
    resume: Annotated[bool, typer.Option("--resume", help="Continue the run in --out: re-run only its unfinished and "
                                         "infra-errored trials.")] = False,
) -> None:
    """Run a policy on tasks (K trials each), score each trial as it finishes, then write the summary and report.

    Example: toolworld run retail --tasks tasks.jsonl --policy smollm2 --trials 2 --out runs/smol
    """
    from rich.markup import escape

    from .. import pipeline
    from ..env import Limits, NoiseConfig

    w = world_or_fail(world)
    try:
        task_file = pipeline.load_tasks(tasks, w.name)
        for err in task_file.errors:
            err_console.print(f"[yellow]{escape(f'{tasks}: {err}')}[/yellow] (skipped)", highlight=False,
                              soft_wrap=True)  # fmt: skip
        pipeline.select_tasks(task_file, limit)  # no task to run is said before any model is loaded
    except pipeline.RunError as exc:
        fail_with(exc)
    agent = _policy_or_fail(policy, "policy")
    simulator = _user_or_fail(user)
    try:
        limits = Limits(max_turns=max_turns, max_tokens=max_tokens, max_wall_s=time_limit)
        noise = NoiseConfig(tool_failure_p=noise_fail, latency_ms=noise_latency_ms, truncate_p=noise_truncate,
                            seed=noise_seed)  # fmt: skip
    except ValueError as exc:
        fail("invalid_option", str(exc))

    view = _ProgressView()
    try:
        result = pipeline.run(w, task_file, agent, out=out, trials=trials, concurrency=concurrency, limits=limits,
                              user=simulator, noise=noise, resume=resume, limit=limit, on_progress=view,
                              policy_spec=policy, user_spec=user, on_damage=print_damage)  # fmt: skip
    except pipeline.RunError as exc:
        fail_with(exc)
    finally:
        view.stop()
    print_run_summary(result.summary, out, result.report)
    if result.interrupted:
        err_console.print(f"interrupted: {result.summary.finished} trials kept in {out}; rerun with --resume to "
                          "finish", style="yellow", markup=False)  # fmt: skip
        raise typer.Exit(130)
    nothing = pipeline.all_infra_error(result)
    if nothing is not None:  # every trial ended on an infra error: nothing was measured, so say why and exit 2
        err_console.print(str(nothing), style="red", markup=False, highlight=False, soft_wrap=True)
        print(json.dumps({"error": nothing.to_dict()}, ensure_ascii=False))
        raise typer.Exit(2)


class _ProgressView:
    """Draws a run's progress events: a Rich bar with the success tally, and notices on stderr."""

    STYLES: ClassVar[dict[str, str | None]] = {"info": None, "warning": "yellow", "error": "red"}

    def __init__(self) -> None:
        self.progress: Any = None
        self.bar: Any = None

    def __call__(self, event: pipeline.RunEvent) -> None:
        from .. import pipeline

        if isinstance(event, pipeline.TrialFinished):
            self.progress.update(self.bar, advance=1, status=event.status)
        elif isinstance(event, pipeline.Notice):
            err_console.print(event.message, style=self.STYLES[event.level], markup=False, soft_wrap=True)
        elif isinstance(event, pipeline.RunStarted):
            from rich.markup import escape
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            if event.already_done:
                err_console.print(f"resuming: {event.already_done} of {event.wanted} trials already finished in "
                                  f"{event.out}; running {event.total}", markup=False)  # fmt: skip
            self.progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                                     TextColumn("{task.fields[status]}"), TimeElapsedColumn(), console=err_console)  # fmt: skip
            self.progress.start()
            self.bar = self.progress.add_task(escape(f"{event.world} · {event.policy}"), total=event.total, status="")

    def stop(self) -> None:
        if self.progress is not None:
            self.progress.stop()
            self.progress = None


def _policy_or_fail(spec: str, what: str) -> Policy:
    """The policy of a spec, or its structured error (``bad_policy_spec``, ``policy_unavailable``, ...)."""
    from .. import pipeline

    try:
        return pipeline.make_policy(spec, role="user" if what == "user" else "policy")
    except pipeline.RunError as exc:
        fail_with(exc)


def _user_or_fail(spec: str) -> Any:
    from .. import pipeline

    return pipeline.make_user(spec, policy_factory=lambda s: _policy_or_fail(s, "user"))
