"""Property: the record-level fast paths agree with the tokenizer's path (spec §M6.1).

Fed whole, a raw capture takes the fast paths of ``_xml_translate`` (runs of body records,
whole tag records, the usual open tags); fed one byte at a time, no record is ever whole
in the unframer, so every character goes through the UTF-8 and tokenizer layers. The
lines differ (one delta per piece), but the transcript, the warnings (with their input
positions) and the error, if any, must not: the output depends on the input alone
(§M6.1). Inputs are written by the legacy writer in both eras, then damaged with markup,
references, backslashes and line feeds, and migrated strict and lenient.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from envelope import EnvelopeError, MigrationWarning, Position, XmlMigrator, reconstruct

from ._legacy_writer import Era, frame_raw_sse, write
from .test_property import AGENT, block, calls_once

#: Whole blocks inserted between the old server's chunks, which the fast paths must leave
#: to the tokenizer or handle as it does: attributes out of order or extra, references,
#: self-closing tags, a body that is not CDATA, an older label, an unknown tag. (Text
#: outside any block is left out: its warning quotes the text of the piece it came in,
#: which depends on the cuts by design, §M4.2.)
JUNK = [
    "<content-block-text></content-block-text>",
    '<content-block-tool_call name="n" id="toolu_1" arguments="{}"></content-block-tool_call>',
    '<content-block-tool_result id="toolu_2" name="n" x="1"><![CDATA[a]]></content-block-tool_result>',
    '<content-block-tool_result id="srvtoolu_3" name="a&amp;b"><![CDATA[x]]>]]></content-block-tool_result>',
    '<content-block-tool_call id="t&#x27;" name="&lt;n&gt;" arguments="{&quot;a&quot;: &bogus;}"/>',
    '<content-block-server_tool_result id="s" name="w"><![CDATA[\\]]></content-block-server_tool_result>',
    "<content-block-meta_files>{}</content-block-meta_files>",
    "<unknown/>",
    " \n\t ",
]


def _where(position: Position, section: str | None) -> Position | None:
    """The position to compare: an era note (§M3.1) or a later-era escape problem (§M3.2)
    inside a text or thinking body is placed at the piece of body text it was found in, so
    it moves with the cuts (in the tokenizer as much as in the fast paths); others are exact."""
    return None if section in ("M3.1", "M3.2") else position


def _run(pieces: list[bytes], *, era: str, lenient: bool) -> dict[str, Any]:
    warnings: list[MigrationWarning] = []
    migrator = XmlMigrator(era=era, lenient=lenient, on_warning=warnings.append)  # type: ignore[arg-type]  # era drawn from the literals
    lines: list[bytes] = []
    error = None
    try:
        for piece in pieces:
            lines += migrator.feed(piece)
        lines += migrator.close()
    except EnvelopeError as exc:
        error = (type(exc).__name__, exc.message, exc.section, _where(exc.position, exc.section))
    notes = [(w.message, _where(w.position, w.section), w.section, w.recovered) for w in warnings]
    result: dict[str, Any] = {"error": error, "warnings": notes}
    if error is None:
        result["transcript"] = reconstruct(lines).to_dict()
        result["era"] = migrator.era
    return result


@given(st.sampled_from(["early", "later"]), st.data())
def test_fast_paths_agree_with_the_tokenizer(era: Era, data: st.DataObject) -> None:
    blocks = [{"type": "meta_init", "data": {"agent_uuid": AGENT, "format": "xml"}}]
    blocks += data.draw(st.lists(block(era), max_size=5).filter(calls_once))
    chunks: list[str] = []
    for b in blocks:
        chunks += write([b], era)
        if data.draw(st.integers(0, 3)) == 0:
            chunks.append(data.draw(st.sampled_from(JUNK)))  # between two blocks
    text = "".join(chunks)
    cuts = data.draw(st.lists(st.integers(1, max(1, len(text) - 1)), max_size=10, unique=True))
    chunks = [text[a:b] for a, b in itertools.pairwise([0, *sorted(cuts), len(text)]) if text[a:b]]
    raw = frame_raw_sse(chunks)
    mode = data.draw(st.sampled_from(["auto", era]))
    lenient = data.draw(st.booleans())
    whole = _run([raw], era=mode, lenient=lenient)
    bytewise = _run([raw[i : i + 1] for i in range(len(raw))], era=mode, lenient=lenient)
    assert whole == bytewise


def _sse(*records: str) -> bytes:
    """Raw SSE of ``records`` and ``[DONE]`` (so that each record is followed by a separator)."""
    return "".join(f"data: {r}\n\n" for r in (*records, "[DONE]")).encode("utf-8", "surrogateescape")


META = f'<meta_init data="{{&quot;agent_uuid&quot;: &quot;{AGENT}&quot;}}"></meta_init>'
RESULT = '<content-block-tool_result id="t" name="n">'
LT20 = "&lt;" * 20
CALL = '<content-block-tool_call id="t" name="{}" arguments="{{}}"></content-block-tool_call>'


@pytest.mark.parametrize(
    ("raw", "lenient", "expect"),
    [
        # a CDATA body whose first close tag does not end it (§M2.3); the next record ends it
        (_sse(META, RESULT + "<![CDATA[a</content-block-tool_result>", "]]></content-block-tool_result>"), False, "a<"),
        # an empty body; a body-text run of empty records only
        (_sse(META, RESULT + "</content-block-tool_result>"), False, '"delta":""'),
        (_sse(META, "<content-block-text>", "", "", "</content-block-text>"), False, '"final":true'),
        # invalid UTF-8 in a tag record; a tag name over the limit (§M2.8)
        (_sse(META, "<content-block-text>\udcff</content-block-text>"), False, "invalid UTF-8"),
        (_sse(META, "<" + "n" * 200 + ">"), False, "tag name longer than"),
        # stray text, then one of the usual open tags (lenient: the stray block is closed first)
        (_sse(META, "stray", "<content-block-text>", "a", "</content-block-text>"), True, "text outside any block"),
        # a repeated attribute; more than 16 references besides the common ones, then an unknown one
        (
            _sse(META, '<content-block-tool_result id="t" id="u" name="n"></content-block-tool_result>'),
            False,
            "repeated",
        ),
        (_sse(META, CALL.format(LT20)), False, "<" * 20),
        (_sse(META, CALL.format(LT20 + "&bogus;")), True, "not a known reference"),
    ],
)
def test_fast_path_edges(raw: bytes, lenient: bool, expect: str) -> None:
    whole = _run([raw], era="auto", lenient=lenient)
    if b"stray" not in raw:  # stray text's warnings quote each piece it came in (§M4.2)
        assert whole == _run([raw[i : i + 1] for i in range(len(raw))], era="auto", lenient=lenient)
    else:  # the stray block ends before the next block opens
        assert [b["content"] for b in whole["transcript"]["agents"][AGENT]["blocks"][1:]] == ["stray", "a"]
    warnings = [w[0] for w in whole["warnings"]]
    if whole["error"] is not None:
        assert expect in whole["error"][1]
    elif any(expect in w for w in warnings):
        pass
    else:
        migrator = XmlMigrator(lenient=lenient, on_warning=lambda _: None)
        lines = migrator.feed(raw) + migrator.close()
        assert expect in b"".join(lines).decode("utf-8")
