"""Scrubbing text before it can reach a stream, a store or a log: no secret, no traceback.

Owns: ``Redactor`` (the secret values the process itself holds, plus a table of common
credential forms), ``HeldStream`` (the held values out of a text that arrives in deltas,
spec ``spec/agent-ref.md`` §SC2), ``default_redactor()`` (seeded from the environment),
``public_message``, the filter every error text passes on its way into an envelope or a
store, and ``RedactingFilter``, the same for log records (spec ``spec/agent-ref.md``
§6.3, issue 18 §4).
Does not own: deciding which texts pass through it (the agent, the tools, the server);
logging (full details go to the ``agent_ref`` logger, on stderr).

Two layers, applied in this order:

1. **Common forms** (``COMMON_FORMS``, each a named rule, each tested): private key
   blocks, passwords in URLs (``scheme://user:pass@``), secrets a URL carries in its path
   (Slack, Discord, Teams and Zapier webhooks, Telegram bot tokens) or in its query (the
   signature of a signed URL: ``X-Amz-Signature=``, ``X-Goog-Signature=``, ``Signature=``,
   ``sig=``, ``hmac=``; a key-shaped ``key=``/``appid=``), keyed values such as
   ``"api_key": "..."``, ``x-api-key: ...``, ``Authorization: Bearer ...``,
   ``aws_secret_access_key=...``, ``password=...`` in JSON, ``k=v``, headers and Python
   reprs, then bare ``Bearer``/``Basic`` credentials, AWS access key ids, ``sk-ant-``
   and ``sk-`` keys, GitHub tokens, Slack tokens, Google API keys and JWTs. These are
   heuristics: they miss a secret in a shape they do not know, and may redact a harmless
   value under a credential-like key (erring on the safe side).
2. **Held secrets** (``Redactor(secrets=...)``, ``.add``): exact values the process has
   (its API key, its auth token, the server's token). Every occurrence is replaced,
   overlapping ones included, and the pass repeats until none is left, so no held secret
   survives whatever text surrounds it (a property test checks this). It runs last, so a
   rewrite by layer 1 cannot bring a held secret back.

Considered and not used: detect-secrets' detectors. They report findings per line for
scanning repositories, with plugin settings held in global state, and the private-key
detector flags the ``BEGIN`` line, not the key; they would bring runtime dependencies
(PyYAML, requests) into the agent. The forms they know are covered by the table here.
Every pattern has bounded repetition or cannot backtrack, so redaction is linear in the
text length (per held secret); ``public_message`` scans at most ``MAX_SCAN_CHARS`` of a
message (``Redactor.cut``), so the work per message is bounded whatever a tool raises.
"""

from __future__ import annotations

import logging
import os
import re
from typing import TYPE_CHECKING, Final, NamedTuple

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

__all__ = [
    "COMMON_FORMS",
    "MARKER",
    "MAX_PUBLIC_CHARS",
    "MAX_SCAN_CHARS",
    "MIN_SECRET_CHARS",
    "SECRET_ENV_VARS",
    "HeldStream",
    "RedactingFilter",
    "Redactor",
    "default_redactor",
    "public_message",
    "touches_marker",
]

#: Longest public message; longer text is cut (a message is a hint, not a dump).
MAX_PUBLIC_CHARS: Final = 500

#: Most characters ``public_message`` scans (after joining lines): a longer text is cut
#: first, so the work per message is bounded; the cut also drops the token it splits.
MAX_SCAN_CHARS: Final = 65_536

#: What a redacted value becomes.
MARKER: Final = "[redacted]"

#: Shortest value ``Redactor.add`` accepts: a shorter one would blank ordinary words.
MIN_SECRET_CHARS: Final = 6

#: Environment variables whose values ``default_redactor`` holds: the API key, the auth
#: token the SDK can send instead, and the agent server's bearer token.
SECRET_ENV_VARS: Final = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "AGENT_REF_TOKEN")


