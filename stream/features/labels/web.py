"""Agreement with people in the web app: ``GET /api/v1/stats/human`` (docs/feedback.md) and its part of the
OpenAPI document. Served by every web app, whatever the suite file (:func:`human_feature`; the composition
root adds it): an API process may read the label rows workers with another configuration joined."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from ...api import WebFeature
from ...api._openapi_parts import MODEL_SUITE, SIZE, UNAVAILABLE, envelope, error, json_content, nullable
from ...api._reads import (
    STATS_KEY,
    StatsConfig,
    gated,
    ok,
    pair_of,
    size_param,
    text_param,
    version_param,
    window_start,
)
from ...keyspace import Keys
from ._figures import calibration, human_agreement
from ._store import LabelStore

__all__ = ["PATHS", "human_feature"]


class _Labels:
    """The joined human labels, read only: built at the first read, on the app's Redis client."""

    def __init__(self) -> None:
        self._store: LabelStore | None = None

    def store(self, config: StatsConfig) -> LabelStore:
        if self._store is None:
            self._store = LabelStore(config.client, config.keys, windows=config.windows)
        return self._store


_LABELS: web.AppKey[_Labels] = web.AppKey("human_labels", _Labels)


async def human(request: web.Request) -> web.Response:
    """Agreement with people of one model × suite (docs/feedback.md): all time with each judge's calibration
    (isotonic map and suggested weight), or one window (``window``, with ``size``)."""
    config = request.app[STATS_KEY]
    model, suite = text_param(request, "model"), text_param(request, "suite")
    size = size_param(request)
    start = window_start(request, size)
    pair = await pair_of(config, model, suite, version_param(request))  # the current version by default
    labels = request.app[_LABELS].store(config)
    if start is None:
        rows = (await labels.rows([pair]))[pair]
        agreement = human_agreement(rows, labels.layouts)
        tuned = calibration(rows, labels.layouts).as_dict()
    else:
        rows = (await labels.rows([pair], size, start))[pair]
        agreement, tuned = human_agreement(rows, labels.layouts), None
    return ok(
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


PATHS: dict[str, Any] = {
    "/api/v1/stats/human": {
        "get": {
            "operationId": "statsHuman",
            "summary": "agreement of the judges, the panel, the result and the rule evaluators with human labels (docs/feedback.md)",
            "parameters": [
                *MODEL_SUITE,
                SIZE,
                {
                    "name": "window",
                    "in": "query",
                    "required": False,
                    "schema": {"type": "string"},
                    "description": "a window's start, epoch seconds or RFC 3339 (default: all time, with calibration)",
                },
            ],
            "responses": {
                "200": json_content(
                    envelope(
                        {
                            "type": "object",
                            "required": ["model", "suite", "size", "window", "agreement", "calibration"],
                            "properties": {
                                "model": {"type": "string"},
                                "suite": {"type": "string"},
                                "size": nullable("integer", description="null: all time"),
                                "window": nullable("integer", description="null: all time"),
                                "agreement": {
                                    "type": ["object", "null"],
                                    "description": "the aggregate's human block (schemas/aggregate.v1.json); null without labels",
                                },
                                "calibration": {
                                    "type": ["object", "null"],
                                    "description": "all time: per judge {n, weight, map: [[judge score, human score], ...]}",
                                },
                            },
                        }
                    ),
                    "agreement",
                ),
                "400": error("missing model or suite, not a window start, or not a configured size"),
                **UNAVAILABLE,
            },
        },
    },
}


def human_feature() -> WebFeature:
    """The agreement read, its path after the comparison's in the OpenAPI document."""
    return WebFeature(
        [web.get("/api/v1/stats/human", gated(human))],
        openapi_paths=PATHS,
        openapi_after="/api/v1/stats/deadletters",
        state={_LABELS: _Labels()},
    )
