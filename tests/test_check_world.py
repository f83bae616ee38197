"""``check_world`` and ``toolworld check-world``: every registered world meets the bar, and a world broken in one
way fails exactly the check that is about that way."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from toolworld.check import CHECKS, CheckError, CheckReport, check, check_world, passed
from toolworld.cli import app
from toolworld.scaffold import new_world
from toolworld.world.registry import WORLDS

runner = CliRunner()
BUILTIN_CHECKS = ["determinism", "fork_isolation", "read_only", "reachable", "rules_tested", "guidance", "tasks"]


@pytest.mark.parametrize("name", WORLDS.names())
def test_every_registered_world_meets_the_bar(name):
    report = check_world(name, tasks=20)
    assert [r.name for r in report.results] == BUILTIN_CHECKS
    # passed, not merely ok: a world in this repository has its tests here, so nothing may be skipped
    assert all(r.passed for r in report.results), {r.name: r.detail for r in report.results if not r.passed}
    gold = report["tasks"].detail
    assert "gold pass^1 1.000" in gold and "20 verified" in gold
    figures = report["tasks"].to_dict()["data"]
    assert figures["gold_pass1"] == 1.0 and figures["verified"] == 20 and figures["literal_pass1"] < 1.0


def test_the_report_is_json_ready_and_a_plugin_check_runs_by_name():
    seen: list[str] = []

    @check("names_are_short")
    def names_are_short(ctx):  # type: ignore[no-untyped-def]
        """A plugin's own check: registered by decorator, run by name."""
        seen.append(ctx.world.name)
        return passed(f"{len(ctx.world.tools)} tools")

    try:
        events: list[tuple[str, bool]] = []
        report = check_world("retail", tasks=0, only=["reachable", "names_are_short"],
                             on_progress=lambda n, r: events.append((n, r is None)))  # fmt: skip
    finally:
        CHECKS.unregister("names_are_short")
    assert seen == ["retail"] and [r.name for r in report.results] == ["reachable", "names_are_short"]
    assert events == [("reachable", True), ("reachable", False), ("names_are_short", True),
                      ("names_are_short", False)]  # fmt: skip
    data = json.loads(json.dumps(report.to_dict()))
    assert data["ok"] is True and data["checks"][1]["detail"] == "19 tools"


def test_unknown_world_and_unknown_check_are_structured_errors():
    with pytest.raises(CheckError) as exc:
        check_world("no_such_world")
    assert exc.value.kind == "unknown_world" and "retail" in str(exc.value)
    with pytest.raises(CheckError) as exc:
        check_world("retail", only=["determinsm"])
    assert exc.value.kind == "unknown_check" and "determinism" in str(exc.value)
    with pytest.raises(CheckError) as exc:
        check_world("retail", only=["tasks"], skip=["tasks"])
    assert exc.value.kind == "no_checks" and "the checks are determinism" in str(exc.value)


def test_cli_exit_codes_and_json():
    ok = runner.invoke(app, ["check-world", "retail", "--only", "reachable,rules_tested", "--json"])
    assert ok.exit_code == 0, ok.output
    data = json.loads(ok.stdout)
    assert [c["name"] for c in data["checks"]] == ["reachable", "rules_tested"] and data["ok"]
    table = runner.invoke(app, ["check-world", "retail", "--only", "reachable"])
    assert table.exit_code == 0 and "passed reachable" in table.stderr and "meets the bar" in table.stdout
    missing = runner.invoke(app, ["check-world", "nowhere_world"])
    assert missing.exit_code == 1 and json.loads(missing.stdout)["error"]["type"] == "unknown_world"


# -- broken worlds: each made from the scaffold with one defect --------------------------------------------------


def broken(tmp_path: Path, name: str, edits: dict[str, Callable[[str], str]]) -> Path:
    folder = new_world(name, tmp_path)
    for file, edit in edits.items():
        path = folder / file
        before = path.read_text(encoding="utf-8")
        after = edit(before)
        assert after != before, f"the edit of {file} did not apply"
        path.write_text(after, encoding="utf-8")
    return folder


def failing(folder: Path, *, determinism: bool = False) -> dict[str, str]:
    """The failed checks of a broken world and their details. ``determinism`` (two subprocesses, the slow one) runs
    only where the defect is in the seed data: the other defects leave the data as the scaffold's, which the
    scaffold's own test shows deterministic."""
    report: CheckReport = check_world(folder, tasks=20, skip=[] if determinism else ["determinism"])
    return {r.name: r.detail for r in report.failures()}


def test_a_read_tool_that_writes_fails_read_only(tmp_path):
    snooper = '''

@tool
def opening_hours(ctx: Ctx) -> dict[str, Any]:
    """The gym's opening hours (and, wrongly, a visit logged in the tickets table)."""
    ctx.execute("INSERT INTO tickets VALUES ('T99999', NULL, 'asked for the hours', ?)", (ctx.now,))
    return {"weekdays": "06:00-22:00", "weekends": "08:00-20:00"}


TOOLS = ['''
    folder = broken(tmp_path, "toy_readwrite", {"tools.py": lambda s: s.replace("\n\nTOOLS = [", snooper, 1)
                                                .replace("    calculate,\n", "    calculate,\n    opening_hours,\n")})
    failures = failing(folder)
    assert list(failures) == ["read_only"]
    assert "opening_hours wrote to the database" in failures["read_only"]


