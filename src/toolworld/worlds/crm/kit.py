"""Task-synthesis hints for the crm world: who writes in, what they ask for, and how they say it.

The person asking is a rep or a manager of the sales team; they know their work e-mail and the quote numbers
on their deals, and speak of everything else by name: a deal as the CRM shows it, a person with their e-mail, a
company, a colleague. Candidates come from the live episode in every state (a stale deal, an expired quote, a
do-not-contact contact), and the generator executes them: what the policy refuses becomes a refusal task, with
no rule coded twice.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from toolworld.core.errors import ToolworldError
from toolworld.tasks.kit import Bag, TaskKit
from toolworld.tasks.model import ExpectedOutput, Task, UserProfile
from toolworld.tasks.sampling import Draft, Plan, Target
from toolworld.world import Episode, Rng, World
from toolworld.worlds.shared.companies import company_domain, company_name, work_email
from toolworld.worlds.shared.kitparts import add_need
from toolworld.worlds.shared.people import FIRST_NAMES, LAST_NAMES, display_name

from .common import CLOSED_STAGES, DISCOUNT_LIMITS, LEAD_SOURCES, LOSS_REASONS, OPEN_STAGES, TERRITORIES
from .phrases import (
    CONTINGENCIES,
    ESCALATION_REASONS,
    IDENTITY,
    INTENTS,
    LOG_SUBJECTS,
    OPENERS,
    TONES,
    UNKNOWN_QUOTE_LINES,
    WITHHELD,
)

if TYPE_CHECKING:
    from toolworld.tasks.quality import CoherenceRule

_STATES = [s for _, _, states in TERRITORIES for s in states]
#: How often a request names a value by what it is for (a need) or leaves out a quote number the user lacks.
P_NEED = 0.35
P_UNKNOWN_QUOTE = 0.2


class CrmKit(TaskKit):
    principal = "user"
    intents = INTENTS
    info_tools = ("get_opportunity", "get_quote")
    ignore_columns = ("escalations.summary", "activities.subject")
    known_entity_keys = {"quote_ids": "quote"}  # noqa: RUF012
    handoff_tools = ("escalate_to_sales_ops",)

    def __init__(self, world: World) -> None:
        super().__init__(world)
        #: work e-mail -> the user's open draft quotes (see ``facts``), filled by ``profile``
        self._drafts: dict[str, list[str]] = {}
        #: seed -> the highest contact number of the seed state (see ``_contacts``), filled by ``profile``
        self._seed_contacts: dict[int, int] = {}

    def principals(self, ep: Episode) -> list[Any]:
        # Active reps and managers write in; the admin and people who left do not.
        if ep.seed not in self._principals:
            rows = ep.query("SELECT user_id FROM users WHERE active = 1 AND role IN ('rep', 'manager') ORDER BY 1")
            self._principals[ep.seed] = [r["user_id"] for r in rows]
        return self._principals[ep.seed]

    def profile(self, ep: Episode, principal_id: Any, rng: Rng) -> UserProfile:
        u = ep.query("SELECT * FROM users WHERE user_id = ?", (principal_id,))[0]
        quotes = [r["quote_id"] for r in ep.query(
            "SELECT q.quote_id FROM quotes q JOIN opportunities o ON o.opportunity_id = q.opportunity_id "
            "JOIN users w ON w.user_id = o.owner_id WHERE o.owner_id = ? OR w.manager_id = ? ORDER BY q.quote_id",
            (principal_id, principal_id))]  # fmt: skip
        name = display_name(u)
        self._drafts[u["email"]] = [r["quote_id"] for r in self._open_drafts(ep, principal_id)]
        # A conversation starts on the seed state: its highest contact number marks the contacts the rep can name.
        self._seed_contacts.setdefault(ep.seed, int(ep.query(
            "SELECT MAX(CAST(SUBSTR(contact_id, 5) AS INTEGER)) AS n FROM contacts")[0]["n"] or 0))  # fmt: skip
        return UserProfile(name=name, persona=f"{name}, a sales {u['role']}, {rng.choice(TONES)}.",
                           known={"email": u["email"], "quote_ids": quotes})  # fmt: skip

    def facts(self, profile: UserProfile) -> dict[str, list[Any]]:
        """What the user can give, less most quote numbers: a rep quotes the number of the quote a request is
        about, never one of the others to look something else up with (``propose`` adds the one it asks about).
        The drafts awaiting a decision stay: a conditional request names its draft ("check whether Q-50231 has
        expired; if not, send it"), and without it the branch that sends could never be drawn, so gold would
        always start a new quote and an agent that never checks would pass."""
        out = super().facts(profile)
        drafts = self._drafts.get(str(profile.known.get("email")), [])
        if drafts:
            out["quote"] = list(drafts)
        else:
            out.pop("quote", None)
        return out

    def _open_drafts(self, ep: Episode, p: Any) -> list[dict[str, Any]]:
        """Draft quotes with lines on the user's (or their team's) deals in proposal or negotiation."""
        return ep.query(
            "SELECT q.quote_id, q.expires_at, o.opportunity_id, o.account_id, o.contact_id FROM quotes q "
            "JOIN opportunities o USING (opportunity_id) JOIN users u ON u.user_id = o.owner_id "
            "WHERE (o.owner_id = ? OR u.manager_id = ?) AND q.status = 'draft' AND o.stage IN ('proposal', "
            "'negotiation') AND EXISTS (SELECT 1 FROM quote_lines l WHERE l.quote_id = q.quote_id) "
            "ORDER BY q.quote_id", (p, p))  # fmt: skip

    def identity_templates(self, tool: str) -> list[str]:
        return IDENTITY[tool] if tool in IDENTITY else super().identity_templates(tool)

    def opener_templates(self) -> list[str]:
        return OPENERS

    def withheld_templates(self, tool: str) -> list[str]:
        return WITHHELD.get(tool) or super().withheld_templates(tool)

    def intent_templates(self, tool: str, args: Mapping[str, Any]) -> list[str]:
        if tool == "update_opportunity_stage" and args.get("stage") == "closed_lost":
            return INTENTS["close_lost"]
        if tool == "reassign_account" and args.get("new_owner_id") == args.get("user_id"):
            return INTENTS["claim_account"]
        return super().intent_templates(tool, args)

    # -- candidates -------------------------------------------------------------------------------------------

    def propose(self, tool: str, ep: Episode, principal_id: Any, bag: Bag, rng: Rng) -> list[dict[str, Any]]:
        p = principal_id
        me = ep.query("SELECT * FROM users WHERE user_id = ?", (p,))[0]
        out: list[dict[str, Any]] = []
        if tool in ("get_opportunity", "update_opportunity_stage", "set_opportunity_contact", "create_quote"):
            for o in self._opps(ep, p, rng, open_share=0.85):
                oid = o["opportunity_id"]
                if tool == "get_opportunity":
                    out.append({"opportunity_id": oid})
                elif tool == "update_opportunity_stage":
                    out.append({"user_id": p, "opportunity_id": oid, **self._stage_move(o, rng)})
                elif tool == "set_opportunity_contact":
                    people = self._contacts(ep, o["account_id"])
                    others = [c for c in people if c["contact_id"] != o["contact_id"]]
                    if others:
                        out.append({"user_id": p, "opportunity_id": oid, "contact_id": rng.choice(others)["contact_id"]})
                elif tool == "create_quote" and (o["stage"] in ("proposal", "negotiation") or rng.chance(0.2)):
                    out.append({"user_id": p, "opportunity_id": oid})
        elif tool in ("get_quote", "add_quote_line", "set_quote_discount", "send_quote", "accept_quote",
                      "escalate_to_sales_ops"):
            products = [r["product_id"] for r in ep.query("SELECT product_id FROM products ORDER BY 1")]
            quotes = self._quotes(tool, ep, p, rng)
            bag.add("quote", [q["quote_id"] for q in quotes])
            for q in quotes:
                qid = q["quote_id"]
                if tool == "get_quote":
                    out.append({"quote_id": qid})
                elif tool == "add_quote_line":
                    disc = rng.choice((0, 0, 5, 10, 10, 15, 20, 30))
                    line = {"user_id": p, "quote_id": qid, "product_id": rng.choice(products),
                            "quantity": rng.randint(1, 25)}  # fmt: skip
                    out.append({**line, "discount_percent": disc} if disc else line)
                elif tool == "set_quote_discount":
                    out.append({"user_id": p, "quote_id": qid, "discount_percent": rng.choice((5, 8, 10, 15, 20, 30))})
                elif tool == "send_quote":
                    people = self._contacts(ep, q["account_id"])
                    if people:
                        out.append({"user_id": p, "quote_id": qid, "contact_id": rng.choice(people)["contact_id"]})
                elif tool == "accept_quote":
                    out.append({"user_id": p, "quote_id": qid})
                elif tool == "escalate_to_sales_ops" and q["status"] == "draft" and q["stage"] in OPEN_STAGES:
                    disc = DISCOUNT_LIMITS[me["role"]] + rng.choice((5, 10, 15))
                    summary = rng.choice(ESCALATION_REASONS).format(discount=disc, quote_id=qid)
                    out.append({"user_id": p, "summary": summary, "opportunity_id": q["opportunity_id"]})
        elif tool == "log_activity":
            for o in self._opps(ep, p, rng, open_share=0.9)[:4]:
                people = self._contacts(ep, o["account_id"])
                if people:
                    c = rng.choice(people)
                    out.append({"user_id": p, "contact_id": c["contact_id"],
                                "kind": rng.choice(("call", "email", "meeting", "note")),
                                "subject": rng.choice(LOG_SUBJECTS), "opportunity_id": o["opportunity_id"]})  # fmt: skip
        elif tool == "reassign_account":
            out = self._reassignments(ep, me, rng)
        elif tool in ("update_lead_status", "merge_leads", "convert_lead"):
            out = self._lead_requests(tool, ep, p, rng)
        elif tool == "create_lead":
            out = self._new_leads(ep, p, rng)
        return out

    def _opps(self, ep: Episode, p: Any, rng: Rng, open_share: float) -> list[dict[str, Any]]:
        rows = ep.query(
            "SELECT o.* FROM opportunities o JOIN users u ON u.user_id = o.owner_id "
            "JOIN accounts a ON a.account_id = o.account_id "
            "WHERE (o.owner_id = ? OR u.manager_id = ? OR a.owner_id = ?) AND o.created_at < ? "
            "ORDER BY o.opportunity_id", (p, p, p, ep.world.clock))  # fmt: skip
        opened = [r for r in rows if r["stage"] in OPEN_STAGES]
        closed = [r for r in rows if r["stage"] in CLOSED_STAGES]
        rng.shuffle(opened)
        rng.shuffle(closed)
        out = opened[:5]
        if closed and not rng.chance(open_share):
            out.insert(0, closed[0])
        return out

    def _contacts(self, ep: Episode, account_id: str) -> list[dict[str, Any]]:
        """The account's contacts of the seed state: one a lead became earlier in the same conversation has no name
        the request could be phrased with (the request speaks of the seed state)."""
        top = self._seed_contacts.get(ep.seed)
        return ep.query("SELECT * FROM contacts WHERE account_id = ? AND (? IS NULL OR CAST(SUBSTR(contact_id, 5) AS "
                        "INTEGER) <= ?) ORDER BY contact_id", (account_id, top, top))  # fmt: skip

    def _quotes(self, tool: str, ep: Episode, p: Any, rng: Rng) -> list[dict[str, Any]]:
        """Quotes of the user's deals that were there before the conversation (the user has their numbers): mostly
        those the request fits (a draft to edit or send, a sent one to accept), now and then another one (an
        expired quote, a quote of a lost deal) that the policy refuses."""
        rows = ep.query(
            "SELECT q.*, o.account_id, o.stage FROM quotes q JOIN opportunities o ON o.opportunity_id = q.opportunity_id "
            "JOIN users u ON u.user_id = o.owner_id WHERE (o.owner_id = ? OR u.manager_id = ?) AND q.created_at < ? "
            "ORDER BY q.quote_id", (p, p, ep.world.clock))  # fmt: skip
        rng.shuffle(rows)
        want = "sent" if tool == "accept_quote" else "draft"
        fits = [q for q in rows if q["status"] == want and q["stage"] in OPEN_STAGES and q["expires_at"] > ep.world.clock]
        # Among the others, an expired quote of an open deal (policy R8) comes before one of a closed deal (R11),
        # and both before a quote in the wrong status, which the tools answer with a plain conflict.
        def rank(q: Mapping[str, Any]) -> int:
            if q["stage"] in OPEN_STAGES and q["status"] == want:
                return 0
            return 1 if q["stage"] not in OPEN_STAGES else 2

        rest = sorted((q for q in rows if q not in fits), key=rank)
        if tool == "get_quote":
            return rows[:6]
        out = fits[:5]
        if rest and rng.chance(0.4):
            out.insert(rng.below(len(out) + 1), rest[0])
        return out

    def _stage_move(self, o: Mapping[str, Any], rng: Rng) -> dict[str, Any]:
        stage = o["stage"]
        if stage in CLOSED_STAGES or rng.chance(0.2):
            return {"stage": "closed_lost", "loss_reason": rng.choice(LOSS_REASONS)}
        nxt = OPEN_STAGES[OPEN_STAGES.index(stage) + 1] if stage != "negotiation" else "closed_won"
        if rng.chance(0.15):  # a jump past a stage: policy R4 refuses it
            later = [s for s in (*OPEN_STAGES, "closed_won") if s != nxt and s != stage and
                     (*OPEN_STAGES, "closed_won").index(s) > (*OPEN_STAGES, "closed_won").index(stage)]
            if later:
                return {"stage": rng.choice(later)}
        return {"stage": nxt}

    def _reassignments(self, ep: Episode, me: Mapping[str, Any], rng: Rng) -> list[dict[str, Any]]:
        p = me["user_id"]
        accounts = ep.query(
            "SELECT a.*, t.territory_id FROM accounts a LEFT JOIN users o ON o.user_id = a.owner_id "
            "JOIN territory_states t ON t.state = a.state "
            "WHERE a.owner_id = ? OR o.manager_id = ? OR (a.owner_id IS NULL AND t.territory_id = ?) "
            "ORDER BY a.account_id", (p, p, me["territory_id"]))  # fmt: skip
        rng.shuffle(accounts)
        out = []
        for a in accounts[:5]:
            reps = ep.query("SELECT user_id, active, territory_id FROM users WHERE role = 'rep' ORDER BY user_id")
            home = [r["user_id"] for r in reps if r["territory_id"] == a["territory_id"] and r["active"]
                    and r["user_id"] != a["owner_id"]]
            if rng.chance(0.3):  # a colleague who left, or the territory's manager: policy R7 refuses them
                away = [r["user_id"] for r in ep.query(
                    "SELECT user_id FROM users WHERE territory_id = ? AND (active = 0 OR role = 'manager') "
                    "AND user_id != ? ORDER BY user_id", (a["territory_id"], p))]  # fmt: skip
                if away:
                    out.append({"user_id": p, "account_id": a["account_id"], "new_owner_id": rng.choice(away)})
            elif a["owner_id"] is None and me["role"] == "rep":
                out.append({"user_id": p, "account_id": a["account_id"], "new_owner_id": p})
            else:
                out.append({"user_id": p, "account_id": a["account_id"], "new_owner_id": rng.choice(home)})
        return out

    def _lead_requests(self, tool: str, ep: Episode, p: Any, rng: Rng) -> list[dict[str, Any]]:
        leads = ep.query("SELECT * FROM leads WHERE owner_id = ? AND status NOT IN ('merged') AND created_at < ? "
                         "ORDER BY lead_id", (p, ep.world.clock))  # fmt: skip
        out: list[dict[str, Any]] = []
        if tool == "merge_leads":
            seen: dict[tuple[str, str, str], str] = {}
            for x in leads:
                key = (x["first_name"], x["last_name"], x["company"].lower())
                if key in seen and x["status"] != "converted":
                    out.append({"user_id": p, "primary_lead_id": seen[key], "duplicate_lead_id": x["lead_id"]})
                elif x["status"] != "converted":
                    seen.setdefault(key, x["lead_id"])
            rng.shuffle(out)
            return out[:4]
        opened = [x for x in leads if x["status"] in ("new", "working", "qualified", "disqualified")]
        rng.shuffle(opened)
        if tool == "convert_lead":
            opened.sort(key=lambda x: x["status"] != "qualified" and rng.chance(0.7))
        for x in opened[:7]:
            if tool == "update_lead_status":
                choices = [s for s in ("working", "qualified", "disqualified") if s != x["status"]]
                out.append({"user_id": p, "lead_id": x["lead_id"], "status": rng.choice(choices)})
            else:
                match = ep.query("SELECT account_id FROM accounts WHERE LOWER(name) = ? ORDER BY account_id",
                                 (" ".join(x["company"].lower().split()),))  # fmt: skip
                args = {"user_id": p, "lead_id": x["lead_id"]}
                if match and rng.chance(0.85):  # left out: policy R2 refuses a new account for a known company
                    args["account_id"] = match[0]["account_id"]
                out.append(args)
        return out

    def _new_leads(self, ep: Episode, p: Any, rng: Rng) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for _ in range(2):
            first, last = rng.choice(FIRST_NAMES), rng.choice(LAST_NAMES)
            short, company = company_name(rng)
            email = work_email(first, last, company_domain(short, rng), rng.below(3))
            out.append({"user_id": p, "first_name": first, "last_name": last, "email": email, "company": company,
                        "state": rng.choice(_STATES), "source": rng.choice(LEAD_SOURCES),
                        **({"title": "CTO"} if rng.chance(0.3) else {})})  # fmt: skip
        if rng.chance(0.5):  # someone already in the CRM, as a lead or a contact: policy R1 refuses them
            known = ep.query("SELECT first_name, last_name, email, company, state FROM leads WHERE owner_id = ? "
                             "AND status IN ('new', 'working') ORDER BY lead_id", (p,))  # fmt: skip
            if known:
                x = rng.choice(known)
                out.insert(0, {"user_id": p, "first_name": x["first_name"], "last_name": x["last_name"],
                               "email": x["email"].lower() if rng.chance(0.5) else x["email"].upper(),
                               "company": x["company"], "state": x["state"], "source": rng.choice(LEAD_SOURCES)})
        if rng.chance(0.25):  # a contact of one of the user's accounts, met again at an event
            known = ep.query("SELECT c.first_name, c.last_name, c.email, a.name, a.state FROM contacts c "
                             "JOIN accounts a ON a.account_id = c.account_id WHERE a.owner_id = ? ORDER BY c.contact_id",
                             (p,))  # fmt: skip
            if known:
                c = rng.choice(known)
                out.insert(0, {"user_id": p, "first_name": c["first_name"], "last_name": c["last_name"],
                               "email": c["email"], "company": c["name"], "state": c["state"], "source": "event"})
        return out

    # -- checks -----------------------------------------------------------------------------------------------

    def required_checks(self, tool: str, args: Mapping[str, Any], ep: Episode | None = None, *,
                        principal: Any = None) -> list[tuple[str, dict[str, Any]]]:  # fmt: skip
        """The generic inspections (the deal, quote, lead, contact or account a write is about), plus a duplicate
        search before a new lead (policy R1): a careful agent looks the e-mail up before entering it."""
        out = super().required_checks(tool, args, ep, principal=principal)
        if tool == "create_lead" and args.get("email"):
            out.insert(0, ("search_leads", {"query": str(args["email"])}))
        return out

    def alternatives(self, target: Target, ep: Episode, principal_id: Any) -> list[tuple[str, list[tuple[str, dict[str, Any]]]]]:
        """A discount above the person's limit may instead go to sales operations (policy R5); a lead whose company
        is already an account is converted into that account (policy R2)."""
        args = target.arguments
        if target.rule == "R2" and target.tool == "convert_lead" and not args.get("account_id"):
            lead = ep.query("SELECT status, company FROM leads WHERE lead_id = ?", (args["lead_id"],))[0]
            match = ep.query("SELECT account_id FROM accounts WHERE LOWER(name) = ? ORDER BY account_id",
                             (" ".join(lead["company"].lower().split()),))  # fmt: skip
            if lead["status"] == "qualified" and match:
                return [("convert into the company's existing account",
                         [("convert_lead", {**args, "account_id": match[0]["account_id"]})])]
            return []
        if target.rule != "R5" or target.tool not in ("add_quote_line", "set_quote_discount"):
            return []
        opp = ep.query("SELECT opportunity_id FROM quotes WHERE quote_id = ?", (args["quote_id"],))
        summary = f"A {args.get('discount_percent')}% discount is requested on quote {args['quote_id']}."
        return [("escalate the discount to sales operations",
                 [("escalate_to_sales_ops", {"user_id": principal_id, "summary": summary,
                                             "opportunity_id": opp[0]["opportunity_id"] if opp else None})])]

    def coherence_rules(self) -> dict[str, CoherenceRule]:
        return {"ids_come_from_the_conversation": ids_come_from_the_conversation}

    # -- scenarios --------------------------------------------------------------------------------------------

    def dress(self, draft: Draft, ep: Episode, rng: Rng) -> None:
        """What a rep brings instead of a command: a contact named by their role on the deal ("their CTO", "the
        deal's primary contact"), "the next stage", or a quote they know only as the draft on a deal. Each is
        used only where it picks out exactly one value on the seed state."""
        if draft.contingency is not None:
            return
        user = draft.principal
        for target in draft.targets:
            if target.said:
                continue
            args, tool = target.arguments, target.tool
            if tool == "set_opportunity_contact" and rng.chance(P_NEED):
                people = self._contacts(ep, self._opp_row(ep, args["opportunity_id"])["account_id"])
                title = next((c["title"] for c in people if c["contact_id"] == args["contact_id"]), None)
                if title and sum(c["title"] == title for c in people) == 1:
                    add_need(draft, target, "contact", rng.choice((f"their {title}", f"the {title} there")),
                             args["contact_id"], ("list_opportunities", {"user_id": user}),
                             ("get_opportunity", {"opportunity_id": args["opportunity_id"]}))
            elif tool == "send_quote" and rng.chance(P_NEED):
                opp = self._quote_opp(ep, args["quote_id"])
                if opp["contact_id"] == args["contact_id"]:
                    add_need(draft, target, "contact", rng.choice(("the deal's primary contact",
                                                                   "the primary contact on the deal")),
                             args["contact_id"], ("get_quote", {"quote_id": args["quote_id"]}),
                             ("get_opportunity", {"opportunity_id": opp["opportunity_id"]}))
            elif tool == "update_opportunity_stage" and args["stage"] != "closed_lost" and rng.chance(P_NEED):
                add_need(draft, target, "stage", "the next stage", args["stage"],
                         ("list_opportunities", {"user_id": user}),
                         ("get_opportunity", {"opportunity_id": args["opportunity_id"]}))
            if args.get("quote_id") and tool != "escalate_to_sales_ops" and rng.chance(P_UNKNOWN_QUOTE):
                self._unknown_quote(draft, target, ep, user, rng)

    def contingencies(self, ep: Episode, principal_id: Any, rng: Rng) -> list[Plan]:
        """Conditional requests on the user's deals: send a draft quote if it is still valid, else start a new
        one; move a deal to proposal if it has a primary contact, else set one."""
        p = principal_id
        plans: list[Plan] = []
        # Valid and expired drafts taken in turn: either branch is gold about as often, so an agent that always
        # sends (or always starts over) without checking the expiry fails half of these.
        valid = [q for q in self._open_drafts(ep, p) if q["expires_at"] > ep.world.clock]
        expired = [q for q in self._open_drafts(ep, p) if q["expires_at"] <= ep.world.clock]
        rng.shuffle(valid)
        rng.shuffle(expired)
        pools = [valid, expired] if rng.chance(0.5) else [expired, valid]
        drafts = [q for pair in zip(*pools, strict=False) for q in pair] + pools[0][len(pools[1]):] \
            + pools[1][len(pools[0]):]  # fmt: skip
        for q in drafts[:3]:
            people = [c["contact_id"] for c in self._contacts(ep, q["account_id"]) if not c["do_not_contact"]]
            if not people:
                continue
            contact = q["contact_id"] if q["contact_id"] in people else rng.choice(people)
            send = {"user_id": p, "quote_id": q["quote_id"], "contact_id": contact}
            new = {"user_id": p, "opportunity_id": q["opportunity_id"]}
            slots = {**self.slots("create_quote", ep, new, None), **self.slots("send_quote", ep, send, None)}
            plans.append(Plan("send_or_requote", f"{q['quote_id']} has not expired", q["expires_at"] > ep.world.clock,
                              ("send_quote", send), ("create_quote", new), slots))  # fmt: skip
        deals = [o for o in self._opps(ep, p, rng, open_share=1.0) if o["stage"] == "qualification"
                 and o["owner_id"] == p]  # fmt: skip
        for o in deals[:2]:
            people = [c["contact_id"] for c in self._contacts(ep, o["account_id"]) if c["contact_id"] != o["contact_id"]]
            if not people:
                continue
            move = {"user_id": p, "opportunity_id": o["opportunity_id"], "stage": "proposal"}
            pick = {"user_id": p, "opportunity_id": o["opportunity_id"], "contact_id": rng.choice(people)}
            slots = {**self.slots("update_opportunity_stage", ep, move, None),
                     **self.slots("set_opportunity_contact", ep, pick, None)}  # fmt: skip
            plans.append(Plan("advance_or_contact", f"{o['name']} has a primary contact", o["contact_id"] is not None,
                              ("update_opportunity_stage", move), ("set_opportunity_contact", pick), slots))  # fmt: skip
        rng.shuffle(plans)
        return plans

    def contingency_templates(self, kind: str) -> list[str]:
        if kind not in CONTINGENCIES:
            raise ToolworldError(f"crm has no contingency templates of kind {kind!r}; it has "
                                 f"{', '.join(sorted(CONTINGENCIES))}", kind="unknown_contingency")  # fmt: skip
        return CONTINGENCIES[kind]

    def _unknown_quote(self, draft: Draft, target: Target, ep: Episode, user: Any, rng: Rng) -> None:
        qid = target.arguments["quote_id"]
        q = ep.query("SELECT status, opportunity_id FROM quotes WHERE quote_id = ?", (qid,))[0]
        # A question about a quote's status cannot name it by its status: then it must be the deal's only quote.
        asks_status = target.tool == "get_quote"
        same = ep.query("SELECT COUNT(*) AS n FROM quotes WHERE opportunity_id = ? AND (? OR status = ?)",
                        (q["opportunity_id"], asks_status, q["status"]))[0]["n"]  # fmt: skip
        if same != 1 or qid in draft.mentions:
            return
        name = self._opp_row(ep, q["opportunity_id"])["name"]
        listed = ep.call("list_opportunities", {"user_id": user})
        if not listed.ok or q["opportunity_id"] not in [o["opportunity_id"] for o in listed.output["opportunities"]]:
            return
        said = f"the quote on '{name}'" if asks_status else f"the {q['status']} quote on '{name}'"
        target.slots["quote"], target.slots["Quote"] = said, said[0].upper() + said[1:]
        draft.unknown.append(("quote", qid))
        for read in (("list_opportunities", {"user_id": user}), ("get_opportunity",
                                                                  {"opportunity_id": q["opportunity_id"]})):
            if read not in draft.reads:
                draft.reads.append(read)
        draft.profile.unknown.setdefault("quote_id", rng.choice(UNKNOWN_QUOTE_LINES))
        draft.demand("unknown_fact")

    def _opp_row(self, ep: Episode, opportunity_id: str) -> dict[str, Any]:
        return ep.query("SELECT * FROM opportunities WHERE opportunity_id = ?", (opportunity_id,))[0]

    def _quote_opp(self, ep: Episode, quote_id: str) -> dict[str, Any]:
        return ep.query("SELECT o.* FROM opportunities o JOIN quotes q USING (opportunity_id) WHERE q.quote_id = ?",
                        (quote_id,))[0]  # fmt: skip

    # -- speaking ---------------------------------------------------------------------------------------------

    def slots(self, tool: str, ep: Episode, args: Mapping[str, Any], profile: UserProfile | None) -> dict[str, str]:
        out: dict[str, str] = {}
        if args.get("opportunity_id"):
            out["opp"] = self._one(ep, "SELECT name FROM opportunities WHERE opportunity_id = ?", args["opportunity_id"])
        if args.get("quote_id"):
            out["quote_id"] = str(args["quote_id"])
            out["quote"], out["Quote"] = f"quote {args['quote_id']}", f"Quote {args['quote_id']}"
        if args.get("contact_id"):
            out["contact"] = self.person(ep, "contacts", "contact_id", args["contact_id"])
        if args.get("lead_id"):
            out["lead"] = self.person(ep, "leads", "lead_id", args["lead_id"])
        if args.get("primary_lead_id"):
            out["lead"] = self.person(ep, "leads", "lead_id", args["primary_lead_id"])
            out["duplicate"] = self.person(ep, "leads", "lead_id", args["duplicate_lead_id"])
            out["person"] = self._one(ep, "SELECT first_name || ' ' || last_name FROM leads WHERE lead_id = ?",
                                      args["primary_lead_id"])  # fmt: skip
        if tool == "convert_lead":
            company = self._one(ep, "SELECT company FROM leads WHERE lead_id = ?", args["lead_id"])
            out["account_clause"] = (f" in the existing {company} account" if args.get("account_id")
                                     else f" and create a new {company} account")  # fmt: skip
        if args.get("account_id") and tool == "reassign_account":
            out["account"] = self._one(ep, "SELECT name FROM accounts WHERE account_id = ?", args["account_id"])
        if args.get("new_owner_id"):
            rep = self._one(ep, "SELECT first_name || ' ' || last_name FROM users WHERE user_id = ?", args["new_owner_id"])
            out["rep"] = "me" if args["new_owner_id"] == args.get("user_id") else rep
        if args.get("product_id"):
            out["product"] = self._one(ep, "SELECT name FROM products WHERE product_id = ?", args["product_id"])
        if "quantity" in args:
            out["quantity"] = str(args["quantity"])
            out["units"] = "unit" if args["quantity"] == 1 else "units"
        if tool == "add_quote_line":
            d = args.get("discount_percent") or 0
            out["discount_clause"] = f" with a {d}% discount" if d else " at list price"
        if "discount_percent" in args:
            out["discount"] = str(args["discount_percent"])
        if "stage" in args:
            out["stage"] = str(args["stage"]).replace("_", " ")
        if args.get("loss_reason"):
            out["loss_reason"] = str(args["loss_reason"])
        if "status" in args:
            out["status"] = str(args["status"])
        if tool == "log_activity":
            out["kind"], out["subject"] = str(args["kind"]), str(args["subject"])
        if tool == "create_lead":
            out["person"] = display_name(args)
            out.update(email=str(args["email"]), company=str(args["company"]), state=str(args["state"]),
                       source=str(args["source"]))  # fmt: skip
            title = args.get("title")
            out["title_part"] = f"{title}, " if title else ""
            out["title_clause"] = f"they are the {title}; " if title else ""
            out["title_sentence"] = f" Title: {title}." if title else ""
        if "summary" in args:
            out["summary"] = str(args["summary"])
        return out

    def slot_facts(self, tool: str, ep: Episode, args: Mapping[str, Any],
                   profile: UserProfile | None) -> dict[str, list[str]]:  # fmt: skip
        """Per slot, the strings a rewrite must keep: a deal's name, a person's e-mail, a number, a product."""
        slots = self.slots(tool, ep, args, profile)
        out: dict[str, list[str]] = {}
        for name, text in slots.items():
            if name in ("title_part", "title_clause", "title_sentence", "summary", "subject", "kind", "units"):
                out[name] = []
            elif name in ("contact", "lead", "duplicate"):
                out[name] = [text.rsplit("(", 1)[-1].rstrip(")")]  # the e-mail picks the person out
            elif name in ("quote", "Quote"):
                out[name] = [str(args["quote_id"])]
            elif name == "account_clause":
                out[name] = []
            elif name == "discount_clause":
                d = args.get("discount_percent") or 0
                out[name] = [f"{d}%"] if d else []
            elif name == "rep" and text == "me":
                out[name] = []
            else:
                out[name] = [text]
        return out

    def person(self, ep: Episode, table: str, key: str, value: Any) -> str:
        """A lead or contact as a rep names them: the name and the e-mail (duplicates differ only by the e-mail)."""
        row = ep.query(f"SELECT first_name, last_name, email FROM {table} WHERE {key} = ?", (value,))[0]
        return f"{display_name(row)} ({row['email']})"

    def _one(self, ep: Episode, sql: str, value: Any) -> str:
        rows = ep.query(sql, (value,))
        return str(next(iter(rows[0].values()))) if rows else str(value)

    def outputs(self, tool: str, args: Mapping[str, Any], result: Any) -> list[ExpectedOutput]:
        if not isinstance(result, dict):
            return []
        if tool == "get_opportunity":
            return [ExpectedOutput(label="stage", value=str(result["stage"])),
                    ExpectedOutput(label="amount", value=f"{result['amount']:.2f}")]  # fmt: skip
        if tool == "get_quote":
            return [ExpectedOutput(label="status", value=str(result["status"])),
                    ExpectedOutput(label="total", value=f"{result['total']:.2f}")]  # fmt: skip
        if tool == "create_quote":
            return [ExpectedOutput(label="quote_id", value=str(result["quote_id"]))]
        if tool in ("add_quote_line", "set_quote_discount"):
            return [ExpectedOutput(label="quote_total", value=f"{result['total']:.2f}")]
        return []


def ids_come_from_the_conversation(task: Task, ep: Episode) -> str | None:
    """Every id the gold passes was said by the user or shown by an earlier call of the gold: an agent cannot
    pass a quote number the user never gave, even if the user has it in their files."""
    seen = task.instruction + json.dumps(task.user.model_dump(mode="json"))
    fork = ep.fork()
    try:
        for i, action in enumerate(task.gold_actions):
            spec = ep.world.tools[action.name].spec
            for param in spec.entity_params:
                value = action.arguments.get(param.param)
                for v in value if isinstance(value, list) else [value]:
                    if isinstance(v, str) and v not in seen:
                        return f"step {i} ({action.name}) passes {param.param}={v!r}, which nothing before it showed"
            result = fork.call(action.name, action.arguments)
            if result.ok:
                seen += json.dumps(result.output)
    finally:
        fork.close()
    return None


def kit(world: World) -> CrmKit:
    return CrmKit(world)
