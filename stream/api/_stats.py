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
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, cast

import orjson
from aiohttp import web

from ..features.compare import compact_scores, compare
from ..features.drilldown import KINDS, parse
from ..features.labels import LabelStore, calibration, human_agreement
from ..keyspace import Client, Keys, guard
from ..models import PANEL_RESULT_NAME, parse_time
from ..stats import histogram_quantile, krippendorff_alpha, pearson
from ..store import hash_fields, stored_results
from ..windows import _panel, _sums
from ._errors import BadRequest, NotFound, NotRetained

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

    def __init__(
        self,
        client: Client,
        prefix: str,
        windows: tuple[int, ...],
        redelivery_ttl_s: int = 3600,
        compare_ttl_s: int = 3 * 86400,
    ) -> None:
        self.client, self.prefix, self.windows = client, prefix, windows
        self.redelivery_ttl_s = redelivery_ttl_s  # how long full results are kept (GET /api/v1/results/{id})
        self.compare_ttl_s = compare_ttl_s  # how long per-version compact scores are kept (compare)
        self.keys = Keys(prefix)
        # one stats read at a time: others queue here, not in the event loop ahead of /health
        self.gate = asyncio.Semaphore(1)
        self._labels: LabelStore | None = None

    def label_store(self) -> LabelStore:
        """The joined human labels (streameval.features.labels), read only."""
        if self._labels is None:
            self._labels = LabelStore(self.client, self.keys, windows=self.windows)
        return self._labels


STATS_KEY: web.AppKey[StatsConfig] = web.AppKey("stats", StatsConfig)
_MAX_WINDOWS = 240
#: most pairs in one page, and most (pair, window) points one windows page reads
_MAX_LIMIT = 500
_MAX_POINTS = 6000
#: keys per Redis pipeline: each reply is parsed in the event loop, and another request (/health)
#: waits for at most one chunk per concurrent reader (~1 ms each)
_CHUNK = 25
#: the judge panel's per-judge counters (streameval.judges._panel.judge_counters)
_JUDGE_COUNTERS = f"ev:{PANEL_RESULT_NAME}:c:"


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


def _int_param(request: web.Request, name: str, default: int, low: int, high: int) -> int:
    raw = request.query.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        value = low - 1
    if not low <= value <= high:
        raise BadRequest(
            f"{name} must be an integer within {low}..{high}; got {raw!r}",
            [{"path": f"$.query.{name}", "message": f"an integer within {low}..{high}"}],
        )
    return value


def _size(request: web.Request) -> int:
    config = request.app[STATS_KEY]
    size = _int_param(request, "size", config.windows[0], 1, 10**9)
    if size not in config.windows:
        raise BadRequest(
            f"size must be a configured window size ({', '.join(map(str, config.windows))}); got {size}",
            [{"path": "$.query.size", "message": "not a configured window size"}],
        )
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
    return web.Response(
        body=orjson.dumps({"code": 200, "data": data}), content_type="application/json", headers=headers
    )


#: ``version=`` values besides a version hash: every version, and the figures from before versions
ALL_VERSIONS, LEGACY_VERSION = "all", "legacy"


async def current_versions(config: StatsConfig) -> dict[str, str]:
    """suite -> the version the live workers run (they write it at start: streameval.versionstore)."""
    raw = await guard(config.client.hgetall(config.keys.current_versions))
    return {_text(k): _text(v) for k, v in raw.items()}


def _version_param(request: web.Request) -> str | None:
    """``version``: None (each suite's current version), ``all``, ``legacy`` ("") or a version hash."""
    raw = request.query.get("version")
    if raw is None:
        return None
    if raw == LEGACY_VERSION:
        return ""
    if raw != ALL_VERSIONS and not (len(raw) == 12 and all(c in "0123456789abcdef" for c in raw)):
        raise BadRequest(
            f"version must be a 12-digit hex version, {ALL_VERSIONS!r} or {LEGACY_VERSION!r}; got {raw!r}",
            [{"path": "$.query.version", "message": "a version, all or legacy"}],
        )
    return raw


