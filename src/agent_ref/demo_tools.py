"""The tools ``agent-ref`` registers: a calculator, ``add``/``multiply`` and a frontend ``confirm``.

Owns: small, safe example tools (the calculator evaluates arithmetic with ``ast``,
never ``eval``), and ``default_tools()``. ``add`` and ``multiply`` are the tools of
the recorded corpus run ``anthropic_events_0.json``, so ``--replay`` of it works.
Does not own: the decorator (``tools.py``).
"""

from __future__ import annotations

import ast
import operator
from typing import TYPE_CHECKING, Final

from .tools import Tool, tool

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["add", "calculator", "confirm", "default_tools", "evaluate", "multiply"]

_BINARY: Final[dict[type, Callable[[float, float], float]]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: Final[dict[type, Callable[[float], float]]] = {ast.UAdd: operator.pos, ast.USub: operator.neg}
#: Largest exponent allowed, so ``9 ** 9 ** 9`` cannot hang the server.
_MAX_EXPONENT: Final = 1000


def evaluate(expression: str) -> int | float:
    """Evaluate an arithmetic expression: numbers, + - * / // % **, parentheses.

    Args:
        expression: e.g. ``"5 + (10 * 2)"``.

    Returns:
        The value; an integral float is returned as an int.

    Raises:
        ValueError: anything that is not plain arithmetic, or a too large exponent.
        ZeroDivisionError: division by zero.
    """
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError:
        raise ValueError(f"not an arithmetic expression: {expression!r}") from None

    def walk(node: ast.AST) -> float:
        if isinstance(node, ast.Expression):
            return walk(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not isinstance(node.value, bool):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            left, right = walk(node.left), walk(node.right)
            if isinstance(node.op, ast.Pow) and abs(right) > _MAX_EXPONENT:
                raise ValueError(f"exponent {right} is too large")
            return _BINARY[type(node.op)](left, right)
        if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
            return _UNARY[type(node.op)](walk(node.operand))
        raise ValueError(f"not allowed in an arithmetic expression: {ast.dump(node)[:40]}")

    value = walk(tree)
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    return value


@tool
def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression and return its value.

    Args:
        expression: The expression, using numbers, + - * / // % ** and parentheses, e.g. "5 + (10 * 2)".
    """
    return str(evaluate(expression))


@tool
def add(a: float, b: float) -> str:
    """Add two numbers.

    Args:
        a: The first number.
        b: The second number.
    """
    return str(evaluate(f"{a!r} + {b!r}"))


@tool
def multiply(a: float, b: float) -> str:
    """Multiply two numbers.

    Args:
        a: The first number.
        b: The second number.
    """
    return str(evaluate(f"{a!r} * {b!r}"))


@tool(executor="frontend")
def confirm(question: str) -> bool:
    """Ask the user a yes/no question in the browser and return their answer.

    Args:
        question: The question to show, e.g. "Delete 3 files?".
    """
    raise NotImplementedError  # frontend tool: the browser runs it


def default_tools() -> list[Tool]:
    """The tools ``agent-ref run`` registers: calculator, add, multiply (backend), confirm (frontend)."""
    return [calculator, add, multiply, confirm]
