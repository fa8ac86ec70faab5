"""Reading topics to quiescence, shared by the integration tests."""

from __future__ import annotations

import asyncio
from collections.abc import Sized

from streameval.kafka_io import Record, tail


async def settle(records: Sized, *, idle: float = 2.0) -> None:
    """Return once ``records`` (filled by a reader in the background) has not grown for ``idle`` seconds.

    (A bounded wait for quiescence is the point here: it proves no extra copies were published.
    End offsets cannot be used: Tansu's ListOffsets LATEST is wrong, see docs/api.md on consumer lag.)
    """
    seen = -1
    while seen != len(records):
        seen = len(records)
        await asyncio.sleep(idle)


async def read_all(bootstrap: str, topics: list[str], *, idle: float = 2.0) -> list[Record]:
    """Everything on ``topics``: read until no message arrives for ``idle`` seconds (:func:`settle`)."""
    records: list[Record] = []

    async def run() -> None:
        async for record in tail(bootstrap, topics):
            records.append(record)

    task = asyncio.create_task(run())
    await settle(records, idle=idle)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    return records
