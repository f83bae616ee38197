"""The projects world's deterministic seed data: people, projects, sprints, issues and their history.

Every draw comes from the ``Rng`` passed in (a child stream per part), times are whole seconds before the
world's clock and every iterated collection is a list, so a seed gives byte-identical rows everywhere.

The rows follow the rules the tools enforce (``policy.md``) where a real tracker would: an issue in progress
has an assignee, a finished one a resolution, committed points fit a sprint's capacity, time logs stay under
24 hours a day. They also carry a real tracker's mess: the same bug reported twice (a few already linked, most
not), stale backlog issues untouched for months, unassigned and unestimated issues, people who left the company
but are still assigned, closed sprints with unfinished issues, epics with no children, a few days of suspicious
overtime in the time logs, and some projects already at their work-in-progress limit.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field

from toolworld.world.rng import Rng
from toolworld.worlds.shared.draw import fresh, pct
from toolworld.worlds.shared.people import full_name

from . import vocab
from .common import COMPANY_DOMAIN, REQUIREMENTS, TODAY, WORKFLOWS, day_offset, days_ago

N_ADMINS, N_LEADS, N_MEMBERS = 4, 14, 242
POINTS = (1, 2, 3, 5, 8, 13)
#: Projects whose active sprint sits exactly at its in-progress limit (moving one more issue there is refused).
AT_WIP_LIMIT = ("APP", "PAY", "OPS")
#: A project between sprints: no active sprint, so its next planned sprint can be started.
NO_ACTIVE = ("DOCS", "WEB")


@dataclass(slots=True)
class _Issue:
    key: str
    project: str
    number: int
    itype: str
    summary: str
    status: str
    priority: str
    reporter: str
    assignee: str | None
    points: int | None
    sprint: int | None
    epic: str | None
    component: str | None
    resolution: str | None
    duplicate_of: str | None
    created_age: int  # days before now
    updated_age: int
    due: str | None = None
    labels: list[str] = field(default_factory=list)


def _slug_email(name: str) -> str:
    first, last = name.split(" ", 1)
    clean = "".join(ch for ch in f"{first}.{last}".lower() if ch.isalnum() or ch == ".")
    return f"{clean}@{COMPANY_DOMAIN}"


def seed_data(db: sqlite3.Connection, rng: Rng) -> None:
    """Fill every table of ``schema.sql`` from ``rng``."""
    r_users, r_proj, r_issue, r_hist = rng.child("users"), rng.child("projects"), rng.child("issues"), rng.child("history")

    # -- people ---------------------------------------------------------------------------------------------
    names: set[str] = set()
    users: list[tuple[str, str, str, str, str, int, str]] = []
    used_ids: set[str] = set()
    roles = ["admin"] * N_ADMINS + ["lead"] * N_LEADS + ["member"] * N_MEMBERS
    for role in roles:
        name = fresh(r_users, names, lambda r: " ".join(full_name(r)))
        uid = fresh(r_users, used_ids, lambda r: f"u_{r.randint(1000, 9999)}")
        # People who left keep their account (and their issues): about one member in twelve.
        active = 0 if role == "member" and pct(r_users, 8) else 1
        created = days_ago(r_users.randint(200, 2400), r_users.randint(0, 86399))
        users.append((uid, name, _slug_email(name), role, r_users.choice(vocab.TITLES[role]), active, created))
    db.executemany("INSERT INTO users VALUES (?, ?, ?, ?, ?, ?, ?)", users)
    admins = [u[0] for u in users if u[3] == "admin"]
    leads = [u[0] for u in users if u[3] == "lead"]
    members = [u[0] for u in users if u[3] == "member"]
    is_active = {u[0]: bool(u[5]) for u in users}

    # -- projects, members, components -----------------------------------------------------------------------
    project_rows, member_rows, component_rows = [], [], []
    project_members: dict[str, list[str]] = {}
    components: dict[str, list[str]] = {}
    pool = list(members)
    r_proj.shuffle(pool)
    extra_leads = leads[len(vocab.PROJECTS):]
    for i, (key, name, desc, comps) in enumerate(vocab.PROJECTS):
        lead = leads[i]
        wip = 5 if key in AT_WIP_LIMIT else r_proj.randint(5, 8)
        project_rows.append((key, name, desc, lead, wip, r_proj.randint(3, 5), days_ago(r_proj.randint(700, 1500))))
        # Each member has a home project; a third also work in a second one.
        team = [lead, *pool[i::len(vocab.PROJECTS)]]
        team += [m for m in r_proj.sample(members, 6) if m not in team]
        if extra_leads and r_proj.below(2) == 0:
            team.append(extra_leads[i % len(extra_leads)])
        if r_proj.below(3) == 0:
            team.append(admins[i % len(admins)])
        project_members[key] = team
        for uid in team:
            member_rows.append((key, uid, days_ago(r_proj.randint(30, 600))))
        components[key] = [f"{key}-{c}" for c in comps]
        component_rows += [(f"{key}-{c}", key, c) for c in comps]
    db.executemany("INSERT INTO projects VALUES (?, ?, ?, ?, ?, ?, ?)", project_rows)
    db.executemany("INSERT INTO project_members VALUES (?, ?, ?)", member_rows)
    db.executemany("INSERT INTO components VALUES (?, ?, ?)", component_rows)
    db.executemany("INSERT INTO workflows VALUES (?, ?, ?)",
                   [(t, a, b) for t, flow in WORKFLOWS.items() for a, b in flow])  # fmt: skip
    db.executemany("INSERT INTO transition_requirements VALUES (?, ?, ?)",
                   [(s, req, text) for s, reqs in REQUIREMENTS.items() for req, text in reqs])  # fmt: skip

    # -- sprints and issues, project by project ---------------------------------------------------------------
    sprint_rows: list[tuple[object, ...]] = []
    issues: list[_Issue] = []
    sprint_id = 100
    for key, _name, _desc, _comps in vocab.PROJECTS:
        project = next(p for p in project_rows if p[0] == key)
        lead, wip, wip_review = str(project[3]), int(project[4]), int(project[5])  # type: ignore[call-overload]
        team = project_members[key]
        active_team = [u for u in team if is_active[u]]
        number = 0
        summaries: set[str] = set()

        def new_issue(itype: str, status: str, sprint: int | None, age: int, *, key: str = key,
                      team: list[str] = team, active_team: list[str] = active_team,
                      summaries: set[str] = summaries) -> _Issue:
            nonlocal number
            number += 1
            summary = fresh(r_issue, summaries, lambda r, t=itype: _summary(r, t))
            reporter = r_issue.choice(team)
            assignee: str | None = None
            if status in ("in_progress", "in_review") or (status != "backlog" and pct(r_issue, 85)) \
                    or pct(r_issue, 40):  # fmt: skip
                assignee = r_issue.choice(active_team)
                # Someone who has since left, still assigned to open work.
                if status not in ("in_progress", "in_review") and pct(r_issue, 5):
                    gone = [u for u in team if not is_active[u]]
                    assignee = r_issue.choice(gone) if gone else assignee
            points: int | None = r_issue.choice(POINTS)
            if itype == "epic" or (sprint is None and pct(r_issue, 35)) or (itype != "story" and pct(r_issue, 15)):
                points = None  # epics and much of the backlog are not estimated
            resolution = None
            if status in ("done", "closed"):
                resolution = "fixed" if itype == "bug" else "done"
            updated = r_issue.randint(0, max(0, age - 1))
            comp = r_issue.choice(components[key]) if pct(r_issue, 70) else None
            issue = _Issue(f"{key}-{number}", key, number, itype, summary, status, r_issue.choice(_PRIORITY_DRAW),
                           reporter, assignee, points, sprint, None, comp, resolution, None, age, updated)
            if pct(r_issue, 12) and status not in ("done", "closed"):
                issue.due = day_offset(TODAY, r_issue.randint(-20, 60))
            issue.labels = r_issue.sample(list(vocab.LABELS), r_issue.randint(0, 3))
            issues.append(issue)
            return issue

        # Epics first (lower numbers): some never get children.
        epics = [new_issue("epic", r_issue.choice(("backlog", "in_progress", "in_progress", "done")), None,
                           r_issue.randint(120, 400)) for _ in range(r_issue.randint(9, 13))]  # fmt: skip
        live_epics = epics[3:]

        # Closed sprints: most work finished, some left unfinished in the sprint (never moved on).
        n_closed = r_issue.randint(5, 8)
        first_start = TODAY if key in NO_ACTIVE else day_offset(TODAY, -r_issue.randint(2, 10))
        starts = [day_offset(first_start, -14 * (n_closed - i)) for i in range(n_closed)]
        for n, start in enumerate(starts, 1):
            sprint_id += 1
            cap = r_issue.randint(20, 40)
            sprint_rows.append((sprint_id, key, f"{key} Sprint {n}", "closed", start, day_offset(start, 13), cap,
                                r_issue.choice(vocab.SPRINT_GOALS)))  # fmt: skip
            age0 = _age(start) + r_issue.randint(3, 30)
            used = 0
            while used < cap - 3:
                itype = r_issue.choice(("story", "story", "bug", "task"))
                status = r_issue.choice(("done", "done", "done", "closed")) if pct(r_issue, 88) \
                    else "todo"  # left unfinished, never moved on  # fmt: skip
                issue = new_issue(itype, status, sprint_id, age0)
                if issue.points is None and itype == "story":
                    issue.points = 3
                used += issue.points or 0
                if status in ("done", "closed"):
                    issue.updated_age = max(0, _age(day_offset(start, 13)) + r_issue.randint(0, 3))
        # The active sprint: committed points fit the capacity, in-progress work within the WIP limits.
        n = n_closed + 1
        if key not in NO_ACTIVE:
            sprint_id += 1
            cap = r_issue.randint(28, 45)
            sprint_rows.append((sprint_id, key, f"{key} Sprint {n}", "active", first_start, day_offset(first_start, 13),
                                cap, r_issue.choice(vocab.SPRINT_GOALS)))  # fmt: skip
            in_progress_target = wip if key in AT_WIP_LIMIT else r_issue.randint(1, wip - 2)
            plan = ["in_progress"] * in_progress_target + ["in_review"] * r_issue.randint(1, wip_review - 1)
            plan += ["done"] * r_issue.randint(1, 3) + ["todo"] * 12
            used = 0
            slack = r_issue.randint(1, 9)
            for status in plan:
                itype = r_issue.choice(("story", "story", "bug", "task"))
                issue = new_issue(itype, status, sprint_id, _age(first_start) + r_issue.randint(2, 40))
                if itype == "story" and issue.points is None:
                    issue.points = 2
                if used + (issue.points or 0) > cap - slack:
                    issue.points = None if itype != "story" else 1
                    if used + (issue.points or 0) > cap - slack:
                        issue.sprint, issue.status, issue.resolution = None, "todo", None  # did not fit: backlog
                        continue
                used += issue.points or 0
            n += 1
        # Planned sprints: the next one partly filled, the one after empty.
        for k in range(2):
            sprint_id += 1
            start = day_offset(first_start, 14 * (k + (0 if key in NO_ACTIVE else 1)))
            cap = r_issue.randint(25, 40)
            sprint_rows.append((sprint_id, key, f"{key} Sprint {n}", "planned", start, day_offset(start, 13), cap,
                                r_issue.choice(vocab.SPRINT_GOALS)))  # fmt: skip
            n += 1
            if k == 0:
                used = 0
                while used < cap * 6 // 10:
                    itype = r_issue.choice(("story", "bug", "task"))
                    issue = new_issue(itype, "todo", sprint_id, r_issue.randint(5, 60))
                    if itype == "story" and issue.points is None:
                        issue.points = 3
                    used += issue.points or 0

        # The backlog: triage, stale ideas, and a few issues closed without being done.
        for _ in range(r_issue.randint(110, 150)):
            itype = r_issue.choice(("story", "bug", "bug", "task"))
            status = r_issue.choice(("backlog", "backlog", "backlog", "todo"))
            age = r_issue.randint(3, 500)
            issue = new_issue(itype, status, None, age)
            if pct(r_issue, 30):  # stale: nobody touched it for months
                issue.updated_age = max(90, min(age, issue.updated_age + 120))
            if pct(r_issue, 6):
                issue.status = "closed"
                issue.resolution = r_issue.choice(("wont_do", "cannot_reproduce")) if itype == "bug" else "wont_do"
        # The same bug reported twice: a newer report by someone else with the same summary; some linked already.
        project_issues = [i for i in issues if i.project == key]
        bugs = [i for i in project_issues if i.itype == "bug" and i.status in ("backlog", "todo") and i.sprint is None]
        for j, original in enumerate(r_issue.sample(bugs, min(len(bugs), 7))):
            dup = new_issue("bug", "backlog", None, r_issue.randint(1, max(1, original.created_age - 1)))
            summaries.discard(dup.summary)
            dup.summary = original.summary
            others = [u for u in team if u != original.reporter]
            dup.reporter = r_issue.choice(others)
            if j < 2:
                dup.status, dup.resolution, dup.duplicate_of = "closed", "duplicate", original.key
        # Children of epics: most issues of the project, never those of the first three epics.
        for issue in project_issues:
            if issue.itype != "epic" and pct(r_issue, 45):
                issue.epic = r_issue.choice(live_epics).key
        # Assignees of in-progress work are active members (rule R3/R8); work in progress never ages past the sprint.
        for issue in project_issues:
            if issue.status in ("in_progress", "in_review") and (issue.assignee is None or not is_active[issue.assignee]):
                issue.assignee = r_issue.choice(active_team)
    sprint_rows.sort(key=lambda row: int(row[0]))  # type: ignore[call-overload]
    db.executemany("INSERT INTO sprints VALUES (?, ?, ?, ?, ?, ?, ?, ?)", sprint_rows)
    db.executemany(
        "INSERT INTO issues VALUES (?, ?, ?, ?, ?, '', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [(i.key, i.project, i.number, i.itype, i.summary, i.status, i.priority, i.reporter, i.assignee, i.points,
          i.sprint, i.epic, i.component, i.resolution, i.duplicate_of, days_ago(i.created_age, 3600),
          days_ago(min(i.updated_age, i.created_age)), i.due) for i in issues],
    )  # fmt: skip
    db.executemany("INSERT INTO labels VALUES (?, ?)", [(i.key, lab) for i in issues for lab in i.labels])
    _history(db, r_hist, issues, project_members, is_active)


_PRIORITY_DRAW = ("lowest", "low", "low", "medium", "medium", "medium", "medium", "high", "high", "highest")


def _age(day: str) -> int:
    """Whole days from ``day`` to the world's clock."""
    from datetime import date

    return (date.fromisoformat(TODAY) - date.fromisoformat(day)).days


