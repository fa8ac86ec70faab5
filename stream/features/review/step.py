"""The review queue's processor step: each recorded batch's new results worth a person's look, published on
``evals.review`` (and kept for the review page when it is on).

A :class:`~streameval.feature.BatchStep` the composition root gives the processor when the suite file has a
``review:`` block. Redelivered results and shadows' are never candidates. The session closer sends its new
results through the same step (:meth:`SendForReview.sessions`): a conversation or an agent run worth a
look is a review item like an event's, kept with its thread.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import cast

from ... import telemetry
from ...feature import RecordedBatch
from ...models import GradedResult, ReviewItem
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
        return await self._send(fresh)

    async def sessions(
        self, closed: Sequence[tuple[GradedResult, bytes, list[dict[str, str]]]]
    ) -> list[Publish]:
        """The review messages of closed sessions' new results ``(graded result, its thread event's bytes,
        its thread as ``{role, text}``)``: chosen by the same criteria and rate as events' (pair: model x
        session name), kept for the page with the thread (the page's own copy, like an event's: not redacted,
        docs/redact.md)."""
        fresh: list[tuple[str, GradedResult, bytes | None]] = [
            (self.pair_id(r.model, r.suite, r.suite_version or ""), r, raw) for r, raw, _ in closed
        ]
        return await self._send(fresh, {r.id: thread for r, _, thread in closed})

    async def _send(
        self,
        fresh: list[tuple[str, GradedResult, bytes | None]],
        threads: Mapping[str, list[dict[str, str]]] | None = None,
    ) -> list[Publish]:
        review = self.queue
        items: list[ReviewItem] = await retry_forever(
            lambda: review.select(fresh, self.now()), what="choosing results for review"
        )
        keeper = review.keeper  # the review page's queue, when it is on
        if keeper is not None and items:
            await retry_forever(
                lambda: keeper.keep(items, fresh, threads), what="keeping review items for the page"
            )
        for item in items:
            for reason in item.reasons:
                telemetry.REVIEW_SENT.labels(item.suite, reason).inc()
        return [Publish("review", item.id.encode(), item.model_dump_json().encode()) for item in items]
