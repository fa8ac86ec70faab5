"""GET /api/v1/stats/human: agreement with people all time (with calibration) and per window (real Redis)."""

from __future__ import annotations

import random

import pytest
import redis.asyncio as aioredis
from _feedback_helpers import JUDGES, NOW, label, record, result, stores
from aiohttp.test_utils import TestClient, TestServer

from streameval.api import create_web_app
from streameval.features.web import dashboard_features


async def test_all_time_with_calibration_and_one_window(aredis: aioredis.Redis, prefix: str) -> None:
    store, labels = stores(aredis, prefix)
    rng = random.Random(2)
    results = [result(f"h{i}", {j: float(rng.randrange(0, 11)) for j in JUDGES}) for i in range(30)]
    await record(store, results)
    # people agree with judge alpha up to a little noise
    await labels.join(
        [
            label(
                r.id,
                score=min(1.0, max(0.0, r.judge.judges[0].score / 10 + rng.uniform(-0.05, 0.05))),  # type: ignore[union-attr,operator]
                annotator="ana",
            )
            for r in results
        ]
    )
    app = create_web_app(aredis, prefix=prefix, token=None, windows=(60,), features=dashboard_features())
    async with TestClient(TestServer(app)) as client:
        resp = await client.get("/api/v1/stats/human", params={"model": "m", "suite": "qa"})
        assert resp.status == 200, await resp.text()
        body = (await resp.json())["data"]
        assert body["window"] is None and body["agreement"]["labels"] == 30
        raters = body["agreement"]["raters"]
        assert raters["judge:alpha"]["pearson"] > 0.9 > raters["judge:beta"]["pearson"]
        tuned = body["calibration"]
        assert set(tuned) == set(JUDGES) and all(t["n"] == 30 for t in tuned.values())
        assert tuned["alpha"]["weight"] == max(t["weight"] for t in tuned.values())
        assert sum(t["weight"] for t in tuned.values()) == pytest.approx(1.0)
        xs = [x for x, _ in tuned["alpha"]["map"]]
        ys = [y for _, y in tuned["alpha"]["map"]]
        assert xs == sorted(xs) and ys == sorted(ys)  # monotone
        start = int(NOW // 60) * 60
        window = (
            await (
                await client.get(
                    "/api/v1/stats/human", params={"model": "m", "suite": "qa", "window": str(start)}
                )
            ).json()
        )["data"]
        assert window["agreement"] == body["agreement"] and window["calibration"] is None
        empty = (
            await (
                await client.get(
                    "/api/v1/stats/human", params={"model": "m", "suite": "qa", "window": str(start - 60)}
                )
            ).json()
        )["data"]
        assert empty["agreement"] is None
        assert (await client.get("/api/v1/stats/human", params={"model": "m"})).status == 400
