"""The CLI contracts other tools rely on (design.md): JSON shapes, exit codes, structured errors."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from toolworld.cli import app

runner = CliRunner()


def invoke(*args: str):
    return runner.invoke(app, list(args), catch_exceptions=False)


def test_worlds_json_lists_retail_at_scale():
    res = invoke("worlds", "--json")
    assert res.exit_code == 0
    worlds = {w["name"]: w for w in json.loads(res.stdout)}
    retail = worlds["retail"]
    assert retail["tools"] >= 15 and retail["rows"] >= 2000 and retail["tables"] == 9


def test_worlds_table_for_people():
    res = invoke("worlds")
    assert res.exit_code == 0 and "retail" in res.stdout


def test_tools_json_is_openai_function_format():
    res = invoke("tools", "retail", "--json")
    assert res.exit_code == 0
    specs = json.loads(res.stdout)
    assert len(specs) >= 15
    for spec in specs:
        assert spec["type"] == "function"
        fn = spec["function"]
        assert set(fn) == {"name", "description", "parameters"}
        assert fn["description"] and fn["parameters"]["type"] == "object"
        assert set(fn["parameters"].get("required", [])) <= set(fn["parameters"]["properties"])


def test_call_prints_result_json():
    res = invoke("call", "retail", "list_product_types")
    assert res.exit_code == 0
    assert len(json.loads(res.stdout)) >= 50


@pytest.mark.parametrize(
    ("args", "error_type"),
    [
        (["call", "retail", "get_order_details", "--args", '{"order_id": "nope"}'], "not_found"),
        (["call", "retail", "get_order_details", "--args", "{not json"], "invalid_arguments"),
        (["call", "retail", "get_order_details", "--args", "[1]"], "invalid_arguments"),
        (["call", "retail", "get_order_details", "--args", "{}"], "invalid_arguments"),
        (["call", "retail", "no_such_tool"], "unknown_tool"),
        (["call", "atlantis", "get_order_details"], "unknown_world"),
        (["tools", "atlantis", "--json"], "unknown_world"),
    ],
)
def test_bad_calls_exit_1_with_structured_error(args, error_type):
    res = invoke(*args)
    assert res.exit_code == 1
    err = json.loads(res.stdout)["error"]
    assert err["type"] == error_type and err["message"]


def test_write_call_reports_changes_on_throwaway_episode():
    res = runner.invoke(app, ["call", "retail", "transfer_to_human_agent", "--args", '{"summary": "help"}'])
    assert res.exit_code == 0
    assert json.loads(res.stdout)["status"] == "open"


def test_tour_runs_end_to_end():
    res = invoke("tour", "retail")
    assert res.exit_code == 0, res.stdout
    for text in ("find_user_by_email", "cancel_pending_order", "policy_violation", "not_found", "invalid_arguments",
                 "Change-set"):
        assert text in res.stdout


def test_console_script_and_module_entry_point():
    exe = shutil.which("toolworld")
    cmd = [exe] if exe else [sys.executable, "-m", "toolworld"]
    proc = subprocess.run([*cmd, "call", "retail", "get_order_details", "--args", '{"order_id": "nope"}'],
                          capture_output=True, text=True, env=os.environ, timeout=120)  # fmt: skip
    assert proc.returncode == 1
    assert json.loads(proc.stdout)["error"]["type"] == "not_found"


def test_an_error_names_the_commands_options_not_the_configs_fields():
    from types import SimpleNamespace

    from toolworld.cli.kit import as_options

    params = [SimpleNamespace(name="eval_tasks", opts=["--eval-tasks"]), SimpleNamespace(name="kl", opts=["--kl"]),
              SimpleNamespace(name="lr", opts=["--lr"]), SimpleNamespace(name="tasks", opts=["tasks"])]
    ctx = SimpleNamespace(command=SimpleNamespace(params=params))
    assert as_options("kl_coef must be >= 0, got -1.0", ctx) == "--kl must be >= 0, got -1.0"  # renamed option
    assert as_options("lr must be > 0, got 0.0", ctx) == "--lr must be > 0, got 0.0"
    # a path, a file name, or a field that is no option of this command stays as written
    text = "eval_tasks go with eval_every: runs/eval_tasks/x and eval_tasks.jsonl are files; no tasks or lr here."
    assert as_options(text, ctx) == ("--eval-tasks go with eval_every: runs/eval_tasks/x and eval_tasks.jsonl are "
                                     "files; no tasks or lr here.")
