"""The label join in Redis: verdicts kept in the record pipeline, labels joined or waiting, rows read back."""

from __future__ import annotations

import base64
import logging
import math
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from ... import telemetry
from ..._util import clip
from ..._version import __version__
from ...errors import UnmatchedLabel
from ...keyspace import Client, Keys, guard, run_scripts
from ...models import (
    DeadLetter,
    DeadLetterSource,
    Feedback,
    GradedResult,
    HumanAgreement,
    format_time,
)
from . import _scripts
from ._figures import Calibration, calibration, human_agreement
from ._records import (
    MAX_RECORD_BYTES,
    ROW_HEAD,
    SHARDS,
    Layout,
    Row,
    annotator_digest,
    event_digest,
    label_row,
    layout_id,
    pack_verdict,
    parse_rows,
    verdict_values,
)

log = logging.getLogger(__name__)

#: a worker writes each layout it uses again after this long (s): a write lost to an outage heals
_LAYOUT_REWRITE_S = 300.0
#: labels one worker takes from the waiting list per periodic step
_TAKE = 500


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
        self._read = client.register_script(_scripts.LABEL_JOIN_READ)
        self._keep = client.register_script(_scripts.LABEL_KEEP)
        self._rows = client.register_script(_scripts.LABEL_ROWS)
        self._pending_add = client.register_script(_scripts.LABEL_PENDING_ADD)
        self._pending_take = client.register_script(_scripts.LABEL_PENDING_TAKE)
        self._pending_settle = client.register_script(_scripts.LABEL_PENDING_SETTLE)
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
        """What keeps the verdicts of ``(pair, result)`` in the record pipeline: one ``_scripts.LABEL_KEEP`` script call
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
            rows[verdict[0].pair].append(label_row(label.feedback, verdict, now))
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
                rows[verdict[0].pair].append(label_row(label.feedback, verdict, first))
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
                        self.max_rows * (ROW_HEAD + MAX_RECORD_BYTES),
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
