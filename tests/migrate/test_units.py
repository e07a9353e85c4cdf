"""Unit tests: every error of spec/legacy-xml.md §M4 and every compatibility form (§M2)."""

from __future__ import annotations

import html
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from envelope import MigrationError, MigrationWarning, XmlMigrator, migrate_xml, reconstruct
from validating import assert_valid

A = "11111111-1111-1111-1111-111111111111"
INIT = '<meta_init data="{&quot;agent_uuid&quot;: &quot;' + A + '&quot;}"></meta_init>'
SRC = Path(__file__).resolve().parents[2] / "src"


def run(text: str | bytes, **options: Any) -> tuple[list[dict[str, Any]], XmlMigrator]:
    options.setdefault("agent", A)
    m = XmlMigrator(**options)
    lines = m.feed(text) + m.close()
    agents = reconstruct(lines).to_dict()["agents"]
    return (agents[next(iter(agents))]["blocks"] if agents else []), m


def test_m2_1_bodies_are_raw_and_only_the_close_tag_ends_them() -> None:
    blocks, _ = run("<content-block-text>a < b &amp; <chart>x</chart><table/></content-block-text>")
    assert blocks[0]["content"] == "a < b &amp; <chart>x</chart><table/>"


def test_m2_3_cdata_split_across_chunks_and_unprotected_end() -> None:
    text = (
        '<content-block-server_tool_result id="s1" name="web_search_tool_result">'
        "<![CDATA[x]]>y]]></content-block-server_tool_result>"
    )
    m = XmlMigrator(agent=A)
    lines = [line for ch in text for line in m.feed(ch)] + m.close()
    block = reconstruct(lines).to_dict()["agents"][A]["blocks"][0]
    assert block["content"] == "x]]>y"


def test_m2_3_cdata_absent_and_whitespace_between_tags() -> None:
    blocks, _ = run(
        "\n  <content-block-tool_result id='t' name='n'>plain</content-block-tool_result>\n"
        '<content-block-error>\n <![CDATA[{"e": 1}]]>\n</content-block-error>\n'
    )
    assert blocks[0]["content"] == "plain"
    assert blocks[1]["data"] == {"e": 1}


def test_m2_4_attribute_references_named_and_numeric() -> None:
    blocks, _ = run(
        '<content-block-tool_call id="t" name="n" '
        'arguments="{&quot;a&quot;: &quot;&lt;&amp;&gt;&#x27;&#39;&#233;&apos;&quot;}">'
        "</content-block-tool_call>"
    )
    assert blocks[0]["input"] == {"a": "<&>''é'"}


def test_m2_4_unknown_entity_is_inert() -> None:
    with pytest.raises(MigrationError, match="not a known reference"):
        run('<content-block-tool_call id="t" name="n" arguments="&xxe;"></content-block-tool_call>')


def test_m2_3_multimodal_tool_result() -> None:
    blocks, _ = run(
        '<content-block-tool_result id="t" name="n"><text><![CDATA[see]]></text>'
        '<image src="data:image/png;base64,AA==" media_type="image/png" /></content-block-tool_result>'
    )
    assert blocks[0]["content"] == "see"
    assert blocks[0]["images"] == [{"src": "data:image/png;base64,AA==", "media_type": "image/png"}]


def test_m2_10_citations_follow_the_text() -> None:
    blocks, _ = run(
        "<content-block-text>t</content-block-text><citations>"
        '<citation type="page_location" document_index="0" start_page_number="1" end_page_number="2" '
        'document_title="A &amp; B"><![CDATA[c1]]></citation><citation type="other">c2</citation></citations>'
    )
    cits = blocks[0]["citations"]
    assert cits[0] == {
        "cited_text": "c1",
        "citation_type": "page_location",
        "document_index": 0,
        "document_title": "A & B",
        "start_page_number": 1,
        "end_page_number": 2,
    }
    assert cits[1] == {"cited_text": "c2", "citation_type": "other"}


@pytest.mark.parametrize("tag", ["content-block-web_search_tool_result", "bash_code_execution_tool_result"])
def test_m2_6_result_tags_named_after_the_result_type(tag: str) -> None:
    blocks, _ = run(f'<{tag} id="srvtoolu_1"><![CDATA[r]]></{tag}>')
    assert blocks[0]["type"] == "server_tool_result"
    assert blocks[0]["name"] == tag.removeprefix("content-block-")


