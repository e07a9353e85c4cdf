"""Public home of the Anthropic adapter: ``from envelope.anthropic import AnthropicTranslator``.

Owns: nothing but the names; the code is in ``envelope._anthropic_adapter`` and the
decisions in ``spec/anthropic-adapter.md``. Importing this module does not import the
``anthropic`` SDK, ``httpx`` or ``asyncio``: the translator reads SDK event objects by
duck typing and accepts the same events as plain dicts. Offline replay of recorded
streams through the real SDK client is in ``agent_ref.models.replay`` (it needs ``httpx2``).
"""

from __future__ import annotations

from ._anthropic_adapter import DERIVED_EVENTS, AnthropicTranslator, error_payload
from ._types import BlockKey

__all__ = ["DERIVED_EVENTS", "AnthropicTranslator", "BlockKey", "error_payload"]
