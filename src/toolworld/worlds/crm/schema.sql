-- The crm world: a software company's sales CRM (reps and managers, territories, accounts, contacts, leads,
-- opportunities, activities, products and quotes).
-- Money is stored in integer cents (exact); tools present it as decimal dollars.
-- Dates are ISO 8601 strings in UTC; the world's clock is fixed (NOW in common.py).

CREATE TABLE territories (
    territory_id TEXT PRIMARY KEY,          -- e.g. 'T-WEST'
    name        TEXT NOT NULL UNIQUE
);

CREATE TABLE territory_states (
    state       TEXT PRIMARY KEY,           -- two-letter US state code; each state is in exactly one territory
    territory_id TEXT NOT NULL REFERENCES territories(territory_id)
);

CREATE TABLE users (
    user_id     TEXT PRIMARY KEY,           -- internal id, e.g. 'u_1042' (a rep does not quote it)
    first_name  TEXT NOT NULL,
    last_name   TEXT NOT NULL,
    email       TEXT NOT NULL UNIQUE,       -- work e-mail; how a rep is identified
    role        TEXT NOT NULL CHECK (role IN ('rep', 'manager', 'admin')),
    territory_id TEXT REFERENCES territories(territory_id),  -- NULL for admins
    manager_id  TEXT REFERENCES users(user_id),              -- a rep's manager
    active      INTEGER NOT NULL DEFAULT 1 CHECK (active IN (0, 1))
);
CREATE INDEX users_territory ON users(territory_id);

CREATE TABLE accounts (
    account_id  TEXT PRIMARY KEY,           -- e.g. 'ACC-10042'
    name        TEXT NOT NULL,              -- company name, e.g. 'Northwind Labs Inc.'
    industry    TEXT NOT NULL,
    size        TEXT NOT NULL,              -- employee band, e.g. '51-200'
    city        TEXT NOT NULL,
    state       TEXT NOT NULL REFERENCES territory_states(state),
    domain      TEXT NOT NULL,
    owner_id    TEXT REFERENCES users(user_id),  -- NULL: nobody owns the account yet
    created_at  TEXT NOT NULL
);
CREATE INDEX accounts_owner ON accounts(owner_id);
CREATE INDEX accounts_name ON accounts(name);

CREATE TABLE contacts (
    contact_id  TEXT PRIMARY KEY,           -- e.g. 'CON-20417'
    account_id  TEXT NOT NULL REFERENCES accounts(account_id),
    first_name  TEXT NOT NULL,
    last_name   TEXT NOT NULL,
    title       TEXT,                       -- NULL when unknown
    email       TEXT NOT NULL,
    phone       TEXT,                       -- NULL when unknown
    do_not_contact INTEGER NOT NULL DEFAULT 0 CHECK (do_not_contact IN (0, 1))
);
CREATE INDEX contacts_account ON contacts(account_id);
CREATE INDEX contacts_email ON contacts(email);

CREATE TABLE leads (
    lead_id     TEXT PRIMARY KEY,           -- e.g. 'LEAD-30112'
    first_name  TEXT NOT NULL,
    last_name   TEXT NOT NULL,
    email       TEXT NOT NULL,              -- as typed in: duplicates may differ in case or by a typo
    company     TEXT NOT NULL,
    title       TEXT,
    state       TEXT NOT NULL REFERENCES territory_states(state),
    source      TEXT NOT NULL CHECK (source IN ('web', 'referral', 'event', 'partner', 'outbound', 'import')),
    status      TEXT NOT NULL CHECK (status IN ('new', 'working', 'qualified', 'disqualified', 'converted', 'merged')),
    owner_id    TEXT NOT NULL REFERENCES users(user_id),
    created_at  TEXT NOT NULL,
    merged_into TEXT REFERENCES leads(lead_id),           -- set when merged into another lead
    converted_contact_id TEXT REFERENCES contacts(contact_id)  -- set when converted
);
CREATE INDEX leads_owner ON leads(owner_id);
CREATE INDEX leads_email ON leads(email COLLATE NOCASE);

