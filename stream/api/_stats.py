"""Read endpoints for the live dashboard: window aggregates, dead letters, recent alerts, a result by id.
The features' reads (drill-down examples, version comparison, agreement with people) are their own web
features (streameval.api.WebFeature, in their ``web`` modules), built on what :mod:`._reads` shares.

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

import logging
import math
import time
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import orjson
from aiohttp import web

from ..aggregates import _panel, _sums
from ..keyspace import Client, Keys, guard
from ..models import PANEL_RESULT_NAME
from ..stats import histogram_quantile, krippendorff_alpha, pearson
from ..store import hash_fields, stored_results
from ._errors import BadRequest, NotRetained
from ._reads import (
    ALL_VERSIONS,
    MAX_WINDOWS,
    STATS_KEY,
    StatsConfig,
    current_versions,
    gated,
    int_param,
    latest,
    ok,
    page_param,
    select_versions,
    size_param,
    text,
    version_param,
    zmembers,
)

__all__ = ["RECENT_ALERTS", "recent_alerts_key", "remember_alert", "routes"]

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


#: most (pair, window) points one windows page reads
_MAX_POINTS = 6000
#: keys per Redis pipeline: each reply is parsed in the event loop, and another request (/health)
#: waits for at most one chunk per concurrent reader (~1 ms each)
_CHUNK = 25
#: the judge panel's per-judge counters (streameval.judges._panel.judge_counters)
_JUDGE_COUNTERS = f"ev:{PANEL_RESULT_NAME}:c:"


def _figures(raw: dict[Any, Any]) -> dict[str, Any]:
    fields = hash_fields(raw)
    count = int(fields.get("count", 0))
    grades = {k.removeprefix("grade:"): int(v) for k, v in fields.items() if k.startswith("grade:")}
    evaluators: dict[str, dict[str, float]] = defaultdict(dict)
    for key, value in fields.items():
        if key.startswith("ev:") and ":c:" not in key:
            name, _, figure = key[3:].rpartition(":")
            evaluators[name][figure] = value
    panel = _panel(fields)  # per-judge counters "{judge}.{counter}"; pair, alpha and repeat sums apart
    judges = panel.judges
    return {
        "count": count,
        "mean": fields.get("sum", 0.0) / count if count else None,
        "passRate": fields.get("passes", 0.0) / count if count else None,
        "grades": grades,
        "evaluators": {
            name: {
                "count": int(f.get("count", 0)),
                "mean": f.get("sum", 0.0) / f["count"] if f.get("count") else None,
                "errors": int(f.get("errors", 0)),
            }
            for name, f in sorted(evaluators.items())
        },
        "judges": {name: _judge(f) for name, f in sorted(judges.items())},
        **_more(fields, count, panel),
    }


def _more(fields: dict[str, float], count: int, panel: Any) -> dict[str, Any]:
    """Latency, tokens, cost, panel agreement and gate failures (the dashboard's drill-down panels)."""
    latency = {int(k[4:]): v for k, v in fields.items() if k.startswith("lat:")}
    costs = [c["cost"] for c in panel.judges.values() if "cost" in c]
    return {
        "latencyP50Ms": histogram_quantile(latency, 0.5),
        "latencyP95Ms": histogram_quantile(latency, 0.95),
        "tokens": {
            kind: int(sum(c.get(f"{kind}_tokens", 0.0) for c in panel.judges.values()))
            for kind in ("prompt", "completion")
        },
        "cost": round(math.fsum(costs), 9) if costs else None,
        "alpha": krippendorff_alpha(*(panel.alpha.get(k, 0.0) for k in ("n", "s1", "s2", "do"))),
        "pearson": {f"{a}|{b}": pearson(*_sums(stats)) for (a, b), stats in sorted(panel.pairs.items())},
        "consistency": pearson(*_sums(panel.repeat)),
        "gateFailures": {k[5:]: int(v) for k, v in sorted(fields.items()) if k.startswith("gate:") and v},
        "lateRedirected": int(fields.get("late_redirected", 0.0)),
    }


def _judge(f: dict[str, float]) -> dict[str, Any]:
    """One judge's figures from the panel's counters (scores on 0-10)."""
    n = int(f.get("n", 0))
    mean = f.get("score_sum", 0.0) / n if n else None
    sd = math.sqrt(max(0.0, f.get("score_sumsq", 0.0) / n - mean * mean)) if n and mean is not None else None
    return {
        "n": n,
        "mean": mean,
        "sd": sd,
        "calls": int(f.get("calls", 0) + f.get("repeat_calls", 0)),
        "errors": int(f.get("errors", 0)),
        "cacheHits": int(f.get("cache_hits", 0)),
        "tokens": int(f.get("prompt_tokens", 0) + f.get("completion_tokens", 0)),
        "cost": round(f["cost"], 9) if "cost" in f else None,
    }


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


def _pair_doc(member: str, current: dict[str, str]) -> dict[str, Any]:
    model, suite, version = Keys.split_pair(member)
    return {"model": model, "suite": suite, "version": version, "current": current.get(suite) == version}


async def pairs(request: web.Request) -> web.Response:
    """All-time figures per model × suite × version, ``limit`` pairs from ``offset`` (sorted by model,
    suite, version); each suite's current version unless ``version`` says otherwise (docs/versions.md)."""
    config = request.app[STATS_KEY]
    offset, limit = page_param(request, 100)
    wanted = version_param(request)
    members = sorted(text(m) for m in await zmembers(config.client, config.keys.pairs))
    current = await current_versions(config)
    members = select_versions(members, wanted, current)
    page = members[offset : offset + limit]
    figures = await _figures_of(config, [config.keys.all_time(m) for m in page])
    out = []
    for member, fig in zip(page, figures, strict=True):
        out.append({**_pair_doc(member, current), **(fig or _figures({}))})
    return ok(out, len(members))


async def windows(request: web.Request) -> web.Response:
    """The latest ``last`` windows of ``size`` seconds that hold data, per model × suite (a page of pairs)."""
    config = request.app[STATS_KEY]
    size = size_param(request)
    last = int_param(request, "last", 30, 1, MAX_WINDOWS)
    offset, limit = page_param(request, 50)
    if last * limit > _MAX_POINTS:
        raise BadRequest(
            f"last × limit must be at most {_MAX_POINTS}; got {last} × {limit}",
            [{"path": "$.query.limit", "message": f"last × limit ≤ {_MAX_POINTS}"}],
        )
    wanted = version_param(request)
    starts = await latest(config, config.keys.windows(size), last)
    current = await current_versions(config)

    per_start = [
        {text(m) for m in await guard(config.client.smembers(config.keys.window_pairs(size, s)))}
        for s in starts
    ]
    everyone = sorted(set().union(*per_start)) if per_start else []
    everyone = (
        select_versions(everyone, wanted, current) if everyone or wanted not in (None, ALL_VERSIONS) else []
    )
    chosen = set(everyone[offset : offset + limit])
    points = [
        (start, pair) for start, ms in zip(starts, per_start, strict=True) for pair in sorted(ms & chosen)
    ]
    figures = await _figures_of(config, [config.keys.window(pair, size, start) for start, pair in points])
    series: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for (start, pair), fig in zip(points, figures, strict=True):
        if fig is not None:  # None: a pair indexed for a late event that counted in another window
            series[pair].append({"start": start, **fig})
    out: list[dict[str, Any]] = []
    for pair, pts in sorted(series.items()):
        out.append({**_pair_doc(pair, current), "points": sorted(pts, key=lambda p: p["start"])})
    return ok({"size": size, "sizes": list(config.windows), "starts": starts, "series": out}, len(everyone))


async def dead_letters(request: web.Request) -> web.Response:
    """Dead-letter counts by kind: all time, and the latest ``last`` windows with dead letters."""
    config = request.app[STATS_KEY]
    size = size_param(request)
    last = int_param(request, "last", 30, 1, MAX_WINDOWS)
    starts = await latest(config, config.keys.dead_letter_windows(size), last)
    replies = await _hgetall(
        config, [config.keys.dead_letters_all, *(config.keys.dead_letters(size, s) for s in starts)]
    )
    total = {text(k): int(v) for k, v in replies[0].items()}
    points = [
        {"start": s, "kinds": {text(k): int(v) for k, v in raw.items()}}
        for s, raw in zip(starts, replies[1:], strict=True)
    ]
    return ok({"size": size, "total": total, "points": points})


async def alerts(request: web.Request) -> web.Response:
    config = request.app[STATS_KEY]
    limit = int_param(request, "limit", 50, 1, 500)
    out = []
    for raw in await guard(config.client.lrange(config.keys.recent_alerts, 0, limit - 1)):
        try:
            doc = orjson.loads(raw)
        except orjson.JSONDecodeError:
            continue
        if isinstance(doc, dict):
            out.append(doc)
    return ok(out)


async def result_by_id(request: web.Request) -> web.Response:
    """A full graded result while it is retained (the redelivery horizon); ``model`` and ``suite`` narrow the search."""
    config = request.app[STATS_KEY]
    result_id = request.match_info["id"]
    model, suite = request.query.get("model"), request.query.get("suite")
    members = sorted(text(m) for m in await zmembers(config.client, config.keys.pairs))
    if model and suite:  # every version of the pair, and its figures from before versions
        members = [m for m in members if Keys.split_pair(m)[:2] == (model, suite)] or [
            Keys.pair_id(model, suite)
        ]
    ttl = config.redelivery_ttl_s
    if ttl:
        now = int(time.time() // ttl)
        generations = (now, now - 1, now + 1)  # +1: our clock may be behind the workers'
        for i in range(0, len(members), _CHUNK):

            async def find(chunk: Sequence[str] = members[i : i + _CHUNK]) -> list[Any]:
                async with config.client.pipeline(transaction=False) as pipe:
                    for member in chunk:
                        for gen in generations:
                            pipe.hget(config.keys.result_ids(member, gen), result_id)
                    return list(await pipe.execute())

            found = await guard(find())
            hits = [
                (members[i + j // len(generations)], None, value, (generations[j % len(generations)],))
                for j, value in enumerate(found)
                if value is not None
            ]
            for encoded in await guard(stored_results(config.client, config.keys, hits)) if hits else ():
                if encoded is not None:
                    document = orjson.loads(encoded)
                    return ok(config.redact_result(document) if config.redact_result else document)
    for lookup in config.find_result:  # e.g. the window's drill-down examples
        document = await lookup(config, members, result_id)
        if document is not None:
            return ok(config.redact_result(document) if config.redact_result else document)
    kept = f"{ttl} s (STREAMEVAL_REDELIVERY_TTL_S)" if ttl else "no time: STREAMEVAL_REDELIVERY_TTL_S is 0"
    raise NotRetained(
        f"result {result_id!r} is not retained: full results are kept until the broker has them, at most "
        f"{kept}; the worst and failing results of each window are kept longer, see /api/v1/stats/examples"
    )


def routes() -> list[web.RouteDef]:
    return [
        web.get("/api/v1/stats/pairs", gated(pairs)),
        web.get("/api/v1/stats/windows", gated(windows)),
        web.get("/api/v1/stats/deadletters", gated(dead_letters)),
        web.get("/api/v1/results/{id}", gated(result_by_id)),
        web.get("/api/v1/alerts", alerts),
    ]
