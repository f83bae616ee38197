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

from .core import InfraError, ToolworldError
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
    from .env import Limits, NoiseConfig, Observation, StepResult, ToolEnv
    from .pipeline import RunError, RunResult, export, rescore, run, run_async
    from .records import AssistantTurn, Message, Trajectory
    from .rollout.backends import make_policy, policy
    from .rollout.policy import AgentSession, Policy
    from .scoring import Score, Summary
    from .scoring import score_trajectory as score
    from .tasks.generate import generate
    from .tasks.model import Task, TaskSet
    from .tokens import TokenBuffer

#: Everything past the world SDK loads on first use (name: (module, attribute)), so that ``import toolworld``,
#: ``import toolworld.world`` and every command-line start pay only for what they use.
_LAZY: dict[str, tuple[str, str]] = {
    **{name: ("env", name) for name in ("Limits", "NoiseConfig", "Observation", "StepResult", "ToolEnv")},
    **{name: ("pipeline", name) for name in ("RunError", "RunResult", "export", "rescore", "run", "run_async")},
    **{name: ("records", name) for name in ("AssistantTurn", "Message", "Trajectory")},
    **{name: ("rollout.backends", name) for name in ("make_policy", "policy")},
    **{name: ("rollout.policy", name) for name in ("AgentSession", "Policy")},
    **{name: ("scoring", name) for name in ("Score", "Summary")},
    "score": ("scoring", "score_trajectory"),
    "generate": ("tasks.generate", "generate"),
    "Task": ("tasks.model", "Task"),
    "TaskSet": ("tasks.model", "TaskSet"),
    "TokenBuffer": ("tokens", "TokenBuffer"),
}


def __getattr__(name: str) -> Any:
    where = _LAZY.get(name)
    if where is None:
        raise AttributeError(f"module 'toolworld' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f".{where[0]}", __name__), where[1])
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


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
