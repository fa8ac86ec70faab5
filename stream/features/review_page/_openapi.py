"""The review endpoints' part of the OpenAPI document (added to it when the review page is on)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["PATHS"]


def _json(description: str, data: dict[str, Any]) -> dict[str, Any]:
    return {
        "description": description,
        "content": {
            "application/json": {
                "schema": {
                    "type": "object",
                    "required": ["code", "data"],
                    "properties": {"code": {"type": "integer"}, "data": data},
                }
            }
        },
    }


def _error(description: str) -> dict[str, Any]:
    return {
        "description": description,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
    }


_NAMED = {
    "401": _error("no token, or a token nobody is named for"),
    "403": _error("the server has no named token (STREAMEVAL_API_TOKEN, STREAMEVAL_REVIEW_TOKENS_FILE)"),
    "503": _error("Redis (or, for a label, the broker) unavailable"),
}
_KEY = {"name": "key", "in": "path", "required": True, "schema": {"type": "string"}}
_FILTERS = [
    {"name": "model", "in": "query", "required": False, "schema": {"type": "string"}},
    {"name": "suite", "in": "query", "required": False, "schema": {"type": "string"}},
]
_OBJECT = {"type": "object"}
_SECURITY: list[dict[str, list[str]]] = [{"bearerAuth": []}]


def _post(
    operation: str, summary: str, data: dict[str, Any], *, query: Sequence[dict[str, Any]] = (), **extra: Any
) -> dict[str, Any]:
    return {
        "post": {
            "operationId": operation,
            "summary": summary,
            "security": _SECURITY,
            "parameters": [_KEY, *query],
            "responses": {
                "200": _json(summary, data),
                "404": _error("the item is no longer kept"),
                "409": _error("labelled or skipped by you, complete, or open by someone else"),
                **_NAMED,
            },
            **extra,
        }
    }


PATHS: dict[str, Any] = {
    "/api/v1/review/items": {
        "get": {
            "operationId": "reviewItems",
            "summary": "the review items the caller may still label, with each one's state",
            "security": _SECURITY,
            "parameters": [
                *_FILTERS,
                {
                    "name": "reason",
                    "in": "query",
                    "required": False,
                    "schema": {
                        "type": "string",
                        "enum": ["gate_failed", "judges_disagree", "near_threshold", "control"],
                    },
                },
                {
                    "name": "order",
                    "in": "query",
                    "required": False,
                    "schema": {"type": "string", "enum": ["newest", "important"]},
                },
            ],
            "responses": {
                "200": _json(
                    "the queue: total (to label), open (the caller may open now), held_by_others, items",
                    _OBJECT,
                ),
                "400": _error("bad filter"),
                **_NAMED,
            },
        }
    },
    "/api/v1/review/items/{key}/reserve": _post(
        "reviewReserve",
        "open an item: reserve (or renew) it for the caller; answers the item (reserved: true)",
        {
            "type": "object",
            "required": ["annotator", "reserved"],
            "properties": {
                "annotator": {"type": "string"},
                "reserved": {"type": "boolean"},
                "lease_until": {"type": "string", "format": "date-time"},
                "item": _OBJECT,
                "reason": {"type": "string", "enum": ["taken", "complete", "labelled", "skipped", "gone"]},
                "why": {"type": "string"},
            },
        },
        query=[
            {
                "name": "try",
                "in": "query",
                "required": False,
                "description": "true: an item the caller cannot open answers 200 with reserved: false and "
                "the reason (taken, complete, labelled, skipped, gone) instead of 409 or 404",
                "schema": {"type": "string", "enum": ["true", "false"], "default": "false"},
            }
        ],
    ),
    "/api/v1/review/items/{key}/release": _post(
        "reviewRelease", "close an item: end the reservation", _OBJECT
    ),
    "/api/v1/review/items/{key}/skip": _post(
        "reviewSkip", "skip an item: never offered to the caller again", _OBJECT
    ),
    "/api/v1/review/items/{key}/label": _post(
        "reviewLabel",
        "label an item: a feedback v1 document on the feedback topic, annotator = the caller",
        _OBJECT,
        requestBody={
            "required": True,
            "content": {
                "application/json": {
                    "schema": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {
                            "passed": {"type": ["boolean", "null"]},
                            "score": {"type": ["number", "null"], "minimum": 0, "maximum": 100},
                            "criteria": {"type": "object", "additionalProperties": {"type": "number"}},
                            "expected": {"type": ["string", "null"], "maxLength": 65536},
                            "comment": {"type": ["string", "null"], "maxLength": 4096},
                        },
                    }
                }
            },
        },
    ),
    "/api/v1/review/progress": {
        "get": {
            "operationId": "reviewProgress",
            "summary": "progress per queue (model x suite) and per annotator",
            "security": _SECURITY,
            "responses": {"200": _json("progress", _OBJECT), **_NAMED},
        }
    },
    "/api/v1/review/export": {
        "get": {
            "operationId": "reviewExport",
            "summary": "labelled items as JSONL: items {event, result, label}, labels (feedback v1) or events",
            "security": _SECURITY,
            "parameters": [
                *_FILTERS,
                {
                    "name": "format",
                    "in": "query",
                    "required": False,
                    "schema": {"type": "string", "enum": ["items", "labels", "events"]},
                },
            ],
            "responses": {
                "200": {"description": "one JSON document a line", "content": {"application/x-ndjson": {}}},
                "400": _error("bad format"),
                **_NAMED,
            },
        }
    },
}
