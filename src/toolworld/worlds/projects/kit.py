"""Task-synthesis hints for the projects world: who writes in, realistic target arguments, how people speak.

Candidates come from the live episode (the person's own watched issues, their projects' sprints and members,
their own time logs), in every state: the generator executes them, so a move the workflow allows becomes an
action task while a move it forbids, a sprint at capacity or a non-lead closing a sprint becomes a refusal task
under the rule the tool cites, with no rule coded twice. People never quote internal ids: teammates are named,
sprints are called by name, time entries by issue, day and duration; issue and project keys are spoken as-is.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from toolworld.core.errors import ToolworldError
from toolworld.tasks.kit import Bag, TaskKit
from toolworld.tasks.model import ExpectedOutput, Need, UserProfile
from toolworld.tasks.sampling import Draft, Plan
from toolworld.world import Episode, Rng, World

from .common import FINISHED, NOW, PRIORITIES, TODAY, allowed, day_offset
from .phrases import (
    COMMENT_BODIES,
    CONTINGENCIES,
    ESCALATIONS,
    IDENTITY,
    INTENTS,
    NEW_SUMMARIES,
    RESOLUTION_WORDS,
    REVISIONS,
    STATUS_WORDS,
    TONES,
)

#: Slots holding the person's own words: a rewrite may say them differently, so they are no facts to keep. A
#: comment body or a new issue's title is not among them: the person dictates it in quotes, the agent must post it
#: as given, and the scorer compares it (an agent that pastes the whole request as the comment fails).
FREE_SLOTS = ("change", "resolution", "move")
#: At most this many issues a person is taken to know by key (the ones they watch, most recently updated).
KNOWN_ISSUES = 24
#: How often a scenario is used where it applies.
P_UNKNOWN_KEY = 0.35
P_PIECEMEAL = 0.2
P_REVISION = 0.3
UNKNOWN_KEY_LINES = (
    "I don't have the issue key at hand, sorry.",
    "I don't remember its key, only what it's called.",
    "No idea what the key is; I only know the title.",
)
_DESCRIBED = re.compile(r'^the (?:bug|story|task) "(?P<summary>.+)" in (?P<project>[A-Z]+)$')


def duration(minutes: int) -> str:
    """Minutes as people say them ("2 hours 30 minutes", "45 minutes")."""
    h, m = divmod(minutes, 60)
    parts = ([f"{h} hour{'s' if h != 1 else ''}"] if h else []) + ([f"{m} minutes"] if m else [])
    return " ".join(parts)


class ProjectsKit(TaskKit):
    principal = "user"
    intents = INTENTS
    info_tools = ("get_issue", "get_sprint", "list_time_logs", "get_daily_time", "search_issues")
    # Only the escalation summary is the agent's own words; dictated comments and titles are compared as given.
    ignore_columns = ("admin_requests.summary",)
    known_entity_keys = {"issue_keys": "issue", "project_keys": "project"}  # noqa: RUF012
    handoff_tools = ("escalate_to_admin",)

    def principals(self, ep: Episode) -> list[Any]:
        # People who left the company do not write in.
        if ep.seed not in self._principals:
            self._principals[ep.seed] = [r["user_id"] for r in ep.query(
                "SELECT user_id FROM users WHERE active = 1 ORDER BY user_id")]  # fmt: skip
        return self._principals[ep.seed]

    def profile(self, ep: Episode, principal_id: Any, rng: Rng) -> UserProfile:
        u = ep.query("SELECT full_name, email, role, title FROM users WHERE user_id = ?", (principal_id,))[0]
        projects = [r["project_key"] for r in ep.query(
            "SELECT project_key FROM project_members WHERE user_id = ? ORDER BY project_key", (principal_id,))]  # fmt: skip
        watched = [r["issue_key"] for r in ep.query(
            "SELECT i.issue_key FROM watchers w JOIN issues i ON i.issue_key = w.issue_key WHERE w.user_id = ? "
            "AND i.issue_type != 'epic' ORDER BY i.updated_at DESC, i.issue_key LIMIT ?",
            (principal_id, KNOWN_ISSUES))]  # fmt: skip
        # Open duplicate reports in their projects, with the report they repeat: people spot these in triage.
        for d in _duplicate_pairs(ep, projects)[:2]:
            watched += [k for k in d if k not in watched]
        # A report already closed as a duplicate, and the issue it repeats: people mix up which one is the original.
        for d in _linked_duplicates(ep, projects)[:1]:
            watched += [k for k in d if k not in watched]
        # Two issues seen on another team's board: the person is no member there (rules R7, R10 refuse changes).
        others = [r["project_key"] for r in ep.query(
            "SELECT project_key FROM projects WHERE project_key NOT IN (SELECT project_key FROM project_members "
            "WHERE user_id = ?) ORDER BY project_key", (principal_id,))]  # fmt: skip
        if others:
            watched += [r["issue_key"] for r in ep.query(
                "SELECT issue_key FROM issues WHERE project_key = ? AND issue_type != 'epic' AND status IN "
                "('todo', 'in_progress') ORDER BY updated_at DESC, issue_key LIMIT 2", (rng.choice(others),))]  # fmt: skip
        return UserProfile(
            name=u["full_name"],
            persona=f"{u['full_name']}, {u['title']} ({u['role']}), {rng.choice(TONES)}.",
            known={"email": u["email"], "full_name": u["full_name"], "project_keys": projects,
                   "issue_keys": sorted(watched)},
        )

    def identity_templates(self, tool: str) -> list[str]:
        return IDENTITY[tool] if tool in IDENTITY else super().identity_templates(tool)

    # -- candidates -----------------------------------------------------------------------------------------

    def propose(self, tool: str, ep: Episode, principal_id: Any, bag: Bag, rng: Rng) -> list[dict[str, Any]]:
        me = principal_id
        # Only issues that existed before the conversation: nobody can name the key of one created in it.
        issues = [i for i in (_issue(ep, k) for k in bag.get("issue")) if i is not None and i["created_at"] < NOW]
        rng.shuffle(issues)
        # The person's own projects (the bag may hold every key once list_projects was read).
        projects = [r["project_key"] for r in ep.query(
            "SELECT project_key FROM project_members WHERE user_id = ? ORDER BY project_key", (me,))]  # fmt: skip
        out: list[dict[str, Any]] = []
        if tool == "create_issue":
            everywhere = [r["project_key"] for r in ep.query("SELECT project_key FROM projects ORDER BY 1")]
            for _ in range(3):
                # Now and then a project the person is not in (rule R10 refuses it).
                key = rng.choice(everywhere) if not projects or rng.chance(0.15) else rng.choice(projects)
                itype = rng.choice(("bug", "story", "task"))
                args: dict[str, Any] = {"user_id": me, "project_key": key, "issue_type": itype,
                                        "summary": rng.choice(NEW_SUMMARIES[itype]),
                                        "priority": rng.choice(PRIORITIES)}  # fmt: skip
                if rng.chance(0.4):
                    args["story_points"] = rng.choice((1, 2, 3, 5, 8))
                if rng.chance(0.4):
                    mates = _members(ep, key)
                    if mates:
                        args["assignee_id"] = rng.choice(mates)["user_id"]
                out.append(args)
            return out
        for i in issues[:6]:
            key = i["issue_key"]
            open_ = i["status"] not in FINISHED
            if tool == "transition_issue":
                options = allowed(i["issue_type"], i["status"])
                wrong = [s for s in ("todo", "in_progress", "in_review", "done", "closed")
                         if s not in options and s != i["status"]]  # fmt: skip
                to = rng.choice(wrong) if wrong and (not options or rng.chance(0.3)) else \
                    (rng.choice(options) if options else None)  # fmt: skip
                if to is None:
                    continue
                args = {"user_id": me, "issue_key": key, "to_status": to}
                if to in FINISHED and (i["resolution"] is None or rng.chance(0.3)) and rng.chance(0.85):
                    args["resolution"] = rng.choice(("fixed", "cannot_reproduce", "wont_do") if i["issue_type"] == "bug"
                                                    else ("done", "wont_do"))  # fmt: skip
                out.append(args)
            elif tool == "assign_issue" and open_:
                mates = [m for m in _members(ep, i["project_key"]) if m["user_id"] != i["assignee_id"]]
                if mates:
                    out.append({"user_id": me, "issue_key": key, "assignee_id": rng.choice(mates)["user_id"]})
            elif tool == "update_issue" and open_:
                choice = rng.below(3)
                if choice == 0:
                    pr = [p for p in PRIORITIES if p != i["priority"]]
                    out.append({"user_id": me, "issue_key": key, "priority": rng.choice(pr)})
                elif choice == 1:
                    pts = [p for p in (1, 2, 3, 5, 8, 13) if p != i["story_points"]]
                    out.append({"user_id": me, "issue_key": key, "story_points": rng.choice(pts)})
                else:
                    out.append({"user_id": me, "issue_key": key, "due_date": day_offset(TODAY, rng.randint(3, 40))})
            elif tool == "add_comment":
                out.append({"user_id": me, "issue_key": key, "body": rng.choice(COMMENT_BODIES)})
            elif tool == "log_time" and i["issue_type"] != "epic":
                day = day_offset(TODAY, -rng.randint(0, 6))
                heavy = ep.query("SELECT day FROM time_logs WHERE user_id = ? GROUP BY day HAVING SUM(minutes) > 1000 "
                                 "ORDER BY day LIMIT 1", (me,))  # fmt: skip
                if heavy and rng.chance(0.5):
                    day = heavy[0]["day"]  # a crunch day: more time may not fit (rule R7)
                elif rng.chance(0.12):
                    day = day_offset(TODAY, rng.randint(1, 5))  # a day not yet worked (rule R7)
                out.append({"user_id": me, "issue_key": key, "minutes": 15 * rng.randint(2, 24), "day": day})
            elif tool == "delete_time_log":
                logs = ep.query("SELECT time_log_id, user_id FROM time_logs WHERE issue_key = ? AND created_at < ? "
                                "ORDER BY time_log_id", (key, NOW))  # fmt: skip
                mine = [r["time_log_id"] for r in logs if r["user_id"] == me and _unique_log(ep, r["time_log_id"])]
                theirs = [r["time_log_id"] for r in logs if r["user_id"] != me and _unique_log(ep, r["time_log_id"])]
                if theirs and (not mine or rng.chance(0.2)):  # a teammate's entry: rule R12 refuses it
                    out.append({"user_id": me, "time_log_id": rng.choice(theirs)})
                elif mine:
                    out.append({"user_id": me, "time_log_id": rng.choice(mine)})
            elif tool == "add_issue_to_sprint" and open_ and i["issue_type"] != "epic":
                sprints = [s for s in _sprints(ep, i["project_key"]) if s["sprint_id"] != i["sprint_id"]]
                if sprints:
                    out.append({"user_id": me, "issue_key": key, "sprint_id": rng.choice(sprints)["sprint_id"]})
            elif tool == "remove_issue_from_sprint" and i["sprint_id"] is not None:
                out.append({"user_id": me, "issue_key": key})
            elif tool in ("get_issue", "list_time_logs"):
                out.append({"issue_key": key})
        if tool == "get_daily_time":
            days = [r["day"] for r in ep.query("SELECT DISTINCT day FROM time_logs WHERE user_id = ? AND day >= ? "
                                                "ORDER BY day", (me, day_offset(TODAY, -14)))]  # fmt: skip
            rng.shuffle(days)
            return [{"user_id": me, "day": d} for d in days[:3]]
        if tool == "search_issues":
            for p in projects:
                for itype in rng.sample(["bug", "story", "task"], 2):
                    out.append({"project_key": p, "issue_type": itype, "status": rng.choice(("backlog", "todo")),
                                "unassigned": True})  # fmt: skip
            rng.shuffle(out)
            return out
        if tool in ("start_sprint", "close_sprint", "get_sprint"):
            # Mostly leads and admins run sprints; others ask now and then (and rule R11 refuses them).
            runs_sprints = bool(ep.query("SELECT 1 FROM users WHERE user_id = ? AND role = 'admin' UNION SELECT 1 FROM "
                                         "projects WHERE lead_id = ?", (me, me)))  # fmt: skip
            if tool != "get_sprint" and not runs_sprints and not rng.chance(0.5):
                return []
            for p in projects:
                for s in _sprints(ep, p):
                    if tool == "get_sprint" and s["state"] != "closed":
                        out.append({"sprint_id": s["sprint_id"]})
                    elif tool == "start_sprint" and s["state"] == "planned":
                        out.append({"user_id": me, "sprint_id": s["sprint_id"]})
                    elif tool == "close_sprint" and s["state"] == "active":
                        out.append({"user_id": me, "sprint_id": s["sprint_id"],
                                    "move_unfinished_to": rng.choice(("backlog", "next_sprint"))})  # fmt: skip
            rng.shuffle(out)
        elif tool == "link_duplicate":
            known = set(bag.get("issue"))
            for dup, original in _duplicate_pairs(ep, projects):
                if dup in known and original in known:
                    out.append({"user_id": me, "issue_key": dup, "original_key": original})
            for closed, original in _linked_duplicates(ep, projects):
                if closed in known and original in known and rng.chance(0.3):
                    # Backwards: the closed report named as the original (rule R9 refuses it).
                    out.append({"user_id": me, "issue_key": original, "original_key": closed})
            rng.shuffle(out)
        elif tool == "escalate_to_admin":
            gone = ep.query("SELECT u.full_name FROM users u JOIN project_members m ON m.user_id = u.user_id "
                            "WHERE u.active = 0 AND m.project_key IN (SELECT project_key FROM project_members "
                            "WHERE user_id = ?) ORDER BY u.full_name LIMIT 3", (me,))  # fmt: skip
            for text in ESCALATIONS:
                if "{name}" in text and gone:
                    out.append({"user_id": me, "summary": text.format(name=rng.choice(gone)["full_name"])})
                elif "{issue}" in text and issues:
                    key = issues[0]["issue_key"]
                    out.append({"user_id": me, "summary": text.format(issue=key), "issue_key": key})
            rng.shuffle(out)
        return out

    def alternatives(self, target: Any, ep: Episode, principal_id: Any) -> list[tuple[str, list[tuple[str, dict[str, Any]]]]]:
        """A sprint whose unfinished work does not fit the next one (policy R6) may still be closed with that work
        going to the backlog, as the refusal suggests; an agent that does so with the person's yes is right too."""
        args = target.arguments
        if target.tool == "close_sprint" and target.rule == "R6" and args.get("move_unfinished_to") == "next_sprint":
            return [("close the sprint with its unfinished work going to the backlog",
                     [("close_sprint", {**args, "move_unfinished_to": "backlog"})])]
        return []

    # -- scenarios ------------------------------------------------------------------------------------------

    def contingencies(self, ep: Episode, principal_id: Any, rng: Rng) -> list[Plan]:
        """Conditional requests on the person's known issues: the branch depends on the issue's live state, which
        the agent must read (``get_issue``) before acting."""
        plans: list[Plan] = []
        known = [r for r in ep.query(
            "SELECT i.issue_key, i.project_key, i.status, i.assignee_id FROM watchers w JOIN issues i ON "
            "i.issue_key = w.issue_key WHERE w.user_id = ? AND i.issue_type != 'epic' AND i.status IN "
            "('backlog', 'todo', 'in_progress') ORDER BY i.issue_key", (principal_id,))]  # fmt: skip
        rng.shuffle(known)
        for i in known[:4]:
            key = i["issue_key"]
            if i["status"] in ("todo", "in_progress") and rng.chance(0.5):
                start = {"user_id": principal_id, "issue_key": key, "to_status": "in_progress"}
                review = {"user_id": principal_id, "issue_key": key, "to_status": "in_review"}
                plans.append(Plan("start_or_review", "the issue has not been started", i["status"] == "todo",
                                  ("transition_issue", start), ("transition_issue", review), {"issue": key}))
                continue
            mates = [m for m in _members(ep, i["project_key"]) if m["active"] and m["user_id"] != i["assignee_id"]]
            if not mates:
                continue
            assign = {"user_id": principal_id, "issue_key": key, "assignee_id": rng.choice(mates)["user_id"]}
            comment = {"user_id": principal_id, "issue_key": key, "body": rng.choice(COMMENT_BODIES)}
            slots = {**self.slots("assign_issue", ep, assign, None), **self.slots("add_comment", ep, comment, None)}
            plans.append(Plan("assign_or_comment", "the issue is unassigned", i["assignee_id"] is None,
                              ("assign_issue", assign), ("add_comment", comment), slots))
        return plans

    def dress(self, draft: Draft, ep: Episode, rng: Rng) -> None:
        """A person who knows an issue by its title, not its key ("the bug 'Crash when ...' in APP"): the agent
        searches the project for it. Used only where the title picks out exactly one issue of the project. And a
        piecemeal person, who says who they are only when asked. And a change of mind, voiced when the agent reads
        the change back."""
        if draft.kind == "action" and len(draft.targets) == 1 and draft.contingency is None \
                and rng.chance(P_REVISION):  # fmt: skip
            self._revise(draft, draft.targets[0], ep, rng)
        for target in draft.targets:
            key = target.arguments.get("issue_key")
            if not key or "original_key" in target.arguments or key in draft.mentions or target.said \
                    or not rng.chance(P_UNKNOWN_KEY):  # fmt: skip
                continue
            row = _issue(ep, key)
            if row is None or row["issue_type"] == "epic":
                continue
            hits = ep.query("SELECT COUNT(*) AS n FROM issues WHERE project_key = ? AND LOWER(summary) LIKE ?",
                            (row["project_key"], f"%{row['summary'].lower()}%"))[0]["n"]  # fmt: skip
            if hits != 1:
                continue  # the same bug reported twice, or a title inside another: the words name no single issue
            said = f'the {row["issue_type"]} "{row["summary"]}" in {row["project_key"]}'
            target.slots["issue"] = said
            if draft.contingency is not None:
                draft.speech.contingency_slots["issue"] = said
            draft.unknown.append(("issue", key))
            finder = ("search_issues", {"project_key": row["project_key"], "text": row["summary"]})
            if finder not in draft.reads:
                draft.reads.append(finder)
            draft.needs.append(Need(slot="issue", phrase=said, value=key))
            known = draft.profile.known.get("issue_keys")
            if isinstance(known, list) and key in known:
                known.remove(key)
            draft.profile.unknown.setdefault("issue_key", rng.choice(UNKNOWN_KEY_LINES))
            draft.demand("unknown_fact")
        if rng.chance(P_PIECEMEAL):
            draft.profile.behaviour.append("piecemeal")
            draft.speech.identity = False
            draft.demand("piecemeal")

    def _revise(self, draft: Draft, target: Any, ep: Episode, rng: Rng) -> None:
        """The request first asks for another valid call of the same tool; the gold's is what the person settles on."""
        args = target.arguments
        first: dict[str, Any] | None = None
        if target.tool == "assign_issue" and args.get("assignee_id"):
            project = str(args["issue_key"]).split("-")[0]
            mates = [m["user_id"] for m in _members(ep, project) if m["active"]
                     and m["user_id"] not in (args["assignee_id"], args["user_id"])]  # fmt: skip
            if mates:
                first = {**args, "assignee_id": rng.choice(mates)}
        elif target.tool == "add_issue_to_sprint":
            project = str(args["issue_key"]).split("-")[0]
            others = [s["sprint_id"] for s in _sprints(ep, project) if s["state"] == "planned"
                      and s["sprint_id"] != args["sprint_id"]]  # fmt: skip
            if others:
                first = {**args, "sprint_id": rng.choice(others)}
        elif target.tool == "update_issue" and args.get("priority"):
            first = {**args, "priority": rng.choice([p for p in PRIORITIES if p != args["priority"]])}
        elif target.tool == "update_issue" and args.get("story_points") is not None:
            first = {**args, "story_points": rng.choice([p for p in (1, 2, 3, 5, 8) if p != args["story_points"]])}
        elif target.tool == "log_time":
            first = {**args, "minutes": rng.choice([m for m in (30, 60, 90, 120, 240) if m != args["minutes"]])}
        if first is None or first == args or not ep.probe(target.tool, first).ok:
            return
        target.said = first
        draft.revision = [(target.tool, first)]
        draft.speech.revision = target.tool
        draft.speech.revision_slots = self.slots(target.tool, ep, args, draft.profile)
        draft.demand("change_of_mind")

    def revision_templates(self, tool: str) -> list[str]:
        return REVISIONS.get(tool) or super().revision_templates(tool)

    def contingency_templates(self, kind: str) -> list[str]:
        if kind not in CONTINGENCIES:
            raise ToolworldError(f"projects has no contingency templates of kind {kind!r}; it has "
                                 f"{', '.join(sorted(CONTINGENCIES))}", kind="unknown_contingency")  # fmt: skip
        return CONTINGENCIES[kind]

    # -- speaking -------------------------------------------------------------------------------------------

    def slots(self, tool: str, ep: Episode, args: Mapping[str, Any], profile: UserProfile | None) -> dict[str, str]:
        out: dict[str, str] = {}
        if args.get("issue_key"):
            out["issue"] = str(args["issue_key"])
        if args.get("original_key"):
            out["original"] = str(args["original_key"])
        if args.get("project_key"):
            out["project"] = str(args["project_key"])
        if "issue_type" in args:
            out["itype"] = str(args["issue_type"])
            out["itypes"] = "stories" if args["issue_type"] == "story" else f"{args['issue_type']}s"
        if "priority" in args and tool == "create_issue":
            out["priority"] = str(args["priority"])
        if "summary" in args:
            out["summary"] = str(args["summary"])
        if "body" in args:
            out["body"] = str(args["body"])
        if "assignee_id" in args:
            who = args["assignee_id"]
            out["assignee"] = "nobody" if not who else "me" if who == args.get("user_id") else _name(ep, who)
        if "sprint_id" in args:
            out["sprint"] = _sprint_name(ep, args["sprint_id"])
        if tool == "search_issues" and "status" in args:
            out["status"] = STATUS_WORDS[str(args["status"])]
        if tool == "get_daily_time":
            out["day"] = str(args["day"])
        if "to_status" in args:
            out["status"] = STATUS_WORDS[str(args["to_status"])]
            out["resolution"] = RESOLUTION_WORDS.get(str(args.get("resolution") or ""), "")
        if "move_unfinished_to" in args:
            out["move"] = "the backlog" if args["move_unfinished_to"] == "backlog" else "the next planned sprint"
        if tool == "update_issue":
            if args.get("priority"):
                out["change"] = f"set the priority to {args['priority']}"
            elif args.get("story_points") is not None:
                out["change"] = f"set the estimate to {args['story_points']} story points"
            elif args.get("due_date"):
                out["change"] = f"set the due date to {args['due_date']}"
        if "minutes" in args:
            out["duration"], out["day"], out["minutes"] = duration(int(args["minutes"])), str(args["day"]), str(args["minutes"])
        if tool == "delete_time_log" and "time_log_id" in args:
            row = ep.query("SELECT issue_key, day, minutes, user_id FROM time_logs WHERE time_log_id = ?",
                           (args["time_log_id"],))  # fmt: skip
            if row:
                out.update(issue=row[0]["issue_key"], day=row[0]["day"], duration=duration(row[0]["minutes"]),
                           owner="me" if row[0]["user_id"] == args.get("user_id") else _name(ep, row[0]["user_id"]))
        return out

    def slot_facts(self, tool: str, ep: Episode, args: Mapping[str, Any],
                   profile: UserProfile | None) -> dict[str, list[str]]:  # fmt: skip
        out = {}
        for name, text in self.slots(tool, ep, args, profile).items():
            out[name] = self.fact_strings(name, text)
        if tool == "update_issue":  # the new value must survive a rewrite, whatever words surround it
            for field in ("priority", "story_points", "due_date"):
                if args.get(field) is not None:
                    out["change"] = [str(args[field])]
        return out

    def fact_strings(self, slot: str, text: str) -> list[str]:
        if slot in FREE_SLOTS:
            return []
        described = _DESCRIBED.match(text.strip())
        if described:  # an issue known by title: the title and the project must survive a rewrite
            return [described["summary"], described["project"]]
        return super().fact_strings(slot, text)

    def outputs(self, tool: str, args: Mapping[str, Any], result: Any) -> list[ExpectedOutput]:
        if not isinstance(result, dict):
            return []
        if tool == "get_issue":
            assignee = result.get("assignee")
            return [ExpectedOutput(label="status", value=str(result["status"])),
                    ExpectedOutput(label="assignee", value=assignee["full_name"] if assignee else "unassigned")]  # fmt: skip
        if tool == "get_sprint":
            return [ExpectedOutput(label="remaining_capacity", value=str(result["remaining_capacity"]))]
        if tool == "get_daily_time":
            return [ExpectedOutput(label="total_minutes", value=str(result["total_minutes"]))]
        if tool == "search_issues":
            return [ExpectedOutput(label="count", value=str(result["total"]))]
        if tool == "list_time_logs":
            if not result.get("total_minutes"):
                return []
            return [ExpectedOutput(label="total_minutes", value=str(result["total_minutes"]))]
        if tool == "create_issue":
            return [ExpectedOutput(label="issue_key", value=str(result["issue_key"]))]
        return []


