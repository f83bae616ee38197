"""toolworld: realistic worlds for tool-using agents, verifiable tasks, token-exact rollouts."""

from .score import Score as Score  # re-exported: the public verdict type
from .world import (
    ChangeSet,
    Ctx,
    Entity,
    Episode,
    Rng,
    Tool,
    ToolCall,
    ToolError,
    ToolResult,
    ToolSpec,
    World,
    get_world,
    list_worlds,
    tool,
)

__version__ = "0.1.0"

__all__ = [
    "ChangeSet",
    "Ctx",
    "Entity",
    "Episode",
    "Rng",
    "Tool",
    "ToolCall",
    "ToolError",
    "ToolResult",
    "ToolSpec",
    "World",
    "__version__",
    "get_world",
    "list_worlds",
    "tool",
]
