"""Which features a worker runs, from the settings and the suite file: what is on is paid for, what is off
does not exist (docs/performance.md, "What each feature costs").

:func:`enabled` resolves the settings that default to "when the suite file asks for it";
:func:`record_plugins` builds the recorders of those that keep something per event
(streameval.feature.BatchRecorder), for the composition root to hand to the store; :func:`annotators` the
annotators of those that note something of each event (streameval.feature.Annotator), for the pipeline;
:func:`batch_steps` the steps of those that act once a batch is recorded (streameval.feature.BatchStep), for
the processor; :func:`window_steps` the window closer's steps of those that work per closed window
(streameval.feature.WindowStep) and :func:`alert_examples` what lists an alert's example ids, for the
composition root to hand to the closer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..config import LoadedConfig
from ..feature import AlertExamples, Annotator, BatchRecorder, BatchStep, Redaction, WindowStep
from ..keyspace import Client
from ..settings import Settings
from ..store import ResultStore
from ..usage_figures import pack_slice_usage
from .compare import DEFAULT_TTL_S as DEFAULT_COMPARE_TTL_S
from .compare import CompactScoresRecorder
from .drilldown import ExamplesRecorder, worst_ids
from .embedding_drift import DriftAnnotator, DriftRecorder, EmbeddingDriftConfig
from .embedding_drift._step import DriftStep  # the closer's side, loaded by the composition root alone
from .labels import AgreementStep, LabelStore, VerdictRecorder
from .notify._resolves import ResolveStep
from .review import ReviewQueue
from .review.step import SendForReview
from .review_page import ReviewPageStore
from .score_shift import ScoreShiftStep
from .segments import Dimension, SlicesAnnotator, SlicesRecorder, SlicesStep
from .sessions.state import SessionStore
from .sessions.step import AppendTurns
from .sessions.turns import TurnsAnnotator
from .usage import Budgets, UsageAnnotator, UsageRecorder, UsageStep

__all__ = [
    "DEFAULT_COMPARE_TTL_S",
    "DEFAULT_EXAMPLES",
    "DEFAULT_LABEL_JOIN_TTL_S",
    "Enabled",
    "alert_examples",
    "annotators",
    "batch_steps",
    "enabled",
    "record_plugins",
    "slice_annotators",
    "window_steps",
]

#: drill-down examples of each kind per window when alerts need them (STREAMEVAL_EXAMPLES unset)
DEFAULT_EXAMPLES = 20
#: how long verdicts are kept for the label join when labels are configured (STREAMEVAL_LABEL_JOIN_TTL_S unset)
DEFAULT_LABEL_JOIN_TTL_S = 7 * 86400


@dataclass(frozen=True)
class Enabled:
    """The per-event features a worker runs (0 / None: off)."""

    examples: int = 0
    example_ttl_s: int = 86400
    compare_ttl_s: int = 0
    label_join_ttl_s: int = 0
    embedding_drift: EmbeddingDriftConfig | None = None
    usage: bool = False  # the suite file has prices: or budgets: (streameval.features.usage)
    currency: str | None = None  # its prices table's currency
    budgets: Budgets | None = None  # its budgets, when it has any and the run spends (not a backfill)
    segments: tuple[Dimension, ...] = ()  # the slice dimensions (streameval.features.segments); (): off


def enabled(settings: Settings, suites: LoadedConfig | None, *, backfill: bool = False) -> Enabled:
    """What runs: an explicit setting wins; unset, a feature is on when the suite file (or the run: a shadow
    file, a backfill) asks for what it keeps. ``suites`` None: only the explicit settings count."""
    wants_examples = suites is not None and bool(suites.alerts or suites.windowing.score_shift is not None)
    examples = settings.examples
    if examples is None:
        examples = DEFAULT_EXAMPLES if wants_examples else 0
    compare = settings.compare_ttl_s
    if compare is None:
        shadows = suites is not None and any(s.shadows for s in suites.all)
        compare = DEFAULT_COMPARE_TTL_S if (backfill or settings.shadow or shadows) else 0
    labels = settings.label_join_ttl_s
    if labels is None:
        wants_labels = suites is not None and (
            suites.feedback_configured
            or suites.review is not None
            or any(rule.metric == "human_agreement" for rule in suites.alerts)
        )
        labels = DEFAULT_LABEL_JOIN_TTL_S if wants_labels and not backfill else 0
    usage = suites is not None and (suites.prices is not None or bool(suites.budgets))
    budgets = (
        Budgets(suites.budgets, dimensions=tuple(d.name for d in suites.segments))
        if suites is not None and suites.budgets and not backfill
        else None
    )
    return Enabled(
        usage=usage,
        currency=suites.prices.currency if suites is not None and suites.prices is not None else None,
        budgets=budgets,
        examples=examples,
        example_ttl_s=settings.example_ttl_s,
        compare_ttl_s=compare,
        label_join_ttl_s=labels,
        embedding_drift=None if suites is None or backfill else suites.windowing.embedding_drift,
        segments=() if suites is None else suites.segments,
    )


def record_plugins(on: Enabled, labels: LabelStore | None = None) -> list[BatchRecorder]:
    """The recorders of the features ``on`` turns on (``labels``: the label store, when the join is on), in
    the order their blocks run in the record script."""
    out: list[BatchRecorder] = []
    if labels is not None and on.label_join_ttl_s:
        out.append(VerdictRecorder(labels))
    if on.compare_ttl_s:
        # with slices, each event's slice values too: two versions compare per slice
        out.append(CompactScoresRecorder(on.compare_ttl_s, dimensions=tuple(d.name for d in on.segments)))
    if on.embedding_drift is not None:
        out.append(DriftRecorder(on.embedding_drift))
    if on.examples:
        out.append(ExamplesRecorder(on.examples, on.example_ttl_s))
    if on.usage:  # before the slices: its figures join each event's increments, which they keep per slice
        out.append(UsageRecorder(on.currency, on.budgets, slices=bool(on.segments)))
    if on.segments:
        if on.usage:  # its figures per slice value in their fixed layout (streameval.usage_figures)
            out.append(SlicesRecorder(on.segments, UsageRecorder.SLICE_PREFIXES, pack_slice_usage))
        else:
            out.append(SlicesRecorder(on.segments))
    return out


def window_steps(
    suites: LoadedConfig, windows: Sequence[int], labels: LabelStore | None = None
) -> list[WindowStep]:
    """The window closer's steps of the features the suite file turns on (``windows``: the kept window sizes,
    which a step's window must be one of; ``labels``: the label store, when the join is on), in the order
    the closer calls them."""
    out: list[WindowStep] = []
    windowing = suites.windowing
    resolves = bool(suites.notify)  # alerts resolve only for the notifier (streameval.features.notify)
    detectors: dict[str, int | None] = {}
    if windowing.score_shift is not None:
        out.append(ScoreShiftStep(windowing.score_shift, windows, resolves=resolves))
        detectors["score_shift"] = windowing.score_shift.resolve_after_empty
    if windowing.embedding_drift is not None:
        out.append(DriftStep(windowing.embedding_drift, windows, resolves=resolves))
        detectors["embedding_drift"] = windowing.embedding_drift.resolve_after_empty
    if labels is not None:
        out.append(AgreementStep(labels))
    if suites.segments:  # before the notifier's resolves: they read the window's alerts only
        out.append(SlicesStep(suites.segments, suites.alerts, resolves=resolves))
    if resolves:
        out.append(ResolveStep(suites.alerts, detectors))
    if suites.prices is not None or suites.budgets:
        currency = suites.prices.currency if suites.prices is not None else None
        dimensions = tuple(d.name for d in suites.segments)
        out.append(
            UsageStep(currency, Budgets(suites.budgets, dimensions=dimensions) if suites.budgets else None)
        )
    return out


def alert_examples(on: Enabled) -> AlertExamples | None:
    """What lists the example ids of an alert rule's alert: the drill-down examples', when they are kept."""
    return worst_ids if on.examples else None


def annotators(suites: LoadedConfig, *, embed_outputs: bool = False) -> list[Annotator]:
    """The annotators of the features ``suites`` turns on, for a pipeline evaluating them: the sessions'
    turns; with ``embed_outputs`` (the stream worker's live pipeline and its evaluation processes: offline
    runs, shadows and backfills never alert on drift), embedding drift's samples of the outputs."""
    out: list[Annotator] = []
    if suites.sessions:
        out.append(TurnsAnnotator(suites.sessions))
    drift = suites.windowing.embedding_drift
    if embed_outputs and drift is not None:
        out.append(DriftAnnotator(drift))
    if suites.prices is not None or suites.budgets:
        out.append(UsageAnnotator(suites.prices))
    return out + slice_annotators(suites)


