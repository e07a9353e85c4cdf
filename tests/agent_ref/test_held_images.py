"""Image sources of tool results are scanned for held secrets (spec [HY2-a]).

A URL ``https://host/x?token=SECRET`` (or the secret percent-encoded), a data URI whose
decoded bytes carry it (a PNG text chunk), or a media type holding it: the image is
removed and its result's text says so. Every response is validated strictly by the
autouse tee (tests/agent_ref_validating.py); each run also searches the stream, the SQLite
file and the ``agent_ref`` log for the secret in every form scanned.
"""

from __future__ import annotations

import base64
import json
import logging
import sqlite3
import struct
import zlib
from typing import TYPE_CHECKING
from urllib.parse import quote

from hypothesis import given
from hypothesis import strategies as st

from agent_ref import Agent, ScriptedModel, SQLiteStore, ToolOutput, default_tools, tool
from agent_ref.policy import scrub
from agent_ref.tools.core import ToolCallRequest, outcome
from agent_ref_support import blocks, envelopes, fast_retry, run, split_responses
from envelope import Emitter, ImageRef

if TYPE_CHECKING:
    from pathlib import Path

    import pytest

SECRET = "img-Tok3n/9f8e+7d6c"  # "/" and "+" change under percent-encoding
CLEAN_URL = "https://cdn.example/cat.png"


def _png(text: bytes = b"") -> bytes:
    """A valid 1x1 PNG, with a ``tEXt`` chunk holding ``text`` when given."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 0, 0, 0, 0))
    extra = chunk(b"tEXt", b"Comment\x00" + text) if text else b""
    pixels = chunk(b"IDAT", zlib.compress(b"\x00\x00"))
    return b"\x89PNG\r\n\x1a\n" + header + extra + pixels + chunk(b"IEND", b"")


def _data_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode()


LEAKY_IMAGES = (
    ImageRef(src=f"https://host.example/x?token={SECRET}", media_type="image/png"),
    ImageRef(src=f"https://host.example/x?token={quote(SECRET, safe='')}", media_type="image/png"),
    ImageRef(src=_data_uri(_png(b"key=" + SECRET.encode())), media_type="image/png"),
    ImageRef(src=CLEAN_URL, media_type="image/png"),
    ImageRef(src=_data_uri(_png()), media_type="image/png"),
)


def _forms(secret: str) -> list[bytes]:
    """The secret as it could appear in a line, a row or a log: raw, percent-encoded, JSON-escaped."""
    return [secret.encode(), quote(secret, safe="").encode(), json.dumps(secret)[1:-1].encode()]


def _assert_nowhere(path: Path, lines: list[bytes], log_text: str) -> None:
    with sqlite3.connect(path) as db:
        tables = [row[0] for row in db.execute("select name from sqlite_master where type = 'table'")]
        dump = "\n".join(str(row) for t in tables for row in db.execute(f'select * from "{t}"'))
    places = {"stream": b"".join(lines), "store": dump.encode(), "log": log_text.encode()}
    for where, data in places.items():
        for form in _forms(SECRET):
            assert form not in data, where
    for env in envelopes(lines):  # and no image sent holds it in its bytes
        if env["type"] == "tool_result_image":
            src = env["src"]
            if src.startswith("data:"):
                assert SECRET.encode() not in base64.b64decode(src.partition(",")[2])


def test_hy2_a_a_backend_tools_images_holding_the_secret_are_removed_and_said(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """URL, percent-encoded URL and PNG text chunk: removed with a line each; the clean two go out [HY2-a]."""

    @tool(name="shots")
    def shots() -> ToolOutput:
        """Returns screenshots."""
        return ToolOutput(text="three shots and two more", images=LEAKY_IMAGES)

    path = tmp_path / "a.db"
    lines: list[bytes] = []
    agent = Agent(ScriptedModel(), tools=[shots], store=SQLiteStore(path), retry=fast_retry(), secrets=[SECRET])
    with caplog.at_level(logging.DEBUG, logger="agent_ref"):
        result = run(agent.run("call shots with {}", lines.append))
    assert result.stop_reason == "end_turn"
    (tool_result,) = [b for b in blocks(lines) if b["type"] == "tool_result"]
    assert tool_result["content"] == "\n".join(
        [
            "three shots and two more",
            scrub.IMAGE_REMOVED.format(n=1, where="URL"),
            scrub.IMAGE_REMOVED.format(n=2, where="URL"),
            scrub.IMAGE_REMOVED.format(n=3, where="data"),
        ]
    )
    sent = [env["src"] for env in envelopes(lines) if env["type"] == "tool_result_image"]
    assert sent == [CLEAN_URL, LEAKY_IMAGES[4].src]
    history = json.dumps(agent.state.messages)
    assert history.count('"type": "image"') == 2
    assert "removed image 1 of a tool result: its URL" in caplog.text
    _assert_nowhere(path, lines, caplog.text)


def test_hy2_a_a_frontend_results_images_are_scanned_too(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A client's result with an image URL holding the secret: removed and said, in stream and store [HY2-a]."""
    path = tmp_path / "a.db"
    lines: list[bytes] = []
    agent = Agent(ScriptedModel(), tools=default_tools(), store=SQLiteStore(path), retry=fast_retry(), secrets=[SECRET])
    with caplog.at_level(logging.DEBUG, logger="agent_ref"):
        first = run(agent.run("Please confirm the order", lines.append))
        assert first.stop_reason == "awaiting_frontend_tools"
        (pending,) = first.pending_frontend_tools
        content = [
            {"type": "text", "text": "confirmed, see the receipt"},
            {"type": "image", "source": {"type": "url", "url": f"https://shop.example/r.png?sig={SECRET}"}},
            {
                "type": "image",
                "source": {"type": "base64", "media_type": "image/png", "data": LEAKY_IMAGES[4].src[22:]},
            },
        ]
        run(agent.continue_with_tool_results([{"tool_use_id": pending.tool_use_id, "content": content}], lines.append))
    second = split_responses(lines)[1]
    (result,) = [b for b in blocks(second) if b["type"] == "tool_result"]
    assert result["content"] == "confirmed, see the receipt\n" + scrub.IMAGE_REMOVED.format(n=1, where="URL")
    sent = [env["src"] for env in envelopes(second) if env["type"] == "tool_result_image"]
    assert sent == [LEAKY_IMAGES[4].src]
    _assert_nowhere(path, lines, caplog.text)