def test_a_read_tool_that_writes_only_for_a_real_id_fails_read_only(tmp_path):
    """Neither the tour nor any task calls get_invoice, and a made-up id never reaches it (the SDK refuses ids that
    do not exist): only the valid ids the check draws from the invoices table expose the write."""
    marker = '''

@tool(yields={"invoice": "invoice_id"})
def get_invoice(ctx: Ctx, invoice_id: InvoiceId) -> dict[str, Any]:
    """One invoice: its amount, due date and status (and, wrongly, a note that it was looked at)."""
    ctx.execute("UPDATE invoices SET paid_at = 'seen' WHERE invoice_id = ?", (invoice_id,))
    return {"invoice_id": invoice_id}


TOOLS = ['''
    folder = broken(tmp_path, "toy_peek", {"tools.py": lambda s: s.replace("\n\nTOOLS = [", marker, 1)
                                           .replace("    calculate,\n", "    calculate,\n    get_invoice,\n")})
    failures = failing(folder)
    assert list(failures) == ["read_only"]
    assert "get_invoice wrote to the database" in failures["read_only"]


def test_a_read_tool_no_call_can_reach_fails_read_only(tmp_path):
    """A required argument with no entity kind, no example and no enum: the check cannot make up a valid call, so
    the tool's writes would go unseen; that is a failure that says how to give it one."""
    lookup = '''

@tool(yields={"member": "member_id"})
def find_member_by_phone(ctx: Ctx, phone: Annotated[str, Field(description="The phone number on the account.")]
                         ) -> dict[str, Any]:
    """Find a member by the phone number on their account, when they do not remember their email."""
    row = ctx.one("SELECT member_id FROM members WHERE phone = ?", (phone,))
    if row is None:
        raise ToolError("not_found", "No member has that phone number; ask the member for their email instead.")
    return row


TOOLS = ['''
    folder = broken(tmp_path, "toy_unseen", {"tools.py": lambda s: s.replace("\n\nTOOLS = [", lookup, 1)
                                             .replace("    calculate,\n", "    calculate,\n    find_member_by_phone,\n")})
    failures = failing(folder)
    assert list(failures) == ["read_only"]
    assert "no call succeeded with" in failures["read_only"] and "find_member_by_phone" in failures["read_only"]
    assert "examples" in failures["read_only"]


def test_a_world_folder_without_tests_fails_rules_tested_and_an_installed_one_is_skipped(tmp_path):
    folder = new_world("toy_notests", tmp_path / "src")
    shutil.rmtree(folder / "tests")
    report = check_world(folder, tasks=0, only=["rules_tested"])
    assert report["rules_tested"].failed and "no tests found for 'toy_notests'" in report["rules_tested"].detail
    assert "test_R1_" in report["rules_tested"].detail
    installed = new_world("toy_wheel", tmp_path / "lib" / "site-packages")
    shutil.rmtree(installed / "tests")
    report = check_world(installed, tasks=0, only=["rules_tested"])
    assert report.ok and report["rules_tested"].skipped
    assert "installed package" in report["rules_tested"].detail and "7 rules not checked" in report["rules_tested"].detail


def test_a_task_kit_that_iterates_a_set_fails_determinism(tmp_path):
    """The seed data is untouched, so the images agree; the tasks differ between processes with other hash seeds."""
    folder = broken(tmp_path, "toy_setorder", {"kit.py": lambda s: s.replace(
        'picks = rng.sample([r["class_id"] for r in rows], min(6, len(rows)))',
        'picks = list({r["class_id"] for r in rows})[:6]')})  # fmt: skip
    failures = failing(folder, determinism=True)
    assert list(failures) == ["determinism"] and "different tasks in two processes" in failures["determinism"]


def test_a_write_tool_no_task_uses_is_a_warning_of_the_tasks_check(tmp_path):
    folder = broken(tmp_path, "toy_unpaid", {"kit.py": lambda s: s.replace(
        'if tool == "pay_invoice":\n', 'if tool == "pay_invoice":\n            return []\n')})  # fmt: skip
    report = check_world(folder, tasks=20, only=["tasks"])
    assert report.ok and report["tasks"].passed
    assert any("write tools no generated task uses: " in w and "pay_invoice" in w for w in report["tasks"].warnings)


def test_no_tasks_asked_for_skips_the_tasks_check_saying_why():
    report = check_world("retail", tasks=0, only=["tasks"])
    assert report.ok and report["tasks"].skipped and "tasks=0" in report["tasks"].detail


