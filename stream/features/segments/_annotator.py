"""Each evaluated event's value in every dimension of ``segments:`` (streameval.feature ``SLICES``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...feature import SLICES
from ...models import GradedResult, RequestEvent
from ._config import Dimension, event_slices

__all__ = ["SlicesAnnotator"]


class SlicesAnnotator:
    """Notes a tuple of values per event, one per dimension in the suite file's order (an agent run's steps are
    not evaluated: none)."""

    key = SLICES

    def __init__(self, dimensions: Sequence[Dimension]) -> None:
        self.dimensions = tuple(dimensions)

    def annotate(self, evaluated: Sequence[tuple[RequestEvent, GradedResult, Any]]) -> Sequence[Any]:
        return [event_slices(self.dimensions, event) for event, _, _ in evaluated]

    def step(self, document: dict[str, Any], now: float) -> Any:
        return None
