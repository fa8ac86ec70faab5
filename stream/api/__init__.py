"""The HTTP surface (docs/api.md): the evaluator-module spec's evaluator registry API, the OpenAPI document,
and the operations endpoints ``/health``, ``/ready`` and ``/metrics``, served by ``streameval api`` and by
each stream worker's web server (the same aiohttp app)."""

from __future__ import annotations

from ._errors import EXECUTION_FAILED, NOT_FOUND, ApiError
from ._feature import WebFeature
from ._openapi import openapi_document
from ._ops import broker_check, judge_checks, stall_check
from ._security import IDENTITIES_KEY, Identities
from ._server import DEFAULT_API_PORT, create_web_app, serve_api, start_web
from ._settings import ApiSettings, load_api_settings
from ._stats import remember_alert

__all__ = [
    "DEFAULT_API_PORT",
    "EXECUTION_FAILED",
    "IDENTITIES_KEY",
    "NOT_FOUND",
    "ApiError",
    "ApiSettings",
    "Identities",
    "WebFeature",
    "broker_check",
    "create_web_app",
    "judge_checks",
    "load_api_settings",
    "openapi_document",
    "remember_alert",
    "serve_api",
    "stall_check",
    "start_web",
]
