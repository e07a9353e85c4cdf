"""The MCP tests (spec/agent-ref.md §19): every agent stream validated strictly, as in tests/agent_ref.

Loads the validating tee (``tests/agent_ref_validating.py``) and forwards the names this
module lacks to the root conftest (see ``pg_support.root_conftest``).
"""

from __future__ import annotations

from typing import Any

from agent_ref_validating import pytest_configure, validate_agent_responses
from pg_support import root_conftest

__all__ = ["pytest_configure", "validate_agent_responses"]

_root = root_conftest()


def __getattr__(name: str) -> Any:
    """``from conftest import X`` elsewhere in the suite: the root conftest's ``X``."""
    return getattr(_root, name)
