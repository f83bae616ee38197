"""Shared records: messages, assistant turns and trajectories, read by every stage after the world.

Token buffers, the other shared record, live with the rest of the token handling in ``toolworld.tokens``.
"""

from .messages import AssistantTurn, FinishReason, Message
from .trajectory import NoiseEvent, Step, Termination, Trajectory, TurnRecord, Usage

__all__ = ["AssistantTurn", "FinishReason", "Message", "NoiseEvent", "Step", "Termination", "Trajectory",
           "TurnRecord", "Usage"]
