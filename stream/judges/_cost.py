"""Money: per-judge prices (per million input and output tokens) turned into cost counters.

A judge with ``price_input_per_mtok`` / ``price_output_per_mtok`` gets a ``{judge}.cost`` window
counter (added into Redis with the others) for the tokens of the calls made, consistency repeats
included; cache hits cost nothing. Without prices there is no cost counter: nothing is guessed.
"""

from __future__ import annotations

from collections.abc import Mapping

from ._config import JudgeConfig

__all__ = ["add_costs", "prices_of", "token_cost"]


def token_cost(price: tuple[float, float], prompt_tokens: float, completion_tokens: float) -> float:
    """``(input price, output price)`` per million tokens × tokens."""
    return (prompt_tokens * price[0] + completion_tokens * price[1]) / 1_000_000


def prices_of(judges: Mapping[str, JudgeConfig]) -> dict[str, tuple[float, float]]:
    """``{name: (input, output)}`` of the judges that have a price (a missing one of the two counts as 0)."""
    return {
        name: (cfg.price_input_per_mtok or 0.0, cfg.price_output_per_mtok or 0.0)
        for name, cfg in judges.items()
        if cfg.price_input_per_mtok is not None or cfg.price_output_per_mtok is not None
    }


def add_costs(counters: dict[str, float], prices: Mapping[str, tuple[float, float]]) -> None:
    """Add ``{judge}.cost`` to window counters that hold ``{judge}.prompt_tokens`` / ``.completion_tokens``
    (the worker's ``streameval_judge_cost{judge}`` metric observes it: :func:`streameval.telemetry.observe_outcomes`)."""
    for name, price in prices.items():
        cost = token_cost(
            price, counters.get(f"{name}.prompt_tokens", 0.0), counters.get(f"{name}.completion_tokens", 0.0)
        )
        if cost:
            counters[f"{name}.cost"] = counters.get(f"{name}.cost", 0.0) + cost
