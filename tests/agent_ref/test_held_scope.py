"""Held secrets are process-wide, and scoped per test (spec [HY1-a]).

The two ``test_hy1_a_*_next_test*`` tests run in file order: the first gives an agent a
secret, the second proves it is no longer held. Without the autouse fixture of
``tests/conftest.py`` (``scrub.held_scope`` around every test) the second fails.
"""

from __future__ import annotations

import threading

from agent_ref import Agent, ScriptedModel
from agent_ref.policy import scrub
from agent_ref.policy.redact import MARKER

LEAKY = "tenant-token-6b1d0c9e77"
BEFORE = "kept-before-scope-4411"


def test_hy1_a_a_secret_given_to_an_agent_is_held_in_its_test() -> None:
    """``Agent(..., secrets=[X])`` holds X process-wide: a text scrubbed anywhere loses it [HY1-a]."""
    Agent(ScriptedModel(), secrets=[LEAKY])
    assert LEAKY in scrub.held()
    assert scrub.held_text(f"got {LEAKY}") == f"got {MARKER}"


def test_hy1_a_the_next_test_does_not_hold_it() -> None:
    """The secret of the test before is not held here: a result with it passes as it is [HY1-a]."""
    assert LEAKY not in scrub.held()
    assert scrub.held_text(f"got {LEAKY}") == f"got {LEAKY}"


def test_hy1_a_held_scope_releases_only_what_was_held_inside() -> None:
    """Values held before the scope stay, values held inside go, nested scopes restore in order [HY1-a]."""
    scrub.hold([BEFORE])
    with scrub.held_scope():
        scrub.hold(["inner-secret-0001", BEFORE])
        with scrub.held_scope():
            Agent(ScriptedModel(), secrets=["innermost-secret-02"])
            assert "innermost-secret-02" in scrub.held()
        assert "innermost-secret-02" not in scrub.held()
        assert "inner-secret-0001" in scrub.held()
    assert "inner-secret-0001" not in scrub.held()
    assert BEFORE in scrub.held()  # held before the scope, also held again inside: still held


def test_hy1_a_held_scope_restores_on_error() -> None:
    """A scope left by an exception restores the held set too [HY1-a]."""
    try:
        with scrub.held_scope():
            scrub.hold(["raised-secret-0003"])
            raise RuntimeError("boom")
    except RuntimeError:
        pass
    assert "raised-secret-0003" not in scrub.held()


def test_hy1_a_an_agent_built_outside_a_scope_keeps_its_secret() -> None:
    """An agent built before a scope keeps its secret held after the scope ends [HY1-a]."""
    Agent(ScriptedModel(), secrets=["outer-agent-secret-04"])
    done = threading.Event()

    def inside() -> None:
        with scrub.held_scope():
            scrub.hold(["thread-secret-0005"])
        done.set()

    worker = threading.Thread(target=inside)
    worker.start()
    worker.join(10)
    assert done.is_set()
    assert "outer-agent-secret-04" in scrub.held()
    assert "thread-secret-0005" not in scrub.held()
