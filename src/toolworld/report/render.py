"""``render_report`` and ``write_report``: a run's summary and episodes as one self-contained HTML file.

The file must open anywhere, offline, years later: no CDN script, font or image, everything inline, and a
Content-Security-Policy that forbids the page any network access (``default-src 'none'``) and lets only the
report's own script run (by its hash), so even text a model wrote that slipped into the markup could neither
fetch nor execute anything. The summary is server-rendered (tables, numbers, SVG plots) so it reads without
JavaScript; the trajectory viewer is a small script over the embedded JSON (see :mod:`.data`).

Every summary key is optional: a missing or malformed entry shows ``—`` or drops its panel, so a report of
a half-finished or crashed run still renders.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.files import atomic_write_text
from ..tasks.model import DEMANDS
from . import plots
from .data import json_safe, plain, script_json, viewer_data
from .plots import Chart, counts, k_series, number, rate_groups, step_counts

if TYPE_CHECKING:
    from ..scoring.summary import Summary

DASH = "—"
#: Config keys shown first, in this order; any other key follows by name.
CONFIG_ORDER = ("world", "policy", "user", "trials", "task_file", "started_at", "limits", "noise")


@dataclass(frozen=True, slots=True)
class Card:
    """A headline number."""

    id: str
    label: str
    value: str
    detail: str = ""


@dataclass(slots=True)
class Table:
    """A compact table; ``numeric`` columns are right-aligned."""

    headers: list[str]
    rows: list[list[str]] = field(default_factory=list)
    numeric: frozenset[int] = frozenset()


@dataclass(slots=True)
class Panel:
    """One box of the summary: a plot, the numbers behind it, or both. Empty panels are not shown."""

    id: str
    title: str
    blurb: str
    chart: Chart | None = None
    tables: list[Table] = field(default_factory=list)
    chart_expected: bool = False  # a plot belongs here but matplotlib is not installed

    @property
    def empty(self) -> bool:
        return self.chart is None and not any(t.rows for t in self.tables)


# -- formatting --------------------------------------------------------------------------------------------


def pct(value: Any) -> str:
    v = number(value)
    return DASH if v is None else f"{v * 100:.1f}%"


def count(value: Any) -> str:
    v = number(value)
    return DASH if v is None else f"{round(v):,}"


def decimal(value: Any, places: int = 3) -> str:
    v = number(value)
    return DASH if v is None else f"{v:.{places}f}"


def seconds(value: Any) -> str:
    v = number(value)
    if v is None:
        return DASH
    return f"{v * 1000:.1f} ms" if abs(v) < 1 else f"{v:.2f} s"


def config_value(value: Any) -> str:
    """Config values as short text: scalars as is, containers as compact JSON."""
    if value is None or value == "" or value == {} or value == []:
        return DASH
    if isinstance(value, (str, int, float, bool)):
        return str(value)
    return json.dumps(json_safe(plain(value)), ensure_ascii=False, separators=(", ", ": "), sort_keys=True)


def _mapping(value: Any) -> Mapping[str, Any]:
    value = plain(value)
    return value if isinstance(value, Mapping) else {}


# -- the summary -------------------------------------------------------------------------------------------


def headline(summary: Mapping[str, Any]) -> list[Card]:
    """The numbers a reader wants first: how often it works, how reliably, and what was left out."""
    hat, at = k_series(summary.get("pass_hat_k")), k_series(summary.get("pass_at_k"))
    scored, episodes = summary.get("scored"), summary.get("episodes")
    cards = [Card("card-success-rate", "Success rate", pct(summary.get("success_rate")),
                  f"{count(scored)} scored of {count(episodes)} episodes" if number(scored) is not None else "")]  # fmt: skip
    if hat:
        k, v = hat[-1]
        cards.append(Card("card-pass-hat-k", f"pass^{k}", pct(v), f"all {k} trials of a task succeed"))
    else:
        cards.append(Card("card-pass-hat-k", "pass^k", DASH))
    if at:
        k, v = at[-1]
        cards.append(Card("card-pass-at-k", f"pass@{k}", pct(v), f"at least one of {k} trials succeeds"))
    cards.append(Card("card-mean-reward", "Mean reward", decimal(summary.get("mean_reward"))))
    tasks, trials = summary.get("tasks"), summary.get("trials")
    detail = f"{count(tasks)} tasks × {count(trials)} trials" if number(tasks) is not None else ""
    cards.append(Card("card-episodes", "Episodes", count(episodes), detail))
    cards.append(Card("card-infra-errors", "Infra errors", count(summary.get("infra_errors")),
                      "excluded from scoring"))  # fmt: skip
    return cards


def warnings(summary: Mapping[str, Any]) -> list[str]:
    """Things about the run a reader must not miss: task-file lines that were skipped, unfinished trials."""
    out: list[str] = []
    errors = summary.get("task_file_errors")
    if isinstance(errors, list) and errors:
        shown = "; ".join(str(e) for e in errors[:5]) + (f"; and {len(errors) - 5} more" if len(errors) > 5 else "")
        out.append(f"{len(errors)} task-file line(s) could not be read and were skipped: {shown}")
    integrity = _mapping(summary.get("token_integrity"))
    lost = [f"{count(integrity.get(key))} {what}" for key, what in (
        ("bridge_breaks", "template bridge break(s) (new messages re-rendered, not appended as a delta)"),
        ("divergences", "buffer divergence(s) from a full render"),
        ("turns_without_sampled_ids", "token-level turn(s) without sampled ids")) if number(integrity.get(key))]  # fmt: skip
    if lost:
        out.append("The token record is not exact everywhere: " + "; ".join(lost) + ". Check these episodes before "
                   "training on them.")  # fmt: skip
    finished = number(summary.get("finished"))
    finished = number(summary.get("episodes")) if finished is None else finished
    trials, tasks = number(summary.get("trials")), number(summary.get("tasks"))
    if finished is not None and trials is not None and tasks is not None and finished < trials * tasks:
        out.append(f"The run is incomplete: {count(finished)} of {count(trials * tasks)} trials finished.")
    return out


def run_config(config: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The run configuration as (key, text) pairs: the usual keys first, then whatever else was given."""
    keys = [k for k in CONFIG_ORDER if k in config] + sorted(str(k) for k in config if k not in CONFIG_ORDER)
    return [(k, config_value(config.get(k))) for k in keys]


