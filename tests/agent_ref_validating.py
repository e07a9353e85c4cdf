"""What we write, we validate (issue 12 §1), made structural for the agent's tests (a pytest plugin).

An autouse fixture tees every response the agent produces, whatever entry point made it
(``Agent.run``, ``continue_with_tool_results``, ``abandon``, or one added later: every
response goes through ``agent._Response``), and validates each one strictly with
``tests/validating.py`` when the test ends. A test cannot forget to check, and a new
producer cannot skip the check.

A test that makes an invalid stream on purpose (a client that goes away mid-stream)
declares the codes it expects with ``@pytest.mark.agent_stream_codes("E120", ...)``: the
codes of all its responses, in order, must then be exactly those.

It is loaded for every test under ``tests/agent_ref/`` by that folder's ``conftest.py``.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any

import pytest

from agent_ref import agent as agent_module
from validating import violations

if TYPE_CHECKING:
    from collections.abc import Iterator


def pytest_configure(config: pytest.Config) -> None:
    """Register the marker (pytest runs with --strict-markers)."""
    config.addinivalue_line(
        "markers", "agent_stream_codes(*codes): the validator codes the test's agent responses must give, in order"
    )


class _Tee:
    """Wraps a response's sink: records each line, then passes it on."""

    def __init__(self, sink: Any, seen: list[bytes]) -> None:
        self.sink = sink
        self.seen = seen

    def __call__(self, line: bytes) -> Any:
        self.seen.append(line)
        return self.sink(line)


@pytest.fixture(autouse=True)
def validate_agent_responses(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Tee every agent response of the test; validate each strictly at teardown."""
    responses: list[tuple[Any, list[bytes]]] = []
    original = agent_module._Response.__init__
    params = inspect.signature(original).parameters
    assert "sink" in params, "agent._Response no longer takes a sink: update the validating tee"

    def init(self: Any, sink: Any, *args: Any, **kwargs: Any) -> None:
        if sink is agent_module._nowhere:
            # A response nobody reads (a recovery, an abandon without a sink): it exists only
            # in the store's log, which the tests read back and validate themselves.
            original(self, sink, *args, **kwargs)
            return
        seen: list[bytes] = []
        original(self, _Tee(sink, seen), *args, **kwargs)
        responses.append((self, seen))

    monkeypatch.setattr(agent_module._Response, "__init__", init)
    yield
    marker = request.node.get_closest_marker("agent_stream_codes")
    expected = list(marker.args) if marker is not None else []
    found = []
    for response, lines in responses:
        bound = int(getattr(response, "max_bytes", 2048))
        seed = getattr(response, "profile", "default") == "seed"
        found.extend(violations(list(lines), max_bytes=bound, profile="seed" if seed else "default"))
    assert [v.code for v in found] == expected, "an agent response fails the strict validator:\n" + "\n".join(
        str(v) for v in found
    )
