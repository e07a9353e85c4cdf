"""``agent-ref serve``: the agent server's command line (spec ``spec/cli-agent-ref.md`` RC9).

Owns: the ``serve`` subcommand's arguments (the listening address, the token, the
allowed ``Host`` names, keep-alives, ``--pace``; the agent's options are ``run``'s, from
``cli/flags.py``), checking them before anything listens, and running the app
(``server.create_app`` under ``server.serve``); ``python -m agent_ref.cli.serve`` is the
same command; ``PacedModel``, the model ``--pace`` makes. Does not own: the server
(``server/app.py``), the agent options (``cli/flags.py``).

The parser is built with ``agent-ref``'s for ``--help``: this module imports neither
Starlette nor uvicorn nor the SDK until ``serve_main`` runs.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import sys
from typing import TYPE_CHECKING, Any, Final

from ..defaults import TOKEN_ENV
from ..errors import AgentRefError
from .flags import (
    CliError,
    OneLineParser,
    add_agent_options,
    add_store_options,
    agent_config,
    check_db,
    formatter,
    model_factory,
)

if TYPE_CHECKING:
    import argparse
    from collections.abc import AsyncIterator, Awaitable, Callable, Mapping

    from ..models.core import Model
    from ..server.auth import JwtVerifier
    from ..server.streams import Journal
    from ..store.core import Store

__all__ = ["PacedModel", "add_serve_command", "jwt_verifier", "main", "resolve_token", "serve_main"]
#: The largest TCP port.
_MAX_PORT: Final = 65535

_DESCRIPTION: Final = (
    "Serve the reference agent over HTTP: POST /agent/run streams a run as SSE envelopes,\n"
    "POST /agent/tool_results resumes a paused one, GET /agent/runs/RUN_ID/stream replays and\n"
    "follows one (Last-Event-ID), and / is a web page that shows the runs, subagents nested\n"
    "under the tool call that spawned them. The agent takes the same options as `agent-ref run`\n"
    "(model, subagents, memory, compaction, loop limit); runs are stored in --db and journaled\n"
    "beside it (<db>.streams/), so a restarted server replays and closes what it was sending.\n\n"
    "Bound to a loopback address (the default) only this machine can reach it. Bound beyond\n"
    "loopback, give it --token (every /agent/... request then needs Authorization: Bearer) and\n"
    "--allowed-host with each name clients use, or anyone who reaches the port runs the agent."
)
_EPILOG: Final = (
    "examples:\n"
    "  agent-ref serve                                   # http://127.0.0.1:8000/, offline model\n"
    "  agent-ref serve --subagents demo --memory ./memories --compact-threshold 4000\n"
    "  agent-ref serve --model --port 8080               # Claude (ANTHROPIC_API_KEY)\n"
    "  agent-ref serve --replay fixtures/corpus/anthropic_events_0.json\n"
    "  AGENT_REF_TOKEN=s3cret agent-ref serve --host 0.0.0.0 --allowed-host agents.example.org\n"
    "  agent-ref serve --db postgresql://user@dbhost/agents   # several processes, one database\n"
    "  agent-ref serve --jwks-file jwks.json --jwt-issuer https://id.example.org   # users by JWT\n"
    "  agent-ref serve --otlp http://127.0.0.1:4318 --memory-store ./notes   # traces to a collector; memory\n\n"
    "exit status: 0 stopped; 2 unusable arguments, database or address; 130 stopped by Ctrl-C."
)


def add_serve_command(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``serve`` to ``agent-ref``'s subcommands; the caller dispatches it to ``serve_main``.

    Args:
        subparsers: what ``ArgumentParser.add_subparsers`` returned.

    Returns:
        The new subparser.
    """
    p: argparse.ArgumentParser = subparsers.add_parser(
        "serve",
        formatter_class=formatter,
        help="serve the agent over HTTP (SSE) with a web page",
        description=_DESCRIPTION,
        epilog=_EPILOG,
    )
    _serve_arguments(p)
    return p


