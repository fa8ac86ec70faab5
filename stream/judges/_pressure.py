"""Backpressure: a suite judges a smaller share of its events while the worker falls behind.

A suite's ``judge.backpressure`` block sets bounds on the consumer lag (messages behind the input
topic's high watermark, summed over this worker's partitions) and on the judge queue (requests of this
suite's judges waiting for a slot). At most once per ``interval_s``:

- when a bound is exceeded, the level goes up by one: the judged share halves;
- when both signals are under half their bounds, it goes down by one: the share doubles back;
- the share never falls under ``min_share``.

An event is judged when ``H(id) < sample_rate × share``, with ``H`` the same event-id hash as
sampling, so the events judged at a low level are a subset of those judged at a higher one, and a
replay at the same level makes the same choices. An event left out gets a judge block with status
``unsampled`` and a reason starting ``skipped: backpressure``; it is counted in
``streameval_judge_backpressure_skips_total{suite}`` and the window counter
``skip:backpressure``. The current share is the gauge ``streameval_judge_judged_share{suite}``.

The consumer lag is the ``lag`` callable the worker passes in (:class:`streameval.signals.ConsumerLag`);
without one (offline) it is 0.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from prometheus_client import Counter, Gauge
from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..signals import no_lag

__all__ = ["BACKPRESSURE_SKIPS", "JUDGED_SHARE", "Backpressure", "BackpressureConfig"]

JUDGED_SHARE = Gauge(
    "streameval_judge_judged_share",
    "share of a suite's sampled events that are judged (1 unless backpressure lowered it)",
    ["suite"],
)
BACKPRESSURE_SKIPS = Counter(
    "streameval_judge_backpressure_skips", "sampled events not judged because of backpressure", ["suite"]
)


class BackpressureConfig(BaseModel):
    """A suite's ``judge.backpressure`` block."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_lag: int | None = Field(
        default=None, ge=1, description="consumer lag (messages) over which the share halves"
    )
    max_queue: int | None = Field(
        default=None, ge=1, description="judge requests waiting for a slot over which the share halves"
    )
    min_share: float = Field(default=0.05, gt=0.0, le=1.0, description="the lowest judged share")
    interval_s: float = Field(default=1.0, gt=0.0, description="at most one change of level per interval")

    @model_validator(mode="after")
    def _a_bound(self) -> BackpressureConfig:
        if self.max_lag is None and self.max_queue is None:
            raise ValueError("backpressure needs max_lag and/or max_queue")
        return self


class Backpressure:
    """One suite's level; :meth:`share` is called per event and re-reads the signals once per interval."""

    def __init__(
        self,
        suite: str,
        config: BackpressureConfig,
        *,
        queued: Callable[[], int],
        lag: Callable[[], int] = no_lag,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.suite = suite
        self.config = config
        self.queued = queued
        self.lag = lag
        self.clock = clock
        self.level = 0
        self.why = ""
        self._next = 0.0
        self._lowest = max(0, _levels_to(config.min_share))
        self._gauge = JUDGED_SHARE.labels(suite)
        self._gauge.set(1.0)
        self._skips = BACKPRESSURE_SKIPS.labels(suite)

    @property
    def current(self) -> float:
        return max(self.config.min_share, 0.5**self.level)

    def share(self) -> float:
        now = self.clock()
        if now >= self._next:
            self._next = now + self.config.interval_s
            self._update()
        return self.current

    def _update(self) -> None:
        cfg = self.config
        lag = self.lag() if cfg.max_lag is not None else 0
        queued = self.queued() if cfg.max_queue is not None else 0
        over = []
        if cfg.max_lag is not None and lag > cfg.max_lag:
            over.append(f"lag {lag} > {cfg.max_lag}")
        if cfg.max_queue is not None and queued > cfg.max_queue:
            over.append(f"judge queue {queued} > {cfg.max_queue}")
        calm = (cfg.max_lag is None or lag <= cfg.max_lag / 2) and (
            cfg.max_queue is None or queued <= cfg.max_queue / 2
        )
        if over and self.level < self._lowest:
            self.level += 1
            self.why = "; ".join(over)
        elif calm and self.level > 0:
            self.level -= 1
        self._gauge.set(self.current)

    def skipped(self) -> None:
        self._skips.inc()


def _levels_to(share: float) -> int:
    """The number of halvings after which the share reaches ``share`` (the last one floored at it)."""
    level = 0
    while 0.5**level > share:
        level += 1
    return level
