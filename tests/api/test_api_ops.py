"""Operations endpoints, telemetry, the live registry and the ``registered`` evaluator (real Redis)."""

from __future__ import annotations

import re
import socket
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis
from _support import wait_until
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client import REGISTRY
from pydantic import ValidationError

from streameval import telemetry
from streameval.api import ApiSettings, create_web_app
from streameval.api._ops import tcp_check
from streameval.errors import ConfigError, EvaluatorError
from streameval.evaluators import build_evaluator
from streameval.judges import PANEL_RESULT_NAME, judge_counters, repeat_counters
from streameval.models import (
    DeadLetter,
    DeadLetterSource,
    GradedResult,
    JudgeBlock,
    JudgeVerdict,
    RequestEvent,
)
from streameval.pipeline import Outcome
from streameval.registry import CodeConfig, LiveRegistry, RegistryStore, bind_live_registry

ROOT = Path(__file__).resolve().parents[2]
PY = "def evaluate(input, output, expected, metadata):\n    return {'passed': True, 'score': %s}\n"


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # closed again when the block ends


async def test_health_ready_and_metrics(aredis: aioredis.Redis, prefix: str) -> None:
    async def fails() -> None:
        raise ConnectionError("judge down")

    checks = [("judge:a", fails), ("broker", tcp_check("127.0.0.1", closed_port()))]
    async with (
        TestClient(TestServer(create_web_app(aredis, prefix=prefix, token=None))) as ok,
        TestClient(TestServer(create_web_app(aredis, prefix=prefix, token=None, checks=checks))) as bad,
    ):
        assert (await (await ok.get("/health")).json())["status"] == "ok"
        resp = await ok.get("/ready")
        assert resp.status == 200 and (await resp.json())["checks"] == {"redis": {"ok": True}}
        resp = await bad.get("/ready")
        body = await resp.json()
        assert resp.status == 503 and body["status"] == "not_ready"
        assert body["checks"]["redis"] == {"ok": True}
        assert body["checks"]["judge:a"] == {"ok": False, "error": "ConnectionError: judge down"}
        assert body["checks"]["broker"]["ok"] is False
        resp = await ok.get("/metrics")
        assert resp.status == 200 and resp.headers["Content-Type"].startswith("text/plain")
        text = await resp.text()
        for name in (
            "streameval_events_in_total",
            "streameval_events_in_flight",
            "streameval_consumer_lag",
            "streameval_evaluator_latency_seconds",
            "streameval_judge_tokens_total",
        ):
            assert re.search(rf"^# TYPE {name} ", text, flags=re.M), name
        assert "_created" not in text  # no creation-time series: they double the series for nothing


async def test_ready_reports_redis_down(prefix: str) -> None:
    dead = aioredis.Redis(host="127.0.0.1", port=closed_port(), socket_connect_timeout=0.5)
    async with TestClient(TestServer(create_web_app(dead, prefix=prefix, token=None))) as c:
        resp = await c.get("/ready")
        assert resp.status == 503 and (await resp.json())["checks"]["redis"]["ok"] is False
        resp = await c.get("/api/v1/evaluators", params={"type": "code"})
        assert resp.status == 503 and (await resp.json())["code"] == 503
    await dead.aclose()


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def verdict(name: str, **kw: Any) -> JudgeVerdict:
    base: dict[str, Any] = {
        "name": name,
        "model": "m",
        "weight": 0.5,
        "status": "ok",
        "prompt": "standard",
        "scale": "0-10",
    }
    return JudgeVerdict(**{**base, **kw})


def test_observe_outcomes_counts_results_dead_letters_and_judges() -> None:
    verdicts = [
        verdict("tj-a", attempts=3, prompt_tokens=10, completion_tokens=4),
        verdict("tj-b", cached=True),
        verdict("tj-c", status="error", attempts=3, error="timeout"),
    ]
    block = JudgeBlock(
        status="partial",
        mode="blend",
        prompt="rubric",
        category=None,
        panel_score=5.0,
        metrics_score=5.0,
        final_score=5.0,
        reason="r",
        fallbacks=[],
        judges=verdicts,
    )
    result = GradedResult(
        id="x",
        model="m",
        suite="tel-suite",
        score=0.5,
        passed=False,
        threshold=0.6,
        grade="fail",
        evaluators=[],
        event_time="2026-01-01T00:00:00Z",
        evaluated_at="2026-01-01T00:00:00Z",
        latency_ms=1.0,
        pipeline_version="t",
        judge=block,
    )
    letter = DeadLetter(
        raw="",
        reason="r",
        kind="no_suite",
        event_id=None,
        source=DeadLetterSource(),
        failed_at="2026-01-01T00:00:00Z",
        pipeline_version="t",
    )
    # the panel's own window counters (as the pipeline computes them), plus a consistency repeat of
    # tj-a and a price: telemetry observes exactly these
    counters = judge_counters(verdicts)
    for name, value in repeat_counters(verdicts[:1], [verdict("tj-a", attempts=1, prompt_tokens=7)]).items():
        counters[name] = counters.get(name, 0.0) + value
    counters["tj-a.cost"] = 17.0  # add_costs: 17 prompt tokens at a million per million
    outcome = Outcome(result=result, counters={PANEL_RESULT_NAME: counters})

    def samples() -> list[float]:
        return [
            sample("streameval_results_out_total", suite="tel-suite"),
            sample("streameval_dead_letters_total", kind="no_suite"),
            sample("streameval_judge_calls_total", judge="tj-a"),
            sample("streameval_judge_retries_total", judge="tj-a"),
            sample("streameval_judge_tokens_total", judge="tj-a", kind="prompt"),
            sample("streameval_judge_cost_total", judge="tj-a"),
            sample("streameval_judge_cache_hits_total", judge="tj-b"),
            sample("streameval_judge_calls_total", judge="tj-b"),
            sample("streameval_judge_errors_total", judge="tj-c"),
            sample("streameval_judge_calls_total", judge="tj-c"),
        ]

    before = samples()
    telemetry.observe_outcomes([outcome, Outcome(dead_letter=letter), outcome])
    # tj-a: 1 call + 1 repeat, 2 retries, 10 + 7 prompt tokens, 17 money; tj-b: a cache hit, no call
    assert [a - b for a, b in zip(samples(), before, strict=True)] == [2, 1, 4, 4, 34, 34, 2, 0, 2, 2]
    assert telemetry.PANEL_COUNTERS == PANEL_RESULT_NAME


