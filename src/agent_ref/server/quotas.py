"""Quotas per principal of ``agent-ref serve``: runs in flight, messages a minute, spend a day (spec server §QU).

Owns: the limits (``Quotas``), the per-process state that counts messages and the run
starts not yet visible in the store (``QuotaState``, sans-I/O: the caller passes the
clock and what the store holds), the 429 they answer (``QuotaExceeded``), and
``admit_run``, which reads the store for the fleet's view. Does not own: who the
principal is (``owners.principal_of``) or which agents are theirs (``owner_of``).

Nothing is half-done: every check runs before the run is created or the message queued
(spec server [QU1-a]).
"""

from __future__ import annotations

import collections
import contextlib
import math
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from envelope._extras import import_failed

try:
    import starlette  # noqa: F401  # the module's own name in the error when the server extra is missing
except ModuleNotFoundError as exc:  # spec cli [C10-c]: one line naming the extra, not the module
    raise import_failed(exc, __name__, "server") from None  # pragma: no cover  # in a subprocess (tests/install)

from .http import _Refused
from .owners import principal_of, runs_of

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response

    from ..store.core import AgentSummary, Store

__all__ = [
    "DAY_SECONDS",
    "WINDOW_SECONDS",
    "QuotaExceeded",
    "QuotaState",
    "Quotas",
    "admit_run",
    "owner_of",
    "rate_limited",
]

#: The window of ``messages_per_minute`` (spec server [QU1-c]).
WINDOW_SECONDS: Final = 60.0
#: The budget's period: a UTC day (spec server [QU1-d]).
DAY_SECONDS: Final = 86_400
#: Seconds a client is told to wait when a run must end first (spec server [QU1-b]): about a run's step.
RUN_RETRY_AFTER: Final = 5


@dataclass(frozen=True, slots=True)
class Quotas:
    """The limits, each per principal; ``None``: no limit.

    Attributes:
        max_runs_in_flight: runs working at once (``--max-runs-in-flight``).
        messages_per_minute: messages to working runs in any 60 s (``--messages-per-minute``).
        budget_usd: US dollars the principal's finished runs may cost in a UTC day (``--budget-usd``).
    """

    max_runs_in_flight: int | None = None
    messages_per_minute: int | None = None
    budget_usd: float | None = None


class QuotaExceeded(_Refused):
    """``429 quota_exceeded`` naming the quota, with ``Retry-After`` (spec server [QU1-a])."""

    def __init__(self, quota: str, limit: float, used: float, retry_after: int, message: str) -> None:
        """See the class docstring; ``retry_after`` is whole seconds, at least 1."""
        self.quota = quota
        self.retry_after = max(1, retry_after)
        super().__init__(429, "quota_exceeded", message, quota=quota, limit=limit, used=used)

    def response(self) -> JSONResponse:
        """The JSON refusal with its ``Retry-After``."""
        answer = super().response()
        answer.headers["Retry-After"] = str(self.retry_after)
        return answer


