"""The PostgreSQL fixture's rule: skipped loudly outside CI, failing in CI [P4-a]."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

import pg_support

if TYPE_CHECKING:
    from pathlib import Path


@pytest.mark.parametrize(("ci", "outcome"), [("true", pytest.fail.Exception), ("", pytest.skip.Exception)])
def test_spec_scaleout_4_a_no_server_skips_loudly_or_fails_in_ci(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, ci: str, outcome: type[BaseException]
) -> None:
    """No URL and no server to start: a loud skip, or with ``CI=true`` a failure [P4-a]."""
    monkeypatch.delenv(pg_support.URL_ENV, raising=False)
    monkeypatch.setenv("CI", ci)
    monkeypatch.setattr(pg_support, "SCRIPT", tmp_path / "no-such-script")
    with pytest.raises(outcome, match="POSTGRESQL TESTS NOT RUN"):
        next(pg_support.server())


def test_spec_scaleout_4_a_a_given_url_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    """``AGENT_REF_TEST_PG_URL`` is used as it is; nothing is started [P4-a]."""
    monkeypatch.setenv(pg_support.URL_ENV, "postgresql://u@127.0.0.1:9/db")
    assert next(pg_support.server()) == "postgresql://u@127.0.0.1:9/db"
