"""``POST /api/v1/check`` over HTTP (docs/guard.md): as a web feature of the worker's app (when its suite file
has a guard section) and as the whole app of ``streameval guard`` (:func:`guard_app`: no Redis, no broker
unless a suite publishes).

Auth is the write API's: a bearer token, ``STREAMEVAL_API_TOKEN`` or one of ``STREAMEVAL_GUARD_TOKENS_FILE``'s
named tokens (good for this endpoint only); without any token configured every check answers 403.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from aiohttp import web

from ...api import ApiError, Identities, WebFeature
from ...api._errors import BadRequest, Forbidden, Unauthorized
from ...api._security import add_security_headers
from ._check import CheckError, CheckTooLarge, Guard, NoGuardedSuite
from ._openapi import PATHS, document

__all__ = ["CHECK_PATH", "GUARD_KEY", "guard_app", "guard_feature"]

CHECK_PATH = "/api/v1/check"


class _TooLarge(ApiError):
    status = code = 413


class _NoSuite(ApiError):
    status = code = 404


class _Checks:
    def __init__(self, guard: Guard, identities: Identities) -> None:
        self.guard = guard
        self.identities = identities


GUARD_KEY: web.AppKey[_Checks] = web.AppKey("guard", _Checks)


def _caller(request: web.Request, identities: Identities) -> str:
    if not identities.tokens:
        raise Forbidden("checks need a token: set STREAMEVAL_API_TOKEN or STREAMEVAL_GUARD_TOKENS_FILE")
    name = identities.name_of(request)
    if name is None:
        raise Unauthorized("a valid 'Authorization: Bearer <token>' header is required for checks")
    return name


def _refused(exc: CheckError) -> ApiError:
    if isinstance(exc, CheckTooLarge):
        return _TooLarge(exc.message)
    if isinstance(exc, NoGuardedSuite):
        return _NoSuite(exc.message, {"suites": None})
    return BadRequest(exc.message, exc.errors)


async def _check(request: web.Request) -> web.Response:
    checks = request.app[GUARD_KEY]
    caller = _caller(request, checks.identities)
    raw = await request.read()  # the app's client_max_size answers 413 beyond it; the guard's own limit below
    suite = request.query.get("suite")
    if suite == "":
        raise BadRequest(
            "suite is empty", [{"path": "$.query.suite", "message": "give a suite name or leave it out"}]
        )
    try:
        answer = await checks.guard.check(raw, suite=suite, caller=caller)
    except NoGuardedSuite as exc:
        raise _NoSuite(exc.message, {"suites": checks.guard.names}) from None
    except CheckError as exc:
        raise _refused(exc) from None
    return web.Response(body=orjson.dumps({"code": 200, "data": answer}), content_type="application/json")


def guard_feature(guard: Guard, identities: Identities) -> WebFeature:
    """The endpoint as a part of the worker's web app (the worker starts ``guard`` and the app closes it)."""
    return WebFeature(
        routes=[web.post(CHECK_PATH, _check)],
        own_auth_prefix=CHECK_PATH,
        openapi_paths=PATHS,
        cleanup=guard.close,
        state={GUARD_KEY: _Checks(guard, identities)},
    )


def _envelope(exc: ApiError, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(
        body=orjson.dumps(exc.envelope()), status=exc.status, content_type="application/json", headers=headers
    )


@web.middleware
async def _errors(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    try:
        return await handler(request)
    except Unauthorized as exc:
        return _envelope(exc, {"WWW-Authenticate": 'Bearer realm="streameval"'})
    except ApiError as exc:
        return _envelope(exc)
    except web.HTTPException as exc:  # aiohttp's own 404 / 405 / 413, in the envelope
        if exc.status < 400:
            raise
        headers = {k: v for k, v in exc.headers.items() if k.lower() == "allow"}
        body: dict[str, Any] = {"code": exc.status, "message": exc.reason, "data": None}
        return web.Response(
            body=orjson.dumps(body), status=exc.status, content_type="application/json", headers=headers
        )


async def _health(request: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


async def _openapi(request: web.Request) -> web.Response:
    return web.json_response(document())


def guard_app(guard: Guard, identities: Identities) -> web.Application:
    """``streameval guard``'s app: the check, ``/health`` (also ``/ready``: nothing to wait for once started)
    and the endpoint's OpenAPI document. The caller starts and closes ``guard``."""
    app = web.Application(middlewares=[_errors], client_max_size=guard.max_body_bytes + 1)
    app.on_response_prepare.append(add_security_headers)
    app[GUARD_KEY] = _Checks(guard, identities)
    app.add_routes(
        [
            web.post(CHECK_PATH, _check),
            web.get("/health", _health),
            web.get("/ready", _health),
            web.get("/api/v1/openapi.json", _openapi),
        ]
    )
    return app
