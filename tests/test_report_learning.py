"""The learning curve in a run's report: a ``learning.json`` in the run folder (written by a staged training
benchmark into every evaluation folder) becomes a "Learning curve" panel with the stage of this run marked, also
when the report is regenerated from the store; no file means no panel, and a broken file means one warning
line while the rest of the report stays exactly as it was."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from rollout_kit import make_task, retail
from toolworld import pipeline
from toolworld.report import LearningError, load_learning, render_report, validate_learning
from toolworld.report import plots as report_plots

needs_matplotlib = pytest.mark.skipif(not report_plots.available(), reason="plots need the 'report' extra")

CURVE: dict[str, Any] = {
    "title": "SmolLM2-135M-Instruct on retail", "metric": "held-out pass^1", "heldout_tasks": 100,
    "stages": [
        {"name": "base", "pass1": 0.02, "lo": 0.005, "hi": 0.07, "n": 100, "train_wall_s": 0, "eval_wall_s": 310.2,
         "run": "eval-base"},
        {"name": "sft", "pass1": 0.31, "lo": 0.23, "hi": 0.41, "n": 100, "train_wall_s": 1800.5, "eval_wall_s": 290.0,
         "run": "eval-sft", "loss": 0.7},
        {"name": "grpo", "pass1": 0.36, "n": 100, "train_wall_s": 9000, "run": "eval-grpo"},
    ],
    "goal": {"sft_gain": 0.30, "grpo_gain": 0.05},
    "written_by": "a later version",
}  # fmt: skip


class Page(HTMLParser):
    """The text inside each element that has an id, and the text of every ``<p class="warning">``."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.open: list[tuple[str, str | None, bool]] = []
        self.texts: dict[str, list[str]] = {}
        self.warnings: list[str] = []
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        d = dict(attrs)
        if d.get("id"):
            self.texts.setdefault(d["id"], [])
        warning = tag == "p" and d.get("class") == "warning"
        if warning:
            self.warnings.append("")
        if tag not in ("meta", "input", "br", "img", "link"):
            self.open.append((tag, d.get("id"), warning))

    def handle_endtag(self, tag: str) -> None:
        for i in range(len(self.open) - 1, -1, -1):
            if self.open[i][0] == tag:
                del self.open[i:]
                return

    def handle_data(self, data: str) -> None:
        for _, owner, warning in self.open:
            if owner is not None:
                self.texts[owner].append(data)
            if warning:
                self.warnings[-1] += data

    def text(self, element_id: str) -> str:
        return " ".join(" ".join(self.texts[element_id]).split())


@pytest.fixture(scope="module")
def run_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One small real evaluation run (gold policy, two tasks) stored in ``ROOT/eval-sft``."""
    root = tmp_path_factory.mktemp("learning")
    world = retail()
    tasks = [make_task("cancel", 0, world=world), make_task("info", 1, world=world)]
    pipeline.run(world, tasks, "gold", out=root / "eval-sft", report=False)
    return root


@pytest.fixture(scope="module")
def stored(run_root: Path) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, Any]]:
    """The run's summary, rows and config, as the report is rendered from them."""
    summary, _ = pipeline.finish(run_root / "eval-sft", report=False)
    from toolworld.store import RunStore

    with RunStore.open(run_root / "eval-sft") as store:
        config = store.config
        _tasks, _trajectories, _scores, rows = pipeline._rows(store)
    return summary.model_dump(mode="json"), rows, config


def folder(root: Path, name: str, learning: Any = None, *, raw: str | None = None) -> Path:
    out = root / name
    out.mkdir(exist_ok=True)
    target = out / "learning.json"
    if raw is not None:
        target.write_text(raw, encoding="utf-8")
    elif learning is not None:
        target.write_text(json.dumps(learning), encoding="utf-8")
    elif target.exists():
        target.unlink()
    return out


# -- the panel ------------------------------------------------------------------------------------------------