def _rate_table(first: str, rows: list[tuple[str, int, float]]) -> Table:
    return Table([first, "episodes", "success"], [[name, count(n), pct(rate)] for name, n, rate in rows],
                 frozenset({1, 2}))  # fmt: skip


def _count_table(first: str, second: str, rows: list[tuple[str, int]]) -> Table:
    return Table([first, second], [[name, count(n)] for name, n in rows], frozenset({1}))


def _tool_errors(summary: Mapping[str, Any]) -> Table:
    table = Table(["tool", "calls", "errors", "rate", "types"], numeric=frozenset({1, 2, 3}))
    stats = _mapping(summary.get("tool_errors"))
    ordered = sorted(stats.items(), key=lambda kv: (-(number(_mapping(kv[1]).get("errors")) or 0), str(kv[0])))
    for tool, entry in ordered:
        entry = _mapping(entry)
        types = ", ".join(f"{t} {n}" for t, n in counts(entry.get("types")))
        table.rows.append([str(tool), count(entry.get("calls")), count(entry.get("errors")), pct(entry.get("rate")),
                           types or DASH])  # fmt: skip
    return table


def _component_table(summary: Mapping[str, Any]) -> Table:
    table = Table(["component", "episodes", "passed"], numeric=frozenset({1, 2}))
    for name, entry in sorted(_mapping(summary.get("components")).items()):
        entry = _mapping(entry)
        table.rows.append([str(name), count(entry.get("n")), pct(entry.get("pass_rate"))])
    return table


def _chart(build: Callable[..., Chart | None], *args: Any) -> Chart | None:
    return build(*args) if plots.available() else None


