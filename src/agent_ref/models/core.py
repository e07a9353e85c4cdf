"""Models: where an agent's completions come from, always through the real ``anthropic`` SDK.

Owns: the ``Model`` protocol (a name and ``stream(params)`` yielding Messages stream
events), ``AnthropicModel`` (Claude over the network, key from ``ANTHROPIC_API_KEY``),
and ``ReplayModel`` (recorded calls served to the real client, one per request).
The embedded offline model is ``scripted.ScriptedModel``.
Does not own: retries (``run/retry.py``, ``agent.py``: the SDK's own retries are off, so a
retry is never hidden from the stream), or translating events (``envelope.anthropic``).
"""

from __future__ import annotations

import inspect
import os
from typing import TYPE_CHECKING, Any, Protocol

from envelope._extras import import_failed

try:
    from anthropic import AsyncAnthropic
except ModuleNotFoundError as exc:  # spec cli [C10-c]: one line naming the extra, not the module
    raise import_failed(exc, __name__, "agent") from None  # pragma: no cover  # in a subprocess (tests/install)

from ..defaults import DEFAULT_CLAUDE_MODEL as DEFAULT_CLAUDE_MODEL  # where --help can read it without the SDK
from ..errors import ConfigError
from .replay import ReplayServer, load_events, split_calls

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Mapping, Sequence
    from pathlib import Path

__all__ = ["AnthropicModel", "Model", "ReplayModel", "SDKModel"]


class Model(Protocol):
    """A source of Messages API streams."""

    #: The model name sent in requests and used for prices.
    name: str

    def stream(self, params: dict[str, Any]) -> AsyncIterator[Any]:
        """Stream one API call: yield its events (SDK objects) in order.

        Args:
            params: the request's keyword arguments (``messages.create(**params, stream=True)``).

        Returns:
            An async iterator of events; API failures raise from it.
        """
        ...


class SDKModel:
    """A model served by an ``AsyncAnthropic`` client's ``messages.stream``.

    Args:
        client: the client (real, or over a mock transport).
        name: the model name.
    """

    def __init__(self, client: AsyncAnthropic, name: str) -> None:
        """See the class docstring."""
        self.client = client
        self.name = name

    def check_request_options(self, options: Mapping[str, Any]) -> None:
        """Refuse options the installed SDK's ``create`` does not take, before any call (spec §11.1-a).

        Raises:
            ConfigError: naming the unknown keys and ``extra_body`` (for fields the SDK does not know).
        """
        create = self.client.beta.messages.create if options.get("betas") else self.client.messages.create
        known = set(inspect.signature(create).parameters)
        unknown = sorted(set(options) - known)
        if unknown:
            raise ConfigError(
                f"request_options: the installed SDK's messages.create does not take {', '.join(unknown)}; "
                'send such fields with "extra_body"'
            )

    async def stream(self, params: dict[str, Any]) -> AsyncIterator[Any]:
        """See ``Model.stream``.

        The raw event stream (``messages.create(stream=True)``), not ``messages.stream()``:
        the latter's accumulator raises at the first delta that makes a tool call's JSON
        invalid, which would end the run, where the agent answers such a call with an
        ``is_error`` result the model can act on (spec ``spec/agent-ref.md`` §1.3-a). The
        agent accumulates with ``envelope.anthropic.AnthropicTranslator`` instead.
        Parameters with ``betas`` go to the beta client (spec §11.1-b).
        """
        if params.get("betas"):
            stream = await self.client.beta.messages.create(**params, stream=True)
        else:
            stream = await self.client.messages.create(**params, stream=True)
        async with stream:
            async for event in stream:
                yield event


class AnthropicModel(SDKModel):
    """Claude through the network (needs ``ANTHROPIC_API_KEY``).

    Args:
        name: the model, e.g. ``claude-sonnet-4-5``.
        api_key: the key; ``ANTHROPIC_API_KEY`` when omitted.
        timeout: seconds per request.

    Raises:
        ConfigError: no key.
    """

    def __init__(self, name: str = DEFAULT_CLAUDE_MODEL, *, api_key: str | None = None, timeout: float = 600.0) -> None:
        """See the class docstring."""
        key = api_key or os.environ.get("ANTHROPIC_API_KEY")
        if not key:
            raise ConfigError(
                f"model {name!r} needs an API key: set ANTHROPIC_API_KEY (or run without --model for the offline model)"
            )
        # max_retries=0: the agent retries itself, so a retry after partial output is signalled (spec §6.4).
        super().__init__(AsyncAnthropic(api_key=key, max_retries=0, timeout=timeout), name)


class ReplayModel(SDKModel):
    """Recorded API calls replayed through the real SDK client, one per request, in order.

    Args:
        events_or_calls: a flat list of events (split at each ``message_start``) or a list of calls.
        name: the model name; the recording's, from its first ``message_start``, by default.
    """

    def __init__(
        self, events_or_calls: Sequence[dict[str, Any]] | Sequence[Sequence[dict[str, Any]]], *, name: str | None = None
    ) -> None:
        """See the class docstring."""
        self.server = ReplayServer(events_or_calls)
        super().__init__(self.server.client(), name or _recorded_model(self.server.calls) or "replay")

    @classmethod
    def from_file(cls, path: str | Path, *, name: str | None = None) -> ReplayModel:
        """A replay of a recording file (a JSON array of events, e.g. ``anthropic_events_0.json``)."""
        return cls(split_calls(load_events(path)), name=name)


def _recorded_model(calls: Sequence[Sequence[dict[str, Any]]]) -> str | None:
    for call in calls:
        for event in call:
            if event.get("type") == "message_start":
                model = (event.get("message") or {}).get("model")
                if isinstance(model, str):
                    return model
    return None
