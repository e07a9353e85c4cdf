"""pytest-benchmark suites for the envelope codec (outside ``testpaths``; see the README)."""

from __future__ import annotations
