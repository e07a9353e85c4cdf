"""Demo tools: work bounded by the size of the result, not only the operands (issue 18 §4).

No timing assertions: each hostile input is asserted to be *refused*, and the property
tests record every operation the calculator performs and check that none of them had
an operand or a result over the bit limit, which is what bounds the work.
"""

from __future__ import annotations

import ast
import contextlib
import math
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import example, given, seed, settings
from hypothesis import strategies as st

from agent_ref import Agent, ScriptedModel, default_tools
from agent_ref.tools import demo as dt
from agent_ref.tools.demo import (
    MAX_DEPTH,
    MAX_EXPRESSION_CHARS,
    MAX_RESULT_BITS,
    CalculationRefused,
    add,
    evaluate,
    multiply,
)
from agent_ref_support import blocks, fast_retry, run

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from validating import ValidatedSink


@pytest.mark.parametrize(
    "expression",
    [
        "((9**999)**999)**9",  # took 16 s: the guard looked only at the exponent
        "(9**999)**999",  # never ended
        "9**999**999",  # a huge exponent
        "2**10001",
        "(2**5000)*(2**5000)",
        "2**(2**70)",
        "(-2)**(2**70)",
    ],
)
def test_integer_results_over_the_bit_limit_are_refused(expression: str) -> None:
    """The size of the result is estimated first; over MAX_RESULT_BITS is refused, not computed."""
    with pytest.raises(CalculationRefused, match=f"too large.*limit is {MAX_RESULT_BITS:,} bits"):
        evaluate(expression)


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("10.0**400", "does not fit in a float"),
        ("1e308*10", "overflows a float"),
        ("(2**5000)/3", "does not fit in a float"),
        ("(2**5000)**-1", "does not fit in a float"),
        ("1.5**(2**5000)", "does not fit in a float"),
        ("10**3000+0.5", "does not fit in a float"),
        ("1e999", "not a finite number"),
        ("(-8)**0.5", r"\(-8\) \*\* 0.5 has no real value"),
    ],
)
def test_float_overflow_and_complex_results_are_refused(expression: str, message: str) -> None:
    """Floats that overflow, infinite literals and complex results are refusals."""
    with pytest.raises(CalculationRefused, match=message):
        evaluate(expression)


def test_long_and_deep_expressions_are_refused() -> None:
    """Length and nesting are bounded; at the bound the expression is still evaluated."""
    with pytest.raises(CalculationRefused, match="too long"):
        evaluate("1" * (MAX_EXPRESSION_CHARS + 1))
    assert evaluate("+".join(["1"] * (MAX_DEPTH + 1))) == MAX_DEPTH + 1  # MAX_DEPTH operators deep
    with pytest.raises(CalculationRefused, match="nested too deeply"):
        evaluate("+".join(["1"] * (MAX_DEPTH + 2)))
    with pytest.raises(CalculationRefused, match="nested too deeply"):
        evaluate("-" * 500 + "1")
    with pytest.raises(ValueError, match="not an arithmetic expression"):
        evaluate("(" * 300 + "1" + ")" * 300)  # the parser's own limit, as a ValueError


def test_allowed_results_up_to_the_limit() -> None:
    """Results within the limit are computed exactly."""
    assert evaluate("2**5000") == 2**5000
    assert evaluate("3**6000") == 3**6000  # about 9,510 bits
    assert evaluate("1**(10**3000)") == 1
    assert evaluate("0**(2**5000)") == 0
    assert evaluate("2**5000 % 7") == pow(2, 5000, 7)
    assert evaluate("2**-3") == 0.125
    assert evaluate("5 + (10 * 2)") == 25
    assert len(str(evaluate("2**9999"))) < 4300  # printable under Python's digit limit


def test_refusals_are_value_errors_with_a_clear_message() -> None:
    """A refusal is a ValueError (callers that catch bad input catch it) naming sizes, not digits."""
    with pytest.raises(ValueError, match=r"<3,167-bit integer> \*\* 999 would have about 3,16\d,\d{3} bits"):
        evaluate("((9**999)**999)**9")


def test_add_and_multiply_are_bounded_too() -> None:
    """The other demo tools apply the same bounds to their arguments and results."""
    assert add.fn is not None
    assert multiply.fn is not None
    assert add.fn(a=2.0, b=3.0) == "5"
    assert multiply.fn(a=2.5, b=4) == "10"
    with pytest.raises(CalculationRefused, match="number too large"):
        add.fn(a=2**20000, b=1)
    with pytest.raises(CalculationRefused, match="too large"):
        multiply.fn(a=2**6000, b=2**6000)
    with pytest.raises(CalculationRefused, match="overflows a float"):
        multiply.fn(a=1e308, b=10.0)
    with pytest.raises(CalculationRefused, match="not a finite number"):
        add.fn(a=math.inf, b=1.0)


