"""The check registry and the context every check reads from.

A check is a function ``(CheckContext) -> Verdict`` registered under a name with :func:`check`; a world author
or a plugin adds one the same way (or through the ``toolworld.checks`` entry-point group), and
``check_world(..., only=[...])`` runs it. The context computes the expensive shared material once, on first
use: the generated tasks and the tour's calls, which several checks draw their tool calls from.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.registry import Registry
from ..world import ToolCall, World
from .loading import LoadedWorld
from .report import Verdict

if TYPE_CHECKING:
    from ..tasks.kit import TaskKit
    from ..tasks.model import Task

ENTRY_POINT_GROUP = "toolworld.checks"
CheckFn = Callable[["CheckContext"], Verdict]


def _as_check(obj: Any, name: str) -> CheckFn:
    if not callable(obj):
        raise TypeError(f"{type(obj).__name__} is not a check (a function of a CheckContext returning a Verdict)")
    return obj


#: Every check by name, in the order they run: built-ins first, cheap ones before the task run.
CHECKS: Registry[CheckFn] = Registry("check", group=ENTRY_POINT_GROUP, adapt=_as_check)


def check(name: str, *, replace: bool = False) -> Callable[[CheckFn], CheckFn]:
    """Register a check under ``name`` (its docstring is the reason it exists, shown by ``--json`` users)."""

    def decorate(fn: CheckFn) -> CheckFn:
        CHECKS.register(name, fn, replace=replace)
        return fn

    return decorate


@dataclass(frozen=True, slots=True)
class TourCall:
    """One call the world's tour makes, with whether it succeeded."""

    call: ToolCall
    ok: bool
    mutates: bool


@dataclass
class CheckContext:
    """The world under check and material shared by the checks (computed lazily, once)."""

    loaded: LoadedWorld
    seed: int = 0
    n_tasks: int = 100
    notes: dict[str, Any] = field(default_factory=dict)
    task_error: str | None = None

    @property
    def world(self) -> World:
        return self.loaded.world

    @property
    def source_dir(self) -> Path | None:
        return self.loaded.source_dir

    @cached_property
    def kit(self) -> TaskKit:
        from ..tasks.kit import kit_for

        return kit_for(self.world)

    @cached_property
    def tasks(self) -> list[Task]:
        """``n_tasks`` generated tasks at ``seed`` (empty when ``n_tasks`` is 0 or generation fails: the failure is
        kept in ``task_error`` for the ``tasks`` check to report, while the other checks go on with the tour)."""
        if self.n_tasks <= 0:
            return []
        from ..tasks.generate import generate

        try:
            return generate(self.world, self.n_tasks, seed=self.seed).tasks
        except Exception as exc:  # a broken kit is one finding, not a reason to lose every other check's
            self.task_error = f"{type(exc).__name__}: {exc}"
            return []

    def task_warnings(self) -> list[str]:
        """A warning to attach when the tasks that would have given a check more calls could not be generated."""
        _ = self.tasks
        return [f"only the tour's calls were used: task generation failed ({self.task_error})"] if self.task_error \
            else []  # fmt: skip

    @cached_property
    def tour_calls(self) -> list[TourCall]:
        """The tour's calls as run on a fresh episode (forks are followed as the CLI's tour does: it goes on)."""
        if self.world.tour is None:
            return []
        out: list[TourCall] = []
        with self.world.episode(self.seed) as ep:
            for step in self.world.tour(ep):
                if step.call is None:
                    continue
                tool = self.world.tools.get(step.call.name)
                result = ep.call(step.call.name, dict(step.call.arguments))
                out.append(TourCall(step.call, result.ok, bool(tool and tool.mutates)))
        return out

    def calls(self, *, mutates: bool) -> list[ToolCall]:
        """Distinct calls of read (or write) tools seen in the tour and in the tasks' gold actions."""
        seen: set[str] = set()
        out: list[ToolCall] = []
        candidates = [c.call for c in self.tour_calls]
        for task in self.tasks:
            candidates += [ToolCall(a.name, dict(a.arguments)) for a in task.gold_actions]
        for call in candidates:
            tool = self.world.tools.get(call.name)
            if tool is None or tool.mutates != mutates:
                continue
            key = call.name + repr(sorted(call.arguments.items(), key=lambda kv: kv[0]))
            if key not in seen:
                seen.add(key)
                out.append(ToolCall(call.name, dict(call.arguments)))
        return out


#: ``**R7 Title.**`` (or ``**R7.**``): how policy.md numbers its rules.
RULE_RE = re.compile(r"\*\*\s*(R\d+)\b")
#: ``(policy R7)`` in an error message: the rule a refusal cites.
CITED_RE = re.compile(r"\bpolicy (R\d+)\b")
#: ``def test_R7_...``: the test of a rule.
TEST_RE = re.compile(r"^\s*(?:async\s+)?def test_(R\d+)(?:_|\()", re.MULTILINE)
#: Words of an error message that tell the agent what to do next.
ACTIONABLE_RE = re.compile(r"\b(ask|asks|check|use|instead|it takes|try|look it up|identify|transfer|tell|offer|explain|"
                           r"wait|step by step|first)\b", re.I)  # fmt: skip


def rules_in(policy: str) -> list[str]:
    """Rule ids numbered in a policy text, in order of first appearance."""
    return list(dict.fromkeys(RULE_RE.findall(policy)))


def actionable(message: str, tool_names: list[str], own: str) -> bool:
    """Whether an error message tells the agent what to do next (another tool's name, or an instruction)."""
    if ACTIONABLE_RE.search(message):
        return True
    return any(name != own and name in message for name in tool_names)
