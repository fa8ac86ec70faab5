"""``streameval notify`` alone: its /health and /metrics (docs/notify.md, "Metrics and Redis keys").

The worker serves the notifier's per-channel figures on its own web server; a notifier run alone serves the
same ``/metrics`` (the process's whole registry: the ``streameval_notify_*`` series and the process
collectors) and a ``/health`` on ``--port`` (default ``STREAMEVAL_WEB_PORT``; unset: no server), bound to
``STREAMEVAL_WEB_HOST``. ``STREAMEVAL_API_METRICS_AUTH`` / ``STREAMEVAL_API_HEALTH_AUTH`` ask for the API
token there as they do on the worker.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

from aiohttp import web

from ... import telemetry
from ...api import ApiSettings, start_web
from ...api._security import Access, add_security_headers, needs_token, token_given
from ._config import ChannelConfig

__all__ = ["notify_web_app", "serve_notify_web", "zero_channel_series"]


def zero_channel_series(channels: Sequence[ChannelConfig]) -> None:
    """Create each channel's counters at 0, so a scrape shows every channel before its first alert."""
    for channel in channels:
        for counter in (
            telemetry.NOTIFY_SENT,
            telemetry.NOTIFY_FAILED,
            telemetry.NOTIFY_RETRIED,
            telemetry.NOTIFY_DEAD_LETTERED,
        ):
            counter.labels(channel.name)


def notify_web_app(access: Access, token: str | None) -> web.Application:
    """/health and /metrics, the token asked where ``access`` says so."""

    @web.middleware
    async def guard(
        request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        if needs_token(request, access) and not token_given(request, token):
            return web.json_response(
                {"error": "a valid 'Authorization: Bearer <token>' is required"}, status=401
            )
        return await handler(request)

    async def health(request: web.Request) -> web.Response:
        return web.json_response({"status": "ok", "role": "notify"})

    async def metrics(request: web.Request) -> web.Response:
        body = await asyncio.to_thread(telemetry.render)
        return web.Response(body=body, headers={"Content-Type": telemetry.CONTENT_TYPE})

    app = web.Application(middlewares=[guard])
    app.on_response_prepare.append(add_security_headers)
    app.add_routes([web.get("/health", health), web.get("/metrics", metrics)])
    return app


async def serve_notify_web(api: ApiSettings, port: int) -> web.AppRunner:
    """Serve :func:`notify_web_app` on ``STREAMEVAL_WEB_HOST``:``port``; ``await runner.cleanup()`` stops it."""
    return await start_web(notify_web_app(api.access(), api.token()), api.web_host, port)
