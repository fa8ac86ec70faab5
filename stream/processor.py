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
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from collections.abc import Set as AbstractSet
from typing import cast

from . import telemetry
from .batch import evaluate_messages
from .deadletters import DeadLetterPolicy
from .envelope import Outcome, Source
from .errors import EventError
from .evalpool import EvalPool
from .features.labels import FeedbackDecoder, Label, LabelStore, decode_error_letter
from .features.review import ReviewQueue
from .features.sessions.state import AppendReport, SessionStore
from .features.sessions.turns import Turn, turns_in
from .inputs import Inputs
from .models import DeadLetter, encode_result, parse_time
from .outputs import Publish, Send, publish_all
from .pipeline import Pipeline
from .store import ResultStore, retry_forever
from .windows import WindowCloser

__all__ = ["Emit", "Processor", "Publish"]  # Publish: streameval.outputs


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
        labels: LabelStore | None = None,
        feedback: FeedbackDecoder | None = None,
        review: ReviewQueue | None = None,
        sessions: SessionStore | None = None,
        shadows: Sequence[Pipeline] = (),
    ) -> None:
        self.pipeline = pipeline
        # shadow candidates (docs/versions.md): evaluated on the same events in this process, recorded under
        # their own versions, published marked shadow: true; their dead letters are dropped (the live one is kept)
        self.shadows = tuple(shadows)
        self.store = store
        self.sessions = (
            sessions  # the suite file has sessions: turns are appended once their result is recorded
        )
        self.pool = pool
        self.inputs = inputs or Inputs()  # none configured: every message is a native request event
        self.dead_letters = dead_letters if dead_letters is not None else DeadLetterPolicy()
        self._on_close = on_close
        self.labels = (
            labels  # the human-label join (streameval.features.labels); None: the feedback topic is not read
        )
        self.feedback = feedback or FeedbackDecoder()
        self.review = (
            review  # the review queue (streameval.features.review); None: nothing is sent for review
        )

    async def start(self) -> None:
        await self.pipeline.start()
        for shadow in self.shadows:
            await shadow.start()
        if self.pool is not None:
            await self.pool.start()

    async def close(self) -> None:
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
        self, batch: Sequence[tuple[bytes, Source]], *, emit: Emit | None = None
    ) -> list[Publish]:
        """Evaluate a batch (async evaluators of all events run concurrently), record it, encode it.

        Returns the messages in input order. Waits (with backoff) while Redis is unavailable rather
        than publishing anything unrecorded. With ``emit``, the outcomes of events that call no judge
        (rule-only suites, events not sampled or skipped by backpressure, dead letters) are recorded
        and handed to ``emit`` as soon as they are known, without waiting for the judged events
        (:meth:`Pipeline.may_judge`); the judged ones are recorded once their panels end and returned.
        """
        telemetry.EVENTS_IN.inc(len(batch))
        with telemetry.in_flight(len(batch)):
            return await self._process_batch(batch, emit)

    async def _process_batch(
        self, messages: Sequence[tuple[bytes, Source]], emit: Emit | None = None
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
            await emit(await self._record(sources, cast("list[Outcome]", found), now, raw_of))

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
            sources, outcomes, [i for i in range(len(outcomes)) if i not in early], raw_of
        )
        for shadow_sources, shadow_outcomes in await asyncio.gather(*shadowed):
            scored = [i for i, outcome in enumerate(shadow_outcomes) if outcome.result is not None]
            out += await self._record(shadow_sources, shadow_outcomes, scored, raw_of)
        return out

    async def _record(
        self,
        sources: Sequence[Source],
        outcomes: Sequence[Outcome],
        indexes: Sequence[int],
        raw_of: dict[tuple[str | None, int | None, int | None], bytes],
    ) -> list[Publish]:
        """Record the outcomes at ``indexes`` in Redis (one call per batch phase), then encode them in order."""
        results = [(i, r, encode_result(r)) for i in indexes if (r := outcomes[i].result) is not None]
        dead = [(i, d) for i in indexes if (d := outcomes[i].dead_letter) is not None]
        # steps of agent runs (tool and root spans): nothing to record or publish, only turns to append
        steps = [i for i in indexes if outcomes[i].result is None and outcomes[i].dead_letter is None]
        if not results and not dead:
            if steps and self.sessions is not None:
                await self._append_turns([turn for i in steps for turn in turns_in(outcomes[i].annotations)])
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
            ),
            what="recording a batch in Redis",
        )
        if self.sessions is not None:
            # a shadow's turns are the live evaluation's: only the live results (and the steps) are turns;
            # a result counted for the first time just now was never a turn before: its turns are fresh
            await self._append_turns(
                [
                    turn
                    for i in sorted([i for i, r, _ in results if not r.shadow] + steps)
                    for turn in turns_in(outcomes[i].annotations)
                ],
                {
                    turn.id
                    for (i, r, _), previous in zip(results, stored, strict=True)
                    if previous is None and not r.shadow
                    for turn in turns_in(outcomes[i].annotations)
                },
            )
        out: dict[int, Publish] = {}
        for (i, result, encoded), previous in zip(results, stored, strict=True):
            out[i] = Publish("result", result.id.encode(), previous if previous is not None else encoded)
        if self.review is not None:  # new results worth a person's look, within each pair's rate
            fresh = [
                (
                    self.store.pair_id(r.model, r.suite, r.suite_version or ""),
                    r,
                    raw_of.get(_position(sources[i])),
                )
                for (i, r, _), previous in zip(results, stored, strict=True)
                if previous is None and not r.shadow
            ]
            review = self.review
            items = await retry_forever(
                lambda: review.select(fresh, self.store.now()), what="choosing results for review"
            )
            keeper = review.keeper  # the review page's queue, when it is on
            if keeper is not None and items:
                await retry_forever(
                    lambda: keeper.keep(items, fresh), what="keeping review items for the page"
                )
            for item in items:
                for reason in item.reasons:
                    telemetry.REVIEW_SENT.labels(item.suite, reason).inc()
            extra = [Publish("review", item.id.encode(), item.model_dump_json().encode()) for item in items]
        else:
            extra = []
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

    async def process_feedback(self, messages: Sequence[tuple[bytes, Source]]) -> list[Publish]:
        """Join a batch of the feedback topic's messages to their verdicts (streameval.features.labels).

        Returns the dead letters to publish: messages that are not labels (with the reason), and labels
        the waiting list refused. Labels whose results are not there yet wait in Redis; the periodic step
        (:meth:`close_windows`) joins them or dead-letters them as unmatched. A join retried after an
        outage may append a row twice: the reader keeps the last row per event × annotator.
        """
        if self.labels is None:
            raise RuntimeError(
                "the label join is off (STREAMEVAL_LABEL_JOIN_TTL_S=0, or unset with no feedback:, review: or "
                "human_agreement alert in the suite file): the feedback topic is not read"
            )
        labels, letters = [], []
        now = self.store.now()
        for raw, source in messages:
            try:
                feedback = self.feedback.decode(raw)
            except EventError as exc:
                telemetry.LABELS.labels("invalid").inc()
                letters.append(
                    decode_error_letter(raw, exc, source.topic, source.partition, source.offset, now)
                )
                continue
            labels.append(Label(feedback, raw, source.topic, source.partition, source.offset))
        if labels:
            store = self.labels
            report = await retry_forever(lambda: store.join(labels), what="joining human labels in Redis")
            letters += report.dead_letters
        return await self._label_letters(letters)

    async def _label_letters(self, letters: Sequence[DeadLetter]) -> list[Publish]:
        out = []
        for letter in letters:
            telemetry.DEAD_LETTERS.labels(letter.kind).inc()
            fitted = await retry_forever(
                lambda letter=letter: self.dead_letters.apply(letter),  # type: ignore[misc]
                what="keeping a dead letter's event in Redis",
            )
            key = fitted.event_id.encode() if fitted.event_id else None
            out.append(Publish("deadletter", key, fitted.model_dump_json().encode()))
        return out

    async def retry_labels(self, send: Send) -> int:
        """The periodic step of the join: waiting labels joined, or dead-lettered past the wait. Returns
        how many joined."""
        if self.labels is None:
            return 0
        report = await self.labels.retry_waiting()
        # delivered before the labels leave the waiting list
        await publish_all(send, await self._label_letters(report.dead_letters))
        await self.labels.settle_expired(report)
        return report.joined

    async def _append_turns(self, turns: list[Turn], fresh: AbstractSet[str] = frozenset()) -> None:
        """Append the batch's turns to their sessions (after their own results are recorded: a turn carries
        its final score); keyless turns are only counted. ``fresh``: ids of turns never appended before
        (streameval.features.sessions.state.SessionStore.append); an append tried again looks every turn up (the
        first try may have landed)."""
        assert self.sessions is not None
        for turn in turns:
            if turn.key is None:
                telemetry.SESSION_TURNS.labels(turn.session, "keyless").inc()
        if not any(turn.key is not None for turn in turns):
            return
        store = self.sessions
        tries = 0

        def attempt() -> Awaitable[AppendReport]:
            nonlocal tries
            tries += 1
            return store.append(turns, fresh if tries == 1 else frozenset())

        report = await retry_forever(attempt, what="appending turns to sessions in Redis")
        for (session, outcome), n in report.counts.items():
            telemetry.SESSION_TURNS.labels(session, outcome).inc(n)

    async def close_windows(self, closer: WindowCloser, send: Send) -> int:
        """The periodic step: publish due windows and their alerts, refresh the judges' z-score norms.

        Returns the number of windows this worker published. Redis errors propagate (the caller logs
        them and tries again at the next tick; a window's lease makes a half-done publish safe).
        """
        await self.retry_labels(send)
        published = await closer.run_once(send)
        if self.pipeline.judges is not None:
            self.pipeline.judges.norms = await closer.refresh_norms()
        return published
