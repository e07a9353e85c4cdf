"""Tests of ``envelope check`` (spec/check.md)."""
