"""The HTML report: built from real gold and noisy-gold episodes, it holds every plot, the headline numbers
and every (task, trial); it loads nothing from the network; text a model wrote cannot break out of the
embedded JSON; malformed summaries still render; writing is atomic; and a real headless browser runs the
viewer without a console message."""

from __future__ import annotations

import asyncio
import json
import math
import os
import re
import subprocess
from collections import Counter
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from rollout_kit import make_task, retail
from toolworld.env.noise import NoiseConfig
from toolworld.report import plots as report_plots
from toolworld.report import render as report_render
from toolworld.report import render_report, write_report
from toolworld.report.data import MAX_TEXT_CHARS, viewer_data
from toolworld.rollout.backends import make_policy
from toolworld.rollout.loop import run_many
from toolworld.scoring import score_trajectory, summarize

needs_matplotlib = pytest.mark.skipif(not report_plots.available(),
                                      reason="plots need the 'report' extra: pip install 'toolworld[report]'")  # fmt: skip

TRIALS = 2
HOSTILE = "</script><img src=x onerror=alert(1)>"
ALL_PLOTS = ("plot-pass-k", "plot-difficulty", "plot-target-tool", "plot-divergence", "plot-error-types",
             "plot-terminations", "plot-noise", "plot-cost")  # fmt: skip
#: An attribute or CSS reference that makes a browser fetch from another host.
REMOTE_LOAD = re.compile(r"""\b(?:src|href|srcset|action|poster|data|formaction)\s*=\s*["']?\s*(?:https?:)?//"""
                         r"""|url\(\s*["']?\s*(?:https?:)?//|@import""", re.I)  # fmt: skip


# -- real runs ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Run:
    """A run as the report sees it, and its report rendered once (rendering draws every plot, so it is shared)."""

    summary: dict[str, Any]
    rows: list[dict[str, Any]]
    config: dict[str, Any]
    html: str


def _run(spec: str, noise: NoiseConfig | None = None) -> Run:
    """A small real run: four task kinds, two trials, scored and summarized the way ``toolworld run`` does."""
    world = retail()
    tasks = [make_task(kind, world=world) for kind in ("cancel", "address", "refusal", "info")]
    by_id = {t.id: t for t in tasks}
    trajectories = asyncio.run(run_many(world, tasks, make_policy(spec), trials=TRIALS, noise=noise))
    scores = [score_trajectory(by_id[t.task_id], t) for t in trajectories]
    summary = summarize(by_id, trajectories, scores, trials=TRIALS).model_dump(mode="json")
    rows = [{"task": by_id[t.task_id].model_dump(mode="json"), "trajectory": t.model_dump(mode="json"),
             "score": s.model_dump(mode="json")} for t, s in zip(trajectories, scores, strict=True)]  # fmt: skip
    config = {"world": "retail", "policy": spec, "trials": TRIALS, "task_file": "tasks.jsonl",
              "started_at": "2026-01-02T03:04:05Z", "limits": {"max_turns": 30}, "user": "scripted"}  # fmt: skip
    if noise is not None:
        config["noise"] = {"tool_failure_p": noise.tool_failure_p, "seed": noise.seed}
    return Run(summary, rows, config, render_report(summary, rows, config=config))


@pytest.fixture(scope="module")
def gold():
    return _run("gold")


@pytest.fixture(scope="module")
def noisy():
    """Noisy gold (dropped steps) in a noisy environment (failing tools): every panel has something to show."""
    out = _run("gold:drop=0.3", NoiseConfig(tool_failure_p=0.3, seed=1))
    summary = out.summary
    assert summary["divergence"] and summary["error_types"] and summary["noise"]["episodes_with_noise"]
    assert 0 < summary["success_rate"] < 1
    return out


@pytest.fixture(params=["gold", "noisy"])
def run(request):
    return request.getfixturevalue(request.param)


# -- reading the page back ----------------------------------------------------------------------------------

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


