"""Resolves of slice alerts (docs/segments.md, docs/notify.md "Resolve") on real Redis: a rule with
``segments:`` that fired on one slice resolves (``recovered``) when a later window of that slice no longer
fires it, and (``no_events``) when that slice had no events for ``resolve_after_empty`` windows while the
pair had; each resolve carries the id and ``segment`` of the alert it ends, and never ends another slice's."""

from __future__ import annotations

import asyncio
from typing import Any

import redis.asyncio as aioredis
from _closer_helpers import Clock, Sink
from test_slices_record import SIZE, SUITE, T0, World, event

from streameval.alerts import AlertRule
from streameval.config import parse_config
from streameval.features.notify import ResolveStep
from streameval.features.segments import SlicesStep
from streameval.features.setup import window_steps
from streameval.models import Alert, format_time
from streameval.windows import WindowCloser

LATENESS = 3.0
RULE = {
    "name": "low",
    "metric": "mean_score",
    "comparator": "<",
    "threshold": 0.9,
    "window": SIZE,
    "min_count": 2,
    "segments": ["tier"],
    "resolve_after_empty": 2,
}
PAIR_RULE = {**RULE, "name": "pair-low", "segments": None}  # the pair: fires when its mean is below 0.9
DATA: dict[str, Any] = {
    "suites": [SUITE],
    "segments": {"dimensions": {"tier": "metadata.tier"}},
    "alerts": [RULE, PAIR_RULE],
}


class Run:
    def __init__(self, aredis: aioredis.Redis, prefix: str) -> None:
        self.clock = Clock(T0 + 1)
        self.world = World(aredis, prefix, DATA, [T0 + 1])
        self.world.store.clock = self.clock
        self.rules = [AlertRule.model_validate(r) for r in DATA["alerts"]]
        self.sink = Sink()
        self.n = 0

    def closers(self) -> list[WindowCloser]:
        return [
            WindowCloser(
                self.world.store,
                self.rules,
                allowed_lateness_s=LATENESS,
                worker_id=f"w{i}",
                clock=self.clock.redis,
                steps=[
                    SlicesStep(self.world.suites.segments, self.rules, resolves=True),
                    ResolveStep(self.rules),
                ],
            )
            for i in range(2)
        ]

    async def window(self, w: int, tiers: dict[str, list[str]]) -> list[Alert]:
        """Window ``w`` with these outputs per tier, closed by two racing closers: the alerts it sent."""
        start = T0 + w * SIZE
        self.clock.now = start + 1
        raws = []
        for tier, outputs in tiers.items():
            for output in outputs:
                raws.append(event(self.n, tier, output=output, at=start + 1))
                self.n += 1
        if raws:
            await self.world.record(*raws)
        before = len(self.sink.alerts())
        self.clock.now = start + SIZE + LATENESS
        await asyncio.gather(*(c.run_once(self.sink) for c in self.closers()))
        return self.sink.alerts()[before:]


async def test_a_slice_alert_resolves_per_slice(aredis: aioredis.Redis, prefix: str) -> None:
    run = Run(aredis, prefix)
    fired = await run.window(
        0, {"gold": ["Paris", "Rome"], "free": ["Rome", "Rome"], "pro": ["Paris", "Paris"]}
    )
    assert sorted((a.rule, a.segment.value if a.segment else None, a.status) for a in fired) == [
        ("low", "free", "firing"),
        ("low", "gold", "firing"),
        ("pair-low", None, "firing"),
    ]
    gold0 = next(a for a in fired if a.segment and a.segment.value == "gold")
    # gold is good now: its alert resolves; free still breaks the rule: fires again, nothing of it resolves
    later = await run.window(1, {"gold": ["Paris", "Paris"], "free": ["Rome", "Rome"], "pro": ["Paris"] * 8})
    resolved = [a for a in later if a.status == "resolved"]
    assert [(a.id, a.resolution, a.segment) for a in resolved] == [(gold0.id, "recovered", gold0.segment)]
    assert gold0.id.endswith(":tier=gold") and resolved[0].count == 2 and resolved[0].value == 1.0
    assert resolved[0].message.startswith("resolved: mean_score 1 no longer < 0.9 for m1 / qa (tier = gold)")
    free1 = [a for a in later if a.status == "firing" and a.segment and a.segment.value == "free"]
    assert len(free1) == 1  # pair-low: mean (2 + 8) / 12 is 0.83, fires again too, and does not resolve
    # free gets no more events; gold and pro go on: free resolves for want of events after 2 windows, alone
    pair_ends = [
        a
        for a in await run.window(2, {"gold": ["Paris"] * 2, "pro": ["Paris"] * 2})
        if a.status == "resolved"
    ]
    assert [(a.rule, a.segment, a.resolution) for a in pair_ends] == [("pair-low", None, "recovered")]
    quiet = await run.window(3, {"gold": ["Paris"] * 2, "pro": ["Paris"] * 2})
    quiet += await run.window(4, {"gold": ["Paris"] * 2, "pro": ["Paris"] * 2})
    ends = [a for a in quiet if a.status == "resolved"]
    assert [(a.id, a.resolution, a.segment) for a in ends] == [(free1[0].id, "no_events", free1[0].segment)]
    assert ends[0].message == (
        f"resolved: no events for m1 / qa (tier = free) in the 2 window(s) of {SIZE}s from "
        f"{format_time(T0 + 2 * SIZE)} to {format_time(T0 + 4 * SIZE)}"
    )
    await run.window(5, {"gold": ["Paris"] * 2})
    statuses = [(a.rule, a.segment.value if a.segment else None, a.status) for a in run.sink.alerts()]
    assert (
        statuses.count(("low", "gold", "resolved")) == 1 and statuses.count(("low", "free", "resolved")) == 1
    )
    run.sink.check_contracts()


def test_slice_alerts_resolve_only_with_notify() -> None:
    def step(data: dict[str, Any]) -> SlicesStep:
        _, suites = parse_config(data)
        [found] = [s for s in window_steps(suites, (SIZE,)) if isinstance(s, SlicesStep)]
        return found

    notify = {"notify": [{"name": "ops", "kind": "slack", "url": "http://hooks.example.com/x"}]}
    assert step({**DATA, **notify}).resolves is True
    assert step(DATA).resolves is False  # without notify: no firing state is kept
