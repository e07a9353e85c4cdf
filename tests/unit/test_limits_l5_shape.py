"""spec/limits.md L5-c: what is wrong with a line's shape is said in our words, not msgspec's.

msgspec words its own errors ("Expected `bool`, got `int` - at `$.final`"); ``decode`` and
the reconstructor's reading find the fault again themselves (``envelope._shape``) and say
it as below, whatever the installed msgspec says.
"""

from __future__ import annotations

import re

import pytest

from conftest import ROOT
from envelope import Reconstructor, ValidationError, decode

BASE = '"agent":"a","final":true,"delta":""'
#: A line, the field at fault, and our message.
CASES = [
    ('{"type":"text","agent":"a","final":1,"delta":""}', "$.final", "expected a boolean, got an integer"),
    ('{"type":"text","agent":"a","final":true,"delta":["x"]}', "$.delta", "expected a string, got an array"),
    ('{"type":"text","agent":{},"final":true,"delta":""}', "$.agent", "expected a string, got an object"),
    (
        '{"type":"citation",' + BASE + ',"citation_type":"c","url":null}',
        "$.url",
        "expected a string, got null (a field is absent or has its type, never null)",
    ),
    (
        '{"type":"citation",' + BASE + ',"citation_type":"c","document_index":1.5}',
        "$.document_index",
        "expected an integer, got a number",
    ),
    ('{"type":"text","agent":"a","final":true}', "$.delta", "missing required field `delta`"),
    ('{"agent":"a","final":true,"delta":""}', "$.type", "missing required field `type`"),
    ('{"type":7,' + BASE + "}", "$.type", "expected a string, got an integer"),
    ('{"type":"txt",' + BASE + "}", "$.type", "unknown envelope type 'txt'"),
    ('{"type":"text",' + BASE + ',"colour":"red"}', "$.colour", "field `colour` is not allowed on this type"),
    ("[1,2]", None, "the line is an array in JSON, not an object"),
]


@pytest.mark.parametrize(("line", "field", "message"), CASES)
def test_L5_c_decode_says_what_is_wrong_in_our_words(line: str, field: str | None, message: str) -> None:
    """[L5-c] ``decode``: our message and the field's path, for str and bytes alike."""
    for form in (line, line.encode()):
        with pytest.raises(ValidationError) as info:
            decode(form)
        assert (info.value.message, info.value.field) == (message, field)


def test_L5_c_the_lenient_reading_says_it_in_the_same_words() -> None:
    """[L5-c] the reconstructor's reading: base fields as ``decode``; unknown members and loose extras pass."""
    with pytest.raises(ValidationError) as info:
        Reconstructor().feed(b'{"type":"text","agent":"a","final":"yes","delta":"","zz":1}')
    assert (info.value.message, info.value.field) == ("expected a boolean, got a string", "$.final")
    with pytest.raises(ValidationError) as info:
        Reconstructor().feed('{"type":"text","agent":"a","final":true,"delta":"","id":null}')
    assert info.value.message.startswith("expected a string, got null")


def test_L5_c_a_line_too_deep_to_read_again_keeps_our_words() -> None:
    """[L5-c] a nested value our second reading cannot walk: the expected kind, msgspec's path, no msgspec text."""
    line = b'{"type":"text","agent":"a","final":false,"delta":' + b"[" * 5000 + b"]" * 5000 + b"}"
    with pytest.raises(ValidationError) as info:
        decode(line)
    assert (info.value.message, info.value.field) == ("expected a string", "$.delta")


#: msgspec's own phrases for decode errors (0.19 to 0.23); a test of ours must not expect them.
MSGSPEC_PHRASES = re.compile(
    r"Expected `|expected `(bool|str|int|object|array|null)`|got `(bool|str|int|object|array|null)`"
    r"|Object missing required field|Object contains unknown field|Invalid UTF-8 encoded string"
    r"|Input data was truncated|JSON is malformed"
)
#: The codec's suites (the agent's tests check its own tool-input messages, spec/agent-ref.md).
CODEC_SUITES = ("unit", "golden", "validator", "migrate", "stateful", "fuzz", "corpus", "speedups", "cli")


def test_L5_c_no_codec_test_expects_msgspec_wording() -> None:
    """[L5-c] grep the codec's tests: no line names an error message of msgspec's."""
    found = []
    for suite in CODEC_SUITES:
        for path in sorted((ROOT / "tests" / suite).rglob("*.py")):
            if path.name == "test_limits_l5_shape.py":
                continue
            for number, text in enumerate(path.read_text().splitlines(), 1):
                if MSGSPEC_PHRASES.search(text):
                    found.append(f"{path.relative_to(ROOT)}:{number}: {text.strip()}")
    assert not found, "\n".join(found)
