"""Human labels joined to the verdicts on the stream (docs/feedback.md).

Three parts, all in Redis so that any worker can do any step and the figures stay exact:

* **The verdicts kept for the join.** Every recorded result leaves a packed verdict record (the result's
  pass and score, each judge's and each evaluator's score; at most :data:`MAX_RECORD_BYTES`) for
  ``STREAMEVAL_LABEL_JOIN_TTL_S``. It is written by one script call per shard (``_lua.LABEL_KEEP``) in
  the record pipeline the store already sends per batch (streameval.store: no extra round trip), into
  small hashes that Redis
  keeps as listpacks: key ``P{lj:S}:b:{bucket}:{generation}``, field the first 6 bytes of the event id's
  digest. ``S`` (one of :data:`SHARDS` hash tags) is ``bucket mod SHARDS``; a generation lasts the TTL and
  a key expires at the end of the next one, so a verdict lives between one and two TTLs. Names (which
  judge is which value) are in a small dictionary ``P{lj}:layouts``: layout id -> pair, names, threshold.
* **The join.** A batch of labels reads its verdicts with one script per shard touched (so at most one
  call per label, fewer in a batch), then appends one row per label to the pair's label rows
  (``P{T}:hl:all`` and ``P{T}:hl:{size}:{start}``, the window of the label's arrival on the Redis clock;
  one script per pair). A label whose verdict is not there yet waits in ``P{lpend}:q`` (a zset: next try)
  and ``P{lpend}:d`` (its data), is tried again by every worker's periodic step with a lease, and after
  ``STREAMEVAL_LABEL_WAIT_S`` becomes a dead letter ``unmatched_label`` with its raw bytes and the reason.
* **The figures.** Rows are appended, never updated; the reader keeps the latest row per event ×
  annotator (the same annotator twice: the latest wins, counted once) and computes every figure from the
  paired values (streameval.agreement), so two workers' rows give exactly the figures of one.

Row (bytes): event digest (8), annotator digest (4), arrival (4, epoch seconds), human flags (1: has
passed, passed, has score), human score (2, 1e-4 units), verdict length (1), verdict record. Verdict
record: layout id (4), flags (1: passed), result score (2), then 2 bytes per name (0xFFFF: no value).
Scores are kept on a 1e-4 grid.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import math
import struct
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from . import _lua, telemetry
from ._util import clip
from ._version import __version__
from .agreement import IsotonicMap, agreement, isotonic
from .errors import EventError, SchemaViolation, UnmatchedLabel
from .inputs._json_map import load_json
from .inputs._path import MISSING, compile_path
from .keyspace import Client, Keys, guard, run_scripts
from .models import (
    PANEL_RESULT_NAME,
    DeadLetter,
    DeadLetterSource,
    Feedback,
    GradedResult,
    HumanAgreement,
    format_time,
)
from .strictjson import DEFAULT_MAX_EVENT_DEPTH

__all__ = [
    "MAX_RECORD_BYTES",
    "SHARDS",
    "FeedbackDecoder",
    "FeedbackInput",
    "JoinReport",
    "Label",
    "LabelStore",
    "Row",
    "calibration",
    "human_agreement",
    "join_in_memory",
    "lowest_kappa",
    "pack_verdict",
    "unpack_verdict",
    "verdict_values",
]

log = logging.getLogger(__name__)

#: hash tags the verdict buckets are spread over (Redis Cluster slots); the join runs one script per shard
SHARDS = 16
#: a verdict record is at most this long: the bound on the bytes kept per judged event for the join
MAX_RECORD_BYTES = 64
_HEAD = 7  # layout (4), flags (1), result score (2)
#: names (judges and evaluators) a record keeps at most
MAX_NAMES = (MAX_RECORD_BYTES - _HEAD) // 2
_NONE = 0xFFFF
_ROW_HEAD = 20  # event (8), annotator (4), arrival (4), human flags (1) and score (2), verdict length (1)
_GRID = 10_000  # scores are kept in 1e-4 units
#: a worker writes each layout it uses again after this long (s): a write lost to an outage heals
_LAYOUT_REWRITE_S = 300.0
#: labels one worker takes from the waiting list per periodic step
_TAKE = 500
_FEEDBACK_FIELDS = tuple(name for name in Feedback.model_fields if name != "schema_version")


# -- the feedback input --------------------------------------------------------------------------------
class FeedbackInput(BaseModel):
    """The suite file's optional ``feedback:`` block: how messages of the feedback topic become labels.

    ``format: native`` reads feedback v1 documents; ``format: json`` reads any JSON with a field ``map``
    (paths as in ``inputs:``, docs/inputs.md), e.g. a thumbs-up stream as it is.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    format: Literal["native", "json"] = "native"
    map: dict[str, str] = Field(default_factory=dict, description="feedback field -> path in the message")
    optional: list[str] = Field(default_factory=list, description="mapped fields whose path may find nothing")
    set: dict[str, Any] = Field(
        default_factory=dict, description="feedback fields with one value for every label"
    )
    max_message_bytes: int = Field(default=64 << 10, ge=1, description="larger messages are too_large")