def _serve_arguments(p: argparse.ArgumentParser) -> None:
    server = p.add_argument_group("server")
    server.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    server.add_argument("--port", type=int, default=8000, help="port, 0 to 65535 (default: 8000; 0 picks a free one)")
    server.add_argument(
        "--token", default=None, help=f"require this bearer token on /agent/... (default: ${TOKEN_ENV} if set)"
    )
    server.add_argument(
        "--allowed-host",
        action="append",
        default=None,
        metavar="HOST",
        help="a Host name clients may use besides the loopback names and the --host address, repeatable; "
        "others are refused with 421 (spec server §5.3-a; * allows any)",
    )
    server.add_argument(
        "--keepalive",
        type=float,
        default=15.0,
        metavar="SECONDS",
        help="seconds of silence before a keep-alive comment (default: 15)",
    )
    server.add_argument(
        "--pace",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="wait this long before each event the model streams (about one line each), so that a person can "
        "watch a run of the offline model and press Stop; meant for the offline model and --replay "
        "(default: 0, no wait; spec server PC-a)",
    )
    server.add_argument(
        "--otlp",
        default=None,
        metavar="URL",
        help="export OpenTelemetry traces of the runs to this OTLP/HTTP collector, such as http://127.0.0.1:4318 "
        "(/v1/traces is added to a bare URL; needs the otel extra; default: none)",
    )
    _jwt_arguments(server)
    _bounds_arguments(p)
    _access_arguments(p)
    add_agent_options(p)
    add_store_options(p)


def _jwt_arguments(server: Any) -> None:
    """``--jwt-secret-file``, ``--jwks-file``, ``--jwt-issuer``, ``--jwt-audience`` (spec server §PR1, RC13-a)."""
    server.add_argument(
        "--jwt-secret-file",
        default=None,
        metavar="PATH",
        help="bearer tokens are HS256 JWTs signed with the secret in PATH (32 bytes or more); "
        "each token's sub is a user who sees only their own runs (not with --token)",
    )
    server.add_argument(
        "--jwks-file",
        default=None,
        metavar="PATH",
        help="bearer tokens are RS256/ES256 JWTs signed by a key of the JWKS document in PATH (public keys)",
    )
    server.add_argument("--jwt-issuer", default=None, metavar="ISS", help="tokens must carry this iss (default: any)")
    server.add_argument(
        "--jwt-audience", default=None, metavar="AUD", help="tokens must name this aud (default: no aud check)"
    )


def jwt_verifier(args: argparse.Namespace, environ: Mapping[str, str]) -> JwtVerifier | None:
    """The verifier of the JWT flags, its keys read now (spec server [RC13-a]); ``None`` without them.

    Raises:
        CliError: both key flags, a JWT flag with ``--token`` (or ``$AGENT_REF_TOKEN``), an
            issuer or audience without a key flag, or a key file that cannot be used.
    """
    from ..server.auth import JwtVerifier, KeyFileError

    secret, jwks = args.jwt_secret_file, args.jwks_file
    if secret is None and jwks is None:
        for flag, value in (("--jwt-issuer", args.jwt_issuer), ("--jwt-audience", args.jwt_audience)):
            if value is not None:
                raise CliError(
                    flag, "checks a JWT claim, but no JWT key was given", "add --jwt-secret-file or --jwks-file"
                )
        return None
    flag = "--jwt-secret-file" if secret is not None else "--jwks-file"
    if secret is not None and jwks is not None:
        raise CliError(flag, "--jwt-secret-file and --jwks-file were both given", "pass one of them")
    if resolve_token(args.token, environ) is not None:
        given = "--token" if args.token else f"${TOKEN_ENV}"
        raise CliError(flag, f"cannot be used with {given} (one shared user)", f"drop {given} or {flag}")
    try:
        if secret is not None:
            return JwtVerifier.from_secret_file(secret, issuer=args.jwt_issuer, audience=args.jwt_audience)
        return JwtVerifier.from_jwks_file(jwks, issuer=args.jwt_issuer, audience=args.jwt_audience)
    except KeyFileError as exc:
        raise CliError(flag, str(exc), "give the file of the keys your tokens are signed with") from None


