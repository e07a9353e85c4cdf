"""Public home of the OpenAI adapters: ``from envelope.openai import ChatTranslator, ResponsesTranslator``.

Owns: nothing but the names; the code is in ``envelope._openai_chat``,
``envelope._openai_responses`` and ``envelope._openai_common``, the decisions in
``spec/openai-adapter.md``. Importing this module does not import the ``openai`` SDK,
``httpx``/``httpx2`` or ``asyncio``: the translators read SDK objects by duck typing and
take the same chunks and events as plain dicts (a capture's JSON).
"""

from __future__ import annotations

from ._openai_chat import CHAT_DERIVED_EVENTS, ChatTranslator
from ._openai_common import error_payload
from ._openai_responses import ResponsesTranslator
from ._types import BlockKey

__all__ = ["CHAT_DERIVED_EVENTS", "BlockKey", "ChatTranslator", "ResponsesTranslator", "error_payload"]
