"""The window closer's resolve step (docs/notify.md, "Resolves"): built when the suite file has ``notify:``.

A rule that fired on a model × suite resolves when a later window of the rule's size, evaluated, no longer
fires it: the firing alert with ``status: resolved`` (same id) and this window's figures goes out with the
window's aggregates and alerts, in the same publish_all. Once the broker acknowledged them, the step
remembers each rule × pair's firing alert (``P{T}:firing:...``, streameval.keyspace) and forgets the
resolved ones: a repeat after a crash sends the same resolve; the notifier sends it once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

from ...alerts import AlertRule, figures, fires, human_agreement, metric_value
from ...feature import ClosingWindow, PublishedWindow, WindowContext, WindowShare
from ...keyspace import guard
from ...models import Aggregate, Alert, parse_time
from ...outputs import Publish, Send
from ...store import ResultStore

__all__ = ["ResolveStep"]


class ResolveStep:
    """Resolves of the alert rules ``rules`` (the suite file's ``alerts:``) for the notifier."""

    name = "alert resolves"

    def __init__(self, rules: Sequence[AlertRule]) -> None:
        self.rules = tuple(rules)
        self._by_name = {rule.name: rule for rule in self.rules}

    async def closing(self, ctx: WindowContext, window: ClosingWindow) -> Mapping[str, Mapping[str, Any]]:
        return {}

    async def published(self, ctx: WindowContext, window: PublishedWindow) -> WindowShare | None:
        """The resolves of the window's live aggregates, and the firing states to write once acknowledged."""
        store = cast(ResultStore, ctx.store)
        resolves: list[tuple[str, Publish]] = []  # rules x pairs that fired and no longer do
        for aggregate in window.aggregates:
            if ctx.live(aggregate.suite, aggregate.suite_version or ""):  # shadow and backfill: no alerts
                resolves += await self._resolves(store, aggregate, window.stamp)
        fired: dict[str, bytes | None] = {key: None for key, _ in resolves}  # firing state: None forgets it
        for alert in window.alerts:
            fired[_firing_key(store, self._by_name[alert.rule], alert.aggregate)] = alert.message.value

        async def after() -> None:
            await _mark_firing(store, fired)

        return WindowShare(tuple(resolve for _, resolve in resolves), after)

    async def tick(self, ctx: WindowContext, now: float, send: Send) -> None:
        pass

    async def _resolves(
        self, store: ResultStore, aggregate: Aggregate, stamp: str
    ) -> list[tuple[str, Publish]]:
        """(firing state key, resolve) of each rule that fired on the aggregate's pair and no longer does."""
        out = []
        for rule in self.rules:
            if fires(rule, aggregate) is None:
                resolve = await self._resolve(store, rule, aggregate, stamp)
                if resolve is not None:
                    out.append((_firing_key(store, rule, aggregate), resolve))
        return out

    async def _resolve(
        self, store: ResultStore, rule: AlertRule, aggregate: Aggregate, stamp: str
    ) -> Publish | None:
        """The resolve of ``rule``'s firing alert on the aggregate's pair when this window (of the rule's size,
        evaluated, later than the alert's) no longer fires it: the firing alert with ``status: resolved``
        (same id) and this window's figures. Sent with the window's messages; the firing state is removed
        only after the broker acknowledged it (a repeat sends the same resolve; the notifier sends it once)."""
        if aggregate.window.size_s != rule.window or not rule.applies(aggregate.model, aggregate.suite):
            return None
        value = (
            human_agreement(aggregate, rule.min_labels)
            if rule.metric == "human_agreement"
            else metric_value(rule.metric, aggregate)
        )
        if aggregate.count < rule.min_count or value is None:  # not evaluated: neither fires nor resolves
            return None
        raw = await guard(store.client.get(_firing_key(store, rule, aggregate)))
        if raw is None:
            return None
        alert = Alert.model_validate_json(raw)
        if parse_time(aggregate.window.start) <= parse_time(alert.window.start):
            return None  # an earlier window closed late: the rule's later firing stands
        resolved = alert.model_copy(
            update={
                "status": "resolved",
                "value": value,
                "count": aggregate.count,
                "window": aggregate.window,
                "fired_at": stamp,
                "figures": figures(aggregate),
                "examples": [],
                "message": f"resolved: {rule.metric} {value:.4g} no longer {rule.comparator} {rule.threshold:g} "
                f"for {aggregate.model} / {aggregate.suite} in the {rule.window}s window from "
                f"{aggregate.window.start} ({aggregate.count} events)",
            }
        )
        return Publish("alert", resolved.id.encode(), resolved.model_dump_json().encode())


def _firing_key(store: ResultStore, rule: AlertRule, aggregate: Aggregate) -> str:
    pair = store.pair_id(aggregate.model, aggregate.suite, aggregate.suite_version or "")
    return store.keys.alert_firing(pair, rule.name, aggregate.window.size_s)


async def _mark_firing(store: ResultStore, firing: Mapping[str, bytes | None]) -> None:
    """After the broker acknowledged them: remember each rule x pair's firing alert, forget resolved ones."""
    if not firing:
        return
    async with store.client.pipeline(transaction=False) as pipe:
        for key, value in firing.items():
            if value is None:
                pipe.delete(key)
            else:
                pipe.set(key, value, ex=store.window_ttl_s)
        await guard(pipe.execute())
