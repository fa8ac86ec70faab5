"""The review page's shared queue in Redis: the recent review items, reservations, labels and progress.

The worker keeps each review item it publishes (:meth:`ReviewPageStore.keep`, one script call per batch
with items, and one more dropping the oldest), at most ``review.keep`` items for ``review.keep_ttl_s``; the
web server reads and reserves them.

* **Reservations.** Opening an item reserves it for ``review.lease_s`` (the page renews it while open). An
  item takes ``review.reviewers`` labels from different annotators; it is offered while its labels plus the
  live reservations of others are fewer, so two people never hold the last place of one item. An annotator
  holds one item at a time: opening another releases the first.
* **Never twice.** An item an annotator labelled or skipped is never offered to them again.
* **Progress.** Per queue (model × suite) and per annotator, read from the kept items.

Keys: ``P{rp}:...`` (streameval.features.review_page._scripts); one hash tag, because the queue is
written at people's pace (``review.rate_per_min`` per pair), not per event.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, cast

import orjson

from ...errors import StoreUnavailable
from ...keyspace import Client, guard, run_scripts
from ...models import GradedResult, ReviewItem
from ..review import ReviewConfig
from . import _scripts
from ._items import item_document, rank_of, summary_of

__all__ = ["Order", "Progress", "ReserveOutcome", "ReviewPageStore", "Summary"]

ReserveOutcome = Literal["ok", "gone", "labelled", "skipped", "complete", "taken"]
Order = Literal["newest", "important"]


@dataclass(frozen=True)
class Summary:
    """One item as the queue's list shows it, with its state for the annotator asking."""

    key: str
    model: str
    suite: str
    reasons: list[str]
    rank: int
    need: int
    done: int
    selected_ms: int
    fields: dict[str, Any]
    labelled_by: list[str]
    skipped_by: list[str]
    reserved_by: list[str]

    def open_to(self, annotator: str) -> bool:
        """May ``annotator`` open it now (not theirs already, a place left)?"""
        if annotator in self.labelled_by or annotator in self.skipped_by:
            return False
        others = len([r for r in self.reserved_by if r != annotator])
        return self.done + others < self.need

    def as_json(self, annotator: str) -> dict[str, Any]:
        return {
            "key": self.key,
            "model": self.model,
            "suite": self.suite,
            "reasons": self.reasons,
            "reviewers": self.need,
            "labels": self.done,
            "reserved": len(self.reserved_by),
            "mine": annotator in self.reserved_by,
            "labelled": annotator in self.labelled_by,
            "skipped": annotator in self.skipped_by,
            "open": self.open_to(annotator),
            **self.fields,
        }


@dataclass
class Progress:
    queues: dict[tuple[str, str], dict[str, int]] = field(default_factory=dict)
    annotators: dict[str, dict[str, int]] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return {
            "queues": [{"model": m, "suite": s, **v} for (m, s), v in sorted(self.queues.items())],
            "annotators": [{"annotator": a, **v} for a, v in sorted(self.annotators.items())],
        }