def _bounds_arguments(p: argparse.ArgumentParser) -> None:
    limits = p.add_argument_group("bounds (spec server IB1, SL1)")
    limits.add_argument(
        "--inbox-messages",
        type=int,
        default=32,
        metavar="N",
        help="messages that may wait for a working run's next step; past it a message is 429 (default: 32)",
    )
    limits.add_argument(
        "--inbox-bytes",
        type=int,
        default=256 * 1024,
        metavar="BYTES",
        help="bytes of text that may wait for a run's next step, in all; past it 429 (default: 262144)",
    )
    limits.add_argument(
        "--inbox-message-bytes",
        type=int,
        default=64 * 1024,
        metavar="BYTES",
        help="bytes of text of one message; past it 413 (default: 65536)",
    )
    limits.add_argument(
        "--storage-timeout",
        type=float,
        default=5.0,
        metavar="SECONDS",
        help="seconds a request waits for the database or the journal before it is answered 503 (default: 5)",
    )


def _access_arguments(p: argparse.ArgumentParser) -> None:
    access = p.add_argument_group("resume links and quotas per principal (spec server RL1, QU1)")
    access.add_argument(
        "--link-key-file",
        default=None,
        metavar="PATH",
        help="keys that sign resume links, one a line (16+ bytes), the first signs, all are accepted; give every "
        "process of a fleet the same file (default: a key derived from --token; no links without either)",
    )
    access.add_argument(
        "--max-runs-in-flight", type=int, default=None, metavar="N", help="runs working at once (default: no limit)"
    )
    access.add_argument(
        "--messages-per-minute",
        type=int,
        default=None,
        metavar="N",
        help="messages to working runs in any minute, per process (default: no limit)",
    )
    access.add_argument(
        "--budget-usd",
        type=float,
        default=None,
        metavar="USD",
        help="what finished runs may cost in a UTC day; past it new runs are 429 (default: no limit)",
    )


def _quotas(args: argparse.Namespace) -> Any:
    """The quotas of the checked arguments (spec server [QU1-a])."""
    from ..server.quotas import Quotas

    return Quotas(args.max_runs_in_flight, args.messages_per_minute, args.budget_usd)


def resolve_token(given: str | None, environ: Mapping[str, str]) -> str | None:
    """The bearer token: ``--token`` if given, else ``$AGENT_REF_TOKEN``; empty means none (spec server §5.2-a)."""
    token = given if given is not None else environ.get(TOKEN_ENV, "")
    return token or None


def _check(args: argparse.Namespace) -> None:
    """Refuse what cannot work before anything listens or is stored (spec RC9-d).

    Raises:
        CliError: naming the flag, the file or the model.
    """
    if not 0 <= args.port <= _MAX_PORT:
        raise CliError("--port", f"{args.port} is not a port", f"pass 0 to {_MAX_PORT} (0 picks a free one)")
    if args.keepalive <= 0:
        raise CliError("--keepalive", f"{args.keepalive:g} is not a number of seconds", "pass a number above 0")
    if not (math.isfinite(args.pace) and args.pace >= 0):
        raise CliError("--pace", f"{args.pace:g} is not a number of seconds", "pass 0 (no wait) or more")
    for flag, value in (
        ("--inbox-messages", args.inbox_messages),
        ("--inbox-bytes", args.inbox_bytes),
        ("--inbox-message-bytes", args.inbox_message_bytes),
    ):
        if value < 1:
            raise CliError(flag, f"{value} is not a bound", "pass 1 or more")
    if args.inbox_message_bytes > args.inbox_bytes:
        raise CliError(
            "--inbox-message-bytes",
            f"{args.inbox_message_bytes} is more than --inbox-bytes {args.inbox_bytes}",
            "a message must fit in the inbox: pass at most --inbox-bytes",
        )
    for flag, count in (
        ("--max-runs-in-flight", args.max_runs_in_flight),
        ("--messages-per-minute", args.messages_per_minute),
    ):
        if count is not None and count < 1:
            raise CliError(flag, f"{count} is not a quota", "pass 1 or more (leave it out for no limit)")
    if args.budget_usd is not None and not (math.isfinite(args.budget_usd) and args.budget_usd > 0):
        raise CliError("--budget-usd", f"{args.budget_usd:g} is not a budget", "pass dollars above 0")
    if not (math.isfinite(args.storage_timeout) and args.storage_timeout > 0):
        raise CliError(
            "--storage-timeout", f"{args.storage_timeout:g} is not a number of seconds", "pass a number above 0"
        )
    check_db(args.db, must_exist=False)
    from ..server.links import LinkKeyError, link_keys

    try:  # spec server [RL1-c]: read once, before anything listens
        args.link_keys = link_keys(args.link_key_file, resolve_token(args.token, os.environ))
    except LinkKeyError as exc:
        raise CliError("--link-key-file", str(exc), "one key of 16 or more bytes a line; the first signs") from None


