"""spec §2.3-f, validation.md [V2.3-c]: a ``retry:`` value past ``MAX_RETRY_DIGITS`` is a coded error.

Issue 38 §8: 4,301 digits made ``int()`` raise the builtin ``ValueError`` out of every
reader, and ``envelope validate``, ``reconstruct`` and ``convert`` printed a traceback.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from envelope import DecodeError, SSEReader, StreamReader, StreamValidator
from envelope._limits import MAX_RETRY_DIGITS

ENVELOPE = Path(sys.executable).with_name("envelope")
EVENT = b'data: {"type":"text","agent":"a","final":true,"delta":""}\n\n'
HOSTILE = b"retry: " + b"9" * 5_000 + b"\n" + EVENT


def test_spec_02_3_f_retry_of_ten_digits_is_read() -> None:
    """[2.3-f] up to the bound a value is read as WHATWG says."""
    reader = SSEReader()
    reader.feed(b"retry: " + b"9" * MAX_RETRY_DIGITS + b"\n" + EVENT)
    assert reader.retry == int("9" * MAX_RETRY_DIGITS)


@pytest.mark.parametrize("digits", [MAX_RETRY_DIGITS + 1, 4_301, 100_000])
def test_spec_02_3_f_longer_retry_is_a_decode_error_with_its_line(digits: int) -> None:
    reader = SSEReader()
    reader.feed(EVENT)
    with pytest.raises(DecodeError, match=rf"retry value of {digits:,} digits") as info:
        reader.feed(b"retry: " + b"1" * digits + b"\n")
    assert info.value.position.line == 3
    assert info.value.position.offset == len(EVENT)
    assert reader.retry is None


def test_spec_02_3_f_the_error_does_not_depend_on_the_split() -> None:
    """The same error, at the same place, whether fed whole or one byte at a time (L3-c)."""
    whole = StreamReader("sse")
    with pytest.raises(DecodeError) as at_once:
        whole.feed(HOSTILE)
    pieces = StreamReader("sse")

    def by_byte() -> None:
        for i in range(len(HOSTILE)):
            pieces.feed(HOSTILE[i : i + 1])

    with pytest.raises(DecodeError) as split:
        by_byte()
    assert str(split.value) == str(at_once.value)


def test_v2_3_c_validator_reports_e168_and_reads_on() -> None:
    validator = StreamValidator()
    found = validator.feed(HOSTILE) + validator.close()
    assert found[0].code == "E169"
    assert (found[0].line, found[0].offset) == (1, 0)
    # the next event is still judged: it is a complete text block (no E120 for it)
    assert "E120" not in {v.code for v in found}


@pytest.mark.parametrize(
    "command",
    [["validate"], ["reconstruct"], ["convert", "--from", "envelope", "--to", "agui"]],
)
def test_spec_02_3_f_cli_names_the_line_without_a_traceback(command: list[str], tmp_path: Path) -> None:
    capture = tmp_path / "hostile.sse"
    capture.write_bytes(HOSTILE)
    done = subprocess.run([str(ENVELOPE), *command, str(capture)], capture_output=True, check=False, timeout=120)
    text = done.stderr.decode() + done.stdout.decode()
    assert "Traceback" not in text
    assert "retry value of 5,000 digits" in text
    assert done.returncode in (1, 2)