def test_m2_7_older_labels_mapped_with_a_warning_or_kept() -> None:
    text = (
        '<content-block-tool_call id="srvtoolu_1" name="bash_code_execution" arguments="{}"></content-block-tool_call>'
        '<content-block-tool_result id="srvtoolu_1" name="bash_code_execution_tool_result"><![CDATA["R(a=\'\\\\n\')"]]>'
        "</content-block-tool_result>"
    )
    blocks, m = run(text, era="early")
    assert [b["type"] for b in blocks] == ["server_tool_call", "server_tool_result"]
    assert blocks[1]["content"] == "\"R(a='\\\\n')\""
    assert [w.section for w in m.warnings] == ["M2.7", "M2.7"]
    kept, m2 = run(text, era="early", keep_labels=True)
    assert [b["type"] for b in kept] == ["tool_call", "tool_result"]
    assert m2.warnings == []


def test_m3_1_raw_line_feed_means_early() -> None:
    blocks, m = run("<content-block-text>a\\nb\nc</content-block-text>")
    assert m.era == "early"
    assert blocks[0]["content"] == "a\\nb\nc"


def test_m3_1_later_guessed_with_a_warning_and_forcible() -> None:
    text = "<content-block-text>a\\nb\\\\c</content-block-text>"
    blocks, m = run(text)
    assert (m.era, blocks[0]["content"]) == ("later", "a\nb\\c")
    assert [w.section for w in m.warnings] == ["M3.1"]
    blocks, m = run(text, era="early")
    assert blocks[0]["content"] == "a\\nb\\\\c"
    assert m.warnings == []


def test_m3_1_bad_escape_means_early() -> None:
    blocks, m = run("<content-block-text>C:\\temp</content-block-text>")
    assert (m.era, blocks[0]["content"]) == ("early", "C:\\temp")


def test_m3_3_later_client_result_reopened_cdata_and_newline_rule() -> None:
    blocks, m = run(
        '<content-block-tool_result id="t" name="n"><![CDATA[a]]]]><![CDATA[>b\\nc\\d]]></content-block-tool_result>'
    )
    assert m.era == "later"
    assert blocks[0]["content"] == "a]]>b\nc\\d"
    assert [w.section for w in m.warnings] == ["M3.3"]


def test_m1_1_raw_sse_recovered_by_the_writing_rule() -> None:
    raw = b"data: <content-block-text>\n\ndata: a\n\n\nb\n\ndata: </content-block-text>\n\ndata: [DONE]\n\n"
    m = XmlMigrator(agent=A)
    lines = m.feed(raw) + m.close()
    assert m.input_kind == "raw-sse"
    assert lines[-1] == b"[DONE]"
    assert reconstruct(lines).to_dict()["agents"][A]["blocks"][0]["content"] == "a\n\n\nb"


def test_m1_3_done_inside_a_block_is_text() -> None:
    raw = b"data: <content-block-text>\n\ndata: [DONE]\n\ndata: </content-block-text>\n\n"
    blocks, _m = run(raw)
    assert blocks[0]["content"] == "[DONE]"


def test_m1_4_utf8_split_anywhere() -> None:
    data = ("<content-block-text>é😀</content-block-text>").encode()
    m = XmlMigrator(agent=A)
    lines = [line for i in range(len(data)) for line in m.feed(data[i : i + 1])] + m.close()
    assert reconstruct(lines).to_dict()["agents"][A]["blocks"][0]["content"] == "é😀"


# ---------------------------------------------------------------- raw records inside a streamed body
# The unframer emits whole records of a text or thinking body directly (a fast path); these
# pin what it must hand back to the general path: a character cut between records, invalid
# UTF-8, empty records, and oversize lines, with positions exact after it.


def _deltas(lines: list[bytes]) -> list[str]:
    return [json.loads(line)["delta"] for line in lines]


def test_m1_4_character_cut_between_raw_records_is_joined() -> None:
    raw = b"data: <content-block-text>\n\ndata: a\xc3\n\ndata: \xa9b\n\ndata: c\n\ndata: </content-block-text>\n\n"
    m = XmlMigrator(agent=A)
    assert _deltas(m.feed(raw) + m.close()) == ["a", "\u00e9b", "c", ""]


