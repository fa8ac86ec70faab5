"""Running the notifier: inside the worker, as ``streameval notify``, and ``streameval notify test``.

Built from the settings (the broker, Redis, topics, ``STREAMEVAL_PUBLIC_URL``) and the suite file's
``notify:`` list. Inside the worker a failure of the notifier never stops evaluation: it is logged and
the notifier starts again after a pause (the offsets it did not commit are read again).
"""

from __future__ import annotations

import asyncio
import logging
import signal
import time
import uuid
from collections.abc import Sequence

import httpx

from ... import keyspace
from ...api import load_api_settings
from ...config import load_config
from ...connect_check import check_kafka, check_redis_settings
from ...errors import ConfigError, ConfigIssue, UsageError
from ...kafka_security import KafkaSecurity
from ...models import Alert, AlertWindow, format_time
from ...redis_security import redis_options
from ...settings import Settings
from ._config import ChannelConfig
from ._deliver import send_once
from ._payloads import TEST_RULE, Links, build_request
from ._service import Notifier
from ._web import serve_notify_web, zero_channel_series

__all__ = ["build_notifier", "notify_group", "run_notifier", "run_until_signal", "send_test", "test_alert"]

log = logging.getLogger(__name__)

_RESTART_S = 5.0  # pause before the worker's notifier starts again after a failure


def notify_group(settings: Settings) -> str:
    """The notifier's consumer group: its own, never the evaluating worker's."""
    return f"{settings.app_id}-notify"


def build_notifier(
    settings: Settings,
    channels: Sequence[ChannelConfig],
    client: keyspace.Client,
    *,
    transport: httpx.AsyncBaseTransport | None = None,
) -> Notifier:
    return Notifier(
        channels,
        bootstrap=settings.kafka_bootstrap_servers,
        alerts_topic=settings.topic_alerts,
        deadletter_topic=settings.topic_deadletter,
        group_id=notify_group(settings),
        client=client,
        prefix=settings.redis_prefix,
        public_url=settings.public_url,
        security=KafkaSecurity.from_settings(settings),
        transport=transport,
        max_dead_letter_bytes=settings.dead_letter_max_bytes,
    )


async def run_notifier(
    settings: Settings, channels: Sequence[ChannelConfig], stop: asyncio.Event, *, restart: bool = True
) -> None:
    """Deliver alerts until ``stop``; with ``restart``, a failure is logged and the notifier starts again."""
    if not settings.redis_url:
        raise ConfigError("no Redis: set REDIS_URL (the notifier keeps what each channel took there)")
    zero_channel_series(channels)  # every channel's series from the first scrape (worker and alone)
    client = keyspace.connect(settings.redis_url, max_connections=16, **redis_options(settings))
    try:
        while not stop.is_set():
            try:
                await build_notifier(settings, channels, client).run(stop)
            except Exception as exc:
                if not restart:
                    raise
                log.error("notify: the notifier failed (%r); starting again in %.0f s", exc, _RESTART_S)
                try:
                    await asyncio.wait_for(stop.wait(), _RESTART_S)
                except TimeoutError:
                    pass
    finally:
        await client.aclose()


def _channels(config_file: str) -> tuple[ChannelConfig, ...]:
    config, _ = load_config(config_file)
    if not config.notify:
        raise ConfigError(
            [ConfigIssue(file=config_file, path="notify", message="no channels: nothing to do")]
        )
    return tuple(config.notify)


def run_until_signal(settings: Settings, config_file: str, *, port: int | None = None) -> int:
    """``streameval notify --config FILE [--port PORT]``: deliver until SIGTERM or SIGINT, serving /health and
    /metrics on ``port`` (default ``STREAMEVAL_WEB_PORT``; neither: no server)."""
    channels = _channels(config_file)
    api = load_api_settings()
    port = api.web_port if port is None else port

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        # one line and exit 3 (1: refused) when the broker or Redis is not there, as the worker does
        await check_kafka(settings.kafka_bootstrap_servers, KafkaSecurity.from_settings(settings))
        if settings.redis_url:
            await check_redis_settings(settings.redis_url, redis_options(settings))
        log.warning("notify: delivering alerts of %s to %d channel(s)", settings.topic_alerts, len(channels))
        web = await serve_notify_web(api, port) if port is not None else None
        if web is not None:
            log.warning("notify: /health and /metrics on http://%s:%d", api.web_host, port)
        try:
            await run_notifier(settings, channels, stop, restart=False)
        finally:
            if web is not None:
                await web.cleanup()

    asyncio.run(main())
    return 0


def test_alert(now: float) -> Alert:
    """The clearly marked alert ``streameval notify test`` sends."""
    start = int(now // 60 * 60)
    return Alert(
        id=f"{TEST_RULE}:{uuid.uuid4().hex[:12]}",
        rule=TEST_RULE,
        severity="info",
        metric="mean_score",
        comparator="<",
        threshold=0.6,
        value=0.5,
        count=0,
        model="test-model",
        suite="test-suite",
        window=AlertWindow(size_s=60, start=format_time(start), end=format_time(start + 60)),
        message="TEST notification from streameval notify test: no action needed",
        fired_at=format_time(now),
    )


async def send_test(
    channel: ChannelConfig, settings: Settings, *, transport: httpx.AsyncBaseTransport | None = None
) -> tuple[int | None, str]:
    """Send one test notification to ``channel`` (one attempt); (status, the channel's answer)."""
    request = build_request(channel, test_alert(time.time()), Links(settings.public_url), clock=time.time)
    async with httpx.AsyncClient(transport=transport, follow_redirects=False) as http:
        status, answer, _ = await send_once(http, request, channel.timeout_s)
    return status, answer


def run_test(settings: Settings, config_file: str, name: str | None) -> int:
    """``streameval notify test --config FILE --channel NAME``: print the answer; 0 when it was 2xx."""
    channels = {c.name: c for c in _channels(config_file)}
    if not name:
        raise UsageError(f"pass --channel NAME; channels: {', '.join(channels)}")
    if name not in channels:
        raise UsageError(f"no channel named {name!r}; channels: {', '.join(channels)}")
    status, answer = asyncio.run(send_test(channels[name], settings))
    print(f"{name} ({channels[name].kind}): {answer}")
    return 0 if status is not None and 200 <= status < 300 else 1
