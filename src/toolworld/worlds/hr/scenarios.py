"""hr scenarios: what an employee really brings instead of a command.

A sampled draft names exact values ("cancel my vacation request for April 13 to April 17"). Employees often say
"my next vacation" or "Ava's pending request", change their mind when the agent reads the request back, say
nothing of who they are until asked, or do not remember their work email. Every description here picks out
exactly one value on the seed state (an ambiguous one is not used), and the read that shows it is added to the
gold.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from toolworld.tasks.sampling import Draft, Target
from toolworld.world import Episode, Rng
from toolworld.worlds.shared.clock import add_business_days
from toolworld.worlds.shared.kitparts import add_need

from .common import HOLIDAY_DATES, RELATIONSHIPS, TODAY
from .phrases import UNKNOWN_EMAIL_LINES

if TYPE_CHECKING:
    from .kit import HrKit

P_NEED = 0.6
P_REVISION = 0.3
P_PIECEMEAL = 0.2
P_UNKNOWN_EMAIL = 0.3


def dress(kit: HrKit, draft: Draft, ep: Episode, rng: Rng) -> None:
    """Scenario features for a draft, each where it applies and picks out exactly one value (see module doc)."""
    me = draft.principal
    if draft.contingency is not None:
        # A conditional request turns on the balance: the agent must read it before choosing a branch.
        read = ("get_leave_balance", {"employee_id": me})
        if read not in draft.reads:
            draft.reads.append(read)
    single_write = draft.kind == "action" and len(draft.targets) == 1 and draft.contingency is None
    if single_write and rng.chance(P_REVISION):
        _revise(kit, draft, draft.targets[0], ep, rng)
    for target in draft.targets:
        if draft.contingency is not None or target.said is not None or not rng.chance(P_NEED):
            continue
        rid = target.arguments.get("request_id")
        if rid and target.tool == "cancel_leave_request":
            _next_leave_need(draft, target, ep, me, rid, rng)
        elif rid and target.tool in ("approve_leave_request", "reject_leave_request"):
            _team_request_need(kit, draft, target, ep, me, rid, rng)
    forgot_email = draft.identity.name == "find_employee_by_name_and_department" and rng.chance(P_UNKNOWN_EMAIL)
    if forgot_email:
        draft.profile.known.pop("email", None)
        draft.profile.unknown["email"] = rng.choice(UNKNOWN_EMAIL_LINES)
    # Only for requests that change something: a task's id hashes its instruction and changes, and a question
    # or a refused request that names nobody ("how much vacation do I have left?") reads the same from anyone.
    if draft.kind == "action" and rng.chance(P_PIECEMEAL):
        if forgot_email:
            draft.demand("unknown_fact")
        draft.profile.behaviour.append("piecemeal")
        draft.speech.identity = False
        draft.demand("piecemeal")


def _next_leave_need(draft: Draft, target: Target, ep: Episode, me: str, rid: str, rng: Rng) -> None:
    """"My next vacation": the request is the employee's earliest upcoming one of its type (and the only one
    starting that day)."""
    rows = ep.query("SELECT request_id, leave_type, start_date FROM leave_requests WHERE employee_id = ? AND status IN "
                    "('pending', 'approved') AND start_date > ? ORDER BY start_date, request_id",
                    (me, TODAY.isoformat()))  # fmt: skip
    mine = next((r for r in rows if r["request_id"] == rid), None)
    if mine is None:
        return
    same = [r for r in rows if r["leave_type"] == mine["leave_type"]]
    if same[0]["request_id"] != rid or (len(same) > 1 and same[1]["start_date"] == mine["start_date"]):
        return
    word = {"vacation": "vacation", "sick": "sick leave", "unpaid": "unpaid leave", "parental": "parental leave"}
    kind = word[mine["leave_type"]]
    said = rng.choice((f"my next {kind}", f"my upcoming {kind} request", f"the {kind} I have coming up next"))
    if len(same) == 1:
        said = rng.choice((said, f"my only upcoming {kind}"))
    add_need(draft, target, "request", said, rid, ("list_leave_requests", {"employee_id": me}))


def _team_request_need(kit: HrKit, draft: Draft, target: Target, ep: Episode, me: str, rid: str, rng: Rng) -> None:
    """"Ava Chen's pending request": the colleague has exactly one request waiting for this approver."""
    mine = kit._team_requests(ep, me)
    owners = {r["request_id"]: r["employee_id"] for r in ep.query(
        f"SELECT request_id, employee_id FROM leave_requests WHERE request_id IN ({','.join('?' * len(mine))})",
        tuple(mine))} if mine else {}  # fmt: skip
    who = owners.get(rid)
    if who is None or sum(o == who for o in owners.values()) != 1:
        return
    name = kit._name(ep, who)
    said = rng.choice((f"{name}'s pending leave request", f"the leave request {name} sent me",
                       f"{name}'s request that is waiting for me"))  # fmt: skip
    add_need(draft, target, "request", said, rid, ("list_team_leave_requests", {"manager_id": me}))
    target.slots["request_cap"] = said[0].upper() + said[1:]


def _revise(kit: HrKit, draft: Draft, target: Target, ep: Episode, rng: Rng) -> None:
    """A change of mind: the request first asks for another valid call of the same tool; the user switches to the
    gold's when the agent reads the change back."""
    args = target.arguments
    first: dict[str, Any] | None = None
    if target.tool == "submit_leave_request":
        if args["leave_type"] in ("vacation", "unpaid") and rng.chance(0.4):
            first = {**args, "leave_type": "unpaid" if args["leave_type"] == "vacation" else "vacation"}
        else:
            from datetime import date

            end = date.fromisoformat(args["end_date"])
            shifted = add_business_days(end, rng.choice((-1, 1)), HOLIDAY_DATES)
            if shifted >= date.fromisoformat(args["start_date"]) and shifted.year == end.year:
                first = {**args, "end_date": shifted.isoformat()}
    elif target.tool == "update_emergency_contact":
        if rng.chance(0.5):
            first = {**args, "phone": args["phone"][:-2] + f"{(int(args['phone'][-2:]) + 11) % 100:02d}"}
        else:
            first = {**args, "relationship": rng.choice([r for r in RELATIONSHIPS if r != args["relationship"]])}
    elif target.tool == "start_offboarding":
        from datetime import date

        first = {**args, "last_day": add_business_days(date.fromisoformat(args["last_day"]), rng.choice((-2, 3)),
                                                       HOLIDAY_DATES).isoformat()}  # fmt: skip
    elif target.tool == "request_compensation_change":
        first = {**args, "new_salary": float(args["new_salary"]) - 1000.0}
    if first is None or first == args or not ep.probe(target.tool, first).ok:
        return
    # The user restates the change whenever the agent reads back a value of the first wish; a value the final
    # call also has (a one-day leave whose first end date is its start) would make the agent's correct read-back
    # sound like the old wish.
    if any(v in args.values() for k, v in first.items() if args.get(k) != v):
        return
    target.said = first
    draft.revision = [(target.tool, first)]
    draft.speech.revision = target.tool
    draft.speech.revision_slots = kit.slots(target.tool, ep, args, draft.profile)
    draft.demand("change_of_mind")