def panels(summary: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]) -> list[Panel]:
    """The summary panels in reading order, each with its plot and the numbers behind it."""
    have_plots = plots.available()
    hat, at = k_series(summary.get("pass_hat_k")), k_series(summary.get("pass_at_k"))
    ks = sorted({k for k, _ in hat} | {k for k, _ in at})
    hat_d, at_d = dict(hat), dict(at)
    pass_table = Table(["k", "pass^k", "pass@k"], [[str(k), pct(hat_d.get(k)), pct(at_d.get(k))] for k in ks],
                       frozenset({0, 1, 2}))  # fmt: skip

    noise = _mapping(summary.get("noise"))
    noise_table = Table(["", "value"], numeric=frozenset({1}))
    for label, key, fmt in (("episodes with noise", "episodes_with_noise", count),
                            ("success with noise", "success_rate_with_noise", pct),
                            ("success without noise", "success_rate_without_noise", pct),
                            ("episodes with gold perturbations", "episodes_with_perturbations", count)):  # fmt: skip
        if key in noise:
            noise_table.rows.append([label, fmt(noise.get(key))])

    tokens, latency = _mapping(summary.get("tokens")), _mapping(summary.get("latency"))
    cost_table = Table(["", "value"], numeric=frozenset({1}))
    for label, source, key, fmt in (("prompt tokens", tokens, "prompt", count),
                                    ("completion tokens", tokens, "completion", count),
                                    ("tokens per episode (mean)", tokens, "per_episode_mean", count),
                                    ("turn latency (mean)", latency, "turn_mean_s", seconds),
                                    ("episode time (mean)", latency, "episode_mean_s", seconds),
                                    ("episode time (p90)", latency, "episode_p90_s", seconds)):  # fmt: skip
        if key in source:
            cost_table.rows.append([label, fmt(source.get(key))])
    integrity = _mapping(summary.get("token_integrity"))
    for label, key in (("template bridge breaks", "bridge_breaks"), ("buffer divergences", "divergences"),
                       ("turns without sampled ids", "turns_without_sampled_ids"),
                       ("logprobs re-scored after sampling", "rescored_logprobs"),
                       ("tool-call ids renamed", "renamed_call_ids"),
                       ("episodes with any of these", "episodes_affected")):  # fmt: skip
        if key in integrity:
            cost_table.rows.append([label, count(integrity.get(key))])
    wall, toks = episode_costs(rows)

    out = [
        Panel("panel-pass-k", "Reliability: pass^k and pass@k",
              "pass^k: a task succeeds in all k trials; pass@k: in at least one. The gap between them is how "
              "unreliable the agent is.", _chart(plots.pass_k_chart, summary), [pass_table], bool(ks)),
        Panel("panel-difficulty", "Success by difficulty", "Episodes and success rate per difficulty level.",
              _chart(plots.difficulty_chart, summary),
              [_rate_table("level", rate_groups(summary.get("by_difficulty"), ("easy", "medium", "hard")))],
              bool(summary.get("by_difficulty"))),
        Panel("panel-target-tool", "Success by target tool", "The tool whose use a task was built around.",
              _chart(plots.target_tool_chart, summary),
              [_rate_table("tool", rate_groups(summary.get("by_target_tool")))], bool(summary.get("by_target_tool"))),
        Panel("panel-kind", "Success by task kind", "Action, refusal and information tasks.", None,
              [_rate_table("kind", rate_groups(summary.get("by_kind"), ("action", "refusal", "info")))]),
        Panel("panel-demand", "Success by reasoning demand",
              "What a task asks beyond calling the obvious tool (an order described instead of named, details "
              "given piecemeal, ...); a task counts under each demand it makes, \"none\" when it makes none.", None,
              [_rate_table("demand", rate_groups(summary.get("by_demand"), ("none", *DEMANDS)))],
              bool(summary.get("by_demand"))),
        Panel("panel-components", "Reward components", "How often each part of the reward passed, and which "
              "kinds of state error the failures had.", None,
              [_component_table(summary), _count_table("failure", "episodes", counts(summary.get("failures")))]),
        Panel("panel-divergence", "Where episodes diverged",
              "The first tool call (0-based) at which an episode left the gold path.",
              _chart(plots.divergence_chart, summary),
              [_count_table("step", "episodes", step_counts(summary.get("divergence")))],
              bool(summary.get("divergence"))),
        Panel("panel-errors", "Tool errors", "Errors the agent's tool calls returned, by type and by tool.",
              _chart(plots.error_types_chart, summary),
              [_count_table("error type", "count", counts(summary.get("error_types"))), _tool_errors(summary)],
              bool(summary.get("error_types"))),
        Panel("panel-terminations", "Why episodes ended", "Termination reasons over all episodes.",
              _chart(plots.terminations_chart, summary),
              [_count_table("reason", "episodes", counts(summary.get("terminations")))],
              bool(summary.get("terminations"))),
        Panel("panel-noise", "Noise effects", "Injected tool failures, latency and truncation, and what they cost.",
              _chart(plots.noise_chart, summary), [noise_table], bool(noise)),
        Panel("panel-cost", "Cost", "Tokens and time; the histograms are per episode.",
              _chart(plots.cost_chart, wall, toks), [cost_table], bool(wall)),
    ]  # fmt: skip
    for panel in out:
        panel.chart_expected = panel.chart_expected and not have_plots
    return [p for p in out if not p.empty]


