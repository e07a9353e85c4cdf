"""Smoke run of ``python -m benchmarks.fleet_delivery`` at tiny sizes, so it cannot rot (no timing asserted)."""

from __future__ import annotations

import argparse

from benchmarks import fleet_delivery


def test_fleet_delivery_runs_and_every_follower_follows(pg_url: str) -> None:
    """Appends from two processes, 30 followers, 40 open streams: each table has its row, and with followers sharing
    a reader (spec delivery [D3.4-e]) all 30 follow on a database that allows 200 connections."""
    args = argparse.Namespace(
        pg_url=pg_url,
        processes=[2],
        writers=3,
        lines=20,
        rounds=1,
        followers=[30],
        fanout_lines=5,
        gap_ms=1.0,
        streams=40,
    )
    tables = fleet_delivery.report(args).split("\n\n")
    assert len(tables) == 3
    appends, fanout, memory = (t.splitlines()[2:] for t in tables)
    assert len(appends) == 1
    assert appends[0].startswith("| 2 | 3 |")
    assert fanout[0].startswith("| 30 | 30 |")  # followers, following: none refused
    assert memory[0].startswith("| 40 |")


def test_the_appended_lines_are_all_in_the_journal(pg_schema_url: str) -> None:
    """The measured writers really journal: every line of every writer is in the table afterwards."""
    import psycopg

    fleet_delivery._prepare(pg_schema_url)
    procs = [fleet_delivery._spawn("_appender", pg_schema_url, "3", "7", mode) for mode in ("journal", "served")]
    fleet_delivery._release(procs)
    with psycopg.connect(pg_schema_url) as conn:
        row = conn.execute("SELECT count(*), count(DISTINCT run_id) FROM stream_journal").fetchone()
    assert row == (2 * 3 * (7 + 1), 6)  # two processes, three writers, seven lines and [DONE] each
