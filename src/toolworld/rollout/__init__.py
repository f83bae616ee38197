"""Rollouts: policies, token-exact buffers, tool-call parsing and the async episode loop."""

from .policy import AgentSession, AssistantTurn, InfraError, Message, Policy

__all__ = ["AgentSession", "AssistantTurn", "InfraError", "Message", "Policy"]
