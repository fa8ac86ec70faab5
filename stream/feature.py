"""What the engine knows of a feature: the protocols it calls while evaluating and recording a batch.

A feature that keeps something per event in Redis (drill-down examples, compact scores for version
comparison, embedding-drift sums, verdicts for the human-label join) is a :class:`BatchRecorder`: the
composition root (:mod:`streameval.runtime`, through :func:`streameval.features.record_plugins`) builds it
only when the suite file or the settings turn the feature on and hands it to the
:class:`~streameval.store.ResultStore`, which

* composes its Lua fragment into the record script once, at construction (one script, one SHA, per
  combination of recorders: a block that is off is neither sent nor parsed);
* asks it, per batch, for the commands it adds to the batch's one Redis pipeline (:meth:`BatchRecorder.writes`:
  plain commands and script calls on other slots, sent before the record calls);
* asks it, per model × suite pair, for its block of the pair's record call (:meth:`BatchRecorder.block`);
* tells it what was committed (:meth:`BatchRecorder.committed`), once the call counted the pair's events.

The record script hands each block, in the order the recorders were given, its own KEYS and ARGV: the
worker sends, after the core's ARGV, per block ``nk, na`` (how many KEYS and ARGV entries it owns) then
its ARGV; its KEYS follow the core's in the same order. The fragment runs after the core's writes (the
events are counted), in a ``do ... end`` of its own, with ``k0`` / ``a0`` the index just before its first
KEY / ARGV entry, and may read the core's locals: ``hashes[t]`` (target window t's hash, the open
window's when redirected), ``via[t]`` (1 or 2: which candidate open window it was redirected to; nil when
not), ``ntargets``, ``nevents`` and ``ARGV[6]`` (the window TTL). A block with no ARGV entry is skipped.
The core's own KEYS and ARGV end with the published marks that ride along (streameval.store_published: a
variable number of entries after the targets' KEYS and after the events' ARGV), so a block finds its entries
through ``k0`` / ``a0`` only, never by counting from the core's. One call may hold the events of several
batches (the store records calls made together as one: ``record_many``'s group commit); a block's
``writes`` and ``block`` see them as one batch.

Dimension-like features (slices, docs/segments.md) grow these protocols once, for every feature that keeps
figures per slice: an annotator whose :attr:`Annotator.key` is :data:`SLICES` notes each event's value in
every dimension of the suite file's ``segments:`` (a tuple of strings, in the order of its dimensions, already
normalised: ``(missing)``, ``(invalid)``), and every recorder reads them with :func:`slice_values`. The figures
of one slice are kept in one hash per pair, dimension and window (streameval.keyspace ``Keys.slice``), one field
per value (``(other)`` once the dimension holds ``max_values`` values), each field's value the figures packed
like a window hash's (streameval.store_codec: MessagePack map name -> number, :func:`slice_figures` reads a
whole hash). The slices' recorder (streameval.features.segments) keeps per slice the increments of
:attr:`Recorded.increments` whose names it is told to keep: a feature that adds figures to the increments adds
its prefix there and has them per slice too, under the same cap and in the same record call.

A feature that needs something of each evaluated event (the sessions' turns, embedding drift's sample of the
output) is an :class:`Annotator`: the composition root builds it when the suite file asks for the feature and
hands it to the :class:`~streameval.pipeline.Pipeline`, which asks it, per batch of evaluated events (a batch
of one on the per-event path), for each event's note and keeps the notes that are not None in the outcome's
``annotations`` under the annotator's :attr:`~Annotator.key` (streameval.envelope.Outcome). The engine carries
them without reading them: the store hands them to the recorders (:attr:`Recorded.annotation`), the
processor to its steps.

A feature that acts on a batch once it is recorded (appending the sessions' turns, choosing results for
review) is a :class:`BatchStep`: the composition root hands the processor (streameval.processor) its steps in
order, and after each record call of a batch the processor awaits each one with a :class:`RecordedBatch` and
publishes what they return after the batch's own messages. A feature with work on the worker's timer (the
label join's retries) is a :class:`PeriodicStep`, awaited before the windows close. A step owns its
retries: it returns (or sends, through the publish discipline of streameval.outputs) only what must be
published.

A feature that works per closed window (score shift, embedding drift, the label join's agreement, the
resolves of alert delivery) is a :class:`WindowStep`: the composition root (``window_steps`` in
streameval.features.setup) builds it only when the suite file turns the feature on and hands it to the window
closer (streameval.windows.WindowCloser, ``steps=``), which calls each step, in the order given:

* :meth:`WindowStep.closing` per window it publishes, once the window's pairs are closed and read and before
  their aggregates are built: the step may queue the window for later work (a Redis write) and may add
  figures to each pair's aggregate (fields of streameval.models.Aggregate);
* :meth:`WindowStep.published` with the window's aggregates and the alert rules' alerts, before they are
  sent: the step may add messages to the same streameval.outputs.publish_all (after the closer's own) and
  something to do once the broker acknowledged them all (after the alerts are marked sent, before the
  window's lease is marked done);
* :meth:`WindowStep.tick` once per run, after every due window is published.

A step that is off is not built: the closer neither calls nor imports it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any, Protocol

from .envelope import Outcome
from .errors import ConfigError, ConfigIssue
from .models import Aggregate, Alert, DeadLetter, DeadLetterTruncation, GradedResult, RequestEvent
from .outputs import Publish, Send

__all__ = [
    "SLICES",
    "AlertExamples",
    "Annotator",
    "BatchRecorder",
    "BatchStep",
    "Block",
    "Call",
    "ClosingWindow",
    "FiredAlert",
    "PeriodicStep",
    "PublishedWindow",
    "RecordContext",
    "Recorded",
    "RecordedBatch",
    "Redaction",
    "WindowContext",
    "WindowShare",
    "WindowStep",
    "check_kept_window",
    "slice_values",
]

#: one script call in the record pipeline: (registered script, KEYS, ARGV)
Call = tuple[Any, list[str], list[Any]]


@dataclass
class Recorded:
    """One event of a batch as the store records it (what a recorder may read)."""

    index: int
    pair: str  # its model × suite (× version) pair id (streameval.keyspace)
    digest: bytes  # its idempotency digest (id and content)
    event_time: float
    encoded: bytes
    increments: dict[str, float] = field(default_factory=dict)
    result: GradedResult | None = None
    pointer: bytes = b""  # where its encoded result is kept, once its call is built
    retract: bool = False  # takes an earlier result's figures back (record_many's retractions)
    #: the event's annotations by annotator key (Outcome.annotations; module docstring), not interpreted here
    annotation: Mapping[str, Any] | None = None


#: the annotation key of an event's slice values (module docstring): a tuple of str, one per dimension
SLICES = "slices"


def slice_values(event: Recorded) -> tuple[str, ...]:
    """The event's value in each dimension of the suite file's ``segments:``, in their order (normalised:
    never empty, at most 128 characters a field, two fields joined by ``|``; ``(missing)``, ``(invalid)``);
    () when slices are not kept or the event has none (a retraction, a session's result)."""
    notes = event.annotation
    if notes is None:
        return ()
    values = notes.get(SLICES)
    return values if isinstance(values, tuple) else ()


@dataclass(frozen=True)
class Block:
    """A recorder's part of one pair's record call, and what to tell it once the call counted the events."""

    keys: list[str]
    args: list[Any]
    token: Any = None


class RecordContext(Protocol):
    """What a recorder may ask the store that calls it (streameval.store.ResultStore)."""

    @property
    def keys(self) -> Any: ...  # streameval.keyspace.Keys

    @property
    def windows(self) -> tuple[int, ...]: ...

    @property
    def window_ttl_s(self) -> int: ...

    def candidates(self, size: int, now: float) -> tuple[int, int]:
        """The starts of the two windows of ``size`` that may be open now on the Redis clock."""
        ...


class BatchRecorder(Protocol):
    """A feature's share of recording a batch (module docstring)."""

    #: its name (the record script's block comment; telemetry)
    name: str
    #: the Lua fragment run in the record script (module docstring); "" when it adds nothing to the call
    lua: str

    def writes(
        self, ctx: RecordContext, events: Sequence[Recorded], now: float
    ) -> tuple[list[Call], list[tuple[Any, ...]]]:
        """Script calls on other slots and plain commands for the batch's pipeline, sent before the record calls
        (each event once, even when a retry of the batch calls the record script again)."""
        ...

    def block(
        self,
        ctx: RecordContext,
        pair: str,
        group: Sequence[Recorded],
        targets: Sequence[tuple[int, int]],
        now: float,
    ) -> Block | None:
        """Its block of ``pair``'s record call (``targets``: (window size index, start) in the core's order);
        None: nothing this time (the block is sent empty and skipped)."""
        ...

    def committed(self, token: Any) -> None:
        """The call that carried :meth:`block`'s ``token`` counted its events."""
        ...


class Annotator(Protocol):
    """A feature's note on each evaluated event (module docstring)."""

    #: its slot in ``Outcome.annotations`` (and in :attr:`Recorded.annotation`)
    key: str

    def annotate(self, evaluated: Sequence[tuple[RequestEvent, GradedResult, Any]]) -> Sequence[Any]:
        """Per (event, its result, its suite: streameval.config.Suite) of one batch, in order: its note; None:
        none. Called for every event the pipeline graded (a batch of one on the per-event path)."""
        ...

    def step(self, document: dict[str, Any], now: float) -> Any:
        """The note of an agent run's step (a tool or root span's document, never evaluated); None: none."""
        ...


@dataclass(frozen=True)
class RecordedBatch:
    """One record call of a batch, as its :class:`BatchStep` s read it (module docstring)."""

    outcomes: Sequence[Outcome]  # the batch's outcomes, by index
    results: Sequence[int]  # the indexes of the results this call recorded, in order (a shadow's too)
    fresh: AbstractSet[int]  # those counted for the first time (not a redelivery's stored result)
    steps: Sequence[int]  # the indexes of the agent runs' steps of this call (no result, no dead letter)
    content: Callable[[int], bytes | None]  # an event's raw bytes, by index (None: not known)


class BatchStep(Protocol):
    """A feature's step after each record call of a batch (module docstring)."""

    #: its name (telemetry, logs)
    name: str

    async def recorded(self, batch: RecordedBatch) -> list[Publish]:
        """Act on what ``batch`` recorded; the messages to publish after the batch's own. Waits while Redis is
        down (never returns having skipped its work)."""
        ...


class PeriodicStep(Protocol):
    """A feature's share of the worker's periodic step, before the windows close (module docstring)."""

    #: its name (telemetry, logs)
    name: str

    async def tick(self, send: Send) -> None:
        """Do the feature's periodic work, publishing through ``send`` (streameval.outputs.publish_all's
        discipline). Errors propagate: the next tick tries again."""
        ...


class Redaction(Protocol):
    """Redaction before judging as the engine asks for it (streameval.features.redact builds one when the
    suite file has a ``redact:`` block; docs/redact.md): the pipeline hands judges the redacted event and
    may redact a dead letter; the composition root redacts review items and drill-down examples with it."""

    def judged(self, event: RequestEvent, suite: str) -> tuple[RequestEvent, dict[str, int] | None]:
        """The event as the suite's judges may see it, and what was redacted (counts per kind)."""
        ...

    def texts(self, suite: str, texts: Sequence[str | None]) -> list[str | None]:
        """Texts of one item as they may leave, in one scope (the same value, the same placeholder)."""
        ...

    def result(self, result: GradedResult) -> GradedResult:
        """A result's texts (reasons, judges' reasoning) as a drill-down example may show them."""
        ...

    def result_document(self, document: dict[str, Any]) -> dict[str, Any]:
        """A stored result as JSON with the same texts redacted (the results API's answer)."""
        ...

    def dead_letter(self, raw: bytes, reason: str) -> tuple[bytes, str, DeadLetterTruncation | None]:
        """A dead letter's raw bytes and reason as they may be published."""
        ...

    def letter(self, letter: DeadLetter) -> DeadLetter:
        """A dead letter made elsewhere (the feedback topic's), before it is cut, as it may be published."""
        ...


@dataclass(frozen=True)
class ClosingWindow:
    """A window being published, before its aggregates are built."""

    size: int
    start: int
    pairs: tuple[str, ...]  # its pairs with events (streameval.keyspace pair ids), in publish order
    now: float  # this run's clock (the Redis server's)


@dataclass(frozen=True)
class FiredAlert:
    """An alert rule's alert sent with its window's aggregates."""

    rule: str  # the rule's name
    aggregate: Aggregate
    message: Publish


@dataclass(frozen=True)
class PublishedWindow:
    """A window's aggregates and alerts, before they are sent."""

    size: int
    start: int
    stamp: str  # its publication time (the first try's: a repeat sends the same content)
    now: float
    aggregates: tuple[Aggregate, ...]  # every pair's, in publish order (shadow versions too)
    alerts: tuple[FiredAlert, ...]


@dataclass(frozen=True)
class WindowShare:
    """A step's part of a window's publication: messages sent after the closer's, in one publish_all, and
    what to do once the broker acknowledged every message (a repeat after a crash calls the step again)."""

    messages: tuple[Publish, ...] = ()
    after: Callable[[], Awaitable[None]] | None = None


class WindowContext(Protocol):
    """What a window step may ask the closer that calls it."""

    @property
    def store(self) -> Any: ...  # streameval.store.ResultStore: its client, keys, window_ttl_s, pair_id

    def live(self, suite: str, version: str) -> bool:
        """Whether figures of ``suite`` at ``version`` are a live version's (alerts fire on them only)."""
        ...

    async def fold_in_order(
        self, size: int, queue: str, lease: str, fold: Callable[[str, int], Awaitable[None]]
    ) -> None:
        """Under ``lease``, fold every window queued in ``queue`` (a zset of starts) into each of its pairs
        (``fold(pair, start)``), in window order, stopping at the first one with an earlier window of
        ``size`` still unpublished: the same sequence whichever worker published which window."""
        ...

    async def send_claimed(self, claim: str, cooldown: str, alert: Alert, now: float, send: Send) -> None:
        """Send ``alert`` unless ``claim`` says it was sent already, and mark it sent once acknowledged."""
        ...


class WindowStep(Protocol):
    """A feature's share of closing windows (the comment above :class:`ClosingWindow`)."""

    #: its name (telemetry, logs)
    name: str

    async def closing(self, ctx: WindowContext, window: ClosingWindow) -> Mapping[str, Mapping[str, Any]]:
        """Per pair of ``window``, the fields it adds to the pair's aggregate ({}: none)."""
        ...

    async def published(self, ctx: WindowContext, window: PublishedWindow) -> WindowShare | None:
        """Its messages for ``window``'s publish_all and its work once they are acknowledged (None: none)."""
        ...

    async def tick(self, ctx: WindowContext, now: float, send: Send) -> None:
        """Once per run of the closer, after the due windows are published (``send``: its own publish_all)."""
        ...


#: ids of up to 3 of a closed window's lowest-scored results for each of ``aggregates``' pairs, for the alert
#: rules' alerts (``(store, aggregates, size, start)``; streameval.features.drilldown keeps them)
AlertExamples = Callable[[Any, Sequence[Aggregate], int, int], Awaitable[list[list[str]]]]


def check_kept_window(name: str, size: int, windows: Sequence[int]) -> None:
    """Raise :class:`ConfigError` (path ``windowing.{name}.window``) when a step's window is not kept."""
    if size not in windows:
        kept = ", ".join(map(str, windows))
        raise ConfigError(
            [
                ConfigIssue(
                    file="<config>",
                    path=f"windowing.{name}.window",
                    message=f"window {size} is not one of the kept windows (STREAMEVAL_WINDOWS={kept})",
                )
            ]
        )