def slice_annotators(suites: LoadedConfig) -> list[Annotator]:
    """Each event's slice values (``segments:``, streameval.features.segments), for every pipeline whose results
    are recorded: the live one, shadows and backfills (their versions keep slices too)."""
    return [SlicesAnnotator(suites.segments)] if suites.segments else []


def session_review(steps: Sequence[BatchStep]) -> SendForReview | None:
    """The review step among ``steps`` (:func:`batch_steps`): the session closer sends its new results
    through it too, when the suite file has ``review:``."""
    return next((s for s in steps if isinstance(s, SendForReview)), None)


def batch_steps(
    client: Client,
    store: ResultStore,
    suites: LoadedConfig,
    sessions: SessionStore | None = None,
    redactors: Redaction | None = None,
) -> list[BatchStep]:
    """The processor's steps of the features ``suites`` turns on, in the order they run after each record call:
    the turns appended to their sessions (``sessions``: their state in Redis, when the suite file has any),
    then the results sent for review (and kept for the review page when it keeps any; their texts redacted
    by ``redactors``, docs/redact.md)."""
    out: list[BatchStep] = []
    if sessions is not None:
        out.append(AppendTurns(sessions))
    if suites.review is not None:
        keeper = ReviewPageStore(client, store.prefix, suites.review) if suites.review.keep else None
        redact = redactors.texts if redactors is not None else None
        queue = ReviewQueue(client, store.keys, suites.review, keeper=keeper, redact=redact)
        out.append(SendForReview(queue, store.pair_id, store.now))
    return out
