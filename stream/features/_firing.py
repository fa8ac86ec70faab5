"""The firing state of alerts that resolve (docs/notify.md, "Resolve"); kept only when the suite file has
``notify:`` (the steps that use it are built with resolves on by the composition root alone).

Each firing alert is kept under ``P{pair}:firing:{name}:{size}`` (its JSON; :meth:`~streameval.keyspace.Keys.
alert_firing`, ``name`` a rule's, or ``score_shift:{series}`` / ``embedding_drift``) and listed in
``P{ix}:firing`` (:meth:`~streameval.keyspace.Keys.firing_index`) with the time it resolves for want of events:
the end of the last of ``resolve_after_empty`` windows of its size after the last window of its pair that had
events. Every window with events of the pair pushes that time on (``ZADD XX GT``); the alert rules' resolve step
resolves the alerts whose time passed (:meth:`Firing.stale`) with ``resolution: no_events``.

Writes follow the publish discipline: a resolve is sent and acknowledged before its state is forgotten, and an
alert's state is remembered only once the alert was acknowledged; a repeat after a crash sends the same
resolve (same id and status: the notifier sends it once).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from pydantic import ValidationError

from ..alerts import AlertRule, figures, human_agreement, metric_value
from ..keyspace import guard
from ..models import Aggregate, Alert, AlertWindow, Resolution, format_time, parse_time
from ..outputs import Publish, Send, publish_all
from ..store import ResultStore

__all__ = [
    "Firing",
    "Stale",
    "empty_deadline",
    "empty_window",
    "recovered",
    "recovered_value",
    "resolve_message",
]

_STALE_BATCH = 200  # firing alerts looked at per tick at most (the rest on the next tick)
_LEASE_MS = 30_000  # the no_events resolves' lease: a worker that dies holding it delays them this long


@dataclass(frozen=True)
class Stale:
    """A firing alert whose pair had no event for the windows it waited for."""

    key: str
    alert: Alert
    deadline: float  # the end of the last empty window


def empty_deadline(start: float, size: int, windows: int | None) -> float | None:
    """When an alert of a pair whose last window with events started at ``start`` resolves for want of events:
    the end of the ``windows``-th empty window after it (None: never)."""
    return None if windows is None else start + size * (1 + windows)


def resolve_message(alert: Alert, resolution: Resolution, message: str, **update: Any) -> Publish:
    """The resolve of ``alert`` (same id, ``status: resolved``, ``resolution``), with ``update``'s fields."""
    resolved = alert.model_copy(
        update={"status": "resolved", "resolution": resolution, "message": message, **update}
    )
    return Publish("alert", resolved.id.encode(), resolved.model_dump_json().encode())


