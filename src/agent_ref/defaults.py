"""Defaults the library and its command lines share, in a module that imports nothing.

Owns: constants a command line shows in its ``--help`` and the library uses as defaults.
They live here, not beside the code that uses them, so that building the parser (and so
``agent-ref --help`` and ``--version``) never imports the ``anthropic`` SDK, whose import
takes seconds (spec ``spec/cli-agent-ref.md`` RC1-b). Does not own: anything that runs.
"""

from __future__ import annotations

from typing import Final

__all__ = ["DEFAULT_CLAUDE_MODEL", "DEFAULT_DB", "TOKEN_ENV", "VERSION"]

#: The package's version (``agent_ref.__version__``, ``agent-ref --version``, the tracer's scope):
#: here, at the bottom, so that every wing may read it without importing the face.
VERSION: Final = "0.1.0"

#: The model ``--model`` means when given without a name (``AnthropicModel``'s default).
#: (``claude-sonnet-4-5`` is on the installed SDK's deprecation list, ending 2026-11-30.)
DEFAULT_CLAUDE_MODEL: Final = "claude-sonnet-4-6"

#: The agent database of ``agent-ref`` when ``--db`` is not given: a SQLite file here.
DEFAULT_DB: Final = "agent-ref.db"

#: Environment variable that sets ``agent-ref serve``'s bearer token when ``--token`` is not given.
TOKEN_ENV: Final = "AGENT_REF_TOKEN"