def serve_main(args: argparse.Namespace) -> int:
    """Run ``agent-ref serve`` with parsed arguments; returns the exit status.

    The journal lives beside the database (``<db>.streams/``), so a restarted server
    replays and closes what a killed one was sending (spec server §3.3-b). Every
    argument is checked, and one agent made with the options, before the port is bound:
    an error is one line, exit 2, never a traceback (spec RC2-a, RC9-d).
    """
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="agent-ref: %(message)s")
    try:
        _check(args)
        config = agent_config(args)
        factory = paced(model_factory(args), args.pace)
        _try_agent(factory, config)
        provider = _tracing(args.otlp)
        verifier = jwt_verifier(args, os.environ)
        if verifier is not None:  # spec server [RL3-a] [RL3-b]: the link key of a JWT server
            from ..server.links import jwt_link_keys

            args.link_keys, links_off = jwt_link_keys(args.link_keys, verifier)
            if links_off is not None:
                sys.stderr.write(links_off + "\n")
    except CliError as exc:
        sys.stderr.write(f"{exc}\n")
        return 2
    except AgentRefError as exc:  # the agent refuses the options (a ConfigError: a missing key, a budget...)
        sys.stderr.write(f"agent-ref serve: error: {exc}\n")
        return 2
    if not _hosts_usable(args):
        return 2
    try:
        return _listen(args, _app(args, factory, config, verifier))
    finally:
        if provider is not None:
            provider.shutdown()  # spec RC12-b: the spans still batched are sent


class PacedModel:
    """A model whose stream waits ``seconds`` before each event (``agent-ref serve --pace``, spec server PC-a).

    The offline model answers in a few milliseconds; paced, its answer arrives as a
    model's does, so that a person can watch the stream and press Stop. Everything but
    the stream is the wrapped model's (its name, its check of request options).

    Args:
        model: the model to pace.
        seconds: the wait before each event, above 0.
        sleep: how to wait (``asyncio.sleep``; a test passes its own).
    """

    def __init__(
        self, model: Model, seconds: float, *, sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    ) -> None:
        """See the class docstring."""
        self.model = model
        self.name = model.name
        self.seconds = seconds
        self._sleep = sleep

    def __getattr__(self, name: str) -> Any:
        # check_request_options and the like stay the wrapped model's
        return getattr(self.model, name)

    async def stream(self, params: dict[str, Any]) -> AsyncIterator[Any]:
        """See ``Model.stream``: the wrapped model's events, each after a wait of ``seconds``."""
        async for event in self.model.stream(params):
            await self._sleep(self.seconds)
            yield event


def paced(factory: Callable[[], Model], seconds: float) -> Callable[[], Model]:
    """``factory``'s models paced at ``seconds`` per event; ``factory`` itself for 0."""
    if seconds <= 0:
        return factory
    return lambda: PacedModel(factory(), seconds)


def _tracing(url: str | None) -> Any:
    """``--otlp URL``: the SDK set up to export there (spec RC12-b); ``None`` without the flag.

    Raises:
        CliError: not an http(s) URL, or the ``otel`` extra missing (one line naming it).
    """
    if url is None:
        return None
    from envelope._extras import MissingExtraError

    from ..errors import ConfigError
    from ..tracing import configure_tracing

    try:
        return configure_tracing(url, service_name="agent-ref")
    except MissingExtraError as exc:
        raise CliError("agent-ref serve", str(exc)) from None
    except ConfigError as exc:
        what = str(exc).removeprefix("--otlp: ")
        raise CliError("--otlp", what, "pass the collector's URL, such as http://127.0.0.1:4318") from None


