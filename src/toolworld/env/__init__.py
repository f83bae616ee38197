"""The environment an agent acts in: a world episode with a user simulator, limits, noise and scoring around it.

``ToolEnv`` is the contract every consumer drives (the rollout loop, trainers, the Gymnasium env, the MCP server);
``wrappers`` holds the call-handler chain around ``Episode.call``.
"""

from .env import EnvError, Observation, StepResult, ToolEnv, ToolObservation, as_assistant_turn
from .limits import Limits
from .noise import NoiseConfig
from .user import LLMUser, ScriptedUser, UserReply, UserSimulator
from .wrappers import CallHandler, CallOutcome, InjectNoise, LimitObservation, RunCall

__all__ = ["CallHandler", "CallOutcome", "EnvError", "InjectNoise", "LLMUser", "LimitObservation", "Limits",
           "NoiseConfig", "Observation", "RunCall", "ScriptedUser", "StepResult", "ToolEnv", "ToolObservation",
           "UserReply", "UserSimulator", "as_assistant_turn"]
