"""The window closer's embedding-drift step (docs/drift.md): each published window of the drift size is
queued, then compared with each pair's reference in window order, under one lease (the same fold as the
score-shift step's, over the drift sums); a window that drifted sends one alert, claimed on its id.
"""

from __future__ import annotations

from typing import cast

import orjson

from ... import telemetry
from ...feature import WindowContext
from ...keyspace import guard
from ...models import Alert, AlertWindow, format_time
from ...outputs import Send
from ...store import ResultStore
from .._firing import Firing, empty_deadline
from .._queued import QueuedFoldStep
from ._drift import Drift, EmbeddingDriftConfig, Verdict, WindowSums, unpack_sums, unquantise

__all__ = ["DriftStep"]

#: a pair's drift state outlives 30 days without events
_STATE_TTL_S = 30 * 86400
#: its alerts' name among the pair's firing alerts (streameval.features._firing)
_NAME = "embedding_drift"


class DriftStep(QueuedFoldStep):
    """The closer's step for ``windowing.embedding_drift`` (its window must be one of ``windows``, the kept
    ones)."""

    name = "embedding drift"
    setting = "embedding_drift"
    queue_key = "drift_queue"
    lease_key = "drift_lease"
    config: EmbeddingDriftConfig

    async def fold(self, ctx: WindowContext, pair: str, start: int, now: float, send: Send) -> None:
        cfg, store = self.config, cast(ResultStore, ctx.store)
        client, keys, size = store.client, store.keys, cfg.window
        model, suite, version = keys.split_pair(pair)
        if not ctx.live(suite, version):  # shadow and backfill versions never alert
            return
        raw = cast(dict[bytes, bytes], await guard(client.hgetall(keys.embedding_window(pair, size, start))))
        packed = raw.pop(b"s", None)
        if packed is None:
            return
        numbers = unpack_sums(packed)
        if len(numbers) - 2 - cfg.features <= 0:  # sums of other settings (features changed): skipped
            return
        window = WindowSums.parse(numbers, len(numbers) - 2 - cfg.features)
        state_key = keys.embedding_drift(pair, size)
        doc = await guard(client.get(state_key))
        drift = Drift.from_json(cfg, orjson.loads(doc) if doc else None)
        verdict = drift.fold(start, window)
        if verdict is not None:
            for figure, value in (
                ("centroid_distance", verdict.centroid_distance),
                ("mmd2", verdict.mmd2),
                ("count", float(verdict.count)),
            ):
                telemetry.EMBEDDING_DRIFT.labels(suite, figure).set(value)
        firing = Firing(store) if self.resolves else None
        deadline = empty_deadline(start, size, cfg.resolve_after_empty)
        if verdict is not None and verdict.fired:
            alert = self._drift_alert(model, suite, verdict, raw, now)
            if version:
                alert = alert.model_copy(update={"suite_version": version, "id": f"{alert.id}:{version}"})
            claim = keys.alert_claim(pair, "embedding_drift", size, format_time(start))
            await ctx.send_claimed(claim, keys.cooldown(pair, "embedding_drift"), alert, now, send)
            if firing is not None:
                await firing.replace(firing.key(pair, _NAME, size), alert, deadline, now, send)
        elif verdict is not None and firing is not None:
            # compared with the reference learnt again after the alarm, and no drift: the alert resolves
            # (before the state is saved: a fold repeated after a crash sends the same resolve)
            window_start = format_time(start)
            await firing.end(
                firing.key(pair, _NAME, size),
                "in_control",
                f"resolved: outputs of {model} / {suite} no longer drift: the window from {window_start} is within "
                f"the thresholds of the reference learnt again after the alarm (MMD² {verdict.mmd2:.3g}, "
                f"centroid cosine distance {verdict.centroid_distance:.3g}; {verdict.count} events)",
                send,
                value=verdict.mmd2,
                count=verdict.count,
                window=AlertWindow(size_s=size, start=window_start, end=format_time(start + size)),
                fired_at=format_time(now),
                figures={
                    "centroid_distance": verdict.centroid_distance,
                    "mmd2": verdict.mmd2,
                    "count": float(verdict.count),
                    "reference_count": float(verdict.reference_count),
                },
                examples=[],
            )
        if firing is not None and deadline is not None and window.n > 0:
            await firing.seen({firing.key(pair, _NAME, size): deadline})
        await guard(client.set(state_key, orjson.dumps(drift.to_json()), ex=_STATE_TTL_S))

    def _drift_alert(
        self, model: str, suite: str, verdict: Verdict, reservoir: dict[bytes, bytes], now: float
    ) -> Alert:
        cfg = self.config
        size, start = cfg.window, verdict.start
        window = AlertWindow(size_s=size, start=format_time(start), end=format_time(start + size))
        on_mmd = "mmd2" in verdict.fired
        value = verdict.mmd2 if on_mmd else verdict.centroid_distance
        threshold = cfg.mmd_threshold if on_mmd or cfg.centroid_threshold is None else cfg.centroid_threshold
        centroid_limit = "" if cfg.centroid_threshold is None else f" (threshold {cfg.centroid_threshold:g})"
        # the reservoir's events farthest from the reference centroid (ties: by id)
        centre = verdict.reference_centroid
        far = sorted(
            (float(sum(a * b for a, b in zip(unquantise(vec), centre, strict=True))), name[8:].decode())
            for name, vec in reservoir.items()
        )
        message = (
            f"outputs of {model} / {suite} drifted from the reference: centroid cosine distance "
            f"{verdict.centroid_distance:.3g}{centroid_limit}, MMD² "
            f"{verdict.mmd2:.3g} (threshold {cfg.mmd_threshold:g}); {verdict.count} events against "
            f"{verdict.reference_count}"
        )
        return Alert(
            id=f"embedding_drift:{size}:{window.start}:{model}:{suite}",
            rule="embedding_drift",
            severity=cfg.severity,
            metric="embedding_drift",
            comparator=">",
            threshold=threshold,
            value=value,
            count=verdict.count,
            model=model,
            suite=suite,
            window=window,
            message=message,
            fired_at=format_time(now),
            figures={
                "centroid_distance": verdict.centroid_distance,
                "centroid_threshold": cfg.centroid_threshold,
                "mmd2": verdict.mmd2,
                "mmd_threshold": cfg.mmd_threshold,
                "count": float(verdict.count),
                "reference_count": float(verdict.reference_count),
            },
            examples=[event_id for _, event_id in far[:3]],
        )
