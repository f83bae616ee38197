"""How the loop treats what a turn carries: a turn cut by the token limit never runs its calls, tool-call ids are
unique within an episode, and token-level turns that recorded no sampled ids are marked."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from rollout_kit import make_task, retail, shared_tokenizer, tool_call_ids_answered
from toolworld.records.messages import AssistantTurn
from toolworld.rollout.backends import ScriptedPolicy
from toolworld.rollout.loop import Limits, run_episode
from toolworld.rollout.token_policy import Generation, TokenPolicy
from toolworld.tokens import TokenBuffer
from toolworld.world import ToolCall

FAST = Limits(infra_backoff_s=0.0, max_wall_s=None)


@pytest.fixture(scope="module")
def cancel(world: Any) -> Any:
    return make_task("cancel", world=world)


@pytest.fixture(scope="module")
def smol() -> Any:
    return shared_tokenizer("smollm2-135m-instruct")


class CutEngine:
    """Samples each scripted (text, finish reason) as SmolLM2 ids; a "stop" turn ends with <|im_end|>."""

    def __init__(self, tokenizer: Any, turns: list[tuple[str, str]]) -> None:
        self.tokenizer = tokenizer
        self.turns = list(turns)

    async def generate(self, prompt_ids: list[int], **kwargs: Any) -> Generation:
        text, finish = self.turns.pop(0) if self.turns else ("That is all.", "stop")
        ids = self.tokenizer.encode(text, add_special_tokens=False)
        if finish == "stop":
            ids.append(self.tokenizer.convert_tokens_to_ids("<|im_end|>"))
        return Generation(ids, [-0.5] * len(ids), finish)  # type: ignore[arg-type]


def test_a_turn_cut_by_the_token_limit_never_runs_its_half_written_call(world, cancel, smol):
    order = cancel.gold_actions[-1].arguments["order_id"]
    lookup = f'<tool_call>\n{{"name": "get_order_details", "arguments": {{"order_id": "{order}"}}}}\n</tool_call>'
    # cut inside the order id: a lenient parser still reads a call out of it
    cut = f'<tool_call>\n{{"name": "cancel_pending_order", "arguments": {{"order_id": "{order[:5]}'
    engine = CutEngine(smol, [(lookup, "stop"), (cut, "length")])
    policy = TokenPolicy(engine, smol, name="cut", max_tokens=64)
    traj = asyncio.run(run_episode(world, cancel, policy, limits=FAST))
    assert traj.termination == "max_tokens"
    assert [s.name for s in traj.steps] == ["get_order_details"]  # the cut call never ran
    assert traj.changes == {} and not traj.agent_errors
    assert [t.finish_reason for t in traj.turns] == ["tool_calls", "length"]
    buf = TokenBuffer.from_dict(traj.token_buffer)
    assert smol.decode(buf.sampled_ids()).endswith(order[:5])  # what was sampled is kept as sampled


def test_a_length_cut_turn_is_reported_as_length_even_when_a_call_parses(smol):
    call = '<tool_call>\n{"name": "get_order_details", "arguments": {"order_id": "#W1"}}\n</tool_call>'
    policy = TokenPolicy(CutEngine(smol, [(call, "length")]), smol, name="cut", max_tokens=64)
    session = policy.start(tools=retail().openai_tools())
    turn = asyncio.run(session.respond([{"role": "system", "content": "s"}, {"role": "user", "content": "hi"}]))
    assert turn.finish_reason == "length"


def test_reused_and_missing_tool_call_ids_become_unique_and_answers_follow_them(world, cancel):
    gold = cancel.gold_actions
    script = [
        [ToolCall(gold[0].name, gold[0].arguments, "call_0")],
        [ToolCall(gold[1].name, gold[1].arguments, "call_0"), ToolCall(gold[1].name, gold[1].arguments, "call_0")],
        [ToolCall(gold[2].name, gold[2].arguments, None)],
        [ToolCall(gold[1].name, gold[1].arguments, "call_1_0")],  # the id the loop gave a call earlier
    ]
    traj = asyncio.run(run_episode(world, cancel, ScriptedPolicy(script), limits=FAST))
    ids = [c["id"] for m in traj.messages if m["role"] == "assistant" for c in m.get("tool_calls", [])]
    assert ids == ["call_0", "call_1_0", "call_1_1", "call_2_0", "call_3_0"]
    assert len(set(ids)) == len(ids) and tool_call_ids_answered(traj.messages)
    assert [s.call_id for s in traj.steps] == ids
    assert traj.turns[1].meta["renamed_call_ids"] == {"call_1_0": "call_0", "call_1_1": "call_0"}
    assert traj.turns[3].meta["renamed_call_ids"] == {"call_3_0": "call_1_0"}
    assert "renamed_call_ids" not in traj.turns[0].meta and "renamed_call_ids" not in traj.turns[2].meta
    assert traj.changes == cancel.expected_changes


def test_a_token_turn_without_sampled_ids_is_marked(world, cancel):
    empty = AssistantTurn(content="", finish_reason="length", token_ids=[], logprobs=[])
    text = AssistantTurn(content="Hello, how can I help?")  # a text policy: no ids expected, nothing to mark
    traj = asyncio.run(run_episode(world, cancel, ScriptedPolicy([text, empty]), limits=FAST))
    assert [t.meta.get("no_sampled_ids", False) for t in traj.turns] == [False, True]


# -- counted in summary.json and shown in the report ---------------------------------------------------------


def test_breaks_divergences_empty_turns_and_renames_are_counted_in_the_summary_and_report(world, cancel, tmp_path):
    from toolworld.report import write_report
    from toolworld.report.render import warnings
    from toolworld.scoring import score_trajectory, summarize

    gold = cancel.gold_actions
    reused = [[ToolCall(a.name, a.arguments, "call_0")] for a in gold]
    clean = asyncio.run(run_episode(world, cancel, ScriptedPolicy([[ToolCall(a.name, a.arguments)] for a in gold]),
                                    limits=FAST))  # fmt: skip
    renamed = asyncio.run(run_episode(world, cancel, ScriptedPolicy(reused), trial=1, limits=FAST))
    empty = AssistantTurn(content="", finish_reason="length", token_ids=[], logprobs=[])
    cut = asyncio.run(run_episode(world, cancel, ScriptedPolicy([empty]), trial=2, limits=FAST))
    events = [{"kind": "break", "reason": "r", "at_token": 5}, {"kind": "break", "reason": "r", "at_token": 9},
              {"kind": "divergence", "reason": "d", "at_token": 9}, {"kind": "stop_token", "reason": "s", "at_token": 3}]
    cut = cut.model_copy(update={"token_buffer": {"ids": [], "mask": [], "logprobs": [], "message_index": [],
                                                  "breaks": 2, "events": events}})  # fmt: skip
    trajs = [clean, renamed, cut]
    scores = [score_trajectory(cancel, t) for t in trajs]
    summary = summarize({cancel.id: cancel}, trajs, scores, trials=3).model_dump(mode="json")
    assert summary["token_integrity"] == {"bridge_breaks": 2, "divergences": 1, "turns_without_sampled_ids": 1,
                                          "rescored_logprobs": 0, "renamed_call_ids": 2, "episodes_affected": 2}
    assert any("2 template bridge break" in w and "1 token-level turn(s) without sampled ids" in w
               for w in warnings(summary))  # fmt: skip
    rows = [{"task": cancel.model_dump(mode="json"), "trajectory": t.model_dump(mode="json"),
             "score": s.model_dump(mode="json")} for t, s in zip(trajs, scores, strict=True)]  # fmt: skip
    html = write_report(tmp_path, summary, rows, config={}).read_text()
    assert "template bridge breaks" in html and "turns without sampled ids" in html
    assert "The token record is not exact everywhere" in html
    quiet = summarize({cancel.id: cancel}, [clean], [scores[0]], trials=1).model_dump(mode="json")
    assert quiet["token_integrity"]["episodes_affected"] == 0 and not any("token record" in w for w in warnings(quiet))


def test_the_loop_never_runs_the_calls_of_a_length_cut_turn_from_any_backend(world, cancel):
    """A text backend (OpenAI-compatible) reports finish "length" with whatever calls it parsed: none run."""
    gold = cancel.gold_actions
    cut = AssistantTurn(content="", tool_calls=[ToolCall(gold[2].name, gold[2].arguments, "c1")], finish_reason="length")
    traj = asyncio.run(run_episode(world, cancel, ScriptedPolicy([cut]), limits=FAST))
    assert traj.termination == "max_tokens" and traj.steps == [] and traj.changes == {}