def _hosts_usable(args: argparse.Namespace) -> bool:
    """Whether ``--host`` and ``--allowed-host`` are names the server can check; if not, one line on stderr."""
    from ..server.app import _allowed

    # The server's own reading of a Host name (spec server §5.3-a); serve() adds both.
    for flag, names, todo in (
        ("--host", [args.host], "pass the address to listen on, such as 127.0.0.1 or 0.0.0.0"),
        ("--allowed-host", args.allowed_host or [], "pass a host name or address, or * for any"),
    ):
        try:
            _allowed(names)
        except ValueError as exc:
            sys.stderr.write(f"{flag}: error: {exc}; {todo}\n")
            return False
    return True


def _storage(db: str, timeout: float = 5.0) -> tuple[Store, Journal]:
    """The store and the journal of ``--db``: PostgreSQL for both, or an SQLite file and a journal beside it.

    ``timeout`` (``--storage-timeout``) bounds each call the event loop awaits (spec server [SL1-b]).
    """
    if db.startswith(("postgresql://", "postgres://")):  # spec/scaleout.md: several processes, one database
        from ..store.postgres import PostgresJournal, PostgresStore

        return PostgresStore(db, call_timeout=timeout), PostgresJournal(db, call_timeout=timeout)
    from ..server.streams import FileJournal
    from ..store.core import SQLiteStore

    return SQLiteStore(db), FileJournal(f"{db}.streams")


def _app(args: argparse.Namespace, factory: Any, config: dict[str, Any], verifier: JwtVerifier | None = None) -> Any:
    """The server's ASGI app for the checked arguments, the model factory, the agent's options and the JWT keys."""
    from ..server.app import ServerConfig, create_app
    from ..store.sessions import InboxBounds

    store, journal = _storage(args.db, args.storage_timeout)
    tools = config.pop("tools")
    bounds = InboxBounds(args.inbox_messages, args.inbox_bytes, args.inbox_message_bytes)
    token = resolve_token(args.token, os.environ)
    return create_app(
        store=store,
        model_factory=factory,
        tools=tools,
        agent_config=config,
        journal=journal,
        config=ServerConfig(
            token=token,
            jwt=verifier,
            keepalive_seconds=args.keepalive,
            inbox_bounds=bounds,
            storage_timeout=args.storage_timeout,
            link_keys=args.link_keys,
            quotas=_quotas(args),
        ),
    )


def _listen(args: argparse.Namespace, app: Any) -> int:
    """Serve ``app`` until stopped; the exit status (an address that cannot be bound is one line, 2)."""
    from ..server.app import serve

    def ready(url: str) -> None:
        sys.stderr.write(f"agent-ref: serving on {url} (open it in a browser; Ctrl-C stops)\n")
        sys.stderr.flush()

    try:
        serve(app, args.host, args.port, ready=ready, allowed_hosts=args.allowed_host)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        sys.stderr.write(
            f"agent-ref serve: error: cannot listen on {args.host}:{args.port}: {reason}; "
            "pick another --port (0 picks a free one) or --host\n"
        )
        return 2
    except KeyboardInterrupt:  # uvicorn re-raises Ctrl-C after its graceful shutdown
        sys.stderr.write("agent-ref: stopped\n")
        return 130
    return 0


def _try_agent(factory: Any, config: dict[str, Any]) -> None:
    """Make one agent with the options, in memory, so that a refusal shows at start, not per request."""
    from ..agent import Agent
    from ..store.core import MemoryStore

    Agent(factory(), store=MemoryStore(), **config)


def main(argv: list[str] | None = None) -> int:
    """``python -m agent_ref.cli.serve``: the same as ``agent-ref serve``."""
    parser = OneLineParser(prog="agent-ref serve", formatter_class=formatter, description=_DESCRIPTION, epilog=_EPILOG)
    _serve_arguments(parser)
    return serve_main(parser.parse_args(argv))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
