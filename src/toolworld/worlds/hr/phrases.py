"""How employees word their requests to the HR desk: intent, identity and opener templates.

Templates are ``str.format`` strings over the hr slot contract (see ``HrKit.slots``):

- ``{leave}``: the kind of leave as said ("vacation", "sick leave"); ``{start}`` / ``{end}``: spoken dates
  ("Monday, April 13, 2026");
- ``{request}``: a leave request as a noun phrase without leading article ("my vacation from April 13, 2026
  to April 17, 2026", "Ava Chen's vacation from ...");
- ``{colleague}``: a colleague's full name; ``{salary}``: "$104,500"; ``{reason}``: a short clause;
- ``{item}``: a checklist item ("'Sign the employment contract' on my onboarding checklist");
- ``{day}``: a spoken date; ``{document}``: a document title; ``{contact}``, ``{relationship}``, ``{phone}``;
- ``{change}``: a pay change ("the raise proposed for Ava Chen, from $98,000 to $104,500");
- ``{summary}``: one or two full sentences on why a person is needed.

Templates are only ever appended: ids are positions in these lists.
"""

from __future__ import annotations

TONES = ("polite and patient", "in a hurry", "a little stressed", "chatty and friendly", "terse",
         "unsure about the details", "formal and precise", "busy between meetings")  # fmt: skip

INTENTS: dict[str, list[str]] = {
    "submit_leave_request": [
        "I'd like to request {leave} from {start} to {end}.",
        "Can you put in a {leave} request for me, {start} through {end}?",
        "Please book {leave} for me from {start} until {end}.",
        "I need time off: {leave}, starting {start} and ending {end}.",
        "Could you submit {leave} for {start} to {end}, please?",
        "I'm planning to be off from {start} to {end}. Please request it as {leave}.",
        "Hi! I want to take {leave} {start} - {end}. Can you set that up?",
    ],
    "cancel_leave_request": [
        "Please cancel {request}.",
        "My plans changed, so I need to withdraw {request}.",
        "Can you cancel {request}? I won't be taking it.",
        "I'd like to take back {request}, please.",
        "Could you remove {request}? It's no longer needed.",
    ],
    "approve_leave_request": [
        "Please approve {request}.",
        "I'm fine with {request}; go ahead and approve it.",
        "Can you approve {request} for me?",
        "I'd like to sign off on {request}.",
        "{request_cap} looks good to me. Approve it, please.",
    ],
    "reject_leave_request": [
        "Please reject {request}; {reason}.",
        "I can't approve {request} because {reason}. Please decline it.",
        "Decline {request}, please. The reason: {reason}.",
        "I need to turn down {request}; {reason}.",
    ],
    "request_compensation_change": [
        "I'd like to propose a new salary of {salary} for {colleague}; the reason is {reason}.",
        "Please submit a pay change for {colleague}: {salary} a year, for {reason}.",
        "Can you put in a raise for {colleague} to {salary}? Reason: {reason}.",
        "I want to bump {colleague}'s base salary to {salary} ({reason}).",
    ],
    "approve_compensation_change": [
        "Please approve {change}.",
        "I've reviewed {change} and I want to approve it.",
        "Can you approve {change} for me?",
        "Go ahead and sign off on {change}.",
    ],
    "complete_checklist_item": [
        "Please mark {item} as done.",
        "I've finished {item}; can you tick it off?",
        "Can you check off {item}? It's done.",
        "{item_cap} is done now, please update it.",
    ],
    "start_offboarding": [
        "{colleague} is leaving; their last day is {day}. Please start the offboarding.",
        "Can you kick off offboarding for {colleague}? Last working day: {day}.",
        "I need to offboard {colleague}, who is leaving on {day}.",
        "Please open the offboarding for {colleague} with {day} as the last day.",
    ],
    "request_document_copy": [
        "Could you send me a copy of {document}?",
        "I need {document}; please email it to me.",
        "Please send {document} to my work email.",
        "Can I get a copy of {document}?",
    ],
    "update_emergency_contact": [
        "Please add {contact} ({relationship}) as my emergency contact, phone {phone}.",
        "I want to update my emergency contact: {contact}, my {relationship}, at {phone}.",
        "Can you put {contact} on file as my emergency contact? {Relationship}, {phone}.",
        "My emergency contact should be {contact} ({relationship}); the number is {phone}.",
    ],
    "transfer_to_hr_partner": [
        "{summary} Can I talk to someone in HR?",
        "{summary} I'd like an HR partner to look into it.",
        "{summary} Please pass this to a person.",
        # No hand-off asked for: the agent has to see that no tool covers it (conduct: transfer only then).
        "{summary} Can you sort that out?",
        "{summary} What can be done about it?",
    ],
    "get_leave_balance": [
        "How many vacation days do I have left this year?",
        "Can you tell me my vacation balance?",
        "What's my remaining vacation allowance?",
        "I'm planning a trip; how much vacation do I still have?",
    ],
    "get_compensation": [
        "What is my current base salary on file?",
        "Can you confirm my annual salary?",
        "I need my current salary for a mortgage application. What is it?",
    ],
}