CREATE TABLE opportunities (
    opportunity_id TEXT PRIMARY KEY,        -- e.g. 'OPP-40213'
    account_id  TEXT NOT NULL REFERENCES accounts(account_id),
    owner_id    TEXT NOT NULL REFERENCES users(user_id),
    name        TEXT NOT NULL UNIQUE,       -- e.g. 'Northwind Labs - Analytics Suite 2026'
    stage       TEXT NOT NULL CHECK (stage IN ('prospecting', 'qualification', 'proposal', 'negotiation',
                                               'closed_won', 'closed_lost')),
    amount_cents INTEGER NOT NULL CHECK (amount_cents >= 0),
    close_date  TEXT NOT NULL,              -- YYYY-MM-DD (expected, or actual once closed)
    probability INTEGER NOT NULL CHECK (probability BETWEEN 0 AND 100),
    contact_id  TEXT REFERENCES contacts(contact_id),     -- the primary contact role
    loss_reason TEXT,
    created_at  TEXT NOT NULL
);
CREATE INDEX opportunities_owner ON opportunities(owner_id);
CREATE INDEX opportunities_account ON opportunities(account_id);

CREATE TABLE activities (
    activity_id INTEGER PRIMARY KEY,
    kind        TEXT NOT NULL CHECK (kind IN ('call', 'email', 'meeting', 'note')),
    subject     TEXT NOT NULL,
    contact_id  TEXT REFERENCES contacts(contact_id),
    account_id  TEXT NOT NULL REFERENCES accounts(account_id),
    opportunity_id TEXT REFERENCES opportunities(opportunity_id),
    user_id     TEXT NOT NULL REFERENCES users(user_id),
    created_at  TEXT NOT NULL
);
CREATE INDEX activities_account ON activities(account_id);

CREATE TABLE products (
    product_id  TEXT PRIMARY KEY,           -- e.g. 'PRD-104'
    name        TEXT NOT NULL UNIQUE,
    family      TEXT NOT NULL CHECK (family IN ('license', 'service', 'support')),
    list_price_cents INTEGER NOT NULL CHECK (list_price_cents > 0),  -- the price book: per unit per year
    active      INTEGER NOT NULL DEFAULT 1 CHECK (active IN (0, 1))
);

CREATE TABLE quotes (
    quote_id    TEXT PRIMARY KEY,           -- e.g. 'Q-50231'; printed on the quote document
    opportunity_id TEXT NOT NULL REFERENCES opportunities(opportunity_id),
    status      TEXT NOT NULL CHECK (status IN ('draft', 'sent', 'accepted', 'rejected')),
    created_at  TEXT NOT NULL,
    expires_at  TEXT NOT NULL,              -- created_at + 30 days
    sent_to_contact_id TEXT REFERENCES contacts(contact_id)
);
CREATE INDEX quotes_opportunity ON quotes(opportunity_id);

CREATE TABLE quote_lines (
    quote_id    TEXT NOT NULL REFERENCES quotes(quote_id),
    line_no     INTEGER NOT NULL,
    product_id  TEXT NOT NULL REFERENCES products(product_id),
    quantity    INTEGER NOT NULL CHECK (quantity > 0),
    unit_price_cents INTEGER NOT NULL,      -- list price when the line was added
    discount_percent INTEGER NOT NULL DEFAULT 0 CHECK (discount_percent BETWEEN 0 AND 100),
    PRIMARY KEY (quote_id, line_no)
);

CREATE TABLE escalations (
    escalation_id INTEGER PRIMARY KEY,
    user_id     TEXT NOT NULL REFERENCES users(user_id),
    summary     TEXT NOT NULL,
    opportunity_id TEXT REFERENCES opportunities(opportunity_id),
    status      TEXT NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'closed')),
    created_at  TEXT NOT NULL
);
