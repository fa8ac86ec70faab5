"""Closing event-time windows: one aggregate per window × model × suite, and the alerts, once.

The worker calls :meth:`WindowCloser.run_once` every ``STREAMEVAL_CLOSE_INTERVAL_S`` (a Faust timer in
``streameval.agents``; tests call it directly). Each run:

1. reads the **watermark**: the Redis server's clock (``TIME``) minus ``allowed_lateness_s`` (minus
   ``CLUSTER_CLOCK_MARGIN_S`` on a Redis Cluster, whose nodes' clocks differ slightly). A window
   ``[start, start + size)`` is due when ``start + size <= watermark``.
2. for each due window (the index ``P{ix}:open:{size}``, streameval.keyspace), takes a publishing lease
   ``P{ix}:lease:{size}:{start}`` (``SET NX PX``); only the worker that gets it goes on, so with several
   workers each window is published once.
3. reads the window's pair index ``P{ix}:wp:{size}:{start}``, which the store fills *before* it writes
   the pair's data; then, per pair and atomically in the pair's slot, sets the closed mark and reads
   the window hash. A record script that runs after that mark, or after the watermark passed, sends
   the window's late events to the window open now, counting them as ``late_redirected``
   (streameval.store): in the published figures or redirected, never lost, never twice.
4. builds :class:`~streameval.models.Aggregate` records (streameval.aggregates) and the alerts of its rules
   (each claimed on its id, with a cooldown key per rule × model × suite: :data:`streameval._lua.ALERT_CLAIM`),
   sends them all, with what the window steps add, and waits for the broker's acknowledgement of every one
   (:func:`~streameval.outputs.publish_all`), marks the alerts ``sent``, runs the steps' work for after the
   acknowledgement, then marks the lease ``done`` and forgets the window. A worker that dies before
   that leaves the lease to expire (``lease_s``); the next worker publishes the window again: at least
   once, with the same keys and content (the first try's time, :meth:`WindowCloser._stamp`), and every
   alert not yet marked sent again, with the same id (consumers deduplicate by it).

Why the Redis clock and not the largest event time seen: each worker owns only some partitions, so
per-worker event-time maxima disagree and an idle partition would hold windows open for ever; a shared
"max event time" in Redis would let one producer with a fast clock (or a replay of old data) close
windows early for everyone. Tansu's unreliable offsets (docs/api.md, consumer lag) rule out offset-based watermarks.
The Redis clock is one clock for all workers, advances when input stops, and makes "allowed lateness"
mean what operators expect: how long after a window ends its events may still arrive. The cost: a
replay of old events lands entirely in late windows (``late_redirected``), which the aggregate reports.

The features that work per closed window (score shift, embedding drift, the label join's agreement, alert
delivery's resolves) are window steps (:class:`streameval.feature.WindowStep`) the composition root hands
in (``steps=``) when the suite file turns them on, and the ids an alert lists come from drill-down examples
(``examples=``): this module knows the protocol, not the features. A step's :meth:`~streameval.feature.WindowStep.closing`
runs in step 4 before the aggregates are built, its :meth:`~streameval.feature.WindowStep.published` before
they are sent, its :meth:`~streameval.feature.WindowStep.tick` after every due window of the run.
"""

from __future__ import annotations

import logging
import math
import os
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, cast

from . import _lua
from .aggregates import build_aggregate, judge_norms
from .alerts import AlertRule, build_alert, check_alert_windows, fires
from .feature import AlertExamples, ClosingWindow, FiredAlert, PublishedWindow, WindowStep
from .keyspace import guard, is_cluster, run_scripts
from .models import Aggregate, Alert, format_time
from .outputs import Publish, Send, publish_all
from .stats import Moments
from .store import ResultStore, hash_fields

__all__ = ["WindowCloser"]

log = logging.getLogger(__name__)

#: how much later than the allowed lateness a window closes on a Redis Cluster (node clocks differ)
CLUSTER_CLOCK_MARGIN_S = 1.0


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


