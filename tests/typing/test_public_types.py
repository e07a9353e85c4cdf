"""Pins the public types with ``assert_type``: mypy --strict checks this file, pytest runs it."""

from __future__ import annotations

from typing import Any, assert_type

import envelope
from envelope import (
    Block,
    Emitter,
    Envelope,
    OversizeLine,
    RawLine,
    Reconstructor,
    SSEEvent,
    SSEReader,
    StreamReader,
    Transcript,
    decode,
    encode,
    frame,
    reconstruct,
)


def test_public_signatures() -> None:
    em = Emitter("a")
    assert_type(em.streamed("text", "x"), list[bytes])
    assert_type(em.end("thinking"), bytes)
    assert_type(em.buffered("tool_call", "{}", id="i", name="n"), list[bytes])
    assert_type(em.tool_result("i", "n", "t"), list[bytes])
    assert_type(em.citations([]), list[bytes])
    assert_type(em.oversize, list[OversizeLine])
    line = em.end("text")
    assert_type(encode(envelope.Text(agent="a", final=True, delta="")), bytes)
    assert_type(decode(line), Envelope)
    assert_type(frame(line), bytes)
    reader = SSEReader()
    assert_type(reader.feed(frame(line)), list[SSEEvent])
    assert_type(StreamReader().feed(line + b"\n"), list[RawLine])
    rec = Reconstructor()
    assert_type(rec.feed(line), None)
    assert_type(rec.transcript(), Transcript)
    assert_type(reconstruct([line]), Transcript)
    block = reconstruct([line]).agents["a"][0]
    assert_type(block, Block)
    assert block.content == ""


def test_later_public_signatures() -> None:
    """The batch read path, the validator, the migrator and the Anthropic adapter."""
    from collections.abc import Iterator, Sequence

    from envelope import (
        StreamValidator,
        Validator,
        Violation,
        XmlMigrator,
        migrate_xml,
        validate,
    )
    from envelope.anthropic import AnthropicTranslator

    line = Emitter("a").end("text")
    batch = StreamReader().feed_batch(line + b"\n")
    assert_type(batch, Sequence[RawLine])
    rec = Reconstructor()
    assert_type(rec.feed_many(batch), None)
    assert_type(validate([line]), Iterator[Violation])
    assert_type(Validator().feed(line), list[Violation])
    assert_type(Validator().feed_many(batch), list[Violation])
    assert_type(StreamValidator().feed(line + b"\n"), list[Violation])
    assert_type(XmlMigrator(agent="a").feed(b"<content-block-text>x"), list[bytes])
    assert_type(migrate_xml([b""], agent="a"), Iterator[bytes])
    translator = AnthropicTranslator("a")
    assert_type(translator.feed({"type": "ping"}), list[bytes])
    assert_type(translator.finalize(), list[dict[str, Any]])
    assert_type(translator.stop_reason, str | None)
