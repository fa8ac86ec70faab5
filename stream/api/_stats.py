"""Read endpoints for the live dashboard: window aggregates, dead letters, recent alerts.

They read the Redis hashes the store writes through the indexes it keeps (streameval.keyspace): the
pairs zset ``P{ix}:pairs``, the windows with data ``P{ix}:win:{size}``, each window's pairs
``P{ix}:wp:{size}:{start}``, and ``P{dl}:win:{size}`` for dead letters. No keyspace SCAN: a read costs
what its page holds. Pages are bounded (``limit`` pairs from ``offset``; the response header
``X-Total-Count`` gives the number of pairs), and hashes are read and turned into figures 25 at a time,
so a large read holds the worker's event loop for about a millisecond at a time (``/health`` answers
in between; ``bench/api_reads.py`` measures it).

Alerts: the window closer publishes them to the alerts topic; the worker also pushes each one it
publishes onto the Redis list ``P{ix}:alerts:recent`` (:func:`remember_alert`, newest first, the last
500 kept), which ``/api/v1/alerts`` reads (an empty list before any alert fired).
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections import defaultdict
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import orjson
from aiohttp import web

from ..keyspace import Client, Keys, guard
from ..store import hash_fields
from ._errors import BadRequest

__all__ = ["RECENT_ALERTS", "STATS_KEY", "StatsConfig", "recent_alerts_key", "remember_alert", "routes"]

log = logging.getLogger(__name__)

#: how many alerts ``P alerts:recent`` keeps
RECENT_ALERTS = 500


def recent_alerts_key(prefix: str) -> str:
    return Keys(prefix).recent_alerts


async def remember_alert(client: Client, prefix: str, encoded: bytes) -> None:
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

    def __init__(self, client: Client, prefix: str, windows: tuple[int, ...]) -> None:
        self.client, self.prefix, self.windows = client, prefix, windows
        self.keys = Keys(prefix)
        # one stats read at a time: others queue here, not in the event loop ahead of /health
        self.gate = asyncio.Semaphore(1)


STATS_KEY: web.AppKey[StatsConfig] = web.AppKey("stats", StatsConfig)
_MAX_WINDOWS = 240
#: most pairs in one page, and most (pair, window) points one windows page reads
_MAX_LIMIT = 500
_MAX_POINTS = 6000
#: keys per Redis pipeline: each reply is parsed in the event loop, and another request (/health)
#: waits for at most one chunk per concurrent reader (~1 ms each)
_CHUNK = 25
#: the judge panel's per-judge counters (streameval.judges._panel.judge_counters)
_JUDGE_COUNTERS = "ev:judge_panel:c:"


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _figures(raw: dict[Any, Any]) -> dict[str, Any]:
    fields = hash_fields(raw)
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


def _page(request: web.Request, default: int) -> tuple[int, int]:
    return _int_param(request, "offset", 0, 0, 10**9), _int_param(request, "limit", default, 1, _MAX_LIMIT)


async def _hgetall(config: StatsConfig, keys: Sequence[str]) -> list[dict[Any, Any]]:
    out: list[dict[Any, Any]] = []
    for i in range(0, len(keys), _CHUNK):

        async def read(chunk: Sequence[str] = keys[i : i + _CHUNK]) -> list[Any]:
            async with config.client.pipeline(transaction=False) as pipe:
                for key in chunk:
                    pipe.hgetall(key)
                return list(await pipe.execute())

        out += await guard(read())
    return out


async def _figures_of(config: StatsConfig, keys: Sequence[str]) -> list[dict[str, Any] | None]:
    """The figures of each hash (None when empty), a chunk at a time: the event loop runs in between."""
    out: list[dict[str, Any] | None] = []
    for i in range(0, len(keys), _CHUNK):
        out += [_figures(raw) if raw else None for raw in await _hgetall(config, keys[i : i + _CHUNK])]
    return out


def _ok(data: Any, total: int | None = None) -> web.Response:
    headers = {"X-Total-Count": str(total)} if total is not None else None
    return web.Response(body=orjson.dumps({"code": 200, "data": data}), content_type="application/json", headers=headers)


async def pairs(request: web.Request) -> web.Response:
    """All-time figures per model × suite, ``limit`` pairs from ``offset`` (sorted by model, suite)."""
    config = request.app[STATS_KEY]
    offset, limit = _page(request, 100)
    members = sorted(_text(m) for m in await guard(config.client.zrange(config.keys.pairs, 0, -1)))
    page = members[offset : offset + limit]
    figures = await _figures_of(config, [config.keys.all_time(m) for m in page])
    out = []
    for member, fig in zip(page, figures, strict=True):
        model, suite = Keys.split_pair(member)
        out.append({"model": model, "suite": suite, **(fig or _figures({}))})
    return _ok(out, len(members))


async def _latest(config: StatsConfig, index: str, last: int) -> list[int]:
    raw = await guard(config.client.zrange(index, -last, -1))
    return sorted(int(float(_text(s))) for s in raw)


async def windows(request: web.Request) -> web.Response:
    """The latest ``last`` windows of ``size`` seconds that hold data, per model × suite (a page of pairs)."""
    config = request.app[STATS_KEY]
    size = _size(request)
    last = _int_param(request, "last", 30, 1, _MAX_WINDOWS)
    offset, limit = _page(request, 50)
    if last * limit > _MAX_POINTS:
        raise BadRequest(f"last × limit must be at most {_MAX_POINTS}; got {last} × {limit}",
                         [{"path": "$.query.limit", "message": f"last × limit ≤ {_MAX_POINTS}"}])  # fmt: skip
    starts = await _latest(config, config.keys.windows(size), last)

    per_start = [{_text(m) for m in await guard(config.client.smembers(config.keys.window_pairs(size, s)))} for s in starts]
    everyone = sorted(set().union(*per_start)) if per_start else []
    chosen = set(everyone[offset : offset + limit])
    points = [(start, pair) for start, ms in zip(starts, per_start, strict=True) for pair in sorted(ms & chosen)]
    figures = await _figures_of(config, [config.keys.window(pair, size, start) for start, pair in points])
    series: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for (start, pair), fig in zip(points, figures, strict=True):
        if fig is not None:  # None: a pair indexed for a late event that counted in another window
            series[pair].append({"start": start, **fig})
    out = []
    for pair, pts in sorted(series.items()):
        model, suite = Keys.split_pair(pair)
        out.append({"model": model, "suite": suite, "points": sorted(pts, key=lambda p: p["start"])})
    return _ok({"size": size, "starts": starts, "series": out}, len(everyone))


async def dead_letters(request: web.Request) -> web.Response:
    """Dead-letter counts by kind: all time, and the latest ``last`` windows with dead letters."""
    config = request.app[STATS_KEY]
    size = _size(request)
    last = _int_param(request, "last", 30, 1, _MAX_WINDOWS)
    starts = await _latest(config, config.keys.dead_letter_windows(size), last)
    replies = await _hgetall(config, [config.keys.dead_letters_all, *(config.keys.dead_letters(size, s) for s in starts)])
    total = {_text(k): int(v) for k, v in replies[0].items()}
    points = [{"start": s, "kinds": {_text(k): int(v) for k, v in raw.items()}} for s, raw in zip(starts, replies[1:], strict=True)]
    return _ok({"size": size, "total": total, "points": points})


async def alerts(request: web.Request) -> web.Response:
    config = request.app[STATS_KEY]
    limit = _int_param(request, "limit", 50, 1, 500)
    out = []
    for raw in await guard(config.client.lrange(config.keys.recent_alerts, 0, limit - 1)):
        try:
            doc = orjson.loads(raw)
        except orjson.JSONDecodeError:
            continue
        if isinstance(doc, dict):
            out.append(doc)
    return _ok(out)


def _gated(handler: Callable[[web.Request], Awaitable[web.Response]]) -> Callable[[web.Request], Awaitable[web.Response]]:
    async def gated(request: web.Request) -> web.Response:
        async with request.app[STATS_KEY].gate:
            return await handler(request)

    return gated


def routes() -> list[web.RouteDef]:
    return [
        web.get("/api/v1/stats/pairs", _gated(pairs)),
        web.get("/api/v1/stats/windows", _gated(windows)),
        web.get("/api/v1/stats/deadletters", _gated(dead_letters)),
        web.get("/api/v1/alerts", alerts),
    ]
