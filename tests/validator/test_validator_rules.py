"""The validator's shape (issue 17 §2): each rule once, keyed by its code, in one table.

``CODES`` holds each code's severity, section and meaning (the docs and ``--explain``
read it; ``test_validator_codes`` keeps spec/validation.md equal to it). ``RULES`` maps
each code to the one function that reports it. These tests read the module's source:
``_violation`` is called only inside the function registered for its code, once per
code; the streaming wrapper names no code (it feeds lines and positions); and no
function is over 60 lines unless the reason is written above it. The validator is split
by role over ``_validator.py`` and the ``_validator_*.py`` modules beside it (issue 28 §3);
these tests read all of them.
"""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

from envelope import _validator
from envelope._validator import CODES, RULES, StreamValidator

HERE = Path(inspect.getfile(_validator))
#: module name -> its source: the facade and each part of the split validator.
SOURCES = {path.stem: path.read_text(encoding="utf-8") for path in sorted(HERE.parent.glob("_validator*.py"))}
TREES = {name: ast.parse(source) for name, source in SOURCES.items()}


def _functions(name: str | None = None) -> list[ast.FunctionDef]:
    trees = TREES.values() if name is None else [TREES[name]]
    return [node for tree in trees for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)]


def test_the_split_modules_are_all_read() -> None:
    """The parts this file checks are the validator's: if one is renamed, these tests must see it."""
    assert set(SOURCES) == {
        "_validator",
        "_validator_blocks",
        "_validator_codes",
        "_validator_lines",
        "_validator_rules",
        "_validator_stream",
    }


def _reports() -> dict[str, list[str]]:
    """code -> the functions whose body calls ``_violation`` with it."""
    found: dict[str, list[str]] = {}
    for function in _functions():
        for node in ast.walk(function):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "_violation":
                first = node.args[0]
                assert isinstance(first, ast.Constant), f"{function.name}: _violation with a computed code"
                found.setdefault(str(first.value), []).append(function.name)
    return found


def test_every_code_has_exactly_one_rule_function() -> None:
    assert set(RULES) == set(CODES)
    assert len({id(check) for check in RULES.values()}) == len(RULES), "one function reports two codes"


def test_each_code_is_reported_only_by_its_rule_function() -> None:
    """``_violation("X", ...)`` appears only inside ``RULES["X"]`` (one function; some word two cases)."""
    reports = _reports()
    assert set(reports) == set(CODES)
    for code, where in reports.items():
        assert set(where) == {RULES[code].__name__}, (code, where)


def test_the_stream_wrapper_names_no_code() -> None:
    """The wrapper only reads lines and positions; every judgement is the line validator's."""
    wrapper = inspect.getsource(StreamValidator)
    assert re.findall(r"[\"'][EW]1\d\d[\"']", wrapper) == []
    assert "_violation(" not in wrapper
    assert not [check for check in RULES.values() if check.__qualname__.startswith("StreamValidator.")]


def test_no_function_over_60_lines_without_its_reason() -> None:
    long = []
    for name, source in SOURCES.items():
        long += _long_without_reason(name, source.splitlines())
    assert long == []


def _long_without_reason(name: str, lines: list[str]) -> list[str]:
    long = []
    for function in _functions(name):
        start = min([function.lineno, *(d.lineno for d in function.decorator_list)])
        if function.end_lineno is not None and function.end_lineno - function.lineno + 1 > 60:
            above = start - 2  # the comment block directly above the function
            while above >= 0 and lines[above].lstrip().startswith("#"):
                above -= 1
            if "Over 60 lines on purpose" not in "\n".join(lines[above + 1 : start - 1]):
                long.append(f"{name}.{function.name}")
    return long


def test_rule_functions_cite_their_rule() -> None:
    """Each rule function cites the spec rule it enforces (``[V…]`` or ``spec §``)."""
    for code, check in RULES.items():
        text = inspect.getsource(check)
        assert re.search(r"\[V[\d.]+-[a-z]\]|spec §|spec envelope-v1 §|nothing that could be valid", text), code
