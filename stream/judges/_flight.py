"""Single-flight: identical judge requests in flight at once make one call.

A burst of events with the same output under the same rubric (duplicates behind their originals, a
batch with a few distinct prompts) would otherwise call the judge once per event: the Redis cache
only helps once an answer is stored. :class:`SingleFlight` keeps, per process, the requests being
answered right now, keyed like the cache (judge, model, template version, system and user text). The
first asker (the leader) does the work: cache read, call, cache write. Later askers with the same key
await the leader's outcome and count as cache hits; they made no call. The entry is dropped when the
leader finishes, after its cache write, so a later asker finds the answer in the cache.

A failed leader's followers share its failure (no call of their own): under an outage, N identical
requests make one retried call, not N.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

__all__ = ["SingleFlight"]

T = TypeVar("T")


class SingleFlight(Generic[T]):
    """Coalesces concurrent calls of the same key into one (per event loop, in this process)."""

    def __init__(self) -> None:
        self._flights: dict[Hashable, asyncio.Future[T]] = {}

    def __len__(self) -> int:
        return len(self._flights)

    async def do(self, key: Hashable, work: Callable[[], Awaitable[T]]) -> tuple[T, bool]:
        """``(work's result, shared)``: ``shared`` is true when another caller's ``work`` produced it.

        ``work`` runs in the first caller's task; an exception it raises reaches every caller. A
        follower that is cancelled leaves the leader running; a cancelled leader cancels the wait of
        the leader's followers, and one of them runs ``work`` again as the new leader.
        """
        while (flight := self._flights.get(key)) is not None:
            await asyncio.wait((flight,))  # never cancels the flight; raises only if *we* are cancelled
            if not flight.cancelled():
                return flight.result(), True
        flight = asyncio.get_running_loop().create_future()
        self._flights[key] = flight
        try:
            value = await work()
        except BaseException as exc:
            if isinstance(exc, asyncio.CancelledError):
                flight.cancel()
            else:
                flight.set_exception(exc)
                flight.exception()  # retrieved: no "never retrieved" warning when nobody followed
            raise
        else:
            flight.set_result(value)
            return value, False
        finally:
            del self._flights[key]
