"""toolworld: realistic worlds for tool-using agents, verifiable tasks, token-exact rollouts."""

from .records.trajectory import Trajectory
from .rollout.policy import Policy
from .scoring import Score
from .tasks.model import Task, TaskSet
from .tokens import TokenBuffer
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
    "Policy",
    "Rng",
    "Score",
    "Task",
    "TaskSet",
    "TokenBuffer",
    "Tool",
    "ToolCall",
    "ToolError",
    "ToolResult",
    "ToolSpec",
    "Trajectory",
    "World",
    "__version__",
    "get_world",
    "list_worlds",
    "tool",
]
