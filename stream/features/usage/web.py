"""Budgets in the web app: ``GET /api/v1/stats/budgets`` (docs/usage.md), each budget's period and spend so
far as the checking worker last saw them. Served by every web app, whatever its suite file
(streameval.features.web): the status is read from Redis, not from a suite file; empty when no worker checks
budgets."""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web

from ...api import WebFeature
from ...api._openapi_parts import UNAVAILABLE, envelope, json_content
from ...api._reads import STATS_KEY, gated, ok
from ...keyspace import guard
from ._window import status_key

__all__ = ["PATHS", "budgets_feature"]


async def budgets(request: web.Request) -> web.Response:
    """Every budget's status, by name."""
    config = request.app[STATS_KEY]
    found = await guard(config.client.hgetall(status_key(config.keys)))
    rows = sorted((orjson.loads(v) for v in found.values()), key=lambda r: str(r.get("name")))
    return ok({"budgets": rows})


PATHS: dict[str, Any] = {
    "/api/v1/stats/budgets": {
        "get": {
            "operationId": "statsBudgets",
            "summary": "each spend budget's period, spend so far, limit and share (docs/usage.md)",
            "responses": {
                "200": json_content(
                    envelope(
                        {
                            "type": "object",
                            "required": ["budgets"],
                            "properties": {"budgets": {"type": "array", "items": {"type": "object"}}},
                        }
                    ),
                    "the budgets, by name",
                ),
                **UNAVAILABLE,
            },
        },
    },
}


def budgets_feature() -> WebFeature:
    """The budgets' read, its path after the comparison's in the OpenAPI document."""
    return WebFeature(
        [web.get("/api/v1/stats/budgets", gated(budgets))],
        openapi_paths=PATHS,
        openapi_after="/api/v1/stats/deadletters",
    )
