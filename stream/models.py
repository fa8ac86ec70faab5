"""Pydantic models of the wire contracts. Each mirrors a JSON Schema in ``schemas/``.

A test (tests/schemas/test_contracts.py) keeps each pair in step: same properties, same required fields,
same verdict on valid and invalid documents. Change both together.
"""

from __future__ import annotations

from datetime import UTC, datetime
from math import isfinite, modf
from typing import Annotated, Any, ClassVar, Literal

import orjson
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)

from .blocks import AgentBlock, ReportBlock, RetrievalBlock, UsageBlock

__all__ = [
    "CATEGORIES",
    "FEEDBACK_SCALES",
    "PANEL_RESULT_NAME",
    "RFC3339",
    "Aggregate",
    "AggregateEvaluator",
    "AggregateJudge",
    "AggregateSegment",
    "AggregateUsage",
    "Agreement",
    "Alert",
    "AlertChange",
    "AlertWindow",
    "DeadLetter",
    "DeadLetterSource",
    "DeadLetterTruncation",
    "EvaluatorResult",
    "Feedback",
    "GradedResult",
    "HumanAgreement",
    "JudgeBlock",
    "JudgeFallback",
    "JudgeVerdict",
    "RequestEvent",
    "Resolution",
    "ReviewItem",
    "SessionMetrics",
    "SessionResult",
    "encode_result",
]

#: the multi-judge spec: the ten task categories with their own rubrics. Any other non-empty name is a custom
#: category.
CATEGORIES = (
    "qa_simple",
    "reasoning_complex",
    "code_generation",
    "generation_long",
    "summarization",
    "translation",
    "math_reasoning",
    "creative_writing",
    "factual_accuracy",
    "multi_turn",
)

#: RFC 3339 date-time (the contract's timestamp format); a missing offset is read as UTC.
#: the judge panel's entry among a result's evaluator results, and the name its window counters sit under
#: (``ev:judge_panel:c:<judge>.<counter>``, streameval.aggregates)
PANEL_RESULT_NAME = "judge_panel"

RFC3339 = r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})?$"

_STRICT = ConfigDict(extra="forbid", strict=True)

#: the suite version (docs/versions.md): a definition's short content hash, 12 hex digits
SUITE_VERSION = r"^[0-9a-f]{12}$"
_VERSION_DOC = "the suite's version: short content hash of its resolved definition (docs/versions.md)"


