"""Episode costs at retail scale: seed build, start, fork, tool calls, change-sets, state hash.

Run: ``python benchmarks/episode.py [--repeat N] [--world NAME]``. Prints a human summary, then one JSON object
as the last line. The naive baseline (rebuilding the state from the generator, as environments without
snapshots do per episode) is measured in the same run, so the ratio is meaningful on a noisy machine.

Retail's read and write calls are fixed (its figures are in docs/benchmarks.md). Any other world's come from its
tour: the first read and the first write that succeed; each timed write runs on a fresh fork (a write seldom
succeeds twice), and the change-set and state hash are timed after all of the tour's successful writes.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import platform
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

os.environ.setdefault("TOOLWORLD_CACHE", tempfile.mkdtemp(prefix="toolworld-bench-"))

from toolworld.check import CheckError, load_world
from toolworld.world import Rng


def timed(fn: Callable[[], Any], repeat: int, setup: Callable[[], Any] | None = None) -> float:
    """Median seconds of ``fn`` over ``repeat`` runs (``setup`` runs untimed before each)."""
    samples = []
    for _ in range(repeat):
        if setup is not None:
            setup()
        t = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t)
    return statistics.median(samples)


def retail_calls(world: Any, ep: Any, n: int) -> dict[str, Any]:
    """Retail's fixed calls: a lookup by email, an order's details, an address change, 20 cancellations."""
    user = ep.query("SELECT email, user_id FROM users ORDER BY user_id LIMIT 1")[0]
    order_id = ep.query("SELECT order_id FROM orders WHERE status = 'delivered' ORDER BY order_id LIMIT 1")[0]["order_id"]
    simple_read = timed(lambda: ep.call("find_user_by_email", {"email": user["email"]}), n * 5)
    order_read = timed(lambda: ep.call("get_order_details", {"order_id": order_id}), n * 5)
    args_json = json.dumps({"order_id": order_id})
    order_read_json = timed(lambda: ep.call("get_order_details", args_json), n * 5)
    ep.history.clear()

    pending = [r["order_id"] for r in ep.query("SELECT order_id FROM orders WHERE status = 'pending' ORDER BY order_id")]
    addresses = [
        {"line1": "1 Infinite Loop", "city": "Cupertino", "state": "CA", "zip": "95014"},
        {"line1": "350 Fifth Avenue", "city": "New York", "state": "NY", "zip": "10118"},
    ]
    toggle = iter(range(10**9))
    w_ep = world.episode(0)

    def write() -> None:
        i = next(toggle)
        r = w_ep.call("modify_pending_order_address", {"order_id": pending[0], **addresses[i % 2]})
        assert r.ok, r.error

    write_call = timed(write, n * 2)
    w_ep.close()

    ep20 = world.episode(0)
    for oid in pending[:20]:
        assert ep20.call("cancel_pending_order", {"order_id": oid, "reason": "no longer needed"}).ok
    n_changes = len(ep20.changes())

    def uncache() -> None:
        ep20._changes_cache = None

    changes_20 = timed(ep20.changes, n, setup=uncache)
    state_hash_20 = timed(ep20.state_hash, n, setup=uncache)
    content_hash = timed(ep20.content_hash, 5)
    return {
        "read_call_simple_us": round(simple_read * 1e6, 2),
        "read_call_order_details_us": round(order_read * 1e6, 2),
        "read_call_order_details_json_args_us": round(order_read_json * 1e6, 2),
        "write_call_us": round(write_call * 1e6, 2),
        "changes_after_20_writes_ms": round(changes_20 * 1e3, 4),
        "changes_rows_after_20_writes": n_changes,
        "state_hash_after_20_writes_ms": round(state_hash_20 * 1e3, 4),
        "content_hash_full_scan_ms": round(content_hash * 1e3, 2),
    }


def tour_calls(world: Any, ep: Any, n: int) -> dict[str, Any]:
    """Another world's calls, taken from its tour: the first successful read and write, and all its writes."""
    if world.tour is None:
        raise SystemExit(f"world {world.name!r} has no tour to take a read and a write call from")
    reads, writes = [], []
    with world.episode(0) as probe:
        for step in world.tour(probe):
            if step.call is None:
                continue
            result = probe.call(step.call.name, dict(step.call.arguments))
            if result.ok:
                (writes if result.mutates else reads).append(step.call)
    if not reads or not writes:
        raise SystemExit(f"the tour of {world.name!r} needs a read and a write that succeed")
    read = reads[0]
    args_json = json.dumps(read.arguments)
    simple_read = timed(lambda: ep.call(read.name, read.arguments), n * 5)
    read_json = timed(lambda: ep.call(read.name, args_json), n * 5)
    ep.history.clear()
    base = world.episode(0)
    forks: list[Any] = []
    write = writes[0]

    def fresh_fork() -> None:
        while forks:
            forks.pop().close()
        forks.append(base.fork())

    def one_write() -> None:
        assert forks[-1].call(write.name, dict(write.arguments)).ok

    write_call = timed(one_write, n, setup=fresh_fork)
    while forks:
        forks.pop().close()
    for call in writes:
        base.call(call.name, dict(call.arguments))
    n_changes = len(base.changes())

    def uncache() -> None:
        base._changes_cache = None

    changes = timed(base.changes, n, setup=uncache)
    state_hash = timed(base.state_hash, n, setup=uncache)
    content_hash = timed(base.content_hash, 5)
    base.close()
    return {
        "read_call": read.name,
        "read_call_us": round(simple_read * 1e6, 2),
        "read_call_json_args_us": round(read_json * 1e6, 2),
        "write_call": write.name,
        "write_call_us": round(write_call * 1e6, 2),
        "tour_writes": len(writes),
        "changes_after_tour_writes_ms": round(changes * 1e3, 4),
        "changes_rows_after_tour_writes": n_changes,
        "state_hash_after_tour_writes_ms": round(state_hash * 1e3, 4),
        "content_hash_full_scan_ms": round(content_hash * 1e3, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=300, help="repetitions of each fast measurement")
    parser.add_argument("--world", default="retail", help="world to measure: an installed world's name or the folder "
                        "of a world package, as `toolworld check-world` takes (default: retail)")  # fmt: skip
    opts = parser.parse_args()
    n = opts.repeat
    try:
        world = load_world(opts.world).world
    except CheckError as exc:  # a usage error, not a crash: say what exists and exit 2 as argparse does
        parser.error(str(exc))

    def naive_rebuild() -> None:
        db = sqlite3.connect(":memory:", isolation_level=None)
        db.executescript(world.schema)
        db.execute("BEGIN")
        world.seed_data(db, Rng(0).child(world.name))
        db.execute("COMMIT")
        db.close()

    cold_build = timed(lambda: world.seed_image(0), 1, setup=world._images.clear)  # empty disk cache: builds
    cached_load = timed(lambda: world.seed_image(0), 9, setup=world._images.clear)  # from the disk cache
    naive = timed(naive_rebuild, 5)
    image, _ = world.seed_image(0)
    episode_start = timed(lambda: world.episode(0).close(), n)

    ep = world.episode(0)
    # Steady state of a concurrent pool: 64 forks alive, the oldest closed as a new one is taken (how task
    # synthesis and rollouts use them). Memory freed by closed episodes is reused.
    ring: collections.deque[Any] = collections.deque()
    samples = []
    for _ in range(n * 2):
        t = time.perf_counter()
        ring.append(ep.fork())
        samples.append(time.perf_counter() - t)
        if len(ring) > 64:
            ring.popleft().close()
    fork, fork_p90 = statistics.median(samples), statistics.quantiles(samples, n=10)[-1]
    while ring:
        ring.popleft().close()
    # Every fork kept alive: each one touches fresh memory, so first-touch page faults dominate.
    kept: list[Any] = []
    fork_retained = timed(lambda: kept.append(ep.fork()), n)
    for f in kept:
        f.close()

    calls = retail_calls(world, ep, n) if world.name == "retail" else tour_calls(world, ep, n)
    stats = world.stats(0)

    result = {
        "benchmark": "episode",
        "world": world.name,
        "rows": stats["rows"],
        "image_bytes": len(image),
        "seed_build_cold_ms": round(cold_build * 1e3, 2),
        "seed_build_cached_ms": round(cached_load * 1e3, 3),
        "naive_rebuild_ms": round(naive * 1e3, 2),
        "episode_start_ms": round(episode_start * 1e3, 4),
        "fork_ms": round(fork * 1e3, 4),
        "fork_p90_ms": round(fork_p90 * 1e3, 4),
        "fork_retained_ms": round(fork_retained * 1e3, 4),
        "fork_speedup_vs_naive": round(naive / fork, 1),
        **calls,
        "repeat": n,
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "cpus": os.cpu_count(),
    }
    goals = {"fork_ms": 1.0, "changes_after_20_writes_ms": 1.0, "read_call_simple_us": 40.0,
             "changes_after_tour_writes_ms": 1.0, "read_call_us": 40.0}
    for key, value in result.items():
        mark = ""
        if key in goals:
            mark = "  goal <= {} {}".format(goals[key], "OK" if value <= goals[key] else "MISSED")
        print(f"{key:40s} {value}{mark}", file=sys.stderr)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
