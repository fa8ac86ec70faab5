"""The sessions' processor step: each recorded batch's turns appended to their sessions in Redis.

A :class:`~streameval.feature.BatchStep` the composition root gives the processor when the suite file has
sessions. The turns are the events' annotations (:class:`~.turns.TurnsAnnotator`): appended after their own
results are recorded (a turn carries its final score), keyless ones only counted.
"""

from __future__ import annotations

from collections.abc import Awaitable
from collections.abc import Set as AbstractSet
from typing import cast

from ... import telemetry
from ...feature import RecordedBatch
from ...models import GradedResult
from ...outputs import Publish
from ...redis_client import retry_forever
from .state import AppendReport, SessionStore
from .turns import Turn, turns_in

__all__ = ["AppendTurns"]


class AppendTurns:
    """Appends each recorded batch's turns to ``store`` (module docstring)."""

    name = "sessions"

    def __init__(self, store: SessionStore) -> None:
        self.store = store

    async def recorded(self, batch: RecordedBatch) -> list[Publish]:
        outcomes = batch.outcomes
        # a shadow's turns are the live evaluation's: only the live results (and the steps) are turns;
        # a result counted for the first time just now was never a turn before: its turns are fresh
        live = [i for i in batch.results if not cast(GradedResult, outcomes[i].result).shadow]
        await self.append(
            [turn for i in sorted(live + list(batch.steps)) for turn in turns_in(outcomes[i].annotations)],
            {turn.id for i in live if i in batch.fresh for turn in turns_in(outcomes[i].annotations)},
        )
        return []

    async def append(self, turns: list[Turn], fresh: AbstractSet[str] = frozenset()) -> None:
        """Append ``turns`` to their sessions; keyless turns are only counted. ``fresh``: ids of turns never
        appended before (streameval.features.sessions.state.SessionStore.append); an append tried again looks
        every turn up (the first try may have landed)."""
        for turn in turns:
            if turn.key is None:
                telemetry.SESSION_TURNS.labels(turn.session, "keyless").inc()
        if not any(turn.key is not None for turn in turns):
            return
        store = self.store
        tries = 0

        def attempt() -> Awaitable[AppendReport]:
            nonlocal tries
            tries += 1
            return store.append(turns, fresh if tries == 1 else frozenset())

        report = await retry_forever(attempt, what="appending turns to sessions in Redis")
        for (session, outcome), n in report.counts.items():
            telemetry.SESSION_TURNS.labels(session, outcome).inc(n)
