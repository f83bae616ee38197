"""A world as an MCP server (the official ``mcp`` SDK): its tools, its policy as the instructions, one episode per
client session.

Every MCP session gets its own :class:`~toolworld.env.ToolEnv`, reset to the world at the server's seed (or to
the loaded task), so two clients never see each other's writes; the episode is closed when the session ends.
Tool calls go through ``ToolEnv.call_tool``, so injected noise and the observation size limit apply exactly as
in a rollout, and a failing call comes back as an MCP tool error (``isError``) whose text is the observation a
model would have read.

Where a session lives depends on the protocol era the client speaks:

* the initialize handshake (protocol versions up to 2025-11-25): one episode per connection, kept in the
  connection's state and closed by its exit stack when the client disconnects (stdio EOF, HTTP ``DELETE``,
  the session manager's idle timeout);
* the 2026-07-28 protocol, where every request carries its own envelope and no connection outlives it: over a
  stream (stdio, or an in-process client) the stream is the session, so the episode lives as long as the
  server's run on it (its lifespan). Over HTTP nothing ties one request to the next, so the server tells
  clients that probe ``server/discover`` there that it speaks the handshake versions only (SDK clients in
  ``auto`` mode then fall back to the handshake and get a session), and refuses tool calls that arrive
  without one.

Evaluator tools (``--evaluator-tools``) let a harness look at the episode from outside: the change-set, the
state hash and, when a task is loaded, the score of the session so far. Their ``toolworld_`` names cannot be
mistaken for world tools, and a world that declares one of them is refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import socket
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
import mcp.types as mt
from mcp.server.connection import Connection
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

from ..core.errors import ToolworldError
from ..env import Limits, NoiseConfig, ToolEnv
from ..world import World, get_world
from . import ServeError

if TYPE_CHECKING:
    from ..tasks.model import Task

#: The evaluator tools, by name. ``toolworld_score`` is listed only when a task is loaded.
EVALUATOR_TOOLS: tuple[str, ...] = ("toolworld_changes", "toolworld_state_hash", "toolworld_score")
#: Where a handshake connection keeps its episode (``Connection.state`` is per-connection scratch space).
_STATE_KEY = "toolworld.episode"
#: Hosts only this machine can reach: anywhere else, serving without a token lets anyone drive episodes.
LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})


@dataclass(slots=True)
class _Slot:
    """One session's episode, created on the session's first request and closed with the session."""

    env: ToolEnv | None = None
    lock: anyio.Lock = field(default_factory=anyio.Lock)

    async def aclose(self) -> None:
        env, self.env = self.env, None
        if env is not None:
            await env.close()


@dataclass(frozen=True, slots=True)
class _Setup:
    """What every session's episode is made of."""

    world: World
    seed: int
    task: Task | None
    limits: Limits | None
    noise: NoiseConfig | None

    async def new_env(self) -> ToolEnv:
        # Scoring is on demand (toolworld_score), so closing a session costs no scoring work.
        env = ToolEnv(self.world, limits=self.limits, noise=self.noise, score=False)
        if self.task is not None:
            await env.reset(self.task)
        else:
            await env.reset(seed=self.seed)
        return env


