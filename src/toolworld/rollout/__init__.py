"""Rollouts: policies, token-exact buffers, tool-call parsing and the async episode loop."""

from ..records.messages import AssistantTurn, Message
from .policy import AgentSession, InfraError, Policy

__all__ = ["AgentSession", "AssistantTurn", "InfraError", "Message", "Policy"]
