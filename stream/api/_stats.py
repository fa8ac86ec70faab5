"""Read endpoints for the live dashboard: window aggregates, dead letters, recent alerts.

They read the raw Redis hashes the store writes (README "Redis layout", stream/store.py):
``P agg:{size}:{start}:{model}:{suite}``, ``P agg:all:{model}:{suite}``, ``P dl:{size}:{start}``,
``P dl:all``. The latest windows are found with SCAN over ``P agg:{size}:*`` (bounded by the windows'
TTL), so the dashboard also shows streams whose event times are in the past.

Alerts: the window closer publishes them to the alerts topic; the worker also pushes each one it
publishes onto the Redis list ``P alerts:recent`` (:func:`remember_alert`, newest first, the last
500 kept), which ``/api/v1/alerts`` reads (an empty list before any alert fired).
"""

from __future__ import annotations

import logging
import math
from collections import defaultdict
from typing import Any
from urllib.parse import unquote

import orjson
import redis.asyncio as aioredis
from aiohttp import web

from ._errors import BadRequest

__all__ = ["RECENT_ALERTS", "STATS_KEY", "StatsConfig", "recent_alerts_key", "remember_alert", "routes"]

log = logging.getLogger(__name__)

#: how many alerts ``P alerts:recent`` keeps
RECENT_ALERTS = 500


def recent_alerts_key(prefix: str) -> str:
    return f"{prefix}alerts:recent"


async def remember_alert(client: aioredis.Redis, prefix: str, encoded: bytes) -> None:
    """Keep a published alert for the dashboard. Never raises: the alert is already on its topic."""
    key = recent_alerts_key(prefix)
    try:
        async with client.pipeline(transaction=True) as pipe:
            pipe.lpush(key, encoded)
            pipe.ltrim(key, 0, RECENT_ALERTS - 1)
            await pipe.execute()
    except Exception as exc:  # the dashboard misses one alert rather than the stream stalling
        log.warning("could not keep the alert for the dashboard: %s", exc)


class StatsConfig:
    """Where the aggregates live: the Redis client, key prefix and the configured window sizes."""

    def __init__(self, client: aioredis.Redis, prefix: str, windows: tuple[int, ...]) -> None:
        self.client, self.prefix, self.windows = client, prefix, windows


STATS_KEY: web.AppKey[StatsConfig] = web.AppKey("stats", StatsConfig)
_MAX_WINDOWS = 240
#: the judge panel's per-judge counters (streameval.judges._panel.judge_counters)
_JUDGE_COUNTERS = "ev:judge_panel:c:"


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _figures(raw: dict[Any, Any]) -> dict[str, Any]:
    fields = {_text(k): float(v) for k, v in raw.items()}
    count = int(fields.get("count", 0))
    grades = {k.removeprefix("grade:"): int(v) for k, v in fields.items() if k.startswith("grade:")}
    evaluators: dict[str, dict[str, float]] = defaultdict(dict)
    for key, value in fields.items():
        if key.startswith("ev:") and ":c:" not in key:
            name, _, figure = key[3:].rpartition(":")
            evaluators[name][figure] = value
    judges: dict[str, dict[str, float]] = defaultdict(dict)
    for key, value in fields.items():
        if key.startswith(_JUDGE_COUNTERS):
            judge, _, counter = key[len(_JUDGE_COUNTERS):].rpartition(".")
            judges[judge][counter] = value
    return {
        "count": count,
        "mean": fields.get("sum", 0.0) / count if count else None,
        "passRate": fields.get("passes", 0.0) / count if count else None,
        "grades": grades,
        "evaluators": {
            name: {"count": int(f.get("count", 0)), "mean": f.get("sum", 0.0) / f["count"] if f.get("count") else None,
                   "errors": int(f.get("errors", 0))}
            for name, f in sorted(evaluators.items())
        },
        "judges": {name: _judge(f) for name, f in sorted(judges.items())},
    }  # fmt: skip


def _judge(f: dict[str, float]) -> dict[str, Any]:
    """One judge's figures from the panel's counters (scores on 0-10)."""
    n = int(f.get("n", 0))
    mean = f.get("score_sum", 0.0) / n if n else None
    sd = math.sqrt(max(0.0, f.get("score_sumsq", 0.0) / n - mean * mean)) if n and mean is not None else None
    return {"n": n, "mean": mean, "sd": sd, "calls": int(f.get("calls", 0)), "errors": int(f.get("errors", 0)),
            "cacheHits": int(f.get("cache_hits", 0))}  # fmt: skip


def _int_param(request: web.Request, name: str, default: int, low: int, high: int) -> int:
    raw = request.query.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        value = low - 1
    if not low <= value <= high:
        raise BadRequest(f"{name} must be an integer within {low}..{high}; got {raw!r}",
                         [{"path": f"$.query.{name}", "message": f"an integer within {low}..{high}"}])  # fmt: skip
    return value


def _size(request: web.Request) -> int:
    config = request.app[STATS_KEY]
    size = _int_param(request, "size", config.windows[0], 1, 10**9)
    if size not in config.windows:
        raise BadRequest(f"size must be a configured window size ({', '.join(map(str, config.windows))}); got {size}",
                         [{"path": "$.query.size", "message": "not a configured window size"}])  # fmt: skip
    return size


async def _scan(config: StatsConfig, pattern: str) -> list[str]:
    return [_text(k) async for k in config.client.scan_iter(match=pattern, count=1000)]


def _ok(data: Any) -> web.Response:
    return web.Response(body=orjson.dumps({"code": 200, "data": data}), content_type="application/json")


async def pairs(request: web.Request) -> web.Response:
    """All-time figures per model × suite."""
    config = request.app[STATS_KEY]
    members = sorted(_text(m) for m in await config.client.smembers(f"{config.prefix}pairs"))
    async with config.client.pipeline(transaction=False) as pipe:
        for member in members:
            pipe.hgetall(f"{config.prefix}agg:all:{member}")
        hashes = await pipe.execute()
    out = []
    for member, raw in zip(members, hashes, strict=True):
        model, _, suite = member.partition(":")
        out.append({"model": unquote(model), "suite": unquote(suite), **_figures(raw)})
    return _ok(out)


async def windows(request: web.Request) -> web.Response:
    """The latest ``last`` windows of ``size`` seconds that hold data, per model × suite."""
    config = request.app[STATS_KEY]
    size = _size(request)
    last = _int_param(request, "last", 30, 1, _MAX_WINDOWS)
    base = f"{config.prefix}agg:{size}:"
    keys = await _scan(config, base + "*")
    parsed = []
    for key in keys:
        start, _, pair = key[len(base):].partition(":")
        if start.isdigit() and ":" in pair:
            parsed.append((int(start), pair, key))
    starts = sorted({s for s, _, _ in parsed})[-last:]
    chosen = [p for p in parsed if starts and p[0] >= starts[0]]
    async with config.client.pipeline(transaction=False) as pipe:
        for _, _, key in chosen:
            pipe.hgetall(key)
        hashes = await pipe.execute()
    series: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for (start, pair, _), raw in zip(chosen, hashes, strict=True):
        series[pair].append({"start": start, **_figures(raw)})
    out = []
    for pair, points in sorted(series.items()):
        model, _, suite = pair.partition(":")
        out.append({"model": unquote(model), "suite": unquote(suite), "points": sorted(points, key=lambda p: p["start"])})
    return _ok({"size": size, "starts": starts, "series": out})


async def dead_letters(request: web.Request) -> web.Response:
    """Dead-letter counts by kind: all time, and the latest ``last`` windows with results or dead letters."""
    config = request.app[STATS_KEY]
    size = _size(request)
    last = _int_param(request, "last", 30, 1, _MAX_WINDOWS)
    base = f"{config.prefix}dl:{size}:"
    keys = {int(k[len(base):]): k for k in await _scan(config, base + "*") if k[len(base):].isdigit()}
    starts = sorted(keys)[-last:]
    async with config.client.pipeline(transaction=False) as pipe:
        pipe.hgetall(f"{config.prefix}dl:all")
        for start in starts:
            pipe.hgetall(keys[start])
        replies = await pipe.execute()
    total = {_text(k): int(v) for k, v in replies[0].items()}
    points = [{"start": s, "kinds": {_text(k): int(v) for k, v in raw.items()}} for s, raw in zip(starts, replies[1:], strict=True)]
    return _ok({"size": size, "total": total, "points": points})


async def alerts(request: web.Request) -> web.Response:
    config = request.app[STATS_KEY]
    limit = _int_param(request, "limit", 50, 1, 500)
    out = []
    for raw in await config.client.lrange(recent_alerts_key(config.prefix), 0, limit - 1):
        try:
            doc = orjson.loads(raw)
        except orjson.JSONDecodeError:
            continue
        if isinstance(doc, dict):
            out.append(doc)
    return _ok(out)


def routes() -> list[web.RouteDef]:
    return [
        web.get("/api/v1/stats/pairs", pairs),
        web.get("/api/v1/stats/windows", windows),
        web.get("/api/v1/stats/deadletters", dead_letters),
        web.get("/api/v1/alerts", alerts),
    ]
