"""Say loudly, at the end of a test run, which suites did not run and why (issue 25 §6).

The browser, PostgreSQL, JavaScript and proxy suites need system parts a machine may lack
(chromium, PostgreSQL's server, node, nginx: ``scripts/system-deps`` installs them). Without
them they skip, except with ``CI=true``, where they fail (``tests/browser``,
``tests/pg_support.py``, ``tests/js``). A skip among hundreds of passes is easy to miss,
so every skip whose reason starts with an upper-case headline and a colon (the
convention of those suites: ``BROWSER TESTS DID NOT RUN: chromium is not installed``)
is listed again in a ``SUITES NOT RUN`` section right above pytest's summary line: the
suite, how many tests, the reason, and the command that installs what is missing.

``tests/conftest.py`` uses the hook below; ``pytest -p skip_summary`` loads it alone.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    import pytest

#: A loud skip reason: an upper-case headline, then a colon.
LOUD: Final = re.compile(r"[A-Z][A-Z0-9 ]{6,}:")
REMEDY: Final = (
    "install what they need with `sudo ./scripts/system-deps` (chromium, PostgreSQL, node, nginx; Debian); "
    "with CI=true these suites fail instead of skipping"
)


def _reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


def _suite(nodeid: str) -> str:
    """The test's folder: ``tests/browser`` for ``tests/browser/test_page.py::test_x``."""
    path = nodeid.split("::", 1)[0]
    return path.rsplit("/", 1)[0] if "/" in path else path


def not_run(reports: list[pytest.TestReport]) -> dict[str, dict[str, int]]:
    """Loud skips grouped by reason, then by suite, with the number of tests of each."""
    groups: dict[str, dict[str, int]] = {}
    for report in reports:
        reason = _reason(report)
        if LOUD.match(reason):
            suites = groups.setdefault(reason, {})
            suite = _suite(report.nodeid)
            suites[suite] = suites.get(suite, 0) + 1
    return groups


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Write the ``SUITES NOT RUN`` section when any suite skipped for a missing system part."""
    groups = not_run(list(terminalreporter.stats.get("skipped", [])))
    if not groups:
        return
    terminalreporter.write_sep("=", "SUITES NOT RUN", red=True, bold=True)
    for reason, suites in groups.items():
        where = ", ".join(f"{suite} ({n} test{'' if n == 1 else 's'})" for suite, n in sorted(suites.items()))
        terminalreporter.write_line(f"{where}: {reason}", red=True, bold=True)
    terminalreporter.write_line(REMEDY, red=True)
