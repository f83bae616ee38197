"""A policy backend in one file: ``--policy echo[:prefix=TEXT]`` answers each user message with itself.

Importing this module registers the kind; an installed package would declare it as an entry point instead:
``[project.entry-points."toolworld.policies"] echo = "echo_policy"``.
"""

from __future__ import annotations

from typing import Any

from toolworld.records.messages import AssistantTurn, Message
from toolworld.rollout.backends import policy


class EchoSession:
    buffer = None

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix

    async def respond(self, messages: list[Message]) -> AssistantTurn:
        said = next((m.get("content") or "" for m in reversed(messages) if m.get("role") == "user"), "")
        return AssistantTurn(content=f"{self.prefix}{said}")

    async def aclose(self) -> None:
        return None


class EchoPolicy:
    def __init__(self, prefix: str = "") -> None:
        self.prefix = prefix
        self.name = "echo" + (f":prefix={prefix}" if prefix else "")

    def start(self, *, tools: list[dict[str, Any]], task: Any = None, seed: int = 0) -> EchoSession:
        return EchoSession(self.prefix)


@policy("echo", usage="echo[:prefix=TEXT]", help="repeats the user's last message", options=("prefix",))
def make_echo(*, prefix: Any = "") -> EchoPolicy:
    return EchoPolicy(str(prefix))
