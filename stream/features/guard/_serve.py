"""``streameval guard`` (docs/guard.md): the check endpoint alone, stateless, in several processes on one port.

The parent loads the suite file (a bad file stops here, exit 2), binds the port with ``SO_REUSEPORT`` without
listening (it only holds the port, so ``--port 0`` picks one for all) and forks the server processes; each
binds its own listening socket on that port with ``SO_REUSEPORT``, so the kernel spreads new connections
over them evenly. A server process that dies stops the others and the parent exits 1 (an orchestrator
restarts the whole); SIGTERM or SIGINT stops them all, exit 0. No Redis; a Kafka producer only when a suite
says ``publish: true``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import sys
from collections.abc import Callable

from aiohttp import web

from ..._util import freeze_heap
from ...api import ApiSettings
from ...config_loaded import LoadedConfig
from ...kafka_security import KafkaSecurity
from ...settings import Settings
from ._check import Guard
from ._config import GuardConfig, guard_section
from ._publish import KafkaPublisher
from ._web import guard_app

__all__ = ["build_guard", "serve_guard"]

log = logging.getLogger("streameval.guard")


def build_guard(suites: LoadedConfig, settings: Settings, api: ApiSettings) -> Guard:
    """The checker of ``suites`` with the settings' limits, and a publisher when a suite publishes."""
    publish = any((guard_section(s) or GuardConfig()).publish for s in suites.all)
    publisher = (
        KafkaPublisher(
            settings.kafka_bootstrap_servers, settings.topic_requests, KafkaSecurity.from_settings(settings)
        )
        if publish
        else None
    )
    return Guard(
        suites,
        publisher=publisher,
        max_body_bytes=api.guard_max_body_bytes,
        max_text_chars=api.guard_max_text_chars,
        log_texts=api.guard_log_texts,
    )


def _socket(host: str, port: int, *, listen: bool) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    if listen:
        sock.listen(1024)
        sock.setblocking(False)
    return sock


async def _serve_one(make: Callable[[], Guard], api: ApiSettings, host: str, port: int) -> None:
    guard = make()
    await guard.start()
    sock = _socket(host, port, listen=True)
    runner = web.AppRunner(guard_app(guard, api.guard_identities()), access_log=None)
    await runner.setup()
    await web.SockSite(runner, sock).start()
    freeze_heap()  # configured: full collections skip the start-up heap from now on
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await runner.cleanup()
        await guard.close()


def _child(make: Callable[[], Guard], api: ApiSettings, host: str, port: int) -> int:
    try:
        asyncio.run(_serve_one(make, api, host, port))
    except Exception:
        log.exception("guard server process %d failed", os.getpid())
        return 1
    return 0


def serve_guard(
    suites: LoadedConfig, settings: Settings, api: ApiSettings, *, host: str, port: int, workers: int
) -> int:
    """Serve until SIGTERM/SIGINT (module docstring); the exit code."""

    def make() -> Guard:
        return build_guard(suites, settings, api)

    make()  # a bad limit or a publish setting fails here, before any process starts
    reserved = _socket(host, port, listen=False)
    port = reserved.getsockname()[1]
    count = workers or os.cpu_count() or 1
    children: dict[int, int] = {}
    for index in range(count):
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the server process (measured by the tests through its port)
            reserved.close()
            os._exit(_child(make, api, host, port))
        children[pid] = index
    log.warning(
        "streameval guard on http://%s:%d (%d processes; checks %s)",
        host,
        port,
        count,
        "need a bearer token" if api.guard_identities().tokens else "refused: no token configured",
    )
    print(f"streameval guard listening on http://{host}:{port}", file=sys.stderr, flush=True)
    stopping = False

    def stop(signum: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True
        for pid in children:
            _kill(pid, signal.SIGTERM)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    code = 0
    while children:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            break
        children.pop(pid, None)
        if not stopping:
            log.error("guard server process %d exited (status %d); stopping the others", pid, status)
            stop(signal.SIGTERM, None)
            code = 1
    reserved.close()
    return code


def _kill(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass
