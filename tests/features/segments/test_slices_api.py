"""GET /api/v1/stats/segments (docs/segments.md): a pair's slices worst first against its own mean, with
counts and intervals, filtered to one dimension or one slice (real Redis)."""

from __future__ import annotations

from typing import Any

import pytest
import redis.asyncio as aioredis
from aiohttp.test_utils import TestClient, TestServer
from test_slices_record import SIZE, T0, World, config, event

from streameval.api import create_web_app
from streameval.features.web import dashboard_features


async def read(client: TestClient[Any, Any], **params: str) -> tuple[int, Any]:
    resp = await client.get("/api/v1/stats/segments", params=params)
    body = await resp.json()
    return resp.status, body.get("data", body)


async def test_worst_slices_first_with_counts_and_intervals(aredis: aioredis.Redis, prefix: str) -> None:
    world = World(aredis, prefix, config(max_values=2), [T0 + 2])
    outputs = {"gold": ["Paris"] * 4, "free": ["Rome", "Rome", "Paris"], "team": ["Rome"], None: ["Paris"]}
    raws, i = [], 0
    for tier, answers in outputs.items():
        for output in answers:
            raws.append(event(i, tier, output=output))
            i += 1
    await world.record(*raws)
    version = world.suites.by_name["qa"].version
    app = create_web_app(aredis, prefix=prefix, token=None, windows=(SIZE,), features=dashboard_features())
    async with TestClient(TestServer(app)) as client:
        status, data = await read(client, model="m1", suite="qa", version=version)
        assert status == 200, data
        assert data["windows"] == [T0] and data["overall"]["count"] == 9
        assert data["overall"]["mean"] == pytest.approx(6 / 9)
        [tier] = data["dimensions"]
        assert tier["name"] == "tier" and tier["kept"] == 2 and tier["other"] == 1  # team came third
        rows = {r["value"]: r for r in tier["values"]}
        assert [r["value"] for r in tier["values"]] == ["(other)", "free", "(missing)", "gold"]
        free = rows["free"]
        assert (free["count"], free["mean"]) == (3, pytest.approx(1 / 3))
        assert free["below"] == pytest.approx(6 / 9 - 1 / 3)
        assert free["ci_low"] < free["mean"] < free["ci_high"]
        assert free["pass_ci_low"] <= free["pass_rate"] <= free["pass_ci_high"]
        assert rows["(other)"]["ci_low"] is None  # one event: no interval
        # one slice, with its figures per window
        status, one = await read(
            client, model="m1", suite="qa", version=version, dimension="tier", value="free"
        )
        assert status == 200
        assert [r["value"] for r in one["dimensions"][0]["values"]] == ["free"]
        assert one["series"] == [
            {"start": T0, **{k: v for k, v in free.items() if k not in ("value", "below")}}
        ]
        status, _ = await read(client, model="m1", suite="qa", value="free")
        assert status == 400  # a value needs its dimension
        status, none = await read(client, model="m1", suite="qa", version=version, dimension="region")
        assert status == 200 and none["dimensions"] == []
