"""The arithmetic tool every world offers: agents add up refunds, prorations and balances with it instead of
guessing (models are bad at arithmetic, and a wrong total is a wrong answer).

It parses the expression into an AST and evaluates only numbers and + - * / (never ``eval``), so a model cannot
reach Python through it.
"""

from __future__ import annotations

import ast
import math
import operator
from typing import Annotated, Any

from pydantic import Field

from toolworld.world import ToolError, tool

_OPS: dict[type, Any] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.USub: operator.neg, ast.UAdd: operator.pos,
}  # fmt: skip


def _evaluate(node: ast.AST) -> float:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_evaluate(node.left), _evaluate(node.right))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_evaluate(node.operand))
    raise ValueError("unsupported expression")


@tool
def calculate(expression: Annotated[str, Field(max_length=200)]) -> float:
    """Evaluate an arithmetic expression with + - * / and parentheses; the result is rounded to 2 decimals.

    Args:
        expression: e.g. '(54.99 + 12.50) * 2 - 10'.
    """
    try:
        value = _evaluate(ast.parse(expression.strip(), mode="eval"))
    except ZeroDivisionError:
        raise ToolError("invalid_arguments", f"{expression!r} divides by zero.") from None
    except (SyntaxError, ValueError):
        raise ToolError(
            "invalid_arguments",
            f"{expression!r} is not an arithmetic expression; use numbers, + - * / and parentheses only.",
        ) from None
    if not math.isfinite(value):  # inf is no amount, and a JSON result cannot carry it
        raise ToolError("invalid_arguments", f"{expression!r} overflows; check the numbers you put in it.")
    return round(value, 2)
