"""Human labels on the real broker and Redis, two worker processes, two scripted judges.

Judge ``good`` scores outputs by their closeness to the reference (the simulated judge); judge ``drifted``
is told to answer 5/5 to everything. People label the truth (the output names Paris or not). In one
window: labels after their results, one before its result, an annotator changing her mind, a second
annotator, an unknown id and a message that is not a label. Checked: the window aggregate's human
figures equal sklearn / scipy / krippendorff on the values the results topic shows, the drifted judge
fires ``human_agreement``, the unknown id and the bad message become dead letters with their reasons.
"""

from __future__ import annotations

import asyncio
import base64
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import krippendorff
import numpy as np
import orjson
import pytest
import redis.asyncio as aioredis
from _support import raw_event
from scipy import stats as scipy_stats
from sklearn.metrics import cohen_kappa_score

from streameval.embedded import EmbeddedBroker
from streameval.judges.sim import start_judge_sim
from streameval.kafka_io import Record, collect, ensure_topics, produce
from streameval.models import Aggregate, Alert, DeadLetter, GradedResult, ReviewItem, format_time, parse_time

from ._topics import read_all

pytestmark = pytest.mark.integration

SIZE = 30
N = 36
REVIEW_RATE = 4
DRIFTED = '{"scores": {}, "overall_score": 5, "reasoning": "always perfect"}'


def _config(good: str, drifted: str) -> str:
    judge = "{{name: {n}, protocol: openai, base_url: '{u}/v1', model: sim-{n}, weight: 0.5, timeout_s: 10}}"
    return f"""
windowing: {{allowed_lateness_s: 1, close_interval_s: 0.2}}
judges: [{judge.format(n="good", u=good)}, {judge.format(n="drifted", u=drifted)}]
suites:
  - name: qa
    default: true
    threshold: 0.6
    evaluators: [{{evaluator: exact_match}}]
    judge: {{consistency_rate: 0}}
review: {{rate_per_min: {REVIEW_RATE}, spread: 3, margin: 0.05, control_rate: 0.2}}
alerts:
  - {{name: people-disagree, metric: human_agreement, comparator: "<", threshold: 0.4, window: {SIZE},
     min_labels: 20, severity: warning}}
"""


async def redis_now(client: aioredis.Redis) -> float:
    seconds, micros = await client.time()
    return float(seconds) + micros / 1e6


def label(event_id: str, **fields: Any) -> bytes:
    return orjson.dumps({"id": event_id, **fields})


