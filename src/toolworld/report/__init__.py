"""The run report: one self-contained, offline HTML file with the summary, plots and a trajectory viewer.

``write_report(out_dir, summary, rows, config=...)`` is what ``toolworld run`` and ``toolworld report DIR``
call; ``render_report`` returns the same document as a string. Plots need matplotlib (the ``report`` extra);
without it the report still renders, with tables in place of the plots.
"""

from __future__ import annotations

from .render import render_report, write_report

__all__ = ["render_report", "write_report"]
