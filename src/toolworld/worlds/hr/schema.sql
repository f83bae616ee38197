-- The hr world: one company's people, org chart, leave, pay, checklists and documents.
-- Money is stored in integer cents (exact); tools present it as decimal dollars.
-- Dates are 'YYYY-MM-DD' (timestamps ISO 8601 UTC). The world's clock is fixed: see NOW in common.py.

CREATE TABLE departments (
    department_id TEXT PRIMARY KEY,        -- e.g. 'D03'
    name        TEXT NOT NULL UNIQUE,      -- e.g. 'Engineering'
    head_id     TEXT                       -- employee id of the department head (NULL: vacant)
);

CREATE TABLE employees (
    employee_id TEXT PRIMARY KEY,          -- 'E' + five digits, e.g. 'E10482' (printed on the badge)
    first_name  TEXT NOT NULL,
    last_name   TEXT NOT NULL,
    email       TEXT NOT NULL,             -- work email; a rehire's old record keeps the same address
    phone       TEXT,                      -- NULL: never given
    department_id TEXT NOT NULL REFERENCES departments(department_id),
    manager_id  TEXT REFERENCES employees(employee_id),  -- NULL for the CEO and for most contractors
    title       TEXT NOT NULL,
    level       TEXT NOT NULL,             -- 'L1' .. 'L8'
    location    TEXT NOT NULL,
    employment_type TEXT NOT NULL CHECK (employment_type IN ('employee', 'contractor')),
    role        TEXT NOT NULL CHECK (role IN ('employee', 'manager', 'hr')),
    status      TEXT NOT NULL CHECK (status IN ('active', 'on_leave', 'terminated')),
    hire_date   TEXT NOT NULL,
    termination_date TEXT,                 -- past: left; future: offboarding under way
    rehire_of   TEXT REFERENCES employees(employee_id)   -- the earlier (terminated) record of a rehire
);
CREATE INDEX employees_email ON employees(email);
CREATE INDEX employees_manager ON employees(manager_id);
CREATE INDEX employees_name ON employees(last_name, first_name);

CREATE TABLE emergency_contacts (
    contact_id  INTEGER PRIMARY KEY,
    employee_id TEXT NOT NULL REFERENCES employees(employee_id),
    name        TEXT NOT NULL,
    relationship TEXT NOT NULL,
    phone       TEXT NOT NULL,
    updated_at  TEXT NOT NULL
);
CREATE INDEX emergency_contacts_employee ON emergency_contacts(employee_id);

CREATE TABLE leave_types (
    leave_type  TEXT PRIMARY KEY,          -- 'vacation', 'sick', 'parental', 'unpaid'
    name        TEXT NOT NULL,
    yearly_days INTEGER NOT NULL,          -- allowance per calendar year (0: no allowance, unpaid)
    carry_over_cap INTEGER NOT NULL,       -- most unused days that carry into the next year (expire March 31)
    paid        INTEGER NOT NULL CHECK (paid IN (0, 1))
);

CREATE TABLE leave_balances (
    employee_id TEXT NOT NULL REFERENCES employees(employee_id),
    leave_type  TEXT NOT NULL REFERENCES leave_types(leave_type),
    year        INTEGER NOT NULL,
    allowance_days INTEGER NOT NULL,       -- this year's allowance (pro-rated for mid-year hires)
    carried_over_days INTEGER NOT NULL DEFAULT 0,  -- from last year, capped, usable until March 31
    PRIMARY KEY (employee_id, leave_type, year)
);

CREATE TABLE leave_requests (
    request_id  TEXT PRIMARY KEY,          -- 'LR-' + six digits
    employee_id TEXT NOT NULL REFERENCES employees(employee_id),
    leave_type  TEXT NOT NULL REFERENCES leave_types(leave_type),
    start_date  TEXT NOT NULL,
    end_date    TEXT NOT NULL,
    business_days INTEGER NOT NULL CHECK (business_days > 0),
    status      TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'rejected', 'cancelled')),
    submitted_at TEXT NOT NULL,
    decided_by  TEXT REFERENCES employees(employee_id),
    decided_at  TEXT,
    note        TEXT NOT NULL DEFAULT ''
);
CREATE INDEX leave_requests_employee ON leave_requests(employee_id);

