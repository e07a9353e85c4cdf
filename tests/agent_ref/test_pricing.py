"""Pricing: an exact table by model id, cache and server-tool fees (spec/agent-ref.md §5.3, issue 12 §5)."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_ref.models.core import DEFAULT_CLAUDE_MODEL
from agent_ref.models.pricing import PRICES, PRICES_AS_OF, LongContext, Price, cost_usd, price_for
from agent_ref.models.scripted import SCRIPTED_MODEL
from agent_ref.store.state import Usage


class FullUsage(Usage, kw_only=True):
    """``Usage`` with the fields the agent's usage gains (the 1-hour cache part, server tools)."""

    cache_creation_1h_input_tokens: int = 0
    web_search_requests: int = 0
    web_fetch_requests: int = 0


def test_spec_5_3_exact_ids_only_no_family_guess() -> None:
    """A newer model of a family is unknown, not priced as an older one [R5.3-a]."""
    assert price_for("claude-opus-4-9") is None  # was priced as claude-opus-4 ($15/$75) by prefix
    assert price_for("claude-sonnet-4-5-20991231") is None  # an unlisted snapshot
    assert price_for("claude-opus-4") is None  # not an API id
    assert cost_usd("claude-opus-4-9", Usage(input_tokens=1_000_000)) is None
    assert cost_usd("gpt-4o", Usage(input_tokens=1)) is None


@pytest.mark.parametrize(
    ("alias", "snapshot"),
    [
        ("claude-opus-4-5", "claude-opus-4-5-20251101"),
        ("claude-sonnet-4-5", "claude-sonnet-4-5-20250929"),
        ("claude-haiku-4-5", "claude-haiku-4-5-20251001"),
        ("claude-opus-4-1", "claude-opus-4-1-20250805"),
        ("claude-opus-4-0", "claude-opus-4-20250514"),
        ("claude-sonnet-4-0", "claude-sonnet-4-20250514"),
    ],
)
def test_spec_5_3_aliases_and_snapshots_are_listed(alias: str, snapshot: str) -> None:
    """Each alias and its dated snapshot id are listed explicitly, at one price [R5.3-a]."""
    assert alias in PRICES
    assert snapshot in PRICES
    assert PRICES[alias] == PRICES[snapshot]


@pytest.mark.parametrize(
    ("model", "input_", "output"),
    [
        ("claude-opus-4-5", 5.0, 25.0),  # Opus 4.5 cut the price: not Opus 4's 15/75
        ("claude-opus-4-6", 5.0, 25.0),
        ("claude-opus-4-1", 15.0, 75.0),
        ("claude-opus-5-5", 4.0, 20.0),
        ("claude-sonnet-5", 2.0, 10.0),
        ("claude-sonnet-4-6", 3.0, 15.0),
        ("claude-haiku-4-5", 1.0, 5.0),
        ("claude-fable-5-1", 10.0, 50.0),
    ],
)
def test_spec_5_3_list_prices(model: str, input_: float, output: float) -> None:
    """Rows of the published list, one per family change [R5.3-a]."""
    price = PRICES[model]
    assert (price.input, price.output) == (input_, output)


def test_spec_5_3_the_agents_default_model_is_priced() -> None:
    """The CLI's default Claude model has a price, so ``--max-budget`` works with it [R5.3-a]."""
    price = price_for(DEFAULT_CLAUDE_MODEL)
    assert price is not None
    assert (price.input, price.output) == (3.0, 15.0)


def test_spec_5_3_table_is_dated() -> None:
    """The table carries the date of the price list it was read from."""
    assert dt.date.fromisoformat(PRICES_AS_OF) <= dt.datetime.now(dt.UTC).date()


def test_spec_5_3_scripted_model_costs_nothing() -> None:
    """The offline model is priced at 0, server tools included [R5.3-a]."""
    usage = FullUsage(input_tokens=10**6, output_tokens=10**6, cache_read_input_tokens=10**6, web_search_requests=50)
    assert cost_usd(SCRIPTED_MODEL, usage) == 0.0


def test_spec_5_3_input_output_and_cache_multipliers() -> None:
    """5-minute writes 1.25x input, 1-hour writes 2x, reads 0.1x (Sonnet 4.6: $3 input) [R5.3-a]."""
    m = "claude-sonnet-4-6"
    assert cost_usd(m, Usage(input_tokens=1_000_000)) == 3.0
    assert cost_usd(m, Usage(output_tokens=1_000_000)) == 15.0
    assert cost_usd(m, Usage(cache_creation_input_tokens=1_000_000)) == 3.75
    assert cost_usd(m, Usage(cache_read_input_tokens=1_000_000)) == pytest.approx(0.3)