class Page(HTMLParser):
    """What tests need from an HTML document: for each element id, the tags and the text inside it, and the
    scripts with their attributes and raw text."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[tuple[str, str | None]] = []
        self.tags: dict[str, Counter[str]] = {}
        self.texts: dict[str, list[str]] = {}
        self.scripts: list[tuple[dict[str, str | None], str]] = []
        self.all_tags: Counter[str] = Counter()
        self.feed(html)
        self.close()

    def _open(self, tag: str, attrs: list[tuple[str, str | None]]) -> dict[str, str | None]:
        self.all_tags[tag] += 1
        for _, owner in self.stack:
            if owner is not None:
                self.tags[owner][tag] += 1
        d = dict(attrs)
        if d.get("id"):
            self.tags.setdefault(d["id"], Counter())
            self.texts.setdefault(d["id"], [])
        return d

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        d = self._open(tag, attrs)
        if tag == "script":
            self.scripts.append((d, ""))
        if tag not in VOID:
            self.stack.append((tag, d.get("id")))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._open(tag, attrs)

    def handle_endtag(self, tag: str) -> None:
        for i in range(len(self.stack) - 1, -1, -1):
            if self.stack[i][0] == tag:
                del self.stack[i:]
                return

    def handle_data(self, data: str) -> None:
        if self.stack and self.stack[-1][0] == "script" and self.scripts:
            attrs, text = self.scripts[-1]
            self.scripts[-1] = (attrs, text + data)
        for _, owner in self.stack:
            if owner is not None:
                self.texts[owner].append(data)

    def text(self, element_id: str) -> str:
        return " ".join(" ".join(self.texts[element_id]).split())

    def data(self) -> dict[str, Any]:
        [text] = [t for a, t in self.scripts if a.get("type") == "application/json" and a.get("id") == "report-data"]
        return json.loads(text)


def pct(x: float) -> str:
    return f"{x * 100:.1f}%"


# -- content ------------------------------------------------------------------------------------------------


@needs_matplotlib
def test_the_noisy_report_has_every_plot_as_inline_svg(noisy):
    html = noisy.html
    page = Page(html)
    for plot_id in ALL_PLOTS:
        assert plot_id in page.tags, plot_id
        inside = page.tags[plot_id]
        assert inside["svg"] == 1 and inside["title"] == 1 and inside["path"] > 0, plot_id
        assert f'id="{plot_id}-title"' in html
    assert page.all_tags["img"] == 0 and page.all_tags["object"] == 0  # plots are SVG markup, not images


@needs_matplotlib
def test_plots_follow_the_data(gold):
    """A gold run has no divergence, no tool errors and no noise: those panels are left out, not drawn empty."""
    assert gold.summary["success_rate"] == 1.0
    page = Page(gold.html)
    present = {p for p in ALL_PLOTS if p in page.tags}
    assert present >= {"plot-pass-k", "plot-difficulty", "plot-target-tool", "plot-terminations", "plot-cost"}
    assert "plot-divergence" not in present and "plot-error-types" not in present


def test_headline_numbers_and_run_config(run):
    summary, config = run.summary, run.config
    page = Page(run.html)
    assert pct(summary["success_rate"]) in page.text("card-success-rate")
    assert f"pass^{TRIALS}" in page.text("card-pass-hat-k")
    assert pct(summary["pass_hat_k"][str(TRIALS)]) in page.text("card-pass-hat-k")
    assert pct(summary["pass_at_k"][str(TRIALS)]) in page.text("card-pass-at-k")
    assert page.text("card-infra-errors").startswith(f"Infra errors {summary['infra_errors']} ")
    assert f"Episodes {summary['episodes']} " in page.text("card-episodes")
    assert f"{summary['tasks']} tasks × {TRIALS} trials" in page.text("card-episodes")
    table = page.text("run-config")
    for key in ("world", "policy", "trials", "task_file", "started_at", "limits", "user"):
        assert key in table
    assert config["policy"] in table and '"max_turns": 30' in table
    for level, entry in summary["by_difficulty"].items():
        assert f"{level} {entry['n']} {pct(entry['success_rate'])}" in page.text("panel-difficulty")
    for tool, entry in summary["by_target_tool"].items():
        assert f"{tool} {entry['n']} {pct(entry['success_rate'])}" in page.text("panel-target-tool")
    assert summary["by_demand"]
    for demand, entry in summary["by_demand"].items():
        assert f"{demand} {entry['n']} {pct(entry['success_rate'])}" in page.text("panel-demand")


def test_every_episode_is_embedded_without_token_buffers(run):
    rows, html = run.rows, run.html
    data = Page(html).data()
    assert [(r["task"], r["trial"]) for r in data["rows"]] == [
        (r["task"]["id"], r["trajectory"]["trial"]) for r in rows
    ]
    for embedded, row in zip(data["rows"], rows, strict=True):
        assert len(embedded["messages"]) == len(row["trajectory"]["messages"])
        assert embedded["success"] == row["score"]["success"]
        assert embedded["score"]["first_divergent_step"] == row["score"]["first_divergent_step"]
        assert embedded["changes"] == {t: ops for t, ops in row["trajectory"]["changes"].items()}
        assert data["tasks"][embedded["task"]]["expected_changes"] == row["task"]["expected_changes"]
    assert len(data["systems"]) == 1  # the world's policy prompt, stored once for all episodes
    assert "token_buffer" not in html and data == json.loads(json.dumps(viewer_data(rows)))


def test_nothing_is_loaded_from_the_network(noisy):
    html = noisy.html
    assert not REMOTE_LOAD.search(html)
    outside_data = re.sub(r'<script type="application/json".*?</script>', "", html, flags=re.S)
    assert "://" not in outside_data  # not even an SVG namespace URL
    assert "<link" not in html and "@font-face" not in html
    assert re.search(r"Content-Security-Policy\" content=\"default-src 'none';", html)
    url = "https://api.example.com/v1"
    html = render_report({}, noisy.rows, config={**noisy.config, "policy": f"openai:some-model@{url}"})
    assert not REMOTE_LOAD.search(html) and url in Page(html).text("run-config")  # shown as text only


def test_a_tool_result_with_a_script_end_tag_stays_inert(gold):
    summary, config = gold.summary, gold.config
    rows = json.loads(json.dumps(gold.rows))
    traj = rows[0]["trajectory"]
    tool_message = next(m for m in traj["messages"] if m["role"] == "tool")
    tool_message["content"] = HOSTILE + " <!-- \u2028 \ud800"
    traj["messages"].append({"role": "assistant", "content": f"Done. {HOSTILE}"})
    rows[0]["task"]["instruction"] += HOSTILE
    rows[0]["score"]["components"][0]["reason"] = HOSTILE
    html = render_report(summary, rows, config={**config, "policy": HOSTILE})
    assert HOSTILE not in html and "<img" not in html and "<!--" not in html
    page = Page(html)
    assert page.all_tags["script"] == 2  # the JSON data and the viewer, nothing injected
    data = page.data()
    assert data == json.loads(json.dumps(viewer_data(rows)))
    messages = data["rows"][0]["messages"]
    assert HOSTILE + " <!-- \u2028 \ud800" in [m.get("content") for m in messages]
    assert messages[-1]["content"] == f"Done. {HOSTILE}"
    assert HOSTILE in page.text("run-config")  # escaped markup in the page, read back as text


def test_long_texts_are_cut_with_a_note(gold):
    rows = json.loads(json.dumps(gold.rows))
    traj = rows[0]["trajectory"]
    traj["messages"].append({"role": "assistant", "content": "x" * (MAX_TEXT_CHARS + 1234)})
    traj["token_buffer"] = {"ids": list(range(5000)), "logprobs": [0.0] * 5000}
    data = Page(render_report({}, rows, config=gold.config)).data()
    last = data["rows"][0]["messages"][-1]
    assert len(last["content"]) == MAX_TEXT_CHARS and last["cut"] == 1234
    assert "token_buffer" not in json.dumps(data)


@pytest.mark.parametrize("summary", [
    {},
    {"trials": None, "success_rate": None, "pass_at_k": {}, "pass_hat_k": {}, "by_difficulty": {}, "noise": {}},
    {"success_rate": "n/a", "pass_hat_k": {"x": 1, "2": None}, "pass_at_k": [1, 2], "by_difficulty": {"easy": 3},
     "by_target_tool": {"t": {"n": None, "success_rate": float("nan")}}, "divergence": {"none": 2, "3": "x"},
     "tool_errors": {"t": None, "u": {"types": "?"}}, "error_types": None, "terminations": {"answered": math.inf},
     "tokens": "?", "latency": {"episode_p90_s": None}, "noise": {"success_rate_with_noise": None}},
])  # fmt: skip
def test_missing_or_malformed_summary_keys_do_not_crash(summary, gold):
    for these_rows in ([], gold.rows):
        html = render_report(summary, these_rows, config={})
        page = Page(html)
        assert "viewer" in page.tags and "headline" in page.tags
        assert "—" in page.text("card-success-rate")
    broken = [{"task": None, "trajectory": {"messages": [None, {"role": "user"}]}, "score": None}, {}]
    data = Page(render_report(summary, broken, config={"limits": None})).data()
    assert [r["success"] for r in data["rows"]] == [None, None]


def test_skipped_task_lines_and_unfinished_runs_are_flagged():
    summary = {"trials": 2, "tasks": 4, "episodes": 5, "finished": 5, "task_file_errors": ["line 3: not valid JSON"]}
    html = render_report(summary, [], config={})
    assert "1 task-file line(s) could not be read and were skipped: line 3: not valid JSON" in html
    assert "The run is incomplete: 5 of 8 trials finished." in html
    assert 'class="warning"' not in render_report({**summary, "finished": 8, "task_file_errors": []}, [], config={})


@needs_matplotlib
def test_the_same_run_gives_the_same_bytes(noisy):
    again = render_report(noisy.summary, noisy.rows, config=noisy.config)
    assert again == noisy.html
    assert "<metadata" not in again and "dc:date" not in again


def test_without_matplotlib_the_numbers_are_still_shown(noisy, monkeypatch):
    summary = noisy.summary
    monkeypatch.setattr(report_plots, "available", lambda: False)
    page = Page(render_report(summary, noisy.rows, config=noisy.config))
    assert page.all_tags["svg"] == 0 and "plots-missing" in page.tags
    assert pct(summary["success_rate"]) in page.text("card-success-rate")
    assert "panel-divergence" in page.tags and "panel-pass-k" in page.tags


# -- writing ------------------------------------------------------------------------------------------------


def test_write_report_replaces_the_file_atomically(tmp_path, gold, monkeypatch):
    summary, rows, config = gold.summary, gold.rows, gold.config
    out = tmp_path / "run"
    path = write_report(out, summary, rows, config=config)
    assert path == out / "report.html" and path.read_text(encoding="utf-8") == gold.html
    before = path.read_bytes()

    def boom(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("rendering failed")

    with monkeypatch.context() as m:  # rendering fails: nothing is written
        m.setattr(report_render, "viewer_data", boom)
        with pytest.raises(RuntimeError, match="rendering failed"):
            write_report(out, {}, rows, config=config)
    assert sorted(os.listdir(out)) == ["report.html"] and path.read_bytes() == before

    with monkeypatch.context() as m:  # the rename fails: the temporary file is removed, the old report stays
        m.setattr(os, "replace", boom)  # the one atomic write (toolworld.core.files) renames with os.replace
        with pytest.raises(RuntimeError):
            write_report(out, {}, rows[:1], config={})
    assert sorted(os.listdir(out)) == ["report.html"] and path.read_bytes() == before

    fresh = tmp_path / "never-written"
    with monkeypatch.context() as m:
        m.setattr(report_render, "viewer_data", boom)
        with pytest.raises(RuntimeError):
            write_report(fresh, {}, rows, config=config)
    assert not (fresh / "report.html").exists()


# -- a real browser -----------------------------------------------------------------------------------------

CHROMIUM = Path("/usr/bin/chromium")
#: Console lines in Chromium's stderr log: ``[pid:tid:time:INFO:CONSOLE:12] "message", source: URL (12)``
#: (Chromium 150; older builds write ``INFO:CONSOLE(12)]``). Every level (log, warn, error, uncaught
#: exceptions, CSP violations) is logged as INFO there, so the page must log nothing at all.
CONSOLE = re.compile(r":CONSOLE[(:]\d*")


def _net_log_page_requests(path: Path) -> list[str]:
    """URLs the page itself asked the network for, from a Chromium ``--log-net-log`` file.

    Chromium makes requests of its own (time sync, account checks) even with background networking off; those
    have the initiator ``not an origin``, while the page's (a ``file://`` document) have ``null`` or a
    ``file`` origin. A log cut short at exit is repaired the documented way, by closing its event list.
    """
    text = path.read_text(encoding="utf-8", errors="replace")
    try:
        log = json.loads(text)
    except json.JSONDecodeError:
        log = json.loads(text.rstrip().rstrip(",") + "]}")
    start_job = log["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
    urls = []
    for event in log.get("events", []):
        params = event.get("params") or {}
        initiator = str(params.get("initiator", ""))
        if event.get("type") == start_job and (initiator == "null" or initiator.startswith("file")):
            urls.append(str(params.get("url")))
    return urls


needs_chromium = pytest.mark.skipif(not (CHROMIUM.exists() and os.access(CHROMIUM, os.X_OK)),
                                    reason="headless browser check needs Chromium at /usr/bin/chromium "
                                           "(Debian package 'chromium': apt-get install -y chromium)")  # fmt: skip


def open_in_chromium(report: Path, scratch: Path, fragment: str = "") -> str:
    """Load ``report`` in headless Chromium, check that the page logged nothing and fetched nothing, and return
    the DOM after its scripts ran.

    How: ``chromium --headless --dump-dom file://…/report.html`` prints the DOM once the page has loaded;
    ``--virtual-time-budget=5000`` lets scripts and timers run to completion on virtual time first (without
    it the dump can come before the viewer ran). ``--no-sandbox`` is needed when running as root (CI
    containers); a ``--user-data-dir`` and ``HOME`` in a temporary folder keep runs independent of each other
    and of the machine. ``--enable-logging=stderr --v=0`` writes console messages to stderr (see
    ``CONSOLE``). Network: the flags that stop background traffic, ``--host-resolver-rules='MAP * ~NOTFOUND'``
    so nothing can leave the machine, and ``--log-net-log`` to show the page asked for nothing (the page's
    CSP would block such a request and log it, which the console check also catches). Other stderr lines
    (D-Bus, GPU, the Debian wrapper script) are noise of a headless container and are ignored. One run takes
    about two seconds.
    """
    net_log = scratch / "net.json"
    command = [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
               "--disable-background-networking", "--disable-component-update", "--disable-sync",
               "--disable-default-apps", "--disable-extensions", f"--user-data-dir={scratch / 'profile'}",
               "--enable-logging=stderr", "--v=0", "--host-resolver-rules=MAP * ~NOTFOUND",
               f"--log-net-log={net_log}", "--virtual-time-budget=5000", "--dump-dom", report.as_uri() + fragment]  # fmt: skip
    env = {**os.environ, "HOME": str(scratch)}
    done = subprocess.run(command, capture_output=True, text=True, timeout=90, env=env, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    console = [line for line in done.stderr.splitlines() if CONSOLE.search(line)]
    assert not console, "\n".join(console)
    assert _net_log_page_requests(net_log) == []
    return done.stdout


@needs_chromium
@needs_matplotlib
def test_headless_chromium_draws_the_plots_and_runs_the_viewer(tmp_path, noisy):
    summary, config = noisy.summary, noisy.config
    rows = json.loads(json.dumps(noisy.rows))
    first = rows[0]["trajectory"]
    first["messages"].append({"role": "assistant", "content": f"Done. {HOSTILE}"})
    report = write_report(tmp_path / "run", summary, rows, config=config)
    static = report.read_text(encoding="utf-8")
    dom = open_in_chromium(report, tmp_path)

    page = Page(dom)
    for plot_id in ALL_PLOTS:
        assert page.tags[plot_id]["svg"] == 1, plot_id
    # The list rows and the first episode's conversation are built by the script: absent from the file.
    assert 'class="trial-row' not in static and 'class="msg msg-user' not in static
    assert dom.count('class="trial-row') == len(rows)
    for row in rows:
        assert f'data-key="{row["task"]["id"]}:{row["trajectory"]["trial"]}"' in dom
    assert f"{len(rows)} of {len(rows)} episodes" in page.text("filter-count")
    detail = page.text("trial-detail")
    assert rows[0]["task"]["instruction"] in detail
    assert dom.count('class="msg msg-user') == sum(m["role"] == "user" for m in first["messages"])
    assert page.tags["trial-detail"]["pre"] > 0 and "State: gold vs agent" in detail
    # The hostile message was rendered as text: escaped in the serialized DOM, no element made from it.
    assert f"Done. {HOSTILE}" in detail and "&lt;/script&gt;&lt;img src=x" in dom
    assert page.all_tags["img"] == 0


@needs_chromium
def test_headless_chromium_shows_unscored_and_malformed_episodes(tmp_path, gold):
    """An infra-error episode (no score) and rows with parts missing still list and open without a JS error."""
    infra = json.loads(json.dumps(gold.rows[0]))
    infra["trajectory"].update(termination="infra_error", changes={}, infra_errors=[{"kind": "crash", "fatal": True}])
    infra["score"] = None
    rows = [infra, {"task": None, "trajectory": {"messages": [None, {"role": "user"}]}, "score": None}, {}]
    report = write_report(tmp_path / "run", {}, rows, config={})
    for key, expected in ((f"{infra['task']['id']}:0", "infra error (not scored)"), ("row-1:0", "not scored")):
        page = Page(open_in_chromium(report, tmp_path / key.replace(":", "-"), "#episode=" + key))
        assert expected in page.text("trial-detail") and "This episode was not scored." in page.text("trial-detail")
    assert page.text("filter-count") == "3 of 3 episodes"


@needs_chromium
def test_headless_chromium_shows_an_episodes_token_record_problems(tmp_path, gold):
    """An episode whose token record broke shows it in its header; a clean one shows nothing of the kind."""
    broken = json.loads(json.dumps(gold.rows[0]))
    broken["trajectory"]["token_buffer"] = {"ids": [], "mask": [], "logprobs": [], "message_index": [], "breaks": 2,
                                            "events": [{"kind": "divergence", "reason": "d", "at_token": 3}]}  # fmt: skip
    broken["trajectory"]["turns"][0]["meta"] = {"no_sampled_ids": True, "renamed_call_ids": {"call_0_0": "x"}}
    report = write_report(tmp_path / "run", {}, [broken, gold.rows[1]], config={})
    key = f"{broken['task']['id']}:{broken['trajectory']['trial']}"
    detail = Page(open_in_chromium(report, tmp_path / "broken", "#episode=" + key)).text("trial-detail")
    for text in ("2 template bridge breaks", "1 buffer divergences", "1 turns without sampled ids",
                 "1 tool-call ids renamed"):
        assert text in detail, text
    key = f"{gold.rows[1]['task']['id']}:{gold.rows[1]['trajectory']['trial']}"
    clean = Page(open_in_chromium(report, tmp_path / "clean", "#episode=" + key)).text("trial-detail")
    assert "template bridge" not in clean and "renamed" not in clean
