"""An exact price table keyed by model id, and the cost of one usage in US dollars.

Owns: the list prices of the models this reference knows (``PRICES``, as published by
Anthropic on the date ``PRICES_AS_OF``), the lookup ``price_for`` and the arithmetic
``cost_usd`` (spec ``spec/agent-ref.md`` §5.3).
Does not own: summing usage over calls (``state.Usage``) or budgets (``agent.py``).

Rules, each tested in ``tests/agent_ref/test_pricing.py``:

* The table is keyed by the exact model id: every alias (``claude-opus-4-5``) and every
  dated snapshot id (``claude-opus-4-5-20251101``) is listed on its own. There is no
  prefix or family matching: ``claude-opus-4-9`` is not priced as ``claude-opus-4`` (the
  guess that priced a newer Opus at the older Opus's triple price). An unknown model has
  an unknown cost, ``None``; ``Agent(prices=...)`` adds or overrides entries.
* Input tokens at the input rate, output tokens at the output rate; cache writes at
  1.25x input for the 5-minute cache and 2x input for the 1-hour cache
  (``usage.cache_creation_1h_input_tokens`` is the 1-hour part of
  ``cache_creation_input_tokens``); cache reads at the model's read rate (0.1x input for
  most models, less for some: the table gives each model's published rate).
* Server tools: web search costs $10 per 1,000 searches (``usage.web_search_requests``);
  web fetch has no fee beyond the tokens it adds (``usage.web_fetch_requests``, $0).
  Code execution is billed per container-hour, which the usage does not report: it is
  not in the cost (stated, not guessed).
* Long context: for Claude Sonnet 4 and Sonnet 4.5, a request whose prompt (input plus
  cache writes plus cache reads) is over 200,000 tokens is billed at $6 / $22.50 for all
  of its tokens. The tier is per request, so ``cost_usd`` prices *one call's* usage
  exactly; pricing the sum of several calls is exact for every model without a tier.
* Not modelled (request options the usage does not carry): the Batch API's 50% discount,
  data-residency and fast-mode surcharges. A run using them is mispriced by that factor.
* The embedded offline model (``scripted``) costs nothing, so budgets work offline.

Source: Anthropic's pricing page (https://platform.claude.com/docs/en/about-claude/pricing)
and the model pages it links, read on ``PRICES_AS_OF``. Models whose prices were not
found there (``claude-fable-5-2``, ``claude-mythos-5-2``, ``claude-haiku-5-5``, whose
price depends on the prompt length, ``claude-mythos-preview``) are deliberately absent:
they cost ``None`` until someone adds their published price.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ..store.state import Usage

__all__ = ["PRICES", "PRICES_AS_OF", "LongContext", "Price", "cost_usd", "price_for"]

#: The date the table was read from Anthropic's public price list (ISO 8601).
PRICES_AS_OF: Final = "2026-11-24"

#: Multipliers of the input rate for prompt-cache writes (5-minute and 1-hour) and reads.
CACHE_WRITE_5M: Final = 1.25
CACHE_WRITE_1H: Final = 2.0
CACHE_READ: Final = 0.1

#: US dollars per 1,000 web searches (the web search server tool).
WEB_SEARCH_PER_1K: Final = 10.0


@dataclass(frozen=True, slots=True, init=False)
class Price:
    """US dollars per million tokens for one model, plus its server-tool fees.

    Attributes:
        input: base input tokens.
        output: output tokens.
        cache_write_5m: 5-minute cache writes (1.25x input unless given).
        cache_write_1h: 1-hour cache writes (2x input unless given).
        cache_read: cache hits and refreshes (0.1x input unless given).
        web_search_per_1k: dollars per 1,000 web searches.
        web_fetch_per_1k: dollars per 1,000 web fetches (0: only the tokens cost).
        long_context: the higher tier for long prompts, or ``None``.
    """

    input: float
    output: float
    cache_write_5m: float
    cache_write_1h: float
    cache_read: float
    web_search_per_1k: float
    web_fetch_per_1k: float
    long_context: LongContext | None

    def __init__(
        self,
        input: float,
        output: float,
        *,
        cache_write_5m: float | None = None,
        cache_write_1h: float | None = None,
        cache_read: float | None = None,
        web_search_per_1k: float = WEB_SEARCH_PER_1K,
        web_fetch_per_1k: float = 0.0,
        long_context: LongContext | None = None,
    ) -> None:
        """A price; the cache rates default to the standard multipliers of ``input``."""
        set_ = object.__setattr__  # frozen: the only writes are here
        set_(self, "input", input)
        set_(self, "output", output)
        set_(self, "cache_write_5m", input * CACHE_WRITE_5M if cache_write_5m is None else cache_write_5m)
        set_(self, "cache_write_1h", input * CACHE_WRITE_1H if cache_write_1h is None else cache_write_1h)
        set_(self, "cache_read", input * CACHE_READ if cache_read is None else cache_read)
        set_(self, "web_search_per_1k", web_search_per_1k)
        set_(self, "web_fetch_per_1k", web_fetch_per_1k)
        set_(self, "long_context", long_context)

    @property
    def cache_write(self) -> float:
        """The 5-minute cache-write rate (the name this field had before the 1-hour rate)."""
        return self.cache_write_5m


@dataclass(frozen=True, slots=True)
class LongContext:
    """A request whose prompt is over ``above_tokens`` is billed at ``price`` for all its tokens.

    Attributes:
        above_tokens: the threshold on input + cache-write + cache-read tokens of one request.
        price: the rates that then apply (output included).
    """

    above_tokens: int
    price: Price


def _aliases(price: Price, *ids: str) -> dict[str, Price]:
    return dict.fromkeys(ids, price)


_FABLE_5_1: Final = Price(10.0, 50.0, cache_read=0.25)  # reads 0.025x input (pricing page)
_FABLE_5: Final = Price(10.0, 50.0)
_OPUS_5_5: Final = Price(4.0, 20.0, cache_read=0.20)  # reads 0.05x input (model page)
_OPUS_5: Final = Price(5.0, 25.0)
_OPUS_4: Final = Price(15.0, 75.0)
_SONNET_5: Final = Price(2.0, 10.0)
_SONNET_4_LONG: Final = LongContext(200_000, Price(6.0, 22.5))
_SONNET_4: Final = Price(3.0, 15.0, long_context=_SONNET_4_LONG)
_SONNET_FLAT: Final = Price(3.0, 15.0)
_HAIKU_4_5: Final = Price(1.0, 5.0)
_HAIKU_3_5: Final = Price(0.8, 4.0)
_HAIKU_3: Final = Price(0.25, 1.25, cache_write_5m=0.30, cache_write_1h=0.50, cache_read=0.03)

#: Exact model id -> price, from Anthropic's public price list on ``PRICES_AS_OF``.
PRICES: Final[Mapping[str, Price]] = {
    **_aliases(_FABLE_5_1, "claude-fable-5-1", "claude-mythos-5-1"),
    **_aliases(_FABLE_5, "claude-fable-5", "claude-mythos-5"),
    **_aliases(_OPUS_5_5, "claude-opus-5-5"),
    **_aliases(
        _OPUS_5,
        "claude-opus-5",
        "claude-opus-4-8",
        "claude-opus-4-7",
        "claude-opus-4-6",
        "claude-opus-4-5",
        "claude-opus-4-5-20251101",
    ),
    **_aliases(_OPUS_4, "claude-opus-4-1", "claude-opus-4-1-20250805", "claude-opus-4-0", "claude-opus-4-20250514"),
    # Sonnet 5.5's page lists $2 / $10 with $0.20 reads; a cut of reads to $0.10 on
    # 2026-10-07 is reported elsewhere but was not on the pages read: not applied.
    **_aliases(_SONNET_5, "claude-sonnet-5-5", "claude-sonnet-5"),
    **_aliases(_SONNET_FLAT, "claude-sonnet-4-6"),
    **_aliases(
        _SONNET_4, "claude-sonnet-4-5", "claude-sonnet-4-5-20250929", "claude-sonnet-4-0", "claude-sonnet-4-20250514"
    ),
    **_aliases(_SONNET_FLAT, "claude-3-7-sonnet-latest", "claude-3-7-sonnet-20250219"),
    **_aliases(_HAIKU_4_5, "claude-haiku-4-5", "claude-haiku-4-5-20251001"),
    **_aliases(_HAIKU_3_5, "claude-3-5-haiku-latest", "claude-3-5-haiku-20241022"),
    **_aliases(_HAIKU_3, "claude-3-haiku-20240307"),
    # The embedded offline model costs nothing; it is priced so that budgets work with it.
    "scripted": Price(0.0, 0.0, web_search_per_1k=0.0),
}


def price_for(model: str, prices: Mapping[str, Price] = PRICES) -> Price | None:
    """The price of exactly ``model`` in ``prices``, or ``None`` (never a family's price).

    Args:
        model: the model id as sent to the API.
        prices: the table (``PRICES`` or an ``Agent(prices=...)`` override).

    Returns:
        The entry for ``model``; ``None`` when it has none.
    """
    return prices.get(model)


def cost_usd(model: str, usage: Usage, prices: Mapping[str, Price] = PRICES) -> float | None:
    """Cost in US dollars of ``usage`` on ``model``, or ``None`` when the model has no price.

    The long-context tier is decided per request, so give the usage of one call for an
    exact result on a tiered model (the sum of the calls' costs is then exact too).
    New usage fields are read with ``getattr`` and count 0 when absent:
    ``cache_creation_1h_input_tokens`` (the 1-hour part of ``cache_creation_input_tokens``,
    at most all of it), ``web_search_requests`` and ``web_fetch_requests``.

    Args:
        model: the model id.
        usage: token and request counts, as ``state.Usage`` holds them.
        prices: the table.

    Returns:
        Dollars rounded to 8 decimals, or ``None`` for a model without a price.
    """
    price = price_for(model, prices)
    if price is None:
        return None
    written = usage.cache_creation_input_tokens
    prompt = usage.input_tokens + written + usage.cache_read_input_tokens
    tier = price.long_context
    if tier is not None and prompt > tier.above_tokens:
        price = tier.price
    written_1h = min(max(int(getattr(usage, "cache_creation_1h_input_tokens", 0) or 0), 0), written)
    tokens = (
        usage.input_tokens * price.input
        + usage.output_tokens * price.output
        + (written - written_1h) * price.cache_write_5m
        + written_1h * price.cache_write_1h
        + usage.cache_read_input_tokens * price.cache_read
    )
    searches = int(getattr(usage, "web_search_requests", 0) or 0)
    fetches = int(getattr(usage, "web_fetch_requests", 0) or 0)
    fees = searches * price.web_search_per_1k + fetches * price.web_fetch_per_1k
    return round(tokens / 1_000_000 + fees / 1_000, 8)
