"""The one exception hierarchy of the codec, and the position every error carries.

Owns: ``EnvelopeError`` and its subclasses, ``Position``.
Does not own: deciding *when* to raise (each module does that, citing the spec).

Any exception other than an ``EnvelopeError`` escaping a ``feed()`` or an encoder
call is a bug in this library, and the property tests look for exactly that.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "DecodeError",
    "EncodeError",
    "EnvelopeError",
    "MigrationError",
    "OversizeError",
    "Position",
    "SequenceError",
    "ValidationError",
]


@dataclass(frozen=True, slots=True)
class Position:
    """Where in the input an error was found. Every part is optional.

    Numbering (spec/cli.md C8-a): lines and columns count from 1, as editors show them;
    offsets and indexes count from 0 and their text says so (``byte offset``, ``envelope
    index``), so nobody reads one as the other.

    Attributes:
        line: 1-based physical line of the input where the item starts.
        offset: 0-based byte offset into the whole input.
        index: 0-based index of the envelope in the stream.
        column: 1-based byte column in ``line`` of the fault, when the fault lies inside
            the line (``at()`` fills it in from a line-relative offset).
    """

    line: int | None = None
    offset: int | None = None
    index: int | None = None
    column: int | None = None

    def __str__(self) -> str:
        parts: list[str] = []
        if self.line is not None:
            parts.append(f"line {self.line}")
        if self.column is not None:
            parts.append(f"column {self.column}")
        if self.offset is not None:
            parts.append(f"byte offset {self.offset}")
        if self.index is not None:
            parts.append(f"envelope index {self.index}")
        return ", ".join(parts)


class EnvelopeError(Exception):
    """Base of every error this library raises on purpose.

    Attributes:
        message: what went wrong, one sentence, no position.
        position: where, as far as the raising layer knows.
        field: a ``$.path`` into the envelope, when one field is at fault.
        key: the ``(agent, type)`` block key, when a block is at fault.
        section: the spec section that states the broken rule (``"5.2"``).
    """

    def __init__(
        self,
        message: str,
        *,
        position: Position | None = None,
        field: str | None = None,
        key: tuple[str, str] | None = None,
        section: str | None = None,
    ) -> None:
        self.message = message
        self.position = position or Position()
        self.field = field
        self.key = key
        self.section = section
        super().__init__(str(self))

    def __str__(self) -> str:
        where = str(self.position)
        text = f"{where}: {self.message}" if where else self.message
        if self.field is not None and f"`{self.field}`" not in self.message:
            text += f" at {self.field}"
        if self.key is not None:
            text += f" (block {self.key[0]!r}/{self.key[1]})"
        if self.section is not None:
            text += f" (spec §{self.section})"
        return text

    def at(self, position: Position) -> EnvelopeError:
        """Return a copy of this error with the position filled in from ``position``.

        Parts already known (for instance a byte offset inside the line) are combined:
        a line-relative offset is added to the line's own offset, and gives the column.
        """
        offset = position.offset
        column = self.position.column if self.position.column is not None else position.column
        if offset is not None and self.position.offset is not None:
            if column is None:
                column = self.position.offset + 1
            offset += self.position.offset
        elif offset is None:
            offset = self.position.offset
        merged = Position(
            line=position.line if position.line is not None else self.position.line,
            offset=offset,
            index=position.index if position.index is not None else self.position.index,
            column=column,
        )
        return type(self)(self.message, position=merged, field=self.field, key=self.key, section=self.section)


class EncodeError(EnvelopeError):
    """The caller asked for something that cannot be encoded (a lone surrogate, a bad type)."""


class OversizeError(EncodeError):
    """Strict mode only: a line could not be kept within the bound (spec §6.5)."""


class DecodeError(EnvelopeError):
    """Malformed input: bad SSE, bad UTF-8, bad JSON, or a line over a limit."""


class ValidationError(DecodeError):
    """Well-formed input that breaks the schema: a missing field, a wrong type, an unknown type."""


class SequenceError(ValidationError):
    """Envelopes in an order the protocol does not allow (spec §7)."""


class MigrationError(DecodeError):
    """Legacy XML input that cannot be converted."""
