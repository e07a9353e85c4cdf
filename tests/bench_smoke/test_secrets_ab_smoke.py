"""``python -m benchmarks.secrets_ab`` runs on tiny inputs and checks what it times ([SC4-a]).

No timing is asserted: the smoke test keeps the benchmark from rotting, and its own checks
(the key-held path sends the text of the bare one, no held value in any line) must hold.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from benchmarks import secrets_ab

from validating import assert_valid

if TYPE_CHECKING:
    import pytest


def test_secrets_ab_runs_on_tiny_inputs(capsys: pytest.CaptureFixture[str]) -> None:
    """Every candidate gets its ratio line to ``bare`` [SC4-a]."""
    assert secrets_ab.main(["--count", "300", "--rounds", "2"]) == 0
    printed = capsys.readouterr().out
    for name in ("bare", "key held", "4 held", "4 held, present"):
        assert f"  {name} " in printed
    assert printed.count("x  (q ") == 4


def test_secrets_ab_streams_are_valid_and_hold_no_secret() -> None:
    """The lines each candidate times are a valid stream once closed, the held values replaced [SC4-a].

    The delta path alone sends no ``meta_init`` (the agent sends it before the model call),
    so that warning, and only it, is expected.
    """
    pieces = [f"word {i} " for i in range(200)]
    pieces[120] += secrets_ab.KEY
    for held in ((), secrets_ab.HELD[:1], secrets_ab.HELD):
        lines = secrets_ab.delta_path(secrets_ab.events(pieces), held)()
        assert_valid([*lines, b"[DONE]"], max_bytes=2048, expect=["W163"])
        sent = b"".join(lines)
        assert (secrets_ab.KEY.encode() in sent) is (not held)
        assert secrets_ab.text_of(lines).replace("[redacted]", secrets_ab.KEY) == "".join(pieces)
