"""Redaction: held secrets and a table of common credential forms (spec/agent-ref.md §6.3, issue 18 §4)."""

from __future__ import annotations

import io
import logging

import pytest
from hypothesis import example, given, seed, settings
from hypothesis import strategies as st

from agent_ref.policy.redact import (
    COMMON_FORMS,
    MARKER,
    MAX_PUBLIC_CHARS,
    MAX_SCAN_CHARS,
    MIN_SECRET_CHARS,
    RedactingFilter,
    Redactor,
    default_redactor,
    public_message,
)

# (form, text, the secret part that must be gone, a part that must stay)
TABLE: list[tuple[str, str, str, str]] = [
    ("bearer header", "Authorization: Bearer abc.DEF-123_x", "abc.DEF-123_x", "Authorization: Bearer"),
    ("bearer in JSON", '{"Authorization": "Bearer tok3n-value"}', "tok3n-value", '"Authorization": "'),
    ("bare bearer", "sent bearer zyx987wvu to the server", "zyx987wvu", "sent bearer"),
    ("basic auth header", 'curl -H "Authorization: Basic dXNlcjpwYXNzd29yZA=="', "dXNlcjpwYXNzd29yZA", "Basic"),
    ("bare basic", "using Basic dXNlcjpwYXNzd29yZA== now", "dXNlcjpwYXNzd29yZA", "using Basic"),
    ("api_key JSON", '{"api_key": "abc123xyz", "model": "m"}', "abc123xyz", '"model": "m"'),
    ("apikey JSON", '{"apikey":"k9k9k9k9"}', "k9k9k9k9", '"apikey"'),
    ("api-key k=v", "api-key=q1w2e3r4 next", "q1w2e3r4", " next"),
    ("API_KEY env", "ANTHROPIC_API_KEY=not-an-sk-value-77 was set", "not-an-sk-value-77", "was set"),
    ("api_key repr", "{'api_key': 'p@ss w0rd!'}", "p@ss w0rd!", "'api_key'"),
    ("x-api-key header", "x-api-key: zzz123yyy", "zzz123yyy", "x-api-key:"),
    ("x-api-key repr", "Headers({'x-api-key': 'k-123456', 'accept': 'json'})", "k-123456", "'accept': 'json'"),
    ("authorization k=v", "authorization=opaque-42-value", "opaque-42-value", "authorization="),
    (
        "aws secret",
        "aws_secret_access_key=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY region=eu",
        "wJalrXUtnFEMI",
        "region=eu",
    ),
    ("aws key id k=v", "aws_access_key_id = AKIAIOSFODNN7EXAMPLE;", "AKIAIOSFODNN7EXAMPLE", "aws_access_key_id"),
    ("AKIA key", "found AKIAIOSFODNN7EXAMPLE in the log", "AKIAIOSFODNN7EXAMPLE", "in the log"),
    ("sk-ant key", "bad key sk-ant-api03-abcdEFGH_ijkl-mnop used", "abcdEFGH", "used"),
    ("sk- key", "key sk-proj-ABCDEFGHijklmnop1234 used", "ABCDEFGHijklmnop1234", "used"),
    ("GitHub token", "push with ghp_" + "a1B2" * 9 + " failed", "a1B2a1B2", "failed"),
    ("GitHub PAT", "github_pat_11ABCDEFG0123456789_abcdefghijklmnop", "11ABCDEFG", ""),
    ("JWT", "token eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl ok", "c2lnbmF0dXJl", " ok"),
    (
        "private key block",
        "key:\n-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\n-----END RSA PRIVATE KEY-----\ndone",
        "MIIEpAIBAAKCAQEA",
        "done",
    ),
    ("cut private key block", "-----BEGIN OPENSSH PRIVATE KEY----- b3BlbnNzaC1rZXk", "b3BlbnNzaC1rZXk", ""),
    ("api_key left open", '{"api_key": "abc123xyz', "abc123xyz", '"api_key"'),
    ("password JSON", '{"user": "ann", "password": "correct horse battery"}', "correct horse", '"user": "ann"'),
    ("password k=v", "db password=hunter2&next=1", "hunter2", "&next=1"),
    ("secret field", "client_secret: s3cr3t-v4lue", "s3cr3t-v4lue", "client_secret"),
    ("token field", '{"access_token":"at-123456","expires":3600}', "at-123456", '"expires":3600'),
    ("URL credentials", "fetch https://alice:pa55word@db.example.com:5432/x failed", "pa55word", "alice"),
    ("Slack token", "xoxb-1234567890-abcdefghij", "abcdefghij", ""),
    ("Google API key", "AIza" + "Sy" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q", "A1b2C3d4E5f6G7h8I9j0", ""),
    # Secrets inside URLs (issue 24 §6): the host and the non-secret parameters stay.
    (
        "Slack webhook URL",
        "Client error '404 Not Found' for url 'https://hooks.slack.com/services/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'",
        "q1W2e3R4t5Y6u7I8o9P0a1S2",
        "https://hooks.slack.com/services/",
    ),
    ("Slack workflow URL", "https://hooks.slack.com/workflows/T01/A02/345/Zz9Yy8Xx7", "Zz9Yy8Xx7", "hooks.slack.com"),
    (
        "Discord webhook URL",
        "POST https://discord.com/api/webhooks/112233445566778899/Ab-Cd_Ef12GhIj34 returned 401",
        "Ab-Cd_Ef12GhIj34",
        "webhooks/112233445566778899/",
    ),
    (
        "Discord webhook URL, versioned",
        "https://canary.discordapp.com/api/v10/webhooks/42/tok_en-value",
        "tok_en-value",
        "webhooks/42/",
    ),
    (
        "Teams webhook URL",
        "https://contoso.webhook.office.com/webhookb2/1a2b@3c4d/IncomingWebhook/5e6f7a8b/9c0d",
        "IncomingWebhook/5e6f7a8b",
        "contoso.webhook.office.com/webhookb2/",
    ),
    ("Zapier webhook URL", "https://hooks.zapier.com/hooks/catch/123456/abcxyz9/ ok", "abcxyz9", " ok"),
    (
        "Telegram bot token",
        "GET https://api.telegram.org/bot123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw/getMe",
        "AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw",
        "/getMe",
    ),
    (
        "S3 presigned URL",
        "https://b.s3.amazonaws.com/k.png?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Date=20240101T000000Z"
        "&X-Amz-SignedHeaders=host&X-Amz-Signature=fe5f80f77d5fa3beca038a248ff027d0445342fe2855ddc963176630326f1024",
        "fe5f80f77d5fa3beca038a248ff027d0445342fe2855ddc963176630326f1024",
        "X-Amz-SignedHeaders=host&X-Amz-Signature=",
    ),
    (
        "S3 presigned session token",
        "https://b.s3.amazonaws.com/k?X-Amz-Security-Token=IQoJb3JpZ2luX2VjEJr%2F&X-Amz-Expires=60",
        "IQoJb3JpZ2luX2VjEJr",
        "&X-Amz-Expires=60",
    ),
    (
        "GCS signed URL",
        "https://storage.googleapis.com/b/o?X-Goog-Algorithm=GOOG4-RSA-SHA256&X-Goog-Signature=0a1b2c3d4e5f",
        "0a1b2c3d4e5f",
        "X-Goog-Algorithm=GOOG4-RSA-SHA256",
    ),
    (
        "Azure SAS",
        "https://acct.blob.core.windows.net/c/b.txt?sv=2021-08-06&se=2030-01-01&sp=r&sig=9pQ%2BxYz%2Fab%3D",
        "9pQ%2BxYz%2Fab%3D",
        "sv=2021-08-06&se=2030-01-01&sp=r&sig=",
    ),
    (
        "Azure SAS in HTML",
        '<a href="https://a.blob.core.windows.net/c?sp=r&amp;sig=Zm9vYmFy%3D">x</a>',
        "Zm9vYmFy",
        '">x</a>',
    ),
    (
        "CloudFront signed URL",
        "https://d1.cloudfront.net/v.mp4?Expires=1&Signature=a~b-c_d&Key-Pair-Id=K2",
        "a~b-c_d",
        "Key-Pair-Id=K2",
    ),
    (
        "OAuth 1 signature",
        "GET /r?oauth_nonce=n1&oauth_signature=tR3%2BTy81lMeYAr%2FFid0kMTYa%2FWM%3D",
        "tR3",
        "oauth_nonce=n1",
    ),
    (
        "Shopify hmac",
        "https://shop.example/cb?shop=s.myshopify.com&hmac=700e2dadb827fcc8609e9d5ce208b2e9",
        "700e2dad",
        "shop=",
    ),
    (
        "OAuth access token in a URL",
        "https://api.example.com/me?access_token=EAAGm0PX4ZCpsBA&fields=id",
        "EAAGm0PX4ZCpsBA",
        "&fields=id",
    ),
    (
        "OAuth token in a fragment",
        "https://app.example/cb#access_token=ya29.a0Af-x_Yz&token_type=Bearer",
        "ya29.a0Af",
        "token_type",
    ),
    (
        "API key in a URL",
        "https://maps.googleapis.com/maps/api/geocode/json?address=Paris&key=Zq81mNx0Pq7Rr2Tt5Vv9",
        "Zq81mNx0Pq7Rr2Tt5Vv9",
        "address=Paris&key=",
    ),
    (
        "appid in a URL",
        "http://api.openweathermap.org/data/2.5/weather?q=Paris&appid=b1b15e88fa797225412429c1c50c122a1",
        "b1b15e88fa797225412429c1c50c122a1",
        "q=Paris",
    ),
]


@pytest.mark.parametrize(("form", "text", "secret", "kept"), TABLE, ids=[row[0] for row in TABLE])
def test_spec_6_3_common_forms_are_redacted(form: str, text: str, secret: str, kept: str) -> None:
    """Each common credential form loses its value and keeps its context [R6.3-a]."""
    out = public_message(text, Redactor())
    assert secret not in out, form
    assert MARKER in out
    assert kept in out


@pytest.mark.parametrize(
    "text",
    [
        "max_tokens: 1024 > 4096, the model's maximum",
        "prompt is too long: 210000 tokens > 200000 maximum",
        "input_tokens=12 output_tokens=30",
        "Author: John; key: value",
        "x-api-key header is required",
        "ZeroDivisionError: division by zero",
        "see https://example.com/a:b@c",
        # URLs with nothing secret in them stay whole (issue 24 §6: be deliberate about false positives)
        "https://hooks.slack.com/ is the webhook host",
        "https://discord.com/api/webhooks is the endpoint",
        "https://b.s3.amazonaws.com/list?key=photos/cat.jpg&prefix=a",
        "https://cache.example/get?key=user-42&ttl=60",
        "https://example.com/search?key=abcdefghijklmnopqrstuvwxyz",
        "https://example.com/page?design=1&signed=true&sig_version=2&assign=x",
        "https://example.com/docs#signature-v4",
        "https://a.blob.core.windows.net/c?sv=2021-08-06&se=2030-01-01&sp=r",
        "the signature= argument and sig= flag are documented",
    ],
)
def test_ordinary_text_is_kept(text: str) -> None:
    """Texts that only look like credentials stay readable (no redaction of counts or prose)."""
    assert public_message(text, Redactor()) == text


def test_common_forms_are_all_tested() -> None:
    """Every rule of the table has its row here (a new rule needs a test)."""
    assert len(COMMON_FORMS) == len(set(COMMON_FORMS))
    expected = {
        "private key block",
        "password in a URL",
        "quoted keyed value",
        "keyed value with an auth scheme",
        "keyed value",
        "bearer or basic credential",
        "AWS access key id",
        "Anthropic key",
        "sk- key",
        "GitHub token",
        "Slack token",
        "Google API key",
        "JWT",
        "Slack webhook URL",
        "Discord webhook URL",
        "Teams or Zapier webhook URL",
        "Telegram bot token in a URL",
        "URL signature parameter",
        "URL key parameter",
    }
    assert set(COMMON_FORMS) == expected


def test_held_secrets_are_replaced_everywhere() -> None:
    """A held value goes wherever it is, in any shape of text [R6.3-a]."""
    redactor = Redactor(secrets=["opaque-value-1"])
    redactor.add("другой-секрет")
    assert len(redactor) == 2
    text = "a=opaque-value-1;opaque-value-1opaque-value-1 [другой-секрет]"
    out = redactor(text)
    assert "opaque-value-1" not in out
    assert "другой-секрет" not in out
    assert out.startswith("a=")  # the keyless forms are untouched


def test_held_secrets_without_common_forms() -> None:
    """``common_forms=False`` replaces only the held values."""
    redactor = Redactor(["held-value"], common_forms=False)
    assert redactor("password=x1y2z3 held-value") == f"password=x1y2z3 {MARKER}"


def test_a_short_secret_is_refused_and_repr_hides_values() -> None:
    """A value under ``MIN_SECRET_CHARS`` is refused; ``repr`` never shows a held value."""
    with pytest.raises(ValueError, match="at least"):
        Redactor(["abc"])
    redactor = Redactor(["long-enough-secret"])
    redactor.add("long-enough-secret")  # twice: held once
    assert len(redactor) == 1
    assert "long-enough-secret" not in repr(redactor)


def test_default_redactor_holds_the_process_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    """The API key, the auth token and the server token from the environment are held."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "plainkey-0001")
    monkeypatch.setenv("ANTHROPIC_AUTH_TOKEN", "authtok-0002")
    monkeypatch.setenv("AGENT_REF_TOKEN", "server-0003")
    text = "failed with plainkey-0001 / authtok-0002 / server-0003"
    assert public_message(text) == f"failed with {MARKER} / {MARKER} / {MARKER}"
    assert len(default_redactor()) == 3


def test_default_redactor_skips_unset_and_short_values(monkeypatch: pytest.MonkeyPatch) -> None:
    """Unset or too-short variables are not held (nothing to blank ordinary words with)."""
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "AGENT_REF_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AGENT_REF_TOKEN", "ab")
    assert len(default_redactor()) == 0
    assert public_message("ab cd ab") == "ab cd ab"


def test_public_message_drops_tracebacks_and_is_bounded() -> None:
    """One line, no traceback lines, at most MAX_PUBLIC_CHARS characters [R2.4-b]."""
    text = 'Traceback (most recent call last):\n  File "x.py", line 1\n    ^^^^\nValueError: ' + "y" * 1000
    out = public_message(text, Redactor())
    assert "Traceback" not in out
    assert 'File "' not in out
    assert len(out) == MAX_PUBLIC_CHARS
    assert out.endswith("…")


def test_the_ellipsis_cannot_complete_a_held_secret() -> None:
    """A cut message whose ellipsis would end a held secret loses the ellipsis instead."""
    secret = "x" * 5 + "…"
    redactor = Redactor([secret])
    out = public_message("a" * (MAX_PUBLIC_CHARS - 6) + "x" * 600, redactor)
    assert secret not in out
    assert len(out) <= MAX_PUBLIC_CHARS


def test_a_marker_that_completes_a_held_secret_is_replaced_again() -> None:
    """Replacing one secret can join the marker and its neighbour into another: that goes too."""
    redactor = Redactor(["SECRETSEC", "ted]abc1"], common_forms=False)
    out = redactor("SECRETSECabc1")  # -> "[redacted]abc1" contains "ted]abc1"
    assert "ted]abc1" not in out
    assert "SECRETSEC" not in out
    marker_like = Redactor(["redacted"], common_forms=False)  # a secret inside the marker itself
    assert "redacted" not in marker_like("xx redacted yy")


def test_public_message_scans_a_bounded_prefix() -> None:
    """A huge text is cut before it is scanned: the work per message is bounded."""
    seen: list[int] = []

    class Recording(Redactor):
        __slots__ = ()

        def __call__(self, text: str) -> str:
            seen.append(len(text))
            return super().__call__(text)

    out = public_message("word " * 2_000_000, Recording())
    assert len(seen) == 1
    assert MAX_SCAN_CHARS - 10 <= seen[0] <= MAX_SCAN_CHARS + len(" …")
    assert len(out) == MAX_PUBLIC_CHARS


def test_the_scan_cut_never_shows_part_of_a_secret() -> None:
    """The cut drops the token it splits, and a tail that begins a held secret."""
    secret = "pass phrase 1234"
    begin, end = "-----BEGIN RSA PRIVATE KEY----- ", " -----END RSA PRIVATE KEY----- "
    body = "A" * (MAX_SCAN_CHARS - 7 - len(begin) - len(end))  # the cut falls after "pass ph"
    text = begin + body + end + secret + " tail"
    assert text[:MAX_SCAN_CHARS].endswith("pass ph")
    out = public_message(text, Redactor([secret]))
    assert out == f"{MARKER} …"  # the key block, then nothing of the secret
    assert Redactor().cut("sk-ant-" + "b" * 100, 50) == "…"  # one token: all of it goes
    assert Redactor().cut("short", 50) == "short"


def test_log_records_are_redacted_on_the_handler() -> None:
    """Messages, arguments and tracebacks of every logger reaching the handler are redacted."""
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.addFilter(RedactingFilter(Redactor(["held-key-0001"])))
    logger = logging.getLogger("agent_ref.test_redact_child")  # a child: reaches the handler too
    parent = logging.getLogger("agent_ref")
    parent.addHandler(handler)
    try:
        logger.warning("retry with %s and Authorization: Bearer tok-%d", "held-key-0001", 77)
        try:
            raise RuntimeError("x-api-key: held-key-0001")
        except RuntimeError:
            logger.exception("failed")
        logger.error("stack", stack_info=True)
    finally:
        parent.removeHandler(handler)
    text = out.getvalue()
    assert "held-key-0001" not in text
    assert "tok-77" not in text
    assert "Traceback (most recent call last)" in text  # logs keep their detail
    assert text.count(MARKER) >= 3


def test_log_filter_reads_the_environment_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a redactor the filter holds the process's secrets, read at each record."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "env-held-9999")
    record = logging.makeLogRecord({"msg": "key %s", "args": ("env-held-9999",)})
    assert RedactingFilter().filter(record)
    assert record.getMessage() == f"key {MARKER}"


# --- property: a held secret never survives, whatever surrounds it -------------------------

_secret = st.text(min_size=MIN_SECRET_CHARS, max_size=16)
_near_marker = st.text(alphabet="[redacted] x", min_size=MIN_SECRET_CHARS, max_size=12)
_filler = st.text(max_size=40) | st.text(alphabet="[redacted]x\n ", max_size=20)


@st.composite
def _case(draw: st.DrawFn) -> tuple[list[str], str]:
    secrets = draw(st.lists(_secret | _near_marker, min_size=1, max_size=4))
    parts = draw(st.lists(st.sampled_from(secrets) | _filler, max_size=12))
    return secrets, "".join(parts)


def _check_no_secret_survives(case: tuple[list[str], str]) -> None:
    secrets, text = case
    redactor = Redactor(secrets)
    for out in (redactor(text), public_message(text, redactor)):
        for secret in secrets:
            assert secret not in out


@given(_case())
@example((["SECRETSEC", "ted]abc1"], "SECRETSECabc1"))
@example((["]]]]]]"], "]" * 11))
@example((["redacted"], "redacted"))
@example((["d][red"], "aaaaaa-d][red-aaaaaa"))
@example(([" a  b "], "x a  b x"))
def test_property_a_held_secret_never_survives(case: tuple[list[str], str]) -> None:
    """No held secret occurs in the output of the redactor or of public_message [R6.3-a]."""
    _check_no_secret_survives(case)


@pytest.mark.parametrize("fixed_seed", [1, 2, 3, 4])
def test_property_a_held_secret_never_survives_fixed_seeds(fixed_seed: int) -> None:
    """The same property under fixed seeds, so CI's derandomised profile cannot hide a case."""

    @seed(fixed_seed)
    @settings(derandomize=False, max_examples=200, database=None)
    @given(_case())
    def run(case: tuple[list[str], str]) -> None:
        _check_no_secret_survives(case)

    run()


@given(st.text(max_size=200))
def test_property_redaction_is_total(text: str) -> None:
    """Any text is redacted without an exception, and redacting twice changes nothing more."""
    redactor = Redactor(["held-secret"])
    once = redactor(text)
    assert redactor(once) == once


# --- property: a secret inside a URL never survives; a URL without one is kept whole ------

_token = st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-", min_size=12, max_size=40)
_b64 = st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789%", min_size=12, max_size=60)
# A key-shaped value: 16+ characters with a letter and a digit (what the key= rule asks for).
_keyish = st.builds(
    lambda a, b, c: f"{a}{b}{c}", _token.filter(lambda t: len(t) >= 14), st.integers(0, 9), st.sampled_from("aZ")
)
_params = st.lists(
    st.tuples(
        st.sampled_from(["sv", "se", "sp", "X-Amz-Date", "X-Goog-Expires", "page", "q"]),
        st.from_regex(r"[a-z0-9]{1,8}", fullmatch=True),
    ),
    max_size=3,
)
_prose = st.sampled_from(["", "POST ", "error for url '", "see <", "failed: ("])
_after = st.sampled_from(["", "'", ">", ") and more", " returned 404", "\n"])


@st.composite
def _secret_url(draw: st.DrawFn) -> tuple[str, str, str]:
    """(text, the secret, a part that must stay): a URL of each form, in some prose."""
    form = draw(st.sampled_from(["slack", "discord", "amz", "goog", "sas", "key"]))
    query = "".join(f"{k}={v}&" for k, v in draw(_params))
    if form == "slack":
        secret = draw(_token)
        url, kept = f"https://hooks.slack.com/services/T0{draw(_token)}/B0{draw(_token)}/{secret}", "hooks.slack.com"
    elif form == "discord":
        secret = draw(_token)
        url, kept = (
            f"https://discord.com/api/webhooks/{draw(st.integers(1, 10**19))}/{secret}",
            "discord.com/api/webhooks/",
        )
    elif form == "key":
        secret = draw(_keyish)
        url, kept = f"https://api.example.com/v1/x?{query}key={secret}", "api.example.com/v1/x?"
    else:
        name = {"amz": "X-Amz-Signature", "goog": "X-Goog-Signature", "sas": "sig"}[form]
        secret = draw(_b64)
        url, kept = f"https://store.example.net/b/o.bin?{query}{name}={secret}", "store.example.net/b/o.bin?"
    return draw(_prose) + url + draw(_after), secret, kept


def _check_url_secret_goes(case: tuple[str, str, str]) -> None:
    text, secret, kept = case
    for out in (Redactor()(text), public_message(text, Redactor())):
        assert secret not in out
        assert kept in out
        assert MARKER in out


@given(_secret_url())
@settings(max_examples=100)
def test_property_a_secret_inside_a_url_never_survives(case: tuple[str, str, str]) -> None:
    """Webhook paths and signed-URL parameters lose their secret and keep the host [R6.3-c]."""
    _check_url_secret_goes(case)


@pytest.mark.parametrize("fixed_seed", [1, 2])
def test_property_a_secret_inside_a_url_never_survives_fixed_seeds(fixed_seed: int) -> None:
    """The same property under fixed seeds."""

    @seed(fixed_seed)
    @settings(derandomize=False, max_examples=100, database=None)
    @given(_secret_url())
    def run(case: tuple[str, str, str]) -> None:
        _check_url_secret_goes(case)

    run()


@given(
    st.sampled_from(["https://example.com/p", "https://b.s3.amazonaws.com/k.png", "https://hooks.slack.com/"]),
    _params,
    st.sampled_from(["", "key=photos/cat.jpg", "key=42", "key=abcdefghijklmnopqrstuvwx", "signed=1", "design=x"]),
)
def test_property_a_url_without_a_secret_is_kept_whole(base: str, params: list[tuple[str, str]], extra: str) -> None:
    """No rule fires on a URL whose parameters are not credentials (no false positive) [R6.3-c]."""
    query = "&".join([f"{k}={v}" for k, v in params] + ([extra] if extra else []))
    url = f"{base}?{query}" if query else base
    assert Redactor()(url) == url