def _summary(r: Rng, itype: str) -> str:
    if itype == "bug":
        return r.choice(vocab.BUG_SYMPTOMS).format(a=r.choice(vocab.BUG_ACTIONS), s=r.choice(vocab.SCREENS))
    if itype == "story":
        return f"As {r.choice(vocab.PERSONAS)}, I can {r.choice(vocab.CAPABILITIES)}"
    if itype == "task":
        return r.choice(vocab.TASK_TEMPLATES).format(d=r.choice(vocab.DEPENDENCIES))
    return f"{r.choice(vocab.EPIC_THEMES)} {r.randint(1, 9)}"


def _history(db: sqlite3.Connection, r: Rng, issues: list[_Issue], project_members: dict[str, list[str]],
             is_active: dict[str, bool]) -> None:  # fmt: skip
    """Watchers, comments and time logs; time stays under 8 hours a person a day except for a few crunch days."""
    watcher_rows, comment_rows, log_rows = [], [], []
    per_day: dict[tuple[str, str], int] = {}
    for issue in issues:
        team = project_members[issue.project]
        watchers = [issue.reporter] + ([issue.assignee] if issue.assignee else [])
        watchers += [u for u in r.sample(team, r.randint(0, 2)) if u not in watchers]
        watcher_rows += [(issue.key, u) for u in dict.fromkeys(watchers)]
        if issue.status != "backlog" or pct(r, 25):
            for _ in range(r.randint(0, 3)):
                age = r.randint(0, max(0, issue.created_age - 1))
                comment_rows.append((issue.key, r.choice(team), r.choice(vocab.COMMENTS), days_ago(age, r.randint(0, 80000))))
        if issue.assignee and issue.status in ("in_progress", "in_review", "done", "closed") and issue.itype != "epic":
            for _ in range(r.randint(1, 4)):
                age = r.randint(1, min(60, max(1, issue.created_age)))
                day = day_offset(TODAY, -age)
                minutes = 15 * r.randint(2, 24)
                if per_day.get((issue.assignee, day), 0) + minutes > 8 * 60:
                    continue
                per_day[(issue.assignee, day)] = per_day.get((issue.assignee, day), 0) + minutes
                log_rows.append((issue.key, issue.assignee, day, minutes, r.choice(vocab.LOG_NOTES), days_ago(age - 1, 1800)))
    # Crunch days: a few people logged 19-23 hours on one recent day (what R7's daily cap is for).
    busy = sorted({row[1] for row in log_rows if is_active[row[1]]})
    for uid in r.sample(busy, min(len(busy), 25)):
        theirs = [row for row in log_rows if row[1] == uid]
        day = day_offset(TODAY, -r.randint(1, 6))
        have = per_day.get((uid, day), 0)
        target = 60 * r.randint(19, 23)
        if have < target:
            log_rows.append((theirs[0][0], uid, day, target - have, "release night", days_ago(0, 3600)))
    db.executemany("INSERT INTO watchers VALUES (?, ?)", watcher_rows)
    db.executemany("INSERT INTO comments (issue_key, author_id, body, created_at) VALUES (?, ?, ?, ?)", comment_rows)
    db.executemany("INSERT INTO time_logs (issue_key, user_id, day, minutes, note, created_at) VALUES (?, ?, ?, ?, ?, ?)",
                   log_rows)  # fmt: skip
