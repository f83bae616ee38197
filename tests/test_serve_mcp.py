"""``toolworld serve``: a world over MCP, driven by the official SDK's client over stdio and streamable HTTP.

What a client relies on: the world's tools with their exact schemas, the policy as instructions, tool errors as
MCP error results carrying the model's observation, one episode per session (a write is seen by its own session
and by no other), the bearer token, the evaluator tools, and the task a server is started on.
"""

from __future__ import annotations

import asyncio
import json
import os
import queue
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

pytest.importorskip("mcp")
uvicorn = pytest.importorskip("uvicorn")

import httpx  # noqa: E402
import httpx2  # noqa: E402
from mcp import Client, StdioServerParameters  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from mcp.shared.exceptions import MCPError  # noqa: E402
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS  # noqa: E402

from toolworld.cli import app  # noqa: E402
from toolworld.env import ToolEnv  # noqa: E402
from toolworld.serve import ServeError  # noqa: E402
from toolworld.serve.mcp import EVALUATOR_TOOLS, bind_socket, build_server, http_app  # noqa: E402
from toolworld.tasks import Task  # noqa: E402
from toolworld.tasks.generate import generate  # noqa: E402
from toolworld.world import get_world  # noqa: E402

WORLD = get_world("retail")
ROOT = Path(__file__).resolve().parents[1]
STARTUP_S = 90.0  # generous: a cold interpreter importing the SDK on a loaded 2-core machine


def _pending_order(seed: int = 0) -> str:
    with WORLD.episode(seed) as ep:
        return ep.query("SELECT order_id FROM orders WHERE status = 'pending' ORDER BY order_id LIMIT 1")[0]["order_id"]


def _seed_hash(seed: int) -> str:
    with WORLD.episode(seed) as ep:
        return ep.state_hash()


def _text(result: Any) -> str:
    assert len(result.content) == 1 and result.content[0].type == "text"
    return result.content[0].text


async def _status(client: Client, order_id: str) -> str:
    result = await client.call_tool("get_order_details", {"order_id": order_id})
    assert not result.is_error, _text(result)
    return json.loads(_text(result))["status"]


async def _hash(client: Client) -> str:
    return json.loads(_text(await client.call_tool("toolworld_state_hash", {})))["state_hash"]


def _env() -> dict[str, str]:
    # The child must use this session's seed cache (conftest) and find the checkout's package.
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


@pytest.fixture(scope="module")
def task_file(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Task]:
    """A real task at a seed other than 0 with an expected output, so seeding and scoring are both visible."""
    report = generate(WORLD, 4, seed=3, sampler="target")
    tasks = [Task.model_validate_json(line) for line in report.lines]
    task = next(t for t in tasks if t.expected_outputs)
    path = tmp_path_factory.mktemp("serve") / "tasks.jsonl"
    path.write_text("".join(t.to_json() + "\n" for t in tasks), encoding="utf-8")
    return path, task


# -- stdio: the command an MCP client launches -------------------------------------------------------------------


def test_stdio_subprocess_serves_the_world_with_its_schemas_policy_and_errors():
    params = StdioServerParameters(command=sys.executable, args=["-m", "toolworld", "serve", "retail"], env=_env(),
                                   cwd=str(ROOT))  # fmt: skip
    order = _pending_order()
    with WORLD.episode(0) as ep:
        model_sees = ep.call("get_order_details", {"order_id": "#W0000000"}).content

    async def session() -> None:
        async with Client(params) as client:
            assert client.instructions == WORLD.policy
            tools = (await client.list_tools()).tools
            specs = {s["function"]["name"]: s["function"] for s in WORLD.openai_tools()}
            assert [t.name for t in tools] == list(specs)  # and no evaluator tool without the flag
            for tool in tools:
                assert tool.input_schema == specs[tool.name]["parameters"]
                assert tool.description == specs[tool.name]["description"]
            assert {t.name for t in tools if t.annotations and t.annotations.read_only_hint is False} == {
                name for name, t in WORLD.tools.items() if t.mutates}

            assert await _status(client, order) == "pending"
            bad = await client.call_tool("get_order_details", {"order_id": "#W0000000"})
            assert bad.is_error and _text(bad) == model_sees
            assert json.loads(_text(bad))["error"]["type"] == "not_found"
            unknown = await client.call_tool("toolworld_state_hash", {})
            assert unknown.is_error and json.loads(_text(unknown))["error"]["type"] == "unknown_tool"

            done = await client.call_tool("cancel_pending_order", {"order_id": order, "reason": "no longer needed"})
            assert not done.is_error, _text(done)
            assert await _status(client, order) == "cancelled"  # the session's own write is seen

    asyncio.run(asyncio.wait_for(session(), STARTUP_S))