def test_hy2_a_nothing_held_or_nothing_found_passes_the_images_unchanged() -> None:
    """No held secret, or none in the sources: text and images as given, the same objects [HY2-a]."""
    images = (LEAKY_IMAGES[3], LEAKY_IMAGES[4])
    text, kept = scrub.held_images("t", images)
    assert text == "t"
    assert all(a is b for a, b in zip(kept, images, strict=True))
    scrub.hold([SECRET])
    text, kept = scrub.held_images("t", images)
    assert (text, kept) == ("t", images)


def test_hy2_a_media_type_raw_base64_and_undecodable_data() -> None:
    """A media type holding it, the secret in the base64 text itself, data that is not base64 [HY2-a]."""
    scrub.hold([SECRET])
    cases = [
        ImageRef(src=CLEAN_URL, media_type=f"image/png; x={SECRET}"),
        ImageRef(src=f"data:image/png;base64,AAAA{SECRET}", media_type="image/png"),
        ImageRef(src="data:image/png;base64,%%%not-base64", media_type="image/png"),
    ]
    text, kept = scrub.held_images("", cases)
    assert text == "\n".join(
        [scrub.IMAGE_REMOVED.format(n=1, where="media type"), scrub.IMAGE_REMOVED.format(n=2, where="data")]
    )
    assert kept == (cases[2],)


def test_hy2_a_a_result_whose_every_image_is_removed_is_its_notes() -> None:
    """A result whose every image is removed: its text is the notes, its lines image-free [HY2-a]."""
    scrub.hold([SECRET])
    done = outcome(Emitter("a"), ToolCallRequest(id="t1", name="shots", input={}), ToolOutput(images=LEAKY_IMAGES[:3]))
    assert done.text.count("removed") == 3
    assert [b["type"] for b in done.block["content"]] == ["text"]
    assert [json.loads(line)["type"] for line in done.lines] == ["tool_result"]


_PIECES = st.sampled_from(["https://h.example/p?", "a=1&", "token=", SECRET, quote(SECRET, safe=""), "x", "/"])


@given(st.lists(st.lists(_PIECES, max_size=6).map("".join), max_size=5))
def test_hy2_a_no_kept_image_holds_the_secret_and_each_removed_one_is_said(urls: list[str]) -> None:
    """Any URLs built from pieces: kept ones hold no form of it, order kept, one line per removed image [HY2-a]."""
    with scrub.held_scope():
        scrub.hold([SECRET])
        images = [ImageRef(src=url or CLEAN_URL, media_type="image/png") for url in urls]
        text, kept = scrub.held_images("", images)
    expected = [i for i in images if SECRET not in i.src and quote(SECRET, safe="") not in i.src]
    assert list(kept) == expected
    assert text.count("removed") == len(images) - len(kept)
    for image in kept:
        assert all(form.decode() not in image.src for form in _forms(SECRET)[:2])
