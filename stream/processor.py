"""What the stream worker does with a batch of raw messages, without Faust: evaluate, record, encode.

The Faust agent (``streameval.agents``) hands each batch to :meth:`Processor.process_batch` and sends
the returned messages; a benchmark or another consumer loop can do the same.

Delivery: at least once from Kafka, exactly once in Redis. Outcomes are recorded in Redis (one
atomic script per model × suite pair, streameval.store) before they are published, and the agent only
moves past a batch (so offsets are only committed) after every message of it is handed to the producer,
which Faust flushes before each commit. A redelivered event publishes the result stored by its first
evaluation and is not counted again. A batch is recorded in up to two phases: the events that call no
judge as soon as they are evaluated (published at once through ``emit``), the judged ones when their
panels end (:meth:`Processor.process_batch`).

Features act through the steps the composition root gives (streameval.feature): each ``BatchStep`` after
every record call (the sessions' turns appended, results sent for review), in order, its messages published
after the batch's own; each ``PeriodicStep`` on the worker's timer, before the windows close (the label
join's retries).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import cast

from . import telemetry
from .batch import evaluate_messages
from .deadletters import DeadLetterPolicy
from .envelope import Outcome, Source
from .errors import StoreUnavailable
from .evalpool import EvalPool
from .feature import BatchStep, PeriodicStep, RecordedBatch
from .inputs import Inputs
from .models import encode_result, parse_time
from .outputs import Publish, Send
from .pipeline import Pipeline
from .store import PUBLISHED, Receipt, ResultStore, retry_forever
from .windows import WindowCloser

__all__ = ["Emit", "Processor", "Publish"]  # Publish: streameval.outputs

log = logging.getLogger(__name__)


Emit = Callable[[list[Publish]], Awaitable[None]]
"""Send messages of a batch before the rest of it (:class:`streameval.inflight.InFlight` provides one)."""


def _position(source: Source) -> tuple[str | None, int | None, int | None]:
    return source.topic, source.partition, source.offset


def _source_key(source: Source) -> str:
    key = f"{source.topic}:{source.partition}:{source.offset}"
    return key if source.item is None else f"{key}:{source.item}"


class Processor:
    def __init__(
        self,
        pipeline: Pipeline,
        store: ResultStore,
        *,
        on_close: Callable[[], Awaitable[None]] | None = None,
        pool: EvalPool | None = None,
        inputs: Inputs | None = None,
        dead_letters: DeadLetterPolicy | None = None,
        steps: Sequence[BatchStep] = (),
        periodic: Sequence[PeriodicStep] = (),
        shadows: Sequence[Pipeline] = (),
    ) -> None:
        """``steps``: the features' steps after each record call, in order; ``periodic``: their periodic
        steps (module docstring)."""
        self.pipeline = pipeline
        # shadow candidates (docs/versions.md): evaluated on the same events in this process, recorded under
        # their own versions, published marked shadow: true; their dead letters are dropped (the live one is kept)
        self.shadows = tuple(shadows)
        self.store = store
        self.steps = tuple(steps)
        self.periodic = tuple(periodic)
        self.pool = pool
        self.inputs = inputs or Inputs()  # none configured: every message is a native request event
        self.dead_letters = dead_letters if dead_letters is not None else DeadLetterPolicy()
        self._on_close = on_close

    async def start(self) -> None:
        await self.pipeline.start()
        for shadow in self.shadows:
            await shadow.start()
        if self.pool is not None:
            await self.pool.start()

    async def close(self) -> None:
        try:  # the published marks of the batches acknowledged last (a stop is not a crash: no duplicate)
            await self._flush_published(0)
        except StoreUnavailable as exc:
            log.warning(
                "the last published marks were not written (%r): their results may be published again", exc
            )
        if self.pool is not None:
            await self.pool.close()
        await self.pipeline.close()
        for shadow in self.shadows:
            await shadow.close()
        if self._on_close is not None:
            await self._on_close()

    async def evaluate_batch(self, batch: Sequence[tuple[bytes, Source]]) -> list[Outcome]:
        """One outcome per request event, in order (:func:`streameval.batch.evaluate_batch`); a message of
        an OTLP input gives one per LLM span (:mod:`streameval.inputs`)."""
        return (await evaluate_messages(self.pipeline, self.inputs, batch, self.pool))[1]

    async def process_batch(
        self,
        batch: Sequence[tuple[bytes, Source]],
        *,
        emit: Emit | None = None,
        receipts: list[Receipt] | None = None,
    ) -> list[Publish]:
        """Evaluate a batch (async evaluators of all events run concurrently), record it, encode it.

        Returns the messages in input order. Waits (with backoff) while Redis is unavailable rather
        than publishing anything unrecorded. With ``emit``, the outcomes of events that call no judge
        (rule-only suites, events not sampled or skipped by backpressure, dead letters) are recorded
        and handed to ``emit`` as soon as they are known, without waiting for the judged events
        (:meth:`Pipeline.may_judge`); the judged ones are recorded once their panels end and returned.

        ``receipts`` gets what each record call kept for redeliveries: hand it to :meth:`published` once the
        broker acknowledged every message of the batch. A redelivered event whose result the broker already
        has publishes nothing (streameval.store_published).
        """
        telemetry.EVENTS_IN.inc(len(batch))
        with telemetry.in_flight(len(batch)):
            return await self._process_batch(batch, emit, receipts)

    def published(self, receipts: Sequence[Receipt]) -> None:
        """The broker acknowledged the messages of the batch these receipts recorded: drop their stored copies
        (with the next record calls, or on the worker's timer)."""
        if isinstance(self.store, ResultStore):
            self.store.published(receipts)

    async def _process_batch(
        self,
        messages: Sequence[tuple[bytes, Source]],
        emit: Emit | None = None,
        receipts: list[Receipt] | None = None,
    ) -> list[Publish]:
        raw_of = {
            _position(source): raw for raw, source in messages
        }  # an event's content: its message's bytes
        early: set[int] = set()

        async def ready(sources: list[Source], found: list[Outcome | None]) -> None:
            assert emit is not None
            now = [i for i, outcome in enumerate(found) if outcome is not None]
            if not now:
                return
            early.update(now)
            await emit(await self._record(sources, cast("list[Outcome]", found), now, raw_of, receipts))

        shadowed = [
            asyncio.ensure_future(evaluate_messages(shadow, self.inputs, messages)) for shadow in self.shadows
        ]
        try:
            sources, outcomes = await evaluate_messages(
                self.pipeline, self.inputs, messages, self.pool, ready=None if emit is None else ready
            )
        except BaseException:
            for task in shadowed:
                task.cancel()
            raise
        telemetry.observe_outcomes(outcomes)
        out = await self._record(
            sources, outcomes, [i for i in range(len(outcomes)) if i not in early], raw_of, receipts
        )
        for shadow_sources, shadow_outcomes in await asyncio.gather(*shadowed):
            scored = [i for i, outcome in enumerate(shadow_outcomes) if outcome.result is not None]
            out += await self._record(shadow_sources, shadow_outcomes, scored, raw_of, receipts)
        return out

    async def _record(
        self,
        sources: Sequence[Source],
        outcomes: Sequence[Outcome],
        indexes: Sequence[int],
        raw_of: dict[tuple[str | None, int | None, int | None], bytes],
        receipts: list[Receipt] | None = None,
    ) -> list[Publish]:
        """Record the outcomes at ``indexes`` in Redis (one call per batch phase), hand what was recorded to
        the steps, then encode them in order (the steps' messages after the batch's own)."""
        receipt = Receipt() if receipts is not None else None
        results = [(i, r, encode_result(r)) for i in indexes if (r := outcomes[i].result) is not None]
        dead = [(i, d) for i in indexes if (d := outcomes[i].dead_letter) is not None]
        # steps of agent runs (tool and root spans): nothing to record or publish, only their annotations
        steps = [i for i in indexes if outcomes[i].result is None and outcomes[i].dead_letter is None]

        def content(i: int) -> bytes | None:
            return raw_of.get(_position(sources[i]))

        if not results and not dead:
            if steps and self.steps:
                await self._after(RecordedBatch(outcomes, [], frozenset(), steps, content))
            return []
        stored = await retry_forever(
            lambda: self.store.record_many(
                [
                    (
                        r,
                        enc,
                        outcomes[i].counters,
                        raw_of.get(_position(sources[i]), b""),
                        outcomes[i].annotations,
                    )
                    for i, r, enc in results
                ],
                [(d.kind, _source_key(sources[i]), parse_time(d.failed_at)) for i, d in dead],
                receipt=receipt,
            ),
            what="recording a batch in Redis",
        )
        if receipts is not None and receipt is not None:
            receipts.append(receipt)
        extra: list[Publish] = []
        if self.steps:
            fresh = {i for (i, _, _), previous in zip(results, stored, strict=True) if previous is None}
            extra = await self._after(
                RecordedBatch(outcomes, [i for i, _, _ in results], fresh, steps, content)
            )
        out: dict[int, Publish] = {}
        for (i, result, encoded), previous in zip(results, stored, strict=True):
            if previous == PUBLISHED:  # a redelivery: the broker has its result already
                continue
            out[i] = Publish("result", result.id.encode(), previous if previous is not None else encoded)
        for i, letter in dead:
            # sized to fit the broker (streameval.deadletters); a huge event is kept whole in Redis; its
            # raw bytes are decoded only when the letter must be cut
            letter = await retry_forever(
                lambda letter=letter: self.dead_letters.apply(letter),  # type: ignore[misc]
                what="keeping a dead letter's event in Redis",
            )
            key = letter.event_id.encode() if letter.event_id else None
            out[i] = Publish("deadletter", key, letter.model_dump_json().encode())
        return [out[i] for i in sorted(out)] + extra

    async def _after(self, batch: RecordedBatch) -> list[Publish]:
        """Each step's work on ``batch``, in order: the messages they publish."""
        out: list[Publish] = []
        for step in self.steps:
            out += await step.recorded(batch)
        return out

    async def close_windows(self, closer: WindowCloser, send: Send) -> int:
        """The periodic step: the features' periodic steps, then publish due windows and their alerts and
        refresh the judges' z-score norms.

        Returns the number of windows this worker published. Redis errors propagate (the caller logs
        them and tries again at the next tick; a window's lease makes a half-done publish safe).
        """
        for step in self.periodic:  # e.g. the label join's retries
            await step.tick(send)
        published = await closer.run_once(send)
        if self.pipeline.judges is not None:
            self.pipeline.judges.norms = await closer.refresh_norms()
        await self._flush_published()  # the published marks of pairs no batch recorded lately
        return published

    async def _flush_published(self, older_than_s: float | None = None) -> None:
        if isinstance(self.store, ResultStore):  # tests give no store, or one of their own
            await self.store.flush_published(*(() if older_than_s is None else (older_than_s,)))
