"""What the stream worker does with a batch of raw messages, without Faust: evaluate, record, encode.

The Faust agent (``streameval.agents``) hands each batch to :meth:`Processor.process_batch` and sends
the returned messages; a benchmark or another consumer loop can do the same.

Delivery: at least once from Kafka, exactly once in Redis. A batch is recorded in Redis (one
atomic script per model × suite pair, streameval.store) before anything is published, and the agent only moves past
the batch (so offsets are only committed) after every message is handed to the producer, which Faust
flushes before each commit. A redelivered event publishes the result stored by its first evaluation
and is not counted again.
"""

from __future__ import annotations

import base64
from collections.abc import Awaitable, Callable, Sequence

from . import telemetry
from .deadletters import DeadLetterPolicy
from .evalpool import EvalPool
from .inputs import Inputs, evaluate_messages
from .models import parse_time
from .outputs import Publish, Send
from .pipeline import Outcome, Pipeline, Source
from .store import ResultStore, retry_forever
from .windows import WindowCloser

__all__ = ["Processor", "Publish"]  # Publish: streameval.outputs


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
    ) -> None:
        self.pipeline = pipeline
        self.store = store
        self.pool = pool
        self.inputs = inputs or Inputs()  # none configured: every message is a native request event
        self.dead_letters = dead_letters if dead_letters is not None else DeadLetterPolicy()
        self._on_close = on_close

    async def start(self) -> None:
        await self.pipeline.start()
        if self.pool is not None:
            await self.pool.start()

    async def close(self) -> None:
        if self.pool is not None:
            await self.pool.close()
        await self.pipeline.close()
        if self._on_close is not None:
            await self._on_close()

    async def evaluate_batch(self, batch: Sequence[tuple[bytes, Source]]) -> list[Outcome]:
        """One outcome per request event, in order (:func:`streameval.evalpool.evaluate_batch`); a message of
        an OTLP input gives one per LLM span (:mod:`streameval.inputs`)."""
        return (await evaluate_messages(self.pipeline, self.inputs, batch, self.pool))[1]

    async def process_batch(self, batch: Sequence[tuple[bytes, Source]]) -> list[Publish]:
        """Evaluate a batch (async evaluators of all events run concurrently), record it, encode it.

        Returns the messages in input order. Waits (with backoff) while Redis is unavailable rather
        than publishing anything unrecorded.
        """
        telemetry.EVENTS_IN.inc(len(batch))
        with telemetry.in_flight(len(batch)):
            return await self._process_batch(batch)

    async def _process_batch(self, messages: Sequence[tuple[bytes, Source]]) -> list[Publish]:
        sources, outcomes = await evaluate_messages(self.pipeline, self.inputs, messages, self.pool)
        telemetry.observe_outcomes(outcomes)
        results = [(i, o.result, o.result.model_dump_json().encode()) for i, o in enumerate(outcomes) if o.result]
        dead = [(i, o.dead_letter) for i, o in enumerate(outcomes) if o.dead_letter]
        raw_of = {_position(source): raw for raw, source in messages}  # an event's content: its message's bytes
        stored = await retry_forever(
            lambda: self.store.record_many(
                [(r, enc, outcomes[i].counters, raw_of.get(_position(sources[i]), b"")) for i, r, enc in results],
                [(d.kind, _source_key(sources[i]), parse_time(d.failed_at)) for i, d in dead],
            ),
            what="recording a batch in Redis",
        )
        out: list[Publish | None] = [None] * len(outcomes)
        for (i, result, encoded), previous in zip(results, stored, strict=True):
            out[i] = Publish("result", result.id.encode(), previous if previous is not None else encoded)
        for i, letter in dead:
            # sized to fit the broker (streameval.deadletters); a huge event is kept whole in Redis
            letter = await retry_forever(
                lambda letter=letter: self.dead_letters.apply(letter, base64.b64decode(letter.raw)),  # type: ignore[misc]
                what="keeping a dead letter's event in Redis",
            )
            key = letter.event_id.encode() if letter.event_id else None
            out[i] = Publish("deadletter", key, letter.model_dump_json().encode())
        return [p for p in out if p is not None]

    async def close_windows(self, closer: WindowCloser, send: Send) -> int:
        """The periodic step: publish due windows and their alerts, refresh the judges' z-score norms.

        Returns the number of windows this worker published. Redis errors propagate (the caller logs
        them and tries again at the next tick; a window's lease makes a half-done publish safe).
        """
        published = await closer.run_once(send)
        if self.pipeline.judges is not None:
            self.pipeline.judges.norms = await closer.refresh_norms()
        return published
