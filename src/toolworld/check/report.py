"""What ``check_world`` returns: one ``CheckResult`` per check and a ``CheckReport`` over them all.

A check ends ``passed``, ``failed`` or ``skipped`` (it could not judge, e.g. a wheel ships no tests): a skip is
neither a pass nor a failure, so a report is ``ok`` when nothing failed, and still says what was not judged.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

Status = Literal["passed", "failed", "skipped"]


@dataclass(frozen=True, slots=True)
class Verdict:
    """What a check function returns; the runner adds its name and timing."""

    status: Status
    detail: str
    warnings: tuple[str, ...] = ()
    #: Figures a script reads instead of parsing ``detail`` (the tasks check's pass^1 rates, say).
    data: Mapping[str, Any] = field(default_factory=dict)


def passed(detail: str, warnings: list[str] | tuple[str, ...] = (), data: Mapping[str, Any] | None = None) -> Verdict:
    return Verdict("passed", detail, tuple(warnings), dict(data or {}))


def failed(detail: str, warnings: list[str] | tuple[str, ...] = (), data: Mapping[str, Any] | None = None) -> Verdict:
    return Verdict("failed", detail, tuple(warnings), dict(data or {}))


def skipped(detail: str) -> Verdict:
    return Verdict("skipped", detail)


@dataclass(frozen=True, slots=True)
class CheckResult:
    """The outcome of one check on one world."""

    name: str
    status: Status
    detail: str
    seconds: float
    warnings: tuple[str, ...] = ()
    data: Mapping[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    @property
    def failed(self) -> bool:
        return self.status == "failed"

    @property
    def skipped(self) -> bool:
        return self.status == "skipped"

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "status": self.status, "passed": self.passed, "detail": self.detail,
                "seconds": round(self.seconds, 3), "warnings": list(self.warnings), "data": dict(self.data)}  # fmt: skip


@dataclass(slots=True)
class CheckReport:
    """Every check run on a world, in the order they ran."""

    world: str
    seed: int
    tasks: int
    results: list[CheckResult] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when no check failed (skipped checks do not count against a world)."""
        return not any(r.failed for r in self.results)

    @property
    def seconds(self) -> float:
        return sum(r.seconds for r in self.results)

    def failures(self) -> list[CheckResult]:
        return [r for r in self.results if r.failed]

    def __getitem__(self, name: str) -> CheckResult:
        for r in self.results:
            if r.name == name:
                return r
        raise KeyError(f"no check {name!r} in this report; it has {', '.join(r.name for r in self.results)}")

    def to_dict(self) -> dict[str, Any]:
        return {"world": self.world, "seed": self.seed, "tasks": self.tasks, "ok": self.ok,
                "seconds": round(self.seconds, 3), "checks": [r.to_dict() for r in self.results]}  # fmt: skip
