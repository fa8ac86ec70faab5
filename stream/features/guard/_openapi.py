"""``POST /api/v1/check`` in the OpenAPI document (added to the worker's when its suite file has a guard
section; the whole document of ``streameval guard``)."""

from __future__ import annotations

from typing import Any

from ..._version import __version__

__all__ = ["ANSWER", "EVENT", "PATHS", "document"]


def _error(description: str) -> dict[str, Any]:
    return {
        "description": description,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
    }


_NUMBER_OR_NULL = {"type": ["number", "null"]}
_TEXT_OR_NULL = {"type": ["string", "null"]}

#: the answer's ``data`` (docs/guard.md, "The answer")
ANSWER: dict[str, Any] = {
    "type": "object",
    "required": [
        "id",
        "suite",
        "decision",
        "timedOut",
        "failMode",
        "score",
        "passed",
        "threshold",
        "reasons",
        "evaluators",
        "onTimeout",
        "latencyMs",
    ],
    "properties": {
        "id": {"type": "string", "description": "the event's id (made when the event had none)"},
        "suite": {"type": "string"},
        "decision": {"type": "string", "enum": ["allow", "warn", "block", "mask"]},
        "timedOut": {"type": "boolean", "description": "the deadline passed: the decision is onTimeout"},
        "failMode": {"type": ["string", "null"], "enum": ["open", "closed", None]},
        "score": _NUMBER_OR_NULL,
        "passed": {"type": ["boolean", "null"]},
        "threshold": {"type": "number"},
        "reasons": {"type": "array", "items": {"type": "string"}},
        "evaluators": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["name", "score", "passed", "reason", "error"],
                "properties": {
                    "name": {"type": "string"},
                    "score": {"type": "number"},
                    "passed": {"type": "boolean"},
                    "reason": _TEXT_OR_NULL,
                    "error": _TEXT_OR_NULL,
                },
            },
        },
        "judge": {
            "type": "object",
            "properties": {
                "status": {"type": "string"},
                "score": {"type": "number"},
                "reason": {"type": "string"},
            },
        },
        "output": {"type": "string", "description": "decision mask: the output with the redactions made"},
        "onTimeout": {"type": "string", "enum": ["allow", "block"]},
        "skipped": {"type": "array", "items": {"type": "string"}},
        "published": {"type": "boolean", "description": "publish: true: the broker acknowledged it in time"},
        "latencyMs": {"type": "number"},
    },
}

_SHORT_TEXT = {"type": "string", "minLength": 1, "maxLength": 256}
#: the request body: a request event (schemas/request-event.v1.json has every field), id optional
EVENT: dict[str, Any] = {
    "type": "object",
    "required": ["model", "output"],
    "properties": {
        "id": _SHORT_TEXT,
        "model": _SHORT_TEXT,
        "input": {"type": "string"},
        "output": {"type": "string"},
        "expected": {"type": "string"},
        "suite": {"type": "string"},
        "category": {"type": "string"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "metadata": {"type": "object"},
    },
    "description": "a request event (schemas/request-event.v1.json); id optional",
}

PATHS: dict[str, Any] = {
    "/api/v1/check": {
        "post": {
            "operationId": "check",
            "summary": "may this answer be sent? a decision from a guarded suite, within its deadline",
            "security": [{"bearerAuth": []}],
            "parameters": [
                {
                    "name": "suite",
                    "in": "query",
                    "required": False,
                    "schema": {"type": "string", "minLength": 1},
                    "description": "the suite (default: the event's suite field, else routed as the stream routes)",
                }
            ],
            "requestBody": {
                "required": True,
                "description": "a request event (schemas/request-event.v1.json); id optional",
                "content": {"application/json": {"schema": EVENT}},
            },
            "responses": {
                "200": {
                    "description": "the decision",
                    "content": {
                        "application/json": {
                            "schema": {
                                "type": "object",
                                "required": ["code", "data"],
                                "properties": {"code": {"type": "integer"}, "data": ANSWER},
                            }
                        }
                    },
                },
                "400": _error(
                    "not strict JSON, not a request event, or a field over its limit (data.errors)"
                ),
                "401": _error("no token, or a wrong one"),
                "403": _error("the server has no token (STREAMEVAL_API_TOKEN, STREAMEVAL_GUARD_TOKENS_FILE)"),
                "404": _error("no guarded suite for the event; data.suites lists the guarded suites"),
                "413": _error("the body is over STREAMEVAL_GUARD_MAX_BODY_BYTES"),
            },
        }
    }
}


def document() -> dict[str, Any]:
    """The OpenAPI document of ``streameval guard`` (this one endpoint)."""
    return {
        "openapi": "3.1.0",
        "info": {"title": "streameval guard", "version": __version__},
        "paths": PATHS,
        "components": {
            "schemas": {
                "Error": {
                    "type": "object",
                    "required": ["code", "message"],
                    "properties": {"code": {"type": "integer"}, "message": {"type": "string"}, "data": {}},
                }
            },
            "securitySchemes": {"bearerAuth": {"type": "http", "scheme": "bearer"}},
        },
    }