def test_a_rule_without_a_test_fails_rules_tested(tmp_path):
    rule = "- **R8 Lockers.** Lockers are emptied every night.\n\n## What the member may know"
    folder = broken(tmp_path, "toy_untested", {"policy.md": lambda s: s.replace("\n## What the member may know", rule)})
    failures = failing(folder)
    assert list(failures) == ["rules_tested"] and "R8" in failures["rules_tested"]


def test_a_write_tool_no_read_leads_to_fails_reachable(tmp_path):
    closer = '''

@tool(mutates=True)
def close_ticket(ctx: Ctx, ticket_id: Annotated[str, Entity("ticket"), Field(description="A ticket id.")]) -> dict:
    """Close a front-desk ticket (no read tool ever shows a ticket id, so no agent can call this)."""
    ctx.execute("DELETE FROM tickets WHERE ticket_id = ?", (ticket_id,))
    return {"ticket_id": ticket_id, "status": "closed"}


TOOLS = ['''
    folder = broken(tmp_path, "toy_unreachable", {
        "tools.py": lambda s: s.replace("\n\nTOOLS = [", closer, 1).replace("    calculate,\n",
                                                                           "    calculate,\n    close_ticket,\n"),
        "__init__.py": lambda s: s.replace('"email": None,', '"email": None,\n        "ticket": "tickets.ticket_id",'),
    })  # fmt: skip
    failures = failing(folder)
    assert list(failures) == ["reachable"] and "close_ticket needs ticket" in failures["reachable"]


def test_seed_data_drawn_from_random_fails_determinism(tmp_path):
    folder = broken(tmp_path, "toy_random", {"data.py": lambda s: s.replace(
        "import sqlite3\n", "import random\nimport sqlite3\n").replace(
        "capacity = rng.randint(6, 16)", "capacity = random.randint(6, 16)")})  # fmt: skip
    failures = failing(folder, determinism=True)
    assert list(failures) == ["determinism"] and "different content hashes" in failures["determinism"]


def test_a_task_kit_that_does_not_load_fails_only_tasks(tmp_path):
    folder = broken(tmp_path, "toy_nokit", {"__init__.py": lambda s: s.replace('synthesis="toy_nokit.kit:kit"',
                                                                              'synthesis="toy_nokit.missing:kit"')})
    report = check_world(folder, tasks=20, skip=["determinism"])
    assert [r.name for r in report.failures()] == ["tasks"]
    assert "No module named 'toy_nokit.missing'" in report["tasks"].detail
    assert any("task generation failed" in w for w in report["fork_isolation"].warnings)


def test_a_write_tool_that_needs_nothing_is_reachable(tmp_path):
    feedback = '''

@tool(mutates=True, confirm=False)
def leave_feedback(ctx: Ctx, text: Annotated[str, Field(description="What the member wants the gym to hear.")]) -> dict:
    """Record a member's feedback for the managers (needs no account: anyone may leave it)."""
    ctx.execute("INSERT INTO tickets VALUES ('T88888', NULL, ?, ?)", (text, ctx.now))
    return {"status": "recorded"}


TOOLS = ['''
    folder = broken(tmp_path, "toy_feedback", {"tools.py": lambda s: s.replace("\n\nTOOLS = [", feedback, 1)
                                               .replace("    calculate,\n", "    calculate,\n    leave_feedback,\n")})
    report = check_world(folder, tasks=0, only=["reachable"])
    assert report.ok and "6 write tools reachable" in report["reachable"].detail


def test_an_error_that_says_nothing_to_do_and_an_undescribed_argument_fail_guidance(tmp_path):
    folder = broken(tmp_path, "toy_mute", {"tools.py": lambda s: s.replace(
        'f"No member has the email {email!r}. Check the spelling with the member, or "\n'
        '                        "ask for the email they signed up with."', '"Unknown email."').replace(
        'def get_class_details(ctx: Ctx, class_id: ClassId) -> dict[str, Any]:',
        'def get_class_details(ctx: Ctx, class_id: ClassId, verbose: bool = False) -> dict[str, Any]:')})  # fmt: skip
    failures = failing(folder)
    assert list(failures) == ["guidance"]
    assert "find_member_by_email with an id that does not exist: not_found message says nothing to do next: " \
        "'Unknown email.'" in failures["guidance"]  # fmt: skip
    assert "get_class_details.verbose: no description, enum or examples" in failures["guidance"]


class LeakyFork:
    """A "fork" that writes through to its parent: what fork_isolation exists to catch."""

    def __init__(self, parent):  # type: ignore[no-untyped-def]
        self.parent = parent

    def __getattr__(self, name):  # type: ignore[no-untyped-def]
        return getattr(self.parent, name)

    def close(self) -> None:
        pass


def test_a_fork_that_shares_its_parents_state_fails_fork_isolation(monkeypatch):
    from toolworld.world import Episode

    monkeypatch.setattr(Episode, "fork", lambda self: LeakyFork(self))
    report = check_world("retail", tasks=20, only=["fork_isolation"])
    assert not report.ok and "writes on the fork changed the parent" in report["fork_isolation"].detail
