"""Published marks: once the broker acknowledged a batch's results, their stored copies go.

Within the redelivery horizon the store keeps, per counted event, ``result id -> pointer`` to its encoded
result (streameval.store). A copy is only needed while the broker may not have the result: once the
worker saw the broker acknowledge a batch's messages, it hands the batch's :class:`Receipt` to
:meth:`streameval.store.ResultStore.published`, and the next record call of each pair (or, for a pair no
batch records within :data:`RIDE_S`, one small script call in a batch's pipeline or on the worker's timer)
deletes each event's pointer and the strings that held the copies, and keeps the event's published mark in
the same hash: field :func:`published_field` (6 bytes: a hash of the result id), value
:func:`published_value` (the first 6 bytes of the event's digest), ~50 bytes in a large hash, whatever the
id's length (the record script's ``published`` function, streameval._lua.PUBLISHED_FN).

A redelivered event whose id has its published mark publishes nothing (:data:`PUBLISHED`); one recorded but
not yet marked publishes its stored copy, as before; a mark with another digest is another event that reused
the id (its fresh evaluation is published). So the only duplicates left on the results
topic are the events whose batch the broker acknowledged and whose marks were not written yet when the
worker died: at most the batches acknowledged within :data:`RIDE_S` before the crash.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "PUBLISHED",
    "RIDE_S",
    "Notes",
    "Pending",
    "Receipt",
    "is_published",
    "published_field",
    "published_value",
]

#: what :meth:`streameval.store.ResultStore.record_many` answers for an event whose result the broker already
#: has (a redelivery of a published event): publish nothing. An encoded result is never empty.
PUBLISHED = b""
#: how long (s) a pair's published marks wait for a record call of that pair before they go on their own (a
#: call of their own costs a pair's fixed cost: a busy pair's marks ride along within milliseconds; a rare
#: pair's wait this long, its copies kept meanwhile)
RIDE_S = 5.0
#: notes kept waiting at most (beyond: the oldest pairs' are dropped; their copies expire with the horizon)
MAX_PENDING = 200_000


def published_field(result_id: str) -> bytes:
    """A published result's field in the pointers hash: a NUL byte (no result id starts with one: the field
    of a pointer is the id) and 5 bytes of a hash of the id. Six bytes: the smallest allocation Redis makes."""
    return b"\0" + hashlib.blake2b(result_id.encode(), digest_size=5).digest()


def published_value(digest: bytes) -> bytes:
    """A published result's value: the first 6 bytes of its event's digest (another event reusing the id has
    another)."""
    return digest[:6]


def is_published(value: bytes | str | None, digest: bytes) -> bool:
    """Whether ``value`` (a result id's published field) says the event of ``digest`` is on the topic."""
    if isinstance(value, str):
        value = value.encode()
    return value is not None and value == digest[:6]


@dataclass
class Notes:
    """One pair's published marks waiting for a call: per pointers hash, (result id, value) pairs; the strings."""

    since: float  # monotonic time of the oldest
    marks: dict[str, list[tuple[str, bytes]]] = field(default_factory=dict)  # pointers hash -> (id, digest)
    strings: list[str] = field(default_factory=list)

    def merge(self, other: Notes) -> None:
        self.since = min(self.since, other.since)
        for key, flat in other.marks.items():
            self.marks.setdefault(key, []).extend(flat)
        self.strings += other.strings

    def holds(self, result_id: str, digest: bytes) -> bool:
        """Whether the event of ``result_id`` and ``digest`` is among these marks."""
        return any((result_id, digest) in marks for marks in self.marks.values())

    def size(self) -> int:
        return sum(len(marks) for marks in self.marks.values()) + len(self.strings)

    def args(self, current: Iterable[str]) -> tuple[list[str], list[Any]]:
        """KEYS and ARGV of the ``published`` function for the pointers hashes in ``current`` (the others
        expired or are about to: their notes are dropped)."""
        kept = [(key, self.marks[key]) for key in current if key in self.marks]
        keys = [key for key, _ in kept] + self.strings
        args: list[Any] = [len(kept), *(len(marks) for _, marks in kept), len(self.strings)]
        for _, marks in kept:
            args += [result_id for result_id, _ in marks]
            for result_id, digest in marks:
                args += [published_field(result_id), published_value(digest)]
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
        notes.marks.setdefault(pointers, []).append((result_id, digest))

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
