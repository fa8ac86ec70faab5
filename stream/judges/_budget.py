"""A money budget per judge and clock hour, shared by every worker through Redis.

``budget_per_hour`` (in the currency of the judge's prices) caps what one judge may cost in one UTC
clock hour, across all workers on the same Redis and prefix. Before a call, :meth:`MoneyBudget.exhausted`
compares the hour's spend (the shared total as last read, plus this process's spend not yet sent)
with the budget; a judge over it is skipped with reason ``budget``, like the token budget.

Spend is sent in the background once a second (``INCRBYFLOAT`` of what this process spent since,
which returns the new shared total; the key expires after two hours), so a call costs no Redis round
trip. The price of that: all workers together can overshoot the budget by about one second of spend.
Without Redis (``streameval evaluate``), the budget is per process. A Redis failure is logged and
the budget falls back to what this process knows; judging goes on.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from redis import exceptions as redis_errors

from ..keyspace import Client, Keys

__all__ = ["MoneyBudget"]

log = logging.getLogger(__name__)

_HOUR_S = 3600
_KEY_TTL_S = 2 * _HOUR_S


class MoneyBudget:
    """One judge's money budget per clock hour."""

    def __init__(
        self,
        judge: str,
        per_hour: float,
        *,
        client: Client | None = None,
        prefix: str = "streameval:",
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.judge = judge
        self.per_hour = per_hour
        self.client = client
        self.prefix = prefix
        self.clock = clock
        self._hour = self._now_hour()
        self._shared = 0.0  # the hour's total across workers, as last read (includes what we sent)
        self._unsent = 0.0

    def _now_hour(self) -> int:
        return int(self.clock() // _HOUR_S)

    def key(self, hour: int) -> str:
        return Keys(self.prefix).judge_spend(self.judge, hour)

    def _roll(self) -> None:
        hour = self._now_hour()
        if hour != self._hour:
            self._hour, self._shared, self._unsent = hour, 0.0, 0.0

    @property
    def spent(self) -> float:
        self._roll()
        return self._shared + self._unsent

    def exhausted(self) -> bool:
        return self.spent >= self.per_hour

    def spend(self, cost: float) -> None:
        if cost > 0:
            self._roll()
            self._unsent += cost

    async def sync(self) -> None:
        """Send this process's unsent spend and read the shared total (one round trip)."""
        self._roll()
        if self.client is None:
            self._shared, self._unsent = self._shared + self._unsent, 0.0
            return
        hour, amount = self._hour, self._unsent
        self._unsent = 0.0
        try:
            pipe = self.client.pipeline(transaction=False)
            pipe.incrbyfloat(self.key(hour), amount)
            pipe.expire(self.key(hour), _KEY_TTL_S)
            total, _ = await pipe.execute()
        except redis_errors.RedisError as exc:
            log.warning(
                "judge %s: money budget not shared (%s); counting this process only",
                self.judge,
                type(exc).__name__,
            )
            if hour == self._hour:
                self._unsent += amount
            return
        if hour == self._hour:
            self._shared = float(total)

    async def run(self, interval_s: float = 1.0) -> None:
        """:meth:`sync` every ``interval_s`` until cancelled."""
        while True:
            await self.sync()
            await asyncio.sleep(interval_s)
