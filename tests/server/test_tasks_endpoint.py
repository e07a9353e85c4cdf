"""``GET /agents/{agent_id}/tasks`` on one ``agent-ref serve --jwt-secret-file`` with SQLite (spec agent-ref [BJ1-b]).

Alice's run starts an in-process background task (``--subagents demo``); the endpoint reports
it ended with its result, for alice; bob's request is the 404 of an agent that does not
exist; a query outside the allowed values is a 400 naming the parameter. The run's stream is
checked by the strict validator. The PostgreSQL, two-process side (a task still running,
then joined) is ``tests/scaleout/test_bg_join_two_processes.py``.
"""

from __future__ import annotations

import secrets
from typing import TYPE_CHECKING

import httpx2
import pytest

from cli_support import start_serve, stop_serve
from principals_support import AUDIENCE, ISSUER, Served, absent_id, as_absent
from validating import assert_valid

if TYPE_CHECKING:
    from collections.abc import Iterator


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """``agent-ref serve --jwt-secret-file --subagents demo`` on an SQLite file."""
    tmp = tmp_path_factory.mktemp("tasks")
    secret = secrets.token_hex(32).encode()
    (tmp / "jwt.secret").write_bytes(secret)
    args = ("--jwt-secret-file", str(tmp / "jwt.secret"), "--jwt-issuer", ISSUER, "--jwt-audience", AUDIENCE)
    proc, host, port = start_serve(tmp, *args, "--subagents", "demo")
    try:
        yield Served(f"http://{host}:{port}", secret)
    finally:
        stop_serve(proc)


@pytest.fixture(scope="module")
def alices(served: Served) -> str:
    """An agent of alice's whose run started one background task."""
    answer = served.call("POST", "/agent/run", "alice", json={"prompt": "Research tides in the background"})
    assert answer.status_code == 200, answer.text
    assert_valid(answer.content)
    return answer.headers["x-agent-uuid"]


def test_bj1_b_the_owner_sees_the_ended_task_with_its_result(served: Served, alices: str) -> None:
    """An in-process task is reported as recorded: ended, its result, not on a queue; wait=1 answers at once [BJ1-b]."""
    for path in (f"/agents/{alices}/tasks", f"/agents/{alices}/tasks?wait=1&timeout=30"):
        answer = served.call("GET", path, "alice")
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert body["agent_uuid"] == alices
        assert body["running"] == 0
        (task,) = body["tasks"]
        assert task["task_id"].startswith("task_")
        assert (task["status"], task["queue"]) == ("completed", False)
        assert task["result"].startswith("Findings on tides")


def test_bj1_b_another_principal_gets_the_404_of_a_missing_agent(served: Served, alices: str) -> None:
    """Bob asking for alice's agent's tasks is answered exactly as for an agent that does not exist [BJ1-b]."""
    gone = absent_id()
    for query in ("", "?wait=1&timeout=1"):
        refused = served.call("GET", f"/agents/{alices}/tasks{query}", "bob")
        assert refused.status_code == 404
        assert refused.json()["error"]["type"] == "unknown_agent"
        as_absent(refused, alices, served.call("GET", f"/agents/{gone}/tasks{query}", "bob"), gone)


@pytest.mark.parametrize(
    ("query", "field", "says"),
    [
        ("?wait=2", "wait", "wait must be 1 or 0, not '2'"),
        ("?wait=1&timeout=0", "timeout", "timeout must be a number of seconds above 0, at most 30"),
        ("?wait=1&timeout=31", "timeout", "timeout must be a number of seconds above 0, at most 30"),
        ("?wait=1&timeout=soon", "timeout", "timeout must be a number of seconds above 0, at most 30"),
        ("?wait=1&timeout=nan", "timeout", "timeout must be a number of seconds above 0, at most 30"),
        ("?timeout=5", "timeout", "timeout needs wait=1"),
    ],
)
def test_bj1_b_a_bad_query_is_a_400_naming_the_parameter(
    served: Served, alices: str, query: str, field: str, says: str
) -> None:
    """Each bad ``wait`` or ``timeout`` is refused before anything is read [BJ1-b]."""
    answer = served.call("GET", f"/agents/{alices}/tasks{query}", "alice")
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert (error["type"], error["field"], error["message"]) == ("invalid_request", field, says)


def test_bj1_b_no_token_is_401(served: Served, alices: str) -> None:
    """The endpoint is behind the app's guard like every other [BJ1-b]."""
    with httpx2.Client(timeout=30) as client:
        assert client.get(f"{served.base}/agents/{alices}/tasks").status_code == 401


def test_bj1_b_an_admin_reads_anyones_tasks(served: Served, alices: str) -> None:
    """A token with the admin claim reads alice's agent's tasks, as every endpoint lets an admin [BJ1-b]."""
    with httpx2.Client(timeout=30) as client:
        answer = client.get(f"{served.base}/agents/{alices}/tasks", headers=served.headers("root", admin=True))
    assert answer.status_code == 200, answer.text
    assert [t["status"] for t in answer.json()["tasks"]] == ["completed"]
