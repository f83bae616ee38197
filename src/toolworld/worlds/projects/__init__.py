"""The projects world: a software company's issue tracker (projects, issues, workflows, sprints, time).

Built from ``schema.sql``, the deterministic generator in ``data.py``, the tools in ``tools.py`` and the
rules in ``policy.md``, which the write tools enforce.
"""

from __future__ import annotations

from pathlib import Path

from toolworld.world import World

from .common import NOW
from .tools import TOOLS
from .tour import tour

_HERE = Path(__file__).parent


def _seed_data(db, rng):  # type: ignore[no-untyped-def]
    # Imported lazily so that listing tool schemas does not load the vocabulary.
    from .data import seed_data

    seed_data(db, rng)


world = World(
    "projects",
    description=(
        "A software company's issue tracker: projects with leads, members and work-in-progress limits; bugs, "
        "stories, tasks and epics moving through per-type workflows; sprints with capacities; comments and "
        "time logs. Team members write in to create, assign, move, estimate and plan work."
    ),
    policy=(_HERE / "policy.md").read_text(encoding="utf-8"),
    schema=(_HERE / "schema.sql").read_text(encoding="utf-8"),
    seed_data=_seed_data,
    tools=TOOLS,
    entities={
        "user": "users.user_id",
        # Colleagues live in the same table, as another kind: assigning an issue to a teammate is not acting
        # for them, so only the person's own id (kind "user") is held to the identified person.
        "teammate": "users.user_id",
        "project": "projects.project_key",
        "issue": "issues.issue_key",
        "sprint": "sprints.sprint_id",
        "time_log": "time_logs.time_log_id",
        "email": None,
    },
    customer="user",
    owners={"time_log": "time_logs.user_id"},
    ownership_rule="R12",
    clock=NOW,
    tour=tour,
    synthesis="toolworld.worlds.projects.kit:kit",
)

__all__ = ["world"]
