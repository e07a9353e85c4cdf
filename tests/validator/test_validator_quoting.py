"""Input quoted inside a finding's message is escaped and bounded (spec/validation.md §3.4, [V3.4-a]).

``_quote.quote`` is checked by properties (printable, one line, bounded, and text reads
back), then the validator on hostile streams: every message of every finding, whatever
the input held, is printable and short, and ``envelope validate`` prints one line per
finding.
"""

from __future__ import annotations

import ast
import json
from typing import TYPE_CHECKING

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from envelope import StreamValidator
from envelope._quote import QUOTE_CHARS, quote, show
from envelope.cli import main

if TYPE_CHECKING:
    from pathlib import Path

#: Longest a quotation of ``QUOTE_CHARS`` characters can be: each escaped as ``\UXXXXXXXX``,
#: the quotes, and ``… (N bytes)`` after a cut.
_QUOTED_MAX = QUOTE_CHARS * 10 + 2 + len("… (99999999 characters)")
#: Longest message: the fixed words of the longest message and at most three quotations.
_MESSAGE_MAX = 400 + 3 * _QUOTED_MAX


def test_escapes() -> None:
    assert quote(b"plain") == "'plain'"
    assert quote(b"\x00\x1b[31m\x7f") == "'\\x00\\x1b[31m\\x7f'"
    assert quote(b"a\nb\rc\td") == "'a\\nb\\rc\\td'"
    assert quote("it's a \\ path") == "'it\\'s a \\\\ path'"
    assert quote("\u202eevil\u2028x\u00a0") == "'\\u202eevil\\u2028x\\xa0'"  # bidi, line separator, NBSP
    assert quote("\U000e0041 tag") == "'\\U000e0041 tag'"
    assert quote("na\u00efve \u65e5\u672c") == "'na\u00efve \u65e5\u672c'"  # letters of any script stay
    assert quote(b"\xff\xfe ok \xc3\xa9 \xc3") == "'\\xff\\xfe ok \u00e9 \\xc3'"  # bytes that are no UTF-8, each
    assert quote("\udc80") == "'\\udc80'"  # a lone surrogate in decoded text


def test_bounds() -> None:
    assert quote(b"x" * QUOTE_CHARS) == "'" + "x" * QUOTE_CHARS + "'"
    assert quote(b"x" * 1000) == "'" + "x" * QUOTE_CHARS + "'… (1000 bytes)"
    assert quote("\u00e9" * 50) == "'" + "\u00e9" * QUOTE_CHARS + "'… (50 characters)"
    assert quote("abcdef", 3, sized=False) == "'abc'…"
    assert show(None) == "None"
    assert show(12) == "12"
    assert show(list(range(100))) == repr(list(range(100)))[:QUOTE_CHARS] + "…"
    assert show("x") == "'x'"


@given(st.binary(max_size=200))
@example(b"\xed\xa0\x80")  # an encoded surrogate: no UTF-8
def test_any_bytes_quote_to_one_printable_bounded_line(data: bytes) -> None:
    shown = quote(data)
    assert shown.isprintable()
    assert len(shown) <= _QUOTED_MAX


@given(st.text(max_size=QUOTE_CHARS))
@example("'\"\\\n\x00\u2028")
def test_text_reads_back(text: str) -> None:
    shown = quote(text)
    assert shown.isprintable()
    assert ast.literal_eval(shown) == text


#: Strings hostile to a terminal or a log, each put where a message quotes input.
_HOSTILE = ["\x1b[2J\x1b[H", "a\nE100 forged", "\u2028", "\u202eevil", "\x00", "'\\", "x" * 3000, "\U000e0041"]

#: Lines whose findings quote a string of the input (``{s}``: the string as JSON; ``{d}``:
#: a payload holding it, as a JSON string).
_TEMPLATES = [
    '{{"type":{s},"agent":"a","final":true,"delta":""}}',  # E104
    '{{"type":"text","agent":"a","final":true,"delta":"",{s}:1}}',  # E105
    '{{"type":"tool_result","agent":"a","final":true,"delta":"","id":{s},"name":"n"}}',  # W165
    '{{"type":"server_tool_result","agent":"a","final":true,"delta":"","id":{s},"name":{s}}}',  # W115, W166
    '{{"type":"citation","agent":"a","final":true,"delta":"","citation_type":{s}}}',  # W114
    '{{"type":"tool_call","agent":"a","final":false,"delta":"","id":"x","name":"n"}}\n\n'
    'data: {{"type":"tool_call","agent":"a","final":true,"delta":"","id":{s},"name":"n"}}',  # E127
    '{{"type":"meta_init","agent":"a","final":true,"delta":{d}}}',  # W144, E142
    '{{"type":"meta_compaction","agent":"a","final":true,"delta":{d}}}',  # E141
]


def _payload(s: str) -> str:
    return json.dumps({"format": s, "agent_uuid": s, "migrated_from": s, "trigger": s})


@pytest.mark.parametrize("hostile", _HOSTILE, ids=range(len(_HOSTILE)))
def test_every_message_is_printable_and_bounded(hostile: str) -> None:
    """[V3.4-a] Whatever the input holds, a message is one printable line of bounded length."""
    raw = hostile.encode()
    codes: set[str] = set()
    for template in _TEMPLATES:
        line = template.format(s=json.dumps(hostile), d=json.dumps(_payload(hostile)))
        sse = b"event: " + raw + b"\nid: 9" + raw + b"\n" + raw + b": x\n\n"  # W113, W118, W112
        body = sse + b"data: " + line.encode() + b"\n\nid: 1\ndata: [DONE]\n\n"
        validator = StreamValidator(max_line_bytes=1 << 20)
        for finding in validator.feed(body) + validator.close():
            codes.add(finding.code)
            assert finding.message.isprintable(), (finding.code, finding.message)
            assert len(finding.message) <= _MESSAGE_MAX, (finding.code, len(finding.message))
    # The streams reached the rules that quote input (else this test would prove nothing).
    quoting = {"E104", "E105", "W114", "W115", "W165", "W166", "E127", "W144", "E142", "E141", "W112", "W113"}
    if "\x00" not in hostile:  # an id holding NUL is ignored (WHATWG), so no W118
        quoting.add("W118")
    assert codes >= quoting


def test_envelope_validate_escapes_a_binary_field_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """[V3.4-a] W112 of a line of binary: the field's bytes escaped, on the finding's one line."""
    path = tmp_path / "binary.sse"
    path.write_bytes(b"data: [DONE]\n\n\x1b]0;owned\x07\xe2\x80\xae\x00" + b"z" * 100 + b": x\n\n")
    assert main(["validate", str(path)]) == 0
    out = capsys.readouterr().out
    assert out == (
        f"{path}:3:1: W112 SSE line with field '\\x1b]0;owned\\x07\\u202e\\x00{'z' * 28}'… (114 bytes) "
        "is ignored (not data, event, id or retry); later such lines are not reported\n"
    )
