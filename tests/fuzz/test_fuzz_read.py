"""A mutational fuzzer over the goldens, the conformance files and the corpus (issue 18 §5).

Every seed input is mutated (``_mutate``: byte flips, deletions, duplications, inserted
CR/LF/NUL/0x80, splices from other inputs, and nesting 1,000 deep, which byte mutation
cannot reach), split at random, and fed to each reading entry point: ``SSEReader``,
``StreamReader`` (line by line and batched) into ``Reconstructor`` (then its transcript,
encoded as ``envelope reconstruct`` prints it), strict ``decode`` of each line, and
``StreamValidator``. Only ``envelope.EnvelopeError`` may escape (STYLE §5; spec/limits.md
L3). The runs are deterministic: each test is one fixed seed, and a failure names its
seed, step, mutations and split, and writes the input beside the test's tmp_path.
"""

from __future__ import annotations

import random
import traceback
from typing import TYPE_CHECKING, Any

import msgspec
import pytest

from conftest import FIXTURES, ROOT
from envelope import EnvelopeError, Reconstructor, SSEReader, StreamReader, StreamValidator, decode

from ._mutate import DEEP, chunks, mutate

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

#: Fixed seeds: each a different, reproducible run (CI runs them all).
SEEDS = (11, 12, 13, 14)
#: Mutated inputs per seed; four seeds of this many take well under the 90 s CI budget.
STEPS = 400


def _seed_inputs(corpus: Path) -> list[bytes]:
    paths = [
        *sorted((FIXTURES / "golden").glob("*/input.sse")),
        *sorted((ROOT / "spec" / "conformance").rglob("*.sse")),
        *sorted((ROOT / "spec" / "conformance").rglob("*.jsonl")),
        *sorted(corpus.glob("*.jsonl")),
        *sorted(corpus.glob("*.txt")),
    ]
    return [p.read_bytes() for p in paths]


def _sse_reader(pieces: list[bytes], rng: random.Random) -> None:
    reader = SSEReader(max_line_bytes=rng.choice((64, 2048, 16 * 1024 * 1024)))
    try:
        for piece in pieces:
            reader.feed(piece)
    finally:
        reader.close()


def _rebuild(pieces: list[bytes], rng: random.Random) -> None:
    reader = StreamReader(max_line_bytes=rng.choice((2048, 16 * 1024 * 1024)))
    rec = Reconstructor(max_open_blocks=rng.choice((4, 65_536)))
    batch = rng.random() < 0.5
    try:
        for piece in pieces:
            if batch:
                rec.feed_many(reader.feed_batch(piece))
            else:
                for raw in reader.feed(piece):
                    rec.feed(raw)
        rec.feed_many(reader.close())
    finally:
        rec.close()
        # What `envelope reconstruct` prints, at whatever point the input stopped it.
        msgspec.json.encode(rec.transcript().to_dict())


def _strict_lines(pieces: list[bytes], _: random.Random) -> None:
    reader = StreamReader()
    lines = [raw for piece in pieces for raw in reader.feed(piece)]
    for raw in lines:
        if raw.data != "[DONE]":
            try:
                decode(raw.data, position=raw.position)
            except EnvelopeError:
                continue
    reader.close()


def _validator(pieces: list[bytes], rng: random.Random) -> None:
    checker = StreamValidator(max_bytes=rng.choice((2048, 200)))
    for piece in pieces:
        checker.feed(piece)
    checker.close()


#: The read path this helper owns (spec/limits.md L3-b).
TARGETS: dict[str, Callable[[list[bytes], random.Random], None]] = {
    "SSEReader": _sse_reader,
    "StreamReader+Reconstructor": _rebuild,
    "decode": _strict_lines,
}
#: The validator, fuzzed the same way in its own test (see there).
VALIDATOR: dict[str, Callable[[list[bytes], random.Random], None]] = {"StreamValidator": _validator}


def _run(
    seed: int,
    inputs: list[bytes],
    tmp_path: Path,
    targets: dict[str, Callable[[list[bytes], random.Random], None]],
) -> dict[str, Any]:
    rng = random.Random(seed)
    tally = {"refused": 0, "accepted": 0, "deep": 0}
    for step in range(STEPS):
        source = rng.randrange(len(inputs))
        data, mutations = mutate(inputs[source], rng, inputs)
        if any(m.startswith("nest(") and m != "nest(none)" for m in mutations):
            tally["deep"] += 1
        pieces, split = chunks(data, rng)
        for name, target in targets.items():
            try:
                target(pieces, random.Random(f"{seed}/{step}/{name}"))
            except EnvelopeError:
                tally["refused"] += 1
            except Exception:  # the point of the fuzzer: anything else is a bug
                kept = tmp_path / f"fuzz-{seed}-{step}.bin"
                kept.write_bytes(data)
                pytest.fail(
                    f"{name} let a foreign exception escape (seed {seed}, step {step}, input {source},"
                    f" mutations {mutations}, split {split[:200]}; input written to {kept}):\n" + traceback.format_exc()
                )
            else:
                tally["accepted"] += 1
    return tally


@pytest.mark.parametrize("seed", SEEDS)
def test_only_envelope_errors_escape_the_read_path(seed: int, corpus: Path, tmp_path: Path) -> None:
    """spec/limits.md [L3-b]: mutated, nested, re-split input gives results or EnvelopeErrors only."""
    inputs = _seed_inputs(corpus)
    tally = _run(seed, inputs, tmp_path, TARGETS)
    # Not vacuous: the mutations broke some inputs, left others readable, and nested some.
    assert tally["refused"] > 0
    assert tally["accepted"] > 0
    assert tally["deep"] > 0


def test_only_envelope_errors_escape_the_validator(corpus: Path, tmp_path: Path) -> None:
    """spec/limits.md [L3-b], for ``StreamValidator``: every seed, the same fuzzer."""
    inputs = _seed_inputs(corpus)
    for seed in SEEDS:
        tally = _run(seed, inputs, tmp_path, VALIDATOR)
        assert tally["accepted"] > 0


def test_the_nesting_mutation_goes_past_the_limit() -> None:
    from envelope._depth import too_deep
    from envelope._limits import MAX_NESTING_DEPTH

    from ._mutate import nest

    line = b'data: {"type":"tool_call","agent":"a","final":true,"id":"i","name":"n","delta":"{\\"a\\":1}"}\n\n'
    for choice_seed in range(12):
        data, what = nest(line, random.Random(choice_seed), [])
        assert what != "nest(none)"
        assert len(data) > len(line) + DEEP
        body = data.split(b"data: ", 1)[1]
        if what.startswith("nest(payload"):
            payload = msgspec.json.decode(body)["delta"]
            assert too_deep(payload, MAX_NESTING_DEPTH) is not None
        else:
            assert too_deep(body, MAX_NESTING_DEPTH) is not None