def feedback_issues(spec: FeedbackInput) -> list[tuple[tuple[str | int, ...], str]]:
    """Problems pydantic cannot see (paths relative to the ``feedback`` block)."""
    issues: list[tuple[tuple[str | int, ...], str]] = []
    valid = ", ".join(_FEEDBACK_FIELDS)
    if spec.format == "native" and (spec.map or spec.set or spec.optional):
        issues.append(((("map",)), "map, optional and set need format: json"))
    for name, path in spec.map.items():
        if name not in _FEEDBACK_FIELDS:
            issues.append((("map", name), f"{name!r} is not a feedback field; fields: {valid}"))
            continue
        try:
            compile_path(path)
        except ValueError as exc:
            issues.append((("map", name), str(exc)))
    for name in spec.set:
        if name not in _FEEDBACK_FIELDS or name == "id":
            issues.append(
                (("set", name), f"{name!r} cannot be set for every label; fields: {valid} (not id)")
            )
    for k, name in enumerate(spec.optional):
        if name not in spec.map:
            issues.append((("optional", k), f"{name!r} is not in map"))
    if spec.format == "json" and "id" not in spec.map:
        issues.append((("map",), "map needs 'id' (the labelled event's id)"))
    return issues


class FeedbackDecoder:
    """One message of the feedback topic -> :class:`Feedback`, or :class:`EventError` (a dead letter)."""

    def __init__(
        self, spec: FeedbackInput | None = None, *, max_depth: int = DEFAULT_MAX_EVENT_DEPTH
    ) -> None:
        self.spec = spec or FeedbackInput()
        self.max_depth = max_depth
        self._paths = [(name, compile_path(path)) for name, path in self.spec.map.items()]

    def decode(self, raw: bytes) -> Feedback:
        document = load_json(raw, max_bytes=self.spec.max_message_bytes, max_depth=self.max_depth)
        if self.spec.format == "json":
            label: dict[str, Any] = dict(self.spec.set)
            missing = []
            for name, path in self._paths:
                value = path.find(document)
                if value is MISSING or value is None:
                    if name not in self.spec.optional:
                        missing.append(f"map.{name}: {path} found {'null' if value is None else 'nothing'}")
                    continue
                if name == "id" and isinstance(value, int | float) and not isinstance(value, bool):
                    value = str(value)
                label[name] = value
            if missing:
                raise SchemaViolation(
                    "; ".join(missing), event_id=label.get("id") if isinstance(label.get("id"), str) else None
                )
            document = label
        if not isinstance(document, dict):
            raise SchemaViolation("a label is a JSON object (feedback v1)")
        try:
            return Feedback.model_validate(document)
        except ValidationError as exc:
            event_id = document.get("id") if isinstance(document.get("id"), str) else None
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or '<label>'}: {e['msg']}" for e in exc.errors()
            )
            raise SchemaViolation(f"not a feedback v1 label: {problems}", event_id=event_id) from None


# -- the verdict records ----------------------------------------------------------------------------
def _q(value: float) -> int:
    return min(_GRID, max(0, round(value * _GRID)))


def verdict_values(result: GradedResult) -> tuple[tuple[str, ...], list[float | None]]:
    """The raters of a result other than the result itself, by name: ``judge:{name}`` (normalised score
    0-1; None when it gave no answer), ``panel`` (the judge_panel evaluator) and ``evaluator:{name}``, in
    the result's order (the suite's; the layout records it), at most :data:`MAX_NAMES`."""
    names: list[str] = []
    values: list[float | None] = []
    if result.judge is not None:
        for verdict in result.judge.judges:
            names.append("judge:" + verdict.name)
            values.append(
                verdict.score / 10 if verdict.status == "ok" and verdict.score is not None else None
            )
    for ev in result.evaluators:
        names.append("panel" if ev.name == PANEL_RESULT_NAME else "evaluator:" + ev.name)
        values.append(ev.score if ev.error is None else None)
    return tuple(names[:MAX_NAMES]), values[:MAX_NAMES]


def layout_id(pair: str, names: Sequence[str], threshold: float) -> bytes:
    return hashlib.blake2b(orjson.dumps([pair, list(names), threshold]), digest_size=4).digest()