def episode_costs(rows: Sequence[Mapping[str, Any]]) -> tuple[list[float], list[int]]:
    """Per-episode wall time and total tokens, read from the trajectories (the summary has only aggregates)."""
    wall: list[float] = []
    toks: list[int] = []
    for row in rows:
        traj = _mapping(_mapping(row).get("trajectory"))
        w = number(traj.get("wall_s"))
        if w is not None:
            wall.append(w)
        usage = _mapping(traj.get("usage"))
        toks.append(int((number(usage.get("prompt_tokens")) or 0) + (number(usage.get("completion_tokens")) or 0)))
    return wall, toks


# -- the learning curve ------------------------------------------------------------------------------------

#: Written into the run folder of each evaluation in a staged training run (base, SFT, RFT, GRPO, ...), so the
#: report of every stage shows the curve so far; see :func:`load_learning` for its shape.
LEARNING_FILE = "learning.json"
#: How far a rounded interval bound may sit past its point before the entry counts as wrong.
_BOUND_SLACK = 1e-6


class LearningError(ValueError):
    """``learning.json`` is there but cannot be shown; the message names the entry and what is wrong with it."""


def load_learning(run_dir: str | Path) -> dict[str, Any] | None:
    """The validated learning curve of ``run_dir/learning.json``, or None when the folder has no such file.

    Raises :class:`LearningError` when the file cannot be read, is not JSON, or does not have the shape
    :func:`validate_learning` checks, so the program that wrote it can check it the way the report reads it.
    """
    path = Path(run_dir) / LEARNING_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeError) as exc:
        raise LearningError(f"cannot read {path}: {exc}") from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise LearningError(f"not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})") from exc
    return validate_learning(data)


def _optional(entry: Mapping[str, Any], key: str, where: str, *, low: float = 0.0,
              high: float = math.inf) -> float | None:  # fmt: skip
    value = entry.get(key)
    if value is None:
        return None
    v = number(value)
    if v is None or not low <= v <= high:
        bounds = f"from {low:g} to {high:g}" if math.isfinite(high) else f"at least {low:g}"
        raise LearningError(f"{where}{key} is {json.dumps(value)[:40]}; it must be a number {bounds}")
    return v


def _text(entry: Mapping[str, Any], key: str, where: str) -> str | None:
    value = entry.get(key)
    if value is not None and not isinstance(value, str):
        raise LearningError(f"{where}{key} is {json.dumps(value)[:40]}; it must be a string")
    return value