class _Rule(NamedTuple):
    name: str
    pattern: re.Pattern[str]
    replace: Callable[[re.Match[str]], str]


def _all(_: re.Match[str]) -> str:
    return MARKER


def _keep(group: str) -> Callable[[re.Match[str]], str]:
    """Keep the text before ``group`` in the match, redact the group and what follows it."""

    def replace(m: re.Match[str]) -> str:
        return m.string[m.start() : m.start(group)] + MARKER + m.string[m.end(group) : m.end()]

    return replace


# Names that make the value after them a credential. The name must end there: it is
# followed by an optional quote, then ``:`` or ``=`` (so ``max_tokens: 1024`` is not one).
_KEY_WORDS: Final = (
    r"api[_-]?key|apikey|access[_-]?key(?:[_-]?id)?|secret(?:[_-]?(?:access[_-]?)?key)?|private[_-]?key"
    r"|client[_-]?secret|password|passwd|pwd|token|auth|authorization|credentials?|cookie|session[_-]?id"
)
_AUTH_SCHEMES: Final = r"(?:bearer|basic|token|digest|apikey)"
# A key word is a key, not a file's name: ``/etc/passwd: outside the workspace`` is a path
# and its error, not a password (spec [WM1-d]); ``db_password=``, ``x-api-key:`` still are.
_KEY: Final = rf"(?<![/\\])(?i:{_KEY_WORDS})"

