"""The slices' window step: each published pair aggregate's slices as aggregates of their own (with
``segment``), and the alerts of the rules with ``segments:`` per slice that breaks them, sent in the window's
one publish_all (docs/segments.md). With resolves on (the suite file has ``notify:``), it keeps each slice's
firing alert (streameval.features._firing, per rule × pair × slice) and resolves it (``recovered``) when a
later window of that slice no longer fires it; the notifier's resolve step resolves it for want of events
(``no_events``) once the slice had none for the rule's ``resolve_after_empty`` windows."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from ... import _lua
from ...aggregates import build_aggregate
from ...alerts import AlertRule, build_alert, fires
from ...feature import ClosingWindow, PublishedWindow, WindowContext, WindowShare
from ...keyspace import Keys, guard, run_scripts
from ...models import Aggregate, AggregateSegment, Alert, parse_time
from ...outputs import Publish, Send
from ...store_codec import slice_figures
from .._firing import Firing, empty_deadline, recovered
from ._config import Dimension

__all__ = ["SlicesStep", "read_slices", "slice_aggregates"]


async def read_slices(
    client: Any, keys: Keys, pairs: Sequence[str], dimensions: Sequence[str], size: int, start: int
) -> list[dict[str, dict[str, dict[str, float]]]]:
    """Per pair (in order): dimension -> value -> figures of the window ``size``/``start`` (one round trip)."""
    if not pairs or not dimensions:
        return [{} for _ in pairs]

    async def read() -> list[Any]:
        async with client.pipeline(transaction=False) as pipe:
            for pair in pairs:
                for name in dimensions:
                    pipe.hgetall(keys.slice(pair, name, size, start))
            return list(await pipe.execute())

    raw = await guard(read())
    out = []
    for p in range(len(pairs)):
        found = raw[p * len(dimensions) : (p + 1) * len(dimensions)]
        out.append({name: slice_figures(h) for name, h in zip(dimensions, found, strict=True) if h})
    return out


def slice_aggregates(
    aggregate: Aggregate, slices: Mapping[str, Mapping[str, Mapping[str, float]]]
) -> list[Aggregate]:
    """The aggregates of one pair aggregate's slices (dimension, then value, in sorted order)."""
    size, start = aggregate.window.size_s, _epoch(aggregate)
    out = []
    for dimension in sorted(slices):
        for value, figures in sorted(slices[dimension].items()):
            if figures.get("count", 0.0) <= 0:
                continue
            built = build_aggregate(
                aggregate.model,
                aggregate.suite,
                size,
                start,
                dict(figures),
                {},
                dead_letters=0,
                window_events=0,
                published_at=aggregate.published_at,
            )
            segment = AggregateSegment(dimension=dimension, value=value)
            out.append(
                built.model_copy(update={"suite_version": aggregate.suite_version, "segment": segment})
            )
    return out


def _epoch(aggregate: Aggregate) -> int:
    return int(parse_time(aggregate.window.start))


def _alert(raw: Any) -> Alert | None:
    if raw is None:
        return None
    try:
        return Alert.model_validate_json(raw)
    except ValidationError:  # not ours to resolve (written by another release)
        return None


def _firing_key(store: Any, pair: str, rule: AlertRule, part: Aggregate) -> str:
    """Where a rule's alert on one slice is kept while it fires (its name: the slice's, as its claim's)."""
    segment = part.segment
    assert segment is not None  # slice_aggregates gives every one its segment
    return str(
        store.keys.alert_firing(pair, f"{rule.name}@{segment.dimension}={segment.value}", part.window.size_s)
    )


