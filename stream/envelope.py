"""What travels with every event, whatever reads or evaluates it: where it came from (:class:`Source`),
what became of it (:class:`Outcome`) and the size limits an event and its dead letter must keep.

Ground floor (docs/architecture.md): decoders, telemetry, the pipeline and the worker all speak these
types, so they import nothing above the data models.
"""

from __future__ import annotations

from dataclasses import dataclass

from .embedding_drift import DriftSample
from .models import DeadLetter, GradedResult
from .strictjson import DEFAULT_MAX_EVENT_DEPTH

__all__ = [
    "DEFAULT_MAX_DEAD_LETTER_BYTES",
    "DEFAULT_MAX_EVENT_BYTES",
    "DEFAULT_MAX_EVENT_DEPTH",
    "Outcome",
    "Source",
    "Turn",
]

DEFAULT_MAX_EVENT_BYTES = 1 << 20  # 1 MiB; larger events are dead-lettered as too_large
#: an encoded dead letter above this is truncated (streameval.deadletters)
DEFAULT_MAX_DEAD_LETTER_BYTES = 256 * 1024


@dataclass(frozen=True, slots=True)
class Source:
    """Where a raw event came from (for dead letters); all None offline. ``item`` names one of several
    events made from one message (an OTLP export's spans: trace id - span id)."""

    topic: str | None = None
    partition: int | None = None
    offset: int | None = None
    item: str | None = None


@dataclass(frozen=True, slots=True)
class Turn:
    """One event's place in one session of the suite file (streameval.sessions). ``key`` None: the event
    matched the session but carries no key there (counted as keyless, not appended)."""

    session: str
    key: str | None
    id: str
    time: float
    end: bool = False
    payload: bytes = b""  # the turn record, JSON (streameval.sessions.turns)


@dataclass(frozen=True, slots=True)
class Outcome:
    """At most one of ``result`` / ``dead_letter`` is set. ``counters`` feed the window aggregates; ``turns``
    are appended to their sessions once the result is recorded. Neither set: a step of an agent run (a
    tool or root span), never evaluated: only its ``turns`` are appended (docs/sessions.md). ``drift``:
    the output's embedding-drift numbers (streameval.embedding_drift), when that is on and the event sampled."""

    result: GradedResult | None = None
    dead_letter: DeadLetter | None = None
    counters: dict[str, dict[str, float]] | None = None
    turns: tuple[Turn, ...] = ()
    drift: DriftSample | None = None