@dataclass(slots=True)
class QuotaState:
    """What one process counts: messages of the last minute, run starts not yet in the store.

    Sans-I/O: ``now`` is passed in; the store's counts are the caller's.
    """

    quotas: Quotas = field(default_factory=Quotas)
    messages: dict[str, collections.deque[float]] = field(default_factory=dict)
    starting: dict[str, int] = field(default_factory=dict)

    def take_message(self, principal: str, now: float) -> None:
        """Count one message of ``principal`` at ``now``, or refuse it (then nothing is counted).

        Raises:
            QuotaExceeded: ``messages_per_minute`` messages in the last ``WINDOW_SECONDS``.
        """
        limit = self.quotas.messages_per_minute
        if limit is None:
            return
        sent = self.messages.setdefault(principal, collections.deque())
        while sent and sent[0] <= now - WINDOW_SECONDS:
            sent.popleft()
        if len(sent) >= limit:
            wait = math.ceil(sent[0] + WINDOW_SECONDS - now)
            raise QuotaExceeded(
                "messages_per_minute",
                limit,
                len(sent),
                wait,
                f"{principal}: {len(sent)} messages in the last minute, the quota is {limit}; try again in {wait} s",
            )
        sent.append(now)

    def give_back_message(self, principal: str, now: float) -> None:
        """Uncount the message taken at ``now`` that was not queued after all (spec server [QU1-a])."""
        sent = self.messages.get(principal)
        if sent and now in sent:
            sent.remove(now)

    def check_runs(self, principal: str, in_store: int) -> None:
        """Refuse a new run when ``in_store`` working runs plus the starts here reach the quota.

        Raises:
            QuotaExceeded: ``max_runs_in_flight`` reached.
        """
        limit = self.quotas.max_runs_in_flight
        if limit is None:
            return
        used = in_store + self.starting.get(principal, 0)
        if used >= limit:
            raise QuotaExceeded(
                "max_runs_in_flight",
                limit,
                used,
                RUN_RETRY_AFTER,
                f"{principal}: {used} runs in flight, the quota is {limit}; let one end (or stop it) first",
            )

    def check_budget(self, principal: str, spent: float, now: float) -> None:
        """Refuse a run when ``spent`` today (UTC) reaches the budget; ``Retry-After`` is the next UTC midnight.

        Raises:
            QuotaExceeded: ``budget_usd`` reached.
        """
        limit = self.quotas.budget_usd
        if limit is None or spent < limit:
            return
        wait = math.ceil(day_start(now) + DAY_SECONDS - now)
        raise QuotaExceeded(
            "budget_usd",
            limit,
            round(spent, 6),
            wait,
            f"{principal}: runs cost ${spent:.4f} today (UTC), the budget is ${limit:.4f}; it renews at midnight UTC",
        )

    @contextlib.contextmanager
    def start(self, principal: str) -> Iterator[None]:
        """Hold a place for a run being started until the store shows it (the caller's block)."""
        self.starting[principal] = self.starting.get(principal, 0) + 1
        try:
            yield
        finally:
            left = self.starting[principal] - 1
            if left:
                self.starting[principal] = left
            else:
                del self.starting[principal]


def day_start(now: float) -> float:
    """The start of ``now``'s UTC day (Unix seconds)."""
    return now - (now % DAY_SECONDS)


def owner_of(summary: AgentSummary, default: str) -> str:
    """The principal an agent belongs to: its recorded owner when the store keeps one, else ``default``.

    The single-user modes record none: every agent is the one principal's.
    """
    owner = getattr(summary, "principal", None)
    return owner if isinstance(owner, str) and owner else default


@contextlib.asynccontextmanager
async def admit_run(
    state: QuotaState, store: Store, principal: str, *, default: str, clock: Callable[[], float] = time.time
) -> AsyncIterator[None]:
    """Check the run quotas of ``principal`` against the store, then hold its place while the block starts it.

    The store is the fleet's view (spec server [QU1-b]): a run in flight is an agent whose
    status is ``running`` under a live lease, in any process; the spend is the cost the
    store recorded of the principal's runs finished today.

    Raises:
        QuotaExceeded: before the block runs, so nothing is created.
    """
    quotas = state.quotas
    if quotas.max_runs_in_flight is None and quotas.budget_usd is None:
        yield
        return
    now = clock()
    mine = [s for s in await store.agents() if owner_of(s, default) == principal]
    state.check_runs(principal, sum(1 for s in mine if s.lease_alive(now)))
    if quotas.budget_usd is not None:
        since = day_start(now)
        spent = 0.0
        every = await runs_of(store, [s.agent_uuid for s in mine])  # spec server [OW3-a]: one query
        for records in every.values():
            spent += sum(r.cost_usd or 0.0 for r in records if r.finished_at >= since)
        state.check_budget(principal, spent, now)
    with state.start(principal):
        yield


def rate_limited(
    state: QuotaState | None,
    handler: Callable[[Request], Awaitable[Response]],
    *,
    clock: Callable[[], float] = time.time,
) -> Callable[[Request], Awaitable[Response]]:
    """``handler`` (the messages endpoint) behind ``messages_per_minute``; ``handler`` itself without a state.

    The message is counted before ``handler`` runs (429 before anything is read or queued,
    spec server [QU1-c]) and given back when ``handler`` refuses it ([QU1-a]).
    """
    if state is None:
        return handler

    async def limited(request: Request) -> Response:
        principal, now = principal_of(request).sub, clock()
        state.take_message(principal, now)
        try:
            return await handler(request)
        except BaseException:
            state.give_back_message(principal, now)
            raise

    return limited
