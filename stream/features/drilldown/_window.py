"""The window side of drill-down examples: the ids an alert rule's alert lists (streameval.feature's
``AlertExamples``, handed to the window closer by the composition root when examples are kept)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from ...keyspace import guard
from ...models import Aggregate
from ...store import ResultStore
from ._examples import example_ids

__all__ = ["worst_ids"]


async def worst_ids(
    store: ResultStore, aggregates: Sequence[Aggregate], size: int, start: int
) -> list[list[str]]:
    """Ids of up to 3 of the window's lowest-scored results of each aggregate's pair, for its alerts: one
    round trip."""
    if not aggregates:
        return []
    async with store.client.pipeline(transaction=False) as pipe:
        for a in aggregates:
            pair = store.pair_id(a.model, a.suite, a.suite_version or "")
            pipe.zrange(store.keys.examples(pair, "worst", size, start), 0, 2)
        replies = await guard(pipe.execute())
    return [example_ids(cast(list[bytes], reply)) for reply in replies]