# -- looking things up on the seed state ----------------------------------------------------------------------


def _issue(ep: Episode, key: str) -> dict[str, Any] | None:
    rows = ep.query("SELECT * FROM issues WHERE issue_key = ?", (key,))
    return rows[0] if rows else None


def _members(ep: Episode, project_key: str) -> list[dict[str, Any]]:
    return ep.query("SELECT u.user_id, u.full_name, u.active FROM project_members m JOIN users u ON u.user_id = m.user_id "
                    "WHERE m.project_key = ? ORDER BY u.user_id", (project_key,))  # fmt: skip


def _sprints(ep: Episode, project_key: str) -> list[dict[str, Any]]:
    return ep.query("SELECT sprint_id, name, state FROM sprints WHERE project_key = ? AND (state != 'closed' OR "
                    "sprint_id = (SELECT MAX(sprint_id) FROM sprints WHERE project_key = ? AND state = 'closed')) "
                    "ORDER BY sprint_id", (project_key, project_key))  # fmt: skip


def _duplicate_pairs(ep: Episode, projects: list[str]) -> list[tuple[str, str]]:
    """(newer report, older report) of the same summary in ``projects``, the newer one still open."""
    if not projects:
        return []
    marks = ", ".join("?" for _ in projects)
    rows = ep.query(
        f"SELECT d.issue_key AS dup, o.issue_key AS original FROM issues d JOIN issues o ON o.project_key = d.project_key "
        f"AND o.summary = d.summary AND o.number < d.number WHERE d.project_key IN ({marks}) AND d.issue_type = 'bug' "
        "AND d.status NOT IN ('done', 'closed') ORDER BY d.issue_key", projects)  # fmt: skip
    return [(r["dup"], r["original"]) for r in rows]


