"""Resume links' tokens, sans-I/O: ``mint`` and ``verify`` (spec delivery §7).

A token grants one scope of one run until its expiry (plus the leeway), under the keys
that signed it, and nothing else: the properties below try other runs, scopes, keys,
times and every single-byte change, under hypothesis and under fixed seeds.
"""

from __future__ import annotations

import pytest
from hypothesis import given, seed, settings
from hypothesis import strategies as st

from envelope.delivery import (
    LEEWAY_SECONDS,
    MAX_TOKEN_CHARS,
    MAX_TTL_SECONDS,
    STREAM_SCOPE,
    TokenError,
    TokenExpiredError,
    TokenMalformedError,
    TokenScopeError,
    TokenSignatureError,
    TokenWrongRunError,
    mint,
    verify,
)

KEY = b"k" * 32
OTHER = b"o" * 32
NOW = 1_800_000_000.0

run_ids = st.from_regex(r"[A-Za-z0-9_-]{1,128}", fullmatch=True)
scopes = st.from_regex(r"[a-z][a-z0-9_-]{0,31}", fullmatch=True)
keys = st.binary(min_size=16, max_size=64)
ttls = st.integers(min_value=1, max_value=MAX_TTL_SECONDS)


def test_spec_delivery_7_1_a_the_format() -> None:
    """[D7.1-a]: e1.RUN.SCOPE.EXPIRY.SIGNATURE, URL-safe, and it verifies for its run and scope."""
    token = mint(KEY, "run-1", scope="stream", ttl=300, now=NOW)
    version, run, scope, expiry, signature = token.split(".")
    assert (version, run, scope, expiry) == ("e1", "run-1", "stream", str(int(NOW) + 300))
    assert len(signature) == 43
    assert all(c.isalnum() or c in "._-" for c in token)
    assert verify(KEY, token, "run-1", scope="stream", now=NOW) == int(NOW) + 300
    longest = mint(KEY, "r" * 128, scope="s" * 32, ttl=MAX_TTL_SECONDS, now=NOW)
    assert len(longest) <= MAX_TOKEN_CHARS


@settings(max_examples=60)
@given(st.data())
def test_spec_delivery_7_1_b_a_token_grants_its_run_scope_key_and_time_only(data: st.DataObject) -> None:
    """[D7.1-b] [D7.1-c]: another run, scope, key, or a time past expiry+leeway never verifies."""
    key, run, scope, ttl = data.draw(keys), data.draw(run_ids), data.draw(scopes), data.draw(ttls)
    now = data.draw(st.floats(min_value=0, max_value=4e9, allow_nan=False))
    token = mint(key, run, scope=scope, ttl=ttl, now=now)
    expiry = int(now + ttl)
    assert verify(key, token, run, scope=scope, now=now) == expiry
    assert verify(key, token, run, scope=scope, now=expiry + LEEWAY_SECONDS) == expiry
    other_run = data.draw(run_ids.filter(lambda r: r != run))
    with pytest.raises(TokenWrongRunError):
        verify(key, token, other_run, scope=scope, now=now)
    other_scope = data.draw(scopes.filter(lambda s: s != scope))
    with pytest.raises(TokenScopeError):
        verify(key, token, run, scope=other_scope, now=now)
    other_key = data.draw(keys.filter(lambda k: k != key))
    with pytest.raises(TokenSignatureError):
        verify(other_key, token, run, scope=scope, now=now)
    later = data.draw(st.floats(min_value=expiry + LEEWAY_SECONDS + 1, max_value=1e12))
    with pytest.raises(TokenExpiredError):
        verify(key, token, run, scope=scope, now=later)


@settings(max_examples=40)
@given(st.data())
def test_spec_delivery_7_1_b_any_single_byte_change_fails(data: st.DataObject) -> None:
    """[D7.1-b]: a token with any one character replaced, cut or extended is refused (a TokenError, never a pass)."""
    key, run = data.draw(keys), data.draw(run_ids)
    token = mint(key, run, ttl=60, now=NOW)
    at = data.draw(st.integers(min_value=0, max_value=len(token) - 1))
    char = data.draw(st.characters(codec="utf-8").filter(lambda c: c != token[at]))
    changed = data.draw(
        st.sampled_from([token[:at] + char + token[at + 1 :], token[:at] + token[at + 1 :], token + char])
    )
    with pytest.raises(TokenError):
        verify(key, changed, run, now=NOW)


@pytest.mark.parametrize("fixed_seed", [1, 2, 3])
def test_spec_delivery_7_1_b_the_properties_under_fixed_seeds(fixed_seed: int) -> None:
    """[D7.1-b]: both properties again under three fixed seeds."""
    for prop in (
        test_spec_delivery_7_1_b_a_token_grants_its_run_scope_key_and_time_only,
        test_spec_delivery_7_1_b_any_single_byte_change_fails,
    ):
        inner = prop.hypothesis.inner_test  # type: ignore[attr-defined]  # hypothesis attaches it
        seed(fixed_seed)(settings(derandomize=False, max_examples=20)(given(st.data())(inner)))()


