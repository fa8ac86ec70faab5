"""A closed window carries the agreement with people of the labels joined in it, and sets /metrics."""

from __future__ import annotations

import orjson
import redis.asyncio as aioredis
from _feedback_helpers import NOW, label, record, result, stores
from prometheus_client import REGISTRY

from streameval.features.labels import AgreementStep
from streameval.models import Aggregate
from streameval.outputs import Publish
from streameval.windows import WindowCloser


async def test_the_window_aggregate_has_the_human_block_and_the_gauges(
    aredis: aioredis.Redis, prefix: str
) -> None:
    store, labels = stores(aredis, prefix)
    results = [
        result(f"w{i}", {"alpha": float(i % 11), "beta": 5.0, "gamma": 10.0 - i % 11}) for i in range(12)
    ]
    await record(store, results)
    await labels.join([label(r.id, passed=r.judge.judges[0].score >= 6, annotator="ana") for r in results])  # type: ignore[union-attr,operator]
    sent: list[Publish] = []

    async def send(message: Publish) -> None:
        sent.append(message)

    async def later() -> float:
        return NOW + 120

    closer = WindowCloser(store, (), allowed_lateness_s=1, clock=later, steps=[AgreementStep(labels)])
    assert await closer.run_once(send) == 1
    [aggregate] = [Aggregate.model_validate_json(m.value) for m in sent if m.kind == "aggregate"]
    human = aggregate.human
    assert human is not None and human.labels == 12
    assert human.raters["judge:alpha"].kappa == 1.0  # people said exactly what alpha said
    assert human.raters["judge:gamma"].kappa is not None and human.raters["judge:gamma"].kappa < 0
    gauge = REGISTRY.get_sample_value(
        "streameval_human_agreement", {"suite": "qa", "rater": "judge:alpha", "figure": "kappa"}
    )
    assert gauge == 1.0
    assert (
        REGISTRY.get_sample_value(
            "streameval_human_agreement", {"suite": "qa", "rater": "judge:alpha", "figure": "n"}
        )
        == 12
    )
    assert orjson.loads(sent[0].value)["human"]["raters"]["result"]["n"] == 12