IDENTITY: dict[str, list[str]] = {
    "find_employee_by_email": [
        "My work email is {email}.",
        "I'm {email}.",
        "You can find me under {email}.",
        "My email here is {email}.",
    ],
    "find_employee_by_name_and_department": [
        "I'm {first_name} {last_name} from {department}.",
        "This is {first_name} {last_name}, {department}.",
        "My name is {first_name} {last_name} and I work in {department}.",
    ],
}

OPENERS: list[str] = [
    "Hi, I have an HR question.",
    "Hello, I need some help from HR.",
    "Hi there, can you help me with something?",
    "Hey, I need to sort out something with HR.",
]

REJECT_REASONS = (
    "we have a release that week and I need the whole team",
    "two others on the team are already off then",
    "it falls in our quarter-end close",
    "we're short-staffed that week",
)
RAISE_REASONS = ("promotion", "market adjustment", "retention", "expanded scope", "performance")

TRANSFER_SUMMARIES = (
    "My February payslip is missing the overtime I worked and I want someone to check it.",
    "I want to raise a complaint about how a team meeting was handled.",
    "My benefits enrollment shows the wrong dependents and I need it corrected.",
    "I was charged twice for the parking benefit on my last payslip.",
    "I want to change a leave day I already took into sick leave.",
)

FREE_SLOTS = ("reason", "summary")

CONTINGENCIES: dict[str, list[str]] = {
    # slots: {start}, {end}
    "vacation_or_unpaid": [
        "I'd like to be off from {start} to {end}. If I have enough vacation days left for that, book it as "
        "vacation; if not, make it unpaid leave.",
        "Please request {start} through {end} off for me: as vacation if my balance covers it, otherwise as unpaid "
        "leave.",
        "Can you check whether my vacation balance covers {start} to {end}? If it does, book it as vacation. If it "
        "doesn't, I'll take the whole thing as unpaid leave.",
        "I need {start} until {end} off. Use vacation days if I still have enough, and unpaid leave if I don't.",
    ],
}

#: What a user who changed their mind says when the agent reads the change back (slots: the final arguments).
REVISIONS: dict[str, list[str]] = {
    "submit_leave_request": [
        "Actually, wait: make it {start} to {end} instead.",
        "Sorry, I got the dates wrong. It should be {start} through {end}.",
        "Hold on, let me correct that: from {start} until {end}, please.",
        "Before you submit it: please book it as {leave} instead.",
        "Hmm, on second thought, make it {leave}.",
    ],
    "update_emergency_contact": [
        "Wait, I gave you the wrong number. It's {phone}.",
        "Sorry, the phone number should be {phone}.",
        "Actually, put down {relationship} as the relationship.",
        "Before you save it: the relationship is {relationship}.",
    ],
    "start_offboarding": [
        "Actually, their last day is {day}, not what I said.",
        "Sorry, I mixed up the date: the last day is {day}.",
    ],
    "request_compensation_change": [
        "Hmm, let's make it {salary} instead.",
        "Sorry, the amount should be {salary}.",
        "Actually, propose {salary}, please.",
    ],
}

UNKNOWN_EMAIL_LINES = (
    "I don't remember my work email exactly, sorry.",
    "I'm on my phone and can't check which email address I have.",
    "I'd rather not guess my email address.",
)
