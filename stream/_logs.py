"""Log hygiene for services that keep retrying: one line per outage, then a summary now and then.

aiokafka logs an ERROR for every failed connection attempt (every 0.5 s while a broker is down).
:class:`RepeatSummary` lets the first such record through, drops the repeats, and lets one through
every ``interval_s`` with how many were dropped, so an outage reads as a few lines, not a flood.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

__all__ = ["RepeatSummary", "install_repeat_summary"]

SUMMARY_INTERVAL_S = 30.0


class RepeatSummary(logging.Filter):
    """Rate-limit records with the same message template (``record.msg``) at WARNING and above."""

    def __init__(
        self, interval_s: float = SUMMARY_INTERVAL_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        super().__init__()
        self.interval_s = interval_s
        self.clock = clock
        self._last: dict[str, float] = {}  # template -> when it was last let through
        self._dropped: dict[str, int] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        key = f"{record.name}\0{record.msg}"
        now = self.clock()
        last = self._last.get(key)
        if last is not None and now - last < self.interval_s:
            self._dropped[key] = self._dropped.get(key, 0) + 1
            return False
        dropped = self._dropped.pop(key, 0)
        self._last[key] = now
        if dropped:
            record.msg = f"{record.msg} (and {dropped} more like it in the last {now - last:.0f} s)"  # type: ignore[operator]
        if len(self._last) > 256:  # templates are few; bound the table anyway
            self._last = {key: now}
        return True


#: aiokafka's modules that log per failed attempt while a broker is away (a logger's filter does not
#: see its children's records, so each is named)
AIOKAFKA_LOGGERS = (
    "aiokafka",
    "aiokafka.conn",
    "aiokafka.cluster",
    "aiokafka.consumer.fetcher",
    "aiokafka.consumer.group_coordinator",
    "aiokafka.consumer.consumer",
    "aiokafka.producer.sender",
    "aiokafka.producer.producer",
    "aiokafka.admin.client",
    "faust.transport.drivers.aiokafka",
)


def install_repeat_summary(
    names: tuple[str, ...] = AIOKAFKA_LOGGERS, interval_s: float = SUMMARY_INTERVAL_S
) -> None:
    """Add one :class:`RepeatSummary` to each named logger (idempotent)."""
    for name in names:
        logger = logging.getLogger(name)
        if not any(isinstance(f, RepeatSummary) for f in logger.filters):
            logger.addFilter(RepeatSummary(interval_s))