def validate_learning(data: Any) -> dict[str, Any]:
    """Check a parsed ``learning.json`` and return it normalized; raise :class:`LearningError` saying what is wrong.

    The shape: ``{"title"?, "metric"?, "heldout_tasks"?, "stages": [{"name", "pass1", "lo"?, "hi"?, "n"?,
    "train_wall_s"?, "eval_wall_s"?, "run"?}, ...], "goal"?: {name: number}}``, stages in training order, rates
    as fractions in [0, 1] and ``lo <= pass1 <= hi`` when the interval is given (both bounds or neither).
    Unknown keys are ignored so the writer may add more; a known key with a wrong value is an error rather than
    a silently dropped point, because a curve with a missing stage would read as a different result.
    """
    if not isinstance(data, Mapping):
        raise LearningError(f"the top level is a {type(data).__name__}; it must be a JSON object")
    stages = data.get("stages")
    if not isinstance(stages, list):
        got = "missing" if stages is None else f"a {type(stages).__name__}"
        raise LearningError(f"stages is {got}; it must be a list of stage objects")
    if not stages:
        raise LearningError("stages is empty; it must list at least one stage")
    goal = data.get("goal")
    if goal is not None and not isinstance(goal, Mapping):
        raise LearningError(f"goal is a {type(goal).__name__}; it must be an object of numbers")
    out: dict[str, Any] = {
        "title": _text(data, "title", ""),
        "metric": _text(data, "metric", "") or "held-out pass^1",
        "heldout_tasks": _optional(data, "heldout_tasks", ""),
        "goal": {str(k): _optional(goal, k, "goal.", low=-math.inf) for k in goal} if goal else {},
        "stages": [],
    }
    for i, stage in enumerate(stages):
        where = f"stages[{i}]."
        if not isinstance(stage, Mapping):
            raise LearningError(f"stages[{i}] is a {type(stage).__name__}; it must be an object")
        name = stage.get("name")
        if not isinstance(name, str) or not name.strip():
            raise LearningError(f"{where}name is {json.dumps(name)[:40]}; it must be a non-empty string")
        if stage.get("pass1") is None:
            raise LearningError(f"{where}pass1 is missing; it must be a number from 0 to 1")
        pass1 = _optional(stage, "pass1", where, high=1.0)
        lo, hi = _optional(stage, "lo", where, high=1.0), _optional(stage, "hi", where, high=1.0)
        if (lo is None) != (hi is None):
            raise LearningError(f"{where}{'hi' if hi is None else 'lo'} is missing; give both lo and hi, or neither")
        if lo is not None and hi is not None and pass1 is not None \
                and not lo - _BOUND_SLACK <= pass1 <= hi + _BOUND_SLACK:  # fmt: skip
            raise LearningError(f"{where}pass1 {pass1:g} is outside its interval [{lo:g}, {hi:g}]")
        out["stages"].append({
            "name": name, "pass1": pass1, "lo": lo, "hi": hi, "n": _optional(stage, "n", where),
            "train_wall_s": _optional(stage, "train_wall_s", where),
            "eval_wall_s": _optional(stage, "eval_wall_s", where), "run": _text(stage, "run", where),
        })  # fmt: skip
    return out


def current_stages(curve: Mapping[str, Any], run_name: str) -> list[int]:
    """Indices of the stages evaluated by the run folder named ``run_name`` (a stage's ``run``, compared by
    its last path part so ``"OUT/eval-sft"`` and ``"eval-sft"`` both match the folder ``eval-sft``)."""
    return [i for i, s in enumerate(curve.get("stages") or ())
            if s.get("run") and run_name and Path(s["run"]).name == run_name]  # fmt: skip


def duration(value: Any) -> str:
    """Training times run from seconds to hours; shown in the unit that keeps them short."""
    v = number(value)
    if v is None:
        return DASH
    if v == 0:
        return "0 s"
    if v < 120:
        return seconds(v)
    return f"{v / 60:.1f} min" if v < 7200 else f"{v / 3600:.1f} h"


def learning_panel(curve: Mapping[str, Any], run_name: str = "") -> Panel:
    """The "Learning curve" panel: the chart and, always, the table behind it (stage, rate, interval, change
    from the previous stage, tasks, train time), the stage this run evaluates marked in both."""
    stages = list(curve.get("stages") or ())
    current = set(current_stages(curve, run_name))
    table = Table(["stage", "pass^1", "95% interval", "change", "n", "train time"], numeric=frozenset({1, 2, 3, 4, 5}))
    previous: float | None = None
    for i, s in enumerate(stages):
        p = number(s.get("pass1"))
        interval = f"{pct(s.get('lo'))} – {pct(s.get('hi'))}" if number(s.get("lo")) is not None else DASH
        change = DASH if p is None or previous is None else f"{(p - previous) * 100:+.1f} pts"
        table.rows.append([str(s.get("name")) + (" (this run)" if i in current else ""), pct(p), interval, change,
                           count(s.get("n")), duration(s.get("train_wall_s"))])  # fmt: skip
        previous = p if p is not None else previous
    metric = str(curve.get("metric") or "held-out pass^1")
    held = number(curve.get("heldout_tasks"))
    blurb = f"{metric} after each training stage" + (f" on {count(held)} held-out tasks" if held is not None else "")
    blurb += ", with 95% intervals; every stage is evaluated on the same tasks."
    if curve.get("title"):
        blurb = f"{curve['title']}: {blurb}"
    goal = curve.get("goal") or {}
    if goal:
        blurb += " Goals: " + ", ".join(f"{k} {decimal(v, 2)}" for k, v in goal.items()) + "."
    chart = _chart(plots.learning_chart, stages, current, metric)
    return Panel("panel-learning", "Learning curve", blurb, chart, [table], chart_expected=not plots.available())