def test_spec_delivery_7_1_b_each_refusal_says_which_and_no_more() -> None:
    """[D7.1-b]: malformed, forged, other run, other scope, expired: each its own error and kind."""
    token = mint(KEY, "run-1", ttl=10, now=NOW)
    version, run, scope, expiry, signature = token.split(".")
    flipped = ("A" if signature[0] != "A" else "B") + signature[1:]
    forged = mint(OTHER, "run-1", ttl=10, now=NOW)
    cases: list[tuple[str, str, type[TokenError], str]] = [
        ("x" * (MAX_TOKEN_CHARS + 1), "run-1", TokenMalformedError, "token_malformed"),
        ("", "run-1", TokenMalformedError, "token_malformed"),
        ("e2." + token[3:], "run-1", TokenMalformedError, "token_malformed"),
        (f"{version}.{run}.{scope}.0{expiry}.{signature}", "run-1", TokenMalformedError, "token_malformed"),
        (f"{version}.{run}.{scope}.{expiry}.{flipped}", "run-1", TokenSignatureError, "token_bad_signature"),
        (forged, "run-1", TokenSignatureError, "token_bad_signature"),
        (f"{version}.run-2.{scope}.{expiry}.{signature}", "run-2", TokenSignatureError, "token_bad_signature"),
        (token, "run-2", TokenWrongRunError, "token_wrong_run"),
        (token.replace(".stream.", ".events."), "run-1", TokenSignatureError, "token_bad_signature"),
    ]
    for given_token, for_run, error, kind in cases:
        with pytest.raises(error) as caught:
            verify(KEY, given_token, for_run, now=NOW)
        assert caught.value.kind == kind
        assert KEY.decode() not in str(caught.value)
        assert signature not in str(caught.value)
    with pytest.raises(TokenScopeError):
        verify(KEY, token, "run-1", scope="events", now=NOW)
    assert verify(KEY, token, "run-1", now=NOW + 10 + LEEWAY_SECONDS) == int(NOW) + 10
    with pytest.raises(TokenExpiredError) as expired:
        verify(KEY, token, "run-1", now=NOW + 10 + LEEWAY_SECONDS + 1)
    assert expired.value.kind == "token_expired"
    assert str(expired.value) == "the resume token has expired; ask for a new link"


def test_spec_delivery_7_1_d_rotation_the_first_key_signs_every_key_verifies() -> None:
    """[D7.1-d]: minted under [new, old] it verifies under [new] and [new, old]; an old token under [new, old] only."""
    old_token = mint([OTHER], "run-1", ttl=60, now=NOW)
    new_token = mint([KEY, OTHER], "run-1", ttl=60, now=NOW)
    assert new_token == mint(KEY, "run-1", ttl=60, now=NOW)
    assert verify([KEY], new_token, "run-1", now=NOW)
    assert verify([KEY, OTHER], old_token, "run-1", now=NOW)
    with pytest.raises(TokenSignatureError):
        verify([KEY], old_token, "run-1", now=NOW)
    assert verify(KEY.decode(), new_token, "run-1", now=NOW)  # a text key is its UTF-8 bytes


def test_spec_delivery_7_1_c_mint_refuses_what_is_out_of_range() -> None:
    """[D7.1-c] [D7.1-d]: a bad run id, scope, ttl or key is the caller's ValueError, said clearly."""
    with pytest.raises(ValueError, match="not a run id"):
        mint(KEY, "run/1", ttl=60, now=NOW)
    with pytest.raises(ValueError, match="not a scope"):
        mint(KEY, "run-1", scope="Stream", ttl=60, now=NOW)
    for ttl in (0, -1, MAX_TTL_SECONDS + 1):
        with pytest.raises(ValueError, match="ttl"):
            mint(KEY, "run-1", ttl=ttl, now=NOW)
    with pytest.raises(ValueError, match="shorter than 16 bytes"):
        mint(b"short", "run-1", ttl=60, now=NOW)
    with pytest.raises(ValueError, match="no key"):
        verify([], mint(KEY, "run-1", ttl=60, now=NOW), "run-1", now=NOW)
    assert STREAM_SCOPE == "stream"


def test_spec_delivery_7_1_c_the_clock_is_read_when_now_is_not_given() -> None:
    """[D7.1-c]: without ``now`` both read the clock: a fresh token verifies, one minted long ago has expired."""
    assert verify(KEY, mint(KEY, "run-1", ttl=60), "run-1") > 0
    with pytest.raises(TokenExpiredError):
        verify(KEY, mint(KEY, "run-1", ttl=60, now=NOW - 10 * 365 * 86400), "run-1")
