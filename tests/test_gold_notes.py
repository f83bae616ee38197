"""Gold conversations that say how a described value was picked (``gold:explain=1``), and the spoken dates they
and the task phrasings share: the note reads the list the value came from row by row, up to the row the
customer meant, and a gold run with notes still scores as perfect."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from toolworld.core.dates import is_iso_date, spoken_date
from toolworld.pipeline import run
from toolworld.rollout.backends import GoldPolicy, make_policy
from toolworld.rollout.backends.gold import pick_note
from toolworld.store.export import chat_records
from toolworld.store.runstore import RunStore
from toolworld.tasks.generate import generate

# -- spoken dates ------------------------------------------------------------------------------------------


def test_spoken_dates_read_iso_dates_and_timestamps():
    assert spoken_date("2026-04-16") == "April 16"
    assert spoken_date("2026-04-16T21:14:27Z") == "April 16"
    assert spoken_date("2025-12-03T08:00:00+01:00", year=True) == "December 3, 2025"
    for bad in ("2026-13-01", "April 16", "", "2026-00-10"):
        with pytest.raises(ValueError, match="not an ISO date"):
            spoken_date(bad)


def test_only_whole_iso_dates_count_as_dates():
    assert is_iso_date("2026-04-16") and is_iso_date("2026-04-16T21:14:27Z") and is_iso_date("2026-04-16 21:14")
    assert not any(is_iso_date(v) for v in ("2026-04-16 and more", "#W2026-04-16", "2026-02-40", 20260416, None))


# -- the note ----------------------------------------------------------------------------------------------

ROWS = [{"order_id": "#W1", "status": "pending", "placed_at": "2026-05-14T02:06:44Z", "items": 1, "total": 9.5},
        {"order_id": "#W2", "status": "delivered", "placed_at": "2026-04-16T21:14:27Z", "items": 2, "total": 4.0},
        {"order_id": "#W3", "status": "delivered", "placed_at": "2025-04-13T10:00:00Z", "items": 1, "total": 1.0}]


def listed(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"role": "user", "content": "hi"}, {"role": "tool", "content": json.dumps(rows), "tool_call_id": "c"}]


def test_the_note_reads_the_rows_in_order_up_to_the_one_meant():
    note = pick_note("the order I placed on April 16", "#W2", listed(ROWS))
    assert note == ('Looking for "the order I placed on April 16": #W1 pending 2026-05-14 (May 14); '
                    "#W2 delivered 2026-04-16 (April 16), this one.")  # fmt: skip
    assert pick_note("my most recent order", "#W1", listed(ROWS)).endswith(": #W1 pending 2026-05-14 (May 14), this one.")
    assert "#W3" in pick_note("my order from April 13", "#W3", listed(ROWS))


def test_no_note_without_a_list_that_holds_the_value():
    assert pick_note("the order I placed on April 16", "#W9", listed(ROWS)) == ""
    assert pick_note("x", "#W2", [{"role": "tool", "content": json.dumps(ROWS[1])}]) == ""  # an object, not a list
    assert pick_note("x", "#W2", [{"role": "tool", "content": "not json"}]) == ""
    assert pick_note("x", "#W2", [{"role": "user", "content": json.dumps(ROWS)}]) == ""  # the user's words


def test_the_spec_takes_explain():
    policy = make_policy("gold:explain=1")
    assert isinstance(policy, GoldPolicy) and policy.explain and policy.name == "gold:explain=1"
    assert not make_policy("gold").explain and not make_policy("gold:explain=0").explain
    with pytest.raises(ValueError, match="explain= takes 0 or 1"):
        make_policy("gold:explain=maybe")


# -- gold runs with notes ----------------------------------------------------------------------------------


def tool_call_texts(out: Path) -> list[tuple[Any, dict[str, Any], list[dict[str, Any]]]]:
    """(task id, the assistant turn, the messages before it) for every tool-call turn of a run."""
    found = []
    store = RunStore.open(out)
    try:
        for rec in chat_records(store):
            msgs = rec["messages"]
            found += [(rec["task_id"], m, msgs[:i]) for i, m in enumerate(msgs)
                      if m.get("role") == "assistant" and m.get("tool_calls")]  # fmt: skip
    finally:
        store.close()
    return found


@pytest.fixture(scope="module")
def info_tasks():
    return generate("retail", 40, seed=3, sampler="info").tasks


def test_a_gold_run_with_notes_explains_each_described_order_and_still_scores_perfect(info_tasks, tmp_path):
    result = run("retail", info_tasks, "gold:explain=1", out=tmp_path / "notes", report=False)
    assert result.successes == len(info_tasks)  # the scorer sees the explained run as the perfect one
    by_id = {t.id: t for t in info_tasks}
    explained = 0
    for task_id, turn, before in tool_call_texts(tmp_path / "notes"):
        task = by_id[task_id]
        described = {n.value: n.phrase for n in task.scenario.needs if isinstance(n.value, str)}
        used = [v for v in turn["tool_calls"][0]["function"]["arguments"].values() if v in described]
        if not turn["content"]:
            continue
        explained += 1
        assert used, f"{task_id}: a note on a call that uses no described value: {turn['content']}"
        value = used[0]
        rows = next(json.loads(m["content"]) for m in reversed(before) if m["role"] == "tool"
                    and isinstance(json.loads(m["content"]), list))  # fmt: skip
        ids = [next(v for v in r.values() if isinstance(v, str)) for r in rows]
        upto = ids[: ids.index(value) + 1]
        assert turn["content"].startswith(f'Looking for "{described[value]}": ')
        assert turn["content"].endswith(f"{value} {rows[len(upto) - 1]['status']} "
                                        f"{rows[len(upto) - 1]['placed_at'][:10]} "
                                        f"({spoken_date(rows[len(upto) - 1]['placed_at'])}), this one.")  # fmt: skip
        assert [part.split(" ")[0] for part in turn["content"].split(": ", 1)[1].split("; ")] == upto
    described_tasks = sum(any(n.slot == "order" for n in t.scenario.needs) for t in info_tasks)
    assert described_tasks >= 5 and explained >= described_tasks  # every described order got its note


def test_without_explain_tool_calls_carry_no_text(info_tasks, tmp_path):
    run("retail", info_tasks[:12], "gold", out=tmp_path / "plain", report=False)
    assert all(turn["content"] == "" for _, turn, _ in tool_call_texts(tmp_path / "plain"))


def test_notes_work_in_another_world_too(tmp_path):
    tasks = generate("helpdesk", 30, seed=1).tasks
    result = run("helpdesk", tasks, "gold:explain=1", out=tmp_path / "helpdesk", report=False)
    assert result.successes == len(tasks)
