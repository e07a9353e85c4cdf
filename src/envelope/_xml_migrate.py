"""Incremental conversion of legacy XML tag streams (and raw SSE captures of them) to envelopes.

Owns: the public API of the migration, ``XmlMigrator`` (sans-I/O, ``feed()``/``close()``),
``migrate_xml`` and ``MigrationWarning``; the rules are ``spec/legacy-xml.md`` (cited as
``§M…``). The work is done in two layers, each the only place that knows its part:

1. ``_xml_scan.py``, the tag scanner: bytes to tags and body text. It knows the legacy
   syntax and its broken framings (raw SSE recovered by the old server's writing rule,
   UTF-8, tags, attributes and references, where each kind of body ends, positions).
2. ``_xml_translate.py``, the translator: tags and body text to envelope lines. It knows
   the mapping (tag tables), the escaping eras (as a table), the older labels, the agent,
   and the whole-record fast paths.

Does not own: line layout and the bound (the codec's ``Emitter`` writes every line), SSE
framing of the output (``frame``), files or printing (``cli.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, Literal

from ._encoder import Emitter
from ._errors import EncodeError, MigrationError, Position
from ._limits import DEFAULT_MAX_BLOCK_BYTES, DEFAULT_MAX_BYTES, DEFAULT_MAX_LEGACY_TAG_CHARS
from ._xml_scan import InputKind, MigrationWarning
from ._xml_tokens import _DONE
from ._xml_translate import Era, _Translator

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator

__all__ = ["DONE_LINE", "Era", "InputKind", "MigrationWarning", "XmlMigrator", "migrate_xml"]

#: The data of the terminator line the migrator passes on (spec §8.2).
DONE_LINE: Final = b"[DONE]"


class XmlMigrator(_Translator):
    """Sans-I/O converter of a legacy XML stream to envelope lines (``spec/legacy-xml.md``).

    Feed it chunks as they arrive, split anywhere; each call returns the envelope lines
    (compact JSON, no SSE framing, each within ``max_bytes`` unless spec §6.5 applies)
    that became known. The terminator is returned as ``b"[DONE]"`` by ``close()`` when
    the input had one.

    Example::

        m = XmlMigrator()
        lines = m.feed(capture_bytes) + m.close()

    Attributes:
        warnings: every warning so far (§M4), oldest first, when no ``on_warning`` callback
            was given; with one, warnings go only to it and this stays empty, so memory
            stays bounded on inputs of any size (§M6.2).
        warning_count: how many warnings were made, in either case.
        era: the escaping era in force, ``None`` until detected.
        input_kind: ``"raw-sse"`` or ``"tags"``, ``None`` until detected.
        agent: the agent in force (from ``meta_init`` or the caller).
    """

    def __init__(
        self,
        *,
        agent: str | None = None,
        max_bytes: int = DEFAULT_MAX_BYTES,
        input: Literal["auto", "raw-sse", "tags"] = "auto",
        era: Literal["auto", "early", "later"] = "auto",
        keep_labels: bool = False,
        lenient: bool = False,
        on_warning: Callable[[MigrationWarning], None] | None = None,
        max_tag_chars: int = DEFAULT_MAX_LEGACY_TAG_CHARS,
        max_block_chars: int = DEFAULT_MAX_BLOCK_BYTES,
    ) -> None:
        """Create a migrator.

        Args:
            agent: the agent for envelopes before (or without) a ``meta_init`` (§M5.1).
            max_bytes: the bound on each envelope line (spec §6.1).
            input: ``"raw-sse"``, ``"tags"``, or ``"auto"`` to detect (§M1.2).
            era: ``"early"``, ``"later"``, or ``"auto"`` to detect (§M3.1).
            keep_labels: keep older server-tool labels as written (§M2.7).
            lenient: turn recoverable errors into warnings, keeping the content (§M4.2).
            on_warning: called with each warning as it is made; when given, warnings
                are not also kept in ``warnings`` (§M6.2).
            max_tag_chars: longest tag held.
            max_block_chars: longest buffered body held.

        Raises:
            MigrationError: a bad option value.
        """
        if input not in ("auto", "raw-sse", "tags"):
            raise MigrationError(f"input must be auto, raw-sse or tags, got {input!r}")
        if era not in ("auto", "early", "later"):
            raise MigrationError(f"era must be auto, early or later, got {era!r}")
        try:
            Emitter(agent or "", max_bytes)
        except EncodeError as exc:
            raise MigrationError(exc.message, section=exc.section) from None
        super().__init__(
            agent=agent,
            max_bytes=max_bytes,
            era=era,
            keep_labels=keep_labels,
            input=input,
            lenient=lenient,
            on_warning=on_warning,
            max_tag_chars=max_tag_chars,
            max_block_chars=max_block_chars,
        )

    def feed(self, chunk: str | bytes) -> list[bytes]:
        """Consume the next piece of input; return the envelope lines now known.

        Args:
            chunk: bytes of the input, or text (encoded as UTF-8), split anywhere.

        Returns:
            Zero or more envelope lines.

        Raises:
            MigrationError: input that cannot be converted, with its position (§M4.1).
        """
        if self._state is _DONE:
            raise MigrationError("feed() after close()")
        if isinstance(chunk, str):
            try:
                data = chunk.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise MigrationError(
                    f"lone surrogate U+{ord(chunk[exc.start]):04X} in a str chunk", position=self._pos_in(0)
                ) from None
        else:
            data = bytes(chunk)
        self._in_off += len(data)
        self._raw += data
        self._front(final=False)
        return self._take()

    def close(self) -> list[bytes]:
        """Signal the end of the input; return the last lines (and ``[DONE]`` if the input had it).

        Raises:
            MigrationError: the input stops inside a record, a character, a tag or a block
                (in lenient mode, the recoverable ones become warnings).
        """
        if self._state is _DONE:
            return []
        self._front(final=True)
        try:
            tail = self._utf8.decode(b"", final=True)
        except UnicodeDecodeError:
            raise MigrationError(
                "input ends inside a UTF-8 character", position=Position(offset=self._in_off - self._held_bytes)
            ) from None
        if tail:  # pragma: no cover - the decoder raises rather than returning text at the end
            self._text(tail, self._in_off, self._raw_line)
        self._end_of_input()
        if self._done_seen:
            self._out.append(DONE_LINE)
        self._state = _DONE
        return self._take()

    def _pos_in(self, offset: int) -> Position:
        return Position(line=None, offset=offset)


def migrate_xml(
    chunks: Iterable[str | bytes],
    *,
    agent: str | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
    input: Literal["auto", "raw-sse", "tags"] = "auto",
    era: Literal["auto", "early", "later"] = "auto",
    keep_labels: bool = False,
    lenient: bool = False,
    on_warning: Callable[[MigrationWarning], None] | None = None,
) -> Iterator[bytes]:
    """Convert a legacy XML stream to envelope lines, yielding each as soon as it is known.

    Args:
        chunks: the input, as text or bytes split anywhere; a raw SSE capture of the old
            server or the decoded tag text (detected unless ``input`` says).
        agent: the agent for a capture without ``meta_init``.
        max_bytes: the bound on each line (spec §6.1).
        input: see ``XmlMigrator``.
        era: see ``XmlMigrator``.
        keep_labels: see ``XmlMigrator``.
        lenient: see ``XmlMigrator``.
        on_warning: called with each ``MigrationWarning``.

    Returns:
        An iterator of envelope lines (compact JSON, unframed); the last is ``b"[DONE]"``
        when the input had the terminator.

    Raises:
        MigrationError: the input cannot be converted (raised while iterating).
    """
    migrator = XmlMigrator(
        agent=agent,
        max_bytes=max_bytes,
        input=input,
        era=era,
        keep_labels=keep_labels,
        lenient=lenient,
        on_warning=on_warning,
    )
    for piece in chunks:
        yield from migrator.feed(piece)
    yield from migrator.close()
