"""[L3-a] The read path grows linearly on its worst shapes: reader, SSE reader, reconstructor (issue 18 §1, §5).

Each test times an entry point at n and 10n in one run (see ``_growth``) on a shape that
was quadratic once, or that a careless change would make so; spec/limits.md lists them.
"""

from __future__ import annotations

import pytest

from envelope import Reconstructor, SSEReader, StreamReader, StreamValidator

from ._growth import assert_linear, peak_bytes

#: An error envelope that discards nothing: it only costs the reconstructor its bookkeeping (spec §7.7).
DISCARD_0 = b'{"type":"error","agent":"a","final":true,"delta":"{\\"type\\": \\"attempt_discarded\\", \\"discard_blocks\\": 0}"}'
DISCARD_1 = DISCARD_0.replace(b'blocks\\": 0', b'blocks\\": 1')
TEXT = b'{"type":"text","agent":"a","final":true,"delta":"x"}'
#: The size of the pieces the memory test feeds (a network read).
CHUNK = 65_536


def test_blank_lines_before_the_first_content_byte_fed_line_by_line() -> None:
    # Until the format is detected the reader held the leading bytes and re-stripped all of them per feed.
    def run(n: int) -> None:
        reader = StreamReader()
        for _ in range(n):
            reader.feed(b"\n")
        reader.feed(b"data: [DONE]\n\n")
        reader.close()

    assert_linear(run, 3000)


def test_blank_lines_before_the_first_content_byte_through_the_validator() -> None:
    # issue 18 §1: `envelope validate` on 100k blank lines then [DONE] took 13 s.
    def run(n: int) -> None:
        checker = StreamValidator()
        checker.feed(b"\n" * n + b"data: [DONE]\n\n")
        checker.close()

    assert_linear(run, 3000)


def test_leading_spaces_in_small_chunks() -> None:
    # issue 18 §1: 4 MB of leading spaces in 1 KiB chunks took 20 s. Timed: the feeding
    # of the spaces (see the note on long lines below for why the end is untimed).
    chunk = b" " * 1024

    def start(n: int) -> StreamReader:
        reader = StreamReader()
        for _ in range(n):
            assert not reader.feed(chunk)
        return reader

    assert_linear(start, 1000)
    reader = start(100)
    assert [r.data for r in reader.feed(b"\ndata: [DONE]\n\n")] == ["[DONE]"]
    assert reader.format == "sse"


# A long line in pieces: what is timed is the feeding of the pieces, where the cost was
# quadratic (each piece re-joined and rescanned the held line). Ending the line then costs
# a fixed number of passes over it (join, decode); those passes are linear too, but over
# megabytes their time per byte depends on whether the line fits in the CPU's cache
# (measured: 1 MB vs 10 MB lines give 20-30x), which would make the ratio measure the
# cache, not the algorithm. So the end of the line is checked for its result, untimed.


@pytest.mark.parametrize("fmt", ["auto", "sse", "jsonl"])
def test_one_long_line_in_small_chunks_stream_reader(fmt: str) -> None:
    # A long line fed in network-sized chunks: each chunk must be scanned once, not the whole line again.
    chunk = b"x" * 1024
    if fmt == "jsonl":
        head, tail = b'{"type":"text","agent":"a","final":true,"delta":"', b'"}\n'
    else:
        head, tail = b'data: {"type":"text","agent":"a","final":true,"delta":"', b'"}\n\n'

    def start(n: int) -> StreamReader:
        reader = StreamReader(fmt)  # type: ignore[arg-type]  # the three literals
        reader.feed(head)
        for _ in range(n):
            assert not reader.feed(chunk)
        return reader

    assert_linear(start, 1000)
    reader = start(100)
    [line] = reader.feed(tail)
    assert len(line.data) == len(head) - (6 if fmt != "jsonl" else 0) + 100 * len(chunk) + 2


