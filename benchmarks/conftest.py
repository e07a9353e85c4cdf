"""Options of the benchmark suites.

``--bench-size-mb N`` sets the read stream (default 100 MiB, as ``envelope bench``);
the other inputs follow it as in ``envelope bench`` (``engine.Sizes.from_mb``: 20- and
200-byte deltas, 100 KiB and 10 MiB payloads, shrinking only below 10 MiB), so the
smoke test can run every benchmark once on tiny inputs with ``--bench-size-mb 0.02
--benchmark-disable``. ``--bench-rounds R`` (default 5, as ``envelope bench``) sets the
rounds of each benchmark. Each benchmark builds its own input (``benchmarks.suite``):
no fixture here holds data, so no benchmark's figures depend on which ran before it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.engine import Sizes

#: The migrate stage's input, in the checkout (``fixtures/corpus/README.md``).
LEGACY_CAPTURE = Path(__file__).resolve().parent.parent / "fixtures" / "corpus" / "legacy_xml_sse_capture.txt"


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Module | None:
    """Collect ``bench_*.py`` here (the project's ``python_files`` is for ``tests/``)."""
    if file_path.suffix == ".py" and file_path.name.startswith("bench_"):
        module: pytest.Module = pytest.Module.from_parent(parent, path=file_path)
        return module
    return None


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--bench-size-mb",
        type=float,
        default=100.0,
        help="size of the read stream in MiB (default 100); below 10 the emit inputs shrink too",
    )
    parser.addoption("--bench-rounds", type=int, default=5, help="rounds per benchmark, median kept (default 5)")


@pytest.fixture(scope="session")
def sizes(request: pytest.FixtureRequest) -> Sizes:
    """The input sizes for this run (sizes and the legacy capture only, never the inputs themselves)."""
    size_mb: float = request.config.getoption("--bench-size-mb")
    if not LEGACY_CAPTURE.is_file():
        pytest.fail(f"the legacy capture is missing: {LEGACY_CAPTURE} (fixtures/corpus)")
    return Sizes.from_mb(size_mb, LEGACY_CAPTURE.read_bytes())


@pytest.fixture(scope="session")
def rounds(request: pytest.FixtureRequest) -> int:
    """Rounds per benchmark (``--bench-rounds``)."""
    value: int = request.config.getoption("--bench-rounds")
    if value < 1:
        pytest.fail(f"--bench-rounds must be at least 1, got {value}")
    return value