def build_server(world: World | str, *, seed: int = 0, task: Task | None = None, evaluator_tools: bool = False,
                 limits: Limits | None = None, noise: NoiseConfig | None = None) -> Server[Any]:
    """An MCP server (low-level SDK ``Server``) for ``world``; serve it with :func:`serve_stdio`,
    :func:`serve_http`, or connect to it in-process with ``mcp.Client(server)``.

    Each session's episode starts at ``seed``, or at ``task.seed`` when a task is given (``seed`` is then
    ignored). ``evaluator_tools`` adds ``toolworld_changes`` and ``toolworld_state_hash``, and with a task
    ``toolworld_score``. ``limits`` and ``noise`` are the environment's (observation size limit, injected tool
    faults). Raises ``ServeError`` for a task of another world or a world tool named like an evaluator tool.
    """
    w = get_world(world) if isinstance(world, str) else world
    if task is not None and task.world != w.name:
        raise ServeError(f"task {task.id} is for world {task.world!r}, not {w.name!r}; pass a task of {w.name!r}",
                         kind="wrong_world")  # fmt: skip
    setup = _Setup(w, task.seed if task is not None else seed, task, limits, noise)
    evaluators = _evaluator_specs(task is not None) if evaluator_tools else {}
    clash = sorted(set(evaluators) & set(w.tools))
    if clash:
        raise ServeError(f"world {w.name!r} has a tool named {clash[0]!r}, which is reserved for the evaluator "
                         "tools; rename the world's tool or serve without --evaluator-tools", kind="tool_name_clash")  # fmt: skip
    listed = [_world_tool(spec, w) for spec in w.openai_tools()] + list(evaluators.values())
    handlers: dict[str, Callable[[ToolEnv, Mapping[str, Any]], Awaitable[mt.CallToolResult]]] = {
        "toolworld_changes": _changes,
        "toolworld_state_hash": _state_hash,
        "toolworld_score": _score,
    }

    @asynccontextmanager
    async def lifespan(_: Server[Any]) -> AsyncIterator[_Slot]:
        # The episode of a stream whose requests carry no connection of their own (2026-07-28 over stdio);
        # handshake connections keep theirs in the connection instead.
        slot = _Slot()
        try:
            yield slot
        finally:
            with anyio.CancelScope(shield=True):
                await slot.aclose()

    async def list_tools(ctx: ServerRequestContext[Any], params: mt.PaginatedRequestParams | None) -> mt.ListToolsResult:
        return mt.ListToolsResult(tools=listed)

    async def call_tool(ctx: ServerRequestContext[Any], params: mt.CallToolRequestParams) -> mt.CallToolResult:
        env = await _session_env(ctx, setup)
        arguments = params.arguments if params.arguments is not None else {}
        evaluator = handlers.get(params.name) if params.name in evaluators else None
        if evaluator is not None:
            return await evaluator(env, arguments)
        try:
            obs = await env.call_tool(params.name, dict(arguments))
        except ToolworldError as exc:  # the environment's own failure, not the agent's: a protocol error
            raise MCPError(code=mt.INTERNAL_ERROR, message=f"{exc.kind}: {exc}") from exc
        return _text(obs.content, error=not obs.ok)

    server: Server[Any] = Server(
        f"toolworld-{w.name}", version=_version(), title=f"toolworld: {w.name}", description=w.description,
        instructions=w.policy, lifespan=lifespan, on_list_tools=list_tools, on_call_tool=call_tool,
    )  # fmt: skip

    async def discover(ctx: ServerRequestContext[Any], params: mt.RequestParams | None) -> mt.DiscoverResult:
        # Over HTTP a 2026-07-28 request has no session to keep an episode in: advertise the handshake versions,
        # which SDK clients in "auto" mode read as "use the initialize handshake" (and so get a session).
        over_http = ctx.request is not None
        versions = HANDSHAKE_PROTOCOL_VERSIONS if over_http else MODERN_PROTOCOL_VERSIONS
        return mt.DiscoverResult(supported_versions=list(versions), instructions=server.instructions,
                                 capabilities=server.get_capabilities(protocol_version=ctx.protocol_version))  # fmt: skip

    server.add_request_handler("server/discover", mt.RequestParams, discover)
    return server


async def serve_stdio(world: World | str, *, seed: int = 0, task: Task | None = None, evaluator_tools: bool = False,
                      limits: Limits | None = None, noise: NoiseConfig | None = None) -> None:
    """Serve ``world`` over stdin/stdout until the client closes the stream (one client, one episode)."""
    from mcp.server.stdio import stdio_server

    server = build_server(world, seed=seed, task=task, evaluator_tools=evaluator_tools, limits=limits, noise=noise)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def http_app(server: Server[Any], *, host: str = "127.0.0.1", token: str | None = None) -> Any:
    """The ASGI app serving ``server`` over streamable HTTP at ``/mcp``, behind a bearer token when one is given.

    On a loopback ``host`` the SDK's DNS-rebinding protection is on (only loopback Host and Origin headers are
    accepted), so a web page the user visits cannot reach the server through the browser.
    """
    app = server.streamable_http_app(host=host)
    return BearerToken(app, token) if token else app


