"""What we write, we validate (issue 12 §1): the one helper every test uses for the streams
it obtains from the project.

Every stream a test gets from a producer of this project (agent runs, resumed runs,
``agent-ref log``, replay, the relay recipe, the migrator, the CLI) goes through the
strict validator here: errors *and* warnings fail the test, as ``envelope validate
--strict`` does. Two ways in:

- ``assert_valid(stream)`` for a stream a test already holds (a list of envelope lines,
  or the bytes of an SSE or JSON-lines recording);
- the ``validated_sink`` fixture (``tests/conftest.py``): ``sink = validated_sink()``
  gives a list whose ``append`` is a producer's sink; every such list is validated when
  the test ends, so a test that forgets to check still cannot let an invalid stream by.

A test that means to produce an invalid stream says so with ``expect=`` and the codes it
expects; nothing is skipped silently.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from envelope import DEFAULT_MAX_BYTES, Profile, StreamValidator, Violation, validate

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence


def violations(
    stream: bytes | str | Iterable[bytes | str],
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    profile: Profile = "default",
) -> list[Violation]:
    """Every violation the strict validator finds in ``stream``.

    Args:
        stream: envelope lines (``[DONE]`` included), or the raw bytes (or text) of a
            recording in SSE or JSON lines, the format detected as ``envelope validate`` does.
        max_bytes: the line bound the producer was given.
        profile: the producer's profile (envelope-v1 §10).
    """
    if isinstance(stream, str):
        stream = stream.encode()
    if isinstance(stream, bytes):
        checker = StreamValidator(max_bytes=max_bytes, profile=profile)
        return [*checker.feed(stream), *checker.close()]
    return list(validate(stream, max_bytes=max_bytes, profile=profile))


def assert_valid(
    stream: bytes | str | Iterable[bytes | str],
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    expect: Sequence[str] = (),
    profile: Profile = "default",
) -> None:
    """Fail unless the strict validator finds exactly the codes ``expect`` (none by default).

    Args:
        stream: as for ``violations``.
        max_bytes: the line bound the producer was given.
        expect: the codes (``E1xx``/``W1xx``) a test that produces a bad stream on
            purpose expects, in order.
        profile: the producer's profile (envelope-v1 §10).
    """
    found = violations(stream, max_bytes=max_bytes, profile=profile)
    codes = [v.code for v in found]
    assert codes == list(expect), "stream fails the strict validator:\n" + "\n".join(str(v) for v in found)


class ValidatedSink(list[bytes]):
    """A list used as a producer's sink; ``tests/conftest.py`` validates it at teardown."""

    def __init__(self, *, max_bytes: int = DEFAULT_MAX_BYTES, expect: Sequence[str] = ()) -> None:
        super().__init__()
        self.max_bytes = max_bytes
        self.expect = tuple(expect)

    def check(self) -> None:
        """Validate what was written so far (strict)."""
        assert_valid(list(self), max_bytes=self.max_bytes, expect=self.expect)