def pack_verdict(layout: bytes, result: GradedResult, values: Sequence[float | None]) -> bytes:
    grid = _GRID
    return struct.pack(
        f">4sBH{len(values)}H",
        layout,
        int(result.passed),
        min(grid, max(0, round(result.score * grid))),
        *(_NONE if v is None else min(grid, max(0, round(v * grid))) for v in values),
    )


def unpack_verdict(record: bytes) -> tuple[bytes, bool, float, list[float | None]]:
    """(layout id, passed, score, values) of a verdict record."""
    layout, flags, score = record[:4], record[4], struct.unpack(">H", record[5:7])[0]
    values = [None if v == _NONE else v / _GRID for (v,) in struct.iter_unpack(">H", record[_HEAD:])]
    return bytes(layout), bool(flags & 1), score / _GRID, values


def event_digest(event_id: str) -> bytes:
    return hashlib.blake2b(event_id.encode(), digest_size=8, person=b"streameval-lj").digest()


def annotator_digest(annotator: str | None) -> bytes:
    return hashlib.blake2b((annotator or "").encode(), digest_size=4, person=b"streameval-an").digest()


@dataclass(frozen=True)
class Layout:
    pair: str
    names: tuple[str, ...]
    threshold: float


@dataclass(frozen=True)
class Row:
    """One joined label: the human side and the verdict it was joined to."""

    event: bytes
    annotator: bytes
    human_passed: bool | None
    human_score: float | None
    layout: bytes
    passed: bool
    score: float
    values: list[float | None]
    arrived: int = 0  # when the label arrived (epoch seconds): the latest per event × annotator counts

    def pack(self) -> bytes:
        flags = (
            (self.human_passed is not None)
            | (bool(self.human_passed) << 1)
            | ((self.human_score is not None) << 2)
        )
        verdict = (
            self.layout
            + struct.pack(">BH", int(self.passed), _q(self.score))
            + b"".join(struct.pack(">H", _NONE if v is None else _q(v)) for v in self.values)
        )
        return (
            self.event
            + self.annotator
            + struct.pack(">I", max(0, min(0xFFFFFFFF, self.arrived)))
            + struct.pack(">BH", flags, _NONE if self.human_score is None else _q(self.human_score))
            + bytes([len(verdict)])
            + verdict
        )


def parse_rows(blob: bytes) -> list[Row]:
    rows, pos = [], 0
    while pos + _ROW_HEAD <= len(blob):
        event, annotator = blob[pos : pos + 8], blob[pos + 8 : pos + 12]
        (arrived,) = struct.unpack(">I", blob[pos + 12 : pos + 16])
        flags, hscore = struct.unpack(">BH", blob[pos + 16 : pos + 19])
        length = blob[pos + 19]
        verdict = blob[pos + _ROW_HEAD : pos + _ROW_HEAD + length]
        pos += _ROW_HEAD + length
        if len(verdict) < _HEAD:
            break  # a torn tail cannot happen (APPEND is atomic); stop rather than misread
        layout, passed, score, values = unpack_verdict(verdict)
        rows.append(
            Row(
                bytes(event),
                bytes(annotator),
                bool(flags & 2) if flags & 1 else None,
                hscore / _GRID if flags & 4 else None,
                layout,
                passed,
                score,
                values,
                arrived,
            )
        )
    return rows


def latest(rows: Sequence[Row]) -> list[Row]:
    """The latest label per event × annotator: by arrival (a label that waited for its result keeps its
    arrival time), then by order of the rows (a join retried appends the same row again)."""
    last: dict[tuple[bytes, bytes], Row] = {}
    for row in rows:
        key = (row.event, row.annotator)
        kept = last.get(key)
        if kept is None or row.arrived >= kept.arrived:
            last[key] = row
    return list(last.values())


