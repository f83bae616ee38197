"""Task-synthesis hints for hr: who writes in, realistic target arguments, and how employees speak.

Candidates are drawn from the live episode in every state (a report's fresh request and one left pending since
last year, a raise within 15% and one above it), and the generator executes them: what the world accepts
becomes an action task, what it refuses under a rule becomes a refusal task, with no rule coded twice.
Employees never quote internal ids: requests are named by their dates, colleagues by name, documents by
title.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date, timedelta
from typing import Any

from toolworld.core.errors import ToolworldError
from toolworld.tasks.kit import Bag, TaskKit
from toolworld.tasks.model import ExpectedOutput, Task, UserProfile
from toolworld.tasks.quality import CoherenceRule, writes_of
from toolworld.tasks.sampling import Draft, Plan, Target
from toolworld.world import Episode, Rng, World
from toolworld.worlds.shared.clock import add_business_days
from toolworld.worlds.shared.people import FIRST_NAMES, display_name

from . import scenarios
from .common import HOLIDAY_DATES, NOW, RELATIONSHIPS, TODAY, YEAR, available_for, balance, leave_days
from .phrases import (
    CONTINGENCIES,
    FREE_SLOTS,
    IDENTITY,
    INTENTS,
    OPENERS,
    RAISE_REASONS,
    REJECT_REASONS,
    REVISIONS,
    TONES,
    TRANSFER_SUMMARIES,
)

LEAVE_WORDS = {"vacation": "vacation", "sick": "sick leave", "parental": "parental leave", "unpaid": "unpaid leave"}


def spoken(day: str | date) -> str:
    """A date as a person writes it: 'Monday, April 13, 2026' (the agent turns it into YYYY-MM-DD)."""
    d = date.fromisoformat(day) if isinstance(day, str) else day
    return f"{d:%A}, {d:%B} {d.day}, {d.year}"


def _money(c: int) -> str:
    return f"${c / 100:,.0f}" if c % 100 == 0 else f"${c / 100:,.2f}"


class HrKit(TaskKit):
    principal = "employee"
    intents = INTENTS
    info_tools = ("get_leave_balance", "get_compensation")
    ignore_columns = ("hr_cases.summary", "leave_requests.note", "comp_change_requests.reason")
    handoff_tools = ("transfer_to_hr_partner",)

    def principals(self, ep: Episode) -> list[Any]:
        # Former employees cannot be identified (their email leads to a hand-off), so nobody asks as one.
        # Managers, HR and owners of open checklist items write in far more often than their share of the
        # headcount (they act for their teams and new hires), so they are listed three times: otherwise approvals,
        # offboardings and checklist work would be rare among the tasks.
        if ep.seed not in self._principals:
            rows = ep.query(
                "SELECT e.employee_id, e.role != 'employee' OR EXISTS (SELECT 1 FROM checklist_items i JOIN checklists "
                "c ON c.checklist_id = i.checklist_id WHERE c.status = 'open' AND i.done_at IS NULL AND i.owner_id = "
                "e.employee_id) AS busy FROM employees e WHERE e.status != 'terminated' ORDER BY e.employee_id")
            ids = [r["employee_id"] for r in rows]
            self._principals[ep.seed] = ids + [r["employee_id"] for r in rows if r["busy"]] * 2
        return self._principals[ep.seed]

    def profile(self, ep: Episode, principal_id: Any, rng: Rng) -> UserProfile:
        e = ep.query("SELECT e.*, d.name AS department FROM employees e JOIN departments d "
                     "ON d.department_id = e.department_id WHERE e.employee_id = ?", (principal_id,))[0]  # fmt: skip
        name = display_name(e)
        return UserProfile(
            name=name,
            persona=f"{name}, {e['title']} in {e['department']}, {rng.choice(TONES)}.",
            known={"email": e["email"], "first_name": e["first_name"], "last_name": e["last_name"],
                   "department": e["department"]},
        )

    def identity_templates(self, tool: str) -> list[str]:
        return IDENTITY[tool] if tool in IDENTITY else super().identity_templates(tool)

    def opener_templates(self) -> list[str]:
        return OPENERS

    # -- candidates -----------------------------------------------------------------------------------------

    def propose(self, tool: str, ep: Episode, principal_id: Any, bag: Bag, rng: Rng) -> list[dict[str, Any]]:
        me = principal_id
        out: list[dict[str, Any]] = []
        if tool == "submit_leave_request":
            for _ in range(6):
                out.append({"employee_id": me, **self._dates(ep, me, rng)})
        elif tool == "cancel_leave_request":
            rows = ep.query("SELECT request_id FROM leave_requests WHERE employee_id = ? AND start_date >= ? "
                            "AND status IN ('pending', 'approved') AND submitted_at != ? ORDER BY request_id",
                            (me, f"{YEAR}-01-01", NOW))  # fmt: skip
            out = [{"employee_id": me, "request_id": r["request_id"]} for r in rows]
        elif tool in ("approve_leave_request", "reject_leave_request"):
            for rid in self._team_requests(ep, me):
                args: dict[str, Any] = {"manager_id": me, "request_id": rid}
                if tool == "reject_leave_request":
                    args["reason"] = rng.choice(REJECT_REASONS)
                out.append(args)
        elif tool == "request_compensation_change":
            rows = ep.query("SELECT e.employee_id, (SELECT salary_cents FROM compensation c WHERE c.employee_id = "
                            "e.employee_id ORDER BY effective_date DESC, comp_id DESC LIMIT 1) AS salary FROM employees e "
                            "WHERE e.manager_id = ? AND e.status != 'terminated' ORDER BY e.employee_id", (me,))  # fmt: skip
            for r in rows:
                base = r["salary"] or 9_000_000
                pct = rng.choice((3, 4, 5, 6, 8, 10, 12, 18))
                new = (base + base * pct // 100) // 50_000 * 50_000
                out.append({"employee_id": me, "colleague_id": r["employee_id"], "new_salary": new / 100,
                            "reason": rng.choice(RAISE_REASONS)})  # fmt: skip
        elif tool == "approve_compensation_change":
            rows = ep.query(
                "SELECT c.change_id FROM comp_change_requests c JOIN employees e ON e.employee_id = c.employee_id "
                "JOIN employees m ON m.employee_id = e.manager_id WHERE c.status = 'pending' AND c.proposed_by != ? "
                "AND (m.manager_id = ? OR (SELECT role FROM employees WHERE employee_id = ?) = 'hr') "
                "ORDER BY c.change_id", (me, me, me))  # fmt: skip
            out = [{"employee_id": me, "change_id": r["change_id"]} for r in rows]
        elif tool == "complete_checklist_item":
            rows = ep.query(
                "SELECT DISTINCT i.item_id FROM checklist_items i JOIN checklists c ON c.checklist_id = i.checklist_id "
                "WHERE c.status = 'open' AND i.done_at IS NULL AND (i.owner_id = ? OR c.employee_id = ?) "
                "AND c.created_at != ? ORDER BY i.item_id", (me, me, NOW))  # fmt: skip
            out = [{"employee_id": me, "item_id": r["item_id"]} for r in rows]
        elif tool == "start_offboarding":
            rows = ep.query("SELECT employee_id FROM employees WHERE manager_id = ? AND status != 'terminated' "
                            "ORDER BY employee_id", (me,))  # fmt: skip
            for r in rows:
                day = add_business_days(TODAY, rng.randint(5, 30), HOLIDAY_DATES)
                if rng.chance(0.1):
                    day += timedelta(days=5 - day.weekday())  # the Saturday after: not a business day
                out.append({"employee_id": me, "colleague_id": r["employee_id"], "last_day": day.isoformat()})
        elif tool == "request_document_copy":
            rows = ep.query("SELECT document_id FROM documents WHERE employee_id = ? ORDER BY document_id", (me,))
            out = [{"employee_id": me, "document_id": r["document_id"]} for r in rows]
        elif tool == "update_emergency_contact":
            last = ep.query("SELECT last_name FROM employees WHERE employee_id = ?", (me,))[0]["last_name"]
            for _ in range(2):
                out.append({"employee_id": me, "name": f"{rng.choice(FIRST_NAMES)} {last}",
                            "relationship": rng.choice(RELATIONSHIPS[:5]),
                            "phone": f"+1-{rng.choice(('512', '720', '312', '206'))}-555-01{rng.randint(0, 99):02d}"})
        elif tool == "transfer_to_hr_partner":
            out = [{"employee_id": me, "summary": rng.choice(TRANSFER_SUMMARIES)}]
        elif tool in ("get_leave_balance", "get_compensation"):
            out = [{"employee_id": me}]
        rng.shuffle(out)
        return out

    def _dates(self, ep: Episode, me: str, rng: Rng) -> dict[str, Any]:
        """A leave request as people make them: mostly a few days of vacation, now and then more than the
        balance, dates that clash with an existing request, or a day already past."""
        roll = rng.below(100)
        existing = ep.query("SELECT start_date FROM leave_requests WHERE employee_id = ? AND start_date > ? AND status "
                            "IN ('pending', 'approved') ORDER BY start_date", (me, TODAY.isoformat()))  # fmt: skip
        if roll < 8 and existing:
            start = date.fromisoformat(rng.choice(existing)["start_date"])
        elif roll < 14:
            start = add_business_days(TODAY, -rng.randint(1, 5), HOLIDAY_DATES)
        elif roll < 30:
            start = add_business_days(TODAY, rng.randint(2, 16), HOLIDAY_DATES)  # before the carry-over expires
        else:
            start = add_business_days(TODAY, rng.randint(17, 170), HOLIDAY_DATES)
        length = rng.randint(1, 5) if rng.below(100) < 80 else rng.randint(8, 20)
        end = add_business_days(start, length - 1, HOLIDAY_DATES)
        if end.year != start.year:
            end = date(start.year, 12, 31)
        leave_type = rng.weighted(["vacation", "sick", "unpaid", "parental"], [78, 8, 10, 4])
        return {"leave_type": leave_type, "start_date": start.isoformat(), "end_date": end.isoformat()}

    def _team_requests(self, ep: Episode, me: str) -> list[str]:
        rows = ep.query(
            "SELECT r.request_id FROM leave_requests r JOIN employees e ON e.employee_id = r.employee_id "
            "LEFT JOIN employees m ON m.employee_id = e.manager_id WHERE r.status = 'pending' AND e.status != "
            "'terminated' AND ((e.manager_id = ? AND m.status != 'on_leave') OR (m.status = 'on_leave' AND "
            "m.manager_id = ?) OR (e.manager_id IS NULL AND (SELECT role FROM employees WHERE employee_id = ?) = 'hr')) "
            "ORDER BY r.request_id", (me, me, me))  # fmt: skip
        return [r["request_id"] for r in rows]

    # -- checks -------------------------------------------------------------------------------------------

    def coherence_rules(self) -> dict[str, CoherenceRule]:
        world = self.world
        return {"one_request_per_colleague": lambda task, ep: one_request_per_colleague(task, ep, world)}

    # -- scenarios ------------------------------------------------------------------------------------------

    def contingencies(self, ep: Episode, principal_id: Any, rng: Rng) -> list[Plan]:
        """"Vacation if my balance covers it, else unpaid": the branch turns on a balance the agent must read."""
        bal = ep.query("SELECT allowance_days, carried_over_days FROM leave_balances WHERE employee_id = ? AND "
                       "leave_type = 'vacation' AND year = ?", (principal_id, YEAR))  # fmt: skip
        if not bal:
            return []
        booked = ep.query("SELECT start_date, end_date, business_days FROM leave_requests WHERE employee_id = ? "
                          "AND leave_type = 'vacation' AND status IN ('pending', 'approved') AND start_date >= ?",
                          (principal_id, f"{YEAR}-01-01"))  # fmt: skip
        left = balance(bal[0]["allowance_days"], bal[0]["carried_over_days"], booked)
        taken = ep.query("SELECT start_date, end_date FROM leave_requests WHERE employee_id = ? AND status IN "
                         "('pending', 'approved') AND end_date >= ?", (principal_id, TODAY.isoformat()))  # fmt: skip
        plans = []
        for _ in range(3):
            start = add_business_days(TODAY, rng.randint(20, 160), HOLIDAY_DATES)
            cap = max(1, available_for(left, start))
            # Half the time more days than the balance covers (a long trip), so both branches are drawn.
            length = rng.randint(cap + 1, cap + 3) if rng.chance(0.5) else rng.randint(1, min(cap, 8))
            end = add_business_days(start, length - 1, HOLIDAY_DATES)
            if end.year != YEAR or any(t["start_date"] <= end.isoformat() and t["end_date"] >= start.isoformat()
                                       for t in taken):  # fmt: skip
                continue
            then = {"employee_id": principal_id, "leave_type": "vacation", "start_date": start.isoformat(),
                    "end_date": end.isoformat()}  # fmt: skip
            holds = leave_days(start, end) <= available_for(left, end)
            plans.append(Plan("vacation_or_unpaid", "the vacation balance covers the days", holds,
                              ("submit_leave_request", then),
                              ("submit_leave_request", {**then, "leave_type": "unpaid"}),
                              {"start": spoken(start), "end": spoken(end)}))  # fmt: skip
        return plans

    def contingency_templates(self, kind: str) -> list[str]:
        if kind not in CONTINGENCIES:
            raise ToolworldError(f"hr has no contingency templates of kind {kind!r}; it has "
                                 f"{', '.join(sorted(CONTINGENCIES))}", kind="unknown_contingency")  # fmt: skip
        return CONTINGENCIES[kind]

    def alternatives(self, target: Target, ep: Episode,
                     principal_id: Any) -> list[tuple[str, list[tuple[str, dict[str, Any]]]]]:  # fmt: skip
        """A refusal whose message points to an HR partner may end in that hand-off instead of a plain no: the
        policy allows it, so an agent that takes it is not wrong."""
        if target.reason is None or "transfer" not in target.reason.lower():
            return []
        summary = f"The employee asked to {target.tool.replace('_', ' ')}, which policy {target.rule} does not allow here."
        return [("transfer the case to an HR partner",
                 [("transfer_to_hr_partner", {"employee_id": principal_id, "summary": summary})])]

    def dress(self, draft: Draft, ep: Episode, rng: Rng) -> None:
        scenarios.dress(self, draft, ep, rng)

    def revision_templates(self, tool: str) -> list[str]:
        return REVISIONS.get(tool) or super().revision_templates(tool)

    # -- speaking -------------------------------------------------------------------------------------------

    def slots(self, tool: str, ep: Episode, args: Mapping[str, Any], profile: UserProfile | None) -> dict[str, str]:
        out: dict[str, str] = {}
        me = args.get("employee_id") or args.get("manager_id")
        if "leave_type" in args:
            out["leave"] = LEAVE_WORDS[str(args["leave_type"])]
        if "start_date" in args:
            out["start"], out["end"] = spoken(args["start_date"]), spoken(args["end_date"])
        if "request_id" in args:
            q = ep.query("SELECT r.*, e.first_name, e.last_name FROM leave_requests r JOIN employees e "
                         "ON e.employee_id = r.employee_id WHERE r.request_id = ?", (args["request_id"],))[0]  # fmt: skip
            whose = "my" if q["employee_id"] == me else f"{display_name(q)}'s"
            days = spoken(q["start_date"]) if q["start_date"] == q["end_date"] else \
                f"{spoken(q['start_date'])} to {spoken(q['end_date'])}"  # fmt: skip
            out["request"] = f"{whose} {LEAVE_WORDS[q['leave_type']]} request for {days}"
            out["request_cap"] = out["request"][0].upper() + out["request"][1:]
        if "colleague_id" in args:
            out["colleague"] = self._name(ep, args["colleague_id"])
        if "new_salary" in args:
            out["salary"] = _money(round(float(args["new_salary"]) * 100))
        if "reason" in args:
            out["reason"] = str(args["reason"])
        if "change_id" in args:
            c = ep.query("SELECT * FROM comp_change_requests WHERE change_id = ?", (args["change_id"],))[0]
            out["change"] = (f"the pay change proposed for {self._name(ep, c['employee_id'])}, from "
                             f"{_money(c['current_salary_cents'])} to {_money(c['proposed_salary_cents'])}")  # fmt: skip
        if "item_id" in args:
            i = ep.query("SELECT i.title, c.kind, c.employee_id FROM checklist_items i JOIN checklists c "
                         "ON c.checklist_id = i.checklist_id WHERE i.item_id = ?", (args["item_id"],))[0]  # fmt: skip
            whose = "my" if i["employee_id"] == me else f"{self._name(ep, i['employee_id'])}'s"
            out["item"] = f"'{i['title']}' on {whose} {i['kind']} checklist"
            out["item_cap"] = out["item"]
        if "last_day" in args:
            out["day"] = spoken(args["last_day"])
        if "document_id" in args:
            d = ep.query("SELECT title FROM documents WHERE document_id = ?", (args["document_id"],))[0]
            # said as in a sentence ("my payslip February 2026"), not as the title is filed
            title = SPOKEN_TITLES.get(d["title"], d["title"])
            out["document"] = f"my {title[0].lower() + title[1:] if title[1:2].islower() else title}"
        if "name" in args and "phone" in args:
            out["contact"], out["phone"] = str(args["name"]), str(args["phone"])
            out["relationship"] = str(args["relationship"])
            out["Relationship"] = out["relationship"].capitalize()
        if "summary" in args:
            out["summary"] = str(args["summary"])
        return out

    def slot_facts(self, tool: str, ep: Episode, args: Mapping[str, Any],
                   profile: UserProfile | None) -> dict[str, list[str]]:  # fmt: skip
        """Facts per slot: names, dates and amounts a rewrite must keep; the wording around them may change."""
        slots = self.slots(tool, ep, args, profile)
        out: dict[str, list[str]] = {}
        for key, text in slots.items():
            if key in FREE_SLOTS or key.endswith("_cap") or key == "Relationship":
                continue
            if key == "request":
                q = ep.query("SELECT start_date, end_date FROM leave_requests WHERE request_id = ?",
                             (args["request_id"],))[0]  # fmt: skip
                out[key] = [spoken(q["start_date"]), spoken(q["end_date"])]
            elif key == "item":
                out[key] = [text.split("'")[1]]
            elif key == "change":
                out[key] = [text.split(" for ", 1)[1].split(",")[0]]
            else:
                out[key] = self.fact_strings(key, text)
        return out

    def outputs(self, tool: str, args: Mapping[str, Any], result: Any) -> list[ExpectedOutput]:
        if not isinstance(result, dict):
            return []
        if tool == "submit_leave_request":
            return [ExpectedOutput(label="business_days", value=str(result["business_days"]))]
        if tool == "get_leave_balance":
            vac = next((b for b in result.get("balances", []) if b["leave_type"] == "vacation"), None)
            if vac is None:
                return []
            out = [ExpectedOutput(label="vacation_days_available", value=str(vac["available_after_march_31"]))]
            if vac["available_until_march_31"] != vac["available_after_march_31"]:
                out.append(ExpectedOutput(label="vacation_days_until_march_31",
                                          value=str(vac["available_until_march_31"])))  # fmt: skip
            return out
        if tool == "get_compensation":
            return [ExpectedOutput(label="annual_salary", value=f"{result['annual_salary']:.2f}")]
        return []

    def _name(self, ep: Episode, employee_id: str) -> str:
        r = ep.query("SELECT first_name, last_name FROM employees WHERE employee_id = ?", (employee_id,))[0]
        return display_name(r)


#: Document titles as a person says them ("a copy of my identity document copy" reads badly).
SPOKEN_TITLES = {"Identity document copy": "ID document on file"}


def _concerns(ep: Episode, name: str, args: Mapping[str, Any]) -> str | None:
    """The colleague a write is about, when it is not the person writing in (a report, a new hire)."""
    if args.get("colleague_id"):
        return str(args["colleague_id"])
    me = args.get("employee_id") or args.get("manager_id")
    for key, sql in (
        ("request_id", "SELECT employee_id FROM leave_requests WHERE request_id = ?"),
        ("change_id", "SELECT employee_id FROM comp_change_requests WHERE change_id = ?"),
        ("item_id", "SELECT c.employee_id FROM checklist_items i JOIN checklists c ON c.checklist_id = i.checklist_id "
                    "WHERE i.item_id = ?"),
    ):  # fmt: skip
        if args.get(key):
            rows = ep.query(sql, (args[key],))
            who = rows[0]["employee_id"] if rows else None
            return None if who == me else who
    return None


def one_request_per_colleague(task: Task, ep: Episode, world: World) -> str | None:
    """A manager does not ask, in one breath, to raise a report's pay and offboard them, or to tick off a new
    hire's onboarding item and offboard the same person: at most one request per colleague in a conversation."""
    seen: dict[str, str] = {}
    for where, action in writes_of(task, world):
        who = _concerns(ep, action.name, action.arguments)
        if who is None:
            continue
        if who in seen:
            return f"{where} ({action.name}) concerns {who} again, after {seen[who]}"
        seen[who] = f"{where} ({action.name})"
    return None


def kit(world: World) -> HrKit:
    return HrKit(world)
