"""The hr world: one company's HR service desk (org chart, leave, pay, checklists, documents).

Built from ``schema.sql``, the deterministic generator in ``data.py``, the tools in ``tools.py`` and the rules in
``policy.md``, which the write tools enforce.
"""

from __future__ import annotations

from pathlib import Path

from toolworld.world import World

from .common import NOW
from .tools import TOOLS
from .tour import tour

_HERE = Path(__file__).parent


def _seed_data(db, rng):  # type: ignore[no-untyped-def]
    # Imported lazily so that listing tool schemas does not build name lists.
    from .data import seed_data

    seed_data(db, rng)


world = World(
    "hr",
    description=(
        "An HR service desk for one company of about 800 people: an org chart with managers, leave requests and "
        "balances (with carry-over and a holiday calendar), salaries and pay-change approvals, onboarding and "
        "offboarding checklists, documents with confidentiality, and emergency contacts."
    ),
    policy=(_HERE / "policy.md").read_text(encoding="utf-8"),
    schema=(_HERE / "schema.sql").read_text(encoding="utf-8"),
    seed_data=_seed_data,
    tools=TOOLS,
    entities={
        "employee": "employees.employee_id",
        "colleague": "employees.employee_id",
        "leave_request": "leave_requests.request_id",
        "comp_change": "comp_change_requests.change_id",
        "checklist_item": "checklist_items.item_id",
        "document": "documents.document_id",
        "hr_case": "hr_cases.case_id",
        "email": None,
        "first_name": None,
        "last_name": None,
        "department": None,
    },
    # Every write names the acting employee: once identified, the episode refuses any other (policy R11). What a
    # manager or HR may do to someone else's records is the tools' own check (rules R1, R6 to R10).
    customer="employee",
    ownership_rule="R11",
    clock=NOW,
    tour=tour,
    synthesis="toolworld.worlds.hr.kit:kit",
)

__all__ = ["world"]
