"""Slices in the web app: ``GET /api/v1/stats/segments`` (docs/segments.md) and its part of the OpenAPI
document. Served by every web app, whatever its suite file (streameval.features.web): the dimensions a pair
has are read from Redis (``Keys.slice_dimensions``), not from a suite file."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aiohttp import web

from ...api import WebFeature
from ...api._errors import BadRequest
from ...api._openapi_parts import MODEL_SUITE, SIZE, UNAVAILABLE, VERSION, envelope, error, json_content
from ...api._reads import (
    MAX_WINDOWS,
    STATS_KEY,
    StatsConfig,
    gated,
    int_param,
    latest,
    ok,
    pair_of,
    size_param,
    text,
    text_param,
    version_param,
    window_start,
)
from ...keyspace import Keys, guard
from ...stats import confidence_interval, moments
from ...store_codec import hash_fields
from ._config import OTHER
from ._step import read_slices

__all__ = ["PATHS", "figures", "segments_feature"]


def figures(fields: Mapping[str, float]) -> dict[str, Any]:
    """Count, mean score and pass rate with their 95 % intervals (streameval.stats) of summed figures."""
    n = fields.get("count", 0.0)
    score = moments(n, fields.get("sum", 0.0), fields.get("sumsq", 0.0))
    passes = fields.get("passes", 0.0)
    passed = moments(n, passes, passes)  # each event passes (1) or not (0): sum of squares = sum
    ci, pci = confidence_interval(score, bounds=(0.0, 1.0)), confidence_interval(passed, bounds=(0.0, 1.0))
    return {
        "count": int(n),
        "mean": score.mean if n else None,
        "ci_low": ci[0] if ci else None,
        "ci_high": ci[1] if ci else None,
        "pass_rate": min(1.0, passes / n) if n else None,
        "pass_ci_low": pci[0] if pci else None,
        "pass_ci_high": pci[1] if pci else None,
    }


def _add(into: dict[str, float], fields: Mapping[str, float]) -> None:
    for name in ("count", "sum", "sumsq", "passes"):
        into[name] = into.get(name, 0.0) + fields.get(name, 0.0)


async def segments(request: web.Request) -> web.Response:
    """One model × suite's slices over its latest ``last`` windows of ``size`` (or one ``window``): per
    dimension its values, worst first (furthest below the pair's mean over the same windows), with counts and
    intervals; ``dimension`` narrows to one, ``value`` to one slice with its figures per window."""
    config = request.app[STATS_KEY]
    model, suite = text_param(request, "model"), text_param(request, "suite")
    size = size_param(request)
    start = window_start(request, size)
    last = int_param(request, "last", 30, 1, MAX_WINDOWS)
    wanted, value = request.query.get("dimension") or None, request.query.get("value") or None
    if value is not None and wanted is None:
        raise BadRequest(
            "value needs a dimension", [{"path": "$.query.dimension", "message": "required with value"}]
        )
    pair = await pair_of(config, model, suite, version_param(request))
    starts = [start] if start is not None else await latest(config, config.keys.windows(size), last)
    known = sorted(text(m) for m in await guard(config.client.smembers(config.keys.slice_dimensions(pair))))
    dimensions = [d for d in known if wanted is None or d == wanted]
    overall = await _pair_figures(config, pair, size, starts)
    found = await _slices(config, pair, dimensions, size, starts)
    out: list[dict[str, Any]] = []
    for name in dimensions:
        sums: dict[str, dict[str, float]] = {}
        for by_value in found:
            for v, fields in by_value.get(name, {}).items():
                _add(sums.setdefault(v, {}), fields)
        rows = []
        for v, fields in sums.items():
            if value is not None and v != value:
                continue
            row = {"value": v, **figures(fields)}
            mean = row["mean"]
            row["below"] = (
                overall["mean"] - mean if mean is not None and overall["mean"] is not None else None
            )
            rows.append(row)
        rows.sort(key=lambda r: (-(r["below"] if r["below"] is not None else -2.0), r["value"]))
        out.append(
            {
                "name": name,
                "values": rows,
                "kept": sum(1 for v in sums if not v.startswith("(")),
                "other": int(sums.get(OTHER, {}).get("count", 0.0)),
            }
        )
    data: dict[str, Any] = {
        "model": model,
        "suite": suite,
        "version": Keys.split_pair(pair)[2],
        "size": size,
        "windows": starts,
        "overall": overall,
        "dimensions": out,
    }
    if value is not None and wanted is not None:
        data["series"] = [
            {"start": s, **figures(by_value.get(wanted, {}).get(value, {}))}
            for s, by_value in zip(starts, found, strict=True)
        ]
    return ok(data)


async def _pair_figures(config: StatsConfig, pair: str, size: int, starts: list[int]) -> dict[str, Any]:
    """The pair's own figures over the windows ``starts`` (what its slices are held against)."""
    if not starts:
        return figures({})

    async def read() -> list[Any]:
        async with config.client.pipeline(transaction=False) as pipe:
            for s in starts:
                pipe.hgetall(config.keys.window(pair, size, s))
            return list(await pipe.execute())

    windows = [hash_fields(raw) for raw in await guard(read())]
    total: dict[str, float] = {}
    for fields in windows:
        _add(total, fields)
    return figures(total)


async def _slices(
    config: StatsConfig, pair: str, dimensions: list[str], size: int, starts: list[int]
) -> list[dict[str, dict[str, dict[str, float]]]]:
    """Per window of ``starts``: dimension -> value -> figures."""
    out = []
    for s in starts:  # one pipeline per window: a few dozen windows at most
        [found] = await read_slices(config.client, config.keys, [pair], dimensions, size, s)
        out.append(found)
    return out


_FIGURES = {
    "count": {"type": "integer"},
    **{
        name: {"type": ["number", "null"]}
        for name in ("mean", "ci_low", "ci_high", "pass_rate", "pass_ci_low", "pass_ci_high")
    },
}

PATHS: dict[str, Any] = {
    "/api/v1/stats/segments": {
        "get": {
            "operationId": "statsSegments",
            "summary": "a model × suite's slices (segments:, docs/segments.md): per dimension its values worst first, "
            "with counts and 95 % intervals; one slice's figures per window",
            "parameters": [
                *MODEL_SUITE,
                SIZE,
                VERSION,
                {
                    "name": "window",
                    "in": "query",
                    "required": False,
                    "schema": {"type": "string"},
                    "description": "a window's start, epoch seconds or RFC 3339 (default: the latest `last` windows)",
                },
                {
                    "name": "last",
                    "in": "query",
                    "required": False,
                    "schema": {"type": "integer", "minimum": 1, "maximum": MAX_WINDOWS},
                    "description": "how many of the latest windows (default 30)",
                },
                {
                    "name": "dimension",
                    "in": "query",
                    "required": False,
                    "schema": {"type": "string"},
                    "description": "one dimension (default: every one the pair has)",
                },
                {
                    "name": "value",
                    "in": "query",
                    "required": False,
                    "schema": {"type": "string"},
                    "description": "one value of the dimension: its row and its figures per window (series)",
                },
            ],
            "responses": {
                "200": json_content(
                    envelope(
                        {
                            "type": "object",
                            "required": [
                                "model",
                                "suite",
                                "version",
                                "size",
                                "windows",
                                "overall",
                                "dimensions",
                            ],
                            "properties": {
                                "model": {"type": "string"},
                                "suite": {"type": "string"},
                                "version": {"type": "string"},
                                "size": {"type": "integer"},
                                "windows": {"type": "array", "items": {"type": "integer"}},
                                "overall": {"type": "object", "properties": _FIGURES},
                                "dimensions": {
                                    "type": "array",
                                    "items": {
                                        "type": "object",
                                        "properties": {
                                            "name": {"type": "string"},
                                            "kept": {"type": "integer", "description": "values kept"},
                                            "other": {
                                                "type": "integer",
                                                "description": "events beyond max_values, under (other)",
                                            },
                                            "values": {
                                                "type": "array",
                                                "items": {
                                                    "type": "object",
                                                    "properties": {
                                                        "value": {"type": "string"},
                                                        "below": {
                                                            "type": ["number", "null"],
                                                            "description": "the pair's mean minus this slice's",
                                                        },
                                                        **_FIGURES,
                                                    },
                                                },
                                            },
                                        },
                                    },
                                },
                                "series": {
                                    "type": "array",
                                    "description": "with value: the slice per window",
                                    "items": {
                                        "type": "object",
                                        "properties": {"start": {"type": "integer"}, **_FIGURES},
                                    },
                                },
                            },
                        }
                    ),
                    "the slices",
                ),
                "400": error("missing model or suite, value without dimension, or not a configured size"),
                "404": error("503001: the suite never had this version; data.known lists the known ones"),
                **UNAVAILABLE,
            },
        },
    },
}


def segments_feature() -> WebFeature:
    """The slices read, its path after agreement with people's in the OpenAPI document."""
    return WebFeature(
        [web.get("/api/v1/stats/segments", gated(segments))],
        openapi_paths=PATHS,
        openapi_after="/api/v1/stats/deadletters",
    )
