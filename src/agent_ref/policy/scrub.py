"""The secrets this process holds, and scrubbing every error text with them (spec ``spec/agent-ref.md`` §6.3-b).

Owns: the process-wide set of held secret values (each agent adds its client's API key
and auth token and the ``secrets=`` it was given: a server's bearer token, say), the
public form of an error text (``public``: for a stream or a store), the redacted form of
a whole text (``redact_text``: for a log, tracebacks kept), the filter that applies
it to every record of the ``agent_ref`` logger, and the held values out of a run's data
(spec §SC): ``held_text`` for a tool's or a client's result, ``held_images`` for its
images (spec [HY2-a]), ``EventScrubber`` for the model's stream events before the
translator (text, thinking, tool inputs).
Does not own: the redaction rules themselves (``policy/redact.py``: ``Redactor`` and its table
of common credential forms, ``public_message``). This module only feeds them the values
the process holds, and works with both the plain ``public_message(text)`` and the
``Redactor`` API (``public_message(text, redactor)``).

Held secrets are process-wide on purpose: a secret one agent holds is a secret of the
process, and a log record does not say which agent it came from (spec [HY1-a]). A
process that builds short-lived agents with secrets of their own (a test suite, a
host of many tenants) scopes them with ``held_scope()``: the values held inside it
are released when it exits, the ones held before stay.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import os
import re
import threading
from collections.abc import Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import unquote, unquote_plus

from . import redact

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Sequence

    from envelope import ImageRef

__all__ = [
    "IMAGE_REMOVED",
    "MARK",
    "EventScrubber",
    "event_scrubber",
    "held",
    "held_images",
    "held_scope",
    "held_text",
    "hold",
    "install_log_filter",
    "public",
    "redact_text",
]

#: What a held secret becomes.
MARK: Final = "[redacted]"
#: Shorter values are not held: they would blank ordinary words (and are no real credential).
MIN_HELD_CHARS: Final = 6
#: Variables whose values are secrets of the process whenever they are set.
SECRET_ENV_VARS: Final = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "AGENT_REF_TOKEN")

_HELD: set[str] = set()
_LOCK = threading.Lock()


def hold(secrets: Iterable[str | None]) -> None:
    """Hold these values: from now on every text this module scrubs has them replaced.

    Args:
        secrets: values (``None`` and values under ``MIN_HELD_CHARS`` are skipped).
    """
    with _LOCK:
        _HELD.update(s for s in secrets if isinstance(s, str) and len(s.strip()) >= MIN_HELD_CHARS)


@contextmanager
def held_scope() -> Iterator[None]:
    """Hold values for a while: on exit the held set is what it was on entry (spec [HY1-a]).

    ``with held_scope(): agent = Agent(..., secrets=[token])`` holds ``token`` inside the
    block only. Values held before the block stay held; the environment's secret
    variables are read at each scrub and are not affected. Scopes nest. Only the values
    held *inside* are released, so an agent built outside keeps its secrets held.
    Exiting while another thread holds values releases those too (the set is restored
    as a whole): scope what one thread, or one test, does.
    """
    with _LOCK:
        before = set(_HELD)
    try:
        yield
    finally:
        with _LOCK:
            _HELD.intersection_update(before)


def held() -> list[str]:
    """The held values and the secret environment variables' values, longest first."""
    env = (os.environ.get(name, "").strip() for name in SECRET_ENV_VARS)
    with _LOCK:
        values = _HELD | {v for v in env if len(v) >= MIN_HELD_CHARS}
    return sorted(values, key=len, reverse=True)


def _redactor(secrets: list[str]) -> Callable[[str], str] | None:
    """``redact.Redactor(secrets=...)`` when the redaction module has it."""
    factory: Any = getattr(redact, "Redactor", None)
    if factory is None:
        return None
    made: Callable[[str], str] = factory(secrets=secrets)
    return made


def _replace_held(text: str, secrets: list[str]) -> str:
    for _ in range(4):  # a replacement can complete a secret with the text beside it
        if not any(s in text for s in secrets):
            break
        for secret in secrets:
            text = text.replace(secret, MARK)
    return text