_RULES: Final[tuple[_Rule, ...]] = (
    _Rule(
        "private key block",
        # To the END line, or to the end of the text when the block was cut.
        re.compile(
            r"-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----.*?(?:-----END[A-Z0-9 ]{0,40}-----|\Z)",
            re.DOTALL,
        ),
        _all,
    ),
    _Rule(
        "password in a URL",
        re.compile(r"(?P<pre>\b[a-zA-Z][a-zA-Z0-9+.-]{0,20}://[^\s/:@]{0,256}:)(?P<v>[^\s/@]{1,256})@"),
        _keep("v"),
    ),
    _Rule(
        "Slack webhook URL",
        # https://hooks.slack.com/services/T…/B…/<token>: the whole path is the credential.
        re.compile(r"\bhooks\.slack\.com/(?:services|workflows|triggers)/(?P<v>[A-Za-z0-9_/-]{1,512})"),
        _keep("v"),
    ),
    _Rule(
        "Discord webhook URL",
        # https://discord.com/api[/v10]/webhooks/<id>/<token>: the id is kept, the token is not.
        re.compile(
            r"\b(?:(?:canary|ptb)\.)?discord(?:app)?\.com/api(?:/v\d{1,2})?/webhooks/\d{1,30}/(?P<v>[A-Za-z0-9_-]{1,256})"
        ),
        _keep("v"),
    ),
    _Rule(
        "Teams or Zapier webhook URL",
        # https://x.webhook.office.com/webhookb2/<guid>@<guid>/IncomingWebhook/<key>/<guid>,
        # https://hooks.zapier.com/hooks/catch/<account>/<key>/: the path is the credential.
        re.compile(
            r"\b(?:[A-Za-z0-9-]{1,63}\.webhook\.office\.com/webhookb2/|hooks\.zapier\.com/hooks/catch/)"
            r"(?P<v>[A-Za-z0-9@/_-]{1,512})"
        ),
        _keep("v"),
    ),
    _Rule(
        "Telegram bot token in a URL",
        re.compile(r"\bapi\.telegram\.org/(?:file/)?bot(?P<v>\d{1,20}:[A-Za-z0-9_-]{1,256})"),
        _keep("v"),
    ),
    _Rule(
        "URL signature parameter",
        # Signed URLs: ?X-Amz-Signature= (S3 SigV4), ?Signature= (SigV2, CloudFront),
        # &X-Goog-Signature= (GCS), &sig= (Azure SAS), oauth_signature=, &hmac= (Shopify).
        # A parameter of a query (after ? & or &amp;) whose name ends in "signature", or is
        # sig/hmac; the token-like names (access_token=, X-Amz-Security-Token=) are keyed values.
        re.compile(r"[?&](?:amp;)?(?i:[a-z0-9_.-]{0,40}signature|sig|hmac)=(?P<v>[^&#\s\"'<>()\[\]{},;`]{1,4096})"),
        _keep("v"),
    ),
    _Rule(
        "URL key parameter",
        # ?key=<API key> (Google Maps and most REST APIs), ?appid= (OpenWeatherMap): only a
        # value shaped like a key (16+ letters, digits, - or _, both letters and digits), so
        # ?key=photos/cat.jpg or ?key=42 (an object key, a cache key) stay.
        re.compile(
            r"[?&](?:amp;)?(?i:key|appid)=(?P<v>(?=[A-Za-z_-]{0,512}\d)(?=[0-9_-]{0,512}[A-Za-z])"
            r"[A-Za-z0-9_-]{16,512})(?![A-Za-z0-9_.%/+=-])"
        ),
        _keep("v"),
    ),
    _Rule(
        "quoted keyed value",
        # "api_key": "...", 'password': '...', x-api-key="..." (JSON, reprs, k="v").
        re.compile(rf"{_KEY}[\"']?\s{{0,8}}[:=]\s{{0,8}}(?P<q>[\"'])(?P<v>(?:\\.|(?!(?P=q))[^\\\n]){{1,2048}})(?P=q)"),
        _keep("v"),
    ),
    _Rule(
        "keyed value with an auth scheme",
        # Authorization: Bearer xyz, authorization=Basic xyz: keep the scheme.
        re.compile(rf"{_KEY}[\"']?\s{{0,8}}[:=]\s{{0,8}}(?i:{_AUTH_SCHEMES})\s{{1,8}}(?P<v>[^\s\"',;&]+)"),
        _keep("v"),
    ),
    _Rule(
        "keyed value",
        # x-api-key: xyz, aws_secret_access_key=xyz, password=xyz&next=1, "token":xyz, and a
        # quoted value left open (a cut text): its first word at least.
        re.compile(
            rf"{_KEY}[\"']?\s{{0,8}}[:=]\s{{0,8}}[\"']?(?!(?i:{_AUTH_SCHEMES})\s)"
            rf"(?P<v>[^\s\"',;&)}}\]\[]+)"
        ),
        _keep("v"),
    ),
    _Rule(
        "bearer or basic credential",
        re.compile(r"\b(?i:bearer|basic)\s{1,8}(?P<v>[A-Za-z0-9._~+/-]{6,}=*)"),
        _keep("v"),
    ),
    _Rule("AWS access key id", re.compile(r"\b(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}\b"), _all),
    _Rule("Anthropic key", re.compile(r"sk-ant-[A-Za-z0-9_-]+"), _all),
    _Rule("sk- key", re.compile(r"\bsk-[A-Za-z0-9_-]{16,}"), _all),
    _Rule("GitHub token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})"), _all),
    _Rule("Slack token", re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}"), _all),
    _Rule("Google API key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}"), _all),
    _Rule("JWT", re.compile(r"\beyJ[A-Za-z0-9_-]{2,}\.eyJ[A-Za-z0-9_-]{2,}\.[A-Za-z0-9_-]*"), _all),
)

#: The names of the common forms, in the order they are applied.
COMMON_FORMS: Final = tuple(rule.name for rule in _RULES)


