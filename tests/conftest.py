"""Shared test setup: Hypothesis profiles, the paths of the in-repository fixtures, a
``SUITES NOT RUN`` section at the end of a run that skipped suites for missing system parts
(``skip_summary.py``), and the rule that a parametrisation over nothing is an error.

Profiles (choose with ``HYPOTHESIS_PROFILE``): ``dev`` (default, quick), ``ci`` (more
examples, no deadline: CI machines are shared and slow), ``thorough`` (for a long run).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from hypothesis import HealthCheck, settings

import skip_summary
from envelope import DEFAULT_MAX_BYTES
from pg_support import fresh_schema, server
from validating import ValidatedSink

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence

settings.register_profile("dev", max_examples=100, deadline=None)
settings.register_profile(
    "ci", max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow], print_blob=True
)
settings.register_profile("thorough", max_examples=5000, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
#: The recorded corpus, copied into the repository (``fixtures/corpus/README.md`` says from where).
CORPUS = FIXTURES / "corpus"
#: The seed's JSON examples, one file per example (``fixtures/seed_examples/README.md``).
SEED_EXAMPLES = FIXTURES / "seed_examples"


@pytest.fixture(scope="session")
def corpus() -> Path:
    """The recorded corpus directory (``fixtures/corpus``). Missing is a failure, never a skip."""
    if not CORPUS.is_dir():
        pytest.fail(f"the recorded corpus is missing (looked in {CORPUS}); the corpus tests need it")
    return CORPUS


@pytest.fixture
def validated_sink() -> Iterator[Callable[..., ValidatedSink]]:
    """A factory of sinks (lists) that are each validated strictly when the test ends.

    ``sink = validated_sink()`` (or ``validated_sink(max_bytes=200)``,
    ``validated_sink(expect=["E120"])``); pass ``sink.append`` to a producer.
    """
    made: list[ValidatedSink] = []

    def make(*, max_bytes: int = DEFAULT_MAX_BYTES, expect: Sequence[str] = ()) -> ValidatedSink:
        sink = ValidatedSink(max_bytes=max_bytes, expect=expect)
        made.append(sink)
        return sink

    yield make
    for sink in made:
        sink.check()


@pytest.fixture(autouse=True)
def _held_secrets_restored() -> Iterator[None]:
    """Every test starts and ends with the secrets held before it (spec [HY1-a]).

    Held secrets are process-wide (``agent_ref.policy.scrub``): an ``Agent(..., secrets=[...])``
    of one test would otherwise stay held for every later test in the process.
    """
    from agent_ref.policy import scrub

    with scrub.held_scope():
        yield


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    """One PostgreSQL server for the whole session, shared by the store and scale-out suites (see ``pg_support``)."""
    yield from server()


@pytest.fixture
def pg_schema_url(pg_url: str) -> Iterator[str]:
    """A URL whose tables live in a fresh schema."""
    yield from fresh_schema(pg_url)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """List the suites skipped for a missing system part, loudly, above pytest's summary line."""
    skip_summary.pytest_terminal_summary(terminalreporter)


#: How pytest names a test whose parametrisation got no value (it skips it by default).
_EMPTY_PARAMETERS = "got empty parameter set"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A parametrisation over no value stops the run at collection, naming the tests.

    Most parametrisations here run over a glob of fixtures, conformance cases or corpus
    files; a moved folder or a wrong pattern gives an empty list, which pytest turns into
    one skip that reads like a missing system part. An empty glob is a broken test, so
    it is an error, not zero tests (issue 37; ``tests/unit/test_empty_parametrisation.py``).

    Raises:
        pytest.UsageError: some test was parametrised over an empty list.
    """
    empty = [
        item.nodeid
        for item in items
        if any(str(mark.kwargs.get("reason", "")).startswith(_EMPTY_PARAMETERS) for mark in item.iter_markers("skip"))
    ]
    if empty:
        raise pytest.UsageError(f"parametrised over no value (an empty glob?): {', '.join(empty)}")