def test_observe_lag_uses_the_last_offset_per_partition() -> None:
    marks = {("tl", 0): 10, ("tl", 1): None}
    telemetry.observe_lag(
        [("tl", 0, 3), ("tl", 0, 7), ("tl", 1, 2), (None, None, None)], lambda t, p: marks[(t, p)]
    )
    assert sample("streameval_consumer_lag", topic="tl", partition="0") == 2  # offsets 8 and 9 are waiting
    assert REGISTRY.get_sample_value("streameval_consumer_lag", {"topic": "tl", "partition": "1"}) is None


def test_timed_call_observes_failures_too() -> None:
    before = sample("streameval_evaluator_latency_seconds_count", evaluator="tt")

    def boom(_: int) -> None:
        raise ValueError("x")

    with pytest.raises(ValueError):
        telemetry.timed_call("tt", boom, 1)
    assert sample("streameval_evaluator_latency_seconds_count", evaluator="tt") == before + 1


async def test_live_registry_follows_changes_by_pubsub(aredis: aioredis.Redis, prefix: str) -> None:
    store = RegistryStore(aredis, prefix=prefix)
    live = LiveRegistry(store, resync_s=60)  # only pub/sub can bring changes within the test's deadline
    await live.start()
    try:
        record = await store.create(
            name="n1", description=None, config=CodeConfig(language="python", code=PY % 1)
        )
        await wait_until(
            lambda: live.get(evaluator_id=record.id) is not None, timeout=10, what="the new evaluator"
        )
        updated = await store.update(record, name="n2")
        await wait_until(
            lambda: (r := live.get(name="n2")) is not None and r.version == 2, timeout=10, what="the rename"
        )
        assert live.get(name="n1") is None and updated.version_tag == f"{record.id}@2"
        await store.delete(updated)
        await wait_until(lambda: live.get(evaluator_id=record.id) is None, timeout=10, what="the deletion")
    finally:
        await live.close()


async def test_registered_evaluator_runs_the_current_version(aredis: aioredis.Redis, prefix: str) -> None:
    store = RegistryStore(aredis, prefix=prefix)
    record = await store.create(
        name="half", description=None, config=CodeConfig(language="python", code=PY % 0.5)
    )
    live = LiveRegistry(store, resync_s=60)
    await live.start()
    bind_live_registry(live)
    evaluator = build_evaluator("registered", {"name": "half"})
    by_id = build_evaluator("registered", {"id": record.id})
    event = RequestEvent(id="e", model="m", output="o")
    try:
        await evaluator.start()
        await by_id.start()
        first = await evaluator.aevaluate(event)
        assert (first.score, first.version) == (0.5, f"{record.id}@1")
        await store.update(record, config=CodeConfig(language="python", code=PY % 0.9))
        await wait_until(
            lambda: (r := live.get(name="half")) is not None and r.version == 2, timeout=10, what="version 2"
        )
        second = await by_id.aevaluate(event)
        assert (second.score, second.version) == (0.9, f"{record.id}@2")
        missing = build_evaluator("registered", {"name": "nope"})
        await missing.start()
        with pytest.raises(EvaluatorError) as info:
            await missing.aevaluate(event)
        assert info.value.code == "not_found"
    finally:
        await evaluator.close()
        await by_id.close()
        bind_live_registry(None)
        await live.close()


async def test_registered_evaluator_refuses_to_start_offline() -> None:
    evaluator = build_evaluator("registered", {"name": "x"})
    with pytest.raises(ConfigError, match="cannot run offline"):
        await evaluator.start()


@pytest.mark.parametrize("params", [{}, {"id": "a", "name": "b"}, {"name": ""}, {"name": "a", "extra": 1}])
def test_registered_params_need_exactly_one_reference(params: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        build_evaluator("registered", params)


@pytest.mark.parametrize("name", sorted(ApiSettings.model_fields))
def test_every_api_setting_is_documented(name: str) -> None:
    assert f"`STREAMEVAL_{name.upper()}`" in (ROOT / "docs" / "api.md").read_text(encoding="utf-8")


def test_offline_evaluate_refuses_registered_with_exit_2(tmp_path: Path) -> None:
    from streameval.cli import main

    config = tmp_path / "suites.yaml"
    config.write_text(
        "suites:\n  - {name: s, default: true, evaluators: [{evaluator: registered, params: {name: x}}]}\n"
    )
    events = tmp_path / "in.jsonl"
    events.write_text('{"id": "1", "model": "m", "output": "x"}\n')
    code = main(
        [
            "evaluate",
            "--config",
            str(config),
            "--input",
            str(events),
            "--output",
            str(tmp_path / "out.jsonl"),
            "--quiet",
        ]
    )
    assert code == 2 and not (tmp_path / "out.jsonl").exists()
