"""``check_world``: hold a world to the bar before anyone trains or scores on it.

The counterpart of Gymnasium's ``check_env``::

    from toolworld.check import check_world
    report = check_world("retail", tasks=100)
    report.ok, [r.to_dict() for r in report.results]

``toolworld check-world NAME|PATH`` prints the same report. Checks live in a registry (:data:`CHECKS`), so a
world author or a plugin adds one with ``@check("name")`` (or the ``toolworld.checks`` entry-point group).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from pathlib import Path

from ..world import World
from . import checks as _builtin  # noqa: F401 - registers the built-in checks
from .base import CHECKS, CheckContext, CheckFn, check
from .loading import CheckError, LoadedWorld, load_world
from .report import CheckReport, CheckResult, Verdict, failed, passed, skipped

__all__ = [
    "CHECKS",
    "CheckContext",
    "CheckError",
    "CheckFn",
    "CheckReport",
    "CheckResult",
    "LoadedWorld",
    "Verdict",
    "check",
    "check_world",
    "failed",
    "load_world",
    "passed",
    "skipped",
]

#: Called with (check name, None) when a check starts and (check name, its result) when it ends.
OnProgress = Callable[[str, CheckResult | None], None]


def check_world(target: World | str | Path, *, tasks: int = 100, seed: int = 0, only: Iterable[str] | None = None,
                skip: Iterable[str] = (), on_progress: OnProgress | None = None) -> CheckReport:  # fmt: skip
    """Run the registered checks on a world (a ``World``, an installed world's name, or a world package folder).

    ``only`` and ``skip`` select checks by name (an unknown name, or a selection that leaves none, is a
    :class:`CheckError` listing the known ones); ``tasks`` is how many tasks the task-based checks generate at ``seed``. A check that crashes is a
    failed check whose detail names the exception: a broken world must not hide the other checks' findings.
    """
    loaded = load_world(target)
    names = CHECKS.names()
    chosen = list(only) if only is not None else list(names)
    dropped = list(skip)
    unknown = [n for n in [*chosen, *dropped] if n not in names]
    if unknown:
        raise CheckError(f"unknown check {', '.join(map(repr, unknown))}; the checks are {', '.join(names)}",
                         kind="unknown_check")  # fmt: skip
    selected = [n for n in names if n in chosen and n not in dropped]
    if not selected:  # an empty report would read as "meets the bar" having judged nothing
        raise CheckError(f"no check left to run (only={chosen}, skip={dropped}); the checks are {', '.join(names)}",
                         kind="no_checks")  # fmt: skip
    ctx = CheckContext(loaded, seed=seed, n_tasks=tasks)
    report = CheckReport(world=loaded.world.name, seed=seed, tasks=tasks)
    for name in selected:
        if on_progress is not None:
            on_progress(name, None)
        start = time.perf_counter()
        try:
            verdict = CHECKS.get(name)(ctx)
        except Exception as exc:  # a crash is a finding about the world (or the check), never a lost report
            verdict = failed(f"the check crashed: {type(exc).__name__}: {exc}")
        result = CheckResult(name, verdict.status, verdict.detail, time.perf_counter() - start, verdict.warnings,
                             verdict.data)  # fmt: skip
        report.results.append(result)
        if on_progress is not None:
            on_progress(name, result)
    return report
