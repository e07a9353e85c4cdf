"""One minimal failing stream per code, and the code table kept equal to spec/validation.md.

Each case is the smallest input that shows the code; the assertion names the line it
must carry. Cases feed bytes through ``StreamValidator`` (so the reader layer is part of
every case) unless they need a smaller limit.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from envelope import DecodeError, StreamValidator, Validator, Violation, validate
from envelope._validator import CODES, explain

from ._streams import A, complete, env, jsonl, meta_final, meta_init, sse, text

ROOT = Path(__file__).resolve().parents[2]
IMG = {"src": "https://example.com/a.png", "media_type": "image/png"}


def run(data: bytes, **kw: int) -> list[Violation]:
    checker = StreamValidator(**kw)  # type: ignore[arg-type]  # only int limits are passed
    return checker.feed(data) + checker.close()


def pairs(found: list[Violation]) -> list[tuple[str, int]]:
    return [(v.code, v.line) for v in found]


#: code -> (input bytes, line the violation must carry)
CASES: dict[str, tuple[bytes, int]] = {
    "E100": (jsonl(meta_init(), b'{"type":"text","agent":"a\xff","final":true,"delta":""}'), 2),
    "E101": (jsonl(meta_init(), '{"type":"text",'), 2),
    "E102": (jsonl(meta_init(), "[1, 2]"), 2),
    "E103": (jsonl(meta_init(), '{"type":"text","agent":"agent-a","final":1,"delta":""}'), 2),
    "E104": (jsonl(meta_init(), env("picture", True, "")), 2),
    "E105": (jsonl(meta_init(), env("thinking", True, "", url="https://x")), 2),
    "E106": (jsonl(meta_init(), env("tool_result", True, "ok", id="t1")), 2),
    "E107": (jsonl(meta_init(), env("text", False, "y" * 2100)), 2),
    "W108": (jsonl(meta_init(), env("server_tool_call", True, "{}", id="s", name="n" * 2100)), 2),
    "E110": (sse(meta_init()) + b"data: [DONE]\n", 3),
    "E111": (sse(meta_init(), '{"type":"text",\ndata: "agent":"agent-a","final":true,"delta":""}'), 3),
    "W112": (sse(meta_init()) + b"date: now\n\n", 3),
    "W113": (sse(meta_init()) + b"event: update\n" + sse(env("text", True, "")), 3),
    "W114": (jsonl(meta_init(), *text("x"), env("citation", True, "x", citation_type="web")), 4),
    "W115": (jsonl(meta_init(), env("server_tool_result", True, "[]", id="s", name="web_fetch")), 2),
    "E116": (jsonl(meta_init(), env("tool_call", True, "[" * 300 + "]" * 300, id="t", name="f")), 2),
    "E117": (jsonl(meta_init(), '{"type":"text","agent":"agent-a","final":true,"delta":"\\udc00"}'), 2),
    "W118": (b"id: 2\n" + sse(meta_init()) + b"id: 1\n" + sse(env("text", True, "")), 4),
    "E120": (jsonl(meta_init(), env("tool_call", False, "{", id="t", name="f")), 2),
    "E121": (jsonl(meta_init(), env("thinking", True, "late words")), 2),
    "E122": (jsonl(meta_init(), env("tool_result_image", False, "", id="t", name="f", **IMG)), 2),
    "E123": (
        jsonl(
            meta_init(),
            env("tool_result", False, "", id="t", name="f"),
            env("tool_result_image", False, "", id="t", name="g", **IMG),
        ),
        3,
    ),
    "E124": (
        jsonl(
            meta_init(),
            env("tool_result", False, "", id="t", name="f"),
            env("tool_result_image", True, "", id="t", name="f", **IMG),
        ),
        3,
    ),
    "E125": (
        jsonl(
            meta_init(),
            env("tool_result", False, "", id="t", name="f"),
            env("tool_result_image", False, "caption", id="t", name="f", **IMG),
        ),
        3,
    ),
    "E126": (jsonl(meta_init(), env("citation", True, "x", citation_type="char_location")), 2),
    "E130": (
        jsonl(
            meta_init(),
            env("text", False, "half"),
            env("meta_compaction", True, '{"trigger":"auto","pre_tokens":9}'),
            env("text", True, ""),
        ),
        3,
    ),
    "E127": (
        jsonl(
            meta_init(), env("tool_call", False, "{", id="t", name="f"), env("tool_call", True, "}", id="t", name="g")
        ),
        3,
    ),
    "W128": (
        jsonl(
            meta_init(),
            *text("x"),
            env("citation", True, "a", citation_type="char_location"),
            env("citation", True, "b", citation_type="char_location"),
        ),
        5,
    ),
    "E140": (jsonl(meta_init(), env("error", False, '{"type":'), env("error", True, '"x"')), 2),
    "E141": (jsonl(meta_init(), env("meta_files", True, '{"files":[{"file_id":"f"}]}')), 2),
    "E142": (jsonl(meta_init(agent_uuid="someone-else")), 1),
    "W144": (jsonl(meta_init(format="xml")), 1),
    "W143": (jsonl(meta_init(), env("error", True, '{"detail":"x"}')), 2),
    "E160": (jsonl(meta_init(), "[DONE]", "[DONE]"), 3),
    "W161": (jsonl(meta_init(), *text("x")), 3),
    "E162": (jsonl(meta_init(), meta_init()), 2),
    "W163": (jsonl(*text("x")), 1),
    "E164": (jsonl(meta_init(), meta_final(), env("thinking", True, "")), 3),
    "W165": (jsonl(meta_init(), env("tool_result", True, "4", id="t", name="f")), 2),
    "W166": (jsonl(meta_init(), env("server_tool_result", True, "[]", id="s", name="web_search_tool_result")), 2),
    "E167": (b"", 1),
    # spec §4.6-a: a call repeated after its result opened
    "E168": (
        jsonl(
            meta_init(),
            env("tool_call", True, "{}", id="t", name="f"),
            env("tool_result", True, "r", id="t", name="f"),
            env("tool_call", True, "{}", id="t", name="f"),
        ),
        4,
    ),
}


@pytest.mark.parametrize("code", sorted(CASES))
def test_minimal_stream_shows_code(code: str) -> None:
    data, line = CASES[code]
    found = run(data)
    assert (code, line) in pairs(found), found
    hit = next(v for v in found if v.code == code)
    severity, section, _ = CODES[code]
    assert hit.severity == severity
    assert hit.section == section
    assert hit.message
    assert "\n" not in hit.message


def test_e109_line_over_reader_cap_is_skipped_and_checking_resumes() -> None:
    data = jsonl(meta_init(), env("text", False, "z" * 500), *text("after"), meta_final(), "[DONE]")
    found = run(data, max_line_bytes=300)
    assert pairs(found) == [("E109", 2)]
    assert found[0].offset == data.index(b"\n") + 1


def test_e109_in_sse_resumes_with_positions_of_the_whole_input() -> None:
    data = sse(meta_init(), env("text", False, "z" * 500), *text("after"), meta_final(), "[DONE]")
    lines = data.split(b"\n")
    bad_at = len(lines[0]) + len(lines[1]) + 2
    found = run(data, max_line_bytes=300)
    assert pairs(found) == [("E109", 3)]
    assert found[0].offset == bad_at
    # after the skip, a fault is still placed on its own input line
    broken = data.replace(b'"delta":"after"', b'"delta":7')
    assert pairs(run(broken, max_line_bytes=300)) == [("E109", 3), ("E103", 5)]


def test_e100_in_sse_reports_the_column_and_resumes() -> None:
    data = sse(meta_init()) + b"data: \xc3(\n\n" + sse(*text("x"), meta_final(), "[DONE]")
    found = run(data)
    assert pairs(found) == [("E100", 3)]
    assert found[0].column == 7


def test_w149_payload_too_large_is_reported_not_held() -> None:
    checker = Validator(max_payload_bytes=10)
    found = checker.feed(meta_init())
    found += checker.feed(env("tool_call", False, '{"k": "' + "v" * 20, id="t", name="f"))
    assert checker.held_bytes == 0
    found += checker.feed(env("tool_call", True, '"}', id="t", name="f"))
    assert [v.code for v in found] == ["W149"]


def test_validate_numbers_plain_lines_as_a_jsonl_file() -> None:
    lines = [meta_init(), "", env("text", True, "oops"), "[DONE]"]
    found = list(validate(lines))
    assert pairs(found) == [("E121", 3)]
    assert found[0].offset == len(lines[0]) + 1 + 1


def test_validate_accepts_bytes_str_and_rawlines_alike() -> None:
    from envelope import RawLine

    stream = complete(*text("x"), env("text", True, "bad"))
    as_str = [(v.code, v.line) for v in validate(stream)]
    as_bytes = [(v.code, v.line) for v in validate(s.encode() + b"\r\n" for s in stream)]
    as_raw = [(v.code, v.line) for v in validate(RawLine(s, i + 1, 0) for i, s in enumerate(stream))]
    assert as_str == as_bytes == as_raw == [("E121", 4)]


def test_lone_surrogate_in_a_str_line_is_e100() -> None:
    assert [v.code for v in validate([meta_init(), '{"type":"text","delta":"\ud800"}', "[DONE]"])] == ["E100"]


def test_null_base_field_and_null_extra_name_absent_never_null() -> None:
    found = list(validate(complete(env("tool_call", True, "{}", id=None, name="f"))))
    assert [v.code for v in found] == ["E106"]
    assert "null" in found[0].message
    found = list(validate(complete('{"type":"text","agent":null,"final":true,"delta":""}')))
    assert [v.code for v in found] == ["E103"]


def test_oversize_citation_is_w108_even_with_room_to_split() -> None:
    line = env("citation", True, "c" * 3000, citation_type="char_location")
    found = list(validate(complete(*text("x"), line)))
    assert [v.code for v in found] == ["W108"]


def test_fixed_part_is_measured_with_final_false() -> None:
    # A one-line buffered block whose final:true line is 1 byte shorter than the
    # final:false form: the bound lies between, so the encoder could not have split it.
    probe = env("tool_call", False, "", id="t", name="f")
    bound = len(probe) + 6 - 1  # fixed(false) + 6 > bound, fixed(true) + 6 == bound
    line = env("tool_call", True, "{}" + " " * 40, id="t", name="f")
    found = list(validate([meta_init(), line], max_bytes=bound))
    assert "W108" in [v.code for v in found]
    found = list(validate([meta_init(), line], max_bytes=bound + 1))
    assert "E107" in [v.code for v in found]


def test_every_documented_code_has_a_minimal_stream() -> None:
    # E109, W149 have their own tests above; W129 and E119 need the seed profile
    # (test_validator_profile.py, tests/unit/test_spec_04_15_compaction.py); E169 has
    # tests/unit/test_sse_retry.py
    covered = set(CASES) | {"E109", "W149", "W129", "E119", "E169"}
    assert covered == set(CODES)


def test_code_table_matches_spec_validation_md() -> None:
    """One table: validation.md §4 has each code's severity, section and meaning as CODES does."""
    text_md = (ROOT / "spec" / "validation.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `([EW]1\d\d)` \| (error|warning) \| §([\d.]+) \| (.*) \|$", text_md, flags=re.M)
    documented = {code: (sev, sec, meaning.replace("`", "")) for code, sev, sec, meaning in rows}
    assert documented == CODES