class Firing:
    """The firing alerts of ``store`` (module docstring)."""

    def __init__(self, store: ResultStore) -> None:
        self.store = store
        self.client, self.keys = store.client, store.keys
        self._lease = self.keys.firing_index + ":lease"

    def key(self, pair: str, name: str, size: int) -> str:
        return self.keys.alert_firing(pair, name, size)

    async def get(self, key: str) -> Alert | None:
        raw = await guard(self.client.get(key))
        if raw is None:
            return None
        try:
            return Alert.model_validate_json(raw)
        except ValidationError:  # not ours to resolve (written by another release): forgotten below
            return None

    async def remember(self, firing: Mapping[str, tuple[bytes, float | None]]) -> None:
        """Keep each key's alert (JSON) and, when given, the time it resolves for want of events."""
        if not firing:
            return
        async with self.client.pipeline(transaction=False) as pipe:
            for key, (value, deadline) in firing.items():
                pipe.set(key, value, ex=self.store.window_ttl_s)
                if deadline is None:
                    pipe.zrem(self.keys.firing_index, key)
                else:
                    pipe.zadd(self.keys.firing_index, {key: deadline})
            await guard(pipe.execute())

    async def forget(self, keys: Sequence[str]) -> None:
        if not keys:
            return
        async with self.client.pipeline(transaction=False) as pipe:
            for key in keys:  # one command each: the keys are in their pairs' slots (Redis Cluster)
                pipe.delete(key)
            pipe.zrem(self.keys.firing_index, *keys)
            await guard(pipe.execute())

    async def seen(self, deadlines: Mapping[str, float]) -> None:
        """A window with events of these keys' pairs: each resolves for want of events no earlier than given
        (only keys still listed; never moved back)."""
        if deadlines:
            await guard(self.client.zadd(self.keys.firing_index, dict(deadlines), xx=True, gt=True))

    async def replace(self, key: str, alert: Alert, deadline: float | None, now: float, send: Send) -> None:
        """A detector's new ``alert`` (acknowledged) fires under ``key``: the one it replaces, if any, is
        resolved (``superseded``), and ``alert`` is remembered."""
        old = await self.get(key)
        if old is not None and old.id != alert.id:
            message = f"resolved: superseded by {alert.id}"
            await publish_all(send, [resolve_message(old, "superseded", message, fired_at=format_time(now))])
        await self.remember({key: (alert.model_dump_json().encode(), deadline)})

    async def end(self, key: str, resolution: Resolution, message: str, send: Send, **update: Any) -> bool:
        """Resolve the alert firing under ``key``, if any (sent and acknowledged, then forgotten)."""
        old = await self.get(key)
        if old is None:
            return False
        await publish_all(send, [resolve_message(old, resolution, message, **update)])
        await self.forget([key])
        return True

    async def lease(self) -> bool:
        """Take the lease of the ``no_events`` resolves (one worker at a time; it runs out after a crash)."""
        return bool(await guard(self.client.set(self._lease, b"1", nx=True, px=_LEASE_MS)))

    async def release(self) -> None:
        await guard(self.client.delete(self._lease))

    async def stale(self, now: float) -> list[Stale]:
        """The firing alerts whose time passed at ``now`` and whose windows up to it are all published (an
        unpublished earlier window may hold events of the pair). Keys whose alert is gone are unlisted."""
        index = self.keys.firing_index
        due = cast(
            list[tuple[bytes, float]],
            await guard(
                self.client.zrangebyscore(index, "-inf", now, start=0, num=_STALE_BATCH, withscores=True)
            ),
        )
        out, gone = [], []
        for raw_key, deadline in due:
            key = raw_key.decode() if isinstance(raw_key, bytes) else str(raw_key)
            alert = await self.get(key)
            if alert is None:
                gone.append(key)
                continue
            size = alert.window.size_s
            unpublished = await guard(
                self.client.zrangebyscore(
                    self.keys.open_windows(size), "-inf", deadline - size, start=0, num=1
                )
            )
            if not unpublished:
                out.append(Stale(key, alert, float(deadline)))
        if gone:
            await guard(self.client.zrem(index, *gone))
        return out


def empty_window(deadline: float, size: int) -> AlertWindow:
    """The last empty window a ``no_events`` resolve waited for."""
    return AlertWindow(size_s=size, start=format_time(deadline - size), end=format_time(deadline))


def recovered_value(rule: AlertRule, aggregate: Aggregate) -> float | None:
    """The rule's metric on an aggregate it is evaluated on (its window size, model and suite, its
    ``min_count``; a slice's aggregate for a rule with ``segments:`` of its dimension, a pair's for one
    without); None: neither fires nor resolves."""
    segment = aggregate.segment
    if (segment is None) != (rule.segments is None):
        return None
    if segment is not None and segment.dimension not in (rule.segments or ()):
        return None
    if aggregate.window.size_s != rule.window or not rule.applies(aggregate.model, aggregate.suite):
        return None
    value = (
        human_agreement(aggregate, rule.min_labels)
        if rule.metric == "human_agreement"
        else metric_value(rule.metric, aggregate)
    )
    return None if aggregate.count < rule.min_count else value


def recovered(rule: AlertRule, aggregate: Aggregate, alert: Alert, stamp: str) -> Publish | None:
    """The resolve (``recovered``) of ``rule``'s firing ``alert`` by ``aggregate``, a window of the rule's size,
    evaluated, that no longer fires it: the alert with ``status: resolved`` (same id) and this window's
    figures. None when the aggregate is not evaluated or not later than the alert's window (an earlier
    window closed late: the rule's later firing stands)."""
    value = recovered_value(rule, aggregate)
    if value is None or parse_time(aggregate.window.start) <= parse_time(alert.window.start):
        return None
    segment = aggregate.segment
    where = "" if segment is None else f" ({segment.dimension} = {segment.value})"
    return resolve_message(
        alert,
        "recovered",
        f"resolved: {rule.metric} {value:.4g} no longer {rule.comparator} {rule.threshold:g} "
        f"for {aggregate.model} / {aggregate.suite}{where} in the {rule.window}s window from "
        f"{aggregate.window.start} ({aggregate.count} events)",
        value=value,
        count=aggregate.count,
        window=aggregate.window,
        fired_at=stamp,
        figures=figures(aggregate),
        examples=[],
    )
