"""The judges behind a real LiteLLM proxy (mock models, both protocols): answers, refusals, 429s, the
models-listing readiness probe, a wrong key and a gateway killed mid-run, each with exact accounting:
every event ends in a result that says what its judges did.

The proxy runs in its own cached virtual environment (tests/integration/litellm_gateway.py).
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _support import raw_event

from streameval.config import parse_config
from streameval.judges import JudgeConfig, JudgeError, JudgeProbe
from streameval.pipeline import Pipeline

from .litellm_gateway import MASTER_KEY, run_gateway

pytestmark = [pytest.mark.integration, pytest.mark.gateway, pytest.mark.slow]

KEY_ENV = "STREAMEVAL_TEST_GATEWAY_KEY"
EVENTS = 200  # for the kill test: 2 in flight, so most are still to come when the gateway dies


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with run_gateway(tmp_path_factory.mktemp("litellm")) as (url, _):
        yield url


def _judge(name: str, url: str, model: str, protocol: str = "openai", **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "protocol": protocol,
        "base_url": f"{url}/v1" if protocol == "openai" else url,
        "model": model,
        "api_key_env": KEY_ENV,
        "timeout_s": 10,
        "retry_wait_s": 0.05,
        "retry_jitter_s": 0,
        "max_retry_after_s": 0.1,
        **extra,
    }


def _events(n: int) -> list[bytes]:
    run = uuid.uuid4().hex[:6]
    return [
        raw_event(
            id=f"g{run}-{i}",
            model="secret-model-name",
            input="Capital of France?",
            output=f"Paris ({i})",
            expected="Paris",
            category="qa_simple",
        )
        for i in range(n)
    ]


def _pipeline(judges: list[dict[str, Any]]) -> Pipeline:
    _, suites = parse_config(
        {
            "judges": judges,
            "suites": [
                {
                    "name": "gw",
                    "default": True,
                    "evaluators": [{"evaluator": "exact_match"}],
                    "judge": {"consistency_rate": 0},
                }
            ],
        }
    )
    return Pipeline(suites)


async def _run(judges: list[dict[str, Any]], raws: list[bytes], key: str) -> list[Any]:
    pipeline = _pipeline(judges)
    os.environ[KEY_ENV] = key
    try:
        await pipeline.start()
        try:
            return list(await asyncio.gather(*(pipeline.process(raw) for raw in raws)))
        finally:
            await pipeline.close()
    finally:
        del os.environ[KEY_ENV]


async def test_both_protocols_refusals_and_429s_through_the_gateway(gateway: str) -> None:
    judges = [
        _judge("gw-openai", gateway, "gw-json", weight=0.25),
        _judge("gw-anthropic", gateway, "gw-json", "anthropic", weight=0.25, structured=True),
        _judge("gw-prose", gateway, "gw-prose", weight=0.25),
        _judge("gw-429", gateway, "gw-429", weight=0.25, attempts=2, max_concurrency=8),
    ]
    raws = _events(20)
    outcomes = await _run(judges, raws, MASTER_KEY)
    assert all(o.result is not None for o in outcomes) and len(outcomes) == 20  # nothing lost
    verdicts = [v for o in outcomes for v in o.result.judge.judges]
    by = {
        name: [v for v in verdicts if v.name == name]
        for name in ("gw-openai", "gw-anthropic", "gw-prose", "gw-429")
    }
    assert all(
        v.status == "ok" and v.parse == "json" and v.score == 7.5
        for v in by["gw-openai"] + by["gw-anthropic"]
    )
    assert all(
        v.status == "ok" and v.parse == "default" and any(w.startswith("refusal: ") for w in v.warnings)
        for v in by["gw-prose"]
    )
    assert all(v.status == "error" and v.error == "judge_rate_limited" for v in by["gw-429"])
    # a refusal and a failed judge: partial, never ok; the panel is the two answers and the midpoint
    assert Counter(o.result.judge.status for o in outcomes) == {"partial": 20}
    assert all(o.result.judge.panel_score == pytest.approx((7.5 + 7.5 + 5.0) / 3) for o in outcomes)


async def test_the_readiness_probe_uses_the_key(gateway: str) -> None:
    for protocol in ("openai", "anthropic"):
        cfg = JudgeConfig.model_validate(_judge("gw", gateway, "gw-json", protocol, weight=1))
        await JudgeProbe(cfg, environ={KEY_ENV: MASTER_KEY})()
        with pytest.raises(JudgeError, match="HTTP 4"):
            await JudgeProbe(cfg, environ={KEY_ENV: "sk-wrong"})()


async def test_a_wrong_key_fails_every_judge_and_every_event_still_has_its_result(gateway: str) -> None:
    judges = [
        _judge("gw-openai", gateway, "gw-json", weight=0.5),
        _judge("gw-anthropic", gateway, "gw-json", "anthropic", weight=0.5),
    ]
    outcomes = await _run(judges, _events(10), "sk-wrong")
    assert all(o.result is not None for o in outcomes) and len(outcomes) == 10
    assert Counter(o.result.judge.status for o in outcomes) == {"failed": 10}
    errors = Counter(v.error for o in outcomes for v in o.result.judge.judges)
    assert sum(errors.values()) == 20 and set(errors) <= {"judge_auth", "judge_http_error"}
    assert all(o.result.score == o.result.judge.metrics_score / 10 for o in outcomes)  # metrics only, said so


async def test_killing_the_gateway_mid_run_loses_nothing(tmp_path: Path) -> None:
    with run_gateway(tmp_path) as (url, proc):
        pipeline = _pipeline(
            [_judge("gw-slow", url, "gw-slow", weight=1, attempts=2, timeout_s=3, max_concurrency=2)]
        )
        os.environ[KEY_ENV] = MASTER_KEY
        try:
            await pipeline.start()
            assert pipeline.judges is not None
            stats = pipeline.judges.stats
            task = asyncio.ensure_future(asyncio.gather(*(pipeline.process(raw) for raw in _events(EVENTS))))
            deadline = asyncio.get_running_loop().time() + 60
            while (
                tally := stats.total.get("gw-slow")
            ) is None or tally.answered < 4:  # a few answered: kill it
                assert asyncio.get_running_loop().time() < deadline and not task.done()
                await asyncio.sleep(0.01)
            proc.kill()
            outcomes = await task
        finally:
            await pipeline.close()
            del os.environ[KEY_ENV]
    assert len(outcomes) == EVENTS and all(o.result is not None for o in outcomes)
    status = Counter(o.result.judge.status for o in outcomes)
    assert set(status) <= {"ok", "failed"} and status["failed"] > 0 and sum(status.values()) == EVENTS
    for o in outcomes:
        [v] = o.result.judge.judges
        assert (o.result.judge.status == "ok") == (v.status == "ok")
        if v.status != "ok":
            assert v.error in ("judge_unavailable", "judge_timeout", "judge_http_error")