def test_spec_5_3_one_hour_cache_writes_cost_twice_input() -> None:
    """The 1-hour part of the cache writes is priced at 2x input, the rest at 1.25x [R5.3-a]."""
    m = "claude-sonnet-4-6"
    all_1h = FullUsage(cache_creation_input_tokens=1_000_000, cache_creation_1h_input_tokens=1_000_000)
    assert cost_usd(m, all_1h) == 6.0  # was 3.75: priced as 5-minute writes
    half = FullUsage(cache_creation_input_tokens=1_000_000, cache_creation_1h_input_tokens=500_000)
    assert cost_usd(m, half) == pytest.approx(1.875 + 3.0)
    # An inconsistent count (more 1-hour than all writes) is capped at all writes.
    assert cost_usd(m, FullUsage(cache_creation_input_tokens=10, cache_creation_1h_input_tokens=99)) == cost_usd(
        m, FullUsage(cache_creation_input_tokens=10, cache_creation_1h_input_tokens=10)
    )


def test_spec_5_3_model_specific_cache_read_rates() -> None:
    """Reads are not always 0.1x: the table keeps each model's published read rate [R5.3-a]."""
    assert PRICES["claude-fable-5-1"].cache_read == 0.25  # 0.025x
    assert PRICES["claude-opus-5-5"].cache_read == 0.20  # 0.05x
    assert PRICES["claude-3-haiku-20240307"].cache_write_5m == 0.30  # not 1.25x
    assert PRICES["claude-opus-4-5"].cache_write_1h == 10.0


def test_spec_5_3_web_search_fee_and_free_web_fetch() -> None:
    """Web search: $10 per 1,000 searches; web fetch: tokens only [R5.3-a]."""
    m = "claude-sonnet-4-6"
    assert cost_usd(m, FullUsage(web_search_requests=1_000)) == 10.0  # was 0: ignored
    assert cost_usd(m, FullUsage(web_search_requests=3)) == pytest.approx(0.03)
    assert cost_usd(m, FullUsage(web_fetch_requests=1_000)) == 0.0


def test_spec_5_3_new_fields_default_to_zero() -> None:
    """A usage without the new fields (an older ``state.Usage``) is priced from what it has."""
    assert cost_usd("claude-haiku-4-5", Usage(input_tokens=2_000_000, output_tokens=1_000_000)) == 7.0


def test_spec_5_3_long_context_tier_is_per_request() -> None:
    """Sonnet 4.5: a prompt over 200K tokens bills all of that request at $6 / $22.50 [R5.3-a]."""
    m = "claude-sonnet-4-5"
    assert cost_usd(m, Usage(input_tokens=200_000, output_tokens=1_000)) == pytest.approx(0.6 + 0.015)
    over = Usage(input_tokens=150_000, cache_read_input_tokens=50_001, output_tokens=1_000)
    assert cost_usd(m, over) == pytest.approx((150_000 * 6 + 50_001 * 0.6 + 1_000 * 22.5) / 1e6)
    # Models without a tier never switch.
    assert cost_usd("claude-sonnet-4-6", Usage(input_tokens=1_000_000)) == 3.0


def test_price_keeps_its_keyword_constructor_and_old_name() -> None:
    """``Price(input=, output=)`` still works; ``cache_write`` is the 5-minute rate."""
    price = Price(input=2.0, output=8.0)
    assert (price.cache_write, price.cache_write_5m, price.cache_write_1h, price.cache_read) == (2.5, 2.5, 4.0, 0.2)
    tiered = Price(1.0, 2.0, long_context=LongContext(10, Price(5.0, 5.0)))
    assert cost_usd("x", Usage(input_tokens=11), {"x": tiered}) == pytest.approx(55 / 1e6)


def test_overrides_replace_the_table() -> None:
    """``prices=`` is the whole table: a model missing from it is unknown."""
    assert cost_usd("claude-sonnet-4-6", Usage(input_tokens=1), {"scripted": PRICES["scripted"]}) is None


@given(
    st.sampled_from(sorted(PRICES)),
    st.integers(0, 10**7),
    st.integers(0, 10**7),
    st.integers(0, 10**7),
    st.integers(0, 10**7),
    st.integers(0, 10**7),
    st.integers(0, 10**4),
)
def test_cost_is_monotone_in_every_count(
    model: str, inp: int, out: int, write: int, write_1h: int, read: int, searches: int
) -> None:
    """More of anything never costs less, and a cost is never negative (within one tier)."""
    base = FullUsage(
        input_tokens=inp,
        output_tokens=out,
        cache_creation_input_tokens=write,
        cache_creation_1h_input_tokens=min(write_1h, write),
        cache_read_input_tokens=read,
        web_search_requests=searches,
    )
    cost = cost_usd(model, base)
    assert cost is not None
    assert cost >= 0
    more = FullUsage(
        input_tokens=inp,
        output_tokens=out + 1,
        cache_creation_input_tokens=write,
        cache_creation_1h_input_tokens=min(write_1h, write),
        cache_read_input_tokens=read,
        web_search_requests=searches + 1,
    )
    more_cost = cost_usd(model, more)
    assert more_cost is not None
    assert more_cost >= cost