def test_m1_4_invalid_utf8_in_a_raw_record_has_its_line_and_offset() -> None:
    raw = b"data: <content-block-text>\n\ndata: ok\n\ndata: ab\xff\n\ndata: </content-block-text>\n\n"
    with pytest.raises(MigrationError, match="invalid UTF-8") as info:
        XmlMigrator(agent=A).feed(raw)
    assert (info.value.position.line, info.value.position.offset) == (5, raw.index(b"\xff"))


def test_m4_1_positions_exact_after_empty_and_plain_raw_records() -> None:
    raw = b"data: <content-block-thinking>\n\ndata: \n\ndata: a\n\ndata: \n\ndata: </content-block-thinking>\n\n"
    raw += b"data: <foo>\n\n"
    m = XmlMigrator(agent=A)
    assert _deltas(m.feed(raw)) == ["a", ""]
    with pytest.raises(MigrationError, match="unknown tag <foo>") as info:
        m.close()
    at = raw.index(b"<foo>")
    assert (info.value.position.line, info.value.position.offset) == (raw[:at].count(b"\n") + 1, at)


def test_m6_1_a_a_streamed_block_with_oversize_lines_is_reported_once_at_its_open_tag() -> None:
    """§M6.1-a: two oversize lines (one per record), one report: the count would follow the chunks."""
    raw = b"data: <content-block-text>\n\ndata: a\n\ndata: b\n\ndata: </content-block-text>\n\n"
    m = XmlMigrator(agent=A, max_bytes=80)
    lines = m.feed(raw) + m.close()
    assert _deltas(lines) == ["a", "b", ""]
    assert len(lines[0]) > 80
    assert len(lines[1]) > 80
    assert [(w.section, w.position.line, w.position.offset) for w in m.warnings] == [("M6.1", 1, 6)]
    assert "text block: the fixed part of its lines leaves 0 bytes for the delta at max_bytes=80" in str(m.warnings[0])


# ---------------------------------------------------------------- errors (§M4.1) and --lenient (§M4.2)

ERRORS = [
    ("<foo>x</foo>", "unknown tag <foo>", 1, 0),
    ("\n<content-block-text>open", "still open", 2, 1),
    ('<meta_init data="{not json"></meta_init>', "not JSON", 1, 0),
    ("hello", "text outside any block", 1, 0),
    ("</content-block-text>", "no open block", 1, 0),
    ('<content-block-tool_result id="t" name="n"><![CDATA[x', "still open", 1, 0),
]


@pytest.mark.parametrize(("text", "message", "line", "offset"), ERRORS)
def test_m4_1_errors_have_positions(text: str, message: str, line: int, offset: int) -> None:
    with pytest.raises(MigrationError, match=message) as info:
        run(text)
    assert (info.value.position.line, info.value.position.offset) == (line, offset)


@pytest.mark.parametrize(("text", "message", "line", "offset"), ERRORS)
def test_m4_2_lenient_keeps_the_content(text: str, message: str, line: int, offset: int) -> None:  # noqa: ARG001  # shared table
    blocks, m = run(text, lenient=True)
    assert any(message in w.message and w.recovered for w in m.warnings)
    everything = json.dumps(blocks, ensure_ascii=False)
    for piece in ("x", "open", "not json", "hello"):
        if piece in text:
            assert piece in everything


def test_m5_1_no_agent_is_an_error_even_lenient() -> None:
    with pytest.raises(MigrationError, match="no agent") as info:
        run("\n\n<content-block-text>a</content-block-text>", agent=None, lenient=True)
    assert info.value.position.line == 3


def test_m5_1_agent_from_meta_init() -> None:
    blocks, m = run(INIT + "<content-block-text>a</content-block-text>", agent=None)
    assert m.agent == A
    assert blocks[1]["content"] == "a"


def test_m1_2_input_forced() -> None:
    with pytest.raises(MigrationError, match="does not start with 'data: '"):
        run("<content-block-text>a</content-block-text>", input="raw-sse")


def test_m1_1_truncated_capture() -> None:
    with pytest.raises(MigrationError, match="ends inside a record"):
        run(b"data: <content-block-text>a</content-block-text>")


def test_invalid_utf8_has_its_offset() -> None:
    with pytest.raises(MigrationError, match="invalid UTF-8") as info:
        run(b"<content-block-text>ab\xff</content-block-text>")
    assert info.value.position.offset == 22