async def serve_http(world: World | str, *, seed: int = 0, task: Task | None = None, evaluator_tools: bool = False,
                     host: str = "127.0.0.1", port: int = 8000, token: str | None = None,
                     limits: Limits | None = None, noise: NoiseConfig | None = None,
                     announce: Callable[[str], None] | None = None) -> None:
    """Serve ``world`` over streamable HTTP at ``http://HOST:PORT/mcp`` until interrupted; one episode per MCP
    session. With ``token``, every request must carry ``Authorization: Bearer TOKEN`` (else 401).

    ``port`` 0 picks a free port. The socket is bound (and listening) before ``announce`` is called with the
    URL, so a client that connects as soon as it reads the URL is queued, not refused. Raises ``ServeError``
    (kind ``port_in_use`` or ``cannot_listen``) when the address cannot be bound.
    """
    import uvicorn

    server = build_server(world, seed=seed, task=task, evaluator_tools=evaluator_tools, limits=limits, noise=noise)
    app = http_app(server, host=host, token=token)
    sock = bind_socket(host, port)
    try:
        url = f"http://{_url_host(host)}:{sock.getsockname()[1]}/mcp"
        (announce or _stderr)(url)
        # A client holding its event stream open must not keep Ctrl-C from stopping the server for long.
        config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on", timeout_graceful_shutdown=5)
        await uvicorn.Server(config).serve(sockets=[sock])
    finally:
        sock.close()


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket on (host, port); ``ServeError`` with what to do when that address is unavailable."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise ServeError(f"cannot resolve --host {host!r} ({exc.strerror}); pass an address such as 127.0.0.1",
                         kind="cannot_listen") from None  # fmt: skip
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        # Rebinding a port whose previous server just exited (TIME_WAIT) is fine; a live listener still refuses.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
        sock.setblocking(False)
    except OSError as exc:
        sock.close()
        import errno

        if exc.errno == errno.EADDRINUSE:
            raise ServeError(f"port {port} on {host} is already in use; stop what listens there or pick another "
                             "port (--http 0 picks a free one)", kind="port_in_use") from None  # fmt: skip
        raise ServeError(f"cannot listen on {host}:{port}: {exc.strerror or exc}", kind="cannot_listen") from None
    return sock


