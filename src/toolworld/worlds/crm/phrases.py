"""How sales reps and managers speak to the CRM assistant: request templates per tool, identities, openers.

Slots are filled by ``CrmKit.slots`` (``kit.py``): ``{opp}`` is a deal's name as the CRM shows it,
``{contact}`` and ``{lead}`` a person with their e-mail, ``{quote_id}`` a quote number, ``{rep}`` a colleague.
"""

from __future__ import annotations

INTENTS: dict[str, list[str]] = {
    "create_lead": [
        "Please add a new lead: {person}, {title_part}{email}, at {company} in {state}. Source: {source}.",
        "I met {person} ({email}) from {company}, {state}; {title_clause}can you create a lead for them? "
        "Source is {source}.",
        "New {source} lead for me: {person} at {company} ({state}), e-mail {email}.{title_sentence}",
    ],
    "update_lead_status": [
        "Please mark my lead {lead} as {status}.",
        "Can you set the status of my lead {lead} to {status}?",
        "My lead {lead} should now be {status}; please update it.",
    ],
    "merge_leads": [
        "I have {person} twice in my leads: {lead} and {duplicate}. Please merge them, keeping {lead}.",
        "{duplicate} is a duplicate of my lead {lead}; merge it into {lead}, please.",
    ],
    "convert_lead": [
        "My lead {lead} is ready; please convert it{account_clause}.",
        "Please convert my lead {lead}{account_clause}.",
        "Can you convert {lead} into a contact{account_clause}?",
    ],
    "update_opportunity_stage": [
        "Please move the deal '{opp}' to {stage}.",
        "Can you update '{opp}' to {stage}?",
        "'{opp}' is ready for {stage}; please update the stage.",
    ],
    "close_lost": [
        "We lost '{opp}'; please close it as lost. The reason: {loss_reason}.",
        "Please mark the deal '{opp}' closed lost, reason {loss_reason}.",
    ],
    "set_opportunity_contact": [
        "Please make {contact} the primary contact on '{opp}'.",
        "On the deal '{opp}', set {contact} as the primary contact.",
    ],
    "create_quote": [
        "Please start a new quote on '{opp}'.",
        "I need a fresh draft quote for the deal '{opp}'.",
    ],
    "add_quote_line": [
        "Please add {quantity} x {product} to {quote}{discount_clause}.",
        "On {quote}, add a line for {quantity} {units} of {product}{discount_clause}.",
    ],
    "set_quote_discount": [
        "Please set a discount of {discount}% on every line of {quote}.",
        "Can you set the discount on {quote} to {discount}%?",
    ],
    "send_quote": [
        "Please send {quote} to {contact}.",
        "{Quote} is ready; send it to {contact}, please.",
    ],
    "accept_quote": [
        "Good news: the customer accepted {quote}. Please record it.",
        "Please mark {quote} as accepted; they signed.",
    ],
    "log_activity": [
        "Please log a {kind} with {contact} on the deal '{opp}': {subject}.",
        "Can you record a {kind} with {contact} for '{opp}'? Subject: {subject}.",
    ],
    "reassign_account": [
        "Please reassign the account {account} to {rep}.",
        "{rep} should own {account} from now on; can you reassign it?",
    ],
    "claim_account": [
        "Nobody owns {account}; please make me its owner.",
        "I'd like to take over the account {account}; please assign it to me.",
    ],
    "escalate_to_sales_ops": [
        "{summary} Please pass this to sales operations.",
        "I need sales ops on this: {summary}",
    ],
    "get_opportunity": [
        "What stage is the deal '{opp}' in, and what is it worth?",
        "Can you tell me the stage and amount of '{opp}'?",
    ],
    "get_quote": [
        "What is the status of {quote}, and what is its total?",
        "Can you check {quote} for me: its status and total?",
    ],
}
IDENTITY = {
    "find_user_by_email": [
        "This is {email}.",
        "My work e-mail is {email}.",
        "Hi, it's me, {email}.",
    ],
}
OPENERS = [
    "Hi, I need a hand with the CRM.",
    "Hello, can you update something in the CRM for me?",
    "Hi there, I have a CRM request.",
]
WITHHELD: dict[str, list[str]] = {}
#: Why a deal needs a discount above the person's limit (escalation summaries; the kit adds the quote number).
ESCALATION_REASONS = (
    "The customer will sign this quarter only with a {discount}% discount on quote {quote_id}.",
    "Procurement asked for {discount}% off quote {quote_id} to match a competitor's offer.",
)
LOG_SUBJECTS = (
    "Intro call about their reporting needs", "Demo of the analytics suite", "Pricing questions answered",
    "Follow-up on the security review", "Renewal timeline discussed", "Agreed next steps for the pilot",
)  # fmt: skip
TONES = ("in a hurry between meetings", "friendly and precise", "terse", "chatty")
#: What a user says when asked for a quote number they do not have at hand.
UNKNOWN_QUOTE_LINES = ("I don't have the quote number at hand; it's the only one of that kind on the deal.",
                       "Sorry, I can't find the quote number right now.")
#: Conditional requests (slots of both branches): the branch depends on state the agent must look up.
CONTINGENCIES: dict[str, list[str]] = {
    # slots: {quote}, {Quote}, {contact}, {opp}
    "send_or_requote": [
        "If {quote} is still valid, please send it to {contact}. If it has expired, start a new quote on '{opp}' "
        "instead.",
        "{Quote} for '{opp}': send it to {contact} if it hasn't expired yet; otherwise I need a fresh draft quote "
        "on the deal.",
        "Can you check whether {quote} has expired? If not, send it to {contact}; if it has, create a new quote "
        "on '{opp}'.",
    ],
    # slots: {opp}, {contact}
    "advance_or_contact": [
        "If '{opp}' already has a primary contact, please move it to proposal. If it doesn't, make {contact} its "
        "primary contact and I'll move it later.",
        "'{opp}': move it on to proposal if a primary contact is set; otherwise just set {contact} as the primary "
        "contact for now.",
    ],
}
