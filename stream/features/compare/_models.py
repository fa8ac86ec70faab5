"""Quality per cost: the models of one suite side by side (``GET /api/v1/stats/compare/models``,
docs/versions.md): per model (and per slice value of one dimension) its events, pass rate and mean score,
and what a thousand of its events cost (docs/usage.md), over the same windows. Read from the window hashes
(and the slices' hashes), which keep the usage figures with the rest when the suite file has ``prices:``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aiohttp import web

from ...api._errors import BadRequest
from ...api._reads import (
    MAX_WINDOWS,
    STATS_KEY,
    current_versions,
    int_param,
    latest,
    ok,
    size_param,
    text,
    text_param,
    window_start,
    zmembers,
)
from ...keyspace import Keys, guard
from ...store_codec import hash_fields, slice_figures
from ...usage_figures import usage_of

__all__ = ["models_row", "models_side_by_side"]


def models_row(model: str, fields: Mapping[str, float], value: str | None = None) -> dict[str, Any]:
    """One row of the table: quality and cost of summed window figures (``value``: a slice's)."""
    n = fields.get("count", 0.0)
    usage = usage_of(fields, round(n))
    cost = usage.cost if usage is not None else None
    priced = usage.priced if usage is not None else 0
    return {
        "model": model,
        **({"value": value} if value is not None else {}),
        "count": int(n),
        "pass_rate": min(1.0, fields.get("passes", 0.0) / n) if n else None,
        "mean": fields.get("sum", 0.0) / n if n else None,
        "cost_per_1000": 1000 * cost / priced if cost is not None and priced else None,
        "currency": usage.currency if usage is not None else None,
        "priced": priced,
        "unpriced": int(n) - priced,
    }


def _add(into: dict[str, float], fields: Mapping[str, float]) -> None:
    for name, value in fields.items():
        into[name] = into.get(name, 0.0) + value


async def models_side_by_side(request: web.Request) -> web.Response:
    """Every model of ``suite`` (``version``; default its current one) over its latest ``last`` windows of ``size`` (or one
    ``window``); with ``dimension``, a row per model and value of that slice dimension."""
    config = request.app[STATS_KEY]
    suite = text_param(request, "suite")
    size = size_param(request)
    start = window_start(request, size)
    last = int_param(request, "last", 24, 1, MAX_WINDOWS)
    dimension = request.query.get("dimension") or None
    if dimension is not None and (len(dimension) > 64 or not dimension.strip()):
        raise BadRequest(
            "dimension is a slice dimension's name", [{"path": "$.query.dimension", "message": "a name"}]
        )
    members = [text(m) for m in await zmembers(config.client, config.keys.pairs)]  # by when last seen
    seen = [Keys.split_pair(m)[2] for m in members if Keys.split_pair(m)[1] == suite]
    # the suite's current version (the live worker's), else the version last recorded
    version = (
        request.query.get("version")
        or (await current_versions(config)).get(suite)
        or (seen[-1] if seen else "")
    )
    pairs = sorted(m for m in members if Keys.split_pair(m)[1:] == (suite, version))
    starts = [start] if start is not None else await latest(config, config.keys.windows(size), last)
    rows: list[dict[str, Any]] = []
    if pairs and starts:
        async with config.client.pipeline(transaction=False) as pipe:
            for pair in pairs:
                for s in starts:
                    if dimension is None:
                        pipe.hgetall(config.keys.window(pair, size, s))
                    else:
                        pipe.hgetall(config.keys.slice(pair, dimension, size, s))
            replies = await guard(pipe.execute())
        for i, pair in enumerate(pairs):
            model = Keys.split_pair(pair)[0]
            found = replies[i * len(starts) : (i + 1) * len(starts)]
            if dimension is None:
                total: dict[str, float] = {}
                for reply in found:
                    _add(total, hash_fields(reply or {}))
                if total.get("count"):
                    rows.append(models_row(model, total))
                continue
            by_value: dict[str, dict[str, float]] = {}
            for reply in found:
                for value, fields in slice_figures(reply or {}).items():
                    _add(by_value.setdefault(value, {}), fields)
            rows += [models_row(model, f, v) for v, f in sorted(by_value.items()) if f.get("count")]
    return ok({"suite": suite, "version": version or None, "size": size, "windows": starts, "rows": rows})
