"""Interop: converters between envelope streams and the AG-UI and Vercel AI SDK streams.

Spec: ``spec/interop.md`` (every mapping decision, and what cannot cross).

Submodules, imported on demand (``import envelope`` loads none of them):

- ``envelope.interop.agui``: ``EnvelopeToAgui`` (envelope lines in, AG-UI events out)
  and ``AguiToEnvelope`` (AG-UI events in, envelope lines out).
- ``envelope.interop.vercel``: ``EnvelopeToVercel`` and ``VercelToEnvelope`` for the AI
  SDK's UI message stream (header ``x-vercel-ai-ui-message-stream: v1``).

Every converter is sans-I/O and streaming: ``feed`` takes one line or event and returns
zero or more outputs; ``close()`` ends what is open. Errors are ``InteropError``, an
``EnvelopeError`` with a code (``I2xx``) and the position of the offending input.
"""

from __future__ import annotations

from ._common import DONE_LINE, InteropError

__all__ = ["DONE_LINE", "InteropError"]
