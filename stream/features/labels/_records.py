"""The verdict records kept for the join and the rows a join appends (the byte layouts: the package docstring)."""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Sequence
from dataclasses import dataclass

import orjson

from ...models import (
    PANEL_RESULT_NAME,
    Feedback,
    GradedResult,
)

#: hash tags the verdict buckets are spread over (Redis Cluster slots); the join runs one script per shard
SHARDS = 16
#: a verdict record is at most this long: the bound on the bytes kept per judged event for the join
MAX_RECORD_BYTES = 64
_HEAD = 7  # layout (4), flags (1), result score (2)
#: names (judges and evaluators) a record keeps at most
MAX_NAMES = (MAX_RECORD_BYTES - _HEAD) // 2
_NONE = 0xFFFF
ROW_HEAD = 20  # event (8), annotator (4), arrival (4), human flags (1) and score (2), verdict length (1)
_GRID = 10_000  # scores are kept in 1e-4 units


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
    while pos + ROW_HEAD <= len(blob):
        event, annotator = blob[pos : pos + 8], blob[pos + 8 : pos + 12]
        (arrived,) = struct.unpack(">I", blob[pos + 12 : pos + 16])
        flags, hscore = struct.unpack(">BH", blob[pos + 16 : pos + 19])
        length = blob[pos + 19]
        verdict = blob[pos + ROW_HEAD : pos + ROW_HEAD + length]
        pos += ROW_HEAD + length
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


def label_row(label: Feedback, verdict: tuple[Layout, bytes], arrived: float = 0.0) -> Row:
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