def test_explain_reads_the_table() -> None:
    assert explain("e107") == f"E107 (error, spec §6.1): {CODES['E107'][2]}"
    with pytest.raises(KeyError):
        explain("E999")


def test_codes_are_numbered_by_severity() -> None:
    for code, (severity, _, _) in CODES.items():
        assert code[0] == ("E" if severity == "error" else "W")
    assert len({c[1:] for c in CODES}) == len(CODES), "a number is used by both an E and a W code"


def test_feed_after_close_is_an_envelope_error() -> None:
    from envelope import EnvelopeError

    checker = Validator()
    checker.close()
    with pytest.raises(EnvelopeError):
        checker.feed(meta_init())
    with pytest.raises(EnvelopeError):
        checker.close()
    stream = StreamValidator()
    stream.close()
    with pytest.raises(EnvelopeError):
        stream.feed(b"x")


def test_str_of_a_violation_reads_like_an_error() -> None:
    found = list(validate([meta_init(), env("text", True, "x"), "[DONE]"]))
    line_start = len(meta_init()) + 1
    # spec/cli.md C8-a: line and column from 1, the byte offset from 0 and named as one
    assert str(found[0]).startswith(f"line 2, column 1 (the line at byte offset {line_start}): E121 ")
    assert found[0].to_dict()["agent"] == A


