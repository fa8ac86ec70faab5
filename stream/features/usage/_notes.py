"""Each evaluated event's usage, as the recorder keeps it: its token counts, durations, cost and finish reason
(an :class:`~streameval.feature.Annotator`, so the cost is computed once, where the event is at hand)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from ...models import GradedResult, RequestEvent
from ...usage_figures import SLICE_REASONS
from ._prices import PricesConfig, call_cost

__all__ = ["FINISH_REASONS", "KEY", "OTHER", "Usage", "UsageAnnotator"]

#: the annotator's slot in Outcome.annotations
KEY = "usage"

#: finish reasons kept by name (OpenAI, Anthropic, Gemini, OpenTelemetry GenAI); any other counts as
#: ``(other)``: producers choose the text, and the window keeps one figure per name (the names and their
#: places in a slice's usage figures are one list, streameval.usage_figures.SLICE_REASONS)
FINISH_REASONS = frozenset(SLICE_REASONS[:-1])
OTHER = SLICE_REASONS[-1]


class Usage(NamedTuple):
    """One event's usage note (None fields: not said)."""

    input_tokens: int
    output_tokens: int
    cached_input_tokens: int
    reasoning_tokens: int
    duration_ms: float | None
    time_to_first_token_ms: float | None
    cost: float | None
    finish_reason: str | None


class UsageAnnotator:
    """Notes each event's usage and its cost by ``prices`` (None: no table; only a producer's own cost)."""

    key = KEY

    def __init__(self, prices: PricesConfig | None) -> None:
        self.prices = prices
        self.currency = prices.currency if prices is not None else None

    def annotate(self, evaluated: Sequence[tuple[RequestEvent, GradedResult, Any]]) -> Sequence[Any]:
        return [self.note(event) for event, _, _ in evaluated]

    def note(self, event: RequestEvent) -> Usage | None:
        usage = event.usage
        if usage is None:
            return None
        price = self.prices.price(event.model) if self.prices is not None else None
        reason = usage.finish_reason
        return Usage(
            usage.input_tokens or 0,
            usage.output_tokens or 0,
            usage.cached_input_tokens or 0,
            usage.reasoning_tokens or 0,
            usage.duration_ms,
            usage.time_to_first_token_ms,
            call_cost(usage, price, self.currency),
            None if reason is None else reason if reason in FINISH_REASONS else OTHER,
        )

    def step(self, document: dict[str, Any], now: float) -> Any:
        return None  # an agent run's steps are not model calls of their own
