-- The helpdesk world: a B2B SaaS company's support desk (customer organisations, their contacts, support
-- agents, tickets with comments and tags, knowledge-base articles, invoices and credits).
-- Money is stored in integer cents (exact); tools present it as decimal dollars.
-- Dates are ISO 8601 strings in UTC; the world's clock is NOW in common.py.

CREATE TABLE sla_policies (
    plan        TEXT NOT NULL CHECK (plan IN ('free', 'team', 'business', 'enterprise')),
    priority    TEXT NOT NULL CHECK (priority IN ('low', 'normal', 'high', 'urgent')),
    first_response_hours INTEGER NOT NULL,
    resolution_hours     INTEGER NOT NULL,
    PRIMARY KEY (plan, priority)
);

CREATE TABLE agents (
    agent_id    TEXT PRIMARY KEY,          -- e.g. 'AG-104'
    name        TEXT NOT NULL,
    email       TEXT NOT NULL UNIQUE,
    tier        INTEGER NOT NULL CHECK (tier IN (1, 2, 3)),
    is_manager  INTEGER NOT NULL DEFAULT 0 CHECK (is_manager IN (0, 1))
);

CREATE TABLE organizations (
    org_id      TEXT PRIMARY KEY,          -- e.g. 'ORG-20417'
    name        TEXT NOT NULL UNIQUE,      -- short name the customer uses, e.g. 'Cedar Analytics'
    legal_name  TEXT NOT NULL,
    domain      TEXT NOT NULL,
    plan        TEXT NOT NULL CHECK (plan IN ('free', 'team', 'business', 'enterprise')),
    plan_status TEXT NOT NULL CHECK (plan_status IN ('active', 'expired')),
    plan_renews_at TEXT NOT NULL,          -- renewal date (past for expired plans)
    seats       INTEGER NOT NULL CHECK (seats > 0),
    region      TEXT NOT NULL CHECK (region IN ('us-east', 'us-west', 'eu-central', 'ap-southeast')),
    industry    TEXT NOT NULL,
    account_manager_id TEXT REFERENCES agents(agent_id),  -- null for free plans
    created_at  TEXT NOT NULL
);

CREATE TABLE contacts (
    contact_id  TEXT PRIMARY KEY,          -- e.g. 'CT-104382'
    org_id      TEXT NOT NULL REFERENCES organizations(org_id),
    first_name  TEXT NOT NULL,
    last_name   TEXT NOT NULL,
    email       TEXT NOT NULL UNIQUE,      -- stored as typed at sign-up (duplicates differ in case or a typo)
    phone       TEXT,                      -- optional
    role        TEXT NOT NULL CHECK (role IN ('admin', 'member', 'billing')),
    active      INTEGER NOT NULL DEFAULT 1 CHECK (active IN (0, 1)),
    created_at  TEXT NOT NULL
);
CREATE INDEX contacts_org ON contacts(org_id);
CREATE INDEX contacts_email ON contacts(email COLLATE NOCASE);

CREATE TABLE tickets (
    ticket_id   INTEGER PRIMARY KEY,       -- the number in the customer's e-mail subject, e.g. 58213
    org_id      TEXT NOT NULL REFERENCES organizations(org_id),
    requester_id TEXT NOT NULL REFERENCES contacts(contact_id),
    subject     TEXT NOT NULL,
    description TEXT NOT NULL,
    product_area TEXT NOT NULL,
    status      TEXT NOT NULL CHECK (status IN ('new', 'open', 'pending', 'on_hold', 'solved', 'closed')),
    priority    TEXT NOT NULL CHECK (priority IN ('low', 'normal', 'high', 'urgent')),
    channel     TEXT NOT NULL CHECK (channel IN ('email', 'web', 'chat', 'phone', 'api')),
    tier        INTEGER NOT NULL DEFAULT 1 CHECK (tier IN (1, 2, 3)),
    assignee_id TEXT REFERENCES agents(agent_id),  -- null: not assigned yet
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL,
    first_response_due TEXT NOT NULL,
    first_response_at  TEXT,
    resolution_due     TEXT NOT NULL,
    solved_at   TEXT,
    closed_at   TEXT,
    merged_into INTEGER REFERENCES tickets(ticket_id),
    follow_up_of INTEGER REFERENCES tickets(ticket_id)
);
CREATE INDEX tickets_org ON tickets(org_id);
CREATE INDEX tickets_requester ON tickets(requester_id);

CREATE TABLE ticket_comments (
    comment_id  INTEGER PRIMARY KEY,
    ticket_id   INTEGER NOT NULL REFERENCES tickets(ticket_id),
    author_kind TEXT NOT NULL CHECK (author_kind IN ('agent', 'contact', 'system')),
    author_id   TEXT,
    public      INTEGER NOT NULL CHECK (public IN (0, 1)),
    body        TEXT NOT NULL,
    created_at  TEXT NOT NULL
);
CREATE INDEX ticket_comments_ticket ON ticket_comments(ticket_id);

CREATE TABLE tags (
    tag_id      INTEGER PRIMARY KEY,
    name        TEXT NOT NULL UNIQUE
);

CREATE TABLE ticket_tags (
    ticket_id   INTEGER NOT NULL REFERENCES tickets(ticket_id),
    tag_id      INTEGER NOT NULL REFERENCES tags(tag_id),
    PRIMARY KEY (ticket_id, tag_id)
);

CREATE TABLE macros (
    macro_id    INTEGER PRIMARY KEY,
    name        TEXT NOT NULL UNIQUE,
    actions     TEXT NOT NULL,             -- JSON list of actions, e.g. [{"set": "status", "to": "pending"}]
    active      INTEGER NOT NULL DEFAULT 1 CHECK (active IN (0, 1))
);

CREATE TABLE kb_articles (
    article_id  TEXT PRIMARY KEY,          -- e.g. 'KB-1042'
    title       TEXT NOT NULL,
    body        TEXT NOT NULL,
    product_area TEXT NOT NULL,
    status      TEXT NOT NULL CHECK (status IN ('published', 'draft')),
    updated_at  TEXT NOT NULL
);

CREATE TABLE invoices (
    invoice_id  TEXT PRIMARY KEY,          -- e.g. 'INV-2026-004211', printed on the invoice
    org_id      TEXT NOT NULL REFERENCES organizations(org_id),
    period      TEXT NOT NULL,             -- billing month 'YYYY-MM'
    amount_cents INTEGER NOT NULL CHECK (amount_cents >= 0),
    status      TEXT NOT NULL CHECK (status IN ('paid', 'open', 'void')),
    issued_at   TEXT NOT NULL,
    due_at      TEXT NOT NULL
);
CREATE INDEX invoices_org ON invoices(org_id);

CREATE TABLE credits (
    credit_id   INTEGER PRIMARY KEY,
    org_id      TEXT NOT NULL REFERENCES organizations(org_id),
    invoice_id  TEXT NOT NULL REFERENCES invoices(invoice_id),
    amount_cents INTEGER NOT NULL CHECK (amount_cents > 0),
    reason      TEXT NOT NULL,
    requested_by TEXT REFERENCES contacts(contact_id),
    approved_by TEXT REFERENCES agents(agent_id),  -- a manager, for credits above the approval threshold
    created_at  TEXT NOT NULL
);
CREATE INDEX credits_invoice ON credits(invoice_id);

CREATE TABLE handoffs (
    handoff_id  INTEGER PRIMARY KEY,
    contact_id  TEXT REFERENCES contacts(contact_id),
    ticket_id   INTEGER REFERENCES tickets(ticket_id),
    summary     TEXT NOT NULL,
    created_at  TEXT NOT NULL
);
