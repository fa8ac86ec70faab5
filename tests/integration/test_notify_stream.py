"""The notifier on the real broker (Tansu) and Redis, with local receivers on loopback.

- A channel that never answers ends each notification as a dead letter naming it and its last answer,
  while another channel keeps delivering; offsets are committed only once both are done.
- ``streameval notify`` killed with SIGKILL mid-delivery and started again: every alert reaches the
  PagerDuty-format receiver, and every repeat carries the same dedup key.
"""

from __future__ import annotations

import asyncio
import base64
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections import defaultdict
from pathlib import Path

import httpx
import orjson
import pytest
import redis.asyncio as aioredis
from _notify_helpers import Receiver, alert, wait_for
from aiohttp import web
from aiokafka import AIOKafkaConsumer, TopicPartition

from streameval.embedded import EmbeddedBroker
from streameval.features.notify import ChannelConfig, Notifier, incident_key
from streameval.kafka_io import collect, ensure_topics, produce
from streameval.models import DeadLetter

pytestmark = pytest.mark.integration


async def publish_alerts(bootstrap: str, topic: str, n: int, run: str) -> list[str]:
    alerts = [alert(id=f"{run}-{i}", model=f"m{i}") for i in range(n)]
    await produce(
        bootstrap,
        topic,
        [a.model_dump_json().encode() for a in alerts],
        key=lambda v: orjson.loads(v)["id"].encode(),
    )
    return [a.id for a in alerts]


async def test_a_channel_that_never_answers_becomes_dead_letters_while_another_delivers(
    broker: EmbeddedBroker, aredis: aioredis.Redis, prefix: str, topics: dict[str, str]
) -> None:
    hang = asyncio.Event()

    async def never(request: web.Request, body: bytes) -> web.StreamResponse:
        await hang.wait()
        return web.Response(status=200)

    stuck, good = await Receiver(never).start(), await Receiver().start()
    await ensure_topics(broker.bootstrap, [topics["alerts"], topics["deadletter"]])
    channels = [
        ChannelConfig(
            name="stuck",
            kind="webhook",
            url=stuck.url + "/h",
            signing_secret="k",
            max_attempts=2,
            timeout_s=0.5,
        ),  # type: ignore[arg-type]
        ChannelConfig(name="good", kind="slack", url=good.url + "/slack"),  # type: ignore[arg-type]
    ]
    notifier = Notifier(
        channels,
        bootstrap=broker.bootstrap,
        alerts_topic=topics["alerts"],
        deadletter_topic=topics["deadletter"],
        group_id=f"g-{uuid.uuid4().hex[:8]}",
        client=aredis,
        prefix=prefix,
        base_delay_s=0.05,
    )
    stop = asyncio.Event()
    task = asyncio.create_task(notifier.run(stop))
    try:
        ids = await publish_alerts(broker.bootstrap, topics["alerts"], 6, uuid.uuid4().hex[:6])
        await wait_for(lambda: len(good.requests) >= 1, 60, "the group's join and a first delivery")
        began = time.monotonic()
        await wait_for(lambda: len(good.requests) == 6, 60, "the good channel's deliveries")
        good_done = time.monotonic() - began
        assert len(good.requests) == 6
        letters = [
            DeadLetter.model_validate_json(r.value)
            for r in await collect(
                broker.bootstrap, [topics["deadletter"]], until=lambda rs: len(rs) >= 6, timeout=60
            )
        ]
        assert sorted(d.event_id or "" for d in letters) == sorted(ids)
        for letter in letters:
            assert letter.kind == "undelivered"
            assert letter.reason.startswith(
                "channel stuck (webhook): firing notification not delivered after 2 attempt(s)"
            )
            assert letter.reason.endswith("last answer: timeout after 0.5 s")
            assert orjson.loads(base64.b64decode(letter.raw))["id"] == letter.event_id  # the alert itself
            assert letter.source.topic == topics["alerts"]
        assert len(stuck.requests) == 12  # two attempts each, nothing more
        print(
            f"\ngood channel: 6 delivered {good_done:.2f} s after its first while the other timed out twice each"
        )
    finally:
        stop.set()
        hang.set()
        await asyncio.wait_for(task, 30)
        await stuck.stop()
        await good.stop()
    # every offset was committed once both channels were done with it (dead letter or 2xx)
    consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=notifier.group_id)
    await consumer.start()
    try:
        assert await consumer.committed(TopicPartition(topics["alerts"], 0)) == 6
    finally:
        await consumer.stop()


def write_suite(path: Path, pd_url: str) -> Path:
    path.write_text(
        f"""
suites:
  - name: qa
    default: true
    evaluators: [{{evaluator: exact_match}}]
notify:
  - name: oncall
    kind: pagerduty
    url: {pd_url}/v2/enqueue
    routing_key: R0UTING
    rate_per_min: 600
"""
    )
    return path


