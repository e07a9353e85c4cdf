"""The tools ``agent-ref`` registers: a calculator, ``add``/``multiply``, a frontend ``confirm``, two demos.

Owns: small, safe example tools (the calculator evaluates arithmetic with ``ast``,
never ``eval``), their bounds, and ``default_tools()``; the demo tools of issue 29:
``delete_draft`` (a backend call that needs a person's approval under
``DEMO_PERMISSION_RULES``; it deletes nothing real) and ``count_slowly`` (reports its
progress through its ``ToolContext``), which the scripted model's demo prompts call
(spec ``spec/agent-ref.md`` §8.3). ``add`` and ``multiply`` are the
tools of the recorded corpus run ``anthropic_events_0.json``, so ``--replay`` of it works.
Does not own: the decorator, or the time limit on a tool call (``tools/core.py``/``agent.py``).

Bounds (issue 18 §4): the work of every demo tool is bounded by the size of what it
computes, not only by its operands. Before each operation the size of its result is
estimated and the operation is refused (``CalculationRefused``) when it is over a stated
limit, so no value is ever built that is over the limit:

* an expression is at most ``MAX_EXPRESSION_CHARS`` characters and nested at most
  ``MAX_DEPTH`` operators deep (``ast.parse`` failures on deep input are refusals too);
* an integer, a literal or any intermediate result, is at most ``MAX_RESULT_BITS`` bits:
  ``a ** b`` is estimated as ``b * log2(|a|) + 1`` bits, ``a * b`` as ``bits(a) + bits(b)``,
  ``a + b`` as ``max(bits) + 1``; ``//`` and ``%`` never grow their left operand;
* a float result that overflows (``OverflowError``, ``inf``, ``nan``) or a complex one
  (``(-8) ** 0.5``) is refused.

Each operation then works on operands of at most ``MAX_RESULT_BITS`` bits, a pow does at
most ``log2(b)`` squarings of such numbers, and an expression has fewer than
``MAX_EXPRESSION_CHARS`` operations: the total work is bounded by construction. The bit
limit also keeps every result printable (``str`` of a 10,000-bit integer is about
3,000 digits, under Python's 4,300-digit conversion limit).
"""

from __future__ import annotations

import ast
import asyncio
import math
import operator
import re
from typing import TYPE_CHECKING, Final

from ..policy.permissions import PermissionRule
from .context import ToolContext  # noqa: TC001 - the tool decorator reads the annotation at runtime
from .core import Tool, tool

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = [
    "COUNT_STEP_SECONDS",
    "DEMO_PERMISSION_RULES",
    "MAX_COUNT",
    "MAX_DEPTH",
    "MAX_EXPRESSION_CHARS",
    "MAX_RESULT_BITS",
    "CalculationRefused",
    "add",
    "calculator",
    "confirm",
    "count_slowly",
    "default_tools",
    "delete_draft",
    "evaluate",
    "multiply",
]

#: Longest expression the calculator reads (characters).
MAX_EXPRESSION_CHARS: Final = 1_000
#: Deepest nesting of operators (``1+1+...+1`` with 101 terms is 100 deep).
MAX_DEPTH: Final = 100
#: Largest integer, literal or intermediate, in bits (about 3,000 decimal digits).
MAX_RESULT_BITS: Final = 10_000

Number = int | float

