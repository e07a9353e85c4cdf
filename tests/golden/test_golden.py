"""Golden streams: the committed fixtures must match what the code produces now, byte for byte."""

from __future__ import annotations

import io
import json
from typing import TYPE_CHECKING

import msgspec
import pytest

from conftest import FIXTURES, SEED_EXAMPLES
from envelope import DONE, Reconstructor, StreamReader, encode, frame
from envelope import Text as TextEnvelope
from envelope._encoder import _Template
from envelope.cli import main
from golden.golden_cases import CASES, Case

if TYPE_CHECKING:
    from pathlib import Path

GOLDEN = FIXTURES / "golden"


def _case(name: str) -> Case:
    return next(make() for make in CASES if make.__name__ == name)


@pytest.fixture(params=[make.__name__ for make in CASES])
def case(request: pytest.FixtureRequest) -> Case:
    return _case(str(request.param))


def _folder(case: Case) -> Path:
    folder = GOLDEN / case.name
    assert folder.is_dir(), f"{folder} missing: run tests/golden/regen.py and commit the result"
    return folder


def test_golden_envelopes_pinned(case: Case) -> None:
    """The Emitter's bytes for each case equal the committed ``envelopes.jsonl``."""
    assert (_folder(case) / "envelopes.jsonl").read_bytes() == b"".join(line + b"\n" for line in case.lines)


def test_golden_sse_pinned(case: Case) -> None:
    assert (_folder(case) / "input.sse").read_bytes() == b"".join(frame(line) for line in case.lines) + DONE


def test_golden_lines_within_bound(case: Case) -> None:
    assert all(len(line) <= case.max_bytes for line in case.lines)


def test_golden_blocks_from_the_model(case: Case) -> None:
    """``blocks.json`` is what the block model (spec §7.6) says, and what the reconstructor rebuilds."""
    want = json.loads((_folder(case) / "blocks.json").read_text())
    assert want == case.blocks()
    reader = StreamReader()
    rec = Reconstructor()
    for raw in reader.feed((_folder(case) / "input.sse").read_bytes()):
        rec.feed(raw)
    reader.close()
    assert rec.close() == []
    assert rec.transcript().to_dict() == want


def test_golden_cli_reconstruct(case: Case, capsys: pytest.CaptureFixture[str]) -> None:
    """``envelope reconstruct`` prints the same transcript for the SSE and the JSON-lines form."""
    want = json.loads((_folder(case) / "blocks.json").read_text())
    for name in ("input.sse", "envelopes.jsonl"):
        assert main(["reconstruct", str(_folder(case) / name)]) == 0
        out = json.loads(capsys.readouterr().out)
        if name == "envelopes.jsonl":
            want = {**want, "done": False}
        assert out == want


def _seed_examples() -> list[list[bytes]]:
    files = sorted(SEED_EXAMPLES.glob("*.jsonl"))
    if not files:
        pytest.fail(f"the seed's examples are missing: {SEED_EXAMPLES}")
    return [path.read_bytes().splitlines() for path in files]


def test_every_seed_example_is_reproduced() -> None:
    """Every complete JSON example of the seed appears, contiguous and byte-identical, in a golden case.

    The one exception is the overhead illustration of seed §Proactive Chunking, an
    empty non-final text envelope: the Emitter never sends an empty streamed delta
    (spec §5.1), so that line is checked against the fixed part the chunker measures.
    """
    streams = [b"\n".join(make().lines) for make in CASES]
    examples = _seed_examples()
    assert len(examples) == 20
    overhead = [b'{"type":"text","agent":"abc-123","final":false,"delta":""}']
    for example in examples:
        if example == overhead:
            template = _Template(TextEnvelope(agent="abc-123", final=False, delta=""))
            assert template.head_false + b'""' + template.tail == example[0]
            assert encode(TextEnvelope(agent="abc-123", final=False, delta="")) == example[0]
            continue
        joined = b"\n".join(example)
        assert any(joined in s for s in streams), f"seed example not reproduced: {joined[:80]!r}"


def test_golden_readme_lists_every_case() -> None:
    text = (GOLDEN / "README.md").read_text()
    assert all(f"`{make.__name__}`" in text for make in CASES)
    assert sorted(p.name for p in GOLDEN.iterdir() if p.is_dir()) == sorted(m.__name__ for m in CASES)


def test_cli_reads_stdin(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    data = (GOLDEN / "seed_thinking" / "input.sse").read_bytes()

    class _Stdin:
        buffer = io.BytesIO(data)

    monkeypatch.setattr("sys.stdin", _Stdin())
    assert main(["reconstruct", "-"]) == 0
    assert msgspec.json.decode(capsys.readouterr().out)["done"] is True


def test_spec_08_1_lifecycle_order_in_golden_streams() -> None:
    """[8.1-a] in every golden stream with metadata, each agent opens with meta_init and ends with meta_final."""
    for make in CASES:
        agents = make().agents
        for blocks in agents.values():
            types = [b["type"] for b in blocks]
            if "meta_init" in types and "meta_final" in types:
                assert types[0] == "meta_init"
                assert types[-1] == "meta_final"
                assert types.count("meta_init") == types.count("meta_final") == 1
