"""LiveRegistry.close() ends the follower task even when the cancellation lands while redis-py is making
the pub/sub connection (redis-py catches that CancelledError; the follower then sat in get_message for
``resync_s``). Real Redis."""

from __future__ import annotations

import asyncio
import uuid

import pytest
import redis.asyncio as aioredis

from streameval.registry import LiveRegistry, RegistryStore

pytestmark = pytest.mark.asyncio


@pytest.mark.parametrize("yields", [0, 1, 2, 3, 5, 8])
async def test_close_right_after_start_ends_the_follower(yields: int) -> None:
    client = aioredis.Redis.from_url("redis://127.0.0.1:6379/0")
    prefix = f"se-test-regclose-{uuid.uuid4().hex[:8]}"
    try:
        live = LiveRegistry(RegistryStore(client, prefix=prefix), resync_s=3600)
        await live.start()
        task = live._task
        assert task is not None
        for _ in range(yields):  # land the cancellation at different points of the subscription
            await asyncio.sleep(0)
        # a hang waits out resync_s (an hour); the bound only tells a hang from an end (not cancelling
        # close on the bound: a cancelled close cancels the follower too)
        closing = asyncio.create_task(live.close())
        done, _ = await asyncio.wait({closing}, timeout=20)
        if not done:
            task.cancel()
            await asyncio.wait({closing}, timeout=5)
        assert done, "close() did not end the follower"
        assert task.done()
        assert live._task is None
        await live.close()  # a second close is a no-op
    finally:
        await client.aclose()


async def test_close_does_not_swallow_the_callers_cancellation() -> None:
    client = aioredis.Redis.from_url("redis://127.0.0.1:6379/0")
    prefix = f"se-test-regclose-{uuid.uuid4().hex[:8]}"
    try:
        live = LiveRegistry(RegistryStore(client, prefix=prefix), resync_s=3600)
        await live.start()
        await asyncio.sleep(0.2)
        closer = asyncio.create_task(live.close())
        closer.cancel()
        with pytest.raises(asyncio.CancelledError):
            await closer
    finally:
        if live._task is not None:
            live._task.cancel()
        await client.aclose()