class WindowCloser:
    """Publishes closed windows and their alerts exactly once across workers (module docstring)."""

    def __init__(
        self,
        store: ResultStore,
        rules: Sequence[AlertRule] = (),
        *,
        allowed_lateness_s: float = 5.0,
        lease_s: float = 30.0,
        worker_id: str | None = None,
        clock: Callable[[], Awaitable[float]] | None = None,
        clock_margin_s: float | None = None,
        live_versions: Mapping[str, str] | None = None,
        steps: Sequence[WindowStep] = (),
        examples: AlertExamples | None = None,
    ) -> None:
        check_alert_windows(rules, store.windows)
        self.store = store
        # suite -> the version this worker runs live (docs/versions.md): alert rules fire only on those
        # (and on figures of the layout before versions); None: on every pair (no versions known)
        self.live_versions = live_versions  # the runtime updates it when a registry change moves a version
        self.rules = tuple(rules)
        # the features' window steps (streameval.feature.WindowStep), in the order they are called; the
        # composition root builds those the suite file turns on (streameval.features.setup.window_steps)
        self.steps = tuple(steps)
        # the ids an alert lists (streameval.features.drilldown); None: alerts list none (examples not kept)
        self.examples = examples
        self.allowed_lateness_s = allowed_lateness_s
        self.lease_ms = int(lease_s * 1000)
        self.worker_id = worker_id or f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
        # On a cluster the record scripts read their own node's clock: wait this much longer than the
        # lateness, so that a node whose clock is behind ours by less still redirects a late event.
        self.clock_margin_s = (
            (CLUSTER_CLOCK_MARGIN_S if is_cluster(store.client) else 0.0)
            if clock_margin_s is None
            else clock_margin_s
        )
        self._clock = clock  # tests inject one; default: the Redis server's clock
        self._alert_claim = store.client.register_script(_lua.ALERT_CLAIM)
        self._close_read = store.client.register_script(_lua.CLOSE_READ)

    async def now(self) -> float:
        if self._clock is not None:
            return await self._clock()
        seconds, micros = await guard(self.store.client.time())
        return float(seconds) + float(micros) / 1e6

    async def run_once(self, send: Send) -> int:
        """Close and publish every due window; returns how many windows this worker published."""
        now = await self.now()
        watermark = now - self.allowed_lateness_s - self.clock_margin_s
        published = 0
        client, keys = self.store.client, self.store.keys
        for size in self.store.windows:
            index = keys.open_windows(size)
            due = cast(list[bytes], await guard(client.zrangebyscore(index, "-inf", watermark - size)))
            for raw_start in due:
                start = int(float(_text(raw_start)))
                lease = keys.lease(size, start)
                if not await guard(client.set(lease, self.worker_id, nx=True, px=self.lease_ms)):
                    state = await guard(client.get(lease))
                    if state is not None and _text(state) == "done":  # late data re-listed it
                        await guard(client.zrem(index, raw_start))
                    continue
                sent = await self._publish(size, start, now, send)
                await guard(client.set(lease, "done", ex=self.store.window_ttl_s))
                await guard(client.zrem(index, raw_start))
                published += sent > 0
        for step in self.steps:
            await step.tick(self, now, send)
        return published

    async def _publish(self, size: int, start: int, now: float, send: Send) -> int:
        """Publish one window's aggregates and alerts; returns how many aggregates were sent.

        Returns only once the broker acknowledged every message (:func:`~streameval.outputs.publish_all`);
        the caller marks the window done after that. A repeat after a crash sends the same messages: same
        keys, same content (the stamp is the first try's, :meth:`_stamp`), alerts with the same ids.
        """
        store, client, keys = self.store, self.store.client, self.store.keys
        members = sorted(_text(m) for m in await guard(client.smembers(keys.window_pairs(size, start))))
        calls = [
            (
                self._close_read,
                [keys.closed(m, size, start), keys.window(m, size, start), keys.all_time(m)],
                [self.worker_id, store.window_ttl_s],
            )
            for m in members
        ]
        replies = await guard(run_scripts(client, calls))
        dead_raw = await guard(client.hgetall(keys.dead_letters(size, start)))
        dead = int(sum(float(v) for v in dead_raw.values()))
        kept = [(m, _pairs_fields(w), _pairs_fields(a)) for m, (w, a) in zip(members, replies, strict=True)]
        kept = [
            d for d in kept if d[1].get("count", 0.0) > 0
        ]  # indexed in case it was late, but counted elsewhere
        data = [(keys.split_pair(m), w, a) for m, w, a in kept]
        # the dead-letter rate's denominator: events of the live versions (each event once, not once per version)
        total = int(
            math.fsum(w.get("count", 0.0) for (_, suite, version), w, _ in data if self.live(suite, version))
        )
        extra = await self._closing(ClosingWindow(size, start, tuple(m for m, _, _ in kept), now))
        stamp = await self._stamp(size, start, now) if data else format_time(now)
        messages: list[Publish] = []
        aggregates: list[Aggregate] = []
        firing: list[tuple[AlertRule, Aggregate, float]] = []
        for ((model, suite, version), window, all_time), (member, _, _) in zip(data, kept, strict=True):
            aggregate = build_aggregate(
                model,
                suite,
                size,
                start,
                window,
                all_time,
                dead_letters=dead,
                window_events=total,
                published_at=stamp,
            )
            update = {**({"suite_version": version} if version else {}), **extra.get(member, {})}
            if update:  # a version's pair; the steps' figures (e.g. the label join's agreement)
                aggregate = aggregate.model_copy(update=update)
            aggregates.append(aggregate)
            for warning in aggregate.warnings:
                log.warning("%s / %s, window %s: %s", model, suite, aggregate.window.start, warning)
            key = f"{model}:{suite}:{version}" if version else f"{model}:{suite}"
            messages.append(Publish("aggregate", key.encode(), aggregate.model_dump_json().encode()))
            if not self.live(suite, version):  # shadow and backfill versions never alert
                continue
            firing += [
                (rule, aggregate, value)
                for rule in self.rules
                if (value := fires(rule, aggregate)) is not None
            ]
        claims = await self._claim(firing, now)  # alert claims, marked sent once the broker has the alerts
        sending = [(f, claim) for f, claim in zip(firing, claims, strict=True) if claim is not None]
        worst_of = [aggregate for (_, aggregate, _), _ in sending]
        examples = (
            await self.examples(store, worst_of, size, start) if self.examples else [[] for _ in sending]
        )
        fired: list[FiredAlert] = []
        for ((rule, aggregate, value), _), worst in zip(sending, examples, strict=True):
            alert = build_alert(rule, aggregate, value, fired_at=stamp, examples=worst)
            messages.append(Publish("alert", alert.id.encode(), alert.model_dump_json().encode()))
            fired.append(FiredAlert(rule.name, aggregate, messages[-1]))
        published = PublishedWindow(size, start, stamp, now, tuple(aggregates), tuple(fired))
        shares = [
            share for step in self.steps if (share := await step.published(self, published)) is not None
        ]
        await publish_all(send, [*messages, *(m for share in shares for m in share.messages)])
        await self._mark_sent([claim for _, claim in sending if claim])
        # the steps' work once the broker has everything (e.g. alert delivery's firing state)
        for share in shares:
            if share.after is not None:
                await share.after()
        return len(data)

    async def _closing(self, window: ClosingWindow) -> dict[str, dict[str, Any]]:
        """Call each step's :meth:`~streameval.feature.WindowStep.closing`: the fields each adds per pair."""
        extra: dict[str, dict[str, Any]] = {}
        for step in self.steps:
            for pair, fields in (await step.closing(self, window)).items():
                extra.setdefault(pair, {}).update(fields)
        return extra

    async def _stamp(self, size: int, start: int, now: float) -> str:
        """The window's publication time: this try's, or the first try's when an earlier one was cut short
        (a crash before the broker acknowledged it), so that a repeat carries the same content."""
        key = self.store.keys.published_at(size, start)
        async with self.store.client.pipeline(transaction=False) as pipe:
            pipe.set(key, format_time(now), nx=True, ex=self.store.window_ttl_s)
            pipe.get(key)
            _, first = await guard(pipe.execute())
        return _text(first) if first is not None else format_time(now)

    async def _mark_sent(self, claims: Sequence[str]) -> None:
        """Mark alerts sent, after the broker acknowledged them: no later try sends them again."""
        if not claims:
            return
        async with self.store.client.pipeline(transaction=False) as pipe:
            for claim in claims:
                pipe.set(claim, "sent", ex=self.store.window_ttl_s)
            await guard(pipe.execute())

    async def fold_in_order(
        self, size: int, queue: str, lease: str, fold: Callable[[str, int], Awaitable[None]]
    ) -> None:
        """Under ``lease``, fold every queued window (``queue``) of ``size`` into each of its pairs, in
        window order, stopping at the first one with an earlier window still unpublished (a window step's
        detector: streameval.feature.WindowContext)."""
        client, keys = self.store.client, self.store.keys
        if not await guard(client.set(lease, self.worker_id, nx=True, px=self.lease_ms)):
            return
        try:
            queued = [
                int(float(_text(m))) for m in cast(list[bytes], await guard(client.zrange(queue, 0, -1)))
            ]
            oldest_open = await guard(client.zrange(keys.open_windows(size), 0, 0, withscores=True))
            for start in queued:
                if oldest_open and float(oldest_open[0][1]) < start:
                    break  # an earlier window is not published yet: fold it first, next time
                members = sorted(
                    _text(m) for m in await guard(client.smembers(keys.window_pairs(size, start)))
                )
                for pair in members:
                    await fold(pair, start)
                await guard(client.zrem(queue, str(start)))
        finally:
            await guard(client.delete(lease))

    async def send_claimed(self, claim: str, cooldown: str, alert: Alert, now: float, send: Send) -> None:
        """Send a detector's alert unless it was sent already; mark it sent once acknowledged (the detector's
        state is saved after this, so a fold cut short by a crash is repeated and its alert retried)."""
        if await self._try_claim(claim, cooldown, now, 0) == 1:
            await publish_all(send, [Publish("alert", alert.id.encode(), alert.model_dump_json().encode())])
            await self._mark_sent([claim])

    def live(self, suite: str, version: str) -> bool:
        """Whether figures of ``suite`` at ``version`` are a live version's (alerts fire on them)."""
        return self.live_versions is None or not version or self.live_versions.get(suite) == version

    async def _claim(
        self, firing: Sequence[tuple[AlertRule, Aggregate, float]], now: float
    ) -> list[str | None]:
        """Each firing alert's claim key when it is to be sent (one round trip for all): once per rule ×
        window × pair (a version's pair) once acknowledged (a try that died before that is retried), and not
        within the rule's cooldown of another alert of the pair. ``None``: sent already, or within the
        cooldown (logged)."""
        keys, calls = self.store.keys, []
        for rule, aggregate, _ in firing:
            pair = self.store.pair_id(aggregate.model, aggregate.suite, aggregate.suite_version or "")
            claim = keys.alert_claim(pair, rule.name, aggregate.window.size_s, aggregate.window.start)
            args = [self.worker_id, self.store.window_ttl_s, repr(now), rule.cooldown_s]
            calls.append((self._alert_claim, [claim, keys.cooldown(pair, rule.name)], args))
        replies = await guard(run_scripts(self.store.client, calls))
        for (rule, aggregate, _), reply in zip(firing, replies, strict=True):
            if int(reply) == -1:
                log.info(
                    "alert %s for %s / %s suppressed: cooldown", rule.name, aggregate.model, aggregate.suite
                )
        return [
            names[0] if int(reply) == 1 else None for (_, names, _), reply in zip(calls, replies, strict=True)
        ]

    async def _try_claim(self, claim: str, cooldown: str, now: float, cooldown_s: float) -> int:
        """The claim script's answer (streameval._lua.ALERT_CLAIM): 1 send, 0 sent already, -1 cooldown."""
        args = [self.worker_id, self.store.window_ttl_s, repr(now), cooldown_s]
        [reply] = await guard(run_scripts(self.store.client, [(self._alert_claim, [claim, cooldown], args)]))
        return int(reply)

    async def refresh_norms(self) -> dict[str, Moments]:
        """Per-judge running mean and std from every pair's all-time hash (z-score panel aggregation)."""
        pairs = await self.store.pairs()
        return judge_norms(await self.store.all_time_fields(pairs))


def _pairs_fields(flat: list[Any]) -> dict[str, float]:
    """An aggregate hash's figures from HGETALL as a script returns it: [field, value, field, value, ...]."""
    return hash_fields(flat)
