"""What the dashboard's reads share, the core's (streameval.api._stats) and the features' (their ``web``
modules): where the aggregates live (:class:`StatsConfig`, under :data:`STATS_KEY`), the query parameters
(window size, page, version, window start), the choice of a model × suite's version, the one-read-at-a-time
gate, and the response envelope."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, cast

import orjson
from aiohttp import web

from ..keyspace import Client, Keys, guard
from ..models import parse_time
from ._errors import BadRequest, NotFound

__all__ = [
    "ALL_VERSIONS",
    "LEGACY_VERSION",
    "MAX_WINDOWS",
    "STATS_KEY",
    "StatsConfig",
    "current_versions",
    "gated",
    "int_param",
    "latest",
    "ok",
    "page_param",
    "pair_of",
    "select_versions",
    "size_param",
    "text",
    "text_param",
    "version_param",
    "window_start",
    "zmembers",
]


class StatsConfig:
    """Where the aggregates live: the Redis client, key prefix and the configured window sizes."""

    def __init__(
        self,
        client: Client,
        prefix: str,
        windows: tuple[int, ...],
        redelivery_ttl_s: int = 3600,
        redact_result: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
        find_result: Sequence[Callable[[Any, Sequence[str], str], Awaitable[dict[str, Any] | None]]] = (),
    ) -> None:
        self.client, self.prefix, self.windows = client, prefix, windows
        self.redelivery_ttl_s = redelivery_ttl_s  # how long full results are kept (GET /api/v1/results/{id})
        # a stored result's texts as they may be shown (redaction, docs/redact.md); None: as stored
        self.redact_result = redact_result
        # the features' lookups of a result no stored copy holds (WebFeature.find_result), in order
        self.find_result = tuple(find_result)
        self.keys = Keys(prefix)
        # one stats read at a time: others queue here, not in the event loop ahead of /health
        self.gate = asyncio.Semaphore(1)


STATS_KEY: web.AppKey[StatsConfig] = web.AppKey("stats", StatsConfig)


#: most windows one read goes back
MAX_WINDOWS = 240
#: most pairs in one page
_MAX_LIMIT = 500


def text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def int_param(request: web.Request, name: str, default: int, low: int, high: int) -> int:
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


def size_param(request: web.Request) -> int:
    config = request.app[STATS_KEY]
    size = int_param(request, "size", config.windows[0], 1, 10**9)
    if size not in config.windows:
        raise BadRequest(
            f"size must be a configured window size ({', '.join(map(str, config.windows))}); got {size}",
            [{"path": "$.query.size", "message": "not a configured window size"}],
        )
    return size


def page_param(request: web.Request, default: int) -> tuple[int, int]:
    return int_param(request, "offset", 0, 0, 10**9), int_param(request, "limit", default, 1, _MAX_LIMIT)


def ok(data: Any, total: int | None = None) -> web.Response:
    headers = {"X-Total-Count": str(total)} if total is not None else None
    return web.Response(
        body=orjson.dumps({"code": 200, "data": data}), content_type="application/json", headers=headers
    )


#: ``version=`` values besides a version hash: every version, and the figures from before versions
ALL_VERSIONS, LEGACY_VERSION = "all", "legacy"


async def current_versions(config: StatsConfig) -> dict[str, str]:
    """suite -> the version the live workers run (they write it at start: streameval.versionstore)."""
    raw = await guard(config.client.hgetall(config.keys.current_versions))
    return {text(k): text(v) for k, v in raw.items()}


def version_param(request: web.Request) -> str | None:
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


async def zmembers(client: Client, key: str, start: int = 0, end: int = -1) -> list[bytes]:
    """ZRANGE of a sorted set's members; redis-py types replies for decoding clients too, ours give bytes."""
    return cast(list[bytes], await guard(client.zrange(key, start, end)))


async def latest(config: StatsConfig, index: str, last: int) -> list[int]:
    raw = await zmembers(config.client, index, -last, -1)
    return sorted(int(float(text(s))) for s in raw)


def text_param(request: web.Request, name: str) -> str:
    value = request.query.get(name, "")
    if not value:
        raise BadRequest(f"{name} is required", [{"path": f"$.query.{name}", "message": "required"}])
    return value


def window_start(request: web.Request, size: int) -> int | None:
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


async def pair_of(config: StatsConfig, model: str, suite: str, wanted: str | None) -> str:
    """The pair of ``model`` × ``suite`` at ``wanted`` (None: the suite's current version, else the version
    before versions); a version the suite never had raises :class:`NotFound` naming the known ones."""
    if wanted is None:
        return Keys.pair_id(model, suite, (await current_versions(config)).get(suite, ""))
    if wanted == ALL_VERSIONS:
        raise BadRequest(
            "version=all needs one version here", [{"path": "$.query.version", "message": "one version"}]
        )
    members = [text(m) for m in await zmembers(config.client, config.keys.pairs)]
    select_versions(members, wanted, {}, suite)  # NotFound for a version the suite never had
    return Keys.pair_id(model, suite, wanted)


def gated(
    handler: Callable[[web.Request], Awaitable[web.Response]],
) -> Callable[[web.Request], Awaitable[web.Response]]:
    async def gated(request: web.Request) -> web.Response:
        async with request.app[STATS_KEY].gate:
            return await handler(request)

    return gated
