"""The worker's side of the label join: the feedback topic's messages joined to their verdicts, and the
periodic step that joins the labels still waiting (or dead-letters them past the wait).

Built by the composition root when the join is on; its dead letters are sized to fit the broker like every
other (streameval.deadletters).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ... import telemetry
from ...deadletters import DeadLetterPolicy
from ...envelope import Source
from ...errors import EventError
from ...models import DeadLetter
from ...outputs import Publish, Send, publish_all
from ...redis_client import retry_forever
from ._input import FeedbackDecoder, decode_error_letter
from ._store import Label, LabelStore

__all__ = ["LabelIntake"]


class LabelIntake:
    """The feedback topic's batches joined through ``store``; a :class:`~streameval.feature.PeriodicStep`
    (:meth:`tick`). ``now``: the Redis clock (the result store's); ``redact``: the suite file's
    ``redact: dead_letters`` policy for these letters too (docs/redact.md)."""

    name = "labels"

    def __init__(
        self,
        store: LabelStore,
        decoder: FeedbackDecoder,
        dead_letters: DeadLetterPolicy,
        now: Callable[[], float],
        redact: Callable[[DeadLetter], DeadLetter] | None = None,
    ) -> None:
        self.store = store
        self.decoder = decoder
        self.dead_letters = dead_letters
        self.now = now
        self.redact = redact

    async def feedback(self, messages: Sequence[tuple[bytes, Source]]) -> list[Publish]:
        """Join a batch of the feedback topic's messages to their verdicts.

        Returns the dead letters to publish: messages that are not labels (with the reason), and labels
        the waiting list refused. Labels whose results are not there yet wait in Redis; the periodic step
        (:meth:`tick`) joins them or dead-letters them as unmatched. A join retried after an outage may
        append a row twice: the reader keeps the last row per event × annotator.
        """
        labels, letters = [], []
        now = self.now()
        for raw, source in messages:
            try:
                feedback = self.decoder.decode(raw)
            except EventError as exc:
                telemetry.LABELS.labels("invalid").inc()
                letters.append(
                    decode_error_letter(raw, exc, source.topic, source.partition, source.offset, now)
                )
                continue
            labels.append(Label(feedback, raw, source.topic, source.partition, source.offset))
        if labels:
            store = self.store
            report = await retry_forever(lambda: store.join(labels), what="joining human labels in Redis")
            letters += report.dead_letters
        return await self._letters(letters)

    async def _letters(self, letters: Sequence[DeadLetter]) -> list[Publish]:
        out = []
        for letter in letters:
            telemetry.DEAD_LETTERS.labels(letter.kind).inc()
            if self.redact is not None:  # before it is cut: its whole would be kept in Redis
                letter = self.redact(letter)
            fitted = await retry_forever(
                lambda letter=letter: self.dead_letters.apply(letter),  # type: ignore[misc]
                what="keeping a dead letter's event in Redis",
            )
            key = fitted.event_id.encode() if fitted.event_id else None
            out.append(Publish("deadletter", key, fitted.model_dump_json().encode()))
        return out

    async def tick(self, send: Send) -> None:
        """The periodic step of the join: waiting labels joined, or dead-lettered past the wait."""
        await self.retry(send)

    async def retry(self, send: Send) -> int:
        """:meth:`tick`; returns how many joined."""
        report = await self.store.retry_waiting()
        # delivered before the labels leave the waiting list
        await publish_all(send, await self._letters(report.dead_letters))
        await self.store.settle_expired(report)
        return report.joined