class Redactor:
    """Replaces held secret values and common credential forms in text with ``MARKER``.

    ``redactor(text)`` returns the text with every common form (``COMMON_FORMS``) and
    then every occurrence of every held secret replaced. The held values never appear in
    ``repr``.

    Args:
        secrets: exact values to hold (each at least ``MIN_SECRET_CHARS`` long).
        common_forms: also apply the table of common forms (default ``True``).

    Raises:
        ValueError: a secret shorter than ``MIN_SECRET_CHARS``.
    """

    __slots__ = ("_common_forms", "_secrets")

    def __init__(self, secrets: Iterable[str] = (), *, common_forms: bool = True) -> None:
        self._secrets: list[str] = []
        self._common_forms = common_forms
        for secret in secrets:
            self.add(secret)

    def add(self, secret: str) -> None:
        """Hold ``secret``: from now on every occurrence of it is redacted.

        Args:
            secret: the exact value (an API key, a token).

        Raises:
            ValueError: ``secret`` is shorter than ``MIN_SECRET_CHARS``: holding it would
                blank ordinary words, and it is no credential worth the name.
        """
        if len(secret) < MIN_SECRET_CHARS:
            raise ValueError(f"a held secret needs at least {MIN_SECRET_CHARS} characters, got {len(secret)}")
        if secret not in self._secrets:
            self._secrets.append(secret)
            # Longest first, so a secret that contains another is replaced whole.
            self._secrets.sort(key=len, reverse=True)

    def __len__(self) -> int:
        """How many secrets are held."""
        return len(self._secrets)

    def __repr__(self) -> str:
        return f"Redactor(<{len(self._secrets)} held secrets>, common_forms={self._common_forms})"

    def __call__(self, text: str) -> str:
        """``text`` with the common forms, then every held secret, replaced by ``MARKER``."""
        if self._common_forms:
            for rule in _RULES:
                text = rule.pattern.sub(rule.replace, text)
        return self.scrub_held(text)

    def cut(self, text: str, limit: int) -> str:
        """``text`` cut to at most ``limit`` characters without leaving part of a secret at the end.

        The token the cut splits (the characters after the last space) is dropped, so a
        credential of a common form is not left half-shown where its pattern would no
        longer match; a tail that begins a held secret is dropped too.

        Args:
            text: the text.
            limit: the most characters to keep.

        Returns:
            ``text`` itself when short enough, else a prefix of it followed by ``" …"``
            (only ``"…"`` when nothing is left).
        """
        if len(text) <= limit:
            return text
        kept = text[:limit]
        kept = kept[: kept.rfind(" ") + 1]  # "" when no space: the whole text was one token
        trimmed = True
        while trimmed:
            trimmed = False
            for secret in self._secrets:
                for k in range(min(len(secret) - 1, len(kept)), 0, -1):
                    if kept.endswith(secret[:k]):
                        kept, trimmed = kept[:-k], True
                        break
        kept = kept.rstrip()
        return f"{kept} …" if kept else "…"

    def holds_any_in(self, text: str) -> bool:
        """Whether some held secret occurs in ``text``."""
        return any(secret in text for secret in self._secrets)

    def scrub_held(self, text: str) -> str:
        """``text`` with no occurrence of any held secret (the common forms untouched).

        All occurrences, overlapping ones included, are found in one pass and each merged
        run is replaced by ``MARKER``. A replacement can itself complete a secret with the
        text beside it (a secret that ends like ``MARKER`` begins), so passes repeat; if a
        few passes with the marker do not settle, the runs are deleted instead, which
        shortens the text every pass and so must end.
        """
        rounds = 0
        while self._secrets:
            spans = sorted(self._occurrences(text))
            if not spans:
                return text
            rounds += 1
            replacement = MARKER if rounds <= 4 else ""
            out: list[str] = []
            pos = 0
            start, end = spans[0]
            for s, e in spans[1:]:
                if s <= end:
                    end = max(end, e)
                    continue
                out += (text[pos:start], replacement)
                pos, start, end = end, s, e
            out += (text[pos:start], replacement, text[end:])
            text = "".join(out)
        return text

    def _occurrences(self, text: str) -> Iterable[tuple[int, int]]:
        for secret in self._secrets:
            i = text.find(secret)
            while i != -1:
                yield i, i + len(secret)
                i = text.find(secret, i + 1)