def _pairs(flat: Any) -> dict[str, str]:
    """A flat ``[field, value, ...]`` as Lua's cjson gives it (an empty one is ``{}``)."""
    if not isinstance(flat, list):
        return {}
    return {str(flat[i]): str(flat[i + 1]) for i in range(0, len(flat) - 1, 2)}


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class ReviewPageStore:
    """The queue's Redis side; ``clock`` (epoch seconds) is injectable for tests."""

    def __init__(
        self,
        client: Client,
        prefix: str,
        config: ReviewConfig | None = None,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.client = client
        self.base = f"{prefix}{{rp}}:"
        self.config = config or ReviewConfig()
        self.clock = clock
        self._add = client.register_script(_scripts.ADD)
        self._reserve = client.register_script(_scripts.RESERVE)
        self._release = client.register_script(_scripts.RELEASE)
        self._skip = client.register_script(_scripts.SKIP)
        self._labelled = client.register_script(_scripts.LABELLED)
        self._list = client.register_script(_scripts.LIST)
        self._drop = client.register_script(_scripts.DROP)

    def _now_ms(self) -> int:
        return int(self.clock() * 1000)

    def _keys(self, key: str) -> list[str]:
        return [f"{self.base}m:{key}", f"{self.base}r:{key}", f"{self.base}held"]

    # -- the worker's side ---------------------------------------------------------------------------
    async def keep(
        self,
        items: Sequence[ReviewItem],
        results: Sequence[tuple[str, GradedResult, bytes | None]],
        threads: Mapping[str, list[dict[str, str]]] | None = None,
    ) -> int:
        """Keep the review items just chosen, with their results ``(pair, result, raw request)`` and, for
        a session's result, its thread (``threads``: result id -> turns, ``{role, text}``). One call, and
        one more when the page holds ``keep`` items already (the oldest are dropped)."""
        config = self.config
        if not items or config.keep == 0:
            return 0
        by_id = {(r.model, r.suite, r.id): (r, raw) for _, r, raw in results}
        keys = [f"{self.base}idx"]
        args: list[Any] = [self._now_ms(), config.keep_ttl_s, config.keep]
        for item in items:
            found = by_id.get((item.model, item.suite, item.id))
            if found is None:
                continue
            result, raw = found
            doc = item_document(item, result, raw, config.reviewers, (threads or {}).get(item.id))
            keys += [f"{self.base}doc:{doc['key']}", f"{self.base}m:{doc['key']}"]
            args += [
                doc["key"],
                orjson.dumps(doc),
                item.model,
                item.suite,
                ",".join(item.reasons),
                rank_of(item),
                config.reviewers,
                int(config.lease_s * 1000),
                orjson.dumps(summary_of(item)),
            ]
        if len(keys) == 1:
            return 0
        [reply] = await guard(run_scripts(self.client, [(self._add, keys, args)]))
        await self._drop_items([_text(k) for k in reply[1:]])
        return int(reply[0])

    async def _drop_items(self, gone: Sequence[str]) -> None:
        """Drop items (older than the TTL, or beyond ``keep``) with their state, in one call."""
        if not gone:
            return
        keys = [f"{self.base}idx"]
        for k in gone:
            keys += [f"{self.base}{part}:{k}" for part in ("doc", "m", "r", "f")]
        await guard(run_scripts(self.client, [(self._drop, keys, list(gone))]))

    # -- the page's side -----------------------------------------------------------------------------
    async def summaries(self) -> list[Summary]:
        """Every kept item, newest first: the index, then one script call with one JSON reply."""
        kept = [_text(k) for k in await guard(self.client.zrevrange(f"{self.base}idx", 0, -1))]
        if not kept:
            return []
        keys = [f"{self.base}{part}:{k}" for k in kept for part in ("m", "r")]
        [reply] = await guard(run_scripts(self.client, [(self._list, keys, kept)]))
        now = self._now_ms()
        out = []
        for key, flat, held_flat in orjson.loads(reply):
            meta = _pairs(flat)
            held = {who: int(end) for who, end in _pairs(held_flat).items()}
            out.append(
                Summary(
                    key=key,
                    model=meta["model"],
                    suite=meta["suite"],
                    reasons=meta["reasons"].split(","),
                    rank=int(meta["rank"]),
                    need=int(meta["need"]),
                    done=int(meta["done"]),
                    selected_ms=int(meta["t"]),
                    fields=orjson.loads(meta.get("summary", "{}")),
                    labelled_by=sorted(k[2:] for k in meta if k.startswith("l:")),
                    skipped_by=sorted(k[2:] for k in meta if k.startswith("k:")),
                    reserved_by=sorted(a for a, end in held.items() if end > now),
                )
            )
        return out

    async def queue(
        self,
        annotator: str,
        *,
        model: str | None = None,
        suite: str | None = None,
        reason: str | None = None,
        order: Order = "newest",
        among: Sequence[Summary] | None = None,
    ) -> list[Summary]:
        """The items ``annotator`` may still label (not labelled or skipped by them, not complete), filtered
        and ordered: newest first, or most important first (then newest). ``among``: summaries just read."""
        items = [
            s
            for s in (await self.summaries() if among is None else among)
            if annotator not in s.labelled_by
            and annotator not in s.skipped_by
            and s.done < s.need
            and (model is None or s.model == model)
            and (suite is None or s.suite == suite)
            and (reason is None or reason in s.reasons)
        ]
        if order == "important":
            items.sort(key=lambda s: (s.rank, -s.selected_ms))
        return items

    async def document(self, key: str) -> dict[str, Any] | None:
        raw = await guard(self.client.get(f"{self.base}doc:{key}"))
        return None if raw is None else dict(orjson.loads(raw))

    async def reserve(self, key: str, annotator: str) -> tuple[ReserveOutcome, int | None]:
        """Reserve (or renew) ``key`` for ``annotator``: ``("ok", lease end in ms)`` or why not."""
        read = await guard(self.client.hget(f"{self.base}held", annotator))
        before = "" if read is None else _text(read)
        for _ in range(8):  # the item held changed between the read and the script: again with its keys
            keys = self._keys(key)
            if before and before != key:
                keys.append(f"{self.base}r:{before}")
            else:
                before = ""
            [reply] = await guard(
                run_scripts(self.client, [(self._reserve, keys, [before, key, annotator, self._now_ms()])])
            )
            outcome = _text(reply[0])
            if outcome != "held":
                return cast(ReserveOutcome, outcome), int(_text(reply[1])) if outcome == "ok" else None
            before = _text(reply[1])
        raise StoreUnavailable(
            f"reserving a review item for {annotator!r} kept racing with their other calls"
        )

    async def release(self, key: str, annotator: str) -> None:
        await guard(run_scripts(self.client, [(self._release, self._keys(key), [key, annotator])]))

    async def skip(self, key: str, annotator: str) -> bool:
        [done] = await guard(
            run_scripts(self.client, [(self._skip, self._keys(key), [key, annotator, self._now_ms()])])
        )
        return bool(done)

    async def labelled(self, key: str, annotator: str, label: bytes) -> int:
        """Mark ``key`` labelled by ``annotator`` (after the label is on the broker): 1, 0 when it was
        already (a retried submit: the label kept is the newest), -1 when the item is gone."""
        [done] = await guard(
            run_scripts(
                self.client,
                [
                    (
                        self._labelled,
                        [*self._keys(key), f"{self.base}f:{key}"],
                        [key, annotator, self._now_ms(), label],
                    )
                ],
            )
        )
        return int(done)

    async def progress(self) -> Progress:
        """Per queue: items, complete, labels, open, reserved; per annotator: labelled, skipped, holding."""
        progress = Progress()
        people: dict[str, dict[str, int]] = defaultdict(lambda: {"labelled": 0, "skipped": 0, "holding": 0})
        for s in await self.summaries():
            q = progress.queues.setdefault(
                (s.model, s.suite), {"items": 0, "complete": 0, "labels": 0, "open": 0, "reserved": 0}
            )
            q["items"] += 1
            q["labels"] += s.done
            q["complete"] += int(s.done >= s.need)
            q["open"] += int(s.done < s.need)
            q["reserved"] += len(s.reserved_by)
            for who in s.labelled_by:
                people[who]["labelled"] += 1
            for who in s.skipped_by:
                people[who]["skipped"] += 1
            for who in s.reserved_by:
                people[who]["holding"] += 1
        progress.annotators = dict(people)
        return progress

    async def labelled_documents(
        self, *, model: str | None = None, suite: str | None = None
    ) -> list[tuple[dict[str, Any], dict[str, dict[str, Any]]]]:
        """Each labelled item's document with its labels (annotator -> feedback v1), oldest first."""
        chosen = [
            s
            for s in reversed(await self.summaries())
            if s.done and (model is None or s.model == model) and (suite is None or s.suite == suite)
        ]
        if not chosen:
            return []

        async def read() -> list[Any]:
            async with self.client.pipeline(transaction=False) as pipe:
                for s in chosen:
                    pipe.get(f"{self.base}doc:{s.key}")
                    pipe.hgetall(f"{self.base}f:{s.key}")
                return list(await pipe.execute())

        replies = await guard(read())
        out = []
        for i in range(len(chosen)):
            doc, labels = replies[2 * i], replies[2 * i + 1]
            if doc is None or not labels:
                continue
            out.append((dict(orjson.loads(doc)), {_text(a): orjson.loads(v) for a, v in labels.items()}))
        return out
