"""The window closer's score-shift step (docs/drift.md): each published window of the detector's size is
queued, then folded into each pair's :class:`~._detector.Detector` in window order, under one lease.

A window is folded only once every earlier window of its size is published (none is left in the
open-window index before it), so the detector sees the same sequence of window sums whichever worker
published which window. Order of steps for a crash: alerts are claimed (``SET NX`` on their id) and sent
before the state is saved, so a fold repeated after a crash sends nothing twice.
"""

from __future__ import annotations

from typing import cast

import orjson

from ...feature import WindowContext
from ...keyspace import guard
from ...models import Alert, AlertChange, AlertWindow, format_time
from ...outputs import Send
from ...store import ResultStore, hash_fields
from .._firing import Firing, empty_deadline
from .._queued import QueuedFoldStep
from ..drilldown import example_ids
from ._detector import Change, Detector, ScoreShiftConfig

__all__ = ["ScoreShiftStep"]

#: a pair's score-shift state outlives 30 days without events
_STATE_TTL_S = 30 * 86400


class ScoreShiftStep(QueuedFoldStep):
    """The closer's step for ``windowing.score_shift`` (its window must be one of ``windows``, the kept ones)."""

    name = "score shift"
    setting = "score_shift"
    queue_key = "shift_queue"
    lease_key = "shift_lease"
    config: ScoreShiftConfig

    async def fold(self, ctx: WindowContext, pair: str, start: int, now: float, send: Send) -> None:
        cfg, store = self.config, cast(ResultStore, ctx.store)
        client, keys, size = store.client, store.keys, cfg.window
        state_key = keys.score_shift(pair, size)
        raw = await guard(client.get(state_key))
        detector = Detector.from_json(cfg, orjson.loads(raw) if raw else None)
        fields = hash_fields(await guard(client.hgetall(keys.window(pair, size, start))))
        if fields.get("count", 0.0) <= 0:
            return
        model, suite, version = keys.split_pair(pair)
        if not ctx.live(suite, version):  # shadow and backfill versions never alert
            return
        firing = Firing(store) if self.resolves else None
        deadline = empty_deadline(start, size, cfg.resolve_after_empty)
        for change in detector.fold_window(start, fields):
            alert = await self._shift_alert(store, pair, model, suite, start, change, fields, now)
            if version:
                alert = alert.model_copy(update={"suite_version": version, "id": f"{alert.id}:{version}"})
            claim = keys.alert_claim(pair, f"score_shift:{change.series}", size, format_time(start))
            await ctx.send_claimed(claim, keys.cooldown(pair, "score_shift"), alert, now, send)
            if firing is not None:
                await firing.replace(firing.key(pair, _name(change.series), size), alert, deadline, now, send)
        if firing is not None:
            await self._resolve(firing, detector, pair, model, suite, start, fields, now, send)
            if deadline is not None:
                await firing.seen({firing.key(pair, _name(s), size): deadline for s in detector.folded})
        await guard(client.set(state_key, orjson.dumps(detector.to_json()), ex=_STATE_TTL_S))

    async def _resolve(
        self,
        firing: Firing,
        detector: Detector,
        pair: str,
        model: str,
        suite: str,
        start: int,
        fields: dict[str, float],
        now: float,
        send: Send,
    ) -> None:
        """Resolve (``in_control``) each series' firing alert once its detector, with its reference learnt
        again after the alarm, compared a window and found no change. Before the state is saved: a fold
        repeated after a crash sends the same resolve (the notifier sends it once)."""
        size = self.config.window
        window = AlertWindow(size_s=size, start=format_time(start), end=format_time(start + size))
        for series in detector.in_control:
            state = detector.states[series]
            message = (
                f"resolved: {series} of {model} / {suite} is back in control: the detector learnt its reference "
                f"again after the alarm and the window from {window.start} shows no shift "
                f"(CUSUM up {state.up:.1f}, down {state.down:.1f})"
            )
            await firing.end(
                firing.key(pair, _name(series), size),
                "in_control",
                message,
                send,
                value=max(state.up, state.down),
                count=int(fields.get("count", 0.0)),
                window=window,
                fired_at=format_time(now),
                figures={"ewma": state.ewma, "count": fields.get("count", 0.0)},
                examples=[],
            )

    async def _shift_alert(
        self,
        store: ResultStore,
        pair: str,
        model: str,
        suite: str,
        start: int,
        change: Change,
        fields: dict[str, float],
        now: float,
    ) -> Alert:
        cfg = self.config
        size = cfg.window
        examples = store.keys.examples(pair, "worst", size, change.change_start)
        first_ids = example_ids(cast(list[bytes], await guard(store.client.zrange(examples, 0, 0))), 1)
        window = AlertWindow(size_s=size, start=format_time(start), end=format_time(start + size))
        alert_id = f"score_shift:{change.series}:{size}:{window.start}:{model}:{suite}"
        message = (
            f"{change.series} of {model} / {suite} shifted {change.direction} by {change.shift:+.3g} "
            f"(reference {change.reference_mean:.3g} ± {change.reference_std:.2g}) since "
            f"{format_time(change.change_start)}, {change.events_since} events; CUSUM "
            f"{change.statistic:.1f} > {change.threshold:.1f}"
        )
        return Alert(
            id=alert_id,
            rule="score_shift",
            severity=cfg.severity,
            metric="score_shift",
            comparator=">",
            threshold=change.threshold,
            value=change.statistic,
            count=change.events_since,
            model=model,
            suite=suite,
            window=window,
            message=message,
            fired_at=format_time(now),
            figures={
                "shift": change.shift,
                "reference_mean": change.reference_mean,
                "reference_std": change.reference_std,
                "ewma": change.ewma,
                "window_mean": change.current_mean,
                "count": fields.get("count", 0.0),
            },
            examples=example_ids(
                cast(
                    list[bytes],
                    await guard(store.client.zrange(store.keys.examples(pair, "worst", size, start), 0, 2)),
                )
            ),
            change=AlertChange(
                series=change.series,
                direction=change.direction,
                start=format_time(change.change_start),
                event_id=first_ids[0] if first_ids else None,
                shift=change.shift,
                reference_mean=change.reference_mean,
                reference_std=change.reference_std,
                ewma=change.ewma,
                events_since=change.events_since,
            ),
        )


def _name(series: str) -> str:
    """A series' name among the pair's firing alerts (streameval.features._firing)."""
    return f"score_shift:{series}"
