"""The OpenAPI 3.1 document of the API (evaluators, dashboard reads), served at ``/api/v1/openapi.json``.

Request bodies come from the pydantic models that validate them (``_bodies.py``), so the document
and the validation agree; schemathesis checks the running server against it (tests/api/test_api_schemathesis.py).
"""

from __future__ import annotations

from typing import Any

from .._version import __version__
from ._bodies import CreateBody, TestBody, UpdateBody

__all__ = ["openapi_document"]

_REF = "#/components/schemas/{model}"


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _nullable(kind: str, **extra: Any) -> dict[str, Any]:
    return {"type": [kind, "null"], **extra}


_TIME = {"type": "string", "format": "date-time"}
_SUMMARY: dict[str, Any] = {
    "type": "object",
    "required": ["id", "name", "description", "type", "isPreset", "createdAt", "updatedAt"],
    "properties": {
        "id": {"type": "string", "description": "a preset's name, or a custom evaluator's UUID"},
        "name": {"type": "string"},
        "description": _nullable("string"),
        "type": {"type": "string", "enum": ["preset", "code", "llm", "composite"]},
        "isPreset": {"type": "boolean"},
        "language": {"type": ["string", "null"], "enum": ["python", "nodejs", None]},
        "version": _nullable("integer", description="custom evaluators: +1 on every update"),
        "createdAt": _TIME,
        "updatedAt": _TIME,
    },
}
_FULL: dict[str, Any] = {
    **_SUMMARY,
    "required": [*_SUMMARY["required"], "config"],
    "properties": {
        **_SUMMARY["properties"],
        "config": {
            "type": "object",
            "description": "preset: {presetType, params}; code: {language, code, timeout}",
        },
        "paramsSchema": {"type": "object", "description": "presets: JSON Schema of their params"},
    },
}
_TEST_RESULT: dict[str, Any] = {
    "type": "object",
    "required": ["passed", "score", "reason", "latencyMs", "error"],
    "properties": {
        "passed": {"type": "boolean"},
        "score": _nullable("number", minimum=0, maximum=1),
        "reason": _nullable("string"),
        "latencyMs": {"type": "number", "minimum": 0},
        "error": _nullable(
            "string", description="error code: execution_failed, timeout, missing_field, internal, ..."
        ),
        "details": _nullable("object"),
        "version": _nullable("string", description="custom evaluators: id@version"),
    },
}


_COUNTS = {"type": "object", "additionalProperties": {"type": "integer", "minimum": 0}}
_FIGURES: dict[str, Any] = {
    "type": "object",
    "required": ["count", "mean", "passRate", "grades", "evaluators", "judges"],
    "properties": {
        "count": {"type": "integer", "minimum": 0},
        "mean": _nullable("number", minimum=0, maximum=1),
        "passRate": _nullable("number", minimum=0, maximum=1),
        "grades": _COUNTS,
        "evaluators": {
            "type": "object",
            "additionalProperties": {
                "type": "object",
                "required": ["count", "mean", "errors"],
                "properties": {
                    "count": {"type": "integer"},
                    "mean": _nullable("number"),
                    "errors": {"type": "integer"},
                },
            },
        },
        "judges": {
            "type": "object",
            "description": "per judge of the panel, scores on 0-10",
            "additionalProperties": {
                "type": "object",
                "required": ["n", "mean", "sd", "calls", "errors", "cacheHits"],
                "properties": {
                    "n": {"type": "integer"},
                    "mean": _nullable("number"),
                    "sd": _nullable("number"),
                    "calls": {"type": "integer"},
                    "errors": {"type": "integer"},
                    "cacheHits": {"type": "integer"},
                    "tokens": {"type": "integer"},
                    "cost": _nullable("number", description="null without prices"),
                },
            },
        },
        "latencyP50Ms": _nullable("number", description="upper bound of the latency bucket"),
        "latencyP95Ms": _nullable("number", description="upper bound of the latency bucket"),
        "tokens": _COUNTS,
        "cost": _nullable("number", description="judge cost; null without prices"),
        "alpha": _nullable("number", description="Krippendorff's interval alpha of the panel"),
        "pearson": {
            "type": "object",
            "description": '"a|b" -> Pearson r',
            "additionalProperties": _nullable("number"),
        },
        "consistency": _nullable("number", description="repeat-vs-first correlation"),
        "gateFailures": _COUNTS,
        "lateRedirected": {"type": "integer", "minimum": 0},
    },
}
_EXAMPLE: dict[str, Any] = {
    "type": "object",
    "required": ["id", "score", "passed", "grade", "evaluators"],
    "description": "a compact graded result (texts cut at 400 characters)",
    "properties": {
        "id": {"type": "string"},
        "score": {"type": "number"},
        "passed": {"type": "boolean"},
        "grade": {"type": "string"},
        "threshold": {"type": "number"},
        "category": _nullable("string"),
        "event_time": _TIME,
        "latency_ms": {"type": "number"},
        "evaluators": {"type": "array", "items": {"type": "object"}},
        "failed_gates": {"type": "array", "items": {"type": "string"}},
        "reason": {"type": "string"},
        "judge": {"type": "object"},
    },
}
_VERSION = {
    "name": "version",
    "in": "query",
    "required": False,
    "schema": {"type": "string", "pattern": "^([0-9a-f]{12}|all|legacy)$"},
    "description": "a suite version (docs/versions.md), all, or legacy (figures from before versions); "
    "default: each suite's current version",
}
_SIZE = {
    "name": "size",
    "in": "query",
    "required": False,
    "description": "a configured window size, s (default: the first)",
    "schema": {"type": "integer", "minimum": 1},
}
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


