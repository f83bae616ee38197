"""Words of the helpdesk world: ticket subjects per product area, tags, macros and knowledge-base topics.

Lists are in a fixed order (part of the seed data): append, never reorder.
"""

from __future__ import annotations

#: Product area -> ticket subjects customers write (each reads as one concrete problem).
SUBJECTS: dict[str, tuple[str, ...]] = {
    "billing": ("Invoice shows the wrong number of seats", "Charged twice for the same month",
                "Need a copy of last month's invoice", "Card declined on renewal", "VAT number missing on invoice",
                "Question about prorated charges after adding seats"),
    "sso": ("SAML login fails with an invalid signature error", "Okta users cannot sign in since this morning",
            "SSO redirect loops back to the login page", "New hires are not provisioned through SCIM",
            "Certificate rotation broke single sign-on"),
    "api": ("API returns 429 Too Many Requests below our limit", "Webhook deliveries time out",
            "API token stopped working after rotation", "Pagination skips records on /v2/projects",
            "Intermittent 502 errors from the API"),
    "integrations": ("Slack integration stopped posting updates", "Salesforce sync duplicates accounts",
                     "Jira links are not created for new issues", "Google Drive attachments fail to open",
                     "Zapier trigger fires twice"),
    "reporting": ("Dashboard totals do not match the export", "Scheduled report e-mail never arrives",
                  "Custom chart shows no data for last week", "CSV export cuts off after 10,000 rows",
                  "Time zone wrong on the weekly report"),
    "data-import": ("CSV import fails at row 1,204", "Imported dates are shifted by one day",
                    "Bulk import hangs at 99%", "Special characters garbled after import",
                    "Duplicate records created by the importer"),
    "mobile-app": ("iOS app crashes on launch", "Android app does not receive push notifications",
                   "Mobile app logs users out every hour", "Offline mode loses edits",
                   "Cannot upload photos from the mobile app"),
    "notifications": ("E-mail notifications arrive hours late", "Users get notified twice for every comment",
                      "Cannot turn off digest e-mails", "Mentions do not trigger notifications",
                      "Notification links open the wrong workspace"),
    "permissions": ("Member can see admin-only projects", "Cannot remove a user who left the company",
                    "Guest invitations expire immediately", "Custom role cannot edit its own tasks",
                    "Audit log missing permission changes"),
    "performance": ("Workspace loads very slowly since the update", "Search takes over 30 seconds",
                    "Timeouts when opening large boards", "Exports are much slower than last month",
                    "Editor lags when several people type at once"),
}  # fmt: skip

TAGS: tuple[str, ...] = (
    "outage", "bug", "feature-request", "how-to", "billing", "sso", "api", "vip", "churn-risk", "follow-up",
    "duplicate", "needs-info", "regression", "security", "onboarding", "data-loss", "performance", "mobile",
    "integration", "escalated", "waiting-on-customer", "known-issue", "workaround-given", "refund", "upgrade",
    "downgrade", "trial", "training", "documentation", "eu-data",
)  # fmt: skip

MACROS: tuple[tuple[str, str], ...] = (
    ("Ask for HAR file", '[{"comment": "public", "template": "har_request"}, {"set": "status", "to": "pending"}]'),
    ("Ask for screenshots", '[{"comment": "public", "template": "screenshots"}, {"set": "status", "to": "pending"}]'),
    ("Known outage - link status page", '[{"comment": "public", "template": "status_page"}, {"tag": "outage"}]'),
    ("Solve - issue fixed", '[{"comment": "public", "template": "fixed"}, {"set": "status", "to": "solved"}]'),
    ("Solve - no reply from customer", '[{"set": "status", "to": "solved"}]'),
    ("Escalate to tier 2", '[{"set": "tier", "to": 2}, {"comment": "internal", "template": "escalation"}]'),
    ("Billing - send invoice copy", '[{"comment": "public", "template": "invoice_copy"}, {"tag": "billing"}]'),
    ("Billing - refund processed", '[{"comment": "public", "template": "refund"}, {"tag": "refund"}]'),
    ("SSO troubleshooting steps", '[{"comment": "public", "template": "sso_steps"}, {"tag": "sso"}]'),
    ("API rate limit explanation", '[{"comment": "public", "template": "rate_limits"}, {"tag": "api"}]'),
    ("Feature request logged", '[{"comment": "public", "template": "feature_logged"}, {"tag": "feature-request"}]'),
    ("Put on hold - engineering", '[{"set": "status", "to": "on_hold"}, {"comment": "internal", "template": "eng"}]'),
    ("Merge duplicate", '[{"tag": "duplicate"}, {"comment": "public", "template": "merged"}]'),
    ("Data export instructions", '[{"comment": "public", "template": "export_steps"}]'),
    ("Close - spam", '[{"set": "status", "to": "closed"}]'),
)  # fmt: skip

#: Product area -> knowledge-base article titles (bodies are generated from the title).
KB_TOPICS: dict[str, tuple[str, ...]] = {
    "billing": ("How seats are billed", "Downloading invoices", "Updating the payment card", "Prorated charges",
                "Adding a VAT or tax number", "Plan renewals and expiry"),
    "sso": ("Setting up SAML with Okta", "Setting up SAML with Azure AD", "Rotating the SSO certificate",
            "SCIM user provisioning", "Troubleshooting SSO redirect loops"),
    "api": ("API rate limits", "Creating and rotating API tokens", "Webhook retries and timeouts",
            "Paginating API results", "API status codes"),
    "integrations": ("Connecting Slack", "Salesforce sync settings", "Jira integration", "Zapier triggers",
                     "Google Drive attachments"),
    "reporting": ("Building dashboards", "Scheduling report e-mails", "Exporting reports to CSV",
                  "Report time zones"),
    "data-import": ("Importing from CSV", "Date formats in imports", "Fixing garbled characters",
                    "Avoiding duplicate imports"),
    "mobile-app": ("Installing the mobile app", "Push notifications on Android", "Offline mode",
                   "Uploading photos from mobile"),
    "notifications": ("Notification settings", "Digest e-mails", "Mentions and notifications"),
    "permissions": ("Roles and permissions", "Removing users", "Guest access", "Custom roles", "The audit log"),
    "performance": ("Speeding up large workspaces", "Search tips", "Browser requirements"),
}  # fmt: skip

COMMENT_REPLIES: tuple[str, ...] = (
    "Thanks for reaching out. We are looking into this and will update you shortly.",
    "Could you send us a screenshot and the time it happened (with time zone)?",
    "We have reproduced the problem and passed it to our engineering team.",
    "A fix has been deployed; please let us know if you still see the problem.",
    "Thanks for the details. Could you try clearing the browser cache and signing in again?",
    "This is a known issue; our status page has the latest updates.",
)  # fmt: skip
INTERNAL_NOTES: tuple[str, ...] = (
    "Checked the logs: errors started after the last deploy.",
    "Customer is on a renewal call next week; handle with care.",
    "Asked engineering in the triage channel.",
    "Probably related to the known issue in the sync worker.",
    "Waiting on the customer's HAR file.",
)  # fmt: skip
CUSTOMER_FOLLOWUPS: tuple[str, ...] = (
    "Any update on this? It is still happening for our team.",
    "Attached the screenshot you asked for.",
    "Thanks, that worked for some users but not all of them.",
    "We tried that and the problem is still there.",
)  # fmt: skip
