"""The suite file's ``prices:`` table and what one call costs by it (docs/usage.md).

.. code-block:: yaml

    prices:
      currency: USD
      models:                       # model name or glob -> price per million tokens; first match wins
        "gpt-4o-mini*": {input: 0.15, output: 0.60, cached_input: 0.075}
        "my-local-*": {input: 0, output: 0}
    # or the table in a file of its own (path relative to the suite file), with the same two keys:
    # prices: {file: prices.yaml}

Token convention (OpenAI's usage objects and the OpenTelemetry GenAI conventions): cached input tokens are
a part of the input tokens and reasoning tokens a part of the output tokens. So a call costs
``(input - cached) × input + cached × cached_input + (output - reasoning) × output + reasoning × reasoning``
(each price per million tokens); ``cached_input`` defaults to ``input`` and ``reasoning`` to ``output``.
"""

from __future__ import annotations

import fnmatch
import math
import re
from collections.abc import Iterator, Sequence

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator, model_validator

from ...blocks import UsageBlock

__all__ = ["CURRENCIES", "Price", "PricesConfig", "call_cost", "price_issues"]

#: ISO 4217 codes of current currencies (a price in another one is refused: a typo must not go unseen)
CURRENCIES = frozenset(
    """AED AFN ALL AMD ANG AOA ARS AUD AWG AZN BAM BBD BDT BGN BHD BIF BMD BND BOB BRL BSD BTN BWP BYN BZD CAD
    CDF CHF CLP CNY COP CRC CUP CVE CZK DJF DKK DOP DZD EGP ERN ETB EUR FJD FKP GBP GEL GHS GIP GMD GNF GTQ GYD
    HKD HNL HTG HUF IDR ILS INR IQD IRR ISK JMD JOD JPY KES KGS KHR KMF KPW KRW KWD KYD KZT LAK LBP LKR LRD LSL
    LYD MAD MDL MGA MKD MMK MNT MOP MRU MUR MVR MWK MXN MYR MZN NAD NGN NIO NOK NPR NZD OMR PAB PEN PGK PHP PKR
    PLN PYG QAR RON RSD RUB RWF SAR SBD SCR SDG SEK SGD SHP SLE SOS SRD SSP STN SVC SYP SZL THB TJS TMT TND TOP
    TRY TTD TWD TZS UAH UGX USD UYU UZS VES VND VUV WST XAF XCD XOF XPF YER ZAR ZMW ZWG""".split()
)

#: the most a price per million tokens may be (any currency): more is a typo (a price per token, say)
MAX_PRICE = 1_000_000.0


class Price(BaseModel):
    """One model's prices per million tokens."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    input: float = Field(ge=0.0, le=MAX_PRICE, description="per million input tokens (uncached)")
    output: float = Field(ge=0.0, le=MAX_PRICE, description="per million output tokens (not reasoning)")
    cached_input: float | None = Field(
        default=None, ge=0.0, le=MAX_PRICE, description="per million cached input tokens; default: input"
    )
    reasoning: float | None = Field(
        default=None, ge=0.0, le=MAX_PRICE, description="per million reasoning tokens; default: output"
    )


class PricesConfig(BaseModel):
    """The ``prices:`` section: a currency and the table, inline (``models``) or in a file (``file``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    currency: str | None = Field(default=None, description="ISO 4217 code, e.g. USD (required with models)")
    models: dict[str, Price] | None = Field(
        default=None, description="model name or glob -> prices per million tokens; the first match wins"
    )
    file: str | None = Field(
        default=None, description="a YAML file holding currency and models (relative to the suite file)"
    )
    _found: dict[str, Price | None] = PrivateAttr(default_factory=dict)

    @field_validator("currency")
    @classmethod
    def _known_currency(cls, value: str | None) -> str | None:
        if value is not None and value not in CURRENCIES:
            raise ValueError(f"unknown currency {value!r}: an ISO 4217 code such as USD, EUR, CNY")
        return value

    @field_validator("models")
    @classmethod
    def _patterns(cls, models: dict[str, Price] | None) -> dict[str, Price] | None:
        for pattern in models or {}:
            if not pattern or len(pattern) > 256:
                raise ValueError(f"model pattern {pattern!r} must have 1 to 256 characters")
        return models

    @model_validator(mode="after")
    def _one_source(self) -> PricesConfig:
        if self.file is not None:
            if self.models is not None or self.currency is not None:
                raise ValueError("give the table inline (currency, models) or in a file (file), not both")
        elif self.models is None or self.currency is None:
            raise ValueError("needs currency and models (or file: a file holding them)")
        return self

    def price(self, model: str) -> Price | None:
        """The first entry matching ``model`` (None: the model has no price)."""
        cache = self._found
        if model in cache:
            return cache[model]
        if len(cache) >= 4096:  # models come from producers: bounded; the globs are matched once per model
            cache.clear()
        found = cache[model] = next(
            (price for pattern, price in self.table.items() if fnmatch.fnmatchcase(model, pattern)), None
        )
        return found

    @property
    def table(self) -> dict[str, Price]:
        return self.models or {}


def call_cost(usage: UsageBlock, price: Price | None, currency: str | None) -> float | None:
    """What one call cost in ``currency`` (module docstring): the producer's ``usage.cost`` when it is in
    that currency (or names none), else by ``price``; None when neither says (no price, no token count)."""
    if usage.cost is not None and (usage.currency is None or usage.currency == currency):
        return usage.cost
    if price is None or (usage.input_tokens is None and usage.output_tokens is None):
        return None
    cached = usage.cached_input_tokens or 0
    reasoning = usage.reasoning_tokens or 0
    inputs = max(usage.input_tokens or 0, cached)  # cached tokens are part of the input tokens
    outputs = max(usage.output_tokens or 0, reasoning)  # reasoning tokens are part of the output tokens
    cached_price = price.input if price.cached_input is None else price.cached_input
    reasoning_price = price.output if price.reasoning is None else price.reasoning
    total = (
        (inputs - cached) * price.input
        + cached * cached_price
        + (outputs - reasoning) * price.output
        + reasoning * reasoning_price
    )
    cost = total / 1_000_000
    return cost if math.isfinite(cost) else None


_WILD = re.compile(r"[*?\[]")


def _literal_prefix(pattern: str) -> str:
    found = _WILD.search(pattern)
    return pattern if found is None else pattern[: found.start()]


def _overlap(price_pattern: str, route: str) -> bool:
    """Whether some model name may match both globs (exact for literals; by literal prefixes otherwise)."""
    if fnmatch.fnmatchcase(route, price_pattern) or fnmatch.fnmatchcase(price_pattern, route):
        return True
    if _WILD.search(price_pattern) and _WILD.search(route):
        a, b = _literal_prefix(price_pattern), _literal_prefix(route)
        return a.startswith(b) or b.startswith(a)
    return False


def price_issues(
    prices: PricesConfig, routes: Sequence[Sequence[str] | None], base: tuple[str | int, ...] = ("prices",)
) -> Iterator[tuple[tuple[str | int, ...], str]]:
    """Entries that match nothing: no suite can take an event of a model the entry prices. ``routes``: each
    suite's ``match.model`` globs (None: the suite takes any model, and then every entry may match)."""
    if any(r is None for r in routes):
        return
    named: list[str] = [g for r in routes if r is not None for g in r]
    for pattern in prices.table:
        if not any(_overlap(pattern, route) for route in named):
            listed = ", ".join(named[:10]) or "none"
            yield (
                (*base, "models", pattern),
                f"{pattern!r} matches no model the suites take (their match.model: {listed})",
            )
