"""Operations endpoints: ``/health`` (liveness), ``/ready`` (dependencies), ``/metrics`` (Prometheus).

``/ready`` runs every check at once, each bounded by a timeout, and answers 503 when any fails, with
each check's verdict. The broker check is an authenticated metadata request (TLS and SASL as the
worker's clients use them: a wrong password is not ready); judge checks open a TCP connection (no
request, so a judge is never billed for a probe); Redis is PINGed. A worker adds ``stall_check``: not
ready while a batch it took has stayed unpublished past ``STREAMEVAL_STALL_AFTER_S``
(``streameval.inflight.StallWatchdog``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from urllib.parse import urlsplit

from aiohttp import web

from .. import telemetry
from ..connect_check import kafka_metadata
from ..errors import StreamEvalError
from ..kafka_security import KafkaSecurity, bootstrap_hosts
from ..keyspace import Client
from ._security import READY_DETAILS_KEY

__all__ = [
    "CHECKS_KEY",
    "Check",
    "broker_check",
    "judge_checks",
    "redis_check",
    "routes",
    "stall_check",
    "tcp_check",
]

#: (name, check): a check returns None when fine, else raises
Check = tuple[str, Callable[[], Awaitable[None]]]
CHECKS_KEY: web.AppKey[Sequence[Check]] = web.AppKey("ready_checks", Sequence)
TIMEOUT_KEY: web.AppKey[float] = web.AppKey("ready_timeout", float)
_STARTED = time.time()
_PLAINTEXT = KafkaSecurity()


def tcp_check(host: str, port: int) -> Callable[[], Awaitable[None]]:
    async def check() -> None:
        _, writer = await asyncio.open_connection(host, port)
        writer.close()
        await writer.wait_closed()

    return check


def redis_check(client: Client) -> Check:
    async def check() -> None:
        await client.ping()

    return ("redis", check)


def broker_check(bootstrap: str, security: KafkaSecurity = _PLAINTEXT) -> Check:
    """Ready when any bootstrap server answers an authenticated metadata request (the client finds the rest)."""
    hosts = [h.rsplit(":", 1) for h in bootstrap_hosts(bootstrap)]

    async def check() -> None:
        errors = []
        for host, port in hosts:
            try:
                await kafka_metadata(host, int(port), security, timeout=5.0)
                return
            except Exception as exc:  # any failure of this server: try the next, report all
                errors.append(f"{host}:{port}: {type(exc).__name__}: {exc}")
        raise ConnectionError("; ".join(errors) or "no bootstrap servers")

    return ("broker", check)


class Stalled(StreamEvalError, RuntimeError):
    """A batch taken from the input has not been published for too long."""


def stall_check() -> Check:
    """Not ready while the worker's stall watchdog reports a stall (the error says which partitions)."""

    async def check() -> None:
        stall = telemetry.stall()
        if stall is not None:
            raise Stalled(stall)

    return ("pipeline", check)


def judge_checks(base_urls: Sequence[tuple[str, str]]) -> list[Check]:
    """One TCP check per (judge name, base URL)."""
    out: list[Check] = []
    for name, url in base_urls:
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        out.append((f"judge:{name}", tcp_check(parts.hostname or "", port)))
    return out


async def health(request: web.Request) -> web.Response:
    return web.json_response({"status": "ok", "uptimeS": round(time.time() - _STARTED, 3)})


async def ready(request: web.Request) -> web.Response:
    checks = request.app.get(CHECKS_KEY, ())
    timeout = request.app.get(TIMEOUT_KEY, 2.0)

    async def run(check: Callable[[], Awaitable[None]]) -> str | None:
        try:
            await asyncio.wait_for(check(), timeout)
        except Exception as exc:  # any failure means not ready; say which and why
            return f"{type(exc).__name__}: {exc}"[:300] if str(exc) else type(exc).__name__
        return None

    verdicts = await asyncio.gather(*(run(check) for _, check in checks))
    report = {
        name: ({"ok": True} if error is None else {"ok": False, "error": error})
        for (name, _), error in zip(checks, verdicts, strict=True)
    }
    ok = all(error is None for error in verdicts)
    body = {"status": "ready" if ok else "not_ready", "checks": report}
    if not request.app.get(READY_DETAILS_KEY, lambda r: True)(request):  # type: ignore[operator]
        del body["checks"]  # reads need the token: names of judges and errors only with it
    return web.json_response(body, status=200 if ok else 503)


async def metrics(request: web.Request) -> web.Response:
    body = await asyncio.to_thread(telemetry.render)
    return web.Response(body=body, headers={"Content-Type": telemetry.CONTENT_TYPE})


def routes() -> list[web.RouteDef]:
    return [web.get("/health", health), web.get("/ready", ready), web.get("/metrics", metrics)]
