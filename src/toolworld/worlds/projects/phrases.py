"""How people word their requests to the tracker's assistant: intent and identity templates.

Templates are ``str.format`` strings over the projects slot contract:

- ``{issue}`` / ``{original}``: an issue key ("APP-123"); ``{project}``: a project key ("APP");
- ``{sprint}``: a sprint's name ("APP Sprint 9"); ``{assignee}``: a teammate's full name, or "nobody";
- ``{status}``: a status as people say it ("in progress"); ``{resolution}``: a clause ("it's fixed");
- ``{change}``: what to change on an issue ("raise its priority to high");
- ``{duration}`` ("2 hours 30 minutes"), ``{day}`` (YYYY-MM-DD), ``{minutes}``; ``{owner}``: who logged an
  entry ("me", or a teammate's full name);
- ``{summary}``, ``{body}``: free text in the person's words; ``{itype}`` (``{itypes}`` plural), ``{priority}``,
  ``{move}``.

Template ids are positions in these lists, so templates are only ever appended.
"""

from __future__ import annotations

TONES = ("busy between meetings", "precise and to the point", "friendly", "a little stressed before the release",
         "new to the tracker", "terse")  # fmt: skip

IDENTITY: dict[str, list[str]] = {
    "find_user_by_email": [
        "My email is {email}.",
        "I'm {email} in the tracker.",
        "This is {email}.",
        "My work email is {email}.",
    ],
}

INTENTS: dict[str, list[str]] = {
    "create_issue": [
        "Please create a {itype} in {project}: \"{summary}\", priority {priority}.",
        "Can you open a new {itype} in project {project} called \"{summary}\"? Priority {priority}.",
        "I need a {priority}-priority {itype} in {project} titled \"{summary}\".",
    ],
    "update_issue": [
        "On {issue}, please {change}.",
        "Could you {change} on {issue}?",
        "For {issue}: {change}, please.",
    ],
    "assign_issue": [
        "Please assign {issue} to {assignee}.",
        "Can you give {issue} to {assignee}?",
        "{issue} should be assigned to {assignee}.",
    ],
    "transition_issue": [
        "Please move {issue} to {status}{resolution}.",
        "Can you set {issue} to {status}{resolution}?",
        "{issue} needs to go to {status}{resolution}.",
    ],
    "add_comment": [
        "Please add the comment \"{body}\" to {issue}.",
        "Can you post \"{body}\" as a comment on {issue}?",
    ],
    "log_time": [
        "Please log {duration} on {issue} for {day}.",
        "I worked {duration} on {issue} on {day}; can you log it?",
        "Log {duration} against {issue}, day {day}.",
    ],
    "delete_time_log": [
        "The {duration} logged as {owner} on {issue} for {day} is a mistake; please delete that entry.",
        "Please remove the {duration} time entry on {issue} from {day}, the one by {owner}.",
    ],
    "add_issue_to_sprint": [
        "Please add {issue} to {sprint}.",
        "Can you pull {issue} into {sprint}?",
        "Put {issue} in {sprint}, please.",
    ],
    "remove_issue_from_sprint": [
        "Please take {issue} out of its sprint.",
        "Can you remove {issue} from the sprint it's in?",
    ],
    "start_sprint": [
        "Please start {sprint}.",
        "We're ready to kick off {sprint}; can you start it?",
    ],
    "close_sprint": [
        "Please close {sprint} and move unfinished work to {move}.",
        "{sprint} is over: close it, and unfinished issues go to {move}.",
    ],
    "link_duplicate": [
        "{issue} is the same bug as {original}; please mark it as a duplicate.",
        "Please close {issue} as a duplicate of {original}.",
    ],
    "escalate_to_admin": [
        "{summary}",
        "I need an admin for this: {summary}",
    ],
    "get_issue": [
        "What's the status of {issue}, and who's working on it?",
        "Can you tell me where {issue} stands and who has it?",
    ],
    "get_sprint": [
        "How many story points are still free in {sprint}?",
        "What's the remaining capacity of {sprint}?",
    ],
    "get_daily_time": [
        "How much time have I logged in total on {day}?",
        "What's my total logged time for {day}?",
    ],
    "search_issues": [
        "How many {itypes} in {project} are in {status} with nobody assigned?",
        "Can you count the unassigned {itypes} of {project} that are in {status}?",
    ],
    "list_time_logs": [
        "How much time has been logged on {issue} in total?",
        "What's the total time logged on {issue}?",
    ],
}

STATUS_WORDS = {"backlog": "the backlog", "todo": "To Do", "in_progress": "in progress", "in_review": "in review",
                "done": "done", "closed": "closed"}  # fmt: skip
RESOLUTION_WORDS = {"fixed": " (it's fixed)", "done": " (it's done)", "wont_do": " (we won't do it)",
                    "cannot_reproduce": " (we can't reproduce it)"}  # fmt: skip
COMMENT_BODIES = ("Reproduced on staging with the latest build.", "Waiting on design before picking this up.",
                  "Customer confirmed the workaround.", "Fix is ready for review.",
                  "Let's discuss this in planning on Monday.", "Blocked by the API change.")  # fmt: skip
ESCALATIONS = (
    "{name} is back from leave and needs their tracker account reactivated.",
    "Issue {issue} was filed in the wrong project and has to be moved.",
    "I deleted a comment on {issue} by accident and need it restored.",
)
NEW_SUMMARIES = {
    "bug": ("Export button does nothing in Safari", "Timezone shown wrong on invoices", "Search returns stale results",
            "Avatar upload fails for PNG files"),
    "story": ("As an admin, I can export the audit log", "As a user, I can snooze notifications",
              "As a team owner, I can rename the workspace"),
    "task": ("Upgrade the logging agent", "Document the release checklist", "Add alerts for queue depth"),
}  # fmt: skip

#: Conditional requests by plan kind (slots as above; ``{other}`` is the second branch's issue status words).
CONTINGENCIES: dict[str, list[str]] = {
    # slots: {issue}, {assignee}, {body}
    "assign_or_comment": [
        "If {issue} is still unassigned, please assign it to {assignee}. If someone already has it, just add the "
        "comment \"{body}\" to it instead.",
        "Can you check {issue}? If nobody is assigned, give it to {assignee}; otherwise leave the comment "
        "\"{body}\" on it.",
    ],
    # slots: {issue}
    "start_or_review": [
        "If {issue} hasn't been started yet, please move it to in progress. If it's already in progress, move it "
        "to in review.",
        "Can you check {issue}? If it's still To Do, start it (in progress); if work has started, send it to review.",
    ],
}

#: What a person who changed their mind says when the agent reads the change back (slots: the final call's).
REVISIONS: dict[str, list[str]] = {
    "assign_issue": [
        "Actually, wait: give it to {assignee} instead.",
        "Sorry, I meant {assignee}, not who I said.",
    ],
    "add_issue_to_sprint": [
        "Hold on, make that {sprint} instead.",
        "Sorry, wrong sprint: it should go into {sprint}.",
    ],
    "update_issue": [
        "Actually, I changed my mind: {change} instead.",
        "Wait, correction: please {change}.",
    ],
    "log_time": [
        "Wait, it was {duration}, not what I said.",
        "Sorry, correction: make it {duration}.",
    ],
}