def select_versions(
    members: Sequence[str], wanted: str | None, current: dict[str, str], suite: str | None = None
) -> list[str]:
    """The pairs of ``members`` to show: ``wanted`` None keeps each suite's current version (every version
    of a suite without one), ``all`` everything, else that version. A version no pair has (of ``suite``,
    when given) raises :class:`NotFound` naming the known ones."""
    split = [(m, Keys.split_pair(m)) for m in members]
    if suite is not None:
        split = [(m, p) for m, p in split if p[1] == suite]
    if wanted == ALL_VERSIONS:
        return [m for m, _ in split]
    if wanted is None:
        return [m for m, (_, s, v) in split if s not in current or v == current[s]]
    chosen = [m for m, (_, _, v) in split if v == wanted]
    if not chosen:
        known = sorted({v or LEGACY_VERSION for _, (_, _, v) in split})
        where = f" of suite {suite!r}" if suite is not None else ""
        raise NotFound(
            f"unknown version {wanted or LEGACY_VERSION!r}{where}; known: {', '.join(known) or 'none'}",
            {"known": known},
        )
    return chosen


def _pair_doc(member: str, current: dict[str, str]) -> dict[str, Any]:
    model, suite, version = Keys.split_pair(member)
    return {"model": model, "suite": suite, "version": version, "current": current.get(suite) == version}


async def pairs(request: web.Request) -> web.Response:
    """All-time figures per model × suite × version, ``limit`` pairs from ``offset`` (sorted by model,
    suite, version); each suite's current version unless ``version`` says otherwise (docs/versions.md)."""
    config = request.app[STATS_KEY]
    offset, limit = _page(request, 100)
    wanted = _version_param(request)
    members = sorted(_text(m) for m in await _zmembers(config.client, config.keys.pairs))
    current = await current_versions(config)
    members = select_versions(members, wanted, current)
    page = members[offset : offset + limit]
    figures = await _figures_of(config, [config.keys.all_time(m) for m in page])
    out = []
    for member, fig in zip(page, figures, strict=True):
        out.append({**_pair_doc(member, current), **(fig or _figures({}))})
    return _ok(out, len(members))


async def _zmembers(client: Client, key: str, start: int = 0, end: int = -1) -> list[bytes]:
    """ZRANGE of a sorted set's members; redis-py types replies for decoding clients too, ours give bytes."""
    return cast(list[bytes], await guard(client.zrange(key, start, end)))


async def _latest(config: StatsConfig, index: str, last: int) -> list[int]:
    raw = await _zmembers(config.client, index, -last, -1)
    return sorted(int(float(_text(s))) for s in raw)


