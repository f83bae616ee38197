"""How helpdesk contacts word their requests: intent, identity and opener templates.

Templates are ``str.format`` strings over the helpdesk slot contract (see ``HelpdeskKit.slots``):

- ``{ticket}`` / ``{into}``: "ticket #40213";
- ``{area}``: the product area as customers say it ("single sign-on (SSO)");
- ``{priority}``: the priority word ("urgent");
- ``{subject}``, ``{description}``, ``{body}``, ``{reason}``, ``{summary}``: free text the customer says;
- ``{invoice}``: "invoice INV-2026-004211"; ``{amount}``: "$120.50"; ``{credit_reason}``: why, as a clause.

Ids are positions in these lists, so templates are only ever appended.
"""

from __future__ import annotations

TONES = ("polite and patient", "in a hurry", "a little frustrated", "friendly", "terse", "formal and precise",
         "under pressure from their manager", "tired and short on time")  # fmt: skip

#: Credit reason (the tool's enum value) -> how customers say it, as a clause after "because".
CREDIT_REASON_PHRASES: dict[str, str] = {
    "service outage": "of the service outage that hit us",
    "billing error": "of a billing error on that invoice",
    "unused seats": "we were billed for seats we never used",
    "goodwill": "your account manager offered us a goodwill credit",
}

INTENTS: dict[str, list[str]] = {
    "create_ticket": [
        "I'd like to report a problem with {area}: {subject}. {description} Please open a ticket with {priority} "
        "priority.",
        "Can you open a {priority}-priority ticket for us about {area}? {subject}. {description}",
        "We have an issue with {area}: {subject}. {description} Could you log it as a ticket, priority {priority}?",
        "Please create a ticket: \"{subject}\". It's about {area}. {description} Priority: {priority}.",
        "New problem on our side with {area}. {subject}. {description} I'd like a ticket for it at {priority} "
        "priority.",
        "Hi, something's wrong with {area}: {subject}. {description} Please file it, {priority} priority.",
    ],
    "create_follow_up_ticket": [
        "The problem from {ticket} is back. {description} Can you open a follow-up?",
        "{ticket} was closed, but it's happening again: {description} Please open a follow-up ticket.",
        "I need to pick up {ticket} again. {description} A follow-up ticket would be great.",
        "Remember {ticket}? {description} Please open a follow-up to it.",
    ],
    "add_comment": [
        "Please add \"{body}\" to {ticket} as a comment.",
        "Can you post an update on {ticket} for me? It should read \"{body}\" and nothing more.",
        "I have more information for {ticket}: \"{body}\" Please add it to the ticket.",
        "Add a comment to {ticket}, please, saying \"{body}\" so the team sees it.",
    ],
    "set_priority": [
        "Please change the priority of {ticket} to {priority}.",
        "Can you set {ticket} to {priority} priority?",
        "{ticket} should be {priority}, not what it is now. Please update it.",
        "I'd like {ticket} bumped to {priority} priority.",
        "Could you make {ticket} {priority} priority, please?",
    ],
    "escalate_ticket": [
        "Please escalate {ticket}. {reason}",
        "I want {ticket} escalated to the next level. {reason}",
        "{reason} Can you escalate {ticket}?",
        "Could {ticket} go to a more senior team? {reason}",
        "Escalate {ticket}, please: {reason}",
    ],
    "reopen_ticket": [
        "{ticket} was marked solved but the problem is back. {reason} Please reopen it.",
        "Can you reopen {ticket}? {reason}",
        "I need {ticket} reopened. {reason}",
        "{reason} So please reopen {ticket}.",
    ],
    "merge_tickets": [
        "{ticket} and {into} are the same issue. Please merge {ticket} into {into}.",
        "We filed the same problem twice: please merge {ticket} into {into}.",
        "Could you merge {ticket} into {into}? They're duplicates.",
        "{ticket} is a duplicate of {into}; merge it into {into}, please.",
    ],
    "solve_ticket": [
        "Good news: the issue in {ticket} is fixed on our end. You can mark it solved.",
        "Please mark {ticket} as solved, the problem went away.",
        "{ticket} can be closed out as solved, everything works now.",
        "We sorted out {ticket} ourselves. Please set it to solved.",
    ],
    "request_credit": [
        "I'd like a credit of {amount} on {invoice} because {credit_reason}.",
        "Can you credit {amount} against {invoice}? It's because {credit_reason}.",
        "Please issue a {amount} credit on {invoice}, because {credit_reason}.",
        "We're asking for {amount} back on {invoice}, because {credit_reason}.",
    ],
    "transfer_to_human_agent": [
        "{summary} I'd like to speak to a person about it.",
        "{summary} Can you pass me to someone on your team?",
        "I need a human for this one. {summary}",
        # No hand-off asked for: the agent has to see that no tool covers it (conduct: transfer only then).
        "{summary} Can you take care of that?",
        "{summary} What are the next steps?",
    ],
    "get_ticket": [
        "What's the status of {ticket}?",
        "Can you tell me where {ticket} stands?",
        "Is anyone working on {ticket}? What's its status?",
        "Quick question: what status is {ticket} in right now?",
    ],
    "get_invoice": [
        "How much was {invoice}, and has it been paid?",
        "Can you tell me the amount and status of {invoice}?",
        "I'm checking our books: what's the total on {invoice} and is it paid?",
    ],
    "get_organization": [
        "Which plan are we on, and is it still active?",
        "Can you check our subscription: what plan do we have and what's its status?",
        "I'm not sure about our plan. Which one is it, and is it active or expired?",
    ],
}

