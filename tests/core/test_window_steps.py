"""Window steps (streameval.feature.WindowStep): built only when the suite file turns their feature on, and
called by the closer at their points of the publish discipline (build aggregates and alerts, publish_all,
mark the alerts sent, the steps' after-work, mark the lease done)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
import redis.asyncio as aioredis
from test_windows import LATENESS, SIZE, T0, Clock, record, result

from streameval.alerts import AlertRule
from streameval.config import parse_config
from streameval.feature import ClosingWindow, PublishedWindow, WindowContext, WindowShare
from streameval.features.drilldown import worst_ids
from streameval.features.labels import AgreementStep, LabelStore
from streameval.features.notify import ResolveStep
from streameval.features.score_shift import ScoreShiftStep
from streameval.features.setup import alert_examples, enabled, window_steps
from streameval.keyspace import Keys
from streameval.models import Aggregate
from streameval.outputs import Publish, Send
from streameval.settings import Settings
from streameval.store import ResultStore
from streameval.windows import WindowCloser

SUITE = {"name": "qa", "default": True, "evaluators": [{"evaluator": "exact_match"}]}
RULE = {"name": "low", "metric": "mean_score", "comparator": "<", "threshold": 0.9, "window": SIZE}


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ({}, []),
        ({"alerts": [RULE]}, []),
        ({"windowing": {"score_shift": {"window": SIZE}}}, [ScoreShiftStep]),
        (
            {
                "alerts": [RULE],
                "notify": [{"name": "a", "kind": "slack", "url": "https://hooks.slack.com/x"}],
            },
            [ResolveStep],
        ),
    ],
)
def test_only_the_features_the_suite_file_turns_on_are_built(
    extra: dict[str, Any], expected: list[type]
) -> None:
    _, suites = parse_config({"suites": [SUITE], **extra})
    assert [type(step) for step in window_steps(suites, (SIZE,))] == expected


def test_the_label_join_step_exists_with_the_join_and_examples_with_alerts(aredis: aioredis.Redis) -> None:
    _, suites = parse_config({"suites": [SUITE]})
    labels = LabelStore(aredis, Keys("t:"), join_ttl_s=60, windows=(SIZE,))
    assert [type(step) for step in window_steps(suites, (SIZE,), labels)] == [AgreementStep]
    assert alert_examples(enabled(Settings(), suites)) is None  # nothing lists examples: none kept
    _, alerting = parse_config({"suites": [SUITE], "alerts": [RULE]})
    assert alert_examples(enabled(Settings(), alerting)) is worst_ids
    assert alert_examples(enabled(Settings(examples=0), alerting)) is None


class Spy:
    """A step that records when the closer calls it, adds a figure and a message, and works after the ack."""

    name = "spy"

    def __init__(self, log: list[str]) -> None:
        self.log = log

    async def closing(self, ctx: WindowContext, window: ClosingWindow) -> Mapping[str, Mapping[str, Any]]:
        self.log.append(f"closing {len(window.pairs)} pairs")
        return {pair: {"late": 7} for pair in window.pairs}

    async def published(self, ctx: WindowContext, window: PublishedWindow) -> WindowShare | None:
        self.log.append(f"published {len(window.aggregates)} aggregates, {len(window.alerts)} alerts")
        store, [alert] = ctx.store, window.alerts
        a = alert.aggregate
        claim = store.keys.alert_claim(
            store.pair_id(a.model, a.suite, a.suite_version or ""), alert.rule, window.size, a.window.start
        )
        lease = store.keys.lease(window.size, window.start)

        async def after() -> None:  # the alert is marked sent, the window not yet done
            self.log.append(
                f"after: claim {await store.client.get(claim)!r}, lease {await store.client.get(lease)!r}"
            )

        return WindowShare((Publish("alert", b"spy", b"{}"),), after)

    async def tick(self, ctx: WindowContext, now: float, send: Send) -> None:
        self.log.append("tick")


async def test_a_step_is_called_at_its_points_of_the_publish_discipline(
    aredis: aioredis.Redis, prefix: str
) -> None:
    clock = Clock(T0 + 1)
    store = ResultStore(aredis, prefix=prefix, windows=(SIZE,), allowed_lateness_s=LATENESS, clock=clock)
    log: list[str] = []
    rule = AlertRule.model_validate(RULE)
    closer = WindowCloser(
        store, [rule], allowed_lateness_s=LATENESS, clock=clock.redis, worker_id="w", steps=[Spy(log)]
    )
    await record(store, await result("a", "Paris", T0 + 1), await result("b", "Rome", T0 + 2))
    clock.now = T0 + SIZE + LATENESS
    sent: list[Publish] = []

    async def send(message: Publish) -> None:
        sent.append(message)
        log.append(f"send {message.kind}")

    assert await closer.run_once(send) == 1
    assert log == [
        "closing 1 pairs",
        "published 1 aggregates, 1 alerts",
        "send aggregate",
        "send alert",
        "send alert",  # the step's, after the closer's own messages, in the same publish_all
        "after: claim b'sent', lease b'w'",
        "tick",
    ]
    assert await store.client.get(store.keys.lease(SIZE, T0)) == b"done"
    [aggregate] = [Aggregate.model_validate_json(m.value) for m in sent if m.kind == "aggregate"]
    assert aggregate.late == 7  # the step's figure is on the aggregate
    assert aggregate.count == 2
