"""meta_init's payload keys: ``format`` (W144), ``migrated_from``, ``run_id`` (spec §4.2, issues 12 §2 and 15)."""

from __future__ import annotations

import pytest

from envelope import validate

from ._streams import meta_init


@pytest.mark.parametrize("fmt", ["xml", "raw", "JSON", ""])
def test_spec_04_2_a_format_other_than_json_is_w144(fmt: str) -> None:
    """[4.2-a] a JSON envelope stream says format "json"; anything else is W144 on the meta_init line."""
    found = list(validate([meta_init(format=fmt), "[DONE]"]))
    assert [(v.code, v.line) for v in found] == [("W144", 1)]
    assert "migrated_from" in found[0].message


def test_spec_04_2_a_format_json_is_quiet() -> None:
    """[4.2-a] the value every stream of this protocol carries."""
    assert list(validate([meta_init(format="json"), "[DONE]"])) == []


def test_spec_04_2_b_migrated_stream_says_json_and_keeps_its_origin() -> None:
    """[4.2-b] migrated_from is an allowed string key; with format "json" nothing is reported."""
    assert list(validate([meta_init(migrated_from="xml"), "[DONE]"])) == []
    # the migrator's old output: format "xml" and no migrated_from
    found = list(validate([meta_init(format="xml"), "[DONE]"]))
    assert [v.code for v in found] == ["W144"]
    # the origin put in the right key, format left wrong: still W144, the message says so
    both = list(validate([meta_init(format="xml", migrated_from="xml"), "[DONE]"]))
    assert [v.code for v in both] == ["W144"]
    assert "belongs in migrated_from, as it is" in both[0].message
    assert [v.code for v in validate([meta_init(migrated_from=1), "[DONE]"])] == ["E141"]


def test_spec_04_2_c_run_id_is_an_optional_string() -> None:
    """[4.2-c] run_id names the run for reconnection; a string, when present."""
    assert list(validate([meta_init(run_id="run-42"), "[DONE]"])) == []
    found = list(validate([meta_init(run_id=42), "[DONE]"]))
    assert [v.code for v in found] == ["E141"]
    assert "run_id" in found[0].message


def test_resume_must_be_an_object_when_present() -> None:
    assert [v.code for v in validate([meta_init(resume=["t"]), "[DONE]"])] == ["E141"]
