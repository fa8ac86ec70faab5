"""Version comparison in the web app: ``GET /api/v1/stats/compare`` (docs/versions.md) and its part of the
OpenAPI document. Served by every web app, whatever the suite file (:func:`compare_feature`; the
composition root adds it): an API process may read the compact scores a worker with another configuration
kept."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from aiohttp import web

from ...api import WebFeature
from ...api._errors import BadRequest
from ...api._openapi_parts import MODEL_SUITE, SIZE, UNAVAILABLE, envelope, error, json_content, nullable
from ...api._reads import (
    LEGACY_VERSION,
    STATS_KEY,
    gated,
    ok,
    select_versions,
    size_param,
    text,
    text_param,
    window_start,
    zmembers,
)
from ...keyspace import Keys
from ._models import models_side_by_side
from ._recorder import DEFAULT_TTL_S, compact_scores
from ._scores import compare, compare_slices

__all__ = ["PATHS", "compare_feature"]

#: how long per-version compact scores are kept (what the reads ask for)
_TTL_KEY: web.AppKey[int] = web.AppKey("compare_ttl_s", int)


async def compare_versions(request: web.Request) -> web.Response:
    """Version ``b`` against version ``a`` of one model × suite on the events both scored (docs/versions.md);
    ``window`` (a window start, ``size`` seconds) narrows it to events of that window; ``dimension`` adds the
    comparison per value of that slice dimension, ``value`` compares that slice's events only."""
    config, ttl_s = request.app[STATS_KEY], request.app[_TTL_KEY]
    model, suite = text_param(request, "model"), text_param(request, "suite")
    chosen = []
    for side in ("a", "b"):
        raw = text_param(request, side)
        chosen.append("" if raw == LEGACY_VERSION else raw)
        if raw != LEGACY_VERSION and not (len(raw) == 12 and all(c in "0123456789abcdef" for c in raw)):
            raise BadRequest(
                f"{side} must be a 12-digit hex version or {LEGACY_VERSION!r}; got {raw!r}",
                [{"path": f"$.query.{side}", "message": "a version"}],
            )
    size = size_param(request)
    start = window_start(request, size)
    dimension, value = request.query.get("dimension") or None, request.query.get("value")
    if dimension is not None and (len(dimension) > 64 or not dimension.strip()):
        raise BadRequest(
            "dimension is a slice dimension's name", [{"path": "$.query.dimension", "message": "a name"}]
        )
    if value is not None and (dimension is None or not value or len(value) > 128):
        raise BadRequest(
            "value is a slice value (1-128 characters) of the dimension named by dimension",
            [{"path": "$.query.value", "message": "a slice value, with dimension"}],
        )
    members = [text(m) for m in await zmembers(config.client, config.keys.pairs)]
    mine = [m for m in members if Keys.split_pair(m)[:2] == (model, suite)]
    for version in chosen:
        select_versions(mine, version, {}, suite)  # NotFound naming the known versions
    now = time.time()
    since, until = (None, None) if start is None else (start, start + size)
    kept: list[dict[str, dict[str, str]]] = [{}, {}]
    (a, names_a), (b, names_b) = [
        await compact_scores(
            config.client,
            config.keys,
            Keys.pair_id(model, suite, v),
            ttl_s=ttl_s,
            now=now,
            since=since,
            until=until,
            slices=kept[side] if dimension is not None else None,
        )
        for side, v in enumerate(chosen)
    ]
    labels = (chosen[0], chosen[1])
    sliced: dict[str, Any] = {}
    of: dict[str, str] = {}
    if dimension is not None:
        # an event's value: version a's record of it, else b's (the same event: the same metadata)
        of.update((i, v[dimension]) for i, v in kept[1].items() if dimension in v)
        of.update((i, v[dimension]) for i, v in kept[0].items() if dimension in v)
        sliced = {"dimension": dimension}
        if value is not None:
            sliced["value"] = value
            a = {i: r for i, r in a.items() if of.get(i) == value}
            b = {i: r for i, r in b.items() if of.get(i) == value}
        if not of:
            sliced["slices_reason"] = (
                f"no retained event of either version has a value of dimension {dimension!r} "
                "(kept only when the suite file's segments: names it, docs/segments.md)"
            )

    def run() -> dict[str, Any]:
        out = compare(a, b, names_a=names_a, names_b=names_b, labels=labels)
        if dimension is not None and value is None:
            out["slices"] = compare_slices(a, b, of, names_a=names_a, names_b=names_b, labels=labels)
        return out

    loop = asyncio.get_running_loop()  # 100 k events a side: ~0.3 s of CPU, off the event loop's thread
    result = await loop.run_in_executor(None, run)
    if not ttl_s:
        result["reason"] = "per-event scores are not kept (STREAMEVAL_COMPARE_TTL_S is 0)"
    elif "slices_reason" in sliced and value is not None:
        result["reason"] = sliced["slices_reason"]
    return ok({"model": model, "suite": suite, "size": size, "window": start, **sliced, **result})


