"""The review queue's processor step: each recorded batch's new results worth a person's look, published on
``evals.review`` (and kept for the review page when it is on).

A :class:`~streameval.feature.BatchStep` the composition root gives the processor when the suite file has a
``review:`` block. Redelivered results and shadows' are never candidates.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

from ... import telemetry
from ...feature import RecordedBatch
from ...models import GradedResult
from ...outputs import Publish
from ...redis_client import retry_forever
from . import ReviewQueue

__all__ = ["SendForReview"]


class SendForReview:
    """Chooses the batch's review items through ``queue``, within each pair's rate. ``pair_id(model, suite,
    version)`` and ``now()``: the store's (streameval.store.ResultStore)."""

    name = "review"

    def __init__(
        self, queue: ReviewQueue, pair_id: Callable[[str, str, str], str], now: Callable[[], float]
    ) -> None:
        self.queue = queue
        self.pair_id = pair_id
        self.now = now

    async def recorded(self, batch: RecordedBatch) -> list[Publish]:
        results = [(i, cast(GradedResult, batch.outcomes[i].result)) for i in batch.results]
        fresh = [
            (self.pair_id(r.model, r.suite, r.suite_version or ""), r, batch.content(i))
            for i, r in results
            if i in batch.fresh and not r.shadow
        ]
        review = self.queue
        items = await retry_forever(
            lambda: review.select(fresh, self.now()), what="choosing results for review"
        )
        keeper = review.keeper  # the review page's queue, when it is on
        if keeper is not None and items:
            await retry_forever(lambda: keeper.keep(items, fresh), what="keeping review items for the page")
        for item in items:
            for reason in item.reasons:
                telemetry.REVIEW_SENT.labels(item.suite, reason).inc()
        return [Publish("review", item.id.encode(), item.model_dump_json().encode()) for item in items]
