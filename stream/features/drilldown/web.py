"""The drill-down examples in the web app: ``GET /api/v1/stats/examples`` (docs/api.md, "Drill-down examples
and results") and its part of the OpenAPI document. Served by every web app, whatever the suite file
(:func:`examples_feature`; the composition root adds it): an API process may read what a worker with
another configuration kept."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import orjson
from aiohttp import web

from ...api import WebFeature
from ...api._errors import BadRequest
from ...api._openapi_parts import (
    MODEL_SUITE,
    SIZE,
    TIME,
    UNAVAILABLE,
    VERSION,
    envelope,
    error,
    json_content,
    nullable,
)
from ...api._reads import (
    MAX_WINDOWS,
    STATS_KEY,
    StatsConfig,
    gated,
    latest,
    ok,
    pair_of,
    size_param,
    text_param,
    version_param,
    window_start,
)
from ...keyspace import Keys, guard
from ...models import parse_time
from ._examples import KINDS, parse

__all__ = ["PATHS", "examples_feature"]


async def examples(request: web.Request) -> web.Response:
    """The worst (lowest scores first) or a sample of the failed (latest first) results of one window of one pair."""
    config = request.app[STATS_KEY]
    model, suite = text_param(request, "model"), text_param(request, "suite")
    kind = request.query.get("kind", "worst")
    if kind not in KINDS:
        raise BadRequest(
            f"kind must be one of {', '.join(KINDS)}; got {kind!r}",
            [{"path": "$.query.kind", "message": "worst or failing"}],
        )
    size = size_param(request)
    start = window_start(request, size)
    pair = await pair_of(config, model, suite, version_param(request))
    if start is None:  # the latest window of this pair that has examples (one pipelined read)
        starts = await latest(config, config.keys.windows(size), MAX_WINDOWS)

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
    return ok(
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


def _event_time(doc: dict[str, Any]) -> float:
    try:
        return parse_time(str(doc.get("event_time")))
    except ValueError:
        return 0.0


EXAMPLE: dict[str, Any] = {
    "type": "object",
    "required": ["id", "score", "passed", "grade", "evaluators"],
    "description": "a compact graded result (texts cut at 400 characters)",
    "properties": {
        "id": {"type": "string"},
        "score": {"type": "number"},
        "passed": {"type": "boolean"},
        "grade": {"type": "string"},
        "threshold": {"type": "number"},
        "category": nullable("string"),
        "event_time": TIME,
        "latency_ms": {"type": "number"},
        "evaluators": {"type": "array", "items": {"type": "object"}},
        "failed_gates": {"type": "array", "items": {"type": "string"}},
        "reason": {"type": "string"},
        "judge": {"type": "object"},
    },
}
PATHS: dict[str, Any] = {
    "/api/v1/stats/examples": {
        "get": {
            "operationId": "statsExamples",
            "summary": "the lowest-scored results or a sample of the failed ones, kept for one window of one model × suite",
            "parameters": [
                *MODEL_SUITE,
                SIZE,
                {
                    "name": "window",
                    "in": "query",
                    "required": False,
                    "schema": {"type": "string"},
                    "description": "the window's start, epoch seconds or RFC 3339 (default: the pair's latest window with examples)",
                },
                {
                    "name": "kind",
                    "in": "query",
                    "required": False,
                    "schema": {"type": "string", "enum": ["worst", "failing"]},
                    "description": "worst: lowest score first (default); failing: a sample of the failed results, latest first",
                },
                VERSION,
            ],
            "responses": {
                "200": json_content(
                    envelope(
                        {
                            "type": "object",
                            "required": ["model", "suite", "size", "window", "kind", "examples"],
                            "properties": {
                                "model": {"type": "string"},
                                "suite": {"type": "string"},
                                "size": {"type": "integer"},
                                "version": {"type": "string"},
                                "window": nullable(
                                    "integer", description="null when the pair has no examples"
                                ),
                                "kind": {"type": "string", "enum": ["worst", "failing"]},
                                "examples": {"type": "array", "items": EXAMPLE},
                            },
                        }
                    ),
                    "examples",
                ),
                "400": error(
                    "missing model or suite, unknown kind, not a window start, not a configured size, or a malformed version"
                ),
                "404": error("503001: the suite never had this version; data.known lists the known ones"),
                **UNAVAILABLE,
            },
        },
    },
}


#: windows of each size ``GET /api/v1/results/{id}`` searches for an example (the latest ones)
FIND_WINDOWS = 24
#: most pairs it searches (more: only when the request names the model and suite)
FIND_PAIRS = 25


async def find_example(config: StatsConfig, pairs: Sequence[str], result_id: str) -> dict[str, Any] | None:
    """A result kept as one of the latest windows' examples (``GET /api/v1/results/{id}`` once the broker has the
    result and its stored copy is gone): the compact result, with ``example`` saying where it was found."""
    if not pairs or len(pairs) > FIND_PAIRS:
        return None
    sizes = config.windows
    starts = [await latest(config, config.keys.windows(size), FIND_WINDOWS) for size in sizes]
    where = [
        (pair, size, start, kind)
        for pair in pairs
        for size, found in zip(sizes, starts, strict=True)
        for start in reversed(found)
        for kind in KINDS
    ]
    if not where:
        return None

    async def read() -> list[Any]:
        async with config.client.pipeline(transaction=False) as pipe:
            for pair, size, start, kind in where:
                pipe.zrange(config.keys.examples(pair, kind, size, start), 0, -1, withscores=True)
            return list(await pipe.execute())

    needle = orjson.dumps(result_id)
    for (_, size, start, kind), members in zip(where, await guard(read()), strict=True):
        for member, score in members:
            if needle not in member:  # cheap before parsing
                continue
            example = parse(member, score)
            if example is not None and example.doc.get("id") == result_id:
                return {**example.doc, "example": {"size": size, "window": start, "kind": kind}}
    return None


def examples_feature() -> WebFeature:
    """The examples read, its path after the dead letters' in the OpenAPI document; the results API's lookup
    in the windows' examples."""
    return WebFeature(
        [web.get("/api/v1/stats/examples", gated(examples))],
        openapi_paths=PATHS,
        openapi_after="/api/v1/stats/deadletters",
        find_result=find_example,
    )