async def test_labels_join_across_two_workers_and_a_drifted_judge_alerts(
    broker: EmbeddedBroker,
    start_worker: Callable[..., Any],
    topics: dict[str, str],
    aredis: aioredis.Redis,
    tmp_path: Path,
) -> None:
    run = uuid.uuid4().hex[:6]
    feedback_topic = f"t{run}.evals.feedback"
    await ensure_topics(broker.bootstrap, [*topics.values(), feedback_topic], partitions=2)
    by_id = lambda v: orjson.loads(v)["id"].encode()  # noqa: E731
    async with start_judge_sim() as good, start_judge_sim(reply=DRIFTED) as drifted:
        config = tmp_path / "suites.yaml"
        config.write_text(_config(good, drifted))
        env = {
            "STREAMEVAL_WINDOWS": str(SIZE),
            "STREAMEVAL_TOPIC_FEEDBACK": feedback_topic,
            "STREAMEVAL_LABEL_WAIT_S": "4",
        }
        workers = [start_worker(config, app_id=f"fb-{run}", **env) for _ in range(2)]
        # warm up: both workers consume
        now = await redis_now(aredis)
        await produce(
            broker.bootstrap,
            topics["requests"],
            [raw_event(id=f"warm-{i}", model="warm", output="Paris", expected="Paris") for i in range(4)],
            key=by_id,
        )
        await collect(broker.bootstrap, [topics["results"]], until=lambda r: len(r) >= 4, timeout=90)
        # start at the beginning of a window so that everything below lands in one
        now = await redis_now(aredis)
        await asyncio.sleep(SIZE - now % SIZE + 0.2)
        now = await redis_now(aredis)
        outputs = {f"{run}-e{i}": "Paris" if i % 3 else f"Lyon, probably {i}" for i in range(N)}
        truth = {i: o == "Paris" for i, o in outputs.items()}
        ids = list(outputs)
        # one label before its result
        await produce(
            broker.bootstrap,
            feedback_topic,
            [label(ids[0], passed=truth[ids[0]], annotator="ana")],
            key=by_id,
        )
        await asyncio.sleep(1.0)
        events = [
            raw_event(
                id=i, model="m", output=o, expected="Paris", category="qa_simple", timestamp=format_time(now)
            )
            for i, o in outputs.items()
        ]
        await produce(broker.bootstrap, topics["requests"], events, key=by_id)
        results = await collect(
            broker.bootstrap,
            [topics["results"]],
            timeout=90,
            until=lambda r: len({orjson.loads(x.value)["id"] for x in r} & set(ids)) == N,
        )
        graded = {
            g.id: g for g in (GradedResult.model_validate_json(r.value) for r in results) if g.id in outputs
        }
        # people: ana labels everything (ids[1] first wrongly, then she corrects it); bo labels a third of them,
        # as a score on 1-5, and disagrees with ana on ids[3]; a label of an unknown id; a message that is not one
        labels = [label(ids[1], passed=not truth[ids[1]], annotator="ana")]
        labels += [label(i, passed=truth[i], annotator="ana", comment="ok") for i in ids[1:]]
        bo = {i: (5 if truth[i] else 1) for i in ids[::3]}
        bo[ids[3]] = 1 if truth[ids[3]] else 5
        labels += [label(i, score=s, scale="1-5", annotator="bo") for i, s in bo.items()]
        labels += [label(f"{run}-ghost", passed=True), b'{"id": "half a label", "passed": tr']
        await produce(broker.bootstrap, feedback_topic, labels, key=lambda v: v[:12])

        def window_with_labels(records: list[Record]) -> bool:
            return any(
                (a := Aggregate.model_validate_json(r.value)).model == "m" and a.human is not None
                for r in records
            )

        await collect(broker.bootstrap, [topics["aggregates"]], until=window_with_labels, timeout=SIZE + 60)
        records = await read_all(
            broker.bootstrap, [topics["aggregates"], topics["alerts"], topics["deadletter"], topics["review"]]
        )
        for worker in workers:
            assert worker.proc.poll() is None, worker.log()[-3000:]

    [aggregate] = [
        a
        for r in records
        if r.topic == topics["aggregates"]
        if (a := Aggregate.model_validate_json(r.value)).model == "m"
    ]
    human = aggregate.human
    assert human is not None
    assert (human.labels, human.events) == (
        N + len(bo),
        N,
    )  # ana's correction counted once, the ghost not at all

    # the references, from what the results topic shows and what people said (the last label per annotator)
    human_rows = [(i, 1.0 if truth[i] else 0.0, truth[i]) for i in ids] + [
        (i, (s - 1) / 4, (s - 1) / 4 >= 0.6) for i, s in bo.items()
    ]

    def judge_score(i: str, name: str) -> float:
        [v] = [v for v in graded[i].judge.judges if v.name == name]  # type: ignore[union-attr]
        return round(v.score / 10, 4)  # type: ignore[operator]

    for rater, value, passed in [
        ("judge:good", lambda i: judge_score(i, "good"), lambda i: judge_score(i, "good") >= 0.6),
        ("judge:drifted", lambda i: judge_score(i, "drifted"), lambda i: judge_score(i, "drifted") >= 0.6),
        ("result", lambda i: round(graded[i].score, 4), lambda i: graded[i].passed),
        (
            "evaluator:exact_match",
            lambda i: graded[i].evaluators[0].score,
            lambda i: graded[i].evaluators[0].score >= 0.6,
        ),
    ]:
        x = [value(i) for i, _, _ in human_rows]
        y = [h for _, h, _ in human_rows]
        got = human.raters[rater]
        assert got.n == len(human_rows)
        expected_kappa = cohen_kappa_score(
            [passed(i) for i, _, _ in human_rows], [p for _, _, p in human_rows]
        )
        assert got.kappa == pytest.approx(expected_kappa, abs=1e-12), rater
        assert got.mae == pytest.approx(float(np.mean(np.abs(np.array(x) - np.array(y)))), abs=1e-12)
        assert got.bias == pytest.approx(float(np.mean(x) - np.mean(y)), abs=1e-12)
        if len(set(x)) > 1:
            assert got.pearson == pytest.approx(scipy_stats.pearsonr(x, y).statistic, abs=1e-9)
            assert got.spearman == pytest.approx(scipy_stats.spearmanr(x, y).statistic, abs=1e-9)
            assert got.alpha == pytest.approx(
                krippendorff.alpha(reliability_data=np.array([x, y]), level_of_measurement="interval"),
                abs=1e-9,
            )
    assert human.raters["judge:drifted"].kappa == pytest.approx(0.0)  # always "pass": no better than chance
    assert human.raters["judge:good"].kappa > 0.6  # type: ignore[operator]
    assert human.annotators is not None and human.annotators.n == len(bo)

    [alert] = [
        a
        for r in records
        if r.topic == topics["alerts"]
        if (a := Alert.model_validate_json(r.value)).model == "m"
    ]
    assert alert.rule == "people-disagree" and alert.value == pytest.approx(0.0)

    # the review queue: the drifted judge disagrees with the good one on every wrong answer (a burst of
    # candidates from two workers at once); at most REVIEW_RATE per minute were sent, each with its reason
    review = [ReviewItem.model_validate_json(r.value) for r in records if r.topic == topics["review"]]
    mine = [item for item in review if item.model == "m"]
    per_minute = Counter(parse_time(item.selected_at) // 60 for item in mine)
    candidates = sum(
        1 for i in ids if graded[i].judge and abs(judge_score(i, "good") - judge_score(i, "drifted")) >= 0.3
    )
    assert candidates > 2 * REVIEW_RATE and mine and max(per_minute.values()) <= REVIEW_RATE
    assert len(mine) <= REVIEW_RATE * len(per_minute)
    for item in mine:
        assert item.reasons and item.reason and item.output == outputs[item.id]
        if "judges_disagree" in item.reasons:
            assert item.judge_spread is not None and item.judge_spread >= 3

    letters = [DeadLetter.model_validate_json(r.value) for r in records if r.topic == topics["deadletter"]]
    [ghost] = [d for d in letters if d.kind == "unmatched_label"]
    assert ghost.event_id == f"{run}-ghost" and "no result for event id" in ghost.reason
    assert orjson.loads(base64.b64decode(ghost.raw))["id"] == f"{run}-ghost"
    assert ghost.source.topic == feedback_topic
    [bad] = [d for d in letters if d.kind == "invalid_json"]
    assert base64.b64decode(bad.raw) == b'{"id": "half a label", "passed": tr' and "feedback:" in bad.reason
