"""Fixtures of the tracing tests (spec ``spec/agent-ref.md`` §20): an SDK tracer provider exporting into memory.

pytest imports this file as module ``conftest``, replacing the root one in ``sys.modules``;
names it lacks are forwarded to the root conftest (``pg_support.root_conftest``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from pg_support import root_conftest

if TYPE_CHECKING:
    from collections.abc import Iterator

    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

_root = root_conftest()


def __getattr__(name: str) -> Any:
    """``from conftest import X`` elsewhere in the suite: the root conftest's ``X``."""
    return getattr(_root, name)


@pytest.fixture
def exported() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    """A fresh SDK provider (not the global one) whose finished spans land in an in-memory exporter."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider, exporter
    provider.shutdown()