def public(text: str) -> str:
    """``text`` as it may go into a stream or a store: ``public_message`` plus the held secrets.

    Args:
        text: an error text (an exception's message, an API error message).

    Returns:
        One short paragraph without traceback lines, common credential forms or held secrets.
    """
    secrets = held()
    redactor = _redactor(secrets)
    message: Callable[..., str] = redact.public_message
    if redactor is not None:
        return message(text, redactor)
    # Before ``redact.Redactor`` existed: held secrets out first (so truncation cannot cut
    # one in half and leak its prefix), then the common forms, then once more.
    return _replace_held(message(_replace_held(text, secrets)), secrets)


def redact_text(text: str) -> str:
    """``text`` whole (tracebacks kept), with common credential forms and held secrets replaced."""
    secrets = held()
    redactor = _redactor(secrets)
    if redactor is not None:
        return redactor(text)
    return _replace_held(text, secrets)


def held_text(text: str) -> str:
    """``text`` with every held secret replaced, and nothing else changed (spec [SC1-a]).

    For data: a tool's result, a frontend result. The common forms are left alone there
    (a result's ``key=…`` is data, spec [R6.3-c]); only the exact values the process holds go.
    With nothing held the text is returned as it is, at the cost of one environment read.
    """
    secrets = held()
    if not secrets or not any(s in text for s in secrets):
        return text
    return _held_redactor(secrets).scrub_held(text)


#: What an image whose source holds a held value becomes: a line of its result's text (spec [HY2-a]).
IMAGE_REMOVED: Final = "[image {n} of this result removed: its {where} held a value this process keeps secret]"

log = logging.getLogger("agent_ref")


def held_images(text: str, images: Sequence[ImageRef]) -> tuple[str, tuple[ImageRef, ...]]:
    """A result's text and images with every image whose source holds a held value removed, and said (spec [HY2-a]).

    Scanned, for each held value: a URL source as given and percent-decoded; a data URI
    as text (header and base64) and its decoded bytes (metadata such as a PNG text
    chunk holds text as it is); the media type. An image found holding one is removed
    (never rewritten: a URL with a marker fetches something else, an image with a byte
    changed is broken) and a line ``IMAGE_REMOVED`` (its position from 1, and where)
    is added to the text, so the stream, the history and the model all say it; a
    warning is logged. Text drawn into the pixels cannot be seen and is not scanned.

    Args:
        text: the result's text, already through ``held_text``.
        images: the result's images.

    Returns:
        The text (with one line per removed image) and the images kept, in order.
    """
    if not images:
        return text, ()
    secrets = held()
    if not secrets:
        return text, tuple(images)
    kept: list[ImageRef] = []
    notes: list[str] = []
    for n, image in enumerate(images, 1):
        where = _image_holds(image, secrets)
        if where is None:
            kept.append(image)
            continue
        notes.append(IMAGE_REMOVED.format(n=n, where=where))
        log.warning("removed image %d of a tool result: its %s held a secret value of this process", n, where)
    if not notes:
        return text, tuple(images)
    return held_text("\n".join(part for part in (text, *notes) if part)), tuple(kept)


def _image_holds(image: ImageRef, secrets: Sequence[str]) -> str | None:
    """Where ``image`` holds a held value (``"URL"``, ``"data"``, ``"media type"``), or ``None``."""
    if any(s in image.media_type for s in secrets):
        return "media type"
    src = image.src
    if not src.startswith("data:"):
        forms = (src, unquote(src), unquote_plus(src))
        return "URL" if any(s in form for s in secrets for form in forms) else None
    if any(s in src for s in secrets):
        return "data"
    payload = src.partition(",")[2]
    try:
        raw = base64.b64decode(payload, validate=False)
    except (binascii.Error, ValueError):
        return None  # not base64: the text was scanned, there are no bytes to scan
    if any(s.encode() in raw for s in secrets):
        return "data"
    return None


def _held_redactor(secrets: Iterable[str]) -> redact.Redactor:
    redactor = redact.Redactor(common_forms=False)
    for secret in secrets:
        if len(secret) >= redact.MIN_SECRET_CHARS:
            redactor.add(secret)
    return redactor


