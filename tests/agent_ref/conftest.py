"""Loads the validating tee (``tests/agent_ref_validating.py``) for every agent test.

pytest imports this file under the module name ``conftest``, as it does ``tests/conftest.py``,
so in ``sys.modules`` it replaces the root one, which other tests import names from
(``from conftest import ROOT``). Names this module lacks are therefore forwarded to the
root conftest, loaded from its path under a private name.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from agent_ref_validating import pytest_configure, validate_agent_responses

__all__ = ["pytest_configure", "validate_agent_responses"]

_spec = importlib.util.spec_from_file_location(
    "_tests_root_conftest", Path(__file__).resolve().parents[1] / "conftest.py"
)
assert _spec is not None
assert _spec.loader is not None
_root = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_root)


def __getattr__(name: str) -> Any:
    """``from conftest import X`` elsewhere in the suite: the root conftest's ``X``."""
    return getattr(_root, name)
