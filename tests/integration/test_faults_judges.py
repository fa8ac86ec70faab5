"""Judges failing 30 % of the time (5xx, 429, timeouts, garbage) (docs/reliability.md): no stall, fallbacks shown.

Two simulated judges (streameval.judges.sim, labelled simulated) answer 10 % of requests with a 500,
8 % with a 429, let 6 % hang past the judge timeout and give 6 % malformed bodies (prose, fences,
broken JSON, garbage); sim-a retries once, sim-b not at all, so whole-panel failures happen too
(~1.4 % of events). Every event must still get its result, and each result's ``judge`` block must
say what was used: the panel (ok), the panel without the failed judges (partial, with their errors),
or the rule metrics alone (failed: the report-quality spec's fallback, final = metrics).
"""

from __future__ import annotations

import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from streameval.embedded import EmbeddedBroker
from streameval.judges.sim import start_judge_sim
from streameval.kafka_io import ensure_topics, produce
from streameval.models import GradedResult

from .faults_support import LiveReader, write_config

pytestmark = [pytest.mark.integration, pytest.mark.faults]

EVENTS = 800
JUDGE = (
    "{{name: {name}, protocol: {protocol}, base_url: '{url}', model: simulated-{name}, weight: 0.5, "
    "timeout_s: 0.5, attempts: {attempts}, retry_wait_s: 0.05, retry_jitter_s: 0, max_retry_after_s: 0.1}}"
)


async def test_failing_judges_do_not_stall_and_results_say_what_was_used(
    broker: EmbeddedBroker,
    start_worker: Callable[..., Any],
    topics: dict[str, str],
    tmp_path: Path,
) -> None:
    run = uuid.uuid4().hex[:6]
    # distinct outputs: the judge cache must not answer for the judges
    events = [
        orjson.dumps(
            {
                "id": f"j{run}-{i}",
                "model": "m",
                "input": f"Capital of France? ({i})",
                "output": f"Paris, answer {i}",
                "expected": "Paris",
                "category": "qa_simple",
            }
        )
        for i in range(EVENTS)
    ]
    await ensure_topics(broker.bootstrap, topics.values(), partitions=2)
    sim = {
        "error_rate": 0.10,
        "rate_limit_rate": 0.08,
        "timeout_rate": 0.06,
        "malformed_rate": 0.06,
        "hang_s": 2.0,
        "retry_after_s": 0.1,
        "seed": 8,
    }
    async with start_judge_sim(**sim) as url:
        judges = [
            JUDGE.format(name="sim-a", protocol="openai", url=f"{url}/v1", attempts=2),
            JUDGE.format(name="sim-b", protocol="anthropic", url=url, attempts=1),
        ]
        config = write_config(
            tmp_path,
            f"""
judges: [{", ".join(judges)}]
suites:
  - name: qa
    default: true
    evaluators: [{{evaluator: exact_match}}, {{evaluator: token_f1}}]
    judge: {{min_judges: 1, consistency_rate: 0}}
""",
        )
        async with LiveReader(broker.bootstrap, topics["results"], topics["deadletter"]) as reader:
            await produce(broker.bootstrap, topics["requests"], events)
            start = time.monotonic()
            worker = start_worker(config)
            await reader.wait(EVENTS, timeout=240, what="every judged event")
            took = time.monotonic() - start
            records = await reader.quiesce(idle=1.0)
        assert worker.stop() == 0
    results = [GradedResult.model_validate_json(r.value) for r in records if r.topic == topics["results"]]
    assert not reader.dead and len({r.id for r in results}) == EVENTS
    status = Counter(r.judge.status for r in results if r.judge)
    errors = Counter(
        (v.error or "?").split(":")[0] for r in results if r.judge for v in r.judge.judges if v.status != "ok"
    )
    parses = Counter(v.parse for r in results if r.judge for v in r.judge.judges if v.status == "ok")
    sys.stderr.write(
        f"\njudges failing 30 %: {EVENTS} events in {took:.1f} s; panel {dict(status)}; "
        f"judge errors {dict(errors)}; parsed by {dict(parses)}\n"
    )
    assert sum(status.values()) == EVENTS
    assert status["ok"] and status["partial"] and status["failed"], status
    for result in results:
        block = result.judge
        assert block is not None
        failed = [v for v in block.judges if v.status != "ok"]
        if block.status == "failed":  # the rule metrics alone, and the result says so
            assert "metrics only (fallback)" in block.reason
            assert block.final_score == pytest.approx(block.metrics_score) and block.panel_score is None
        if block.status == "partial":  # a judge failed, or answered without judging (refusal, no score)
            unscored = [
                v
                for v in block.judges
                if v.status == "ok"
                and (v.parse == "default" or any(w.startswith("refusal: ") for w in v.warnings))
            ]
            assert failed or unscored
            if failed:
                assert f"{len(failed)} of 2 judge(s) gave no score" in block.reason
            if unscored:
                assert "gave no judgement" in block.reason and "counted as the midpoint" in block.reason
        assert all(v.error for v in failed), block
    assert len(errors) >= 2  # several kinds of failure really happened