def learning_notice(error: LearningError) -> str:
    """The one line a report shows instead of the curve when ``learning.json`` is wrong."""
    why = " ".join(str(error).split())  # one line, whatever the JSON error or OS message held
    return f"{LEARNING_FILE} could not be read, so the learning curve is not shown: {why}"


# -- the document ------------------------------------------------------------------------------------------


def _asset(name: str) -> str:
    return resources.files(__package__).joinpath("assets", name).read_text(encoding="utf-8")


@functools.lru_cache(maxsize=1)
def _template() -> Any:
    import jinja2

    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True,
                             lstrip_blocks=True, keep_trailing_newline=True)  # fmt: skip
    return env.from_string(_asset("report.html.j2"))


def _script_hash(script: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii")


def render_report(summary: Summary | Mapping[str, Any], rows: Sequence[dict], *, config: dict,
                  run_dir: str | Path | None = None) -> str:  # fmt: skip
    """The whole report as one HTML document (see the module docstring for what it holds and why).

    ``summary`` is a run's :class:`~toolworld.scoring.summary.Summary` or its ``summary.json`` dict (read as
    JSON data either way, so a dict from an older or damaged file renders what it can and shows ``—`` for the
    rest, where a typed default would print a made-up 0), ``rows`` one ``{"task", "trajectory", "score"}`` dict per
    (task, trial) (pydantic models are accepted too), ``config`` the run configuration to show. ``run_dir``, the
    run folder, adds what the folder holds beside the store: a ``learning.json`` becomes the "Learning curve"
    panel, with the stage whose ``run`` is this folder's name marked (a broken one becomes a one-line warning).
    The output depends only on these, so the same run always gives the same bytes.
    """
    summary_m = _mapping(summary)
    config_m = _mapping(config)
    rows_m = [_mapping(r) for r in rows]
    notes = warnings(summary_m)
    shown = panels(summary_m, rows_m)
    if run_dir is not None:
        try:
            curve = load_learning(run_dir)
        except LearningError as exc:
            notes.append(learning_notice(exc))
        else:
            if curve is not None:
                shown.insert(0, learning_panel(curve, Path(run_dir).resolve().name))
    script = _asset("viewer.js")
    if "</script" in script.lower():  # pragma: no cover - guards edits of the asset
        raise ValueError("viewer.js must not contain '</script'")
    title_bits = [str(config_m[k]) for k in ("world", "policy") if config_m.get(k)]
    return _template().render(
        title="toolworld report" + (" — " + " · ".join(title_bits) if title_bits else ""),
        cards=headline(summary_m),
        warnings=notes,
        config=run_config(config_m),
        panels=shown,
        plots_available=plots.available(),
        episodes=len(rows_m),
        css=_asset("report.css"),
        script=script,
        script_hash=_script_hash(script),
        data=script_json(viewer_data(rows_m)),
    )


def write_report(out_dir: Path, summary: Summary | Mapping[str, Any], rows: Sequence[dict], *, config: dict) -> Path:
    """Write ``out_dir/report.html`` and return its path.

    The page is rendered in memory first and written atomically, so a failure at any point leaves the previous
    report, or none, and never half a file. It is readable by everyone (a report is meant to be shared), and
    text a model wrote that cannot be encoded (a lone surrogate) is replaced rather than failing the report.
    """
    html = render_report(summary, rows, config=config, run_dir=out_dir)
    return atomic_write_text(Path(out_dir) / "report.html", html, errors="replace", mode=0o644, fsync=True)
