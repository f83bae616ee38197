"""The World SDK: tools, worlds and isolated, forkable episodes on SQLite.

Customers and what they own: a world that serves one customer at a time declares who the customer is and
what belongs to them, and the episode enforces it for every write tool, so no tool can forget the check::

    @tool(yields={"user": "user_id"}, identifies=True)      # success identifies the customer
    def find_user_by_email(ctx, email: str) -> dict: ...

    @tool(mutates=True, confirm=False)                        # a write that needs no explicit "yes"
    def open_ticket(ctx, summary: str) -> dict: ...

    World(..., customer="user", owners={"order": "orders.user_id"}, ownership_rule="R13")

After ``find_user_by_email`` succeeds, ``Episode.customer`` holds the id it found; from then on a write tool
given another user id, or an order whose ``orders.user_id`` is someone else, fails with ``policy_violation``
citing the rule and changes nothing. Before any identification nothing is checked. ``Episode.customer`` is
conversation state: forks copy it, probes restore it, and it is no part of ``changes()`` or ``state_hash()``.
``World.customer_kinds`` and ``World.identification_tools`` and each tool's ``confirm`` flag are what scorers
of an agent's conduct read.
"""

from ..core.jsonutil import canonical_json
from ..core.paths import cache_dir
from .episode import ChangeSet, Ctx, Episode, RowChange, ToolCall, ToolResult
from .errors import ERROR_TYPES, ToolError, WorldError
from .registry import get_world, list_worlds
from .rng import Rng
from .tool import Entity, EntityParam, Tool, ToolSpec, extract_path, tool
from .world import EntityRef, TourStep, World

__all__ = [
    "ERROR_TYPES",
    "ChangeSet",
    "Ctx",
    "Entity",
    "EntityParam",
    "EntityRef",
    "Episode",
    "Rng",
    "RowChange",
    "Tool",
    "ToolCall",
    "ToolError",
    "ToolResult",
    "ToolSpec",
    "TourStep",
    "World",
    "WorldError",
    "cache_dir",
    "canonical_json",
    "extract_path",
    "get_world",
    "list_worlds",
    "tool",
]
