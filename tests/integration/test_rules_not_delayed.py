"""Rule results are never delayed by judges: a stream mixing a rule-only suite, a judged suite (half
of it sampled) and bad events, with a scripted judge that takes 5 s per answer.

Every result that needs no judge call (the rule suite, the judged suite's unsampled events) and every
dead letter must be on the results topics before the first judged result, although judged events
sit in the same batches, before them; and the exact accounting still holds: N events in -> one result
per valid event + one dead letter per bad one, counted once in Redis, and a replay with a new consumer
group publishes no result again (the broker has them), only the dead letters, and changes no count.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
import redis.asyncio as aioredis

from streameval.embedded import EmbeddedBroker
from streameval.judges import sampled
from streameval.judges.sim import start_judge_sim
from streameval.kafka_io import ensure_topics, produce

from .faults_support import LiveReader, account, make_stream, write_config

pytestmark = [pytest.mark.integration]

RULE_EVENTS, JUDGED_EVENTS, BAD_EVENTS = 240, 60, 20
SAMPLE_RATE = 0.5
JUDGE_LATENCY_MS = 5000


def _config(url: str) -> str:
    judge = (
        f"{{name: sim-slow, protocol: openai, base_url: '{url}/v1', model: simulated-slow, weight: 1, "
        f"timeout_s: 60, max_concurrency: 64}}"
    )
    return f"""
judges: [{judge}]
suites:
  - name: rules
    default: true
    evaluators: [{{evaluator: exact_match}}, {{evaluator: token_f1}}]
  - name: judged
    match: {{category: [judged_qa]}}
    evaluators: [{{evaluator: token_f1}}]
    judge: {{sample_rate: {SAMPLE_RATE}, consistency_rate: 0}}
"""


async def test_rule_results_arrive_while_judged_ones_are_pending(
    broker: EmbeddedBroker,
    start_worker: Callable[..., Any],
    topics: dict[str, str],
    prefix: str,
    aredis: aioredis.Redis,
    tmp_path: Path,
) -> None:
    run = uuid.uuid4().hex[:6]
    events, ids, bad = make_stream(RULE_EVENTS, BAD_EVENTS, seed=16, run=run)
    rng = random.Random(16)
    judged_ids = [f"{run}-judged-{i}" for i in range(JUDGED_EVENTS)]
    for event_id in judged_ids:  # among the rule events, early in the stream: in the first batches
        event = orjson.dumps(
            {
                "id": event_id,
                "model": "m0",
                "category": "judged_qa",
                "input": f"q {event_id}",
                "output": f"Paris {event_id}",
                "expected": "Paris",
            }
        )
        events.insert(rng.randrange(len(events) // 2), event)
    ids |= set(judged_ids)
    calls = {i for i in judged_ids if sampled(i, SAMPLE_RATE)}  # the events that wait for the judge
    assert 10 < len(calls) < JUDGED_EVENTS - 10
    await ensure_topics(broker.bootstrap, topics.values(), partitions=2)
    await produce(broker.bootstrap, topics["requests"], events)
    async with start_judge_sim(latency_ms=JUDGE_LATENCY_MS) as url:
        config = write_config(tmp_path, _config(url))
        async with LiveReader(broker.bootstrap, topics["results"], topics["deadletter"]) as reader:
            worker = start_worker(config, app_id=f"group-a-{run}")
            await reader.wait(len(ids), timeout=180, what="every result")
            records = await reader.quiesce(idle=1.0)
        assert worker.stop() == 0

        # arrival order: everything that needs no judge call before the first judged result
        arrival = [(r.topic, orjson.loads(r.value)) for r in records]
        first_judged = next(
            n
            for n, (topic, value) in enumerate(arrival)
            if topic == topics["results"] and value["id"] in calls
        )
        before = arrival[:first_judged]
        assert len(before) == len(events) - len(calls), (
            f"{len(events) - len(calls) - len(before)} results that call no judge arrived after a judged one"
        )
        assert not any(value.get("id") in calls for topic, value in before if topic == topics["results"])
        judged_after = [value for topic, value in arrival[first_judged:] if topic == topics["results"]]
        assert {v["id"] for v in judged_after} == calls
        assert all(v["judge"]["status"] == "ok" for v in judged_after)
        unsampled = [v for topic, v in before if topic == topics["results"] and v["suite"] == "judged"]
        assert len(unsampled) == JUDGED_EVENTS - len(calls)
        assert all(v["judge"]["status"] == "unsampled" for v in unsampled)

        # exact accounting: N in -> N results + dead letters, each counted once
        got = await account(records, topics, ids, bad, aredis, prefix)
        assert got.problems == [], got.problems
        assert (got.results, got.dead_letters, got.counted, got.counted_dead) == (
            len(ids),
            len(bad),
            len(ids),
            len(bad),
        )

        # a replay with a new consumer group within the redelivery horizon: the broker has every result
        # (published marks), so only the dead letters are published again; no count changes
        async with LiveReader(broker.bootstrap, topics["results"], topics["deadletter"]) as replay_reader:
            replay = start_worker(config, app_id=f"group-b-{run}")
            await replay_reader.wait_for(
                lambda: len(replay_reader.records) >= len(events) + len(bad),
                timeout=180,
                what="the replayed dead letters",
            )
            replayed = await replay_reader.quiesce(idle=1.0)
        assert replay.stop() == 0
    again = await account(replayed, topics, ids, bad, aredis, prefix)
    assert again.problems == [], again.problems
    assert (again.results, again.dead_letters) == (len(ids), 2 * len(bad))
    assert (again.counted, again.counted_dead) == (len(ids), len(bad))