def _envelope(data: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "required": ["code", "data"],
        "properties": {"code": {"type": "integer", "const": 200}, "data": data},
    }


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _error(description: str) -> dict[str, Any]:
    return _json(_ref("Error"), description)


_ID = {"name": "id", "in": "path", "required": True, "schema": {"type": "string", "minLength": 1}}
_AUTH: list[dict[str, list[str]]] = [{"bearerAuth": []}]
_WRITE_ERRORS = {
    "401": _error("missing or wrong bearer token"),
    "403": _error("preset, or writes disabled (no token configured)"),
    "413": _error("the body is larger than 512 KiB"),
}
_UNAVAILABLE = {"503": _error("Redis unavailable")}


def openapi_document() -> dict[str, Any]:
    components: dict[str, Any] = {}

    def body(model: type[Any]) -> dict[str, Any]:
        schema = model.model_json_schema(ref_template=_REF)
        components.update(schema.pop("$defs", {}))
        components[model.__name__] = schema
        return {"required": True, "content": {"application/json": {"schema": _ref(model.__name__)}}}

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
                    "200": _json(
                        _envelope({"type": "array", "items": _ref("EvaluatorSummary")}), "evaluators"
                    ),
                    "400": _error("bad type filter"),
                    **_UNAVAILABLE,
                },
            },
            "post": {
                "operationId": "createEvaluator",
                "summary": "create a code evaluator",
                "security": _AUTH,
                "requestBody": body(CreateBody),
                "responses": {
                    "201": {
                        **_json(_envelope(_ref("Evaluator")), "created"),
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
                    "400": _error(
                        "invalid input (not strict JSON, code over the size limit, code that does not "
                        "compile), or a type not supported yet"
                    ),
                    "409": _error("name taken, or the registry holds its most evaluators"),
                    **_WRITE_ERRORS,
                    **_UNAVAILABLE,
                },
            },
        },
        "/api/v1/evaluators/presets": {
            "get": {
                "operationId": "listPresets",
                "summary": "the built-in evaluators, with config and params schema",
                "responses": {
                    "200": _json(_envelope({"type": "array", "items": _ref("Evaluator")}), "presets")
                },
            },
        },
        "/api/v1/evaluators/{id}": {
            "parameters": [_ID],
            "get": {
                "operationId": "getEvaluator",
                "summary": "one evaluator",
                "responses": {
                    "200": _json(_envelope(_ref("Evaluator")), "the evaluator"),
                    "404": _error("503001: evaluator does not exist"),
                    **_UNAVAILABLE,
                },
            },
            "put": {
                "operationId": "updateEvaluator",
                "summary": "update a custom evaluator (presets: 403)",
                "security": _AUTH,
                "requestBody": body(UpdateBody),
                "responses": {
                    "200": _json(_envelope(_ref("Evaluator")), "updated (version + 1)"),
                    "400": _error("invalid input (not strict JSON, code over the size limit)"),
                    "404": _error("503001: evaluator does not exist"),
                    "409": _error("name taken"),
                    **_WRITE_ERRORS,
                    **_UNAVAILABLE,
                },
            },
            "delete": {
                "operationId": "deleteEvaluator",
                "summary": "delete a custom evaluator (presets: 403)",
                "security": _AUTH,
                "responses": {
                    "200": _json(
                        _envelope(
                            {
                                "type": "object",
                                "required": ["id", "deleted"],
                                "properties": {"id": {"type": "string"}, "deleted": {"const": True}},
                            }
                        ),
                        "deleted",
                    ),
                    "404": _error("503001: evaluator does not exist"),
                    **_WRITE_ERRORS,
                    **_UNAVAILABLE,
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
                    "200": _json(_envelope(_ref("TestResult")), "the verdict"),
                    "400": _error("invalid input or preset params"),
                    "404": _error("503001: evaluator does not exist"),
                    "422": _json(
                        {**_ref("Error")}, "503002: evaluator execution failed; data is the TestResult"
                    ),
                    **_WRITE_ERRORS,
                    **_UNAVAILABLE,
                },
            },
        },
        "/api/v1/stats/pairs": {
            "get": {
                "operationId": "statsPairs",
                "summary": "all-time figures per model × suite × version, one page",
                "parameters": [*_PAGE, _VERSION],
                "responses": {
                    "200": _json(_envelope({"type": "array", "items": _ref("PairFigures")}), "figures"),
                    "400": _error("offset or limit out of range, or a malformed version"),
                    "404": _error("503001: no pair has this version; data.known lists the known ones"),
                    **_UNAVAILABLE,
                },
            },
        },
        "/api/v1/stats/windows": {
            "get": {
                "operationId": "statsWindows",
                "summary": "the latest windows holding data, per model × suite (a page of pairs)",
                "parameters": [_SIZE, _LAST, *_PAGE, _VERSION],
                "responses": {
                    "200": _json(
                        _envelope(
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
                                                        "allOf": [_ref("Figures")],
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
                    "400": _error(
                        "size is not a configured window size, last or limit out of range, or last × limit over 6000"
                    ),
                    "404": _error("503001: no pair has this version; data.known lists the known ones"),
                    **_UNAVAILABLE,
                },
            },
        },
        "/api/v1/stats/deadletters": {
            "get": {
                "operationId": "statsDeadLetters",
                "summary": "dead letters by kind: all time and the latest windows",
                "parameters": [_SIZE, _LAST],
                "responses": {
                    "200": _json(
                        _envelope(
                            {
                                "type": "object",
                                "required": ["size", "total", "points"],
                                "properties": {
                                    "size": {"type": "integer"},
                                    "total": _COUNTS,
                                    "points": {
                                        "type": "array",
                                        "items": {
                                            "type": "object",
                                            "required": ["start", "kinds"],
                                            "properties": {"start": {"type": "integer"}, "kinds": _COUNTS},
                                        },
                                    },
                                },
                            }
                        ),
                        "counts",
                    ),
                    "400": _error("bad size or last"),
                    **_UNAVAILABLE,
                },
            },
        },
        "/api/v1/stats/examples": {
            "get": {
                "operationId": "statsExamples",
                "summary": "the lowest-scored results or a sample of the failed ones, kept for one window of one model × suite",
                "parameters": [
                    {
                        "name": "model",
                        "in": "query",
                        "required": True,
                        "schema": {"type": "string", "minLength": 1},
                    },
                    {
                        "name": "suite",
                        "in": "query",
                        "required": True,
                        "schema": {"type": "string", "minLength": 1},
                    },
                    _SIZE,
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
                    _VERSION,
                ],
                "responses": {
                    "200": _json(
                        _envelope(
                            {
                                "type": "object",
                                "required": ["model", "suite", "size", "window", "kind", "examples"],
                                "properties": {
                                    "model": {"type": "string"},
                                    "suite": {"type": "string"},
                                    "size": {"type": "integer"},
                                    "version": {"type": "string"},
                                    "window": _nullable(
                                        "integer", description="null when the pair has no examples"
                                    ),
                                    "kind": {"type": "string", "enum": ["worst", "failing"]},
                                    "examples": {"type": "array", "items": _EXAMPLE},
                                },
                            }
                        ),
                        "examples",
                    ),
                    "400": _error(
                        "missing model or suite, unknown kind, not a window start, not a configured size, or a malformed version"
                    ),
                    "404": _error(
                        "503001: the suite never had this version; data.known lists the known ones"
                    ),
                    **_UNAVAILABLE,
                },
            },
        },
        "/api/v1/stats/compare": {
            "get": {
                "operationId": "statsCompare",
                "summary": "version b against version a of one model × suite, on the events both scored (docs/versions.md)",
                "parameters": [
                    {
                        "name": "model",
                        "in": "query",
                        "required": True,
                        "schema": {"type": "string", "minLength": 1},
                    },
                    {
                        "name": "suite",
                        "in": "query",
                        "required": True,
                        "schema": {"type": "string", "minLength": 1},
                    },
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
                    _SIZE,
                    {
                        "name": "window",
                        "in": "query",
                        "required": False,
                        "schema": {"type": "string"},
                        "description": "a window start (epoch seconds or RFC 3339): only events of that window (default: every retained event)",
                    },
                ],
                "responses": {
                    "200": _json(
                        _envelope(
                            {
                                "type": "object",
                                "required": ["n", "empty", "reason"],
                                "properties": {
                                    "n": {"type": "integer"},
                                    "empty": {"type": "boolean"},
                                    "reason": _nullable("string", description="why the comparison is empty"),
                                    "mean_diff": _nullable("number"),
                                    "ci_low": _nullable("number"),
                                    "ci_high": _nullable("number"),
                                    "pass_to_fail": {"type": "integer"},
                                    "fail_to_pass": {"type": "integer"},
                                    "pass_to_fail_ids": {"type": "array", "items": {"type": "string"}},
                                    "fail_to_pass_ids": {"type": "array", "items": {"type": "string"}},
                                    "kappa": _nullable("number"),
                                    "pearson": _nullable("number"),
                                    "spearman": _nullable("number"),
                                    "evaluators": {"type": "object"},
                                },
                            }
                        ),
                        "the comparison",
                    ),
                    "400": _error("missing model, suite, a or b; a malformed version, window or size"),
                    "404": _error(
                        "503001: the suite never had this version; data.known lists the known ones"
                    ),
                    **_UNAVAILABLE,
                },
            },
        },
        "/api/v1/stats/human": {
            "get": {
                "operationId": "statsHuman",
                "summary": "agreement of the judges, the panel, the result and the rule evaluators with human labels (docs/feedback.md)",
                "parameters": [
                    {
                        "name": "model",
                        "in": "query",
                        "required": True,
                        "schema": {"type": "string", "minLength": 1},
                    },
                    {
                        "name": "suite",
                        "in": "query",
                        "required": True,
                        "schema": {"type": "string", "minLength": 1},
                    },
                    _SIZE,
                    {
                        "name": "window",
                        "in": "query",
                        "required": False,
                        "schema": {"type": "string"},
                        "description": "a window's start, epoch seconds or RFC 3339 (default: all time, with calibration)",
                    },
                ],
                "responses": {
                    "200": _json(
                        _envelope(
                            {
                                "type": "object",
                                "required": ["model", "suite", "size", "window", "agreement", "calibration"],
                                "properties": {
                                    "model": {"type": "string"},
                                    "suite": {"type": "string"},
                                    "size": _nullable("integer", description="null: all time"),
                                    "window": _nullable("integer", description="null: all time"),
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
                    "400": _error("missing model or suite, not a window start, or not a configured size"),
                    **_UNAVAILABLE,
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
                    "200": _json(
                        _envelope(
                            {
                                "type": "object",
                                "description": "graded result v1 (schemas/graded-result.v1.json)",
                            }
                        ),
                        "the result",
                    ),
                    "404": _error(
                        "not retained (any more): full results are kept for STREAMEVAL_REDELIVERY_TTL_S"
                    ),
                    **_UNAVAILABLE,
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
                    "200": _json(_envelope({"type": "array", "items": {"type": "object"}}), "alerts"),
                    "400": _error("bad limit"),
                    **_UNAVAILABLE,
                },
            },
        },
    }
    components.update(
        {
            "Figures": _FIGURES,
            "PairFigures": {
                "allOf": [_ref("Figures")],
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
            "EvaluatorSummary": _SUMMARY,
            "Evaluator": _FULL,
            "TestResult": _TEST_RESULT,
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
        "paths": paths,
        "components": {
            "schemas": components,
            "securitySchemes": {"bearerAuth": {"type": "http", "scheme": "bearer"}},
        },
    }