#: Deeper values are left to the translator, which refuses them anyway (its nesting bound is lower).
_MAX_DEPTH: Final = 512


def _scrub_value(value: Any, redactor: redact.Redactor, depth: int) -> Any:
    if isinstance(value, str):
        return redactor.scrub_held(value)
    if depth > _MAX_DEPTH:
        return value
    if isinstance(value, Mapping):
        pairs = [(_scrub_value(k, redactor, depth + 1), _scrub_value(v, redactor, depth + 1)) for k, v in value.items()]
        if all(k is k2 and v is v2 for (k, v), (k2, v2) in zip(value.items(), pairs, strict=True)):
            return value
        return dict(pairs)
    if isinstance(value, list):
        items = [_scrub_value(v, redactor, depth + 1) for v in value]
        return value if all(a is b for a, b in zip(value, items, strict=True)) else items
    return value


def _json_forms(secret: str) -> list[str]:
    """``secret`` as it can stand inside a JSON string: raw, escaped, escaped with ``\\uXXXX``."""
    forms = [secret, json.dumps(secret, ensure_ascii=False)[1:-1], json.dumps(secret)[1:-1]]
    if "/" in secret:
        forms.append(forms[2].replace("/", "\\/"))
    return list(dict.fromkeys(forms))


def _field(obj: Any, name: str) -> Any:
    if type(obj) is dict:  # the cheap check first: recorded and rewritten events
        return obj.get(name)
    if isinstance(obj, Mapping):
        return obj.get(name)
    return getattr(obj, name, None)


def _plain(obj: Any) -> Any:
    """An SDK object as a plain dict (``model_dump``), a mapping as a dict, else itself."""
    if isinstance(obj, Mapping):
        return dict(obj)
    dump = getattr(obj, "model_dump", None)
    return dump(mode="json", exclude_unset=True) if callable(dump) else obj


_STREAMED: Final = {"text": "text_delta", "thinking": "thinking_delta"}


class EventScrubber:
    """Rewrites a Messages stream's events so no held secret reaches the translator (spec [SC2-a], [SC2-c]).

    Text and thinking deltas pass a ``HeldStream`` per block (at most the longest
    secret less one character held back, the rest sent at the block's stop); a tool
    call's input JSON is gathered (the translator sends it whole at the stop anyway) and
    redacted there (escapes that need not be are written plainly first, then the values
    are replaced in their JSON-escaped forms too); a block
    given whole at its start (a server tool's result, an input at start) and a
    citation are redacted as values. An event that holds no secret passes unchanged
    (the same object); a changed one becomes a plain dict, which the translator reads
    alike. Build one per model call attempt: it keeps per-block state.

    Args:
        secrets: the held values.
    """

    def __init__(self, secrets: Sequence[str]) -> None:
        """See the class docstring."""
        self._secrets = list(secrets)
        self._redactor = _held_redactor(secrets)
        self._json = _held_redactor(form for s in secrets for form in _json_forms(s))
        self._streams: dict[int, tuple[str, redact.HeldStream]] = {}
        self._inputs: dict[int, list[str]] = {}

    def feed(self, event: Any) -> list[Any]:
        """The events to give the translator in place of ``event`` (none, it, or a rewrite plus more)."""
        kind = _field(event, "type")
        index = _field(event, "index")
        if not isinstance(index, int):
            return [event]
        if kind == "content_block_delta":
            return self._delta(event, index)
        if kind == "content_block_start":
            return [self._start(event, index)]
        if kind == "content_block_stop":
            return [*self._stop(index), event]
        return [event]

    def _start(self, event: Any, index: int) -> Any:
        block = _field(event, "content_block")
        api_type = _field(block, "type")
        if api_type in _STREAMED:
            stream = redact.HeldStream(self._secrets)
            self._streams[index] = (str(api_type), stream)
            initial = _field(block, api_type)
            if not isinstance(initial, str) or not initial:
                return event
            plain = _plain(block)
            plain[api_type] = stream.feed(initial)
            return {"type": "content_block_start", "index": index, "content_block": plain}
        if isinstance(_field(block, "input"), Mapping) or api_type in ("tool_use", "server_tool_use", "mcp_tool_use"):
            self._inputs[index] = []
        plain = _plain(block)
        scrubbed = _scrub_value(plain, self._redactor, 0)
        if scrubbed is plain:
            return event
        return {"type": "content_block_start", "index": index, "content_block": scrubbed}

    def _delta(self, event: Any, index: int) -> list[Any]:
        delta = _field(event, "delta")
        kind = _field(delta, "type")
        if kind in ("text_delta", "thinking_delta") and index in self._streams:
            field = "text" if kind == "text_delta" else "thinking"
            piece = _field(delta, field)
            if not isinstance(piece, str):
                return [event]
            out = self._streams[index][1].feed(piece)
            if out == piece:
                return [event]
            return [_delta_event(index, kind, field, out)] if out else []
        if kind == "input_json_delta" and index in self._inputs:
            partial = _field(delta, "partial_json")
            if isinstance(partial, str):
                self._inputs[index].append(partial)
                return []
        if kind == "citations_delta":
            plain = _plain(delta)
            scrubbed = _scrub_value(plain, self._redactor, 0)
            if scrubbed is not plain:
                return [{"type": "content_block_delta", "index": index, "delta": scrubbed}]
        return [event]

    def _stop(self, index: int) -> list[Any]:
        if index in self._streams:
            api_type, stream = self._streams.pop(index)
            rest = stream.end()
            return [_delta_event(index, _STREAMED[api_type], api_type, rest)] if rest else []
        parts = self._inputs.pop(index, None)
        if not parts:
            return []
        text = "".join(parts)
        if "\\" in text:
            text = _unescape(text)  # a value hidden by escapes shows; a cut input too
        delta = {"type": "input_json_delta", "partial_json": self._json.scrub_held(text)}
        return [{"type": "content_block_delta", "index": index, "delta": delta}]