def human_agreement(rows: Sequence[Row], layouts: dict[bytes, Layout]) -> HumanAgreement | None:
    """Every figure of a set of rows (the last per event × annotator counts); None without rows."""
    rows = [r for r in latest(rows) if r.layout in layouts]
    if not rows:
        return None
    columns: dict[str, tuple[list[float], list[float], list[bool], list[bool]]] = {}

    def add(name: str, value: float, passed: bool, human: float, human_pass: bool) -> None:
        col = columns.setdefault(name, ([], [], [], []))
        col[0].append(value)
        col[1].append(human)
        col[2].append(passed)
        col[3].append(human_pass)

    by_event: dict[bytes, list[tuple[bytes, float, bool]]] = defaultdict(list)
    for row in rows:
        layout = layouts[row.layout]
        human, human_pass = _human(row, layout.threshold)
        by_event[row.event].append((row.annotator, human, human_pass))
        add("result", row.score, row.passed, human, human_pass)
        for name, value in zip(layout.names, row.values, strict=False):
            if value is not None:
                add(name, value, value >= layout.threshold, human, human_pass)
    a: list[float] = []
    b: list[float] = []
    ap: list[bool] = []
    bp: list[bool] = []
    for labels in by_event.values():
        labels.sort()
        for i in range(len(labels)):
            for j in range(i + 1, len(labels)):
                a.append(labels[i][1])
                b.append(labels[j][1])
                ap.append(labels[i][2])
                bp.append(labels[j][2])
    return HumanAgreement(
        labels=len(rows),
        events=len(by_event),
        raters={name: agreement(*col) for name, col in sorted(columns.items())},
        annotators=agreement(a, b, ap, bp) if a else None,
    )


def _human(row: Row, threshold: float) -> tuple[float, bool]:
    """The human value on 0-1 (a bare pass/fail counts as 1/0) and the human pass/fail (from the score
    against the suite threshold when the label has no passed)."""
    if row.human_score is not None:
        value = row.human_score
        return value, row.human_passed if row.human_passed is not None else value >= threshold
    return float(bool(row.human_passed)), bool(row.human_passed)


@dataclass(frozen=True)
class Calibration:
    """Per judge: the isotonic map judge score -> human score, and a suggested weight (from agreement)."""

    maps: dict[str, IsotonicMap]
    weights: dict[str, float]
    n: dict[str, int]

    def as_dict(self) -> dict[str, Any]:
        return {
            name: {
                "n": self.n[name],
                "weight": self.weights.get(name),
                "map": [[x, y] for x, y in zip(self.maps[name].xs, self.maps[name].ys, strict=True)],
            }
            for name in sorted(self.maps)
        }


def calibration(rows: Sequence[Row], layouts: dict[bytes, Layout], *, min_n: int = 10) -> Calibration:
    """Isotonic maps per judge (at least ``min_n`` labels) and weights proportional to each judge's
    Krippendorff's α with people (negative α: weight 0), summing to 1 over the judges with an α."""
    rows = [r for r in latest(rows) if r.layout in layouts]
    pairs: dict[str, tuple[list[float], list[float]]] = {}
    for row in rows:
        layout = layouts[row.layout]
        human, _ = _human(row, layout.threshold)
        for name, value in zip(layout.names, row.values, strict=False):
            if value is not None and name.startswith("judge:"):
                col = pairs.setdefault(name[6:], ([], []))
                col[0].append(value)
                col[1].append(human)
    maps, alphas, ns = {}, {}, {}
    for judge, (x, y) in pairs.items():
        ns[judge] = len(x)
        if len(x) < min_n:
            continue
        maps[judge] = isotonic(x, y)
        alpha = agreement(x, y, [], []).alpha
        if alpha is not None:
            alphas[judge] = max(0.0, alpha)
    total = math.fsum(alphas.values())
    weights = {j: a / total for j, a in alphas.items()} if total > 0 else {}
    return Calibration(maps, weights, {j: ns[j] for j in maps})


def join_in_memory(
    results: Sequence[GradedResult], labels: Sequence[Feedback]
) -> tuple[dict[str, list[Row]], dict[bytes, Layout], list[tuple[Feedback, str]]]:
    """The join of ``streameval evaluate --labels``: the same rows and layouts as on the stream, without
    Redis. Returns rows per pair, the layouts and the labels that found no result (with why)."""
    verdicts: dict[str, tuple[Layout, bytes]] = {}
    layouts: dict[bytes, Layout] = {}
    for result in results:  # the last result of an id wins, as the kept verdicts on the stream
        pair = Keys.pair_id(result.model, result.suite)
        names, values = verdict_values(result)
        layout = layout_id(pair, names, result.threshold)
        layouts[layout] = Layout(pair, names, result.threshold)
        verdicts[result.id] = (layouts[layout], pack_verdict(layout, result, values))
    rows: dict[str, list[Row]] = defaultdict(list)
    unmatched: list[tuple[Feedback, str]] = []
    for label in labels:
        verdict = verdicts.get(label.id)
        if verdict is None:
            unmatched.append((label, f"no result for event id {label.id!r}"))
            continue
        model, suite = Keys.split_pair(verdict[0].pair)[:2]
        if (label.model is not None and label.model != model) or (
            label.suite is not None and label.suite != suite
        ):
            unmatched.append(
                (label, f"event id {label.id!r} was evaluated for model {model!r}, suite {suite!r}")
            )
            continue
        rows[verdict[0].pair].append(_row(label, verdict))
    return dict(rows), layouts, unmatched