PATHS: dict[str, Any] = {
    "/api/v1/stats/compare": {
        "get": {
            "operationId": "statsCompare",
            "summary": "version b against version a of one model × suite, on the events both scored (docs/versions.md)",
            "parameters": [
                *MODEL_SUITE,
                {
                    "name": "a",
                    "in": "query",
                    "required": True,
                    "schema": {"type": "string", "pattern": "^([0-9a-f]{12}|legacy)$"},
                },
                {
                    "name": "b",
                    "in": "query",
                    "required": True,
                    "schema": {"type": "string", "pattern": "^([0-9a-f]{12}|legacy)$"},
                },
                SIZE,
                {
                    "name": "window",
                    "in": "query",
                    "required": False,
                    "schema": {"type": "string"},
                    "description": "a window start (epoch seconds or RFC 3339): only events of that window (default: every retained event)",
                },
                {
                    "name": "dimension",
                    "in": "query",
                    "required": False,
                    "schema": {"type": "string"},
                    "description": "a slice dimension of the suite file's segments: (docs/segments.md): `slices` "
                    "holds the comparison per value of it",
                },
                {
                    "name": "value",
                    "in": "query",
                    "required": False,
                    "schema": {"type": "string", "minLength": 1, "maxLength": 128},
                    "description": "with dimension: compare the events of this slice value only",
                },
            ],
            "responses": {
                "200": json_content(
                    envelope(
                        {
                            "type": "object",
                            "required": ["n", "empty", "reason"],
                            "properties": {
                                "dimension": {"type": "string"},
                                "value": {"type": "string"},
                                "slices_reason": {
                                    "type": "string",
                                    "description": "why no event has a value of the dimension",
                                },
                                "slices": {
                                    "type": "array",
                                    "description": "with dimension (and no value): the comparison per value, "
                                    "largest drop of the mean score first",
                                    "items": {
                                        "type": "object",
                                        "required": ["value", "n", "empty"],
                                        "properties": {
                                            "value": {"type": "string"},
                                            "n": {"type": "integer"},
                                            "n_a": {"type": "integer"},
                                            "n_b": {"type": "integer"},
                                            "empty": {"type": "boolean"},
                                            "mean_a": nullable("number"),
                                            "mean_b": nullable("number"),
                                            "mean_diff": nullable("number"),
                                            "ci_low": nullable("number"),
                                            "ci_high": nullable("number"),
                                            "pass_rate_a": nullable("number"),
                                            "pass_rate_b": nullable("number"),
                                            "pass_to_fail": {"type": "integer"},
                                            "fail_to_pass": {"type": "integer"},
                                        },
                                    },
                                },
                                "n": {"type": "integer"},
                                "empty": {"type": "boolean"},
                                "reason": nullable("string", description="why the comparison is empty"),
                                "mean_diff": nullable("number"),
                                "ci_low": nullable("number"),
                                "ci_high": nullable("number"),
                                "pass_to_fail": {"type": "integer"},
                                "fail_to_pass": {"type": "integer"},
                                "pass_to_fail_ids": {"type": "array", "items": {"type": "string"}},
                                "fail_to_pass_ids": {"type": "array", "items": {"type": "string"}},
                                "kappa": nullable("number"),
                                "pearson": nullable("number"),
                                "spearman": nullable("number"),
                                "evaluators": {"type": "object"},
                            },
                        }
                    ),
                    "the comparison",
                ),
                "400": error(
                    "missing model, suite, a or b; a malformed version, window, size, dimension or value"
                ),
                "404": error("503001: the suite never had this version; data.known lists the known ones"),
                **UNAVAILABLE,
            },
        },
    },
    "/api/v1/stats/compare/models": {
        "get": {
            "operationId": "statsCompareModels",
            "summary": "quality per cost: every model of one suite side by side, per slice value of one dimension "
            "on request (docs/usage.md)",
            "parameters": [
                {"name": "suite", "in": "query", "required": True, "schema": {"type": "string"}},
                SIZE,
                {
                    "name": "window",
                    "in": "query",
                    "required": False,
                    "schema": {"type": "string"},
                    "description": "one window start (epoch seconds or RFC 3339); default: the latest `last`",
                },
                {
                    "name": "last",
                    "in": "query",
                    "required": False,
                    "schema": {"type": "integer", "minimum": 1},
                },
                {
                    "name": "dimension",
                    "in": "query",
                    "required": False,
                    "schema": {"type": "string"},
                    "description": "a slice dimension of the suite file's segments: a row per model and value",
                },
            ],
            "responses": {
                "200": json_content(
                    envelope(
                        {
                            "type": "object",
                            "required": ["suite", "size", "windows", "rows"],
                            "properties": {
                                "suite": {"type": "string"},
                                "version": nullable("string"),
                                "size": {"type": "integer"},
                                "windows": {"type": "array", "items": {"type": "integer"}},
                                "rows": {
                                    "type": "array",
                                    "items": {
                                        "type": "object",
                                        "required": ["model", "count", "pass_rate", "mean", "cost_per_1000"],
                                        "properties": {
                                            "model": {"type": "string"},
                                            "value": {"type": "string"},
                                            "count": {"type": "integer"},
                                            "pass_rate": nullable("number"),
                                            "mean": nullable("number"),
                                            "cost_per_1000": nullable(
                                                "number",
                                                description="per 1,000 priced events; null: none priced",
                                            ),
                                            "currency": nullable("string"),
                                            "priced": {"type": "integer"},
                                            "unpriced": {"type": "integer"},
                                        },
                                    },
                                },
                            },
                        }
                    ),
                    "the models side by side",
                ),
                "400": error("missing suite; a malformed window, size, last or dimension"),
                **UNAVAILABLE,
            },
        },
    },
}


def compare_feature(ttl_s: int | None = None) -> WebFeature:
    """The comparison read of compact scores kept ``ttl_s`` (None: the default, as ``STREAMEVAL_COMPARE_TTL_S``
    unset), its path after the examples' in the OpenAPI document."""
    return WebFeature(
        [
            web.get("/api/v1/stats/compare", gated(compare_versions)),
            web.get("/api/v1/stats/compare/models", gated(models_side_by_side)),
        ],
        openapi_paths=PATHS,
        openapi_after="/api/v1/stats/deadletters",
        state={_TTL_KEY: DEFAULT_TTL_S if ttl_s is None else ttl_s},
    )