def touches_marker(secret: str) -> bool:
    """Whether ``MARKER`` beside text could complete ``secret`` (spec [SC2-b]).

    True when the secret contains the marker, lies inside it, or one's end is the other's
    start. Only then can ``Redactor.scrub_held`` need a second pass; a stream holding
    such a secret is redacted whole at the end of its block (``HeldStream``).
    """
    if MARKER in secret or secret in MARKER:
        return True
    shortest = min(len(secret), len(MARKER))
    return any(secret.endswith(MARKER[:k]) or secret.startswith(MARKER[-k:]) for k in range(1, shortest))


class HeldStream:
    """Redacts the held secrets of one text that arrives in pieces (a block's deltas; spec [SC2-a]).

    ``feed(piece)`` returns what may be sent now, ``end()`` the rest. Joined, the outputs
    equal ``Redactor(secrets).scrub_held(whole text)`` for every way of cutting the text,
    and so contain no held secret. At most ``longest secret - 1`` characters are held
    back between calls: the longest tail of the text so far that begins some secret.
    Occurrences are merged into one marker as ``scrub_held`` merges them (overlapping or
    touching); a run keeps swallowing what later occurrences cover, so a marker is sent
    as soon as a secret is complete. When a secret could be completed by the marker
    itself (``touches_marker``) the whole block is held until ``end()`` and redacted
    there in one piece: exact, at the cost of streaming that block (spec [SC2-b]).

    Args:
        secrets: the held values (one shorter than ``MIN_SECRET_CHARS`` is not held, as
            ``Redactor.add`` refuses it).
    """

    __slots__ = ("_buf", "_done", "_redactor", "_run_end", "_secrets", "_whole")

    def __init__(self, secrets: Iterable[str]) -> None:
        """See the class docstring."""
        self._secrets = sorted({s for s in secrets if len(s) >= MIN_SECRET_CHARS}, key=len, reverse=True)
        self._redactor = Redactor(self._secrets, common_forms=False)
        self._whole = any(touches_marker(s) for s in self._secrets)
        self._buf = ""  # raw text from the frontier on (what later occurrences may still start in)
        self._done = 0  # characters of _buf already sent or swallowed by a run
        self._run_end = -1  # end of the last run, relative to _buf (may lie beyond it)

    @property
    def held_back(self) -> int:
        """How many characters of the text are neither sent nor swallowed by a marker yet."""
        return len(self._buf) - self._done

    def feed(self, piece: str) -> str:
        """The redacted text that may be sent after ``piece`` (possibly empty)."""
        self._buf += piece
        if self._whole or not self._secrets:
            if self._whole:
                return ""
            out, self._buf = self._buf, ""
            return out
        frontier = len(self._buf) - self._pending_prefix()
        if self._done == 0 and self._run_end < 0 and not any(s in self._buf for s in self._secrets):
            # The usual case: nothing to replace, nothing swallowed; send up to the frontier.
            out, self._buf = self._buf[:frontier], self._buf[frontier:]
            return out
        return self._advance(frontier)

    def end(self) -> str:
        """The rest of the text, redacted; the stream is ready for a new text after it."""
        if self._whole:
            out = self._redactor.scrub_held(self._buf)
            self._buf = ""
            return out
        out = self._advance(len(self._buf))
        self._buf, self._done, self._run_end = "", 0, -1
        return out

    def _pending_prefix(self) -> int:
        """Length of the longest tail of the buffer that is a proper prefix of some secret.

        Only the places of a secret's first character in the last ``len(secret) - 1``
        characters are tried, longest first: a few ``find`` calls per delta, not one
        comparison per possible length.
        """
        buf = self._buf
        size = len(buf)
        best = 0
        for secret in self._secrets:
            start = max(0, size - len(secret) + 1)
            first = secret[0]
            j = buf.find(first, start)
            while j != -1 and size - j > best:
                if secret.startswith(buf[j:]):
                    best = size - j
                    break
                j = buf.find(first, j + 1)
        return best

    def _advance(self, frontier: int) -> str:
        """Settle everything before ``frontier`` (no occurrence can start before it any more)."""
        buf = self._buf
        spans = sorted((i, i + len(secret)) for secret in self._secrets for i in _finds(buf, secret) if i < frontier)
        out: list[str] = []
        done, run_end = self._done, self._run_end
        for start, end in spans:
            if end <= run_end:
                continue  # inside the current run (seen before, or covered)
            if start <= run_end:
                run_end = end  # overlaps or touches the run: it grows, no new marker
            else:
                out += (buf[done:start], MARKER)
                run_end = end
            done = max(done, run_end)
        if frontier > done:
            out.append(buf[done:frontier])
            done = frontier
        # Keep the text from the frontier on; positions become relative to it.
        cut = min(frontier, done)
        self._buf = buf[cut:]
        self._done = done - cut
        self._run_end = run_end - cut if run_end >= 0 else -1
        return "".join(out)