def lowest_kappa(figures: HumanAgreement, min_labels: int = 1) -> float | None:
    """The lowest Cohen's kappa with people among the judges, the panel and the result (the alert metric
    ``human_agreement`` and the ``--min-human-kappa`` gate read this)."""
    kappas = [
        a.kappa
        for name, a in figures.raters.items()
        if (name in ("result", "panel") or name.startswith("judge:"))
        and a.kappa is not None
        and a.n_pass >= min_labels
    ]
    return min(kappas, default=None)


# -- the store ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Label:
    """A decoded label with where it came from (its raw bytes go into its dead letter if it never joins)."""

    feedback: Feedback
    raw: bytes
    topic: str | None = None
    partition: int | None = None
    offset: int | None = None


@dataclass
class JoinReport:
    """What one join call did (also counted in ``streameval_labels_total``)."""

    joined: int = 0
    waiting: int = 0
    unmatched: int = 0
    full: int = 0  # rows not kept: the pair's rows reached STREAMEVAL_LABEL_MAX_ROWS
    calls: int = 0  # Redis calls made (script calls and commands; one round trip may carry several)
    dead_letters: list[DeadLetter] = field(default_factory=list)
    expired: list[Any] = field(default_factory=list)  # waiting labels dead-lettered: settle_expired


