"""What travels with every event, whatever reads or evaluates it: where it came from (:class:`Source`),
what became of it (:class:`Outcome`) and the size limits an event and its dead letter must keep.

Ground floor (docs/architecture.md): decoders, telemetry, the pipeline and the worker all speak these
types, so they import nothing above the data models.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .models import DeadLetter, GradedResult
from .strictjson import DEFAULT_MAX_EVENT_DEPTH

__all__ = [
    "DEFAULT_MAX_DEAD_LETTER_BYTES",
    "DEFAULT_MAX_EVENT_BYTES",
    "DEFAULT_MAX_EVENT_DEPTH",
    "Outcome",
    "Source",
    "line_source",
    "result_outcome",
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
class Outcome:
    """At most one of ``result`` / ``dead_letter`` is set. ``counters`` feed the window aggregates.
    ``annotations``: what the pipeline's annotators noted of the event, by annotator key (streameval.feature,
    ``Annotator``; e.g. its session turns, its embedding-drift sample), carried for the features and never read
    by the engine. Neither result nor dead letter: a step of an agent run (a tool or root span), never
    evaluated, that only carries annotations (docs/sessions.md)."""

    result: GradedResult | None = None
    dead_letter: DeadLetter | None = None
    counters: dict[str, dict[str, float]] | None = None
    annotations: Mapping[str, Any] = field(default_factory=dict)


# A frozen dataclass's __init__ sets each field through object.__setattr__ (~1.1 µs for an Outcome made
# with keywords); the slots' own descriptors set them at a third of that. Same objects: the generated
# __eq__, __hash__ and __repr__ read the slots whichever way they were set (tests/core/test_envelope_makers.py).
_new = object.__new__
_set_result, _set_dead_letter, _set_counters, _set_annotations = (
    Outcome.__dict__[name].__set__ for name in ("result", "dead_letter", "counters", "annotations")
)
_set_topic, _set_partition, _set_offset, _set_item = (
    Source.__dict__[name].__set__ for name in ("topic", "partition", "offset", "item")
)


def result_outcome(
    result: GradedResult,
    counters: dict[str, dict[str, float]] | None,
    annotations: Mapping[str, Any],
) -> Outcome:
    """``Outcome(result=result, counters=counters, annotations=annotations)``, made cheaper (per event)."""
    outcome = _new(Outcome)
    _set_result(outcome, result)
    _set_dead_letter(outcome, None)
    _set_counters(outcome, counters)
    _set_annotations(outcome, annotations)
    return outcome


def line_source(topic: str, offset: int) -> Source:
    """``Source(topic, None, offset)``, made cheaper (a file's lines, per event)."""
    source = _new(Source)
    _set_topic(source, topic)
    _set_partition(source, None)
    _set_offset(source, offset)
    _set_item(source, None)
    return source