async def windows(request: web.Request) -> web.Response:
    """The latest ``last`` windows of ``size`` seconds that hold data, per model × suite (a page of pairs)."""
    config = request.app[STATS_KEY]
    size = _size(request)
    last = _int_param(request, "last", 30, 1, _MAX_WINDOWS)
    offset, limit = _page(request, 50)
    if last * limit > _MAX_POINTS:
        raise BadRequest(
            f"last × limit must be at most {_MAX_POINTS}; got {last} × {limit}",
            [{"path": "$.query.limit", "message": f"last × limit ≤ {_MAX_POINTS}"}],
        )
    wanted = _version_param(request)
    starts = await _latest(config, config.keys.windows(size), last)
    current = await current_versions(config)

    per_start = [
        {_text(m) for m in await guard(config.client.smembers(config.keys.window_pairs(size, s)))}
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
    return _ok({"size": size, "sizes": list(config.windows), "starts": starts, "series": out}, len(everyone))


async def dead_letters(request: web.Request) -> web.Response:
    """Dead-letter counts by kind: all time, and the latest ``last`` windows with dead letters."""
    config = request.app[STATS_KEY]
    size = _size(request)
    last = _int_param(request, "last", 30, 1, _MAX_WINDOWS)
    starts = await _latest(config, config.keys.dead_letter_windows(size), last)
    replies = await _hgetall(
        config, [config.keys.dead_letters_all, *(config.keys.dead_letters(size, s) for s in starts)]
    )
    total = {_text(k): int(v) for k, v in replies[0].items()}
    points = [
        {"start": s, "kinds": {_text(k): int(v) for k, v in raw.items()}}
        for s, raw in zip(starts, replies[1:], strict=True)
    ]
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


def _event_time(doc: dict[str, Any]) -> float:
    try:
        return parse_time(str(doc.get("event_time")))
    except ValueError:
        return 0.0


def _text_param(request: web.Request, name: str) -> str:
    value = request.query.get(name, "")
    if not value:
        raise BadRequest(f"{name} is required", [{"path": f"$.query.{name}", "message": "required"}])
    return value


def _window_start(request: web.Request, size: int) -> int | None:
    """``window``: a window start as epoch seconds or RFC 3339; None when absent (the latest window)."""
    raw = request.query.get("window")
    if raw is None or raw == "":
        return None
    try:
        start = float(raw) if raw.lstrip("-").replace(".", "", 1).isdigit() else parse_time(raw)
    except ValueError:
        start = math.nan
    if not math.isfinite(start) or start % size:
        raise BadRequest(
            f"window must be the start of a {size}-second window (epoch seconds or RFC 3339); got {raw!r}",
            [{"path": "$.query.window", "message": f"a multiple of {size} s"}],
        )
    return int(start)


async def examples(request: web.Request) -> web.Response:
    """The worst (lowest scores first) or a sample of the failed (latest first) results of one window of one pair."""
    config = request.app[STATS_KEY]
    model, suite = _text_param(request, "model"), _text_param(request, "suite")
    kind = request.query.get("kind", "worst")
    if kind not in KINDS:
        raise BadRequest(
            f"kind must be one of {', '.join(KINDS)}; got {kind!r}",
            [{"path": "$.query.kind", "message": "worst or failing"}],
        )
    size = _size(request)
    start = _window_start(request, size)
    pair = await _pair_of(config, model, suite, _version_param(request))
    if start is None:  # the latest window of this pair that has examples (one pipelined read)
        starts = await _latest(config, config.keys.windows(size), _MAX_WINDOWS)

        async def exist() -> list[Any]:
            async with config.client.pipeline(transaction=False) as pipe:
                for candidate in starts:
                    pipe.exists(config.keys.examples(pair, "worst", size, candidate))
                return list(await pipe.execute())

        found = [s for s, n in zip(starts, await guard(exist()) if starts else [], strict=True) if n]
        start = found[-1] if found else None
    out: list[dict[str, Any]] = []
    if start is not None:
        key = config.keys.examples(pair, kind, size, start)
        # a client that does not decode: (member bytes, score) pairs
        raw = cast(list[tuple[bytes, float]], await guard(config.client.zrange(key, 0, -1, withscores=True)))
        out = [e.doc for e in (parse(member, score) for member, score in raw) if e is not None]
        if kind == "failing":  # a sample of the window's failures, listed latest first
            out.sort(key=_event_time, reverse=True)
    version = Keys.split_pair(pair)[2]
    return _ok(
        {
            "model": model,
            "suite": suite,
            "version": version,
            "size": size,
            "window": start,
            "kind": kind,
            "examples": out,
        }
    )


async def _pair_of(config: StatsConfig, model: str, suite: str, wanted: str | None) -> str:
    """The pair of ``model`` × ``suite`` at ``wanted`` (None: the suite's current version, else the version
    before versions); a version the suite never had raises :class:`NotFound` naming the known ones."""
    if wanted is None:
        return Keys.pair_id(model, suite, (await current_versions(config)).get(suite, ""))
    if wanted == ALL_VERSIONS:
        raise BadRequest(
            "version=all needs one version here", [{"path": "$.query.version", "message": "one version"}]
        )
    members = [_text(m) for m in await _zmembers(config.client, config.keys.pairs)]
    select_versions(members, wanted, {}, suite)  # NotFound for a version the suite never had
    return Keys.pair_id(model, suite, wanted)


async def result_by_id(request: web.Request) -> web.Response:
    """A full graded result while it is retained (the redelivery horizon); ``model`` and ``suite`` narrow the search."""
    config = request.app[STATS_KEY]
    result_id = request.match_info["id"]
    model, suite = request.query.get("model"), request.query.get("suite")
    members = sorted(_text(m) for m in await _zmembers(config.client, config.keys.pairs))
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
                    return _ok(orjson.loads(encoded))
    kept = f"{ttl} s (STREAMEVAL_REDELIVERY_TTL_S)" if ttl else "no time: STREAMEVAL_REDELIVERY_TTL_S is 0"
    raise NotRetained(
        f"result {result_id!r} is not retained: full results are kept for {kept}; the worst and "
        "failing results of each window are kept longer, see /api/v1/stats/examples"
    )


async def compare_versions(request: web.Request) -> web.Response:
    """Version ``b`` against version ``a`` of one model × suite on the events both scored (docs/versions.md);
    ``window`` (a window start, ``size`` seconds) narrows it to events of that window."""
    config = request.app[STATS_KEY]
    model, suite = _text_param(request, "model"), _text_param(request, "suite")
    chosen = []
    for side in ("a", "b"):
        raw = _text_param(request, side)
        chosen.append("" if raw == LEGACY_VERSION else raw)
        if raw != LEGACY_VERSION and not (len(raw) == 12 and all(c in "0123456789abcdef" for c in raw)):
            raise BadRequest(
                f"{side} must be a 12-digit hex version or {LEGACY_VERSION!r}; got {raw!r}",
                [{"path": f"$.query.{side}", "message": "a version"}],
            )
    size = _size(request)
    start = _window_start(request, size)
    members = [_text(m) for m in await _zmembers(config.client, config.keys.pairs)]
    mine = [m for m in members if Keys.split_pair(m)[:2] == (model, suite)]
    for version in chosen:
        select_versions(mine, version, {}, suite)  # NotFound naming the known versions
    now = time.time()
    since, until = (None, None) if start is None else (start, start + size)
    (a, names_a), (b, names_b) = [
        await compact_scores(
            config.client,
            config.keys,
            Keys.pair_id(model, suite, v),
            ttl_s=config.compare_ttl_s,
            now=now,
            since=since,
            until=until,
        )
        for v in chosen
    ]
    loop = asyncio.get_running_loop()  # 100 k events a side: ~0.3 s of CPU, off the event loop's thread
    result = await loop.run_in_executor(
        None, lambda: compare(a, b, names_a=names_a, names_b=names_b, labels=(chosen[0], chosen[1]))
    )
    if not config.compare_ttl_s:
        result["reason"] = "per-event scores are not kept (STREAMEVAL_COMPARE_TTL_S is 0)"
    return _ok({"model": model, "suite": suite, "size": size, "window": start, **result})


async def human(request: web.Request) -> web.Response:
    """Agreement with people of one model × suite (docs/feedback.md): all time with each judge's calibration
    (isotonic map and suggested weight), or one window (``window``, with ``size``)."""
    config = request.app[STATS_KEY]
    model, suite = _text_param(request, "model"), _text_param(request, "suite")
    size = _size(request)
    start = _window_start(request, size)
    pair = await _pair_of(config, model, suite, _version_param(request))  # the current version by default
    labels = config.label_store()
    if start is None:
        rows = (await labels.rows([pair]))[pair]
        agreement = human_agreement(rows, labels.layouts)
        tuned = calibration(rows, labels.layouts).as_dict()
    else:
        rows = (await labels.rows([pair], size, start))[pair]
        agreement, tuned = human_agreement(rows, labels.layouts), None
    return _ok(
        {
            "model": model,
            "suite": suite,
            "version": Keys.split_pair(pair)[2],
            "size": size if start is not None else None,
            "window": start,
            "agreement": agreement.model_dump(mode="json") if agreement is not None else None,
            "calibration": tuned,
        }
    )


def _gated(
    handler: Callable[[web.Request], Awaitable[web.Response]],
) -> Callable[[web.Request], Awaitable[web.Response]]:
    async def gated(request: web.Request) -> web.Response:
        async with request.app[STATS_KEY].gate:
            return await handler(request)

    return gated


def routes() -> list[web.RouteDef]:
    return [
        web.get("/api/v1/stats/pairs", _gated(pairs)),
        web.get("/api/v1/stats/windows", _gated(windows)),
        web.get("/api/v1/stats/deadletters", _gated(dead_letters)),
        web.get("/api/v1/stats/examples", _gated(examples)),
        web.get("/api/v1/stats/compare", _gated(compare_versions)),
        web.get("/api/v1/stats/human", _gated(human)),
        web.get("/api/v1/results/{id}", _gated(result_by_id)),
        web.get("/api/v1/alerts", alerts),
    ]
