"""Plots for the report, drawn with matplotlib and returned as inline SVG text.

SVG rather than PNG so the report stays one small, offline, diffable text file: text is kept as ``<text>``
(``svg.fonttype = 'none'``), ids are salted with a fixed ``svg.hashsalt`` and the metadata block (creator,
date) is dropped, so the same summary always gives the same bytes. Element ids inside each SVG are prefixed
with the plot's id because several SVGs share one HTML document and matplotlib numbers its ids per figure
(``patch_1``, clip paths, markers), which would otherwise collide.

matplotlib is the ``report`` extra: without it :func:`available` is False and the report shows its tables
with a note instead of the figures.
"""

from __future__ import annotations

import functools
import io
import math
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ParamSpec

P = ParamSpec("P")

#: Colours shared with the page's CSS so plots and tables read as one design.
PASS = "#2b8a3e"
FAIL = "#c92a2a"
ACCENT = "#1971c2"
MUTED = "#868e96"
INK = "#212529"

_RC = {
    "svg.fonttype": "none",
    "svg.hashsalt": "toolworld-report",
    "font.family": "sans-serif",
    "font.size": 9.0,
    "axes.edgecolor": "#adb5bd",
    "axes.labelcolor": INK,
    "axes.titlesize": 10.0,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "xtick.color": "#495057",
    "ytick.color": "#495057",
    "axes.grid": True,
    "grid.color": "#e9ecef",
    "grid.linewidth": 0.8,
    "axes.axisbelow": True,
}

#: A bar chart with more categories than this keeps only the largest ones (the table lists them all).
MAX_BARS = 25


@dataclass(frozen=True, slots=True)
class Chart:
    """A rendered plot: ``svg`` is markup ready to inline, its root carrying ``id`` and a ``<title>``."""

    id: str
    title: str
    svg: str