def _finds(text: str, secret: str) -> Iterable[int]:
    i = text.find(secret)
    while i != -1:
        yield i
        i = text.find(secret, i + 1)


def default_redactor() -> Redactor:
    """A ``Redactor`` holding the values of ``SECRET_ENV_VARS`` that are set.

    A value shorter than ``MIN_SECRET_CHARS`` is not held (it is not a usable credential,
    and holding it would blank ordinary words); the common forms still apply to it.

    Returns:
        A new redactor (the environment is read at each call, so a key set later counts).
    """
    redactor = Redactor()
    for name in SECRET_ENV_VARS:
        value = os.environ.get(name, "").strip()
        if len(value) >= MIN_SECRET_CHARS:
            redactor.add(value)
    return redactor


class RedactingFilter(logging.Filter):
    """A logging filter that redacts each record's message, traceback and stack in place.

    Put it on a *handler* (``handler.addFilter(RedactingFilter())``): a handler's filters
    see the records of every logger that reaches it, a logger's only its own. Logs keep
    their full detail (tracebacks, no length cap); only secrets are replaced.

    Args:
        redactor: what to redact; ``default_redactor()`` at each record when ``None``
            (so a key set after start-up counts).
    """

    def __init__(self, redactor: Redactor | None = None) -> None:
        """Create the filter."""
        super().__init__()
        self._redactor = redactor

    def filter(self, record: logging.LogRecord) -> bool:
        """Redact ``record`` in place; never drops it.

        Args:
            record: the log record.

        Returns:
            Always ``True``.
        """
        redactor = default_redactor() if self._redactor is None else self._redactor
        record.msg = redactor(record.getMessage())
        record.args = None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redactor(record.exc_text)
        if record.stack_info:
            record.stack_info = redactor(record.stack_info)
        return True


def public_message(text: str, redactor: Redactor | None = None) -> str:
    """``text`` without secrets or traceback lines, on one line, at most ``MAX_PUBLIC_CHARS``.

    Args:
        text: a message that may have come from an exception.
        redactor: what to redact; ``default_redactor()`` when ``None``.

    Returns:
        A one-paragraph message safe to put into a stream, a store or a log.
    """
    if redactor is None:
        redactor = default_redactor()
    kept = [line for line in text.splitlines() if not _is_traceback_line(line)]
    # Whitespace is collapsed *before* redacting, so the collapse cannot form a secret.
    joined = " ".join(" ".join(kept).split())
    if len(joined) > MAX_SCAN_CHARS:
        joined = redactor.cut(joined, MAX_SCAN_CHARS)
    clean = redactor(joined)
    if len(clean) > MAX_PUBLIC_CHARS:
        cut = clean[: MAX_PUBLIC_CHARS - 1]
        # A prefix of redacted text holds no secret; the ellipsis could end one, so check.
        clean = cut + "…" if not redactor.holds_any_in(cut + "…") else cut
    return clean


def _is_traceback_line(line: str) -> bool:
    stripped = line.strip()
    return stripped.startswith(("Traceback (most recent call last)", 'File "')) or stripped.startswith("^")
