"""A real worker with its web server: /health, /ready, /metrics, the registry API, and a suite step
``evaluator: registered`` that follows an update made through the API without a restart, each result
recording the evaluator version it used."""

from __future__ import annotations

import re
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import yaml
from _support import wait_until

from streameval.embedded import EmbeddedBroker
from streameval.kafka_io import Record, collect, ensure_topics, produce

pytestmark = pytest.mark.integration

TOKEN = "worker-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def scorer(score: float) -> str:
    return (
        f"def evaluate(input, output, expected, metadata):\n    return {{'passed': True, 'score': {score}}}\n"
    )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def metric(text: str, name: str, **labels: str) -> float:
    """The value of one sample of the Prometheus exposition ``text`` (0 when absent)."""
    want = ",".join(f'{k}="{v}"' for k, v in labels.items())
    pattern = re.escape(name) + (r"\{" + re.escape(want) + r"\}" if want else "") + r" ([0-9.e+-]+)$"
    found = re.search(pattern, text, flags=re.M)
    return float(found.group(1)) if found else 0.0


async def test_worker_web_server_and_live_registered_evaluator(
    broker: EmbeddedBroker, start_worker: Callable[..., Any], topics: dict[str, str], tmp_path: Path
) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    config = tmp_path / "suites.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "suites": [
                    {
                        "name": "custom",
                        "default": True,
                        "evaluators": [
                            {"evaluator": "registered", "name": "scorer", "params": {"name": "scorer"}}
                        ],
                    }
                ]
            }
        )
    )
    await ensure_topics(broker.bootstrap, topics.values(), partitions=2)
    async with httpx.AsyncClient(base_url=base, timeout=10) as http:
        worker = start_worker(
            config,
            STREAMEVAL_WEB_PORT=str(port),
            STREAMEVAL_API_TOKEN=TOKEN,
            STREAMEVAL_REGISTRY_RESYNC_S="1",
        )

        async def healthy() -> bool:
            return (await http.get("/health")).status_code == 200

        await wait_until(healthy, timeout=60, what="the worker's /health", ignore=(httpx.TransportError,))
        ready = (await http.get("/ready")).json()
        assert ready["status"] == "ready" and set(ready["checks"]) == {"redis", "broker", "pipeline"}, ready

        # the worker's own server serves the registry API
        body = {"name": "scorer", "type": "code", "config": {"language": "python", "code": scorer(0.25)}}
        created = (await http.post("/api/v1/evaluators", json=body, headers=AUTH)).json()["data"]

        results: list[dict[str, Any]] = []

        def keep(record: Record) -> None:
            if record.topic == topics["results"]:
                results.append(orjson.loads(record.value))

        await produce(
            broker.bootstrap, topics["requests"], [orjson.dumps({"id": "e-1", "model": "m", "output": "x"})]
        )
        await collect(
            broker.bootstrap, [topics["results"]], until=lambda r: len(r) >= 1, timeout=90, on_record=keep
        )
        [first] = [r["evaluators"][0] for r in results]
        assert first["score"] == 0.25 and first["version"] == f"{created['id']}@1" and first["error"] is None

        update = {"config": {"language": "python", "code": scorer(0.75)}}
        assert (
            await http.put(f"/api/v1/evaluators/{created['id']}", json=update, headers=AUTH)
        ).status_code == 200

        # no restart: events produced after the update soon run version 2 (pub/sub, else the 1 s resync)
        sent = 1
        deadline = time.monotonic() + 30
        while not any(r["evaluators"][0]["version"].endswith("@2") for r in results):
            assert time.monotonic() < deadline, results
            sent += 1
            await produce(
                broker.bootstrap,
                topics["requests"],
                [orjson.dumps({"id": f"e-{sent}", "model": "m", "output": "x"})],
            )
            results.clear()
            await collect(
                broker.bootstrap,
                [topics["results"]],
                until=lambda r, n=sent: len(r) >= n,
                timeout=60,
                on_record=keep,
            )
        by_version = {r["evaluators"][0]["version"]: r["evaluators"][0]["score"] for r in results}
        assert by_version[f"{created['id']}@2"] == 0.75 and by_version[f"{created['id']}@1"] == 0.25
        order = [
            r["evaluators"][0]["version"] for r in sorted(results, key=lambda r: int(r["id"].split("-")[1]))
        ]
        assert order == sorted(order, key=lambda v: v.endswith("@2")), "a result went back to version 1"

        await produce(broker.bootstrap, topics["requests"], [b"not json"])

        async def metrics_settled() -> str | None:
            text = (await http.get("/metrics")).text
            return text if metric(text, "streameval_dead_letters_total", kind="invalid_json") == 1 else None

        text = await wait_until(
            metrics_settled, timeout=60, what="the dead letter in /metrics", ignore=(httpx.TransportError,)
        )
        assert metric(text, "streameval_events_in_total") == sent + 1
        assert metric(text, "streameval_results_out_total", suite="custom") == sent
        assert metric(text, "streameval_evaluator_latency_seconds_count", evaluator="scorer") == sent
        assert metric(text, "streameval_events_in_flight") == 0
        # quality by model and suite, for Grafana (deploy/grafana): every result so far was model "m"
        assert metric(text, "streameval_result_score_count", model="m", suite="custom") == sent
        grades = re.findall(
            r'^streameval_result_grades_total{grade="[^"]+",model="m",suite="custom"} (\S+)$|'
            r'^streameval_result_grades_total{model="m",suite="custom",grade="[^"]+"} (\S+)$',
            text,
            flags=re.M,
        )
        assert sum(float(a or b) for a, b in grades) == sent, text
        lags = re.findall(
            rf'^streameval_consumer_lag{{partition="\d",topic="{re.escape(topics["requests"])}"}} (\S+)$',
            text,
            flags=re.M,
        )
        assert lags and all(float(v) == 0 for v in lags), text  # caught up after the last batch

        # a deleted evaluator fails the step with not_found (the evaluator-module spec: 503001); the stream goes on
        assert (await http.delete(f"/api/v1/evaluators/{created['id']}", headers=AUTH)).status_code == 200
        deadline = time.monotonic() + 30
        while not any(r["evaluators"][0]["error"] == "not_found" for r in results):
            assert time.monotonic() < deadline, results
            sent += 1
            await produce(
                broker.bootstrap,
                topics["requests"],
                [orjson.dumps({"id": f"e-{sent}", "model": "m", "output": "x"})],
            )
            results.clear()
            await collect(
                broker.bootstrap,
                [topics["results"]],
                until=lambda r, n=sent: len(r) >= n,
                timeout=60,
                on_record=keep,
            )
        assert worker.stop() == 0