def test_m2_8_hostile_inputs_stay_bounded() -> None:
    m = XmlMigrator(agent=A, max_tag_chars=1000)
    m.feed('<content-block-tool_call id="')
    for _ in range(9):
        m.feed("a" * 100)
    with pytest.raises(MigrationError, match="max_tag_chars"):
        m.feed("a" * 100)
    with pytest.raises(MigrationError, match="name longer"):
        run("<" + "a" * 500)
    entity_bomb = '<!DOCTYPE x [<!ENTITY a "aaaa">]><content-block-text>&a;</content-block-text>'
    with pytest.raises(MigrationError, match=r"unknown tag|malformed|does not start a tag"):
        run(entity_bomb)
    blocks, _ = run(entity_bomb, lenient=True)
    assert "&a;" in json.dumps(blocks)


def test_migrate_xml_yields_as_it_goes() -> None:
    it = migrate_xml(iter([INIT, "<content-block-text>", "hi"]), lenient=True)
    assert b'"meta_init"' in next(it)
    assert b'"hi"' in next(it)


def test_cli_exit_codes(tmp_path: Path) -> None:
    def cli(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
        env = {"PYTHONPATH": str(SRC)}
        return subprocess.run(
            [sys.executable, "-m", "envelope", "migrate", *args], input=stdin, capture_output=True, env=env, check=False
        )

    good = cli("-", "--agent", A, "--format", "jsonl", stdin=b"<content-block-text>a</content-block-text>")
    assert good.returncode == 0
    assert good.stdout.splitlines()[0].startswith(b'{"type":"text"')
    bad = cli("-", stdin=b"<content-block-text>a</content-block-text>")
    assert bad.returncode == 2
    assert b"<stdin>: error: line 1, byte offset 0: no agent" in bad.stderr
    out = tmp_path / "out.sse"
    lenient = cli("-", "--agent", A, "--lenient", "-o", str(out), stdin=b"<foo/>")
    assert lenient.returncode == 1
    assert b"warning" in lenient.stderr
    assert out.read_bytes().startswith(b'data: {"type":"text"')
    failed = cli("-", "-o", str(tmp_path / "none"), stdin=b"<foo/>")
    assert failed.returncode == 2
    assert not (tmp_path / "none").exists()


def test_warnings_go_to_the_callback_and_are_not_kept() -> None:
    """M6.2: with on_warning, warnings are delivered there only (bounded memory); counted in both cases."""
    text = (
        b'<meta_init data="{&quot;format&quot;: &quot;xml&quot;, &quot;user_query&quot;: &quot;q&quot;, '
        b'&quot;agent_uuid&quot;: &quot;a&quot;, &quot;model&quot;: &quot;m&quot;}"></meta_init>'
        b'<content-block-tool_call id="srvtoolu_1" name="bash" arguments="{}"></content-block-tool_call>'
    )
    seen: list[MigrationWarning] = []
    m = XmlMigrator(on_warning=seen.append)
    m.feed(text)
    m.close()
    assert [w.section for w in seen] == ["M2.7"]
    assert m.warnings == []
    assert m.warning_count == 1
    kept = XmlMigrator()
    kept.feed(text)
    kept.close()
    assert [w.section for w in kept.warnings] == ["M2.7"]
    assert kept.warning_count == 1


REQUIRED = f'"user_query": "q", "agent_uuid": "{A}", "model": "m"'


def _meta_init_delta(data: str) -> tuple[str, XmlMigrator]:
    """Migrate a raw capture of one ``meta_init`` (``data`` as JSON text) and [DONE]; the stream must validate."""
    m = XmlMigrator()
    raw = f'data: <meta_init data="{html.escape(data)}"></meta_init>\n\ndata: [DONE]\n\n'
    lines = m.feed(raw.encode()) + m.close()
    assert_valid(lines)
    delta: str = json.loads(lines[0])["delta"]
    return delta, m


def test_m6_3_meta_init_says_json_and_keeps_the_origin() -> None:
    """[M6.3-a] ``format`` becomes ``json`` in place, ``migrated_from: xml`` follows it; other values keep their bytes."""
    delta, m = _meta_init_delta(
        '{"user_query": "q", "format": "xml", "nested": {"a": [1, 2.50, "\\u00e9"]}, '
        f'"agent_uuid": "{A}", "model": "m"' + "}"
    )
    assert delta == (
        '{"user_query":"q","format":"json","migrated_from":"xml","nested":{"a": [1, 2.50, "\\u00e9"]},'
        f'"agent_uuid":"{A}","model":"m"' + "}"
    )
    assert m.warning_count == 0


def test_m6_3_meta_init_without_format_gets_both_keys_first() -> None:
    """[M6.3-a] A payload with no ``format`` gets both keys at its start."""
    delta, _ = _meta_init_delta("{" + REQUIRED + "}")
    assert delta == '{"format":"json","migrated_from":"xml",' + REQUIRED.replace(": ", ":").replace(", ", ",") + "}"


def test_m6_3_a_differing_migrated_from_is_replaced_with_a_note() -> None:
    """[M6.3-b] An existing ``migrated_from`` is replaced; a different value is reported."""
    delta, m = _meta_init_delta('{"migrated_from": "csv", "format": "xml", ' + REQUIRED + "}")
    assert json.loads(delta) == {
        "format": "json",
        "migrated_from": "xml",
        "user_query": "q",
        "agent_uuid": A,
        "model": "m",
    }
    assert [(w.section, w.recovered) for w in m.warnings] == [("M6.3", False)]
    assert "'csv'" in str(m.warnings[0])
    delta, m = _meta_init_delta('{"migrated_from": "xml", "format": "xml", ' + REQUIRED + "}")
    assert list(json.loads(delta)) == ["format", "migrated_from", "user_query", "agent_uuid", "model"]
    assert m.warning_count == 0


def test_m6_3_a_payload_that_is_not_an_object_is_carried_as_written() -> None:
    """[M6.3-c] Only a JSON object is rewritten; anything else is carried as written (§M2.9)."""
    m = XmlMigrator(agent=A, lenient=True)
    lines = m.feed('<meta_init data="[1, 2]"></meta_init><meta_init data="not json"></meta_init>') + m.close()
    assert [json.loads(line)["delta"] for line in lines] == ["[1, 2]", "not json"]
    assert [w.section for w in m.warnings] == ["M2.9"]


DEEP_OK = "[" * 250 + "]" * 250  # inside each place's own brackets, still within the limit
DEEP = "[" * 257 + "]" * 257
DEEPER = "[" * 3000 + "]" * 3000  # past msgspec's own recursion limit
DEEP_PLACES = {
    "arguments": '<content-block-tool_call id="t" name="n" arguments="{}"></content-block-tool_call>',
    "meta_init data": '<meta_init data="{&quot;agent_uuid&quot;: &quot;' + A + '&quot;, &quot;x&quot;: {}}"/>',
    "meta_final data": '<meta_final data="{}"/>',
    "awaiting_frontend_tools data": '<awaiting_frontend_tools data="{}"/>',
    "meta_files body": "<content-block-meta_files><![CDATA[{}]]></content-block-meta_files>",
    "error body": "<content-block-error>{}</content-block-error>",
    # A backslash makes the arguments era evidence (§M3.1-b), read under both eras.
    "arguments read for the era": '<content-block-tool_call id="t" name="n" arguments="[&quot;\\\\&quot;, {}]"/>',
}


@pytest.mark.parametrize("place", list(DEEP_PLACES))
def test_m2_9_b_nesting_past_the_limit_is_a_coded_error(place: str) -> None:
    """[M2.9-b] Deeper than MAX_NESTING_DEPTH: a MigrationError naming the limit, never RecursionError."""
    template = DEEP_PLACES[place]
    for deep in (DEEP, DEEPER):
        with pytest.raises(MigrationError, match="MAX_NESTING_DEPTH=256") as info:
            run(template.replace("{}", deep), era="early")
        assert info.value.position.offset == 0
        assert info.value.section == "M2.9"
    # Within the limit it is JSON like any other.
    run(template.replace("{}", DEEP_OK), era="early")


def test_m2_9_b_the_limit_is_exact() -> None:
    """[M2.9-b] 256 levels are read; the bracket opening level 257 is named."""
    template = DEEP_PLACES["arguments"]
    run(template.replace("{}", "[" * 256 + "]" * 256))
    with pytest.raises(MigrationError, match=r"at character offset 256\)"):
        run(template.replace("{}", DEEP))


@pytest.mark.parametrize("place", list(DEEP_PLACES))
def test_m2_9_b_lenient_carries_a_deep_payload_as_written(place: str) -> None:
    """[M2.9-b] Lenient: the payload is carried as written, with a recovered warning."""
    m = XmlMigrator(agent=A, lenient=True)
    lines = m.feed(DEEP_PLACES[place].replace("{}", DEEPER)) + m.close()
    assert DEEPER in "".join(json.loads(line)["delta"] for line in lines)
    assert [(w.section, w.recovered) for w in m.warnings if w.section == "M2.9"] == [("M2.9", True)]


def test_m2_9_b_deep_arguments_are_no_era_evidence() -> None:
    """[M2.9-b] Too deep to read under either era's reading: no decision from them (§M3.1-b).

    The era is then guessed by §M3.1-d, with its note, as for any undecided backslash.
    """
    m = XmlMigrator(agent=A, lenient=True)
    m.feed(DEEP_PLACES["arguments read for the era"].replace("{}", DEEPER))
    assert m.era == "later"
    assert [w.section for w in m.warnings] == ["M3.1", "M2.9"]


def test_m4_2_b_text_outside_blocks_is_reported_once_per_run_wherever_it_splits() -> None:
    """[M4.2-b] Found by the chunking property: a run of stray text split across feeds gave one report per piece."""
    text = '<]]>meta_init data="x"></meta_init>'
    reports = []
    for cut in (None, 5, 6, 20):
        m = XmlMigrator(agent=A, lenient=True)
        pieces = [text] if cut is None else [text[:cut], text[cut:]]
        lines = [line for piece in pieces for line in m.feed(piece)] + m.close()
        reports.append([str(w) for w in m.warnings])
        assert reconstruct(lines).to_dict()["agents"][A]["blocks"][0]["content"] == text
    assert reports[0] == [
        "line 1, byte offset 0: malformed tag: '<]]>'; kept as text (spec §M4.2)",
        "line 1, byte offset 4: text outside any block: 'meta_init data=\"x\">'; kept as text (spec §M4.2)",
        "line 1, byte offset 23: closing tag </meta_init> with no open block: '</meta_init>'; kept as text (spec §M4.2)",
    ]
    assert all(r == reports[0] for r in reports)


def migrate_all(pieces: list[str], **options: Any) -> list[bytes]:
    m = XmlMigrator(agent=A, **options)
    return [line for piece in pieces for line in m.feed(piece)] + m.close()


def test_m4_2_b_a_long_run_is_shown_cut_and_strict_mode_names_the_same_text() -> None:
    """[M4.2-b] The report shows the run's first 60 characters from its first non-whitespace one."""
    text = "<content-block-text>a</content-block-text>  " + "x" * 100 + "<content-block-text>b</content-block-text>"
    messages = set()
    for cut in range(40, 120, 7):
        with pytest.raises(MigrationError) as info:
            migrate_all([text[:cut], text[cut:]])
        messages.add(str(info.value))
    assert messages == {"line 1, byte offset 44: text outside any block: '" + "x" * 60 + "…' (spec §M4.2)"}


def test_m4_2_b_held_stray_text_ends_before_done() -> None:
    """[M4.2-b] Stray text held for its report ends at a [DONE] record, which stays the terminator."""
    m = XmlMigrator(agent=A, lenient=True)
    lines = m.feed(b"data: ab\n\ndata: [DONE]\n\n") + m.close()
    assert lines[-1] == b"[DONE]"
    assert [str(w) for w in m.warnings] == [
        "line 1, byte offset 6: text outside any block: 'ab'; kept as text (spec §M4.2)"
    ]


def test_m3_2_a_bad_later_escape_in_a_streamed_body_is_placed_at_its_open_tag() -> None:
    """[M3.2-a] Found by the chunking property: the position depended on where the text was cut."""
    text = "\n<content-block-text>abc \\] d</content-block-text>"
    for cut in (None, 10, 26, 27):
        pieces = [text] if cut is None else [text[:cut], text[cut:]]
        with pytest.raises(MigrationError, match="never writes") as info:
            migrate_all(pieces, era="later")
        assert (info.value.position.line, info.value.position.offset) == (2, 1)
