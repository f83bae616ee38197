"""The helpdesk task kit: who writes in, what they ask for, and how they say it.

The principal is a contact at a customer organisation. They know their name, work e-mail, organisation name,
the numbers of the tickets they filed (from notification e-mails) and of the same-issue tickets colleagues filed
(they were copied), and, as admins or billing contacts, their organisation's invoice ids. Everything else (their
contact id, the organisation id, SLA due times, what is creditable) the agent looks up.

Candidates come from the live seed state and are tried by the generator: the ones the policy accepts become
action tasks and the ones it refuses become refusal tasks, so ``propose`` offers both kinds where a customer
would plausibly ask (an escalation of a ticket that is still within its SLA, a credit above $500).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from toolworld.core.dates import spoken_date
from toolworld.core.errors import ToolworldError
from toolworld.tasks.kit import Bag, TaskKit
from toolworld.tasks.model import ExpectedOutput, Need, UserProfile
from toolworld.world import Episode, Rng, World

from . import vocab
from .common import (
    AREA_WORDS,
    CREDIT_REASONS,
    NOW,
    OPEN_STATUSES,
    PRIORITIES,
    PRODUCT_AREAS,
    REOPEN_DAYS,
    URGENT_PLANS,
    before,
)
from .phrases import (
    BILLING_DETAILS,
    COMMENT_BODIES,
    CONTINGENCIES,
    CREDIT_REASON_PHRASES,
    ESCALATION_REASONS,
    FOLLOW_UP_DESCRIPTIONS,
    FREE_SLOTS,
    HANDOFF_SUMMARIES,
    IDENTITY,
    INTENTS,
    OPENERS,
    REOPEN_REASONS,
    REVISIONS,
    SOLVE_REPLIES,
    TICKET_DETAILS,
    TONES,
)

if TYPE_CHECKING:
    from toolworld.tasks.sampling import Draft, Plan, Target

ROLE_WORDS = {"admin": "an admin", "member": "a member", "billing": "the billing contact"}
#: How often a contact who could quote a ticket number describes the ticket instead (where that is unambiguous).
P_UNKNOWN_TICKET = 0.45
#: How often a single request comes with a change of mind, and how often the contact gives facts only when asked.
P_REVISION = 0.3
P_PIECEMEAL = 0.2
UNKNOWN_TICKET_LINES = (
    "I don't have the ticket number at hand, sorry.",
    "I deleted the notification e-mail, so I don't know the ticket number.",
    "No idea what the number was, I'm afraid.",
)
#: Tools whose ticket is the one the request is about (a merge names two and is always quoted by number).
DESCRIBABLE = ("add_comment", "set_priority", "escalate_ticket", "reopen_ticket", "solve_ticket", "get_ticket",
               "create_follow_up_ticket")


class HelpdeskKit(TaskKit):
    principal = "contact"
    intents = INTENTS
    info_tools = ("get_ticket", "get_invoice", "get_organization")
    # Free text the agent writes from the conversation: its own words are as good as the gold's. Who a hand-off
    # is for (contact_id, ticket_id) is compared: a hand-off for the wrong customer or ticket is a wrong hand-off.
    ignore_columns = ("tickets.subject", "tickets.description", "ticket_comments.body", "handoffs.summary")
    known_entity_keys = {"ticket_ids": "ticket", "invoice_ids": "invoice"}  # noqa: RUF012
    handoff_tools = ("transfer_to_human_agent",)

    # -- who asks -------------------------------------------------------------------------------------------

    def principals(self, ep: Episode) -> list[Any]:
        """Contacts that are one person's only record: a later duplicate (a typo or case variant of an address
        already on file) is not someone who writes in, and its name would not identify it."""
        if ep.seed not in self._principals:
            rows = ep.query(
                "SELECT c.contact_id FROM contacts c WHERE NOT EXISTS (SELECT 1 FROM contacts d WHERE d.org_id = "
                "c.org_id AND d.first_name = c.first_name AND d.last_name = c.last_name AND d.contact_id != "
                "c.contact_id) ORDER BY c.contact_id")  # fmt: skip
            self._principals[ep.seed] = [r["contact_id"] for r in rows]
        return self._principals[ep.seed]

    def profile(self, ep: Episode, principal_id: Any, rng: Rng) -> UserProfile:
        c = _contact(ep, principal_id)
        tickets = [r["ticket_id"] for r in ep.query(
            "SELECT ticket_id FROM tickets WHERE requester_id = ? UNION SELECT d.ticket_id FROM tickets d JOIN "
            "tickets m ON m.org_id = d.org_id AND m.subject = d.subject AND m.ticket_id != d.ticket_id WHERE "
            "m.requester_id = ? AND m.status IN ('new', 'open') AND d.status IN ('new', 'open') ORDER BY 1",
            (principal_id, principal_id))]  # fmt: skip
        known: dict[str, Any] = {"email": c["email"], "first_name": c["first_name"], "last_name": c["last_name"],
                                 "org_name": c["org_name"], "ticket_ids": tickets}  # fmt: skip
        if c["role"] in ("admin", "billing"):
            known["invoice_ids"] = [r["invoice_id"] for r in ep.query(
                "SELECT invoice_id FROM invoices WHERE org_id = ? ORDER BY invoice_id", (c["org_id"],))]  # fmt: skip
        name = f"{c['first_name']} {c['last_name']}"
        return UserProfile(name=name, persona=f"{name}, {ROLE_WORDS[c['role']]} at {c['org_name']}, "
                                              f"{rng.choice(TONES)}.", known=known)  # fmt: skip

    def identity_templates(self, tool: str) -> list[str]:
        return IDENTITY[tool] if tool in IDENTITY else super().identity_templates(tool)

    def opener_templates(self) -> list[str]:
        return OPENERS

    # -- candidates -----------------------------------------------------------------------------------------

    def propose(self, tool: str, ep: Episode, principal_id: Any, bag: Bag, rng: Rng) -> list[dict[str, Any]]:
        c = _contact(ep, principal_id)
        me = principal_id
        # Only tickets from before the conversation: a customer cannot quote the number of one the agent has just
        # opened for them earlier in the same chat (every write happens at the desk's clock time, NOW).
        mine = ep.query("SELECT * FROM tickets WHERE requester_id = ? AND merged_into IS NULL AND created_at < ? "
                        "ORDER BY ticket_id", (me, NOW))  # fmt: skip
        rng.shuffle(mine)
        open_ = [t for t in mine if t["status"] in OPEN_STATUSES]
        out: list[dict[str, Any]] = []
        if tool == "create_ticket":
            for _ in range(4):
                area = "billing" if c["role"] == "billing" and rng.chance(0.7) else rng.choice(PRODUCT_AREAS)
                prio = rng.choice(PRIORITIES)
                subject = rng.choice(vocab.SUBJECTS[area])
                details = BILLING_DETAILS if area == "billing" else TICKET_DETAILS
                out.append({"contact_id": me, "subject": subject, "description": rng.choice(details),
                            "product_area": area, "priority": prio})  # fmt: skip
        elif tool == "create_follow_up_ticket":
            for t in [t for t in mine if t["status"] in ("closed", "solved")][:4]:
                out.append({"contact_id": me, "ticket_id": t["ticket_id"],
                            "description": rng.choice(FOLLOW_UP_DESCRIPTIONS)})  # fmt: skip
        elif tool == "add_comment":
            for t in open_[:4]:
                out.append({"contact_id": me, "ticket_id": t["ticket_id"], "body": rng.choice(COMMENT_BODIES)})
        elif tool == "set_priority":
            for t in open_[:4]:
                choices = [p for p in PRIORITIES if p != t["priority"]]
                if c["plan"] not in URGENT_PLANS and "urgent" in choices and rng.chance(0.5):
                    prio = "urgent"  # a smaller plan asking for urgent: refused unless it is an outage (R1)
                else:
                    prio = rng.choice(choices)
                out.append({"contact_id": me, "ticket_id": t["ticket_id"], "priority": prio})
        elif tool == "escalate_ticket":
            for t in open_[:4]:
                out.append({"contact_id": me, "ticket_id": t["ticket_id"], "reason": rng.choice(ESCALATION_REASONS)})
        elif tool == "reopen_ticket":
            for t in [t for t in mine if t["status"] in ("solved", "closed")][:4]:
                out.append({"contact_id": me, "ticket_id": t["ticket_id"], "reason": rng.choice(REOPEN_REASONS)})
        elif tool == "merge_tickets":
            for a, b in _duplicate_pairs(ep, me):
                older, newer = (a, b) if (a["created_at"], a["ticket_id"]) < (b["created_at"], b["ticket_id"]) \
                    else (b, a)  # fmt: skip
                if rng.chance(0.75):
                    out.append({"contact_id": me, "ticket_id": newer["ticket_id"], "into_ticket_id": older["ticket_id"]})
                else:  # the wrong way round: refused, the newer one is merged into the older (R4)
                    out.append({"contact_id": me, "ticket_id": older["ticket_id"], "into_ticket_id": newer["ticket_id"]})
        elif tool == "solve_ticket":
            for t in open_[:4]:
                out.append({"contact_id": me, "ticket_id": t["ticket_id"], "public_reply": SOLVE_REPLIES[0]})
        elif tool == "request_credit" and c["role"] in ("admin", "billing"):
            invoices = ep.query("SELECT * FROM invoices WHERE org_id = ? ORDER BY invoice_id", (c["org_id"],))
            rng.shuffle(invoices)
            for inv in invoices[:4]:
                whole = rng.randint(2, 9) * 25 if rng.chance(0.7) else rng.randint(21, 40) * 25
                out.append({"contact_id": me, "invoice_id": inv["invoice_id"], "amount": float(whole),
                            "reason": rng.choice(CREDIT_REASONS)})  # fmt: skip
        elif tool == "transfer_to_human_agent":
            out.append({"summary": rng.choice(HANDOFF_SUMMARIES), "contact_id": me})
        elif tool == "get_ticket":
            out = [{"ticket_id": t["ticket_id"]} for t in mine[:4]]
        elif tool == "get_invoice" and c["role"] in ("admin", "billing"):
            invoices = ep.query("SELECT invoice_id FROM invoices WHERE org_id = ? ORDER BY invoice_id", (c["org_id"],))
            out = [{"invoice_id": r["invoice_id"]} for r in rng.sample(invoices, min(3, len(invoices)))]
        elif tool == "get_organization":
            out = [{"org_id": c["org_id"]}]
        return out

    # -- scenarios ------------------------------------------------------------------------------------------

    def dress(self, draft: Draft, ep: Episode, rng: Rng) -> None:
        """A contact who lost the notification e-mail describes the ticket instead of quoting its number ("my ticket
        about 'CSV import fails at row 1,204'", "the ticket I opened on March 3"), where the organisation's ticket
        list (``list_org_tickets``) shows exactly one such ticket. Not in a conversation that opens tickets: a new
        ticket with the same subject would make the description ambiguous."""
        if draft.kind == "action" and len(draft.targets) == 1 and draft.contingency is None \
                and draft.targets[0].tool in REVISIONS and rng.chance(P_REVISION):  # fmt: skip
            self._revise(draft, draft.targets[0], ep, rng)
        # A piecemeal request says nothing of who asks, so it must quote something only this contact would: their
        # ticket or invoice number (a bare "which plan are we on?" would read the same for everyone).
        own_number = any((t.arguments.get("ticket_id") is not None or t.arguments.get("invoice_id"))
                         and t.tool != "merge_tickets" for t in draft.targets)  # fmt: skip
        if own_number and rng.chance(P_PIECEMEAL):
            draft.profile.behaviour.append("piecemeal")
            draft.speech.identity = False
            draft.demand("piecemeal")
        if draft.contingency is not None or any(t.tool in ("create_ticket", "create_follow_up_ticket")
                                                for t in draft.targets):  # fmt: skip
            return
        c = _contact(ep, draft.principal)
        for target in draft.targets:
            tid = target.arguments.get("ticket_id")
            if tid is None or target.tool not in DESCRIBABLE or target.said or tid in draft.mentions \
                    or not rng.chance(P_UNKNOWN_TICKET):  # fmt: skip
                continue
            said = _describe_ticket(ep, c, tid, rng)
            if said is None:
                continue
            target.slots["ticket"] = said
            draft.unknown.append(("ticket", tid))
            read = ("list_org_tickets", {"org_id": c["org_id"]})
            if read not in draft.reads:
                draft.reads.append(read)
            draft.needs.append(Need(slot="ticket", phrase=said, value=tid))
            draft.profile.unknown.setdefault("ticket_number", rng.choice(UNKNOWN_TICKET_LINES))
            draft.demand("unknown_fact")

    def _revise(self, draft: Draft, target: Target, ep: Episode, rng: Rng) -> None:
        """A change of mind: the request first asks for another valid call of the same tool (another priority,
        another amount); the contact switches to the gold's when the agent reads the change back."""
        args = target.arguments
        if target.tool in ("set_priority", "create_ticket"):
            first = {**args, "priority": rng.choice([p for p in PRIORITIES if p != args.get("priority", "normal")])}
        else:
            first = {**args, "amount": float(rng.randint(2, 20) * 25)}
        if first == args or not ep.probe(target.tool, first).ok:
            return
        target.said = first
        draft.revision = [(target.tool, first)]
        draft.speech.revision = target.tool
        draft.speech.revision_slots = self.slots(target.tool, ep, args, draft.profile)
        draft.demand("change_of_mind")

    def revision_templates(self, tool: str) -> list[str]:
        return REVISIONS.get(tool) or super().revision_templates(tool)

    def contingencies(self, ep: Episode, principal_id: Any, rng: Rng) -> list[Plan]:
        """Requests whose branch the ticket's state decides: reopen a solved ticket if it is still inside the
        reopen window, else open a follow-up; escalate an open ticket if its SLA was missed, else add a comment."""
        from toolworld.tasks.sampling import Plan

        window = before(NOW, REOPEN_DAYS * 86400)
        rows = ep.query("SELECT * FROM tickets WHERE requester_id = ? AND merged_into IS NULL AND created_at < ? "
                        "ORDER BY ticket_id", (principal_id, NOW))  # fmt: skip
        rng.shuffle(rows)
        plans: list[Plan] = []
        for t in rows[:6]:
            tid = t["ticket_id"]
            if t["status"] in ("solved", "closed"):
                reason = rng.choice(REOPEN_REASONS)
                reopen = {"contact_id": principal_id, "ticket_id": tid, "reason": reason}
                follow = {"contact_id": principal_id, "ticket_id": tid, "description": reason}
                holds = t["status"] == "solved" and t["solved_at"] >= window
                plans.append(Plan("reopen_or_follow_up", f"the ticket was solved within the last {REOPEN_DAYS} days",
                                  holds, ("reopen_ticket", reopen), ("create_follow_up_ticket", follow),
                                  self.slots("reopen_ticket", ep, reopen, None)))  # fmt: skip
            elif t["status"] in OPEN_STATUSES and t["tier"] < 3 and t["priority"] != "urgent":
                late = (t["first_response_at"] is None and t["first_response_due"] < NOW) or t["resolution_due"] < NOW \
                    or (t["first_response_at"] is not None and t["first_response_at"] > t["first_response_due"])  # fmt: skip
                esc = {"contact_id": principal_id, "ticket_id": tid, "reason": rng.choice(ESCALATION_REASONS)}
                note = {"contact_id": principal_id, "ticket_id": tid, "body": rng.choice(COMMENT_BODIES)}
                plans.append(Plan("escalate_or_comment", "a due time of the ticket has passed unmet", late,
                                  ("escalate_ticket", esc), ("add_comment", note),
                                  {**self.slots("escalate_ticket", ep, esc, None),
                                   **self.slots("add_comment", ep, note, None)}))  # fmt: skip
        return plans

    def contingency_templates(self, kind: str) -> list[str]:
        if kind not in CONTINGENCIES:
            raise ToolworldError(f"helpdesk has no contingency templates of kind {kind!r}; it has "
                                 f"{', '.join(sorted(CONTINGENCIES))}", kind="unknown_contingency")  # fmt: skip
        return CONTINGENCIES[kind]

    # -- refusals: what the policy allows instead -----------------------------------------------------------

    def alternatives(self, target: Target, ep: Episode, principal_id: Any) -> list[tuple[str, list[tuple[str, dict[str, Any]]]]]:
        """Compliant ways to serve a refused request, where the policy names one (the generator keeps those that
        succeed): a follow-up for a closed ticket, the merge the right way round, a manager's review of a large
        credit."""
        args = dict(target.arguments)
        out: list[tuple[str, list[tuple[str, dict[str, Any]]]]] = []
        if target.tool == "reopen_ticket" and target.rule == "R3":
            out.append(("open a follow-up ticket instead",
                        [("create_follow_up_ticket", {"contact_id": args["contact_id"], "ticket_id": args["ticket_id"],
                                                      "description": args["reason"]})]))  # fmt: skip
        if target.tool == "merge_tickets" and target.rule == "R4":
            out.append(("merge the newer ticket into the older one",
                        [("merge_tickets", {"contact_id": args["contact_id"], "ticket_id": args["into_ticket_id"],
                                            "into_ticket_id": args["ticket_id"]})]))  # fmt: skip
        if target.tool == "request_credit" and target.rule == "R5":
            out.append(("transfer to a human agent for a manager's approval",
                        [("transfer_to_human_agent", {"summary": "The customer asks for a credit that needs a "
                                                      "manager's approval.", "contact_id": args["contact_id"]})]))
        if target.tool == "set_priority" and target.rule == "R1":
            row = ep.query("SELECT priority FROM tickets WHERE ticket_id = ?", (args["ticket_id"],))
            if row and row[0]["priority"] != "high":
                out.append(("set high priority instead", [("set_priority", {**args, "priority": "high"})]))
        if target.tool == "create_ticket" and target.rule == "R1":
            out.append(("open the ticket with high priority", [("create_ticket", {**args, "priority": "high"})]))
        return out

    # -- speaking -------------------------------------------------------------------------------------------

    def slots(self, tool: str, ep: Episode, args: Mapping[str, Any], profile: UserProfile | None) -> dict[str, str]:
        out: dict[str, str] = {}
        if args.get("ticket_id") is not None:
            out["ticket"] = f"ticket #{args['ticket_id']}"
        if args.get("into_ticket_id") is not None:
            out["into"] = f"ticket #{args['into_ticket_id']}"
        if "product_area" in args:
            out["area"] = AREA_WORDS[str(args["product_area"])]
        if "priority" in args:
            out["priority"] = str(args["priority"])
        for key in ("subject", "description", "body", "summary"):
            if key in args:
                out[key] = str(args[key])
        if "reason" in args:
            if tool == "request_credit":
                out["credit_reason"] = CREDIT_REASON_PHRASES[str(args["reason"])]
            else:
                out["reason"] = str(args["reason"])
        if "invoice_id" in args:
            out["invoice"] = f"invoice {args['invoice_id']}"
        if "amount" in args:
            out["amount"] = f"${float(args['amount']):,.2f}"
        return out

    def slot_facts(self, tool: str, ep: Episode, args: Mapping[str, Any],
                   profile: UserProfile | None) -> dict[str, list[str]]:  # fmt: skip
        """The strings a rewrite must keep: ticket numbers, invoice ids, the amount, the priority and the area's
        words (free text such as a comment may be reworded)."""
        out: dict[str, list[str]] = {}
        for slot, text in self.slots(tool, ep, args, profile).items():
            out[slot] = self.fact_strings(slot, text)
        return out

    def fact_strings(self, slot: str, text: str) -> list[str]:
        if slot in FREE_SLOTS:
            return []
        if slot in ("ticket", "into"):
            if "#" in text:
                return [text.split("#", 1)[1]]
            quoted = text.split('"')
            return [quoted[1]] if len(quoted) >= 3 else [text.rsplit(" on ", 1)[-1]]
        if slot == "invoice":
            return [text.split(" ", 1)[1]]
        if slot == "credit_reason":
            return []
        return super().fact_strings(slot, text)

    def outputs(self, tool: str, args: Mapping[str, Any], result: Any) -> list[ExpectedOutput]:
        if not isinstance(result, dict):
            return []
        if tool == "get_ticket":
            return [ExpectedOutput(label="status", value=str(result["status"]))]
        if tool == "get_invoice":
            return [ExpectedOutput(label="amount", value=f"{result['amount']:.2f}"),
                    ExpectedOutput(label="status", value=str(result["status"]))]  # fmt: skip
        if tool == "get_organization":
            return [ExpectedOutput(label="plan", value=str(result["plan"])),
                    ExpectedOutput(label="plan_status", value=str(result["plan_status"]))]  # fmt: skip
        if tool in ("create_ticket", "create_follow_up_ticket"):
            return [ExpectedOutput(label="ticket_id", value=str(result["ticket_id"]))]
        if tool == "request_credit":
            # The credit note's number, not the amount: the contact named the amount themselves.
            return [ExpectedOutput(label="credit_id", value=str(result["credit_id"]))]
        return []


def _contact(ep: Episode, contact_id: Any) -> dict[str, Any]:
    return ep.query("SELECT c.*, o.name AS org_name, o.plan, o.plan_status FROM contacts c JOIN organizations o "
                    "ON o.org_id = c.org_id WHERE c.contact_id = ?", (contact_id,))[0]  # fmt: skip


def _describe_ticket(ep: Episode, contact: Mapping[str, Any], ticket_id: Any, rng: Rng) -> str | None:
    """How the requester points at one of their tickets without its number, if the organisation's ticket list picks
    it out: by its subject (unique in the list), or by the day they opened it (their only ticket that day)."""
    rows = ep.query("SELECT ticket_id, subject, requester_id, created_at FROM tickets WHERE org_id = ? ORDER BY "
                    "ticket_id", (contact["org_id"],))  # fmt: skip
    me = next((r for r in rows if r["ticket_id"] == ticket_id), None)
    if me is None or me["requester_id"] != contact["contact_id"]:
        return None
    options = []
    if sum(r["subject"] == me["subject"] for r in rows) == 1:
        options += [f'my ticket about "{me["subject"]}"', f'the ticket I filed called "{me["subject"]}"']
    day = me["created_at"][:10]
    mine = [r for r in rows if r["requester_id"] == contact["contact_id"]]
    if sum(r["created_at"][:10] == day for r in mine) == 1:
        options.append(f"the ticket I opened on {spoken_date(day, year=True)}")
    return rng.choice(options) if options else None


def _duplicate_pairs(ep: Episode, contact_id: Any) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Pairs of open tickets of the contact's organisation about the same issue, one of them the contact's."""
    rows = ep.query(
        "SELECT a.ticket_id AS a_id, a.created_at AS a_created, b.ticket_id AS b_id, b.created_at AS b_created "
        "FROM tickets a JOIN tickets b ON b.org_id = a.org_id AND b.subject = a.subject AND b.ticket_id > a.ticket_id "
        "WHERE (a.requester_id = ? OR b.requester_id = ?) AND a.status IN ('new', 'open') "
        "AND b.status IN ('new', 'open') AND b.created_at < ? ORDER BY a.ticket_id, b.ticket_id",
        (contact_id, contact_id, NOW))  # fmt: skip
    return [({"ticket_id": r["a_id"], "created_at": r["a_created"]}, {"ticket_id": r["b_id"], "created_at": r["b_created"]})
            for r in rows]  # fmt: skip



def kit(world: World) -> HelpdeskKit:
    return HelpdeskKit(world)