def test_regenerating_a_runs_report_shows_the_curve_with_this_stage_marked(run_root):
    out = folder(run_root, "eval-sft", CURVE)
    _summary, path = pipeline.finish(out)  # what `toolworld report DIR` does, and how the benchmark re-renders
    assert path is not None
    page = Page(path.read_text(encoding="utf-8"))
    panel = page.text("panel-learning")
    assert panel.startswith("Learning curve SmolLM2-135M-Instruct on retail: held-out pass^1 after each training "
                            "stage on 100 held-out tasks")  # fmt: skip
    assert "Goals: sft_gain 0.30, grpo_gain 0.05." in panel
    rows = re.findall(r"\b(base|sft|grpo)(?: \(this run\))? (\d+\.\d%)", panel)  # the table's rows
    assert rows == [("base", "2.0%"), ("sft", "31.0%"), ("grpo", "36.0%")]  # in training order
    assert "base 2.0% 0.5% – 7.0% — 100 0 s" in panel
    assert "sft (this run) 31.0% 23.0% – 41.0% +29.0 pts 100 30.0 min" in panel
    assert "grpo 36.0% — +5.0 pts 100 2.5 h" in panel  # no interval given: the point only
    assert panel.count("(this run)") == (2 if report_plots.available() else 1)  # table, and the chart's tick
    assert "panel-pass-k" in page.texts and "viewer" in page.texts and "headline" in page.texts
    assert page.warnings == []


@needs_matplotlib
def test_the_chart_is_inline_svg_and_marks_the_stage_of_the_folder(run_root, stored):
    summary, rows, config = stored
    html = {name: render_report(summary, rows, config=config, run_dir=folder(run_root, name, CURVE))
            for name in ("eval-sft", "eval-base", "elsewhere")}  # fmt: skip
    for name, page_html in html.items():
        svg = re.search(r'<svg class="plot-svg" id="plot-learning-svg".*?</svg>', page_html, re.S)
        assert svg is not None, name
        chart = svg.group(0)
        assert '<title id="plot-learning-title">held-out pass^1 by training stage</title>' in chart
        assert all(f">{label}<" in chart for label in ("base", "sft", "grpo", "2%", "31%", "36%")), name
        marked = re.findall(r">(\w+)</text>\s*<text[^>]*>\(this run\)<", chart)
        assert marked == {"eval-sft": ["sft"], "eval-base": ["base"], "elsewhere": []}[name]
        assert (report_plots.HIGHLIGHT in chart) == (name != "elsewhere")
    assert "base (this run)" in Page(html["eval-base"]).text("panel-learning")
    assert "(this run)" not in Page(html["elsewhere"]).text("panel-learning")
    again = render_report(summary, rows, config=config, run_dir=run_root / "eval-sft")
    assert again == html["eval-sft"]  # the same folder always gives the same bytes


def test_without_matplotlib_the_table_still_shows_the_curve(run_root, stored, monkeypatch):
    summary, rows, config = stored
    monkeypatch.setattr(report_plots, "available", lambda: False)
    html = render_report(summary, rows, config=config, run_dir=folder(run_root, "eval-sft", CURVE))
    panel = Page(html).text("panel-learning")
    assert "<svg" not in html and "Plot not drawn (matplotlib is not installed)." in panel
    assert "sft (this run) 31.0% 23.0% – 41.0%" in panel


def test_no_learning_json_means_no_panel_and_the_same_report(run_root, stored):
    summary, rows, config = stored
    plain = render_report(summary, rows, config=config)
    html = render_report(summary, rows, config=config, run_dir=folder(run_root, "eval-sft"))
    assert html == plain
    assert "panel-learning" not in html and "learning.json" not in html


# -- broken files ---------------------------------------------------------------------------------------------


def _with(stage_index: int, **changes: Any) -> dict[str, Any]:
    curve = json.loads(json.dumps(CURVE))
    curve["stages"][stage_index].update(changes)
    for key in [k for k, v in changes.items() if v is _DROP]:
        del curve["stages"][stage_index][key]
    return curve


_DROP = object()


