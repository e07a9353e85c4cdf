"""agent_ref: a minimal reference agent that speaks the JSON envelope protocol.

The agent itself arrives with its own issue; this package is reserved in the scaffold.
"""

from __future__ import annotations

__all__: list[str] = []