def test_agent_run_of_the_issue_expression_ends_with_an_error_result(
    validated_sink: Callable[..., ValidatedSink],
) -> None:
    """``agent-ref run "What is ((9**999)**999)**9?"``: an is_error result, a valid stream."""
    sink = validated_sink()
    agent = Agent(ScriptedModel(), tools=default_tools(), retry=fast_retry())
    result = run(agent.run("What is ((9**999)**999)**9?", sink.append))
    assert result.stop_reason == "end_turn"
    res = next(b for b in blocks(list(sink)) if b["type"] == "tool_result")
    assert res["content"].startswith("CalculationRefused: result too large")
    assert result.conversation_history[2]["content"][0]["is_error"] is True


# --- properties: the work is bounded by construction ----------------------------------------


@contextlib.contextmanager
def _recorded_ops() -> Iterator[list[tuple[int, int, int]]]:
    """Every integer operation the calculator performs, as (bits a, bits b, bits result)."""
    ops: list[tuple[int, int, int]] = []
    saved = dict(dt._BINARY)

    def recording(fn: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
        def op(a: Any, b: Any) -> Any:
            value = fn(a, b)
            if isinstance(a, int) and isinstance(b, int) and isinstance(value, int):
                ops.append((a.bit_length(), b.bit_length(), value.bit_length()))
            return value

        return op

    dt._BINARY.update({key: recording(fn) for key, fn in saved.items()})
    try:
        yield ops
    finally:
        dt._BINARY.update(saved)


_OPS = ["+", "-", "*", "//", "%", "**", "/"]


@st.composite
def _expression(draw: st.DrawFn, depth: int = 0) -> str:
    if depth > 4 or draw(st.booleans()):
        return str(draw(st.integers(-(2**64), 2**64) | st.sampled_from([0, 1, -1, 2, 9, 999, 5000, 10**300])))
    left = draw(_expression(depth + 1))
    right = draw(_expression(depth + 1))
    return f"({left}){draw(st.sampled_from(_OPS))}({right})"


def _check_bounded(expression: str) -> None:
    with _recorded_ops() as ops, contextlib.suppress(CalculationRefused, ZeroDivisionError):
        evaluate(expression)  # a refusal is fine: what was computed before it is checked
    assert len(ops) <= MAX_EXPRESSION_CHARS
    for a_bits, b_bits, result_bits in ops:
        assert a_bits <= MAX_RESULT_BITS
        assert b_bits <= MAX_RESULT_BITS
        assert result_bits <= MAX_RESULT_BITS


def test_the_recorder_sees_the_operations() -> None:
    """The property below is not vacuous: the recorder sees each integer operation."""
    with _recorded_ops() as ops:
        assert evaluate("(2**100)*3 - 1") == 3 * 2**100 - 1
    assert ops == [(2, 7, 101), (101, 2, 102), (102, 1, 102)]


@given(expression=_expression())
@example(expression="((9)**(999))**(999)")
@example(expression="(2)**(10000)")  # exactly on the estimate's edge: 10,001 bits
@example(expression="((2)**(5000))*((2)**(5000))")
def test_property_no_operation_exceeds_the_bit_limit(expression: str) -> None:
    """Whatever the expression, no integer operation had an operand or result over the limit."""
    _check_bounded(expression)


@pytest.mark.parametrize("fixed_seed", [11, 12, 13])
def test_property_no_operation_exceeds_the_bit_limit_fixed_seeds(fixed_seed: int) -> None:
    """The same property under fixed seeds (CI runs hypothesis derandomised)."""

    @seed(fixed_seed)
    @settings(derandomize=False, max_examples=150, database=None)
    @given(_expression())
    def check(expression: str) -> None:
        _check_bounded(expression)

    check()


@given(
    st.sampled_from([ast.Add, ast.Sub, ast.Mult, ast.Pow, ast.FloorDiv, ast.Mod]),
    st.integers(-(2**80), 2**80),
    st.integers(0, 400),
)
@example(op=ast.Mod, a=-1, b=3)  # Python's % takes the divisor's sign: the result is 2, 2 bits
def test_property_the_size_estimate_is_an_upper_bound(op: type, a: int, b: int) -> None:
    """The estimate made before computing is never below the true size (so nothing slips past)."""
    if op in (ast.FloorDiv, ast.Mod) and b == 0:
        return
    value = dt._BINARY[op](a, b)
    assert isinstance(value, int)
    assert value.bit_length() <= dt._estimated_bits(op, a, b)