async def test_notify_killed_mid_delivery_loses_nothing_and_repeats_the_same_dedup_key(
    broker: EmbeddedBroker, redis_url: str, prefix: str, topics: dict[str, str], tmp_path: Path
) -> None:
    seen: dict[str, set[str]] = defaultdict(set)  # alert id -> dedup keys it came with
    count: dict[str, int] = defaultdict(int)
    held, release = asyncio.Event(), asyncio.Event()

    async def pagerduty(request: web.Request, body: bytes) -> web.StreamResponse:
        doc = orjson.loads(body)
        # the documented Events API v2 trigger
        assert doc["routing_key"] == "R0UTING" and doc["event_action"] == "trigger"
        assert {"summary", "source", "severity"} <= set(doc["payload"])
        alert_id = doc["payload"]["custom_details"]["alert_id"]
        seen[alert_id].add(doc["dedup_key"])
        count[alert_id] += 1
        if len(count) == 11 and not held.is_set():  # received, but answered only after the kill
            held.set()
            await release.wait()
        return web.json_response({"status": "success", "dedup_key": doc["dedup_key"]}, status=202)

    receiver = await Receiver(pagerduty).start()
    await ensure_topics(broker.bootstrap, [topics["alerts"], topics["deadletter"]])
    config = write_suite(tmp_path / "suites.yaml", receiver.url)
    env = {
        **os.environ,
        "KAFKA_BOOTSTRAP_SERVERS": broker.bootstrap,
        "REDIS_URL": redis_url,
        "STREAMEVAL_REDIS_PREFIX": prefix,
        "STREAMEVAL_APP_ID": f"n-{uuid.uuid4().hex[:8]}",
        "STREAMEVAL_TOPIC_ALERTS": topics["alerts"],
        "STREAMEVAL_TOPIC_DEADLETTER": topics["deadletter"],
        "STREAMEVAL_BROKER_SESSION_TIMEOUT": "10",
    }
    logs = [tmp_path / "notify-0.log", tmp_path / "notify-1.log"]

    def start(i: int) -> subprocess.Popen[bytes]:
        with logs[i].open("wb") as out:
            return subprocess.Popen(
                [sys.executable, "-m", "streameval", "notify", "--config", str(config)],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )

    n = 40
    first = start(0)
    second = None
    try:
        ids = await publish_alerts(broker.bootstrap, topics["alerts"], n, uuid.uuid4().hex[:6])
        await wait_for(held.is_set, 90, "the first deliveries")
        first.send_signal(signal.SIGKILL)  # mid-delivery: one request unanswered, 600 a minute for 40 alerts
        first.wait(10)
        release.set()
        delivered_before = len(count)
        assert delivered_before < n, "the notifier finished before it was killed"
        second = start(1)
        await wait_for(lambda: len(count) == n, 120, "every alert after the restart")
        assert set(count) == set(ids)  # nothing lost
        for alert_id, keys in seen.items():
            assert keys == {incident_key(alert(id=alert_id, model=f"m{alert_id.rsplit('-', 1)[1]}"))}
        repeats = sum(c - 1 for c in count.values())
        print(
            f"\nkilled after {delivered_before}/{n} alerts; after the restart {n}/{n}, {repeats} repeat(s), same dedup keys"
        )
        # the request unanswered at the kill is sent again (same dedup key); at most what was in flight
        assert 1 <= repeats <= 8
    except BaseException:
        for path in logs:
            if path.exists():
                sys.stderr.write(f"--- {path.name} ---\n{path.read_text(errors='replace')[-3000:]}\n")
        raise
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(20)
                except subprocess.TimeoutExpired:
                    proc.kill()
        await receiver.stop()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_notify_alone_serves_the_per_channel_metrics(
    broker: EmbeddedBroker, redis_url: str, prefix: str, topics: dict[str, str], tmp_path: Path
) -> None:
    async def pagerduty(request: web.Request, body: bytes) -> web.StreamResponse:
        return web.json_response({"status": "success"}, status=202)

    receiver = await Receiver(pagerduty).start()
    await ensure_topics(broker.bootstrap, [topics["alerts"], topics["deadletter"]])
    config = write_suite(tmp_path / "suites.yaml", receiver.url)
    port = _free_port()
    env = {
        **os.environ,
        "KAFKA_BOOTSTRAP_SERVERS": broker.bootstrap,
        "REDIS_URL": redis_url,
        "STREAMEVAL_REDIS_PREFIX": prefix,
        "STREAMEVAL_APP_ID": f"n-{uuid.uuid4().hex[:8]}",
        "STREAMEVAL_TOPIC_ALERTS": topics["alerts"],
        "STREAMEVAL_TOPIC_DEADLETTER": topics["deadletter"],
        "STREAMEVAL_BROKER_SESSION_TIMEOUT": "10",
    }
    log = tmp_path / "notify.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "streameval", "notify", "--config", str(config), "--port", str(port)],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    url = f"http://127.0.0.1:{port}/metrics"
    scraped = {"text": ""}

    async def scrape() -> str:
        try:
            async with httpx.AsyncClient() as http:
                response = await http.get(url, timeout=2)
        except httpx.HTTPError:
            return ""
        return response.text if response.status_code == 200 else ""

    try:
        deadline = time.monotonic() + 60
        while 'streameval_notify_sent_total{channel="oncall"} 0.0' not in scraped["text"]:
            assert proc.poll() is None and time.monotonic() < deadline, "no /metrics before the first alert"
            scraped["text"] = await scrape()
            await asyncio.sleep(0.2)
        await publish_alerts(broker.bootstrap, topics["alerts"], 3, uuid.uuid4().hex[:6])
        deadline = time.monotonic() + 90
        while 'streameval_notify_sent_total{channel="oncall"} 3.0' not in scraped["text"]:
            assert proc.poll() is None and time.monotonic() < deadline, scraped["text"][-2000:]
            scraped["text"] = await scrape()
            await asyncio.sleep(0.2)
        assert 'streameval_notify_latency_seconds_count{channel="oncall"} 3.0' in scraped["text"]
        assert 'streameval_notify_dead_lettered_total{channel="oncall"} 0.0' in scraped["text"]
    except BaseException:
        sys.stderr.write(f"--- notify.log ---\n{log.read_text(errors='replace')[-3000:]}\n")
        raise
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
        await receiver.stop()