def _linked_duplicates(ep: Episode, projects: list[str]) -> list[tuple[str, str]]:
    """(report closed as a duplicate, the open issue it repeats) in ``projects``."""
    if not projects:
        return []
    marks = ", ".join("?" for _ in projects)
    rows = ep.query(
        f"SELECT d.issue_key AS dup, o.issue_key AS original FROM issues d JOIN issues o ON o.issue_key = d.duplicate_of "
        f"WHERE d.project_key IN ({marks}) AND o.status NOT IN ('done', 'closed') ORDER BY d.issue_key", projects)  # fmt: skip
    return [(r["dup"], r["original"]) for r in rows]


def _unique_log(ep: Episode, time_log_id: int) -> bool:
    """Whether issue, day and duration name this time log alone among its author's (what the person says)."""
    row = ep.query("SELECT issue_key, user_id, day, minutes FROM time_logs WHERE time_log_id = ?", (time_log_id,))[0]
    n = ep.query("SELECT COUNT(*) AS n FROM time_logs WHERE issue_key = ? AND user_id = ? AND day = ? AND minutes = ?",
                 (row["issue_key"], row["user_id"], row["day"], row["minutes"]))[0]["n"]  # fmt: skip
    return bool(n == 1)


def _name(ep: Episode, user_id: str) -> str:
    return str(ep.query("SELECT full_name FROM users WHERE user_id = ?", (user_id,))[0]["full_name"])


def _sprint_name(ep: Episode, sprint_id: int) -> str:
    return str(ep.query("SELECT name FROM sprints WHERE sprint_id = ?", (sprint_id,))[0]["name"])


def kit(world: World) -> ProjectsKit:
    return ProjectsKit(world)
