"""The World SDK: tools, worlds and isolated, forkable episodes on SQLite."""

from .episode import ChangeSet, Ctx, Episode, RowChange, ToolCall, ToolResult, canonical_json
from .errors import ERROR_TYPES, ToolError, WorldError
from .registry import get_world, list_worlds
from .rng import Rng
from .tool import Entity, EntityParam, Tool, ToolSpec, extract_path, tool
from .world import EntityRef, TourStep, World, cache_dir

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