CREATE TABLE holidays (
    date        TEXT PRIMARY KEY,          -- 'YYYY-MM-DD'
    name        TEXT NOT NULL
);

CREATE TABLE compensation (
    comp_id     INTEGER PRIMARY KEY,
    employee_id TEXT NOT NULL REFERENCES employees(employee_id),
    salary_cents INTEGER NOT NULL CHECK (salary_cents > 0),  -- yearly base salary
    effective_date TEXT NOT NULL,
    reason      TEXT NOT NULL
);
CREATE INDEX compensation_employee ON compensation(employee_id);

CREATE TABLE comp_change_requests (
    change_id   TEXT PRIMARY KEY,          -- 'CC-' + five digits
    employee_id TEXT NOT NULL REFERENCES employees(employee_id),
    proposed_by TEXT NOT NULL REFERENCES employees(employee_id),
    current_salary_cents INTEGER NOT NULL,
    proposed_salary_cents INTEGER NOT NULL CHECK (proposed_salary_cents > 0),
    reason      TEXT NOT NULL,
    status      TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'rejected')),
    approved_by TEXT REFERENCES employees(employee_id),
    created_at  TEXT NOT NULL,
    decided_at  TEXT
);
CREATE INDEX comp_changes_employee ON comp_change_requests(employee_id);

CREATE TABLE checklists (
    checklist_id TEXT PRIMARY KEY,         -- 'CL-' + five digits
    employee_id TEXT NOT NULL REFERENCES employees(employee_id),
    kind        TEXT NOT NULL CHECK (kind IN ('onboarding', 'offboarding')),
    status      TEXT NOT NULL CHECK (status IN ('open', 'complete')),
    created_at  TEXT NOT NULL
);
CREATE INDEX checklists_employee ON checklists(employee_id);

CREATE TABLE checklist_items (
    item_id     TEXT PRIMARY KEY,          -- 'CI-' + six digits
    checklist_id TEXT NOT NULL REFERENCES checklists(checklist_id),
    seq         INTEGER NOT NULL,
    title       TEXT NOT NULL,
    owner_id    TEXT NOT NULL REFERENCES employees(employee_id),  -- who must do it
    due_date    TEXT NOT NULL,
    depends_on  TEXT REFERENCES checklist_items(item_id),        -- must be done first
    done_at     TEXT
);
CREATE INDEX checklist_items_checklist ON checklist_items(checklist_id);
CREATE INDEX checklist_items_owner ON checklist_items(owner_id);

CREATE TABLE documents (
    document_id TEXT PRIMARY KEY,          -- 'DOC-' + six digits
    employee_id TEXT NOT NULL REFERENCES employees(employee_id),
    doc_type    TEXT NOT NULL CHECK (doc_type IN ('contract', 'payslip', 'review', 'id')),
    title       TEXT NOT NULL,
    confidential INTEGER NOT NULL CHECK (confidential IN (0, 1)),
    created_at  TEXT NOT NULL
);
CREATE INDEX documents_employee ON documents(employee_id);

CREATE TABLE document_requests (
    request_id  INTEGER PRIMARY KEY,
    document_id TEXT NOT NULL REFERENCES documents(document_id),
    requested_by TEXT NOT NULL REFERENCES employees(employee_id),
    sent_to     TEXT NOT NULL,             -- the requester's work email
    created_at  TEXT NOT NULL
);

CREATE TABLE hr_cases (
    case_id     INTEGER PRIMARY KEY,
    employee_id TEXT REFERENCES employees(employee_id),
    summary     TEXT NOT NULL,
    status      TEXT NOT NULL CHECK (status IN ('open', 'closed')),
    created_at  TEXT NOT NULL
);
