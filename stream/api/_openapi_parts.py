"""The pieces the OpenAPI document is built of, the core's paths (:mod:`._openapi`) and the features'
(their ``web`` modules): the response envelope, the error reference, the shared query parameters, and the
schemas of the core's components (evaluators, a test's verdict, a window's figures)."""

from __future__ import annotations

from typing import Any

__all__ = [
    "COUNTS",
    "FIGURES",
    "FULL",
    "SIZE",
    "SUMMARY",
    "TEST_RESULT",
    "TIME",
    "UNAVAILABLE",
    "VERSION",
    "envelope",
    "error",
    "json_content",
    "nullable",
    "ref",
]


def ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def nullable(kind: str, **extra: Any) -> dict[str, Any]:
    return {"type": [kind, "null"], **extra}


TIME = {"type": "string", "format": "date-time"}


VERSION = {
    "name": "version",
    "in": "query",
    "required": False,
    "schema": {"type": "string", "pattern": "^([0-9a-f]{12}|all|legacy)$"},
    "description": "a suite version (docs/versions.md), all, or legacy (figures from before versions); "
    "default: each suite's current version",
}


#: the model × suite a read is about: both required query parameters
MODEL_SUITE: list[dict[str, Any]] = [
    {"name": name, "in": "query", "required": True, "schema": {"type": "string", "minLength": 1}}
    for name in ("model", "suite")
]
SIZE = {
    "name": "size",
    "in": "query",
    "required": False,
    "description": "a configured window size, s (default: the first)",
    "schema": {"type": "integer", "minimum": 1},
}


def envelope(data: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "required": ["code", "data"],
        "properties": {"code": {"type": "integer", "const": 200}, "data": data},
    }


def json_content(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def error(description: str) -> dict[str, Any]:
    return json_content(ref("Error"), description)


UNAVAILABLE = {"503": error("Redis unavailable")}


SUMMARY: dict[str, Any] = {
    "type": "object",
    "required": ["id", "name", "description", "type", "isPreset", "createdAt", "updatedAt"],
    "properties": {
        "id": {"type": "string", "description": "a preset's name, or a custom evaluator's UUID"},
        "name": {"type": "string"},
        "description": nullable("string"),
        "type": {"type": "string", "enum": ["preset", "code", "llm", "composite"]},
        "isPreset": {"type": "boolean"},
        "language": {"type": ["string", "null"], "enum": ["python", "nodejs", None]},
        "version": nullable("integer", description="custom evaluators: +1 on every update"),
        "createdAt": TIME,
        "updatedAt": TIME,
    },
}


FULL: dict[str, Any] = {
    **SUMMARY,
    "required": [*SUMMARY["required"], "config"],
    "properties": {
        **SUMMARY["properties"],
        "config": {
            "type": "object",
            "description": "preset: {presetType, params}; code: {language, code, timeout}",
        },
        "paramsSchema": {"type": "object", "description": "presets: JSON Schema of their params"},
    },
}


TEST_RESULT: dict[str, Any] = {
    "type": "object",
    "required": ["passed", "score", "reason", "latencyMs", "error"],
    "properties": {
        "passed": {"type": "boolean"},
        "score": nullable("number", minimum=0, maximum=1),
        "reason": nullable("string"),
        "latencyMs": {"type": "number", "minimum": 0},
        "error": nullable(
            "string", description="error code: execution_failed, timeout, missing_field, internal, ..."
        ),
        "details": nullable("object"),
        "version": nullable("string", description="custom evaluators: id@version"),
    },
}


COUNTS = {"type": "object", "additionalProperties": {"type": "integer", "minimum": 0}}


FIGURES: dict[str, Any] = {
    "type": "object",
    "required": ["count", "mean", "passRate", "grades", "evaluators", "judges"],
    "properties": {
        "count": {"type": "integer", "minimum": 0},
        "mean": nullable("number", minimum=0, maximum=1),
        "passRate": nullable("number", minimum=0, maximum=1),
        "grades": COUNTS,
        "evaluators": {
            "type": "object",
            "additionalProperties": {
                "type": "object",
                "required": ["count", "mean", "errors"],
                "properties": {
                    "count": {"type": "integer"},
                    "mean": nullable("number"),
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
                    "mean": nullable("number"),
                    "sd": nullable("number"),
                    "calls": {"type": "integer"},
                    "errors": {"type": "integer"},
                    "cacheHits": {"type": "integer"},
                    "tokens": {"type": "integer"},
                    "cost": nullable("number", description="null without prices"),
                },
            },
        },
        "latencyP50Ms": nullable("number", description="upper bound of the latency bucket"),
        "latencyP95Ms": nullable("number", description="upper bound of the latency bucket"),
        "tokens": COUNTS,
        "cost": nullable("number", description="judge cost; null without prices"),
        "alpha": nullable("number", description="Krippendorff's interval alpha of the panel"),
        "pearson": {
            "type": "object",
            "description": '"a|b" -> Pearson r',
            "additionalProperties": nullable("number"),
        },
        "consistency": nullable("number", description="repeat-vs-first correlation"),
        "gateFailures": COUNTS,
        "lateRedirected": {"type": "integer", "minimum": 0},
    },
}
