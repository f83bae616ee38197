"""Rollouts: the Policy protocol, the policy registry and its backends, token engines, and the drivers
(``run_episode``, ``run_many``) over ``ToolEnv``."""

from ..core.errors import InfraError
from ..records.messages import AssistantTurn, Message
from .policy import AgentSession, Policy

__all__ = ["AgentSession", "AssistantTurn", "InfraError", "Message", "Policy"]