def available() -> bool:
    """True when matplotlib (the ``report`` extra) can be imported."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def styled(build: Callable[P, Chart | None]) -> Callable[P, Chart | None]:
    """Run a chart builder under the report's rc settings: artists read most of them when created, and the SVG
    writer reads the font and hash settings when saving, so the whole build runs inside the context."""

    @functools.wraps(build)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> Chart | None:
        import matplotlib

        with matplotlib.rc_context(_RC):
            return build(*args, **kwargs)

    return wrapper


def _figure(width: float, height: float) -> Any:
    # A bare Figure (no pyplot) keeps no global state and needs no GUI backend; Agg is the canvas.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _integer_ticks() -> Any:
    from matplotlib.ticker import MaxNLocator

    return MaxNLocator(integer=True)


def _to_svg(fig: Any, plot_id: str, title: str) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    return inline_svg(buf.getvalue(), plot_id, title)


_ID = re.compile(r'\bid="([^"]+)"')


def inline_svg(text: str, plot_id: str, title: str) -> str:
    """Turn a standalone SVG file into markup for an HTML page: no XML prolog, doctype or metadata, ids
    prefixed with ``plot_id``, ``xlink:href`` as plain ``href`` (so no namespace URL is left in the page), and
    a ``<title>`` for screen readers and tests."""
    from html import escape

    text = re.sub(r"<\?xml[^>]*\?>\s*", "", text)
    text = re.sub(r"<!DOCTYPE[^>]*>\s*", "", text, flags=re.S)
    text = re.sub(r"\s*<metadata>.*?</metadata>", "", text, flags=re.S)
    ids = set(_ID.findall(text))
    for old in sorted(ids, key=len, reverse=True):
        new = f"{plot_id}-{old}"
        text = text.replace(f'id="{old}"', f'id="{new}"').replace(f'href="#{old}"', f'href="#{new}"')
        text = text.replace(f"url(#{old})", f"url(#{new})")
    text = text.replace("xlink:href=", "href=")
    opening = re.search(r"<svg\b[^>]*>", text)
    if opening is None:  # pragma: no cover - matplotlib always writes one
        raise ValueError("matplotlib returned no <svg> element")
    attrs = opening.group(0)
    keep = dict(re.findall(r'\b(width|height|viewBox)="([^"]*)"', attrs))
    root = (f'<svg class="plot-svg" id="{escape(plot_id)}-svg" role="img" aria-labelledby="{escape(plot_id)}-title" '
            + " ".join(f'{k}="{v}"' for k, v in keep.items()) + ">"
            + f'<title id="{escape(plot_id)}-title">{escape(title)}</title>')  # fmt: skip
    return (text[: opening.start()] + root + text[opening.end() :]).strip()


# -- reading summary values defensively ---------------------------------------------------------------------


def number(value: Any) -> float | None:
    """A finite float, or None for anything else (missing keys, strings, NaN): panels skip what is not there."""
    if isinstance(value, bool) or value is None:
        return None
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if math.isfinite(out) else None


def k_series(values: Any) -> list[tuple[int, float]]:
    """``{"1": 0.8, "2": 0.7}`` as ``[(1, 0.8), (2, 0.7)]``, sorted by k; unreadable entries are dropped."""
    out: list[tuple[int, float]] = []
    if isinstance(values, Mapping):
        for key, value in values.items():
            try:
                k = int(key)
            except (TypeError, ValueError):
                continue
            v = number(value)
            if v is not None:
                out.append((k, v))
    return sorted(out)


def rate_groups(groups: Any, order: Sequence[str] = ()) -> list[tuple[str, int, float]]:
    """``{name: {"n", "success_rate"}}`` as ``(name, n, rate)`` rows, in ``order`` first, then by name."""
    rows: list[tuple[str, int, float]] = []
    if isinstance(groups, Mapping):
        for name, entry in groups.items():
            if not isinstance(entry, Mapping):
                continue
            rate = number(entry.get("success_rate"))
            if rate is None:
                continue
            rows.append((str(name), int(number(entry.get("n")) or 0), rate))
    rank = {name: i for i, name in enumerate(order)}
    return sorted(rows, key=lambda r: (rank.get(r[0], len(rank)), r[0]))


def counts(values: Any) -> list[tuple[str, int]]:
    """``{label: count}`` as ``(label, count)`` rows, largest first (ties by label)."""
    rows: list[tuple[str, int]] = []
    if isinstance(values, Mapping):
        for label, value in values.items():
            n = number(value)
            if n is not None:
                rows.append((str(label), int(n)))
    return sorted(rows, key=lambda r: (-r[1], r[0]))


def step_counts(values: Any) -> list[tuple[str, int]]:
    """Divergence counts keyed by step: numeric steps in order, then any other key (e.g. ``none``)."""
    rows = counts(values)

    def key(row: tuple[str, int]) -> tuple[int, float, str]:
        try:
            return (0, float(row[0]), "")
        except ValueError:
            return (1, 0.0, row[0])

    return sorted(rows, key=key)


# -- the plots -----------------------------------------------------------------------------------------------


@styled
def pass_k_chart(summary: Mapping[str, Any]) -> Chart | None:
    """pass^k (all k trials succeed) falls with k, pass@k (any succeeds) rises: the gap is the unreliability."""
    hat, at = k_series(summary.get("pass_hat_k")), k_series(summary.get("pass_at_k"))
    if not hat and not at:
        return None
    title = "pass^k and pass@k by k"
    fig = _figure(4.6, 2.8)
    ax = fig.subplots()
    for series, label, colour, style in ((hat, "pass^k", ACCENT, "-"), (at, "pass@k", MUTED, "--")):
        if series:
            ax.plot([k for k, _ in series], [v for _, v in series], style, marker="o", color=colour, label=label)
    ks = sorted({k for k, _ in hat} | {k for k, _ in at})
    ax.set_xticks(ks)
    ax.set_xlim(min(ks) - 0.5, max(ks) + 0.5)
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("k (trials)")
    ax.set_ylabel("probability")
    fig.legend(frameon=False, loc="outside upper center", ncols=2)  # above the axes, never over a point
    return Chart("plot-pass-k", title, _to_svg(fig, "plot-pass-k", title))


def _rate_bars(plot_id: str, title: str, rows: list[tuple[str, int, float]], xlabel: str) -> Chart | None:
    if not rows:
        return None
    rows = sorted(rows, key=lambda r: (-r[1], r[0]))[:MAX_BARS] if len(rows) > MAX_BARS else rows
    fig = _figure(4.6, max(1.6, 0.32 * len(rows) + 0.9))
    ax = fig.subplots()
    labels = [r[0] for r in rows][::-1]
    rates = [r[2] for r in rows][::-1]
    ns = [r[1] for r in rows][::-1]
    bars = ax.barh(labels, rates, color=[PASS if r >= 0.5 else FAIL for r in rates], height=0.6)
    for bar, rate, n in zip(bars, rates, ns, strict=True):
        ax.text(min(rate, 1.0) + 0.01, bar.get_y() + bar.get_height() / 2, f"{rate:.0%} (n={n})", va="center",
                fontsize=8, color=INK)  # fmt: skip
    ax.set_xlim(0, 1.25)
    ax.set_xticks([0, 0.25, 0.5, 0.75, 1.0], ["0%", "25%", "50%", "75%", "100%"])
    ax.set_xlabel(xlabel)
    ax.grid(axis="y", visible=False)
    return Chart(plot_id, title, _to_svg(fig, plot_id, title))


@styled
def difficulty_chart(summary: Mapping[str, Any]) -> Chart | None:
    rows = rate_groups(summary.get("by_difficulty"), order=("easy", "medium", "hard"))
    return _rate_bars("plot-difficulty", "Success rate by difficulty", rows, "success rate")


@styled
def target_tool_chart(summary: Mapping[str, Any]) -> Chart | None:
    rows = rate_groups(summary.get("by_target_tool"))
    return _rate_bars("plot-target-tool", "Success rate by target tool", rows, "success rate")


def _count_bars(plot_id: str, title: str, rows: list[tuple[str, int]], xlabel: str, colour: str) -> Chart | None:
    if not rows:
        return None
    rows = rows[:MAX_BARS]
    fig = _figure(4.6, max(1.6, 0.32 * len(rows) + 0.9))
    ax = fig.subplots()
    labels = [r[0] for r in rows][::-1]
    values = [r[1] for r in rows][::-1]
    bars = ax.barh(labels, values, color=colour, height=0.6)
    top = max(values) or 1
    for bar, value in zip(bars, values, strict=True):
        ax.text(value + top * 0.01, bar.get_y() + bar.get_height() / 2, str(value), va="center", fontsize=8)
    ax.set_xlim(0, top * 1.15)
    ax.xaxis.set_major_locator(_integer_ticks())
    ax.set_xlabel(xlabel)
    ax.grid(axis="y", visible=False)
    return Chart(plot_id, title, _to_svg(fig, plot_id, title))


@styled
def divergence_chart(summary: Mapping[str, Any]) -> Chart | None:
    """Where failing episodes first left the gold path: early steps point at understanding, late at execution."""
    rows = step_counts(summary.get("divergence"))
    if not rows:
        return None
    title = "First divergent step"
    fig = _figure(4.6, 2.6)
    ax = fig.subplots()
    labels = [r[0] for r in rows]
    values = [r[1] for r in rows]
    bars = ax.bar(range(len(rows)), values, color=FAIL, width=0.7)
    ax.set_xticks(range(len(rows)), labels)
    for bar, value in zip(bars, values, strict=True):
        ax.text(bar.get_x() + bar.get_width() / 2, value, str(value), ha="center", va="bottom", fontsize=8)
    ax.set_ylim(0, (max(values) or 1) * 1.2)
    ax.yaxis.set_major_locator(_integer_ticks())
    ax.set_xlabel("step (0-based tool call)")
    ax.set_ylabel("episodes")
    ax.grid(axis="x", visible=False)
    return Chart("plot-divergence", title, _to_svg(fig, "plot-divergence", title))


@styled
def error_types_chart(summary: Mapping[str, Any]) -> Chart | None:
    return _count_bars("plot-error-types", "Tool error types", counts(summary.get("error_types")), "errors", FAIL)


@styled
def terminations_chart(summary: Mapping[str, Any]) -> Chart | None:
    rows = counts(summary.get("terminations"))
    return _count_bars("plot-terminations", "Why episodes ended", rows, "episodes", ACCENT)


@styled
def noise_chart(summary: Mapping[str, Any]) -> Chart | None:
    """Success with and without injected environment noise: the drop is the agent's robustness gap."""
    noise = summary.get("noise")
    if not isinstance(noise, Mapping):
        return None
    bars = [(label, number(noise.get(key))) for label, key in (("without noise", "success_rate_without_noise"),
                                                               ("with noise", "success_rate_with_noise"))]  # fmt: skip
    bars = [(label, v) for label, v in bars if v is not None]
    if not bars:
        return None
    title = "Success rate with and without noise"
    fig = _figure(4.6, 2.2)
    ax = fig.subplots()
    labels = [b[0] for b in bars]
    values = [float(b[1]) for b in bars]  # type: ignore[arg-type]
    drawn = ax.bar(labels, values, color=[PASS if lab == "without noise" else ACCENT for lab in labels], width=0.5)
    for bar, value in zip(drawn, values, strict=True):
        ax.text(bar.get_x() + bar.get_width() / 2, value + 0.02, f"{value:.0%}", ha="center", va="bottom", fontsize=8)
    ax.set_ylim(0, 1.15)
    ax.set_yticks([0, 0.5, 1.0], ["0%", "50%", "100%"])
    ax.grid(axis="x", visible=False)
    return Chart("plot-noise", title, _to_svg(fig, "plot-noise", title))