class _Versioned(BaseModel):
    """Leaves out the optional version fields while they are unset, so a document without them is
    byte-identical to what the worker wrote before versions (and ``null`` never appears for them)."""

    omitted_when_unset: ClassVar[tuple[str, ...]] = ("suite_version",)

    @model_serializer(mode="wrap")
    def _omit_unset(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        if isinstance(data, dict):
            for name in self.omitted_when_unset:
                if data.get(name, 0) is None:
                    del data[name]
        return data


#: contract version 1. Not ``Literal[1]``: pydantic lets ``true`` (== 1 in Python) through a Literal.
SchemaVersion = Annotated[int, Field(strict=True, ge=1, le=1)]


def parse_time(value: str) -> float:
    """Epoch seconds of an RFC 3339 timestamp (naive means UTC)."""
    dt = datetime.fromisoformat(value.replace("z", "Z").replace("Z", "+00:00"))
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.timestamp()


def format_time(epoch: float) -> str:
    """RFC 3339 UTC with milliseconds, e.g. ``2026-11-21T10:00:00.123Z``.

    The same text as ``datetime.fromtimestamp(epoch, UTC).isoformat(timespec="milliseconds")`` with ``Z``
    (tests/core/test_result_fastpath.py compares them), ~3x cheaper: the date and time of day are formatted
    once per second; the fraction is rounded to microseconds as datetime rounds it (half to even, a
    carry into the next second included), then cut to milliseconds as isoformat cuts it."""
    global _last
    last = _last
    if epoch == last[0]:  # a batch's events without a timestamp of their own share one time
        return last[1]
    if not isfinite(epoch):
        return _format_time(epoch)  # raises as datetime does
    fraction, whole = modf(epoch)
    micros = round(fraction * 1e6)
    if micros >= 1_000_000:
        micros -= 1_000_000
        whole += 1.0
    elif micros < 0:
        micros += 1_000_000
        whole -= 1.0
    prefix = _seconds.get(whole)
    if prefix is None:
        if len(_seconds) >= 256:
            _seconds.clear()
        prefix = _seconds[whole] = datetime.fromtimestamp(whole, tz=UTC).isoformat(timespec="seconds")[:-6]
    text = f"{prefix}.{micros // 1000:03d}Z"
    _last = (epoch, text)
    return text


def _format_time(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, tz=UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


# ``YYYY-MM-DDTHH:MM:SS`` of the last whole seconds formatted (a batch's events share a few)
_seconds: dict[float, str] = {}
# the last time formatted and its text (equal times have the same text, 5 and 5.0 or 0.0 and -0.0 too)
_last: tuple[float, str] = (float("nan"), "")


class RequestEvent(BaseModel):
    """One model output to evaluate (request event v1). ``id`` is the idempotency key."""

    model_config = _STRICT

    schema_version: SchemaVersion = 1
    id: str = Field(min_length=1, max_length=256)
    model: str = Field(min_length=1, max_length=256)
    output: str
    input: str | None = None
    expected: str | None = None
    # fail_fast: one error, not one per item, for a list of a million wrong items (bounded decode cost)
    references: list[str] = Field(default_factory=list, fail_fast=True)
    category: str | None = Field(default=None, min_length=1, max_length=64)
    suite: str | None = Field(default=None, min_length=1, max_length=128)
    tags: list[str] = Field(default_factory=list, fail_fast=True)
    metadata: dict[str, Any] = Field(default_factory=dict)
    timestamp: str | None = Field(default=None, pattern=RFC3339)
    # Typed context blocks for the report, RAG and agent metrics (stream/blocks.py).
    report: ReportBlock | None = None
    retrieval: RetrievalBlock | None = None
    agent: AgentBlock | None = None
    # What the monitored call used: tokens, time, cost, finish reason (docs/usage.md)
    usage: UsageBlock | None = None
    # Truth for keyword_match's confusion matrix: should the output match the expected answer?
    label: bool | None = None

    def event_time(self, default: float) -> float:
        """The event's own time in epoch seconds, or ``default`` when it carries none."""
        return parse_time(self.timestamp) if self.timestamp else default

    def targets(self) -> list[str]:
        """What an output is compared with: ``expected`` if given, else the ``references``."""
        return [self.expected] if self.expected is not None else list(self.references)


class EvaluatorResult(BaseModel):
    """One evaluator's verdict: the shape every evaluator returns (the evaluator-module spec's result shape + name)."""

    model_config = _STRICT

    name: str
    score: float = Field(ge=0.0, le=1.0)
    passed: bool
    weight: float = Field(ge=0.0)
    reason: str | None = None
    details: dict[str, Any] | None = None
    error: str | None = None
    version: str | None = Field(
        default=None, description="definition version used (registered evaluators: id@n)"
    )


class JudgeVerdict(BaseModel):
    """One judge's answer about one event. Scores on 0-10 except ``scores``/``overall``,
    which are on the judge's own ``scale``."""

    model_config = _STRICT

    name: str
    model: str
    weight: float = Field(ge=0.0, le=1.0)
    status: Literal["ok", "error", "skipped"]
    prompt: str = Field(description="prompt kind: standard, overall, report or metric:<name>")
    scale: Literal["1-5", "0-10", "0-1"]
    score: float | None = Field(default=None, ge=0.0, le=10.0, description="normalised to 0-10")
    parse: Literal["json", "fenced_json", "embedded_json", "regex", "default", "number"] | None = None
    scores: dict[str, float] = Field(default_factory=dict)
    overall: float | None = None
    computed: float | None = None
    reasoning: str | None = None
    strengths: list[str] = Field(default_factory=list)
    weaknesses: list[str] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    prompt_tokens: int = Field(default=0, ge=0)
    completion_tokens: int = Field(default=0, ge=0)
    latency_ms: float = Field(default=0.0, ge=0.0)
    attempts: int = Field(default=0, ge=0)
    cached: bool = False
    error: str | None = None
    reason: str | None = None


class JudgeFallback(BaseModel):
    """The RAG-evaluation spec's LLM fallback of one rule evaluator: final = max(rule, LLM), scores on 0-1."""

    model_config = _STRICT

    evaluator: str
    prompt: str
    trigger: float | Literal["always", "never"]
    rule_score: float = Field(ge=0.0, le=1.0)
    triggered: bool
    llm_score: float | None = Field(ge=0.0, le=1.0)
    final_score: float = Field(ge=0.0, le=1.0)
    source: Literal["rule", "llm", "default"]
    judges: list[JudgeVerdict]


class JudgeBlock(BaseModel):
    """What the judge panel did for one event. Panel/metrics/final scores on 0-10."""

    model_config = _STRICT

    status: Literal["ok", "partial", "failed", "unsampled"]
    mode: Literal["blend", "fallback"]
    prompt: str = Field(description="rubric, report or metric")
    category: str | None
    panel_score: float | None = Field(ge=0.0, le=10.0)
    metrics_score: float = Field(ge=0.0, le=10.0)
    final_score: float = Field(ge=0.0, le=10.0)
    reason: str
    judges: list[JudgeVerdict]
    fallbacks: list[JudgeFallback]


class GradedResult(_Versioned):
    """The graded result of one event (graded result v1)."""

    model_config = _STRICT

    schema_version: SchemaVersion = 1
    id: str
    model: str
    suite: str
    category: str | None = None
    score: float = Field(ge=0.0, le=1.0)
    passed: bool
    threshold: float = Field(ge=0.0, le=1.0)
    grade: str
    evaluators: list[EvaluatorResult]
    event_time: str = Field(pattern=RFC3339)
    evaluated_at: str = Field(pattern=RFC3339)
    latency_ms: float = Field(ge=0.0)
    pipeline_version: str
    judge: JudgeBlock | None = Field(
        default=None, description="the LLM judge panel; null when the suite has none"
    )
    failed_gates: list[str] = Field(default_factory=list, description="gate evaluators that did not pass")
    reason: str | None = Field(default=None, description="why the result failed regardless of its score")
    suite_version: str | None = Field(default=None, pattern=SUITE_VERSION, description=_VERSION_DOC)
    shadow: bool | None = Field(
        default=None,
        description="true: a shadow version's result (never alerts, "
        "never in the live version's figures); absent otherwise",
    )
    backfill: bool | None = Field(
        default=None,
        description="true: made by `streameval backfill` from the retained request topic; absent otherwise",
    )
    redacted: dict[str, int] | None = Field(
        default=None,
        description="values replaced before the judges saw the event, by kind (docs/redact.md); "
        "absent when the suite does not redact or the event was not judged",
    )

    omitted_when_unset: ClassVar[tuple[str, ...]] = ("suite_version", "shadow", "backfill", "redacted")


_PASSTHROUGH = (
    orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_SUBCLASS
)


def _not_plain(value: Any) -> Any:
    raise TypeError(f"{type(value).__name__} is left to pydantic")


def _fields(model: Any, cls: type[BaseModel], names: tuple[str, ...]) -> dict[str, Any] | None:
    """``model``'s field dictionary when it is exactly a ``cls`` holding exactly its fields in order
    (what pydantic writes, in that order); else None: the document is left to pydantic."""
    if type(model) is not cls:
        return None
    fields: dict[str, Any] = model.__dict__
    return fields if tuple(fields) == names else None


def _all_fields(
    models: list[Any], cls: type[BaseModel], names: tuple[str, ...]
) -> list[dict[str, Any]] | None:
    """:func:`_fields` of each of ``models``, or None as soon as one is None."""
    out = []
    for model in models:
        if type(model) is not cls:
            return None
        fields = model.__dict__
        if tuple(fields) != names:
            return None
        out.append(fields)
    return out


def _judge_document(block: Any) -> dict[str, Any] | None:
    fields = _fields(block, JudgeBlock, _JUDGE_BLOCK_FIELDS)
    if fields is None:
        return None
    judges = _all_fields(fields["judges"], JudgeVerdict, _VERDICT_FIELDS)
    if judges is None:
        return None
    fallbacks = []
    for fallback in fields["fallbacks"]:
        item = _fields(fallback, JudgeFallback, _FALLBACK_FIELDS)
        verdicts = None if item is None else _all_fields(item["judges"], JudgeVerdict, _VERDICT_FIELDS)
        if item is None or verdicts is None:
            return None
        fallbacks.append({**item, "judges": verdicts})
    return {**fields, "judges": judges, "fallbacks": fallbacks}


def encode_result(result: GradedResult) -> bytes:
    """``result.model_dump_json().encode()``, byte for byte, at a fraction of the CPU (the wire bytes of
    a graded result: ``streameval evaluate``, the worker, backfills).

    ``model_dump_json`` of a :class:`GradedResult` goes through :class:`_Versioned`'s Python wrap
    serializer, so pydantic first builds the whole document as Python objects and then writes them
    (~10 µs for six evaluators). Here the document is the models' own field dictionaries (their
    values are the validated ones) written by orjson, which writes JSON as pydantic does for these
    types: strings escaped alike, floats in the shortest form that reads back (non-finite ones as
    null), tuples as lists. Anything orjson would write differently or refuses is left to
    ``model_dump_json``: a subclass of a model, a model whose dictionary is not exactly its fields in
    order, subclasses of str, int, dict or list, dates, dataclasses, keys that are not strings,
    integers beyond 64 bits, strings that are not valid UTF-8 (tests/core/test_result_codec.py and
    tests/judges/test_judges_fastpath.py compare both on the result corpora and on edge values)."""
    fields = _fields(result, GradedResult, _GRADED_FIELDS)
    evaluators = (
        None if fields is None else _all_fields(fields["evaluators"], EvaluatorResult, _RESULT_FIELDS)
    )
    if fields is not None and evaluators is not None:
        document = {**fields, "evaluators": evaluators}
        judge = document["judge"]
        if judge is not None:
            document["judge"] = _judge_document(judge)
        if judge is None or document["judge"] is not None:
            for name in GradedResult.omitted_when_unset:
                if document[name] is None:
                    del document[name]
            try:
                return orjson.dumps(document, default=_not_plain, option=_PASSTHROUGH)
            except TypeError:
                pass
    return result.model_dump_json().encode()


_GRADED_FIELDS = tuple(GradedResult.model_fields)
_RESULT_FIELDS = tuple(EvaluatorResult.model_fields)
_JUDGE_BLOCK_FIELDS = tuple(JudgeBlock.model_fields)
_VERDICT_FIELDS = tuple(JudgeVerdict.model_fields)
_FALLBACK_FIELDS = tuple(JudgeFallback.model_fields)


class SessionMetrics(BaseModel):
    """Rule metrics over a session's thread (streameval.features.sessions.thread)."""

    model_config = _STRICT

    turns: int = Field(ge=0, description="turns received (kept and dropped)")
    kept: int = Field(ge=0, description="turns in the judged thread")
    dropped: int = Field(ge=0, description="middle turns left out by the session's bounds")
    duration_s: float = Field(ge=0.0, description="last minus first event time of the kept turns")
    score_min: float = Field(ge=0.0, le=1.0)
    score_mean: float = Field(ge=0.0, le=1.0)
    score_last: float = Field(ge=0.0, le=1.0)
    refusals: int = Field(ge=0, description="turns whose output is a refusal")
    errors: int = Field(ge=0, description="turns with an evaluator error or an error flag")
    gate_failures: int = Field(ge=0, description="turns that failed a gate of their own suite")
    tool_calls: int = Field(
        default=0, ge=0, description="tool calls of the kept turns (an agent run's tool spans included)"
    )
    tool_errors: int = Field(ge=0, description="tool calls that failed")
    steps: int = Field(
        default=0,
        ge=0,
        description="an agent run's unscored steps (tool and sub-agent spans, LLM calls that answered "
        "with tool calls only, the root span's end)",
    )
    unclean_turns: int = Field(ge=0, description="turns with any of the above")
    collaboration_efficiency: float = Field(
        ge=0.0, description="agent spec: quality / (rounds x time + 1), rounds = turns"
    )
    adaptability: float = Field(
        ge=0.0, le=1.0, description="agent spec: mean of the per-domain mean turn scores"
    )
    domains: dict[str, float] = Field(description="mean turn score per domain")


class SessionResult(_Versioned):
    """The graded result of one session: a conversation or agent run judged as a whole (session result v1)."""

    model_config = _STRICT
    omitted_when_unset: ClassVar[tuple[str, ...]] = ("suite_version", "backfill")

    schema_version: SchemaVersion = 1
    id: str = Field(description="session:key#revision")
    session: str = Field(description="the session's name (suite file sessions:)")
    key: str = Field(description="the session key")
    model: str = Field(description="the model of the last turn: its figures are kept under this model")
    models: list[str] = Field(description="every model of the kept turns, in order of first appearance")
    category: str | None = None
    turn_ids: list[str] = Field(description="ids of the judged turns, in thread order")
    first_event_time: str = Field(pattern=RFC3339)
    last_event_time: str = Field(pattern=RFC3339)
    closed_by: Literal["end", "gap", "idle"]
    closed_at: str = Field(pattern=RFC3339)
    revision: int = Field(ge=0, description="0 first; +1 per late turn within grace_s")
    truncated: bool
    metrics: SessionMetrics
    score: float = Field(ge=0.0, le=1.0)
    passed: bool
    threshold: float = Field(ge=0.0, le=1.0)
    grade: str
    evaluators: list[EvaluatorResult]
    judge: JudgeBlock | None = None
    failed_gates: list[str] = Field(default_factory=list)
    reason: str | None = None
    evaluated_at: str = Field(pattern=RFC3339)
    latency_ms: float = Field(ge=0.0)
    pipeline_version: str
    suite_version: str | None = Field(
        default=None,
        pattern=SUITE_VERSION,
        description="the session's version: short content hash of its resolved definition (docs/versions.md)",
    )
    backfill: bool | None = Field(
        default=None,
        description="true: judged by `streameval backfill` from the retained request topic; absent otherwise",
    )


class DeadLetterSource(BaseModel):
    model_config = _STRICT

    topic: str | None = None
    partition: int | None = None
    offset: int | None = None


class DeadLetterTruncation(BaseModel):
    """Set when the whole event would not fit in a dead letter: ``raw`` then holds only its first bytes."""

    model_config = _STRICT

    length: int = Field(ge=0, description="bytes of the whole event")
    sha256: str = Field(pattern="^[0-9a-f]{64}$", description="SHA-256 of the whole event, hex")
    tail: str = Field(description="the event's last bytes, base64 (raw holds its first bytes)")
    stored_key: str | None = Field(description="Redis key holding the whole event; null when it was not kept")
    stored_until: str | None = Field(pattern=RFC3339, description="when that key expires")


class DeadLetter(BaseModel):
    """An event that could not be evaluated, with its raw bytes (dead letter v1).

    ``raw`` is the whole event unless ``truncated`` is set (a dead letter must fit the broker's
    message size): then ``raw`` is its head, ``truncated.tail`` its tail, and the whole event is kept
    in Redis under ``truncated.stored_key`` for a while (docs/reliability.md).
    """

    model_config = _STRICT

    schema_version: SchemaVersion = 1
    raw: str = Field(description="the event's raw bytes (its first bytes when truncated is set), base64")
    reason: str
    kind: Literal[
        "too_large",
        "invalid_json",
        "schema",
        "no_suite",
        "unknown_suite",
        "internal",
        "unmatched_label",
        "undelivered",
    ]
    event_id: str | None = None
    source: DeadLetterSource
    failed_at: str = Field(pattern=RFC3339)
    pipeline_version: str
    truncated: DeadLetterTruncation | None = None


class AlertWindow(BaseModel):
    model_config = _STRICT

    size_s: int = Field(gt=0)
    start: str = Field(pattern=RFC3339)
    end: str = Field(pattern=RFC3339)


class AlertChange(BaseModel):
    """A score shift's estimated change point and size (``metric: score_shift``, docs/drift.md)."""

    model_config = _STRICT

    series: str = Field(description="overall, evaluator:{name} or judge:{name} (0-10 scores)")
    direction: Literal["up", "down"]
    start: str = Field(pattern=RFC3339, description="event time of the change point: the start of its window")
    event_id: str | None = Field(default=None, description="a result of that window (its lowest-scored)")
    shift: float = Field(description="mean since the change point minus the reference mean")
    reference_mean: float
    reference_std: float
    ewma: float
    events_since: int = Field(ge=0)


class AggregateSegment(BaseModel):
    """Which slice an aggregate or alert is of (docs/segments.md)."""

    model_config = _STRICT

    dimension: str = Field(min_length=1, description="the dimension's name in the suite file's segments:")
    value: str = Field(
        min_length=1,
        description="its value; (other): the values beyond max_values; (missing), (invalid) (docs/segments.md)",
    )


#: why a resolve ends its alert (docs/notify.md, "Resolve"): the rule no longer fires on a later window; the
#: detector is back in control; a newer alert of the same detector series replaces it; the pair had no event
#: for the configured number of windows
Resolution = Literal["recovered", "in_control", "superseded", "no_events"]


class Alert(_Versioned):
    """A rule that fired on a window (alert v1). ``figures`` are the window's figures (docs/statistics.md)."""

    model_config = _STRICT
    omitted_when_unset: ClassVar[tuple[str, ...]] = ("suite_version", "segment", "resolution")

    schema_version: SchemaVersion = 1
    id: str
    rule: str
    severity: Literal["info", "warning", "critical"]
    metric: str
    comparator: Literal["<", "<=", ">", ">="]
    threshold: float
    value: float
    count: int = Field(ge=0)
    model: str
    suite: str
    window: AlertWindow
    message: str
    fired_at: str = Field(pattern=RFC3339)
    min_count: int = Field(default=1, ge=0, description="the rule's minimum count")
    cooldown_s: int = Field(default=0, ge=0, description="the rule's cooldown, seconds")
    figures: dict[str, float | None] = Field(default_factory=dict, description="the window's figures")
    examples: list[str] = Field(
        default_factory=list,
        max_length=3,
        description="ids of up to 3 of the lowest-scored results of the window (the drill-down examples)",
    )
    change: AlertChange | None = Field(default=None, description="score_shift alerts: the change point")
    suite_version: str | None = Field(default=None, pattern=SUITE_VERSION, description=_VERSION_DOC)
    segment: AggregateSegment | None = Field(
        default=None, description="the slice the rule fired on (rules with segments:); absent: the pair"
    )
    status: Literal["firing", "resolved"] = Field(
        default="firing",
        description="resolved: a later window of the same size no longer fires the rule (the id is the "
        "firing alert's; docs/notify.md)",
    )
    resolution: Resolution | None = Field(
        default=None,
        description="a resolve: why it ends the alert (recovered, in_control, superseded, no_events; "
        "docs/notify.md); absent on a firing alert",
    )


class AggregateEvaluator(BaseModel):
    model_config = _STRICT

    count: int = Field(ge=0)
    mean: float
    pass_rate: float = Field(ge=0.0, le=1.0)


class AggregateJudge(BaseModel):
    """One judge's figures in a window (scores on 0-10)."""

    model_config = _STRICT

    n: int = Field(ge=0, description="answered scores")
    mean: float | None
    std: float | None = Field(ge=0.0)
    errors: int = Field(ge=0)
    error_rate: float | None = Field(ge=0.0, le=1.0)
    drift: float | None = Field(ge=0.0, description="|window mean - all-time mean| / all-time std")
    calls: int = Field(default=0, ge=0, description="HTTP calls made (consistency repeats included)")
    cache_hits: int = Field(
        default=0, ge=0, description="answers from the cache or an identical request in flight"
    )
    cost: float | None = Field(default=None, ge=0.0, description="money of the calls; null without prices")


class AggregateUsage(BaseModel):
    """The monitored calls' usage in a window (docs/usage.md): only with ``prices:`` or ``budgets:``."""

    model_config = _STRICT

    events: int = Field(ge=0, description="events with a usage block")
    input_tokens: int = Field(ge=0, description="sum, cached tokens included")
    output_tokens: int = Field(ge=0, description="sum, reasoning tokens included")
    cached_input_tokens: int = Field(ge=0)
    reasoning_tokens: int = Field(ge=0)
    currency: str | None = Field(description="the prices table's currency; null without a table")
    cost: float = Field(ge=0.0, description="sum over the priced events")
    priced: int = Field(ge=0, description="events with a cost (the producer's, or by the prices table)")
    unpriced: int = Field(ge=0, description="events of the window without a cost (never counted as 0)")
    cost_per_event: float | None = Field(ge=0.0, description="cost / priced; null when none is priced")
    duration_p50_ms: float | None = Field(ge=0.0, description="log-bucket estimate, within ±5.9 %")
    duration_p95_ms: float | None = Field(ge=0.0)
    duration_p99_ms: float | None = Field(ge=0.0)
    ttft_p50_ms: float | None = Field(ge=0.0, description="time to first token")
    ttft_p95_ms: float | None = Field(ge=0.0)
    finish_reasons: dict[str, Annotated[int, Field(ge=0)]] = Field(
        description="events per finish reason; others as (other)"
    )


class Aggregate(_Versioned):
    """Figures of one closed window for one model × suite (aggregate v1); docs/statistics.md. With ``segment``:
    of one slice of it (docs/segments.md), whose count, mean, std, interval and pass rate alone are kept."""

    model_config = _STRICT
    omitted_when_unset: ClassVar[tuple[str, ...]] = ("suite_version", "segment", "usage")

    schema_version: SchemaVersion = 1
    model: str
    suite: str
    window: AlertWindow
    count: int = Field(ge=0)
    mean: float
    std: float = Field(ge=0.0)
    pass_rate: float = Field(ge=0.0, le=1.0)
    grades: dict[str, int]
    evaluators: dict[str, AggregateEvaluator]
    published_at: str = Field(pattern=RFC3339)
    ci_low: float | None = Field(default=None, description="95 % confidence interval of the mean, low end")
    ci_high: float | None = Field(default=None, description="95 % confidence interval of the mean, high end")
    dead_letters: int = Field(
        default=0, ge=0, description="dead letters of the window (all models and suites)"
    )
    dead_letter_rate: float | None = Field(default=None, ge=0.0, le=1.0)
    judge_error_rate: float | None = Field(default=None, ge=0.0, le=1.0)
    tokens: dict[str, int] = Field(default_factory=dict, description="judge tokens: prompt, completion")
    latency_p95_ms: float | None = Field(default=None, ge=0.0, description="bucket upper bound")
    judges: dict[str, AggregateJudge] = Field(default_factory=dict)
    judge_pearson: dict[str, float | None] = Field(default_factory=dict, description='"a|b" -> Pearson r')
    alpha: float | None = Field(default=None, description="Krippendorff's alpha (interval) across the panel")
    consistency: float | None = Field(default=None, description="Pearson r of repeat vs first judge scores")
    consistency_n: int = Field(default=0, ge=0)
    late: int = Field(default=0, ge=0, description="events after the window end, within the allowed lateness")
    late_redirected: int = Field(default=0, ge=0, description="events of closed windows counted in this one")
    warnings: list[str] = Field(default_factory=list)
    judge_cost: float | None = Field(
        default=None, ge=0.0, description="money of the judges' calls (priced judges)"
    )
    backpressure_skips: int = Field(
        default=0, ge=0, description="sampled events not judged because of backpressure"
    )
    suite_version: str | None = Field(default=None, pattern=SUITE_VERSION, description=_VERSION_DOC)
    human: HumanAgreement | None = Field(
        default=None,
        description="agreement of the judges, the panel, the result and the rule evaluators with "
        "human labels joined in the window (docs/feedback.md); null without labels",
    )
    usage: AggregateUsage | None = Field(
        default=None,
        description="the monitored calls' tokens, cost and durations (docs/usage.md); absent unless the "
        "suite file has prices: or budgets:",
    )
    segment: AggregateSegment | None = Field(
        default=None, description="the slice these figures are of (docs/segments.md); absent: the whole pair"
    )


#: the scales a human score may be given on (``Feedback.scale``); each is normalised to 0-1
FEEDBACK_SCALES: dict[str, tuple[float, float]] = {
    "0-1": (0.0, 1.0),
    "1-5": (1.0, 5.0),
    "0-10": (0.0, 10.0),
    "0-100": (0.0, 100.0),
}


class Feedback(BaseModel):
    """A person's label of one evaluated event (feedback v1, topic ``evals.feedback``; docs/feedback.md).

    ``passed`` and/or ``score``: a thumbs up/down is a bare ``passed``. ``score`` and ``criteria`` are on
    ``scale`` (default 0-1); the join normalises them to 0-1.
    """

    model_config = _STRICT

    schema_version: SchemaVersion = 1
    id: str = Field(min_length=1, max_length=256, description="the labelled event's id")
    model: str | None = Field(default=None, min_length=1, max_length=256)
    suite: str | None = Field(default=None, min_length=1, max_length=128)
    passed: bool | None = None
    score: float | None = Field(default=None, ge=0.0, le=100.0)
    scale: Literal["0-1", "1-5", "0-10", "0-100"] = "0-1"
    criteria: dict[str, Annotated[float, Field(ge=0.0, le=100.0)]] = Field(
        default_factory=dict, max_length=64
    )
    annotator: str | None = Field(default=None, min_length=1, max_length=128)
    comment: str | None = Field(default=None, max_length=4096)
    timestamp: str | None = Field(default=None, pattern=RFC3339)
    expected: str | None = Field(
        default=None,
        max_length=65536,
        description="the person's corrected expected answer (kept, not joined)",
    )

    @model_validator(mode="after")
    def _label_and_range(self) -> Feedback:
        if self.passed is None and self.score is None:
            raise ValueError("a label needs passed and/or score")
        low, high = FEEDBACK_SCALES[self.scale]
        for name, value in [("score", self.score), *((f"criteria.{k}", v) for k, v in self.criteria.items())]:
            if value is not None and not low <= value <= high:
                raise ValueError(f"{name} {value:g} is outside the scale {self.scale}")
        return self

    def normalised(self, value: float) -> float:
        """``value`` on this label's scale, as 0-1."""
        low, high = FEEDBACK_SCALES[self.scale]
        return (value - low) / (high - low)


class Agreement(BaseModel):
    """One rater (a judge, the panel, the result, a rule evaluator) against people, or people among themselves."""

    model_config = _STRICT

    n: int = Field(ge=0, description="labelled events with a value on both sides")
    n_pass: int = Field(default=0, ge=0, description="of which with a pass/fail on both sides (kappa)")
    kappa: float | None = Field(default=None, description="Cohen's kappa on pass/fail")
    kappa_ci_low: float | None = None
    kappa_ci_high: float | None = None
    alpha: float | None = Field(
        default=None, description="Krippendorff's alpha (interval), the human as one more rater"
    )
    pearson: float | None = None
    pearson_ci_low: float | None = None
    pearson_ci_high: float | None = None
    spearman: float | None = None
    mae: float | None = Field(default=None, ge=0.0, description="mean |rater - human| on 0-1")
    mae_ci_low: float | None = None
    mae_ci_high: float | None = None
    bias: float | None = Field(default=None, description="rater mean - human mean on 0-1")


class HumanAgreement(BaseModel):
    """Agreement with human labels of one window (or all time) of one model × suite."""

    model_config = _STRICT

    labels: int = Field(ge=0, description="labels joined (the last per event and annotator)")
    events: int = Field(ge=0, description="distinct events labelled")
    raters: dict[str, Agreement] = Field(
        default_factory=dict,
        description="result, panel, judge:{name}, evaluator:{name} -> agreement with people",
    )
    annotators: Agreement | None = Field(
        default=None, description="people among themselves: each pair of annotators of one event"
    )

    def lowest_kappa(self, min_labels: int = 1) -> float | None:
        """The lowest Cohen's kappa with people among the judges, the panel and the result, over those with at
        least ``min_labels`` labelled pass/fail pairs (the alert metric ``human_agreement`` and the
        ``--min-human-kappa`` gate read this)."""
        kappas = [
            a.kappa
            for name, a in self.raters.items()
            if (name in ("result", "panel") or name.startswith("judge:"))
            and a.kappa is not None
            and a.n_pass >= min_labels
        ]
        return min(kappas, default=None)


ReviewReason = Literal["gate_failed", "judges_disagree", "near_threshold", "control"]


class ReviewItem(BaseModel):
    """One result selected for a person's look (review item v1, topic ``evals.review``; docs/feedback.md)."""

    model_config = _STRICT

    schema_version: SchemaVersion = 1
    id: str = Field(description="the event id: label it with this id on the feedback topic")
    model: str
    suite: str
    reasons: list[ReviewReason] = Field(min_length=1, description="why it was selected, most important first")
    reason: str = Field(description="the same, in words")
    score: float = Field(ge=0.0, le=1.0)
    passed: bool
    threshold: float = Field(ge=0.0, le=1.0)
    judges: dict[str, float | None] = Field(
        default_factory=dict, description="each judge's score (0-10); null: no answer"
    )
    judge_spread: float | None = Field(default=None, ge=0.0, description="highest - lowest judge score")
    failed_gates: list[str] = Field(default_factory=list)
    input: str | None = Field(
        default=None, description="the event's input (first 4000 characters), when known"
    )
    output: str | None = Field(
        default=None, description="the event's output (first 4000 characters), when known"
    )
    event_time: str = Field(pattern=RFC3339)
    selected_at: str = Field(pattern=RFC3339)
