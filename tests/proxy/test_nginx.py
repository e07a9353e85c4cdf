"""``examples/fastapi_app.py`` behind Debian's nginx, configured as ``docs/deployment.md`` says (issue 39 item 6).

nginx keeps its default buffering settings; the location block is the page's own. Each
test starts the example and nginx as processes, as a user would, and talks to nginx
only (but the one that shows what the app trusts when reached directly): the first event
arrives while the model is still held back (an ordering: the model waits for a file the
test writes only after it has read that event), a ``Last-Event-ID`` reconnect gets the
rest once, a resume link's ``?token=`` goes through intact, and ``Host`` and
``X-Forwarded-*`` arrive as documented. Every stream read passes the strict validator.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import httpx2
import pytest
from examples.fastapi_app import DEMO_USERS, fake_model

from envelope.delivery import DONE_LINE
from proxy.nginx_support import Example, Proxy, documented_location, nginx_binary, start_example, start_nginx, stop
from server_support import read_events
from validating import assert_valid

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

    from envelope import SSEEvent

ALICE, BOB = ({"Authorization": f"Bearer {token}"} for token in DEMO_USERS)
PROMPT = "hello"


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[Callable[..., tuple[Example, Proxy]]]:
    """Start the example and nginx in front of it (the documented block unless told); stop both after."""
    started: list[Example | Proxy] = []

    def start(*, location: str | None = None, hold_until: Path | None = None) -> tuple[Example, Proxy]:
        nginx_binary()  # skip (or fail, in CI) before starting anything
        example = start_example(tmp_path / "app", hold_until=hold_until)
        started.append(example)
        proxy = start_nginx(tmp_path / "nginx", example.base, location or documented_location())
        started.append(proxy)
        return example, proxy

    yield start
    for part in reversed(started):
        stop(part.proc)


def _start_run(base: str, headers: dict[str, str] | None = None) -> dict[str, Any]:
    answer = httpx2.post(f"{base}/chat", params={"prompt": PROMPT}, headers=headers or ALICE, timeout=30)
    assert answer.status_code == 201, answer.text
    link: dict[str, Any] = answer.json()
    return link


def _whole_events(raw: bytes) -> list[SSEEvent]:
    """The events of ``raw`` that are complete (up to its last blank line)."""
    end = raw.rfind(b"\n\n")
    return read_events(raw[: end + 2]) if end >= 0 else []


def _joined(events: list[SSEEvent]) -> bytes:
    return b"".join(f"id: {e.id}\ndata: {e.data}\n\n".encode() for e in events)


def _check_run(run: str, events: list[SSEEvent]) -> None:
    """Every line of the run once, in order, ids contiguous, strictly valid."""
    assert [e.id for e in events] == [f"{run}:0:{n}" for n in range(len(events))]
    assert [e.data.encode() for e in events] == list(fake_model(PROMPT, run))
    assert_valid(_joined(events))


def test_the_first_event_arrives_before_the_run_ends(
    stack: Callable[..., tuple[Example, Proxy]], tmp_path: Path
) -> None:
    """Held after its first line, the model cannot end; the first event is read through nginx meanwhile."""
    location = documented_location()
    release = tmp_path / "release"
    example, proxy = stack(location=location, hold_until=release)
    link = _start_run(proxy.base)
    run = link["run_id"]
    got = b""
    with (
        httpx2.Client(timeout=httpx2.Timeout(30)) as client,
        client.stream("GET", proxy.base + link["stream"]) as answer,
    ):
        assert answer.status_code == 200
        assert answer.headers["content-type"].startswith("text/event-stream")
        assert "x-accel-buffering" not in answer.headers  # nginx consumes it: a proxy in front never sees it
        chunks = answer.iter_bytes()
        while not _whole_events(got):
            got += next(chunks)  # a buffering proxy would hold this until the end, which cannot come
        assert [e.id for e in _whole_events(got)] == [f"{run}:0:0"]
        journal = (example.journal_dir / f"{run}.0.log").read_bytes()
        assert not release.exists()
        assert not journal.endswith(DONE_LINE + b"\n")  # the run has not ended: the model is held
        release.touch()
        for chunk in chunks:
            got += chunk
    _check_run(run, read_events(got))
    assert_valid(got)


def test_a_last_event_id_reconnect_through_nginx(stack: Callable[..., tuple[Example, Proxy]]) -> None:
    """Read 3 events, drop, reconnect through nginx with Last-Event-ID: the rest, once; then 204."""
    _, proxy = stack()
    link = _start_run(proxy.base)
    got = b""
    with httpx2.Client(timeout=30) as client, client.stream("GET", proxy.base + link["stream"]) as answer:
        assert answer.status_code == 200
        for chunk in answer.iter_bytes():
            got += chunk
            if len(_whole_events(got)) >= 3:
                break
    first = _whole_events(got)[:3]
    with httpx2.Client(timeout=30) as client:
        rest = client.get(proxy.base + link["stream"], headers={"Last-Event-ID": first[-1].id})
        assert rest.status_code == 200, rest.text
        events = [*first, *read_events(rest.content)]
        _check_run(link["run_id"], events)
        done = client.get(proxy.base + link["stream"], headers={"Last-Event-ID": events[-1].id})
        assert done.status_code == 204


def test_a_resume_link_through_nginx(stack: Callable[..., tuple[Example, Proxy]]) -> None:
    """[D7.2-a] through nginx: the link's query string arrives intact; altered, missing or another run's, refused."""
    _, proxy = stack()
    alice, bob = _start_run(proxy.base, ALICE), _start_run(proxy.base, BOB)
    token = alice["stream"].split("?token=")[1]
    with httpx2.Client(timeout=30) as client:
        whole = client.get(proxy.base + alice["stream"])
        assert whole.status_code == 200
        assert_valid(whole.content)
        _check_run(alice["run_id"], read_events(whole.content))
        altered = token[:-1] + ("A" if token[-1] != "A" else "B")
        bad = client.get(f"{proxy.base}/streams/{alice['run_id']}", params={"token": altered})
        assert (bad.status_code, bad.json()["error"]["type"]) == (401, "token_bad_signature")
        missing = client.get(f"{proxy.base}/streams/{alice['run_id']}")
        assert (missing.status_code, missing.json()["error"]["type"]) == (401, "token_missing")
        on_bobs = client.get(f"{proxy.base}/streams/{bob['run_id']}", params={"token": token})
        assert (on_bobs.status_code, on_bobs.json()["error"]["type"]) == (404, "unknown_run")
        fresh = client.post(f"{proxy.base}/chat/{alice['run_id']}/link", headers=ALICE)
        assert fresh.status_code == 200
        again = client.get(proxy.base + fresh.json()["stream"])
        assert again.status_code == 200
        assert again.content == whole.content


def test_host_and_forwarded_headers_as_documented(stack: Callable[..., tuple[Example, Proxy]]) -> None:
    """``Host $http_host`` and ``X-Forwarded-Proto $scheme``: the app's links name the proxy; a client's proto is replaced.

    Reached directly on loopback, the app believes ``X-Forwarded-Proto`` (uvicorn trusts
    127.0.0.1): why docs/deployment.md binds it to loopback behind the proxy.
    """
    example, proxy = stack()
    plain = _start_run(proxy.base)
    assert plain["url"] == proxy.base + plain["stream"]  # the host and port the client used, not the app's
    spoofed = _start_run(proxy.base, {**ALICE, "Host": "chat.example.test:8443", "X-Forwarded-Proto": "https"})
    assert spoofed["url"] == "http://chat.example.test:8443" + spoofed["stream"]
    direct = _start_run(example.base, {**ALICE, "X-Forwarded-Proto": "https"})
    assert direct["url"] == "https://" + example.base.removeprefix("http://") + direct["stream"]


def test_a_missing_nginx_skips_loudly_or_fails_in_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without nginx: a skip whose reason is a loud headline (tests/skip_summary.py); with CI=true, a failure."""
    monkeypatch.setattr("shutil.which", lambda _name: None)
    monkeypatch.setattr("os.path.exists", lambda _path: False)
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match=r"^PROXY TESTS DID NOT RUN: nginx is not installed"):
        nginx_binary()
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI must run the proxy tests"):
        nginx_binary()
