"""Live signals of a running worker, owned by the composition root and passed to what reads them.

The Faust agent (:mod:`streameval.agents.app`) updates the consumer lag after each batch; the judges'
backpressure (:class:`~streameval.judges.Backpressure`) reads it through the ``lag`` callable the
worker's :class:`~streameval.pipeline.Pipeline` was built with. Metrics are an output only: nothing
reads a signal back out of the Prometheus registry.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar

__all__ = ["CHECK_DEADLINE", "CheckDeadline", "ConsumerLag", "no_lag"]


class CheckDeadline:
    """When a synchronous check must answer (``at``, a ``time.monotonic()``), and whether a step was cut
    short by it (``cut``: the check then did not finish in time, whatever the clock says after)."""

    __slots__ = ("at", "cut")

    def __init__(self, at: float) -> None:
        self.at = at
        self.cut = False


#: the deadline of the check running in this context (streameval.features.guard sets it around one check;
#: None elsewhere): evaluators with a per-call time limit (``regex``) shorten it to what is left
CHECK_DEADLINE: ContextVar[CheckDeadline | None] = ContextVar("streameval_check_deadline", default=None)


def no_lag() -> int:
    """The lag of a reader that is not a consumer (offline evaluation, tests): 0."""
    return 0


class ConsumerLag:
    """This worker's consumer lag: messages behind the high watermark, per (topic, partition) it read."""

    def __init__(self) -> None:
        self._lags: dict[tuple[str, int], int] = {}

    def update(self, lags: Mapping[tuple[str, int], int]) -> None:
        """The latest lag of each partition in ``lags``; the others keep theirs."""
        self._lags.update(lags)

    def total(self) -> int:
        """The sum over the partitions this worker has read."""
        return sum(self._lags.values())