class LabelStore:
    """Keeps verdicts for the join, joins labels, reads the figures (module docstring)."""

    def __init__(
        self,
        client: Client,
        keys: Keys,
        *,
        join_ttl_s: int = 7 * 86400,
        buckets: int = 16384,
        wait_s: float = 900.0,
        max_pending: int = 100_000,
        max_rows: int = 100_000,
        windows: Sequence[int] = (60,),
        window_ttl_s: int = 7 * 86400,
        all_time_ttl_s: int = 90 * 86400,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.client = client
        self.keys = keys
        self.join_ttl_s = join_ttl_s
        self.buckets = buckets
        self.wait_s = wait_s
        self.max_pending = max_pending
        self.max_rows = max_rows
        self.windows = tuple(windows)
        self.window_ttl_s = window_ttl_s
        self.all_time_ttl_s = all_time_ttl_s
        self.clock = clock
        self._read = client.register_script(_lua.LABEL_JOIN_READ)
        self._keep = client.register_script(_lua.LABEL_KEEP)
        self._rows = client.register_script(_lua.LABEL_ROWS)
        self._pending_add = client.register_script(_lua.LABEL_PENDING_ADD)
        self._pending_take = client.register_script(_lua.LABEL_PENDING_TAKE)
        self._pending_settle = client.register_script(_lua.LABEL_PENDING_SETTLE)
        self._layouts: dict[bytes, Layout] = {}  # read or written by this worker
        # layouts this worker wrote, and when (monotonic)
        self._layout_ids: dict[tuple[str, tuple[str, ...], float], tuple[bytes, float]] = {}

    # -- keys ------------------------------------------------------------------------------------
    def bucket_key(self, bucket: int, generation: int) -> str:
        return f"{self.keys.prefix}{{lj:{bucket % SHARDS}}}:b:{bucket}:{generation}"

    @property
    def layouts_key(self) -> str:
        return f"{self.keys.prefix}{{lj}}:layouts"

    @property
    def pending_keys(self) -> list[str]:
        return [f"{self.keys.prefix}{{lpend}}:q", f"{self.keys.prefix}{{lpend}}:d"]

    def rows_key(self, pair: str, size: int | None = None, start: int | None = None) -> str:
        """``P{T}:hl:all`` or a window's ``P{T}:hl:{size}:{start}``, under the pair the store gives."""
        return self.keys.pair(pair) + ("hl:all" if size is None else f"hl:{size}:{start}")

    def _where(self, digest: bytes) -> tuple[int, bytes]:
        return int.from_bytes(digest, "big") % self.buckets, digest[:6]

    # -- the record side: verdicts kept in the record pipeline --------------------------------------
    def verdict_calls(
        self, events: Sequence[tuple[str, GradedResult]], now: float
    ) -> tuple[list[tuple[Any, list[str], list[Any]]], list[tuple[Any, ...]]]:
        """What keeps the verdicts of ``(pair, result)`` in the record pipeline: one ``_lua.LABEL_KEEP`` script call
        per shard touched (the HSETs of its events; a bucket without a TTL gets one), and a plain HSET of
        layouts this worker has not written lately."""
        if not self.join_ttl_s or not events:
            return [], []
        generation = int(now // self.join_ttl_s)
        ttl = max(1, math.ceil((generation + 2) * self.join_ttl_s - now))
        shards: dict[int, list[tuple[str, bytes, bytes]]] = defaultdict(list)
        new_layouts: list[Any] = []
        known, clock = self._layout_ids, time.monotonic()
        for pair, result in events:
            names, values = verdict_values(result)
            key = (pair, names, result.threshold)
            layout, written = known.get(key, (b"", -_LAYOUT_REWRITE_S))
            # new to this worker, or written a while ago (so that a lost write heals)
            if clock - written >= _LAYOUT_REWRITE_S:
                if len(known) > 10_000:  # forget now and then (they are written again, which is harmless)
                    known.clear()
                layout = layout or layout_id(pair, names, result.threshold)
                known[key] = (layout, clock)
                self._layouts[layout] = Layout(pair, names, result.threshold)
                new_layouts += [
                    layout,
                    orjson.dumps({"pair": pair, "names": names, "threshold": result.threshold}),
                ]
            bucket, name = self._where(event_digest(result.id))
            shards[bucket % SHARDS].append(
                (self.bucket_key(bucket, generation), name, pack_verdict(layout, result, values))
            )
        calls = []
        for entries in shards.values():
            keys = list(dict.fromkeys(k for k, _, _ in entries))
            where = {k: i + 1 for i, k in enumerate(keys)}
            args: list[Any] = [ttl]
            for k, name, record in entries:
                args += [where[k], name, record]
            calls.append((self._keep, keys, args))
        writes: list[tuple[Any, ...]] = []
        if new_layouts:
            writes.append(("HSET", self.layouts_key, *new_layouts))
            writes.append(("EXPIRE", self.layouts_key, max(self.all_time_ttl_s, 2 * self.join_ttl_s)))
        return calls, writes

    # -- the label side ------------------------------------------------------------------------------
    def now(self) -> float:
        return self.clock() if self.clock is not None else time.time()

    async def join(self, labels: Sequence[Label], now: float | None = None) -> JoinReport:
        """Join a batch of labels: one read script per shard touched, then, in one more round trip, one rows
        script per pair and the waiting list. Labels not joined wait (module docstring)."""
        now = self.now() if now is None else now
        report = JoinReport()
        found = await self._find([label.feedback for label in labels], now, report)
        waiting = []
        rows: dict[str, list[Row]] = defaultdict(list)
        for label, (verdict, why) in zip(labels, found, strict=True):
            if verdict is None:
                waiting.append((label, why))
                continue
            rows[verdict[0].pair].append(_row(label.feedback, verdict, now))
        calls = self._row_calls(rows, now)
        pending: list[Any] = []
        for label, _ in waiting:
            member = _member(label.feedback)
            pending += [member, repr(now + 1.0), _pending_data(label, now, now)]
        if pending:
            calls.append(
                (
                    self._pending_add,
                    self.pending_keys,
                    [self.max_pending, math.ceil(self.wait_s) + 3600, *pending],
                )
            )
        replies = await guard(run_scripts(self.client, calls)) if calls else []
        report.calls += len(calls)
        report.joined = sum(len(v) for v in rows.values())
        report.full = sum(int(r) for r in replies[: len(rows)])
        refused = set(
            bytes(m) if not isinstance(m, str) else m.encode()
            for m in (replies[len(rows)] if pending else [])
        )
        for label, why in waiting:
            if _member(label.feedback) in refused:
                report.unmatched += 1
                report.dead_letters.append(
                    _dead_letter(
                        label,
                        f"{why}; and the waiting list is full "
                        f"(STREAMEVAL_LABEL_MAX_PENDING={self.max_pending})",
                        now,
                    )
                )
            else:
                report.waiting += 1
        _count(report)
        return report

    async def retry_waiting(self, now: float | None = None, *, lease_s: float = 30.0) -> JoinReport:
        """The periodic step: try the due waiting labels again; those past ``wait_s`` become dead letters."""
        now = self.now() if now is None else now
        report = JoinReport()
        [taken] = await guard(
            run_scripts(
                self.client,
                [(self._pending_take, self.pending_keys, [repr(now), repr(now + lease_s), _TAKE])],
            )
        )
        report.calls += 1
        if not taken:
            return report
        stale: list[bytes] = []  # member, data of entries whose data is gone: taken off the list
        live: list[tuple[bytes, bytes, Label, float, int]] = []
        for i in range(0, len(taken), 2):
            member, data = _bytes(taken[i]), _bytes(taken[i + 1])
            if not data:
                stale += [member, data]
                continue
            doc = orjson.loads(data)
            label = Label(
                Feedback.model_validate(doc["label"]),
                base64.b64decode(doc["raw"]),
                doc.get("topic"),
                doc.get("partition"),
                doc.get("offset"),
            )
            live.append((member, data, label, float(doc["first"]), int(doc.get("tries", 0))))
        found = await self._find([e[2].feedback for e in live], now, report)
        rows: dict[str, list[Row]] = defaultdict(list)
        settle: list[Any] = []
        for k in range(0, len(stale), 2):
            settle += [stale[k], stale[k + 1], ""]
        for (member, data, label, first, _), (verdict, why) in zip(live, found, strict=True):
            if verdict is not None:
                rows[verdict[0].pair].append(_row(label.feedback, verdict, first))
                settle += [member, data, ""]
            elif now - first >= self.wait_s:
                report.unmatched += 1
                report.dead_letters.append(
                    _dead_letter(
                        label,
                        f"{why} within STREAMEVAL_LABEL_WAIT_S={self.wait_s:g} s "
                        f"(verdicts are kept STREAMEVAL_LABEL_JOIN_TTL_S="
                        f"{self.join_ttl_s} s)",
                        now,
                    )
                )
                # taken off the list by settle_expired, once its dead letter is out (until then its lease
                # holds it; a worker that dies before lets another dead-letter it: at least once)
                report.expired += [member, data, ""]
            else:
                report.waiting += 1
                # tried again after half its age so far: 1 s, 1 s, 2 s, ... at most 60 s apart
                settle += [
                    member,
                    data,
                    repr(min(first + self.wait_s, now + min(60.0, max(1.0, (now - first) / 2)))),
                ]
        calls = self._row_calls(rows, now)
        calls.append((self._pending_settle, self.pending_keys, settle))
        replies = await guard(run_scripts(self.client, calls))
        report.calls += len(calls)
        report.joined = sum(len(v) for v in rows.values())
        report.full = sum(int(r) for r in replies[: len(rows)])
        _count(report)
        return report

    async def settle_expired(self, report: JoinReport) -> None:
        """Take the labels :meth:`retry_waiting` dead-lettered off the waiting list (after their letters
        were published)."""
        if report.expired:
            await guard(run_scripts(self.client, [(self._pending_settle, self.pending_keys, report.expired)]))
            report.expired = []

    async def _find(
        self, labels: Sequence[Feedback], now: float, report: JoinReport
    ) -> list[tuple[tuple[Layout, bytes] | None, str]]:
        """Per label its verdict (layout, record), or None and why not. One script per shard touched."""
        if not labels:
            return []
        generation = int(now // self.join_ttl_s) if self.join_ttl_s else 0
        shards: dict[int, tuple[list[str], list[bytes], list[int]]] = {}
        for i, label in enumerate(labels):
            bucket, name = self._where(event_digest(label.id))
            keys, names, index = shards.setdefault(bucket % SHARDS, ([], [], []))
            keys += [self.bucket_key(bucket, generation), self.bucket_key(bucket, generation - 1)]
            names.append(name)
            index.append(i)
        calls = [(self._read, keys, names) for keys, names, _ in shards.values()]
        replies = await guard(run_scripts(self.client, calls))
        report.calls += len(calls)
        records: list[bytes] = [b""] * len(labels)
        for (_, _, index), reply in zip(shards.values(), replies, strict=True):
            for i, value in zip(index, reply, strict=True):
                records[i] = _bytes(value)
        await self._load_layouts({r[:4] for r in records if r}, report)
        out: list[tuple[tuple[Layout, bytes] | None, str]] = []
        for label, record in zip(labels, records, strict=True):
            if not record:
                out.append((None, f"no result for event id {label.id!r}"))
                continue
            layout = self._layouts.get(record[:4])
            if layout is None:
                out.append((None, f"the verdict of event id {label.id!r} has an unknown layout"))
                continue
            model, suite = self.keys.split_pair(layout.pair)[:2]
            if (label.model is not None and label.model != model) or (
                label.suite is not None and label.suite != suite
            ):
                out.append(
                    (
                        None,
                        f"event id {label.id!r} was evaluated for model {model!r}, suite {suite!r}, "
                        f"not the label's {label.model!r}, {label.suite!r}",
                    )
                )
                continue
            out.append(((layout, record), ""))
        return out

    async def _load_layouts(self, wanted: set[bytes], report: JoinReport | None = None) -> None:
        unknown = sorted(w for w in wanted if w not in self._layouts)
        if not unknown:
            return
        values = await guard(self.client.hmget(self.layouts_key, unknown))
        if report is not None:
            report.calls += 1
        for layout, value in zip(unknown, values, strict=True):
            if value:
                doc = orjson.loads(value)
                self._layouts[layout] = Layout(doc["pair"], tuple(doc["names"]), float(doc["threshold"]))

    def _row_calls(self, rows: dict[str, list[Row]], now: float) -> list[tuple[Any, list[str], list[Any]]]:
        calls = []
        for pair, group in rows.items():
            keys = [self.rows_key(pair)] + [
                self.rows_key(pair, size, int(now // size) * size) for size in self.windows
            ]
            blob = b"".join(row.pack() for row in group)
            calls.append(
                (
                    self._rows,
                    keys,
                    [
                        self.max_rows * (_ROW_HEAD + MAX_RECORD_BYTES),
                        self.all_time_ttl_s,
                        self.window_ttl_s,
                        blob,
                    ],
                )
            )
        return calls

    # -- reads -----------------------------------------------------------------------------------------
    @property
    def layouts(self) -> dict[bytes, Layout]:
        """The layouts known to this store (those of every row read are loaded by :meth:`rows`)."""
        return self._layouts

    async def rows(
        self, pairs: Sequence[str], size: int | None = None, start: int | None = None
    ) -> dict[str, list[Row]]:
        """The rows of each pair (all time, or one window), with their layouts loaded. One round trip."""
        if not pairs:
            return {}

        async def read() -> list[Any]:
            async with self.client.pipeline(transaction=False) as pipe:
                for pair in pairs:
                    pipe.get(self.rows_key(pair, size, start))
                return list(await pipe.execute())

        blobs = await guard(read())
        out = {
            pair: parse_rows(_bytes(blob)) if blob else [] for pair, blob in zip(pairs, blobs, strict=True)
        }
        await self._load_layouts({r.layout for rows in out.values() for r in rows})
        return out

    async def agreement(
        self, pairs: Sequence[str], size: int | None = None, start: int | None = None
    ) -> dict[str, HumanAgreement | None]:
        return {
            pair: human_agreement(rows, self._layouts)
            for pair, rows in (await self.rows(pairs, size, start)).items()
        }

    async def calibration(self, pair: str, *, min_n: int = 10) -> Calibration:
        rows = (await self.rows([pair]))[pair]
        return calibration(rows, self._layouts, min_n=min_n)


def _bytes(value: Any) -> bytes:
    if value is None:
        return b""
    return value.encode() if isinstance(value, str) else bytes(value)


def _member(label: Feedback) -> bytes:
    return event_digest(label.id) + annotator_digest(label.annotator)


def _row(label: Feedback, verdict: tuple[Layout, bytes], arrived: float = 0.0) -> Row:
    _, record = verdict
    layout, passed, score, values = unpack_verdict(record)
    human = label.normalised(label.score) if label.score is not None else None
    return Row(
        event_digest(label.id),
        annotator_digest(label.annotator),
        label.passed,
        human,
        layout,
        passed,
        score,
        values,
        int(arrived),
    )


def _pending_data(label: Label, first: float, now: float) -> bytes:
    return orjson.dumps(
        {
            "label": label.feedback.model_dump(mode="json", exclude_none=True),
            "raw": base64.b64encode(label.raw).decode(),
            "topic": label.topic,
            "partition": label.partition,
            "offset": label.offset,
            "first": first,
            "tries": 0,
        }
    )


def _dead_letter(label: Label, reason: str, now: float) -> DeadLetter:
    error = UnmatchedLabel(reason, event_id=label.feedback.id)
    return DeadLetter(
        raw=base64.b64encode(label.raw).decode("ascii"),
        reason=clip(error.reason),
        kind=error.kind,
        event_id=label.feedback.id,
        source=DeadLetterSource(topic=label.topic, partition=label.partition, offset=label.offset),
        failed_at=format_time(now),
        pipeline_version=__version__,
    )


def _count(report: JoinReport) -> None:
    for outcome, n in (("joined", report.joined), ("unmatched", report.unmatched), ("full", report.full)):
        if n:
            telemetry.LABELS.labels(outcome).inc(n)


def decode_error_letter(
    raw: bytes, exc: EventError, topic: str | None, partition: int | None, offset: int | None, now: float
) -> DeadLetter:
    """The dead letter of a message of the feedback topic that is not a label."""
    return DeadLetter(
        raw=base64.b64encode(raw).decode("ascii"),
        reason=clip(f"feedback: {exc.reason}"),
        kind=exc.kind,
        event_id=exc.event_id,
        source=DeadLetterSource(topic=topic, partition=partition, offset=offset),
        failed_at=format_time(now),
        pipeline_version=__version__,
    )
