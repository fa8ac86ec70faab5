"""A worker whose suite file has notify: delivers its alerts, then their resolves, on the real broker.

Bad answers fire the rule on a 2 s window; the worker's own notifier (its consumer group, beside the
agent) posts the alert to a signed webhook of the test. Good answers in a later window resolve it: the
resolve is on the alerts topic with the firing alert's id, and the webhook gets it with the same incident.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
import redis.asyncio as aioredis
from _notify_helpers import Receiver
from _support import raw_event, wait_until

from streameval.embedded import EmbeddedBroker
from streameval.kafka_io import collect, ensure_topics, produce
from streameval.models import Alert, format_time

pytestmark = pytest.mark.integration

SIZE = 2


def config(url: str) -> str:
    return f"""
windowing: {{allowed_lateness_s: 1, close_interval_s: 0.2}}
suites:
  - name: qa
    default: true
    evaluators: [{{evaluator: exact_match}}]
alerts:
  - {{name: low-mean, metric: mean_score, comparator: "<", threshold: 0.6, window: {SIZE}, severity: critical}}
notify:
  - name: hook
    kind: webhook
    url: {url}/hook
    signing_secret: s3cret
    severity_at_least: warning
"""


async def redis_now(client: aioredis.Redis) -> float:
    seconds, micros = await client.time()
    return float(seconds) + micros / 1e6


def signed(headers: dict[str, str], body: bytes) -> bool:
    parts = dict(p.split("=", 1) for p in headers["X-Streameval-Signature"].split(","))
    expected = hmac.new(b"s3cret", parts["t"].encode() + b"." + body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, parts["v1"])


async def test_the_worker_delivers_the_alert_and_its_resolve(
    broker: EmbeddedBroker,
    start_worker: Callable[..., Any],
    topics: dict[str, str],
    aredis: aioredis.Redis,
    tmp_path: Path,
) -> None:
    receiver = await Receiver().start()
    suite_file = tmp_path / "suites.yaml"
    suite_file.write_text(config(receiver.url))
    await ensure_topics(broker.bootstrap, topics.values(), partitions=2)
    worker = start_worker(
        suite_file, STREAMEVAL_WINDOWS=str(SIZE), STREAMEVAL_PUBLIC_URL="https://evals.example.com"
    )
    key: Callable[[bytes], bytes] = lambda v: orjson.loads(v)["id"].encode()  # noqa: E731
    try:
        now = await redis_now(aredis)
        bad = [
            raw_event(id=f"bad-{i}", model="m1", output="Rome", expected="Paris", timestamp=format_time(now))
            for i in range(4)
        ]
        await produce(broker.bootstrap, topics["requests"], bad, key=key)

        def events() -> list[str]:
            return [headers["X-Streameval-Event"] for _, headers, _ in receiver.requests]

        await wait_until(
            lambda: "firing" in events(),
            timeout=120,
            what=lambda: f"the alert at the webhook ({worker.log()[-2000:]})",
        )
        now = await redis_now(aredis)
        good = [
            raw_event(
                id=f"good-{i}", model="m1", output="Paris", expected="Paris", timestamp=format_time(now)
            )
            for i in range(4)
        ]
        await produce(broker.bootstrap, topics["requests"], good, key=key)
        await wait_until(lambda: "resolved" in events(), timeout=120, what="the resolve at the webhook")

        firing, resolved = (
            Alert.model_validate_json(
                next(b for _, h, b in receiver.requests if h["X-Streameval-Event"] == s)
            )
            for s in ("firing", "resolved")
        )
        assert resolved.id == firing.id and resolved.status == "resolved" and firing.status == "firing"
        assert resolved.window.start > firing.window.start
        incidents = {h["X-Streameval-Incident"] for _, h, _ in receiver.requests}
        assert incidents == {"streameval:low-mean:2:m1:qa"}
        assert all(signed(h, b) for _, h, b in receiver.requests)
        assert events().count("firing") == 1 and events().count("resolved") == 1
        on_topic = await collect(
            broker.bootstrap, [topics["alerts"]], until=lambda r: len(r) >= 2, timeout=30
        )
        assert [Alert.model_validate_json(r.value).status for r in on_topic] == ["firing", "resolved"]
        assert worker.proc.poll() is None
    finally:
        await receiver.stop()