# -- streamable HTTP: the command with a token, a task and the evaluator tools -------------------------------------


@contextmanager
def _cli_http_server(*args: str, token: str) -> Iterator[str]:
    """Start `toolworld serve ... --http 0` (token from $TOOLWORLD_TOKEN) and yield the URL it prints."""
    env = {**_env(), "TOOLWORLD_TOKEN": token}
    proc = subprocess.Popen([sys.executable, "-m", "toolworld", "serve", *args, "--http", "0"], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)  # fmt: skip
    lines: queue.Queue[str] = queue.Queue()
    seen: list[str] = []

    def drain() -> None:  # keeps reading, so a chatty server can never block on a full pipe
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.put(line)
        lines.put("")

    threading.Thread(target=drain, daemon=True).start()
    try:
        deadline = time.monotonic() + STARTUP_S
        while not any("/mcp" in line for line in seen):
            try:
                line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                line = ""
            if not line:
                pytest.fail(f"server did not announce its URL (exit code {proc.poll()}); stderr: {''.join(seen)!r}")
            seen.append(line)
        yield next(word for word in "".join(seen).split() if word.startswith("http://") and word.endswith("/mcp"))
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_http_subprocess_wants_the_token_and_serves_the_task_with_evaluator_tools(task_file):
    path, task = task_file
    token = "s3cret-token"
    with _cli_http_server("retail", "--task", str(path), "--task-id", task.id, "--evaluator-tools",
                          token=token) as url:  # fmt: skip
        hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}  # fmt: skip
        accept = {"Accept": "application/json, text/event-stream"}
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {token}"},
                        {"Authorization": f"Bearer {token}x"}):  # fmt: skip
            refused = httpx.post(url, json=hello, headers={**accept, **headers}, timeout=30)
            assert refused.status_code == 401, headers
            assert refused.headers["www-authenticate"].startswith("Bearer")
            assert refused.json()["error"]["type"] == "unauthorized"
        assert httpx.post(url, json=hello, headers={**accept, "Authorization": f"Bearer {token}"},
                          timeout=30).status_code == 200  # fmt: skip

        async def session() -> None:
            async with (
                httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http,
                Client(streamable_http_client(url, http_client=http)) as client,
            ):
                names = [t.name for t in (await client.list_tools()).tools]
                assert names == [*WORLD.tools, *EVALUATOR_TOOLS]
                assert await _hash(client) == _seed_hash(task.seed) != _seed_hash(0)  # the task's seed

                before = json.loads(_text(await client.call_tool("toolworld_score", {})))
                assert before["task_id"] == task.id and not before["success"]
                for action in task.gold_actions:
                    result = await client.call_tool(action.name, action.arguments)
                    assert not result.is_error, (action.name, _text(result))
                assert json.loads(_text(await client.call_tool("toolworld_changes", {}))) == task.expected_changes

                said = [f"Done: your {o.label.replace('_', ' ')} is ${o.value}." for o in task.expected_outputs]
                silent = json.loads(_text(await client.call_tool("toolworld_score", {})))
                told = json.loads(_text(await client.call_tool("toolworld_score", {"replies": said})))
                passed = {c["name"]: c["passed"] for c in told["components"]}
                assert passed["state"] and passed["outputs"]
                assert not {c["name"]: c["passed"] for c in silent["components"]}["outputs"]
                assert told["reward"] > silent["reward"] > before["reward"]
                bad = await client.call_tool("toolworld_score", {"replies": "not a list"})
                assert bad.is_error and json.loads(_text(bad))["error"]["type"] == "invalid_arguments"

        asyncio.run(asyncio.wait_for(session(), STARTUP_S))