@styled
def cost_chart(wall_s: Sequence[float], tokens: Sequence[int]) -> Chart | None:
    """Per-episode wall time (and tokens when the policy reported any) as histograms: the tail is the cost."""
    wall = [w for w in (number(x) for x in wall_s) if w is not None]
    toks = [t for t in (number(x) for x in tokens) if t is not None]
    show_tokens = any(toks)
    if not wall and not show_tokens:
        return None
    title = "Cost per episode"
    panels = [p for p, present in (("wall", bool(wall)), ("tokens", show_tokens)) if present]
    fig = _figure(4.6 if len(panels) == 1 else 6.4, 2.4)
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    for ax, panel in zip(axes, panels, strict=True):
        data, label, colour = (wall, "episode wall time (s)", ACCENT) if panel == "wall" else \
            (toks, "tokens (prompt + completion)", MUTED)  # fmt: skip
        ax.hist(data, bins=min(30, max(5, int(math.sqrt(len(data))) + 1)), color=colour, edgecolor="white")
        ax.set_xlabel(label)
        ax.set_ylabel("episodes")
        ax.yaxis.set_major_locator(_integer_ticks())
        ax.grid(axis="x", visible=False)
    return Chart("plot-cost", title, _to_svg(fig, "plot-cost", title))


#: The marker and tick colour of the stage whose evaluation this report is (the rest of the curve is ACCENT).
HIGHLIGHT = "#e8590c"


