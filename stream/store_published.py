"""Published marks: once the broker acknowledged a batch's results, their stored copies go.

Within the redelivery horizon the store keeps, per counted event, ``result id -> pointer`` to its encoded
result (streameval.store). A copy is only needed while the broker may not have the result: once the
worker saw the broker acknowledge a batch's messages, it hands the batch's :class:`Receipt` to
:meth:`streameval.store.ResultStore.published`, and the next record call of each pair (or, for a pair no
batch records within :data:`RIDE_S`, one small script call in a batch's pipeline or on the worker's timer)
turns each event's pointer into its digest and ``p`` (:func:`published_value`) and deletes the strings that
held the copies (the record script's ``published`` function, streameval._lua.PUBLISHED_FN).

A redelivered event whose pointer is its published value publishes nothing (:data:`PUBLISHED`); one
recorded but not yet marked publishes its stored copy, as before; a value with another digest is another
event that reused the id (its fresh evaluation is published). So the only duplicates left on the results
topic are the events whose batch the broker acknowledged and whose marks were not written yet when the
worker died: at most the batches acknowledged within :data:`RIDE_S` before the crash.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["PUBLISHED", "RIDE_S", "Notes", "Pending", "Receipt", "is_published", "published_value"]

#: what :meth:`streameval.store.ResultStore.record_many` answers for an event whose result the broker already
#: has (a redelivery of a published event): publish nothing. An encoded result is never empty.
PUBLISHED = b""
#: how long (s) a pair's published marks wait for a record call of that pair before they go on their own
RIDE_S = 1.0
#: notes kept waiting at most (beyond: the oldest pairs' are dropped; their copies expire with the horizon)
MAX_PENDING = 200_000


def published_value(digest: bytes) -> bytes:
    """A published event's entry in the result pointers hash: its digest (tells a reused id) and ``p``."""
    return digest + b"p"


def is_published(value: bytes | str | None, digest: bytes) -> bool:
    """Whether ``value`` (a result id's pointers entry) says the event of ``digest`` is on the topic."""
    if isinstance(value, str):
        value = value.encode()
    return value is not None and len(value) == 9 and value[8:] == b"p" and value[:8] == digest


@dataclass
class Notes:
    """One pair's published marks waiting for a call: per pointers hash, (result id, value) pairs; the strings."""

    since: float  # monotonic time of the oldest
    marks: dict[str, list[Any]] = field(default_factory=dict)  # pointers hash -> [id, value, id, value, ...]
    strings: list[str] = field(default_factory=list)

    def merge(self, other: Notes) -> None:
        self.since = min(self.since, other.since)
        for key, flat in other.marks.items():
            self.marks.setdefault(key, []).extend(flat)
        self.strings += other.strings

    def holds(self, result_id: str, digest: bytes) -> bool:
        """Whether the event of ``result_id`` and ``digest`` is among these marks."""
        value = published_value(digest)
        for flat in self.marks.values():
            for i in range(0, len(flat), 2):
                if flat[i] == result_id and flat[i + 1] == value:
                    return True
        return False

    def size(self) -> int:
        return sum(len(flat) for flat in self.marks.values()) // 2 + len(self.strings)

    def args(self, current: Iterable[str]) -> tuple[list[str], list[Any]]:
        """KEYS and ARGV of the ``published`` function for the pointers hashes in ``current`` (the others
        expired or are about to: their notes are dropped)."""
        kept = [(key, self.marks[key]) for key in current if key in self.marks]
        keys = [key for key, _ in kept] + self.strings
        args: list[Any] = [len(kept), *(len(flat) // 2 for _, flat in kept), len(self.strings)]
        for _, flat in kept:
            args += flat
        return keys, args


@dataclass
class Receipt:
    """What one record call of a batch kept for redeliveries, per pair: filled by ``record_many``, handed to
    ``published`` once the broker acknowledged the batch's messages."""

    notes: dict[str, Notes] = field(default_factory=dict)

    def add(self, pair: str, pointers: str, result_id: str, digest: bytes) -> None:
        notes = self.notes.get(pair)
        if notes is None:
            notes = self.notes[pair] = Notes(0.0)
        notes.marks.setdefault(pointers, []).extend((result_id, published_value(digest)))

    def string(self, pair: str, key: str) -> None:
        notes = self.notes.get(pair)
        if notes is None:
            notes = self.notes[pair] = Notes(0.0)
        notes.strings.append(key)


class Pending:
    """Published marks waiting for their pair's next call (one store, every batch in flight)."""

    def __init__(self, clock: Any = time.monotonic) -> None:
        self._by_pair: dict[str, Notes] = {}
        self._size = 0
        self._clock = clock

    def __len__(self) -> int:
        return self._size

    def add(self, receipts: Iterable[Receipt]) -> None:
        now = self._clock()
        for receipt in receipts:
            for pair, notes in receipt.notes.items():
                notes.since = now
                self.give_back({pair: notes})
        if self._size > MAX_PENDING:  # no call for a long while (Redis down?): the oldest wait no more
            for pair in sorted(self._by_pair, key=lambda p: self._by_pair[p].since):
                self._size -= self._by_pair.pop(pair).size()
                if self._size <= MAX_PENDING // 2:
                    break

    def take(self, older_than_s: float | None = None) -> dict[str, Notes]:
        """Every pair's notes (``older_than_s``: only those waiting that long), no longer pending."""
        if older_than_s is None:
            taken, self._by_pair, self._size = self._by_pair, {}, 0
            return taken
        cut = self._clock() - older_than_s
        taken = {pair: notes for pair, notes in self._by_pair.items() if notes.since <= cut}
        for pair, notes in taken.items():
            del self._by_pair[pair]
            self._size -= notes.size()
        return taken

    def give_back(self, taken: dict[str, Notes]) -> None:
        """Notes taken and not written (no call for their pair, or the call failed): pending again."""
        for pair, notes in taken.items():
            self._size += notes.size()
            held = self._by_pair.get(pair)
            if held is None:
                self._by_pair[pair] = notes
            else:
                held.merge(notes)