#: In JSON text: an escaped backslash (kept), a ``\\uXXXX`` escape, an escaped ``/``.
_ESCAPES: Final = re.compile(r"\\\\|\\u([0-9a-fA-F]{4})|\\/")


def _unescape(text: str) -> str:
    """JSON text with each escape of a character that needs none written plainly: the same JSON value.

    ``\\u0061`` becomes ``a`` and ``\\/`` becomes ``/``; an escaped quote, backslash,
    control character or surrogate stays escaped, so the text still means what it
    meant (a cut input still reads as the same prefix), and a held value hidden by
    escapes is there to be found.
    """

    def plain(match: re.Match[str]) -> str:
        found = match.group(0)
        if found == "\\/":
            return "/"
        code = match.group(1)
        if code is None:
            return found  # an escaped backslash: the next character is not escaped by it
        char = chr(int(code, 16))
        if char in '"\\' or char < " " or "\ud800" <= char <= "\udfff":
            return found
        return char

    return _ESCAPES.sub(plain, text)


def _delta_event(index: int, kind: str, field: str, text: str) -> dict[str, Any]:
    return {"type": "content_block_delta", "index": index, "delta": {"type": kind, field: text}}


def event_scrubber() -> EventScrubber | None:
    """An ``EventScrubber`` for the secrets held now; ``None`` when none is held (the fast path, spec [SC4-a])."""
    secrets = held()
    return EventScrubber(secrets) if secrets else None


class _LogScrubber(logging.Filter):
    """Rewrites each record's message and traceback through ``redact_text`` (spec §6.3-b)."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = redact_text(record.getMessage())
        record.args = None
        if record.exc_info:
            text = logging.Formatter().formatException(record.exc_info)
            record.exc_text = redact_text(text)
            record.exc_info = None
        elif record.exc_text:
            record.exc_text = redact_text(record.exc_text)
        return True


_FILTER: Final = _LogScrubber()


def install_log_filter() -> None:
    """Scrub every record of the ``agent_ref`` logger (idempotent)."""
    logger = logging.getLogger("agent_ref")
    if _FILTER not in logger.filters:
        logger.addFilter(_FILTER)
