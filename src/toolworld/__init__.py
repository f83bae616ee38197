"""toolworld: realistic worlds for tool-using agents, verifiable tasks, token-exact rollouts, scores.

The verbs people use, next to the types::

    import toolworld

    tasks = toolworld.generate("retail", 20, seed=0).tasks          # replay-verified tasks
    result = toolworld.run("retail", tasks, "gold", out="runs/gold")  # run, score, store, summary, report
    score = toolworld.score(task, trajectory)                       # one trajectory against its task's gold
    env = toolworld.ToolEnv("retail")                               # drive an episode yourself (async)
"""

import sys
from typing import TYPE_CHECKING, Any

from .core import ToolworldError
from .env import Limits, NoiseConfig, Observation, StepResult, ToolEnv
from .records import AssistantTurn, Message, Trajectory
from .rollout.backends import make_policy, policy
from .rollout.policy import AgentSession, InfraError, Policy
from .scoring import Score, Summary
from .scoring import score_trajectory as score
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

if TYPE_CHECKING:
    from .pipeline import RunError, RunResult, export, rescore, run, run_async
    from .tasks.generate import generate

#: Verbs whose modules pull in more (the tool graph, the run store, the report) load on first use, so that
#: ``import toolworld`` and every command-line start stay fast.
_LAZY = {"run": "pipeline", "run_async": "pipeline", "rescore": "pipeline", "export": "pipeline",
         "RunError": "pipeline", "RunResult": "pipeline", "generate": "tasks.generate"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'toolworld' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value

if "gymnasium" in sys.modules:  # a Gymnasium user: `gymnasium.make("toolworld/<world>-v0")` works right away
    from .integrations import gym as _gym  # noqa: F401

__all__ = [
    "AgentSession",
    "AssistantTurn",
    "ChangeSet",
    "Ctx",
    "Entity",
    "Episode",
    "InfraError",
    "Limits",
    "Message",
    "NoiseConfig",
    "Observation",
    "Policy",
    "Rng",
    "RunError",
    "RunResult",
    "Score",
    "StepResult",
    "Summary",
    "Task",
    "TaskSet",
    "TokenBuffer",
    "Tool",
    "ToolCall",
    "ToolEnv",
    "ToolError",
    "ToolResult",
    "ToolSpec",
    "ToolworldError",
    "Trajectory",
    "World",
    "__version__",
    "export",
    "generate",
    "get_world",
    "list_worlds",
    "make_policy",
    "policy",
    "rescore",
    "run",
    "run_async",
    "score",
    "tool",
]