def _plain_label(text: str, limit: int = 24) -> str:
    # matplotlib reads "$...$" as math and fails on an unbalanced "$"; stage names are free text
    text = text if len(text) <= limit else text[: limit - 1] + "…"
    return text.replace("$", r"\$")


@styled
def learning_chart(stages: Sequence[Mapping[str, Any]], highlight: Collection[int] = (),
                   metric: str = "held-out pass^1") -> Chart | None:  # fmt: skip
    """The metric per training stage, in training order, joined by a line, with its 95% interval as error bars.

    The y axis always spans 0 to 1 so curves of different runs compare at a glance, and the stages at
    ``highlight`` (indices into ``stages``: the stage this report evaluates) are drawn in another colour and
    named "this run", because the same chart appears in the report of every stage."""
    points = [(i, number(_get(s, "pass1")), number(_get(s, "lo")), number(_get(s, "hi"))) for i, s in enumerate(stages)]
    drawn = [(i, y, lo, hi) for i, y, lo, hi in points if y is not None]
    if not drawn:
        return None
    title = f"{metric} by training stage"
    fig = _figure(min(7.0, max(3.6, 1.4 + 0.9 * len(stages))), 2.8)
    ax = fig.subplots()
    ax.plot([p[0] for p in drawn], [p[1] for p in drawn], "-", color=ACCENT, linewidth=1.5, zorder=2)
    for i, y, lo, hi in drawn:
        colour = HIGHLIGHT if i in highlight else ACCENT
        if lo is not None and hi is not None:
            # clipped at 0: matplotlib refuses a negative error, and a rounded bound may sit a hair past the point
            ax.errorbar([i], [y], yerr=[[max(0.0, y - lo)], [max(0.0, hi - y)]], fmt="none", ecolor=colour,
                        elinewidth=1.2, capsize=4, zorder=3)  # fmt: skip
        ax.plot([i], [y], "o", color=colour, markersize=9 if i in highlight else 6, markeredgecolor="white",
                clip_on=False, zorder=4)  # fmt: skip
        # a white box keeps the number readable where the line to the next stage runs through it
        ax.annotate(f"{y:.0%}", (i, y), xytext=(8, 0), textcoords="offset points", va="center", ha="left",
                    fontsize=8, color=INK, zorder=5, bbox={"boxstyle": "square,pad=0.1", "fc": "white", "ec": "none"})  # fmt: skip
    labels = [_plain_label(str(_get(s, "name") or f"stage {i + 1}")) for i, s in enumerate(stages)]
    labels = [f"{label}\n(this run)" if i in highlight else label for i, label in enumerate(labels)]
    ax.set_xticks(range(len(stages)), labels)
    for i, tick in enumerate(ax.get_xticklabels()):
        if i in highlight:
            tick.set_color(HIGHLIGHT)
            tick.set_fontweight("bold")
    ax.set_xlim(-0.5, len(stages) - 0.5)
    ax.set_ylim(0, 1)
    ax.set_yticks([0, 0.25, 0.5, 0.75, 1.0], ["0%", "25%", "50%", "75%", "100%"])
    ax.set_ylabel(_plain_label(metric, 40))
    ax.grid(axis="x", visible=False)
    return Chart("plot-learning", title, _to_svg(fig, "plot-learning", title))


def _get(entry: Any, key: str) -> Any:
    return entry.get(key) if isinstance(entry, Mapping) else None