@pytest.mark.parametrize("line_end", [b"\n", b"\r", b"\r\n"])
def test_one_long_line_in_small_chunks_sse_reader(line_end: bytes) -> None:
    chunk = b"y" * 1024

    def start(n: int) -> SSEReader:
        reader = SSEReader()
        reader.feed(b"data: ")
        for _ in range(n):
            reader.feed(chunk)
        return reader

    assert_linear(start, 1000)
    [event] = start(100).feed(line_end * 2)
    assert event.data == "y" * 100 * len(chunk)


def test_many_events_in_one_byte_chunks_sse_reader() -> None:
    event = b"data: " + TEXT + b"\n\n"

    def run(n: int) -> None:
        reader = SSEReader()
        data = event * n
        for at in range(len(data)):
            reader.feed(data[at : at + 1])
        reader.close()

    assert_linear(run, 40)


@pytest.mark.parametrize("batch", [True, False])
def test_repeated_attempt_discarded_errors(batch: bool) -> None:
    # issue 18 §1: the reconstructor copied the agent's whole block list per error block.
    def run(n: int) -> None:
        rec = Reconstructor()
        if batch:
            rec.feed_many([DISCARD_0] * n)
        else:
            for _ in range(n):
                rec.feed(DISCARD_0)
        assert len(rec.transcript().agents["a"]) == n

    assert_linear(run, 3000)


def test_repeated_text_then_discard_one() -> None:
    # Each signal drops the text before it, which was the last text; the next one to cite
    # must be found without walking every signal kept so far.
    def run(n: int) -> None:
        rec = Reconstructor()
        rec.feed_many([TEXT, DISCARD_1] * n)
        assert len(rec.transcript().agents["a"]) == n

    assert_linear(run, 3000)


def test_interleaved_agents_through_reader_and_reconstructor() -> None:
    # Many agents each with an open block: routing by (agent, type) stays constant per line.
    def run(n: int) -> None:
        lines = [b'data: {"type":"text","agent":"a%d","final":false,"delta":"x"}\n\n' % i for i in range(n)] + [
            b'data: {"type":"text","agent":"a%d","final":true,"delta":"y"}\n\n' % i for i in range(n)
        ]
        reader = StreamReader()
        rec = Reconstructor()
        rec.feed_many(reader.feed_batch(b"".join(lines) + b"data: [DONE]\n\n"))
        reader.close()
        assert rec.done
        assert not rec.close()

    assert_linear(run, 2000)


@pytest.mark.parametrize("batch", [False, True])
def test_reader_memory_is_bounded_by_the_open_line_not_the_stream(batch: bool) -> None:
    """[L1-b] peak memory through the reader does not grow with the stream."""
    # A long stream of closed blocks through the reader: it holds at most a chunk and one
    # open line, never what it already returned (the reconstructor keeps the transcript by
    # design, so it is not measured here).
    event = b'data: {"type":"text","agent":"a","final":false,"delta":"' + b"z" * 200 + b'"}\n\n'
    end = b'data: {"type":"text","agent":"a","final":true,"delta":""}\n\n'

    def peak(n: int) -> int:
        data = (event * 9 + end) * (n // 10)

        def run() -> None:
            reader = StreamReader()
            for at in range(0, len(data), CHUNK):
                piece = data[at : at + CHUNK]
                if batch:
                    len(reader.feed_batch(piece))
                else:
                    reader.feed(piece)
            reader.close()

        return peak_bytes(run)

    # Counted, not timed: tracemalloc's peak is the bytes Python allocated, the same on a busy
    # machine as on a quiet one (measured: the same to the byte in two runs; 18,000 more events,
    # 4.7 MB, add about 100 bytes). Holding what was returned would add megabytes.
    small, large = peak(2_000), peak(20_000)
    grown = large - small
    assert grown < CHUNK, f"peak memory grew by {grown} bytes ({small} to {large}) with 10x the stream"
