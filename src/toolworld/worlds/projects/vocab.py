"""Words the projects world's seed data is made of: projects, components, issue summaries, comments.

Plain tuples in a fixed order: the generator indexes into them with its own ``Rng``, so their order is part of
the seed data. Append rather than reorder.
"""

from __future__ import annotations

#: (key, name, what the team builds, components)
PROJECTS: tuple[tuple[str, str, str, tuple[str, ...]], ...] = (
    ("APP", "Customer App", "The customer-facing web application.", ("checkout", "profile", "onboarding", "search")),
    ("API", "Public API", "The REST and webhook API partners integrate with.", ("auth", "webhooks", "rate-limits",
                                                                              "docs")),
    ("MOB", "Mobile", "The iOS and Android apps.", ("ios", "android", "push", "offline")),
    ("DATA", "Data Platform", "Pipelines, the warehouse and reporting.", ("ingest", "warehouse", "dashboards",
                                                                        "exports")),
    ("OPS", "Operations", "Deployments, monitoring and on-call tooling.", ("ci", "monitoring", "alerts", "deploys")),
    ("PAY", "Payments", "Billing, invoices and payment providers.", ("billing", "invoices", "refunds", "tax")),
    ("SRCH", "Search", "Search indexing and ranking.", ("indexer", "ranking", "autocomplete", "synonyms")),
    ("WEB", "Marketing Site", "The public marketing website and blog.", ("blog", "pricing", "forms", "seo")),
    ("INFRA", "Infrastructure", "Clusters, networking and storage.", ("kubernetes", "network", "storage", "dns")),
    ("DOCS", "Documentation", "Product documentation and the help center.", ("guides", "reference", "help-center",
                                                                            "translations")),
)  # fmt: skip

TITLES: dict[str, tuple[str, ...]] = {
    "admin": ("Engineering Manager", "Director of Engineering", "Tracker Administrator"),
    "lead": ("Tech Lead", "Staff Engineer", "Product Lead"),
    "member": ("Backend Engineer", "Frontend Engineer", "QA Engineer", "Product Manager", "Designer",
               "Data Engineer", "Site Reliability Engineer", "Technical Writer", "Mobile Engineer"),
}  # fmt: skip

SCREENS = ("the login page", "the settings screen", "the dashboard", "the export dialog", "the invoice list",
           "the search results", "the profile page", "the signup form", "the admin panel", "the billing page",
           "the notifications panel", "the file upload dialog", "the report builder", "the team page")  # fmt: skip
BUG_ACTIONS = ("saving a draft", "uploading a large file", "switching languages", "resizing the window",
               "pressing back", "opening a shared link", "sorting by date", "logging in with SSO",
               "filtering by status", "pasting formatted text", "changing the time zone", "exporting to CSV")  # fmt: skip
BUG_SYMPTOMS = ("Crash when {a} on {s}", "Blank page after {a} on {s}", "Wrong totals shown on {s}",
                "Timeout when {a} on {s}", "Duplicate entries on {s} after {a}", "Spinner never stops on {s}",
                "Error 500 when {a} on {s}", "Layout breaks on {s} when {a}")  # fmt: skip
PERSONAS = ("an admin", "a new user", "a team owner", "a billing contact", "a support agent", "a guest",
            "an analyst", "a partner developer")  # fmt: skip
CAPABILITIES = ("export my data as CSV", "invite teammates by link", "see an audit log", "set a default workspace",
                "filter reports by region", "schedule a weekly summary", "reset my password by SMS",
                "archive old projects", "pin favourite views", "change my notification settings",
                "download past invoices", "merge two accounts", "undo a deletion", "use dark mode",
                "tag items with colours", "bulk edit records")  # fmt: skip
TASK_TEMPLATES = ("Upgrade {d} to the latest version", "Remove unused configuration from {d}", "Add metrics for {d}",
                  "Document the setup of {d}", "Rotate the {d} credentials", "Write load tests for {d}",
                  "Clean up feature flags in {d}", "Migrate {d} to the new cluster")  # fmt: skip
DEPENDENCIES = ("the job queue", "the cache layer", "the email sender", "the PDF renderer", "the auth service",
                "the image resizer", "the feature-flag client", "the logging agent", "the search client",
                "the payment SDK", "the CDN config", "the build pipeline")  # fmt: skip
EPIC_THEMES = ("Onboarding revamp", "Performance push", "Accessibility audit", "Q3 reliability", "Self-serve billing",
               "Internationalisation", "Enterprise SSO", "Reporting v2", "Mobile parity", "Data retention",
               "Search relevance", "Cost reduction", "Security hardening", "Developer experience")  # fmt: skip
LABELS = ("frontend", "backend", "regression", "customer-reported", "tech-debt", "security", "performance",
          "ux", "needs-design", "quick-win", "flaky", "documentation")  # fmt: skip
COMMENTS = ("I can reproduce this on staging.", "Could you add steps to reproduce?", "Fix is up for review.",
            "This looks related to last sprint's release.", "Moving this to the next sprint, we ran out of time.",
            "Customer confirmed the workaround helps.", "I'll pair with design on this one.",
            "Blocked until the API change ships.", "Added a test that covers this case.",
            "Let's discuss in planning.", "Verified on production.", "Not seeing this anymore after the deploy.")  # fmt: skip
LOG_NOTES = ("investigation", "implementation", "code review", "testing", "pairing", "deploy", "")
SPRINT_GOALS = ("Ship the first slice of the epic", "Burn down critical bugs", "Stabilise the release",
                "Finish the migration", "Polish before launch", "Reduce the support queue")  # fmt: skip
