"""Alerts and receivers shared by the notification tests."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web

from streameval.models import Alert, AlertWindow, format_time

Handler = Callable[[web.Request, bytes], Awaitable[web.StreamResponse]]


def alert(**changes: Any) -> Alert:
    """A firing alert of rule low-mean on gpt-4o / qa, fired now, with two worst examples."""
    now = time.time()
    start = int(now // 60 * 60) - 60
    doc: dict[str, Any] = {
        "id": f"low-mean:60:{format_time(start)}:gpt-4o:qa",
        "rule": "low-mean",
        "severity": "critical",
        "metric": "mean_score",
        "comparator": "<",
        "threshold": 0.6,
        "value": 0.41,
        "count": 120,
        "model": "gpt-4o",
        "suite": "qa",
        "window": AlertWindow(size_s=60, start=format_time(start), end=format_time(start + 60)),
        "message": "mean_score 0.41 < 0.6 for gpt-4o / qa",
        "fired_at": format_time(now),
        "examples": ["ev-1", "ev/2"],
    }
    doc.update(changes)
    return Alert(**doc)


@dataclass
class Receiver:
    """A local HTTP server on loopback: records every request, answers with ``script`` (or 200)."""

    script: Handler | None = None
    requests: list[tuple[str, dict[str, str], bytes]] = field(default_factory=list)
    url: str = ""
    runner: web.AppRunner | None = None

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        self.requests.append((request.path_qs, dict(request.headers), body))
        if self.script is not None:
            return await self.script(request, body)
        return web.json_response({"status": "success"}, status=202)

    async def start(self) -> Receiver:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self.runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.1)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()

    def bodies(self) -> list[Any]:
        return [orjson.loads(body) for _, _, body in self.requests]


async def wait_for(check: Callable[[], bool], timeout: float = 20.0, what: str = "condition") -> None:
    """Poll ``check`` until true; ``TimeoutError`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"gave up waiting for {what} after {timeout:.0f} s")
        await asyncio.sleep(0.02)
