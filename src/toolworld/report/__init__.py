"""The run report: one self-contained, offline HTML file with the summary, plots and a trajectory viewer.

``write_report(out_dir, summary, rows, config=...)`` is what ``toolworld run`` and ``toolworld report DIR``
call; ``render_report`` returns the same document as a string. Plots need matplotlib (the ``report`` extra);
without it the report still renders, with tables in place of the plots. A ``learning.json`` in the run folder
(the curve of a staged training run, checked by :func:`load_learning`) adds a "Learning curve" panel.
"""

from __future__ import annotations

from .render import LearningError, load_learning, render_report, validate_learning, write_report

__all__ = ["LearningError", "load_learning", "render_report", "validate_learning", "write_report"]