def test_type_missing_stops_checks_after_e103() -> None:
    assert [v.code for v in validate(complete('{"agent":"agent-a","final":true,"delta":""}'))] == ["E103"]


def test_payload_shapes_beyond_the_minimal_cases() -> None:
    found = list(
        validate(
            complete(
                env("meta_files", True, '{"files":{}}'),
                env("awaiting_frontend_tools", True, '{"tool_use_id":"t"}'),
                env("awaiting_frontend_tools", True, '["t"]'),
                env("error", True, "[]"),
            )
        )
    )
    assert [(v.code, v.line) for v in found] == [("E141", 2), ("E141", 3), ("E141", 4), ("E141", 5)]
    assert "got an object" in found[0].message
    found = list(validate([meta_init(), env("meta_final", True, "[1]"), "[DONE]"]))
    assert [v.code for v in found] == ["E141"]


def test_error_payload_in_the_api_shape_is_fine() -> None:
    payload = '{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}'
    assert list(validate(complete(env("error", True, payload)))) == []


def test_citation_block_over_several_lines_closes_once() -> None:
    lines = complete(
        *text("x"),
        env("citation", False, "a", citation_type="char_location"),
        env("citation", False, "b", citation_type="page_location"),
        env("citation", True, "c", citation_type="char_location"),
        *text("y"),
        env("citation", True, "d", citation_type="char_location"),
    )
    assert list(validate(lines)) == []


