-- The projects world: a software company's issue tracker (projects, issues, workflows, sprints, time).
-- Dates are ISO 8601 strings in UTC; days (time logs, due dates, sprint bounds) are 'YYYY-MM-DD'.
-- The world's clock (now) is fixed: see NOW in common.py. Estimates are story points (integers).

CREATE TABLE users (
    user_id     TEXT PRIMARY KEY,          -- internal id, e.g. 'u_4821' (a person does not know it)
    full_name   TEXT NOT NULL UNIQUE,      -- what teammates call each other by
    email       TEXT NOT NULL UNIQUE,
    role        TEXT NOT NULL CHECK (role IN ('member', 'lead', 'admin')),
    title       TEXT NOT NULL,             -- job title, e.g. 'Backend Engineer'
    active      INTEGER NOT NULL DEFAULT 1 CHECK (active IN (0, 1)),  -- 0: left the company, account kept
    created_at  TEXT NOT NULL
);

CREATE TABLE projects (
    project_key TEXT PRIMARY KEY,          -- 'APP'; prefixes every issue key of the project
    name        TEXT NOT NULL UNIQUE,
    description TEXT NOT NULL,
    lead_id     TEXT NOT NULL REFERENCES users(user_id),
    wip_in_progress INTEGER NOT NULL CHECK (wip_in_progress > 0),  -- most issues 'in_progress' at once
    wip_in_review   INTEGER NOT NULL CHECK (wip_in_review > 0),    -- most issues 'in_review' at once
    created_at  TEXT NOT NULL
);

CREATE TABLE project_members (
    project_key TEXT NOT NULL REFERENCES projects(project_key),
    user_id     TEXT NOT NULL REFERENCES users(user_id),
    joined_at   TEXT NOT NULL,
    PRIMARY KEY (project_key, user_id)
);
CREATE INDEX project_members_user ON project_members(user_id);

CREATE TABLE components (
    component_id TEXT PRIMARY KEY,         -- e.g. 'APP-billing'
    project_key  TEXT NOT NULL REFERENCES projects(project_key),
    name         TEXT NOT NULL,
    UNIQUE (project_key, name)
);

-- Which status changes each issue type allows (policy R1); the same for every project.
CREATE TABLE workflows (
    issue_type  TEXT NOT NULL CHECK (issue_type IN ('bug', 'story', 'task', 'epic')),
    from_status TEXT NOT NULL,
    to_status   TEXT NOT NULL,
    PRIMARY KEY (issue_type, from_status, to_status)
);

-- What an issue needs before it may enter a status (policy R3), as the workflow screen shows it.
CREATE TABLE transition_requirements (
    to_status   TEXT NOT NULL,
    requirement TEXT NOT NULL,             -- 'assignee', 'resolution'
    description TEXT NOT NULL,
    PRIMARY KEY (to_status, requirement)
);

CREATE TABLE sprints (
    sprint_id   INTEGER PRIMARY KEY,
    project_key TEXT NOT NULL REFERENCES projects(project_key),
    name        TEXT NOT NULL,             -- 'APP Sprint 14'
    state       TEXT NOT NULL CHECK (state IN ('planned', 'active', 'closed')),
    start_date  TEXT NOT NULL,
    end_date    TEXT NOT NULL,
    capacity_points INTEGER NOT NULL CHECK (capacity_points > 0),
    goal        TEXT NOT NULL DEFAULT '',
    UNIQUE (project_key, name)
);
CREATE INDEX sprints_project ON sprints(project_key);

CREATE TABLE issues (
    issue_key   TEXT PRIMARY KEY,          -- 'APP-123'
    project_key TEXT NOT NULL REFERENCES projects(project_key),
    number      INTEGER NOT NULL,
    issue_type  TEXT NOT NULL CHECK (issue_type IN ('bug', 'story', 'task', 'epic')),
    summary     TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    status      TEXT NOT NULL CHECK (status IN ('backlog', 'todo', 'in_progress', 'in_review', 'done', 'closed')),
    priority    TEXT NOT NULL CHECK (priority IN ('lowest', 'low', 'medium', 'high', 'highest')),
    reporter_id TEXT NOT NULL REFERENCES users(user_id),
    assignee_id TEXT REFERENCES users(user_id),         -- NULL: unassigned
    story_points INTEGER CHECK (story_points IS NULL OR story_points >= 0),  -- NULL: not estimated
    sprint_id   INTEGER REFERENCES sprints(sprint_id),  -- NULL: in the backlog
    epic_key    TEXT REFERENCES issues(issue_key),      -- the epic this issue belongs to
    component_id TEXT REFERENCES components(component_id),
    resolution  TEXT CHECK (resolution IS NULL OR resolution IN
                  ('fixed', 'done', 'wont_do', 'duplicate', 'cannot_reproduce')),
    duplicate_of TEXT REFERENCES issues(issue_key),
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL,
    due_date    TEXT,
    UNIQUE (project_key, number)
);
CREATE INDEX issues_project_status ON issues(project_key, status);
CREATE INDEX issues_assignee ON issues(assignee_id);
CREATE INDEX issues_reporter ON issues(reporter_id);
CREATE INDEX issues_sprint ON issues(sprint_id);
CREATE INDEX issues_epic ON issues(epic_key);

CREATE TABLE labels (
    issue_key   TEXT NOT NULL REFERENCES issues(issue_key),
    label       TEXT NOT NULL,
    PRIMARY KEY (issue_key, label)
);

CREATE TABLE watchers (
    issue_key   TEXT NOT NULL REFERENCES issues(issue_key),
    user_id     TEXT NOT NULL REFERENCES users(user_id),
    PRIMARY KEY (issue_key, user_id)
);
CREATE INDEX watchers_user ON watchers(user_id);

CREATE TABLE comments (
    comment_id  INTEGER PRIMARY KEY,
    issue_key   TEXT NOT NULL REFERENCES issues(issue_key),
    author_id   TEXT NOT NULL REFERENCES users(user_id),
    body        TEXT NOT NULL,
    created_at  TEXT NOT NULL
);
CREATE INDEX comments_issue ON comments(issue_key);

CREATE TABLE time_logs (
    time_log_id INTEGER PRIMARY KEY,
    issue_key   TEXT NOT NULL REFERENCES issues(issue_key),
    user_id     TEXT NOT NULL REFERENCES users(user_id),
    day         TEXT NOT NULL,             -- the day worked, 'YYYY-MM-DD'
    minutes     INTEGER NOT NULL CHECK (minutes > 0),
    note        TEXT NOT NULL DEFAULT '',
    created_at  TEXT NOT NULL
);
CREATE INDEX time_logs_issue ON time_logs(issue_key);
CREATE INDEX time_logs_user_day ON time_logs(user_id, day);

-- Requests handed to a tracker administrator (what the tools cannot do: reactivate an account, move an issue
-- between projects, restore deleted work).
CREATE TABLE admin_requests (
    request_id  INTEGER PRIMARY KEY,
    user_id     TEXT NOT NULL REFERENCES users(user_id),
    issue_key   TEXT REFERENCES issues(issue_key),
    summary     TEXT NOT NULL,
    status      TEXT NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'done')),
    created_at  TEXT NOT NULL
);
