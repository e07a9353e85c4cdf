"""The JS client's resume links (spec server §RL2) against a real ``agent-ref serve --token``.

Each case of ``tests/js/live/links.live.mjs`` runs alone behind a fresh cutting TCP proxy
(``tests/proxy_support``'s ``CuttingProxy``: the first connection, the run's POST, is cut after
``CUT`` bytes), so what the server was asked is read here from the request heads the
proxy passed on: the resumption's request line carries ``?token=`` and no
``Authorization``, the refresh is a POST with the bearer. Every run the node side noted
is read back from the server through the strict validator and rebuilt by Python: the
client's transcript must be Python's.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from typing import TYPE_CHECKING

from browser.page_support import stored_responses
from envelope import reconstruct
from js.js_support import HERE, TOKEN
from proxy_support import CuttingProxy

if TYPE_CHECKING:
    from pathlib import Path

#: Bytes of the run's first answer (headers included) the proxy passes before it cuts: a few events in.
CUT = 1400
#: What the node side runs to mint a link with the library (argv: run id, ``expired`` or ``forged``).
MINT = f"""
import sys, time
from agent_ref.server.links import link_keys
from envelope.delivery import mint
run_id, kind = sys.argv[1], sys.argv[2]
if kind == "expired":
    print(mint(list(link_keys(None, {TOKEN!r})), run_id, ttl=300, now=time.time() - 600))
else:
    print(mint([b"a key this server never held"], run_id, ttl=300))
"""
_LINE = re.compile(r"(get|post) (\S+) http/1\.1\r\n")


def _case(node: str, base: str, direct: str, name: str, report: Path) -> None:
    """Run the one case of links.live.mjs called ``name``; fail unless it ran and passed."""
    result = subprocess.run(
        [node, "--test", f"--test-name-pattern={re.escape(name)}", str(HERE / "live" / "links.live.mjs")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={
            **os.environ,
            "ENVELOPE_TEST_SERVER": base,
            "ENVELOPE_TEST_DIRECT": direct,
            "ENVELOPE_TEST_TOKEN": TOKEN,
            "ENVELOPE_TEST_REPORT": str(report),
            "ENVELOPE_TEST_PYTHON": sys.executable,
            "ENVELOPE_TEST_MINT": MINT,
        },
    )
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    assert re.search(r"^# pass 1$", result.stdout, re.MULTILINE), result.stdout[-3000:]
    assert re.search(r"^# fail 0$", result.stdout, re.MULTILINE), result.stdout[-3000:]


def _heads(proxy: CuttingProxy) -> list[tuple[str, str, str]]:
    """``(method, target, head)`` of every request the proxy passed on (lower-cased)."""
    out = []
    for head in proxy.requests():
        line = _LINE.match(head)
        assert line is not None, head
        out.append((line.group(1), line.group(2), head))
    return out


def _run(node: str, live_server: str, tmp_path: Path, name: str) -> tuple[list[tuple[str, str, str]], list[str]]:
    """One case behind a fresh proxy: the request heads it saw, and the run ids noted (each checked whole)."""
    host, port = live_server.removeprefix("http://").split(":")
    proxy = CuttingProxy(host, int(port), [CUT])
    report = tmp_path / "runs.jsonl"
    try:
        _case(node, f"http://127.0.0.1:{proxy.port}", live_server, name, report)
    finally:
        proxy.close()
    assert proxy.made == 1, "the proxy cut the run's first answer"
    runs = [json.loads(line) for line in report.read_text().splitlines()]
    for run in runs:
        responses = stored_responses(live_server, run["run_id"], run["responses"], token=TOKEN)  # strict validator
        if run["transcript"] is not None:
            assert run["transcript"] == reconstruct([line for response in responses for line in response]).to_dict()
    return _heads(proxy), [run["run_id"] for run in runs]


def _streams(heads: list[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
    return [h for h in heads if h[0] == "get" and "/stream" in h[1]]


def test_rl2_a_the_resumption_of_a_cut_response_carries_the_link_and_no_bearer(
    node: str, live_server: str, tmp_path: Path
) -> None:
    """[RL2-a] [RL2-d]: the POST had the bearer; the resumption is ``?token=`` of its run, no Authorization."""
    heads, (run_id,) = _run(node, live_server, tmp_path, "[RL2-a] a cut response is resumed")
    post = [h for h in heads if h[0] == "post"]
    assert [h[1] for h in post] == ["/agent/run"]
    assert f"authorization: bearer {TOKEN}" in post[0][2]
    resumed = _streams(heads)
    assert resumed, heads
    first = resumed[0]
    assert first[1].startswith(f"/agent/runs/{run_id.lower()}/stream?token=")
    assert "\r\nauthorization:" not in first[2]
    assert "\r\nlast-event-id: " in first[2]
    assert "\r\nx-caller:" not in first[2]  # none of the caller's headers


def test_rl2_c_the_link_is_refreshed_at_four_fifths_of_its_life(node: str, live_server: str, tmp_path: Path) -> None:
    """[RL2-c]: on the fake clock, one refresh (a POST with the bearer) and the resumption goes with its token."""
    heads, _ = _run(node, live_server, tmp_path, "[RL2-c] the link is refreshed at 4/5")
    refreshes = [h for h in heads if h[1].endswith("/link")]
    assert len(refreshes) == 1
    assert refreshes[0][0] == "post"
    assert f"authorization: bearer {TOKEN}" in refreshes[0][2]
    assert heads.index(refreshes[0]) < heads.index(_streams(heads)[0])
    assert all("\r\nauthorization:" not in h[2] for h in _streams(heads))


def test_rl2_b_an_expired_link_is_refreshed_then_the_resumption_succeeds(
    node: str, live_server: str, tmp_path: Path
) -> None:
    """[RL2-b]: GET with the expired link (refused), POST …/link with the bearer, GET with the new link."""
    heads, _ = _run(node, live_server, tmp_path, "[RL2-b] a resumption refused 401 token_expired")
    order = [
        (method, "link" if target.endswith("/link") else target.split("?")[0].rsplit("/", 1)[-1])
        for method, target, _ in heads
    ]
    assert order[:4] == [("post", "run"), ("get", "stream"), ("post", "link"), ("get", "stream")], order
    first, second = _streams(heads)[:2]
    assert first[1] != second[1]  # another token
    assert all("\r\nauthorization:" not in h[2] for h in (first, second))


def test_rl2_b_a_forged_link_is_refused_and_not_refreshed(node: str, live_server: str, tmp_path: Path) -> None:
    """[RL2-b]: only ``token_expired`` refreshes; a link the server did not sign ends the reading with its 401."""
    heads, _ = _run(node, live_server, tmp_path, "[RL2-b] a link the server calls forged")
    assert not [h for h in heads if h[1].endswith("/link")]
    assert len(_streams(heads)) == 1


def test_rl2_a_without_a_link_the_resumption_goes_with_the_bearer(node: str, live_server: str, tmp_path: Path) -> None:
    """[RL2-a]: no ``X-Resume-Token`` (the node side strips it): the resumption is as before links, with the bearer."""
    heads, _ = _run(node, live_server, tmp_path, "[RL2-a] with no link header")
    resumed = _streams(heads)
    assert resumed
    assert all("?token=" not in h[1] and f"authorization: bearer {TOKEN}" in h[2] for h in resumed)