def test_pending_call_ids_are_capped_oldest_forgotten() -> None:
    from envelope._validator import MAX_PENDING_IDS

    calls = [env("tool_call", True, "{}", id=f"t{i}", name="f") for i in range(MAX_PENDING_IDS + 1)]
    checker = Validator()
    for line in [meta_init(), *calls]:
        checker.feed(line)
    first = checker.feed(env("tool_result", True, "", id="t0", name="f"))
    last = checker.feed(env("tool_result", True, "", id=f"t{MAX_PENDING_IDS}", name="f"))
    assert [v.code for v in first] == ["W165"]
    assert last == []


def test_crlf_split_across_chunks_while_skipping_keeps_line_numbers() -> None:
    head = sse(meta_init())
    bad = b"data: \xff\r"
    tail = b"\n\r\n" + sse(env("text", True, "x"), "[DONE]")
    for cut in range(len(bad) - 1, len(bad) + 2):
        data = head + bad + tail
        checker = StreamValidator()
        found = checker.feed(data[: len(head) + cut]) + checker.feed(data[len(head) + cut :]) + checker.close()
        assert [(v.code, v.line) for v in found] == [("E100", 3), ("E121", 5)], cut
    lone = head + b"data: \xff\rdata: x\r\n\r\n" + sse(env("text", True, "x"), "[DONE]")
    found = run(lone)
    # a lone CR ends the bad line (as it ends any SSE line): line 4 is read again, and
    # its event (`x`, dispatched by line 5) is not JSON
    assert [(v.code, v.line) for v in found] == [("E100", 3), ("E101", 4), ("E121", 6)]


def test_skipping_byte_by_byte_counts_lone_crs() -> None:
    data = sse(meta_init()) + b"data: \xff\rdata: x\r\r\n" + sse(env("text", True, "x"), "[DONE]")
    checker = StreamValidator()
    found = [v for i in range(len(data)) for v in checker.feed(data[i : i + 1])] + checker.close()
    assert [(v.code, v.line) for v in found] == [("E100", 3), ("E101", 4), ("E121", 6)]
    with pytest.raises(DecodeError):
        checker.close()


def test_spec_08_4_resumed_meta_init_announces_tool_calls() -> None:
    """[8.4-a] ids in meta_init.resume.tool_use_ids count as announced calls: no W165 for their results."""
    resumed = meta_init(resume={"step": 2, "response": 1, "tool_use_ids": ["t", 7]})
    lines = [resumed, env("tool_result", True, "yes", id="t", name="confirm"), meta_final()]
    assert [v.code for v in validate([*lines, "[DONE]"])] == []
    # an id not listed there still gets its warning
    other = [resumed, env("tool_result", True, "no", id="u", name="confirm"), meta_final()]
    assert [v.code for v in validate([*other, "[DONE]"])] == ["W165"]


def test_e109_says_what_to_do() -> None:
    """Issue 25 §4: E109 named the cap and stopped; it now gives the remedies (validation.md §2.2)."""
    data = jsonl(meta_init(), env("text", False, "z" * 500), *text("after"), meta_final(), "[DONE]")
    [found] = run(data, max_line_bytes=300)
    assert found.code == "E109"
    assert "max_line_bytes=300" in found.message
    assert "give one envelope per line" in found.message
    assert "raise the reader's cap (max_line_bytes)" in found.message
    assert "--" not in found.message  # spec/cli.md C2-b: the library names no flag