IDENTITY: dict[str, list[str]] = {
    "find_contact_by_email": [
        "My e-mail is {email}.",
        "I sign in with {email}.",
        "You'll find me under {email}.",
        "This is {email} writing.",
        "My work e-mail is {email}.",
    ],
    "find_contact_by_name_and_org": [
        "I'm {first_name} {last_name} from {org_name}.",
        "This is {first_name} {last_name} at {org_name}.",
        "My name is {first_name} {last_name}, I work at {org_name}.",
        "{first_name} {last_name} here, from {org_name}.",
    ],
}

OPENERS: list[str] = [
    "Hi, I need some help with our account.",
    "Hello, I have a support question.",
    "Hi there, can you help me with a ticket?",
    "Hello. I'd like to sort something out with your support team.",
    "Hi, I'm having an issue and I hope you can help.",
]

#: What contacts write on a ticket (comments), why they escalate or reopen, and why they want a person.
COMMENT_BODIES = (
    "We can reproduce it every time on Chrome and Firefox.",
    "It started right after we added new users this morning.",
    "Attached is the error message our admin sees.",
    "This is now blocking our month-end reporting.",
    "The workaround you suggested did not help.",
)
ESCALATION_REASONS = (
    "Nobody has replied yet and our whole team is blocked.",
    "We have waited well past the promised response time.",
    "This is stopping us from working and we need senior help.",
)
REOPEN_REASONS = (
    "It started failing again this morning.",
    "The fix only worked for a day.",
    "Some of our users still see the same error.",
)
FOLLOW_UP_DESCRIPTIONS = (
    "It started again this week with the same symptoms.",
    "We see the same error again since yesterday.",
    "The problem came back after your last release.",
)
SOLVE_REPLIES = ("The customer confirmed the problem is resolved; marking this ticket solved.",)
HANDOFF_SUMMARIES = (
    "We want to discuss our contract renewal terms with our account manager.",
    "Our security team needs a signed data-processing agreement for the audit.",
    "We'd like to talk about moving our workspace to another region.",
)
#: The details a contact adds to a new ticket's subject.
TICKET_DETAILS = (
    "It started this morning and affects most of our team.",
    "It began after your last release.",
    "A few of our users have seen it since Monday.",
    "It happens every single time we try.",
    "It comes and goes, but it is getting worse.",
)
#: The details a contact adds to a new billing ticket (a charge or a document, not a fault that "started").
BILLING_DETAILS = (
    "Our finance team spotted it this week.",
    "We need it sorted before our month-end close.",
    "It's holding up an approval on our side.",
    "Our accountant asked me to follow up on it.",
)
FREE_SLOTS = ("reason", "summary", "body", "description", "subject")

#: Conditional requests by kind (slots: {ticket}, {reason}, {body}).
CONTINGENCIES: dict[str, list[str]] = {
    "reopen_or_follow_up": [
        "The problem from {ticket} is back: {reason} If it can still be reopened, reopen it; otherwise please open "
        "a follow-up ticket.",
        "{reason} Please reopen {ticket} if that's still possible, or open a follow-up to it if not.",
        "Can you reopen {ticket}? {reason} If it's too late to reopen it, a follow-up ticket is fine.",
    ],
    "escalate_or_comment": [
        "About {ticket}: if you've missed your response or resolution time on it, escalate it. If not, just add "
        "\"{body}\" to the ticket.",
        "Has {ticket} gone past its SLA? If so, please escalate it. Otherwise add my note \"{body}\" to it.",
        "I'd like {ticket} escalated if it's overdue. If it's still within the agreed times, please post \"{body}\" "
        "on it instead.",
    ],
}

#: What a contact who changed their mind says when the agent reads the change back (slots: the final wish's).
REVISIONS: dict[str, list[str]] = {
    "set_priority": [
        "Actually, wait: make that {priority} instead.",
        "Hmm, on second thought I'd rather have it at {priority} priority.",
        "Sorry, let me correct that: the priority should be {priority}.",
    ],
    "create_ticket": [
        "Before you file it: please make the priority {priority} instead.",
        "Actually, {priority} priority is more accurate. Please use that.",
    ],
    "request_credit": [
        "Wait, I got the amount wrong: it should be {amount}.",
        "Sorry, let me correct the amount before you do that: {amount}.",
        "Hmm, on second thought, make it {amount} instead.",
    ],
}
