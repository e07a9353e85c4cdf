"""Resume links across processes (spec server [RL1-c]): two ``agent-ref serve`` on one SQLite store.

A link minted by process A is accepted by process B when both share the key (the same
``--token``, or the same ``--link-key-file``, rotation included), and refused by a process
whose key differs. Both started as a user starts them. Every stream is validated strictly.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from serve_cli_support import agent_ref_serve
from server_support import get, post
from validating import assert_valid

if TYPE_CHECKING:
    from pathlib import Path

TOKEN = "fleet-bearer-token-1"


def test_a_link_minted_by_one_process_is_accepted_by_another_with_the_same_token(tmp_path: Path) -> None:
    """A mints, B (same --token, same store) replays the run by the link alone; C (another token) refuses it."""
    db = str(tmp_path / "a.db")
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    with (
        agent_ref_serve("--db", db, "--token", TOKEN) as a,
        agent_ref_serve("--db", db, "--token", TOKEN) as b,
        agent_ref_serve("--db", db, "--token", "another-token-entirely") as c,
    ):
        first = post(a, "/agent/run", {"prompt": "What is 2 + 2?"}, headers=bearer)
        run_id, token = first.headers["x-run-id"], first.headers["x-resume-token"]
        on_b = get(b, f"/agent/runs/{run_id}/stream?token={token}")
        on_c = get(c, f"/agent/runs/{run_id}/stream?token={token}")
    assert first.status_code == 200
    assert_valid(first.content)
    assert on_b.status_code == 200, on_b.text
    assert_valid(on_b.content)
    assert on_b.content == first.content
    assert on_c.status_code == 401
    assert on_c.json()["error"]["type"] == "token_bad_signature"


def test_a_shared_key_file_rotates_across_processes(tmp_path: Path) -> None:
    """A signs with the old key; B lists the new key first and the old one after: B accepts A's link [RL1-c]."""
    db = str(tmp_path / "a.db")
    old, rotated = tmp_path / "old.keys", tmp_path / "rotated.keys"
    old.write_text("old-link-key-0123456789\n", encoding="utf-8")
    rotated.write_text("new-link-key-0123456789\nold-link-key-0123456789\n", encoding="utf-8")
    only_new = tmp_path / "new.keys"
    only_new.write_text("new-link-key-0123456789\n", encoding="utf-8")
    with (
        agent_ref_serve("--db", db, "--link-key-file", str(old)) as a,
        agent_ref_serve("--db", db, "--link-key-file", str(rotated)) as b,
        agent_ref_serve("--db", db, "--link-key-file", str(only_new)) as c,
    ):
        first = post(a, "/agent/run", {"prompt": "What is 2 + 2?"})
        run_id, token = first.headers["x-run-id"], first.headers["x-resume-token"]
        on_b = get(b, f"/agent/runs/{run_id}/stream?token={token}")
        on_c = get(c, f"/agent/runs/{run_id}/stream?token={token}")
        fresh = post(b, f"/agent/runs/{run_id}/link", {})
        by_new = get(c, fresh.json()["stream"])
    assert_valid(first.content)
    assert on_b.status_code == 200, on_b.text
    assert_valid(on_b.content)
    assert on_c.status_code == 401  # the old key retired there
    assert by_new.status_code == 200  # B signs with its first key, the new one
    assert_valid(by_new.content)


def test_a_bad_key_file_or_quota_is_one_line_before_anything_listens(tmp_path: Path) -> None:
    """`--link-key-file` with a short key, `--max-runs-in-flight 0`: exit 2, one line naming the flag [RC9-a]."""
    import subprocess
    import sys

    short = tmp_path / "short.keys"
    short.write_text("short\n", encoding="utf-8")
    for flags, start in (
        (["--link-key-file", str(short)], "--link-key-file: error: "),
        (["--link-key-file", str(tmp_path / "none")], "--link-key-file: error: "),
        (["--max-runs-in-flight", "0"], "--max-runs-in-flight: error: 0 is not a quota"),
        (["--messages-per-minute", "-1"], "--messages-per-minute: error: "),
        (["--budget-usd", "0"], "--budget-usd: error: 0 is not a budget"),
    ):
        done = subprocess.run(
            [sys.executable, "-m", "agent_ref.cli.serve", "--db", str(tmp_path / "a.db"), "--port", "0", *flags],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 2, (flags, done.stderr)
        assert done.stderr.startswith(start), done.stderr
        assert len(done.stderr.strip().splitlines()) == 1
        assert not (tmp_path / "a.db").exists()
