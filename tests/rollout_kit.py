"""Real retail tasks for the rollout tests, built the way task synthesis builds them: pick targets from the
seeded state, execute the gold actions on a fresh episode and record the change-set it produced."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

from toolworld.tasks.model import Task
from toolworld.world import World, get_world


def retail() -> World:
    return get_world("retail")


def _customer_with(ep: Any, status: str, index: int) -> dict[str, Any]:
    rows = ep.query(
        "SELECT u.user_id, u.email, u.first_name, u.last_name, o.order_id FROM users u "
        "JOIN orders o ON o.user_id = u.user_id WHERE o.status = ? ORDER BY o.order_id LIMIT 1 OFFSET ?",
        (status, index),
    )
    return rows[0]


def make_task(kind: str = "cancel", index: int = 0, world: World | None = None, seed: int = 0) -> Task:
    """A task of ``kind`` (cancel, address, refusal, info) whose expected changes come from executing its gold."""
    world = world or retail()
    with world.episode(seed) as ep:
        status = "delivered" if kind == "refusal" else "pending"
        row = _customer_with(ep, status, index)
        order = row["order_id"]
        identify = {"name": "find_user_by_email", "arguments": {"email": row["email"]}}
        look = {"name": "get_order_details", "arguments": {"order_id": order}}
        outputs: list[dict[str, str]] = []
        refusal = None
        if kind == "cancel":
            instruction = f"Please cancel my order {order}; I no longer need it."
            actions = [identify, look, {"name": "cancel_pending_order",
                                        "arguments": {"order_id": order, "reason": "no longer needed"}}]  # fmt: skip
        elif kind == "address":
            instruction = f"Please ship order {order} to 12 Main Street, Springfield, IL 62704 instead."
            actions = [identify, look, {"name": "modify_pending_order_address", "arguments": {
                "order_id": order, "line1": "12 Main Street", "city": "Springfield", "state": "IL", "zip": "62704"}}]  # fmt: skip
        elif kind == "refusal":
            instruction = f"Please cancel my order {order}; I ordered it by mistake."
            actions = [identify, look]
            forbidden = {"name": "cancel_pending_order", "arguments": {"order_id": order, "reason": "ordered by mistake"}}
            reason = ep.call(forbidden["name"], forbidden["arguments"]).error.message  # type: ignore[union-attr]
            refusal = {"rule": "R1", "reason": reason, "forbidden": forbidden}
        elif kind == "info":
            instruction = f"What is the status of my order {order}?"
            actions = [identify, look]
        else:
            raise ValueError(kind)
        last = None
        for action in actions:
            last = ep.call(action["name"], action["arguments"]).unwrap()
        if kind in ("cancel", "info", "address"):
            outputs = [{"label": "order_status", "value": str(last["status"])}]
        changes = ep.changes().to_dict()
    return Task.model_validate({
        "id": Task.content_id(world.name, seed, instruction, changes),
        "world": world.name,
        "seed": seed,
        "kind": "refusal" if kind == "refusal" else "info" if kind == "info" else "action",
        "instruction": instruction,
        "user": {"name": f"{row['first_name']} {row['last_name']}", "persona": "polite and brief",
                 "known": {"email": row["email"], "first_name": row["first_name"], "last_name": row["last_name"],
                           "order_ids": [order]}},
        "gold_actions": actions,
        "expected_changes": changes,
        "expected_outputs": outputs,
        "refusal": refusal,
        "difficulty": {"path_length": len(actions), "writes": int(kind in ("cancel", "address")),
                       "tools": [a["name"] for a in actions], "level": "easy"},
        "provenance": {"sampler": "test", "targets": [actions[-1]["name"]], "generator_version": "test", "index": index},
    })


def tool_call_ids_answered(messages: list[dict[str, Any]]) -> bool:
    """Every assistant tool call is answered by a tool message with its id, in order, before the next turn."""
    waiting: list[str] = []
    for msg in messages:
        if msg["role"] == "assistant":
            if waiting:
                return False
            waiting = [c["id"] for c in msg.get("tool_calls", [])]
        elif msg["role"] == "tool":
            if not waiting or msg["tool_call_id"] != waiting.pop(0):
                return False
        elif waiting:
            return False
    return not waiting


#: Real tokenizers and chat templates beside the checkout (see ../shared/tokenizers/README.md).
SHARED_TOKENIZERS = Path(__file__).resolve().parents[2] / "shared" / "tokenizers"


def shared_tokenizer(name: str) -> Any:
    """A real tokenizer from ``../shared/tokenizers/NAME``, or a skip saying which folder is missing."""
    import pytest

    folder = SHARED_TOKENIZERS / name
    if not folder.is_dir():
        pytest.skip(f"needs the real tokenizers of ../shared/tokenizers (see its README); {folder} is absent")
    transformers = pytest.importorskip("transformers")
    return transformers.AutoTokenizer.from_pretrained(str(folder), local_files_only=True)


def run(coro: Any) -> Any:
    """Run a coroutine to completion (tests are synchronous)."""
    import asyncio

    return asyncio.run(coro)


def load_benchmark(name: str) -> ModuleType:
    """``benchmarks/NAME.py`` loaded as a module: the benchmarks are scripts, not a package, but their helpers are
    what the published figures rest on, so tests call them directly."""
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "benchmarks" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"{name}_benchmark", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