class SlicesStep:
    """Publishes each window's slice aggregates and the alerts of ``rules`` (those with ``segments:``)."""

    name = "slices"

    def __init__(
        self, dimensions: Sequence[Dimension], rules: Sequence[AlertRule], *, resolves: bool = False
    ) -> None:
        self.dimensions = tuple(d.name for d in dimensions)
        self.rules = tuple(r for r in rules if r.segments)
        self.resolves = resolves and bool(self.rules)
        self._claim: Any = None

    async def closing(self, ctx: WindowContext, window: ClosingWindow) -> Mapping[str, Mapping[str, Any]]:
        return {}

    async def published(self, ctx: WindowContext, window: PublishedWindow) -> WindowShare | None:
        store = ctx.store
        pairs = [store.pair_id(a.model, a.suite, a.suite_version or "") for a in window.aggregates]
        found = await read_slices(store.client, store.keys, pairs, self.dimensions, window.size, window.start)
        messages: list[Publish] = []
        firing: list[tuple[str, AlertRule, Aggregate, float]] = []
        calm: list[tuple[str, AlertRule, Aggregate]] = []  # evaluated slices that do not fire: may resolve
        for pair, aggregate, slices in zip(pairs, window.aggregates, found, strict=True):
            key = f"{aggregate.model}:{aggregate.suite}"
            if aggregate.suite_version:
                key += f":{aggregate.suite_version}"
            live = ctx.live(aggregate.suite, aggregate.suite_version or "")
            for part in slice_aggregates(aggregate, slices):
                messages.append(Publish("aggregate", key.encode(), part.model_dump_json().encode()))
                if live:
                    for rule in self.rules:
                        value = fires(rule, part)
                        if value is not None:
                            firing.append((pair, rule, part, value))
                        else:
                            calm.append((pair, rule, part))
        claims = await self._claims(ctx, firing, window)
        fired: dict[str, tuple[bytes, float | None]] = {}  # firing state to keep once acknowledged
        for (pair, rule, part, value), claim in zip(firing, claims, strict=True):
            if claim is None:
                continue
            alert = build_alert(rule, part, value, fired_at=window.stamp)
            message = Publish("alert", alert.id.encode(), alert.model_dump_json().encode())
            messages.append(message)
            if self.resolves:
                deadline = empty_deadline(_epoch(part), window.size, rule.resolve_after_empty)
                fired[_firing_key(store, pair, rule, part)] = (message.value, deadline)
        gone, seen = (
            await self._resolves(store, window, calm, firing, messages) if self.resolves else ([], {})
        )
        if not messages:
            return None
        sent = [c for c in claims if c is not None]

        async def after() -> None:
            if sent:  # the alerts are acknowledged: no later try sends them again
                async with store.client.pipeline(transaction=False) as pipe:
                    for claim in sent:
                        pipe.set(claim, "sent", ex=store.window_ttl_s)
                    await guard(pipe.execute())
            if self.resolves:
                state = Firing(store)
                await state.forget([k for k in gone if k not in fired])
                await state.remember(fired)
                await state.seen(seen)

        return WindowShare(tuple(messages), after)

    async def _resolves(
        self,
        store: Any,
        window: PublishedWindow,
        calm: Sequence[tuple[str, AlertRule, Aggregate]],
        firing: Sequence[tuple[str, AlertRule, Aggregate, float]],
        messages: list[Publish],
    ) -> tuple[list[str], dict[str, float]]:
        """Adds to ``messages`` the resolve of each slice's firing alert that this window's figures of the
        slice no longer fire; returns their firing keys, and the no-event deadline of every rule × slice
        with events (pushed on once acknowledged: a slice without events for the rule's windows resolves)."""
        seen: dict[str, float] = {}
        for pair, rule, part in [*calm, *((p, r, a) for p, r, a, _ in firing)]:
            deadline = empty_deadline(_epoch(part), window.size, rule.resolve_after_empty)
            if rule.window == window.size and deadline is not None:
                seen[_firing_key(store, pair, rule, part)] = deadline
        due = [(_firing_key(store, p, r, a), r, a) for p, r, a in calm if r.window == window.size]
        if not due:
            return [], seen
        async with store.client.pipeline(transaction=False) as pipe:  # one round trip
            for key, _, _ in due:
                pipe.get(key)
            found = await guard(pipe.execute())
        gone = []
        for (key, rule, part), raw in zip(due, found, strict=True):
            alert = _alert(raw)  # only a slice that broke a rule has one
            resolve = None if alert is None else recovered(rule, part, alert, window.stamp)
            if resolve is not None:
                messages.append(resolve)
                gone.append(key)
        return gone, seen

    async def _claims(
        self,
        ctx: WindowContext,
        firing: Sequence[tuple[str, AlertRule, Aggregate, float]],
        window: PublishedWindow,
    ) -> list[str | None]:
        """Each slice alert's claim (the core's claim script: once per rule × window × pair × slice once
        acknowledged, and the rule's cooldown per pair × slice); None: sent already or in its cooldown."""
        if not firing:
            return []
        store = ctx.store
        if self._claim is None:
            self._claim = store.client.register_script(_lua.ALERT_CLAIM)
        calls = []
        for pair, rule, part, _ in firing:
            segment = part.segment
            assert segment is not None  # slice_aggregates gives every one its segment
            name = f"{rule.name}@{segment.dimension}={segment.value}"
            claim = store.keys.alert_claim(pair, name, window.size, part.window.start)
            args = [f"slices-{id(self)}", store.window_ttl_s, repr(window.now), rule.cooldown_s]
            calls.append((self._claim, [claim, store.keys.cooldown(pair, name)], args))
        replies = await guard(run_scripts(store.client, calls))
        return [c[1][0] if int(r) == 1 else None for c, r in zip(calls, replies, strict=True)]

    async def tick(self, ctx: WindowContext, now: float, send: Send) -> None:
        pass
