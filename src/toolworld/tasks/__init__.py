"""Task synthesis: the tool graph, samplers, gold execution, phrasing and replay verification."""

from .model import Action, Difficulty, ExpectedOutput, LineError, Provenance, Refusal, Task, TaskSet, UserProfile

__all__ = ["Action", "Difficulty", "ExpectedOutput", "LineError", "Provenance", "Refusal", "Task", "TaskSet",
           "UserProfile"]  # fmt: skip