# -- sessions: one episode each, closed when the session ends ---------------------------------------------------


@pytest.fixture
def closes(monkeypatch: pytest.MonkeyPatch) -> threading.Semaphore:
    """Released once per ToolEnv.close, from whichever thread serves the session."""
    released = threading.Semaphore(0)
    original = ToolEnv.close
    closed: list[ToolEnv] = []  # held, so that no two environments of a test share an identity

    async def counted(self: ToolEnv) -> None:
        await original(self)
        if not any(env is self for env in closed):  # close is idempotent: count each environment once
            closed.append(self)
            released.release()

    monkeypatch.setattr(ToolEnv, "close", counted)
    return released


@contextmanager
def _http_in_thread(server: Any, token: str | None = None) -> Iterator[str]:
    sock = bind_socket("127.0.0.1", 0)
    srv = uvicorn.Server(uvicorn.Config(http_app(server, token=token), log_level="warning", lifespan="on"))
    thread = threading.Thread(target=asyncio.run, args=(srv.serve(sockets=[sock]),), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    finally:
        srv.should_exit = True
        thread.join(30)
        sock.close()


def test_http_sessions_do_not_see_each_others_writes_and_end_with_their_episode(closes):
    server = build_server(WORLD, seed=0, evaluator_tools=True)
    order, start = _pending_order(), _seed_hash(0)

    async def sessions(url: str) -> None:
        async with Client(url) as b:
            async with Client(url) as a:
                assert a.protocol_version in HANDSHAKE_PROTOCOL_VERSIONS  # "auto" fell back to the handshake
                assert await _hash(a) == await _hash(b) == start
                done = await a.call_tool("cancel_pending_order", {"order_id": order, "reason": "no longer needed"})
                assert not done.is_error, _text(done)
                assert await _status(a, order) == "cancelled" and await _hash(a) != start
                assert await _status(b, order) == "pending" and await _hash(b) == start
            # a's session ended (HTTP DELETE) while b goes on
            assert await asyncio.to_thread(closes.acquire, timeout=30), "a's episode was not closed"
            assert await _status(b, order) == "pending"
        async with Client(url) as c:  # a new session starts from the seed, not from anyone's writes
            assert await _status(c, order) == "pending" and await _hash(c) == start
        async with Client(url, mode="2026-07-28") as stateless:
            with pytest.raises(MCPError, match="initialize handshake"):
                await stateless.call_tool("toolworld_state_hash", {})

    with _http_in_thread(server) as url:
        asyncio.run(asyncio.wait_for(sessions(url), STARTUP_S))
    assert closes.acquire(timeout=30) and closes.acquire(timeout=30)  # b and c


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
def test_in_process_sessions_are_isolated_in_both_protocol_eras(mode, closes):
    server = build_server("retail", evaluator_tools=True)
    order = _pending_order()

    async def sessions() -> None:
        async with Client(server, mode=mode) as a, Client(server, mode=mode) as b:
            await a.call_tool("cancel_pending_order", {"order_id": order, "reason": "no longer needed"})
            assert await _status(a, order) == "cancelled" and await _status(b, order) == "pending"
            assert json.loads(_text(await b.call_tool("toolworld_changes", {}))) == {}
            changed = json.loads(_text(await a.call_tool("toolworld_changes", {})))
            assert changed["orders"]["updated"][0]["key"] == [order]
            assert changed["orders"]["updated"][0]["changed"]["status"] == ["pending", "cancelled"]
        # both sessions' episodes were closed with them, once each
        assert closes.acquire(blocking=False) and closes.acquire(blocking=False)
        assert not closes.acquire(blocking=False)

    asyncio.run(sessions())


def test_without_a_task_there_is_no_score_tool_and_a_clashing_world_is_refused(monkeypatch):
    names = asyncio.run(_tool_names(build_server(WORLD, evaluator_tools=True)))
    assert names[-2:] == ["toolworld_changes", "toolworld_state_hash"] and "toolworld_score" not in names
    monkeypatch.setitem(WORLD.tools, "toolworld_changes", WORLD.tools["get_order_details"])
    with pytest.raises(ServeError, match="reserved for the evaluator tools") as err:
        build_server(WORLD, evaluator_tools=True)
    assert err.value.kind == "tool_name_clash"


async def _tool_names(server: Any) -> list[str]:
    async with Client(server) as client:
        return [t.name for t in (await client.list_tools()).tools]


# -- the command's errors, before anything is served --------------------------------------------------------------


def _fails(*args: str) -> dict[str, Any]:
    res = CliRunner().invoke(app, ["serve", *args], catch_exceptions=False)
    assert res.exit_code == 1, res.stdout
    return json.loads(res.stdout.strip().splitlines()[-1])["error"]


def test_bad_input_is_a_structured_error(task_file, tmp_path):
    path, task = task_file
    assert _fails("nowhere")["type"] == "unknown_world"
    assert _fails("retail", "--task", str(tmp_path / "missing.jsonl"), "--task-id", "x")["type"] == "file_not_found"
    err = _fails("retail", "--task", str(path), "--task-id", "t_nope")
    assert err["type"] == "unknown_task" and task.id in err["message"]
    assert _fails("retail", "--task", str(path))["type"] == "missing_option"  # four tasks: which one?
    assert _fails("retail", "--task-id", task.id)["type"] == "missing_option"
    assert _fails("retail", "--task", str(path), "--task-id", task.id, "--seed", "0")["type"] == "conflicting_options"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        err = _fails("retail", "--http", str(taken.getsockname()[1]))
    assert err["type"] == "port_in_use" and "--http 0" in err["message"]


def test_a_missing_sdk_names_the_extra(monkeypatch):
    import toolworld.serve

    monkeypatch.delitem(sys.modules, "toolworld.serve.mcp")
    monkeypatch.delattr(toolworld.serve, "mcp")
    monkeypatch.setitem(sys.modules, "mcp", None)
    err = _fails("retail")
    assert err["type"] == "missing_dependency" and "toolworld[serve]" in err["message"]


def test_importing_toolworld_does_not_import_the_sdk():
    code = "import sys, toolworld, toolworld.cli, toolworld.serve; print('mcp' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env(), check=True)
    assert out.stdout.strip() == "False"


def test_injected_noise_reaches_mcp_clients_as_tool_errors(monkeypatch):
    """--noise-fail makes calls fail transiently, as in a rollout: the client sees an error it can retry, and the
    world is untouched (the call never reached it)."""
    from toolworld.env import NoiseConfig
    from toolworld.serve import mcp as server_mod

    order = _pending_order()

    async def flaky() -> None:
        async with Client(build_server("retail", evaluator_tools=True, noise=NoiseConfig(tool_failure_p=1.0))) as c:
            result = await c.call_tool("cancel_pending_order", {"order_id": order, "reason": "no longer needed"})
            assert result.is_error and "temporarily_unavailable" in _text(result)
            assert json.loads(_text(await c.call_tool("toolworld_changes", {}))) == {}

    asyncio.run(flaky())

    seen: dict[str, Any] = {}

    async def fake_stdio(world: Any, **kwargs: Any) -> None:
        seen.update(kwargs)

    monkeypatch.setattr(server_mod, "serve_stdio", fake_stdio)
    res = CliRunner().invoke(app, ["serve", "retail", "--noise-fail", "0.25", "--noise-seed", "7"],
                             catch_exceptions=False)  # fmt: skip
    assert res.exit_code == 0, res.output
    assert seen["noise"] == NoiseConfig(tool_failure_p=0.25, seed=7)
