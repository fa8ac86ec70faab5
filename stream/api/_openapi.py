"""The OpenAPI 3.1 document of the API (evaluators, dashboard reads), served at ``/api/v1/openapi.json``:
the core's paths, and the paths of the web features the app serves, each where it says
(:attr:`~streameval.api.WebFeature.openapi_after`).

Request bodies come from the pydantic models that validate them (``_bodies.py``), so the document
and the validation agree; schemathesis checks the running server against it (tests/api/test_api_schemathesis.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._version import __version__
from ._bodies import CreateBody, TestBody, UpdateBody
from ._feature import WebFeature
from ._openapi_parts import (
    COUNTS,
    FIGURES,
    FULL,
    SIZE,
    SUMMARY,
    TEST_RESULT,
    UNAVAILABLE,
    VERSION,
    envelope,
    error,
    json_content,
    ref,
)

__all__ = ["openapi_document"]

_REF = "#/components/schemas/{model}"


_PAGE = [
    {
        "name": "offset",
        "in": "query",
        "required": False,
        "description": "pairs to skip (default 0)",
        "schema": {"type": "integer", "minimum": 0, "maximum": 1000000000},
    },
    {
        "name": "limit",
        "in": "query",
        "required": False,
        "description": "most pairs in the page (default 100 for pairs, 50 for windows; header X-Total-Count: all pairs)",
        "schema": {"type": "integer", "minimum": 1, "maximum": 500},
    },
]
_LAST = {
    "name": "last",
    "in": "query",
    "required": False,
    "description": "how many windows (default 30)",
    "schema": {"type": "integer", "minimum": 1, "maximum": 240},
}


_ID = {"name": "id", "in": "path", "required": True, "schema": {"type": "string", "minLength": 1}}
_AUTH: list[dict[str, list[str]]] = [{"bearerAuth": []}]
_WRITE_ERRORS = {
    "401": error("missing or wrong bearer token"),
    "403": error("preset, or writes disabled (no token configured)"),
    "413": error("the body is larger than 512 KiB"),
}


def _composed(paths: dict[str, Any], features: Sequence[WebFeature]) -> dict[str, Any]:
    """``paths`` with each feature's paths after its ``openapi_after`` (after those of the features before
    it with the same anchor), or at the end (no anchor, or one the document lacks)."""
    items = list(paths.items())
    last: dict[str, str] = {}  # anchor -> the last path put after it
    for feature in features:
        added = list(feature.openapi_paths.items())
        anchor = feature.openapi_after
        if anchor is None or not added:
            items += added
            continue
        after = last.get(anchor, anchor)
        at = next((i + 1 for i, (path, _) in enumerate(items) if path == after), len(items))
        items[at:at] = added
        last[anchor] = added[-1][0]
    composed: dict[str, Any] = {}
    for path, item in items:
        composed[path] = item
    return composed


def openapi_document(features: Sequence[WebFeature] = ()) -> dict[str, Any]:
    """The document of the core's paths and those of ``features`` (the web features the app serves)."""
    components: dict[str, Any] = {}

    def body(model: type[Any]) -> dict[str, Any]:
        schema = model.model_json_schema(ref_template=_REF)
        components.update(schema.pop("$defs", {}))
        components[model.__name__] = schema
        return {"required": True, "content": {"application/json": {"schema": ref(model.__name__)}}}

    paths: dict[str, Any] = {
        "/api/v1/evaluators": {
            "get": {
                "operationId": "listEvaluators",
                "summary": "presets and custom evaluators",
                "parameters": [
                    {
                        "name": "type",
                        "in": "query",
                        "required": False,
                        "schema": {"type": "string", "enum": ["preset", "code", "llm", "composite"]},
                    }
                ],
                "responses": {
                    "200": json_content(
                        envelope({"type": "array", "items": ref("EvaluatorSummary")}), "evaluators"
                    ),
                    "400": error("bad type filter"),
                    **UNAVAILABLE,
                },
            },
            "post": {
                "operationId": "createEvaluator",
                "summary": "create a code evaluator",
                "security": _AUTH,
                "requestBody": body(CreateBody),
                "responses": {
                    "201": {
                        **json_content(envelope(ref("Evaluator")), "created"),
                        "links": {
                            "GetEvaluator": {
                                "operationId": "getEvaluator",
                                "parameters": {"id": "$response.body#/data/id"},
                            },
                            "UpdateEvaluator": {
                                "operationId": "updateEvaluator",
                                "parameters": {"id": "$response.body#/data/id"},
                            },
                            "TestEvaluator": {
                                "operationId": "testEvaluator",
                                "parameters": {"id": "$response.body#/data/id"},
                            },
                            "DeleteEvaluator": {
                                "operationId": "deleteEvaluator",
                                "parameters": {"id": "$response.body#/data/id"},
                            },
                        },
                    },
                    "400": error(
                        "invalid input (not strict JSON, code over the size limit, code that does not "
                        "compile), or a type not supported yet"
                    ),
                    "409": error("name taken, or the registry holds its most evaluators"),
                    **_WRITE_ERRORS,
                    **UNAVAILABLE,
                },
            },
        },
        "/api/v1/evaluators/presets": {
            "get": {
                "operationId": "listPresets",
                "summary": "the built-in evaluators, with config and params schema",
                "responses": {
                    "200": json_content(envelope({"type": "array", "items": ref("Evaluator")}), "presets")
                },
            },
        },
        "/api/v1/evaluators/{id}": {
            "parameters": [_ID],
            "get": {
                "operationId": "getEvaluator",
                "summary": "one evaluator",
                "responses": {
                    "200": json_content(envelope(ref("Evaluator")), "the evaluator"),
                    "404": error("503001: evaluator does not exist"),
                    **UNAVAILABLE,
                },
            },
            "put": {
                "operationId": "updateEvaluator",
                "summary": "update a custom evaluator (presets: 403)",
                "security": _AUTH,
                "requestBody": body(UpdateBody),
                "responses": {
                    "200": json_content(envelope(ref("Evaluator")), "updated (version + 1)"),
                    "400": error("invalid input (not strict JSON, code over the size limit)"),
                    "404": error("503001: evaluator does not exist"),
                    "409": error("name taken"),
                    **_WRITE_ERRORS,
                    **UNAVAILABLE,
                },
            },
            "delete": {
                "operationId": "deleteEvaluator",
                "summary": "delete a custom evaluator (presets: 403)",
                "security": _AUTH,
                "responses": {
                    "200": json_content(
                        envelope(
                            {
                                "type": "object",
                                "required": ["id", "deleted"],
                                "properties": {"id": {"type": "string"}, "deleted": {"const": True}},
                            }
                        ),
                        "deleted",
                    ),
                    "404": error("503001: evaluator does not exist"),
                    **_WRITE_ERRORS,
                    **UNAVAILABLE,
                },
            },
        },
        "/api/v1/evaluators/{id}/test": {
            "parameters": [_ID],
            "post": {
                "operationId": "testEvaluator",
                "summary": "run an evaluator on one example",
                "security": _AUTH,
                "requestBody": body(TestBody),
                "responses": {
                    "200": json_content(envelope(ref("TestResult")), "the verdict"),
                    "400": error("invalid input or preset params"),
                    "404": error("503001: evaluator does not exist"),
                    "422": json_content(
                        {**ref("Error")}, "503002: evaluator execution failed; data is the TestResult"
                    ),
                    **_WRITE_ERRORS,
                    **UNAVAILABLE,
                },
            },
        },
        "/api/v1/stats/pairs": {
            "get": {
                "operationId": "statsPairs",
                "summary": "all-time figures per model × suite × version, one page",
                "parameters": [*_PAGE, VERSION],
                "responses": {
                    "200": json_content(envelope({"type": "array", "items": ref("PairFigures")}), "figures"),
                    "400": error("offset or limit out of range, or a malformed version"),
                    "404": error("503001: no pair has this version; data.known lists the known ones"),
                    **UNAVAILABLE,
                },
            },
        },
        "/api/v1/stats/windows": {
            "get": {
                "operationId": "statsWindows",
                "summary": "the latest windows holding data, per model × suite (a page of pairs)",
                "parameters": [SIZE, _LAST, *_PAGE, VERSION],
                "responses": {
                    "200": json_content(
                        envelope(
                            {
                                "type": "object",
                                "required": ["size", "starts", "series"],
                                "properties": {
                                    "size": {"type": "integer"},
                                    "sizes": {"type": "array", "items": {"type": "integer"}},
                                    "starts": {"type": "array", "items": {"type": "integer"}},
                                    "series": {
                                        "type": "array",
                                        "items": {
                                            "type": "object",
                                            "required": ["model", "suite", "points"],
                                            "properties": {
                                                "model": {"type": "string"},
                                                "suite": {"type": "string"},
                                                "version": {"type": "string"},
                                                "current": {"type": "boolean"},
                                                "points": {
                                                    "type": "array",
                                                    "items": {
                                                        "allOf": [ref("Figures")],
                                                        "required": ["start"],
                                                        "properties": {"start": {"type": "integer"}},
                                                    },
                                                },
                                            },
                                        },
                                    },
                                },
                            }
                        ),
                        "series",
                    ),
                    "400": error(
                        "size is not a configured window size, last or limit out of range, or last × limit over 6000"
                    ),
                    "404": error("503001: no pair has this version; data.known lists the known ones"),
                    **UNAVAILABLE,
                },
            },
        },
        "/api/v1/stats/deadletters": {
            "get": {
                "operationId": "statsDeadLetters",
                "summary": "dead letters by kind: all time and the latest windows",
                "parameters": [SIZE, _LAST],
                "responses": {
                    "200": json_content(
                        envelope(
                            {
                                "type": "object",
                                "required": ["size", "total", "points"],
                                "properties": {
                                    "size": {"type": "integer"},
                                    "total": COUNTS,
                                    "points": {
                                        "type": "array",
                                        "items": {
                                            "type": "object",
                                            "required": ["start", "kinds"],
                                            "properties": {"start": {"type": "integer"}, "kinds": COUNTS},
                                        },
                                    },
                                },
                            }
                        ),
                        "counts",
                    ),
                    "400": error("bad size or last"),
                    **UNAVAILABLE,
                },
            },
        },
        "/api/v1/results/{id}": {
            "get": {
                "operationId": "resultById",
                "summary": "one full graded result while it is retained (the redelivery horizon)",
                "parameters": [
                    {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}},
                    {
                        "name": "model",
                        "in": "query",
                        "required": False,
                        "schema": {"type": "string"},
                        "description": "with suite: search one pair only",
                    },
                    {"name": "suite", "in": "query", "required": False, "schema": {"type": "string"}},
                ],
                "responses": {
                    "200": json_content(
                        envelope(
                            {
                                "type": "object",
                                "description": "graded result v1 (schemas/graded-result.v1.json)",
                            }
                        ),
                        "the result",
                    ),
                    "404": error(
                        "not retained (any more): full results are kept for STREAMEVAL_REDELIVERY_TTL_S"
                    ),
                    **UNAVAILABLE,
                },
            },
        },
        "/api/v1/alerts": {
            "get": {
                "operationId": "recentAlerts",
                "summary": "recent alerts, newest first (empty until alerts are stored)",
                "parameters": [
                    {
                        "name": "limit",
                        "in": "query",
                        "required": False,
                        "schema": {"type": "integer", "minimum": 1, "maximum": 500},
                    }
                ],
                "responses": {
                    "200": json_content(envelope({"type": "array", "items": {"type": "object"}}), "alerts"),
                    "400": error("bad limit"),
                    **UNAVAILABLE,
                },
            },
        },
    }
    components.update(
        {
            "Figures": FIGURES,
            "PairFigures": {
                "allOf": [ref("Figures")],
                "required": ["model", "suite"],
                "properties": {
                    "model": {"type": "string"},
                    "suite": {"type": "string"},
                    "version": {
                        "type": "string",
                        "description": "the suite version; empty: figures from before versions",
                    },
                    "current": {"type": "boolean", "description": "the version live workers run"},
                },
            },
            "EvaluatorSummary": SUMMARY,
            "Evaluator": FULL,
            "TestResult": TEST_RESULT,
            "Error": {
                "type": "object",
                "required": ["code", "message"],
                "properties": {
                    "code": {
                        "type": "integer",
                        "description": "HTTP status, or 503001 (not found) / 503002 (execution failed)",
                    },
                    "message": {"type": "string"},
                    "data": {},
                },
            },
        }
    )
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "streameval evaluator registry",
            "version": __version__,
            "description": "The evaluator registry API. Envelope {code, data}; writes need `Authorization: Bearer $STREAMEVAL_API_TOKEN`.",
        },
        "paths": _composed(paths, features),
        "components": {
            "schemas": components,
            "securitySchemes": {"bearerAuth": {"type": "http", "scheme": "bearer"}},
        },
    }
