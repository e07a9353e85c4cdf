"""A small price table and the cost of a usage, in US dollars.

Owns: prices per million tokens for the models this reference knows, matched by
longest name prefix so dated snapshots (``claude-sonnet-4-5-20250929``) find their
family (spec ``spec/agent-ref.md`` §5.3). Prices are list prices as published by
Anthropic when this table was written; they change, so the table is overridable
(``Agent(prices=...)``) and an unknown model has no cost (``None``), never a guess.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Mapping

    from .state import Usage

__all__ = ["PRICES", "Price", "cost_usd", "price_for"]


@dataclass(frozen=True, slots=True)
class Price:
    """US dollars per million tokens. Cache writes cost 1.25x input, cache reads 0.1x (5-minute cache)."""

    input: float
    output: float

    @property
    def cache_write(self) -> float:
        """Price of a million cache-write input tokens."""
        return self.input * 1.25

    @property
    def cache_read(self) -> float:
        """Price of a million cache-read input tokens."""
        return self.input * 0.1


PRICES: Final[Mapping[str, Price]] = {
    "claude-opus-4-5": Price(5.0, 25.0),
    "claude-opus-4-1": Price(15.0, 75.0),
    "claude-opus-4": Price(15.0, 75.0),
    "claude-sonnet-4-5": Price(3.0, 15.0),
    "claude-sonnet-4": Price(3.0, 15.0),
    "claude-3-7-sonnet": Price(3.0, 15.0),
    "claude-haiku-4-5": Price(1.0, 5.0),
    "claude-3-5-haiku": Price(0.8, 4.0),
    "claude-3-haiku": Price(0.25, 1.25),
    # The embedded offline model costs nothing; it is priced so that budgets work with it.
    "scripted": Price(0.0, 0.0),
}


def price_for(model: str, prices: Mapping[str, Price] = PRICES) -> Price | None:
    """The price of ``model``: exact name, else the longest prefix in ``prices``, else ``None``."""
    if model in prices:
        return prices[model]
    best = max((name for name in prices if model.startswith(name)), key=len, default=None)
    return prices[best] if best is not None else None


def cost_usd(model: str, usage: Usage, prices: Mapping[str, Price] = PRICES) -> float | None:
    """Cost of ``usage`` on ``model``, or ``None`` when the model has no price."""
    price = price_for(model, prices)
    if price is None:
        return None
    total = (
        usage.input_tokens * price.input
        + usage.output_tokens * price.output
        + usage.cache_creation_input_tokens * price.cache_write
        + usage.cache_read_input_tokens * price.cache_read
    )
    return round(total / 1_000_000, 8)
