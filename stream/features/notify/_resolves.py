"""The window closer's resolve step (docs/notify.md, "Resolve"): built when the suite file has ``notify:``.

A rule that fired on a model × suite resolves (``resolution: recovered``) when a later window of the rule's
size, evaluated, no longer fires it: the firing alert with ``status: resolved`` (same id) and this window's
figures goes out with the window's aggregates and alerts, in the same publish_all. Once the broker acknowledged
them, the step remembers each rule × pair's firing alert (``P{T}:firing:...``, streameval.keyspace, with the
time it resolves for want of events: streameval.features._firing) and forgets the resolved ones: a repeat after
a crash sends the same resolve; the notifier sends it once.

On each tick it also resolves (``resolution: no_events``) every firing alert, a rule's or a detector's (score
shift, embedding drift: their steps keep their own firing state), whose model × suite had no event for the
rule's (or the detector block's) ``resolve_after_empty`` windows of its size.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

from ...alerts import AlertRule, fires
from ...feature import ClosingWindow, PublishedWindow, WindowContext, WindowShare
from ...models import Aggregate, format_time, parse_time
from ...outputs import Publish, Send, publish_all
from ...store import ResultStore
from .._firing import Firing, empty_deadline, empty_window, recovered, recovered_value, resolve_message

__all__ = ["ResolveStep"]


class ResolveStep:
    """Resolves of the alert rules ``rules`` (the suite file's ``alerts:``) for the notifier, and the
    ``no_events`` resolves of every firing alert; ``detectors``: each detector's rule name (``score_shift``,
    ``embedding_drift``) -> its ``resolve_after_empty``, for the resolve's message."""

    name = "alert resolves"

    def __init__(self, rules: Sequence[AlertRule], detectors: Mapping[str, int | None] | None = None) -> None:
        # a rule with segments: fires on slices only; the slices' step keeps and resolves its alerts
        self.rules = tuple(rule for rule in rules if not rule.segments)
        self._by_name = {rule.name: rule for rule in rules}
        self._empty: dict[str, int | None] = {
            **dict(detectors or {}),
            **{rule.name: rule.resolve_after_empty for rule in rules},
        }

    async def closing(self, ctx: WindowContext, window: ClosingWindow) -> Mapping[str, Mapping[str, Any]]:
        return {}

    async def published(self, ctx: WindowContext, window: PublishedWindow) -> WindowShare | None:
        """The resolves of the window's live aggregates, and the firing states to write once acknowledged."""
        store = cast(ResultStore, ctx.store)
        firing = Firing(store)
        resolves: list[tuple[str, Publish]] = []  # rules x pairs that fired and no longer do
        seen: dict[str, float] = {}  # firing keys of the pairs with events -> their new no-event deadline
        for aggregate in window.aggregates:
            if not ctx.live(aggregate.suite, aggregate.suite_version or ""):  # shadow and backfill: no alerts
                continue
            resolves += await self._resolves(firing, aggregate, window.stamp)
            if aggregate.count > 0:
                start = parse_time(aggregate.window.start)
                for rule in self.rules:
                    deadline = empty_deadline(start, window.size, rule.resolve_after_empty)
                    if rule.window == window.size and deadline is not None:
                        seen[_firing_key(firing, rule, aggregate)] = deadline
        fired: dict[str, tuple[bytes, float | None]] = {}
        for alert in window.alerts:
            rule = self._by_name[alert.rule]
            start = parse_time(alert.aggregate.window.start)
            fired[_firing_key(firing, rule, alert.aggregate)] = (
                alert.message.value,
                empty_deadline(start, window.size, rule.resolve_after_empty),
            )
        gone = [key for key, _ in resolves if key not in fired]

        async def after() -> None:
            await firing.forget(gone)
            await firing.remember(fired)
            await firing.seen(seen)

        return WindowShare(tuple(resolve for _, resolve in resolves), after)

    async def tick(self, ctx: WindowContext, now: float, send: Send) -> None:
        """Resolve the firing alerts whose pair had no event for the windows they wait for."""
        firing = Firing(cast(ResultStore, ctx.store))
        if not await firing.lease():  # another worker resolves them now
            return
        try:
            await self._stale(firing, now, send)
        finally:
            await firing.release()

    async def _stale(self, firing: Firing, now: float, send: Send) -> None:
        for stale in await firing.stale(now):
            alert, size = stale.alert, stale.alert.window.size_s
            windows = self._empty.get(alert.rule)
            since = stale.deadline - size * windows if windows else None
            span = (
                f"the {windows} window(s) of {size}s from {format_time(since)} to {format_time(stale.deadline)}"
                if since is not None
                else f"the windows of {size}s up to {format_time(stale.deadline)}"
            )
            segment = alert.segment
            where = "" if segment is None else f" ({segment.dimension} = {segment.value})"
            resolve = resolve_message(
                alert,
                "no_events",
                f"resolved: no events for {alert.model} / {alert.suite}{where} in {span}",
                window=empty_window(stale.deadline, size),
                count=0,
                fired_at=format_time(now),
                figures={"count": 0.0},
                examples=[],
            )
            await publish_all(send, [resolve])
            await firing.forget([stale.key])

    async def _resolves(self, firing: Firing, aggregate: Aggregate, stamp: str) -> list[tuple[str, Publish]]:
        """(firing state key, resolve) of each rule that fired on the aggregate's pair and no longer does."""
        out = []
        for rule in self.rules:
            if fires(rule, aggregate) is None:
                resolve = await self._resolve(firing, rule, aggregate, stamp)
                if resolve is not None:
                    out.append((_firing_key(firing, rule, aggregate), resolve))
        return out

    async def _resolve(
        self, firing: Firing, rule: AlertRule, aggregate: Aggregate, stamp: str
    ) -> Publish | None:
        """The resolve of ``rule``'s firing alert on the aggregate's pair when this window (of the rule's size,
        evaluated, later than the alert's) no longer fires it: the firing alert with ``status: resolved``
        (same id, ``resolution: recovered``) and this window's figures. Sent with the window's messages; the
        firing state is removed only after the broker acknowledged it (a repeat sends the same resolve; the
        notifier sends it once)."""
        if recovered_value(rule, aggregate) is None:  # not evaluated, or another rule's aggregate
            return None
        alert = await firing.get(_firing_key(firing, rule, aggregate))
        return None if alert is None else recovered(rule, aggregate, alert, stamp)


def _firing_key(firing: Firing, rule: AlertRule, aggregate: Aggregate) -> str:
    pair = firing.store.pair_id(aggregate.model, aggregate.suite, aggregate.suite_version or "")
    return firing.key(pair, rule.name, aggregate.window.size_s)