@pytest.mark.parametrize(("raw", "why"), [
    ('{"stages": [', "not valid JSON (Expecting value at line 1, column 13)"),
    (json.dumps({**CURVE, "stages": {"base": 0.1}}), "stages is a dict; it must be a list of stage objects"),
    (json.dumps({"title": "x"}), "stages is missing; it must be a list of stage objects"),
    (json.dumps({**CURVE, "stages": []}), "stages is empty"),
    (json.dumps([CURVE]), "the top level is a list; it must be a JSON object"),
    (json.dumps(_with(1, pass1=1.3)), "stages[1].pass1 is 1.3; it must be a number from 0 to 1"),
    (json.dumps(_with(0, pass1=-0.1, lo=None, hi=None)), "stages[0].pass1 is -0.1; it must be a number from 0 to 1"),
    (json.dumps(_with(1, pass1="31%")), 'stages[1].pass1 is "31%"; it must be a number from 0 to 1'),
    (json.dumps(_with(1, pass1=None)), "stages[1].pass1 is missing"),
    (json.dumps(_with(0, hi=None)), "stages[0].hi is missing; give both lo and hi, or neither"),
    (json.dumps(_with(1, lo=0.35)), "stages[1].pass1 0.31 is outside its interval [0.35, 0.41]"),
    (json.dumps(_with(2, name="")), 'stages[2].name is ""; it must be a non-empty string'),
    (json.dumps(_with(2, n=-5)), "stages[2].n is -5; it must be a number at least 0"),
    (json.dumps({**CURVE, "stages": [*CURVE["stages"], "rft"]}), "stages[3] is a str; it must be an object"),
    (json.dumps({**CURVE, "goal": [0.3]}), "goal is a list; it must be an object of numbers"),
])  # fmt: skip
def test_a_broken_file_is_one_warning_line_and_the_rest_of_the_report_is_unchanged(run_root, stored, raw, why):
    summary, rows, config = stored
    out = folder(run_root, "eval-sft", raw=raw)
    with pytest.raises(LearningError) as err:
        load_learning(out)
    assert why in str(err.value)
    html = render_report(summary, rows, config=config, run_dir=out)
    page = Page(html)
    assert page.warnings == [f"learning.json could not be read, so the learning curve is not shown: {err.value!s}"]
    assert "\n" not in page.warnings[0]
    assert "panel-learning" not in html
    warning = re.search(r'\s*<p class="warning">learning\.json could not be read[^<]*</p>', html)
    assert warning is not None
    plain = render_report(summary, rows, config=config)
    assert html[: warning.start()] + html[warning.end() :] == plain  # everything else exactly as without the file


def test_an_unreadable_file_is_a_warning_too(run_root, stored):
    summary, rows, config = stored
    out = folder(run_root, "eval-unreadable")
    (out / "learning.json").mkdir()  # a folder where the file should be: reading it fails with an OS error
    html = render_report(summary, rows, config=config, run_dir=out)
    [warning] = Page(html).warnings
    assert warning.startswith("learning.json could not be read, so the learning curve is not shown: cannot read ")
    assert "panel-pass-k" in html


# -- the contract the benchmark writes to ---------------------------------------------------------------------


def test_validate_learning_normalizes_and_ignores_unknown_keys():
    curve = validate_learning(CURVE)
    assert set(curve) == {"title", "metric", "heldout_tasks", "goal", "stages"}
    assert [s["name"] for s in curve["stages"]] == ["base", "sft", "grpo"]
    assert curve["stages"][1] == {"name": "sft", "pass1": 0.31, "lo": 0.23, "hi": 0.41, "n": 100.0,
                                  "train_wall_s": 1800.5, "eval_wall_s": 290.0, "run": "eval-sft"}  # fmt: skip
    assert (curve["stages"][2]["lo"], curve["stages"][2]["hi"]) == (None, None)
    assert curve["goal"] == {"sft_gain": 0.30, "grpo_gain": 0.05}
    bare = validate_learning({"stages": [{"name": "base", "pass1": 0}]})
    assert bare["metric"] == "held-out pass^1" and bare["title"] is None and bare["goal"] == {}
    # a bound rounded a hair past its point still counts as containing it
    assert validate_learning({"stages": [{"name": "b", "pass1": 0.3, "lo": 0.3000001, "hi": 0.4}]})["stages"]


def test_load_learning_reads_the_folder_and_returns_none_without_a_file(tmp_path):
    assert load_learning(tmp_path) is None
    (tmp_path / "learning.json").write_text(json.dumps(CURVE), encoding="utf-8")
    assert load_learning(tmp_path) == validate_learning(CURVE)


def test_stage_names_are_text_in_the_table_and_the_chart(run_root, stored):
    summary, rows, config = stored
    hostile = "<b>$x</b>"
    curve = {"stages": [{"name": hostile, "pass1": 0.5, "lo": 0.4, "hi": 0.6, "run": "eval-hostile"},
                        {"name": "$", "pass1": 1.0}]}  # fmt: skip
    html = render_report(summary, rows, config=config, run_dir=folder(run_root, "eval-hostile", curve))
    assert "<b>" not in html
    panel = Page(html).text("panel-learning")
    assert f"{hostile} (this run) 50.0%" in panel and "$ 100.0% — +50.0 pts" in panel
