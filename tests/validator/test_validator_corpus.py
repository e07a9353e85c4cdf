"""The verdict on every recording in fixtures/corpus, pinned code by code.

Each expectation was checked by hand against the corpus README (see the comments).
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

import pytest

from envelope import StreamValidator

if TYPE_CHECKING:
    from pathlib import Path

#: file -> sorted (code, line) pairs
VERDICTS: dict[str, list[tuple[str, int]]] = {
    # fragments: no meta_init (W163) and no [DONE] (W161) everywhere but simple_text
    "json_scenario_awaiting_frontend_tools.jsonl": [("W161", 4), ("W163", 1)],
    # document_index "0" is a string (README); both citations final:true (README) -> W128
    "json_scenario_char_location_citations.jsonl": [("E106", 3), ("E106", 4), ("W128", 4), ("W161", 4), ("W163", 1)],
    "json_scenario_chunked_tool_call.jsonl": [("W161", 3), ("W163", 1)],
    # citation_type "webpage" (README) and string document_index
    "json_scenario_citations.jsonl": [
        ("E106", 3),
        ("E106", 4),
        ("W114", 3),
        ("W114", 4),
        ("W161", 4),
        ("W163", 1),
    ],
    # hand-made error shape (README): no `type`
    "json_scenario_error_envelope.jsonl": [("W143", 1), ("W161", 1), ("W163", 1)],
    "json_scenario_meta_files.jsonl": [("W161", 5), ("W163", 1)],
    "json_scenario_multi_block.jsonl": [("W161", 8), ("W163", 1)],
    # document_index and page numbers are strings (README): 3 per citation
    "json_scenario_pdf_citations.jsonl": [("E106", 3)] * 3 + [("E106", 4)] * 3 + [("W161", 4), ("W163", 1)],
    # name "web_search" on the server_tool_result (README)
    "json_scenario_server_tool.jsonl": [("W115", 4), ("W161", 6), ("W163", 1)],
    # has meta_init and meta_final; only [DONE] is missing
    "json_scenario_simple_text.jsonl": [("W161", 8)],
    "json_scenario_tool_call.jsonl": [("W161", 6), ("W163", 1)],
    # the image has final: true (README)
    "json_scenario_tool_result_image.jsonl": [("E124", 3), ("W161", 4), ("W163", 1)],
    # a JSON array of API events, not an envelope stream: read as SSE, no data field
    "anthropic_events_0.json": [("E110", 551), ("E167", 1), ("W112", 1)],
    "anthropic_events_1.json": [("E110", 1), ("E167", 1), ("W112", 1)],
}


def check(path: Path) -> list[tuple[str, int]]:
    checker = StreamValidator()
    found = checker.feed(path.read_bytes()) + checker.close()
    return sorted((v.code, v.line) for v in found)


def test_every_recording_has_a_verdict(corpus: Path) -> None:
    names = {p.name for p in corpus.iterdir() if p.suffix in (".jsonl", ".json", ".txt")}
    assert names == set(VERDICTS) | {"legacy_xml_sse_capture.txt"}


@pytest.mark.parametrize("name", sorted(VERDICTS))
def test_corpus_verdict(corpus: Path, name: str) -> None:
    assert check(corpus / name) == sorted(VERDICTS[name])


def test_legacy_xml_capture_is_not_an_envelope_stream(corpus: Path) -> None:
    # Read as SSE: each chunk is XML or raw text, so every event is E101 (one chunk that
    # happens to be a JSON string is E102); the raw line feeds inside chunks make lines
    # that are no SSE field (W112, reported once). [DONE] is there, so no W161.
    path = corpus / "legacy_xml_sse_capture.txt"
    checker = StreamValidator()
    found = checker.feed(path.read_bytes()) + checker.close()
    counts = Counter(v.code for v in found)
    assert counts == Counter({"E101": 144, "E102": 1, "W112": 1})
    assert "legacy XML" in found[0].message
