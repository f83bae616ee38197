"""Rollout engine overhead per turn: 1,000 concurrent retail episodes driven by an instant mock policy.

Run: ``python benchmarks/rollout.py [--episodes N] [--concurrency C]``. Prints a human summary on stderr,
then one JSON object as the last stdout line.

The mock policy costs nothing and answers at once (it only yields to the event loop, as a real server call
would), so the CPU time measured is the engine's: starting and closing episodes, the loop, tool execution
through ``Episode.call``, the scripted user, trajectory building, the final change-set and state hash. It
issues a realistic session per episode: identify the customer by email, read their profile, read the
order, change its shipping address (a write), then answer. CPU per turn is ``time.process_time()`` over the
whole run divided by the number of assistant turns (goal: at most 0.5 ms).

Three runs of the same workload in one process: at a small concurrency (also warms code paths), then twice
at the full concurrency. The first full wave is "cold": the process must grow its heap to hold 1,000 live
episode databases (about 2 GB), and every new page is a page fault, which is slow on virtual machines.
The second wave reuses that memory: it is the steady state of a long rollout job, the headline figure.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import resource
import sqlite3
import sys
import tempfile
import time
from typing import Any

os.environ.setdefault("TOOLWORLD_CACHE", tempfile.mkdtemp(prefix="toolworld-bench-"))

from toolworld.records.messages import AssistantTurn
from toolworld.rollout.loop import Limits, run_many
from toolworld.tasks.model import Task
from toolworld.world import ToolCall, World, get_world

STREETS = ["12 Main Street", "400 Oak Avenue", "9 Harbor Road", "77 Pine Lane"]


class InstantSession:
    """Plays one customer-support session with no model cost: four tool calls, then an answer."""

    buffer = None

    def __init__(self, task: Task) -> None:
        self.email = task.user.known["email"]
        self.order = task.user.known["order_ids"][0]
        self.user_id = ""
        self.turn = 0

    async def respond(self, messages: list[dict[str, Any]]) -> AssistantTurn:
        await asyncio.sleep(0)  # a real policy awaits a server: let the other episodes run meanwhile
        call = self._next_call(messages)
        if call is None:
            return AssistantTurn(content="Your order now ships to the new address.", prompt_tokens=900,
                                 completion_tokens=12)  # fmt: skip
        return AssistantTurn(content="", tool_calls=[call], finish_reason="tool_calls", prompt_tokens=800,
                             completion_tokens=30)  # fmt: skip

    def _next_call(self, messages: list[dict[str, Any]]) -> ToolCall | None:
        self.turn += 1
        if self.turn == 1:
            call = ToolCall("find_user_by_email", {"email": self.email})
        elif self.turn == 2:
            self.user_id = json.loads(messages[-1]["content"])["user_id"]
            call = ToolCall("get_user_details", {"user_id": self.user_id})
        elif self.turn == 3:
            call = ToolCall("get_order_details", {"order_id": self.order})
        elif self.turn == 4:
            street = STREETS[len(self.order) % len(STREETS)]
            call = ToolCall("modify_pending_order_address", {"order_id": self.order, "line1": street,
                                                             "city": "Springfield", "state": "IL", "zip": "62704"})  # fmt: skip
        else:
            return None
        return call

    async def aclose(self) -> None:
        return None


class InstantPolicy:
    name = "instant-mock"

    def start(self, *, tools: list[dict[str, Any]], task: Task | None = None, seed: int = 0) -> InstantSession:
        assert task is not None
        return InstantSession(task)


def make_tasks(world: World, n: int) -> list[Task]:
    """One task per pending order (cycled when there are fewer orders than episodes)."""
    with world.episode(0) as ep:
        rows = ep.query("SELECT u.email, u.first_name, u.last_name, o.order_id FROM orders o "
                        "JOIN users u ON u.user_id = o.user_id WHERE o.status = 'pending' ORDER BY o.order_id")  # fmt: skip
    tasks = []
    for i in range(n):
        r = rows[i % len(rows)]
        tasks.append(Task.model_validate({
            "id": f"bench_{i:05d}", "world": world.name, "seed": 0, "kind": "action",
            "instruction": f"Please ship order {r['order_id']} to my new address.",
            "user": {"name": f"{r['first_name']} {r['last_name']}", "persona": "brief",
                     "known": {"email": r["email"], "order_ids": [r["order_id"]]}},
            "gold_actions": [], "expected_changes": {},
            "difficulty": {"path_length": 4, "writes": 1, "tools": [], "level": "easy"},
            "provenance": {"sampler": "benchmark", "targets": [], "generator_version": "bench", "index": i},
        }))  # fmt: skip
    return tasks


def measure(world: World, tasks: list[Task], concurrency: int) -> dict[str, Any]:
    limits = Limits(max_wall_s=None)
    usage0 = resource.getrusage(resource.RUSAGE_SELF)
    wall0, cpu0 = time.perf_counter(), time.process_time()
    trajs = asyncio.run(run_many(world, tasks, InstantPolicy(), trials=1, concurrency=concurrency, limits=limits))
    cpu = time.process_time() - cpu0
    wall = time.perf_counter() - wall0
    usage1 = resource.getrusage(resource.RUSAGE_SELF)
    turns = sum(t.num_turns for t in trajs)
    steps = [s for t in trajs for s in t.steps]
    assert all(t.termination == "answered" for t in trajs), {t.termination for t in trajs}
    assert all(s.ok for s in steps), [s.error for s in steps if not s.ok][:3]
    tool_s = sum(s.duration_s for s in steps)
    cpu1 = time.process_time()
    lines = [t.to_json() for t in trajs]
    to_json_s = time.process_time() - cpu1
    return {
        "episodes": len(trajs),
        "concurrency": concurrency,
        "turns": turns,
        "tool_calls": len(steps),
        "wall_s": round(wall, 3),
        "cpu_s": round(cpu, 3),
        "cpu_ms_per_turn": round(cpu * 1000 / turns, 4),
        "sys_ms_per_turn": round((usage1.ru_stime - usage0.ru_stime) * 1000 / turns, 4),
        "page_faults": usage1.ru_minflt - usage0.ru_minflt,
        "tool_ms_per_call": round(tool_s * 1000 / len(steps), 4),
        "turns_per_s": round(turns / wall, 1),
        "to_json_ms_per_episode": round(to_json_s * 1000 / len(trajs), 4),
        "trajectory_bytes_mean": round(sum(map(len, lines)) / len(lines)),
    }


def measure_direct(world: World, tasks: list[Task]) -> dict[str, Any]:
    """The world's share: the same episodes and calls made directly, one after another, with no loop."""
    cpu0 = time.process_time()
    for task in tasks:
        session = InstantSession(task)
        ep = world.episode(task.seed)
        messages: list[dict[str, Any]] = []
        for _ in range(4):
            call = session._next_call(messages)
            messages.append({"content": ep.call(call.name, call.arguments).content})
        ep.changes().to_dict()
        ep.state_hash()
        ep.close()
    cpu = time.process_time() - cpu0
    return {"cpu_ms_per_turn": round(cpu * 1000 / (5 * len(tasks)), 4)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=1000, help="episodes (one task each)")
    parser.add_argument("--concurrency", type=int, default=1000, help="episodes alive at once")
    parser.add_argument("--small-concurrency", type=int, default=8, help="the comparison run's concurrency")
    opts = parser.parse_args()
    world = get_world("retail")
    world.seed_image(0)  # build or load the seed image outside the measurement
    tasks = make_tasks(world, opts.episodes)
    small = measure(world, tasks, opts.small_concurrency)  # also warms imports and caches
    direct = measure_direct(world, tasks)
    cold = measure(world, tasks, opts.concurrency)  # the process grows its heap for all live episodes
    warm = measure(world, tasks, opts.concurrency)  # steady state: that memory is reused
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    result = {
        "benchmark": "rollout",
        "world": "retail",
        "policy": "instant-mock",
        "episodes": opts.episodes,
        "concurrency": opts.concurrency,
        "turns_per_episode": warm["turns"] / warm["episodes"],
        "cpu_ms_per_turn": warm["cpu_ms_per_turn"],
        "goal_cpu_ms_per_turn": 0.5,
        "tool_ms_per_call": warm["tool_ms_per_call"],
        "wall_s": warm["wall_s"],
        "turns_per_s": warm["turns_per_s"],
        "cold_cpu_ms_per_turn": cold["cpu_ms_per_turn"],
        "cold_sys_ms_per_turn": cold["sys_ms_per_turn"],
        "cold_page_faults": cold["page_faults"],
        "cold_wall_s": cold["wall_s"],
        "small_concurrency": opts.small_concurrency,
        "small_cpu_ms_per_turn": small["cpu_ms_per_turn"],
        "direct_cpu_ms_per_turn": direct["cpu_ms_per_turn"],
        "loop_overhead_ms_per_turn": round(small["cpu_ms_per_turn"] - direct["cpu_ms_per_turn"], 4),
        "to_json_ms_per_episode": warm["to_json_ms_per_episode"],
        "trajectory_bytes_mean": warm["trajectory_bytes_mean"],
        "peak_rss_mb": round(rss_mb, 1),
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "cpus": os.cpu_count(),
    }
    runs = ((f"concurrency {opts.small_concurrency}", small), (f"concurrency {opts.concurrency}, cold", cold),
            (f"concurrency {opts.concurrency}, warm", warm))  # fmt: skip
    for label, r in runs:
        print(f"{label:>24}: {r['episodes']} episodes, {r['turns']} turns in {r['wall_s']} s wall; "
              f"CPU {r['cpu_ms_per_turn']} ms/turn (system {r['sys_ms_per_turn']}, {r['page_faults']} page faults; "
              f"tools {r['tool_ms_per_call']} ms/call)",
              file=sys.stderr)  # fmt: skip
    print(f"{'no loop':>24}: the same episodes and calls made directly: CPU {direct['cpu_ms_per_turn']} ms/turn, so "
          f"the loop adds {result['loop_overhead_ms_per_turn']} ms/turn", file=sys.stderr)  # fmt: skip
    print(f"peak RSS {result['peak_rss_mb']} MB", file=sys.stderr)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