class BearerToken:
    """ASGI middleware: HTTP requests without ``Authorization: Bearer <token>`` get 401.

    The comparison is of SHA-256 digests with ``hmac.compare_digest``, so neither the token's bytes nor its
    length can be learned from response times.
    """

    def __init__(self, app: Any, token: str) -> None:
        if not token:
            raise ValueError("an empty bearer token would let anyone in")
        self.app = app
        self._digest = hashlib.sha256(token.encode()).digest()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and not self._allowed(scope):
            body = json.dumps({"error": {"type": "unauthorized", "message": "missing or wrong bearer token: send "
                               "'Authorization: Bearer <token>' with the token the server was started with"}}).encode()  # fmt: skip
            await send({"type": "http.response.start", "status": 401, "headers": [
                (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                (b"www-authenticate", b'Bearer realm="toolworld"')]})  # fmt: skip
            await send({"type": "http.response.body", "body": body})
            return
        await self.app(scope, receive, send)

    def _allowed(self, scope: Mapping[str, Any]) -> bool:
        given = b""
        for name, value in scope.get("headers", ()):
            if name == b"authorization":
                scheme, _, credentials = value.partition(b" ")
                if scheme.lower() == b"bearer":
                    given = credentials.strip()
                break
        return hmac.compare_digest(hashlib.sha256(given).digest(), self._digest) and bool(given)


# -- sessions ---------------------------------------------------------------------------------------------------


async def _session_env(ctx: ServerRequestContext[Any], setup: _Setup) -> ToolEnv:
    """This session's episode, started on its first request."""
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        if ctx.request is not None:
            raise MCPError(code=mt.INVALID_REQUEST, message=(
                "this server keeps one episode per MCP session, and a 2026-07-28 request over HTTP has none; "
                "connect with the initialize handshake (mcp SDK: Client(url, mode='legacy'), or the default 'auto')"))  # fmt: skip
        slot = ctx.lifespan_context
        if not isinstance(slot, _Slot):  # pragma: no cover - only a server built elsewhere gets here
            raise MCPError(code=mt.INTERNAL_ERROR, message="server lifespan holds no episode slot")
    else:
        connection = _connection(ctx)
        slot = connection.state.get(_STATE_KEY)
        if slot is None:
            slot = connection.state[_STATE_KEY] = _Slot()
            connection.exit_stack.push_async_callback(slot.aclose)
    async with slot.lock:
        if slot.env is None:
            slot.env = await setup.new_env()
    if slot.env.episode is None:  # the world could not start (a broken seed image): ours, and not retryable here
        why = slot.env.infra_errors[-1]["message"] if slot.env.infra_errors else "unknown cause"
        raise MCPError(code=mt.INTERNAL_ERROR, message=f"the episode could not start: {why}")
    return slot.env


def _connection(ctx: ServerRequestContext[Any]) -> Connection:
    # The SDK's per-connection state and teardown (Connection.state / exit_stack) are documented for handlers,
    # but the request context it builds today reaches the connection only through its session.
    connection = getattr(ctx.session, "_connection", None)
    if not isinstance(connection, Connection):
        raise MCPError(code=mt.INTERNAL_ERROR, message="this mcp SDK version does not expose the session's "
                       "connection; install the version toolworld[serve] pins")  # fmt: skip
    return connection


# -- tools ------------------------------------------------------------------------------------------------------


def _world_tool(spec: Mapping[str, Any], world: World) -> mt.Tool:
    fn = spec["function"]
    tool = world.tools[fn["name"]]
    return mt.Tool(name=fn["name"], description=fn["description"], input_schema=fn["parameters"],
                   annotations=mt.ToolAnnotations(read_only_hint=not tool.mutates))  # fmt: skip


_NO_ARGUMENTS: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": False}


def _evaluator_specs(with_task: bool) -> dict[str, mt.Tool]:
    read_only = mt.ToolAnnotations(read_only_hint=True)
    tools = {
        "toolworld_changes": mt.Tool(
            name="toolworld_changes", input_schema=_NO_ARGUMENTS, annotations=read_only,
            description="Evaluator: the episode's change-set so far (rows inserted, updated and deleted per table) "
            "as JSON: what a verifier compares with a task's expected changes."),
        "toolworld_state_hash": mt.Tool(
            name="toolworld_state_hash", input_schema=_NO_ARGUMENTS, annotations=read_only,
            description="Evaluator: the hash of the episode's database state; equal states give equal hashes."),
    }  # fmt: skip
    if with_task:
        tools["toolworld_score"] = mt.Tool(
            name="toolworld_score", annotations=read_only,
            description="Evaluator: score this session so far against the loaded task (state change-set, stated "
            "outputs, refusal, conduct) and return the score as JSON. The server sees only tool calls: pass what "
            "the agent told the user as `replies` so outputs and refusals can be judged. The `confirmed` component "
            "(each write described and agreed to by the user first) needs the conversation, so it fails here and "
            "`success` stays false on tasks with writes: read the other components.",
            input_schema={"type": "object", "additionalProperties": False, "properties": {"replies": {
                "type": "array", "items": {"type": "string"},
                "description": "The agent's messages to the user, in order (default: none)."}}},
        )  # fmt: skip
    return tools


async def _changes(env: ToolEnv, arguments: Mapping[str, Any]) -> mt.CallToolResult:
    assert env.episode is not None
    return _text(json.dumps(env.episode.changes().to_dict(), ensure_ascii=False))


async def _state_hash(env: ToolEnv, arguments: Mapping[str, Any]) -> mt.CallToolResult:
    assert env.episode is not None
    return _text(json.dumps({"state_hash": env.episode.state_hash()}))


async def _score(env: ToolEnv, arguments: Mapping[str, Any]) -> mt.CallToolResult:
    from ..scoring import score_trajectory

    replies = arguments.get("replies", [])
    if not isinstance(replies, list) or not all(isinstance(r, str) for r in replies):
        return _text(json.dumps({"error": {"type": "invalid_arguments", "message": "replies must be a list of "
                                           "strings (the agent's messages to the user)"}}), error=True)  # fmt: skip
    assert env.task is not None and env.episode is not None
    trajectory = env.trajectory(policy="mcp")
    # The trajectory's change-set is taken when an episode ends; this one is still running, so take it now.
    trajectory = trajectory.model_copy(update={
        "messages": [*trajectory.messages, *({"role": "assistant", "content": r} for r in replies)],
        "changes": env.episode.changes().to_dict(), "state_hash": env.episode.state_hash()})  # fmt: skip
    score = score_trajectory(env.task, trajectory, world=env.world)
    return _text(score.model_dump_json())


def _text(text: str, *, error: bool = False) -> mt.CallToolResult:
    return mt.CallToolResult(content=[mt.TextContent(type="text", text=text)], is_error=error)


# -- small things -----------------------------------------------------------------------------------------------


def _version() -> str:
    from .. import __version__

    return __version__


def _url_host(host: str) -> str:
    if host in ("0.0.0.0", ""):
        return "127.0.0.1"
    if host == "::":
        return "[::1]"
    return f"[{host}]" if ":" in host else host


def _stderr(url: str) -> None:
    print(f"toolworld: MCP server listening on {url}", file=sys.stderr, flush=True)


def run(coro: Awaitable[None]) -> None:
    """Run a serve coroutine to completion; Ctrl-C ends it quietly (the sessions' episodes are closed)."""
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(coro)  # type: ignore[arg-type]
