"""The aiohttp application: evaluator API, OpenAPI document, dashboard reads, pages, operations endpoints.

:func:`create_web_app` builds it on a Redis client; ``streameval api`` serves it alone
(:func:`serve_api`), and the stream worker serves the same app next to its agent
(:func:`start_web`), adding broker and judge checks to ``/ready``.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import orjson
from aiohttp import web
from redis import exceptions as redis_errors

from .. import keyspace
from .._util import redact_url
from ..errors import StoreUnavailable
from ..redis_security import redis_options
from ..registry import RegistryLimits, RegistryStore
from ..settings import Settings
from . import _evaluators, _ops, _pages, _stats
from ._errors import ApiError, Unauthorized, Unavailable
from ._feature import WebFeature
from ._openapi import openapi_document
from ._reads import STATS_KEY, StatsConfig
from ._security import (
    IDENTITIES_KEY,
    READY_DETAILS_KEY,
    Access,
    Identities,
    add_security_headers,
    authorize,
    details_allowed,
    needs_token,
)
from ._settings import ApiSettings

__all__ = ["DEFAULT_API_PORT", "WebFeature", "create_web_app", "serve_api", "start_web"]

log = logging.getLogger(__name__)

DEFAULT_API_PORT = 8080
_TOKEN_KEY: web.AppKey[str | None] = web.AppKey("api_token", str)
_ACCESS_KEY: web.AppKey[Access] = web.AppKey("api_access", Access)
_OPEN_READS = Access()
_REDIS_DOWN = (redis_errors.ConnectionError, redis_errors.TimeoutError, redis_errors.BusyLoadingError)


def _error(exc: ApiError, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(
        body=orjson.dumps(exc.envelope()), status=exc.status, content_type="application/json", headers=headers
    )


@web.middleware
async def _errors_and_auth(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    try:
        own = request.path.startswith(request.app[_OWN_AUTH_KEY])  # a feature's routes name their caller
        if not own and needs_token(request, request.app[_ACCESS_KEY]):
            authorize(request, request.app[_TOKEN_KEY])
        return await handler(request)
    except Unauthorized as exc:
        return _error(exc, {"WWW-Authenticate": 'Bearer realm="streameval"'})
    except ApiError as exc:
        return _error(exc)
    except StoreUnavailable as exc:
        return _error(Unavailable(str(exc)))
    except _REDIS_DOWN as exc:  # the read endpoints talk to Redis directly
        return _error(Unavailable(f"Redis unavailable: {type(exc).__name__}: {exc}"))
    except web.HTTPException as exc:  # aiohttp's own 404 / 405 / 413, in the envelope
        if exc.status < 400:
            raise
        headers = {k: v for k, v in exc.headers.items() if k.lower() == "allow"}
        body = {"code": exc.status, "message": exc.reason, "data": None}
        return web.Response(
            body=orjson.dumps(body), status=exc.status, content_type="application/json", headers=headers
        )


async def _openapi(request: web.Request) -> web.Response:
    features = request.app[_FEATURES_KEY]
    return web.json_response(openapi_document(features))


_FEATURES_KEY: web.AppKey[tuple[WebFeature, ...]] = web.AppKey("features", tuple)
_OWN_AUTH_KEY: web.AppKey[tuple[str, ...]] = web.AppKey("own_auth", tuple)


def create_web_app(
    client: keyspace.Client,
    *,
    prefix: str,
    token: str | None,
    checks: Sequence[_ops.Check] = (),
    ready_timeout_s: float = 2.0,
    windows: Sequence[int] = (60,),
    access: Access = _OPEN_READS,
    registry_limits: RegistryLimits | None = None,
    redelivery_ttl_s: int = 3600,
    identities: Identities | None = None,
    features: Sequence[WebFeature] = (),
    redact_result: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
) -> web.Application:
    """The whole HTTP surface on ``client`` (keys under ``prefix``); ``checks`` feed ``/ready``;
    ``windows`` are the configured window sizes the dashboard may ask for; ``access`` says which
    reads need ``token`` too (writes always do); ``identities`` name the tokens; ``features`` add routes
    (the composition root's: the features' dashboard reads, the review page); ``redact_result``: a stored
    result's texts as ``GET /api/v1/results/{id}`` shows them (redaction before judging, docs/redact.md)."""
    app = web.Application(middlewares=[_errors_and_auth], client_max_size=_evaluators.MAX_BODY)
    app.on_response_prepare.append(add_security_headers)
    app[_TOKEN_KEY] = token
    app[_ACCESS_KEY] = access
    app[READY_DETAILS_KEY] = details_allowed(token, access.reads)
    app[_evaluators.STORE_KEY] = RegistryStore(client, prefix=prefix, limits=registry_limits)
    app[_ops.CHECKS_KEY] = [_ops.redis_check(client), *checks]
    app[_ops.TIMEOUT_KEY] = ready_timeout_s
    app[STATS_KEY] = StatsConfig(
        client,
        prefix,
        tuple(windows),
        redelivery_ttl_s,
        redact_result,
        [f.find_result for f in features if f.find_result is not None],
    )
    app[IDENTITIES_KEY] = identities or Identities()
    app[_FEATURES_KEY] = tuple(features)
    app[_OWN_AUTH_KEY] = tuple(f.own_auth_prefix for f in features if f.own_auth_prefix is not None)
    app.add_routes(
        [
            *_ops.routes(),
            web.get("/api/v1/openapi.json", _openapi),
            *_evaluators.routes(),
            *_stats.routes(),
            *(route for feature in features for route in feature.routes),
            *_pages.routes(),
        ]
    )
    for feature in features:
        for key, value in feature.state.items():
            app[key] = value
        if feature.cleanup is not None:
            done = feature.cleanup

            async def close(app: web.Application, done: Callable[[], Awaitable[None]] = done) -> None:
                await done()

            app.on_cleanup.append(close)
    return app


async def start_web(app: web.Application, host: str, port: int) -> web.AppRunner:
    """Serve ``app`` on host:port in the running loop; ``await runner.cleanup()`` stops it."""
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    return runner


async def serve_api(
    settings: Settings,
    api: ApiSettings,
    *,
    host: str,
    port: int,
    features: Callable[[keyspace.Client], Sequence[WebFeature]] | None = None,
) -> None:
    """``streameval api``: serve until SIGTERM/SIGINT; ``features`` builds the optional parts on the client."""
    assert settings.redis_url is not None
    client = keyspace.connect(
        settings.redis_url, max_connections=16, **redis_options(settings)
    )  # or a cluster
    token = api.token()
    app = create_web_app(
        client,
        prefix=settings.redis_prefix,
        token=token,
        ready_timeout_s=api.ready_timeout_s,
        windows=settings.windows,
        access=api.access(),
        registry_limits=api.registry_limits(),
        redelivery_ttl_s=settings.redelivery_ttl_s,
        identities=api.identities(),
        features=features(client) if features is not None else (),
    )
    runner = await start_web(app, host, port)
    log.warning(
        "streameval api on http://%s:%d (Redis %s; writes %s)",
        host,
        port,
        redact_url(settings.redis_url),
        "need the bearer token" if token else "disabled: no STREAMEVAL_API_TOKEN",
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await runner.cleanup()
        await client.aclose()