_BINARY: Final[dict[type, Callable[[Number, Number], Number]]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: Final[dict[type, Callable[[Number], Number]]] = {ast.UAdd: operator.pos, ast.USub: operator.neg}
_SYMBOL: Final[dict[type, str]] = {
    ast.Add: "+",
    ast.Sub: "-",
    ast.Mult: "*",
    ast.Div: "/",
    ast.FloorDiv: "//",
    ast.Mod: "%",
    ast.Pow: "**",
}


class CalculationRefused(ValueError):
    """The calculation is over a stated bound; refused before the work is done.

    A ``ValueError``, so callers that catch bad expressions catch this too.
    """


def _estimated_bits(op: type, a: int, b: int) -> float:
    """An upper estimate of the bits of ``a op b`` for integers, before computing it."""
    if op is ast.Pow:
        if b < 0 or abs(a) <= 1:
            return 1.0  # a float (negative exponent) or 0, 1, -1
        if b.bit_length() > 64:
            return math.inf  # over 2**64 times at least one bit: far past any limit
        return b * math.log2(abs(a)) + 1  # bit_length is floor(log2) + 1
    if op is ast.Mult:
        return float(a.bit_length() + b.bit_length())
    if op in (ast.Add, ast.Sub):
        return float(max(a.bit_length(), b.bit_length()) + 1)
    if op is ast.Mod:
        # Python's % takes the divisor's sign: -1 % 3 == 2, so the result is bounded by |b|, not |a|.
        return float(max(a.bit_length(), b.bit_length()))
    return float(a.bit_length())  # // and / do not grow the left operand


def _apply(op: type, a: Number, b: Number) -> Number:
    """``a op b`` or a refusal, never a value over the bounds (see the module docstring)."""
    what = f"{_short(a)} {_SYMBOL[op]} {_short(b)}"
    if isinstance(a, int) and isinstance(b, int):
        bits = _estimated_bits(op, a, b)
        if bits > MAX_RESULT_BITS:
            size = f"about {bits:,.0f}" if math.isfinite(bits) else "more than 2**64"
            raise CalculationRefused(
                f"result too large: {what} would have {size} bits; the limit is {MAX_RESULT_BITS:,} bits"
            )
    try:
        value = _BINARY[op](a, b)
    except OverflowError:
        raise CalculationRefused(f"result too large: {what} does not fit in a float") from None
    return _checked(value, what)


def _checked(value: object, what: str) -> Number:
    if isinstance(value, complex):
        raise CalculationRefused(f"{what} has no real value")
    if isinstance(value, float) and not math.isfinite(value):
        raise CalculationRefused(f"result too large: {what} overflows a float")
    if isinstance(value, int) and value.bit_length() > MAX_RESULT_BITS:  # pragma: no cover - estimated first
        raise CalculationRefused(f"result too large: {what} is over {MAX_RESULT_BITS:,} bits")
    assert isinstance(value, int | float)
    return value


def _short(value: Number) -> str:
    """A number for a message: small ones in full, big integers by their size."""
    if isinstance(value, int) and value.bit_length() > 64:
        text = f"<{value.bit_length():,}-bit integer>"
    else:
        text = repr(value)
    return f"({text})" if value < 0 else text


def _number(value: object) -> Number:
    """A tool argument checked like a literal: finite, and an integer within the bit limit."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"not a number: {value!r}")
    if isinstance(value, float) and not math.isfinite(value):
        raise CalculationRefused(f"not a finite number: {value!r}")
    if isinstance(value, int) and value.bit_length() > MAX_RESULT_BITS:
        raise CalculationRefused(f"number too large: over {MAX_RESULT_BITS:,} bits")
    return value


def _result(value: Number) -> Number:
    """An integral float as an int (``5.0`` reads ``5``), within float precision."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    return value


def _depth(tree: ast.AST) -> int:
    """The nesting depth of ``tree``, without recursion (so any depth is measured safely)."""
    deepest = 0
    stack = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return deepest


def evaluate(expression: str) -> int | float:
    """Evaluate an arithmetic expression: numbers, + - * / // % **, parentheses.

    Args:
        expression: e.g. ``"5 + (10 * 2)"``.

    Returns:
        The value; an integral float is returned as an int.

    Raises:
        CalculationRefused: over a bound (length, depth, result size, float overflow,
            no real value); a ``ValueError``.
        ValueError: anything that is not plain arithmetic.
        ZeroDivisionError: division by zero.
    """
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise CalculationRefused(
            f"expression too long: {len(expression):,} characters; the limit is {MAX_EXPRESSION_CHARS:,}"
        )
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except (SyntaxError, ValueError):
        raise ValueError(f"not an arithmetic expression: {expression[:80]!r}") from None
    except (RecursionError, MemoryError):
        raise CalculationRefused(f"expression nested too deeply; the limit is {MAX_DEPTH} levels") from None
    # One level per operator, plus the Expression root and the innermost number.
    if _depth(tree) > MAX_DEPTH + 2:
        raise CalculationRefused(f"expression nested too deeply; the limit is {MAX_DEPTH} levels")

    def walk(node: ast.AST) -> Number:
        if isinstance(node, ast.Expression):
            return walk(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not isinstance(node.value, bool):
            return _number(node.value)
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            return _apply(type(node.op), walk(node.left), walk(node.right))
        if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
            return _UNARY[type(node.op)](walk(node.operand))
        raise ValueError(f"not allowed in an arithmetic expression: {ast.dump(node)[:40]}")

    return _result(walk(tree))


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
    return str(_result(_apply(ast.Add, _number(a), _number(b))))


@tool
def multiply(a: float, b: float) -> str:
    """Multiply two numbers.

    Args:
        a: The first number.
        b: The second number.
    """
    return str(_result(_apply(ast.Mult, _number(a), _number(b))))


@tool(executor="frontend")
def confirm(question: str) -> bool:
    """Ask the user a yes/no question in the browser and return their answer.

    Args:
        question: The question to show, e.g. "Delete 3 files?".
    """
    raise NotImplementedError  # frontend tool: the browser runs it


#: The largest ``n`` ``count_slowly`` counts to.
MAX_COUNT: Final = 100
#: How long ``count_slowly`` waits before each number (seconds).
COUNT_STEP_SECONDS: Final = 0.05
_DRAFT_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9 ._\-]{0,63}")

#: The demo's permission rules (mode ``auto``): ``delete_draft`` needs a person's approval,
#: every other tool runs (spec R8.3-c). ``decide`` puts an ``ask`` rule before an ``allow``.
DEMO_PERMISSION_RULES: Final[tuple[PermissionRule, ...]] = (
    PermissionRule(behavior="ask", tool="delete_draft"),
    PermissionRule(behavior="allow", tool="*"),
)


@tool
def delete_draft(name: str) -> str:
    """Delete one of the user's drafts. It cannot be undone, so it needs the user's approval.

    A demo: there are no real drafts, nothing is deleted; the name is checked and the
    deletion reported.

    Args:
        name: The draft's name, e.g. "demo-draft".
    """
    if not _DRAFT_NAME.fullmatch(name):
        raise ValueError(
            f"name: must be 1 to 64 letters, digits, spaces, '.', '_' or '-', starting with a letter or digit, "
            f"not {name[:80]!r}"
        )
    return f"the draft {name!r} is deleted (a demo: nothing real was removed)"


@tool
async def count_slowly(n: int, ctx: ToolContext) -> str:
    """Count from 1 to n, one number at a time, reporting progress as it goes.

    Args:
        n: Where to stop, from 1 to 100.
        ctx: The call's context (its progress callback); never sent by the model.
    """
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_COUNT:
        raise ValueError(f"n: must be an integer from 1 to {MAX_COUNT}, not {n!r}")
    for i in range(1, n + 1):
        # Reported before the wait, so each report is heard while the call still runs
        # (a report made as the call ends is dropped, spec §2.6-b): fraction = numbers done.
        ctx.progress(f"counting {i} of {n}", (i - 1) / n)
        await asyncio.sleep(COUNT_STEP_SECONDS)
    return ", ".join(str(i) for i in range(1, n + 1))


def default_tools() -> list[Tool]:
    """The tools ``agent-ref run`` registers.

    calculator, add, multiply (backend), confirm (frontend), and the demos ``delete_draft``
    (needs approval under ``DEMO_PERMISSION_RULES``) and ``count_slowly`` (progress).
    """
    return [calculator, add, multiply, confirm, delete_draft, count_slowly]
