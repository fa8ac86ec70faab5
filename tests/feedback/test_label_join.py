"""The human-label join on a real Redis: verdicts kept in the record pipeline, labels before and after their
results, duplicates, unknown ids, two workers, bytes per event, calls per label."""

from __future__ import annotations

import random

import krippendorff
import numpy as np
import pytest
import redis.asyncio as aioredis
from _feedback_helpers import JUDGES, NOW, label, record, result, stores
from scipy import stats as scipy_stats
from sklearn.metrics import cohen_kappa_score

from streameval.features.labels import (
    MAX_RECORD_BYTES,
    FeedbackDecoder,
    FeedbackInput,
    Label,
    human_agreement,
    parse_rows,
    verdict_values,
)


def test_a_judged_event_keeps_at_most_64_bytes_of_verdicts() -> None:
    from streameval.features.labels import layout_id, pack_verdict

    r = result("e", {"alpha": 7.0, "beta": None, "gamma": 9.5})
    names, values = verdict_values(r)
    assert names == ("judge:alpha", "judge:beta", "judge:gamma", "evaluator:exact_match", "panel")
    record = pack_verdict(layout_id("m:qa", names, 0.6), r, values)
    assert len(record) == 7 + 2 * 5 <= MAX_RECORD_BYTES


async def test_labels_after_their_results_give_the_reference_figures(
    aredis: aioredis.Redis, prefix: str
) -> None:
    store, labels = stores(aredis, prefix)
    rng = random.Random(3)
    results, feedback = [], []
    for i in range(40):
        scores = {j: float(rng.randrange(0, 11)) for j in JUDGES}
        results.append(result(f"e{i}", scores, rule=rng.randrange(0, 11) / 10))
        feedback.append(label(f"e{i}", score=rng.randrange(0, 5) + 1, scale="1-5", annotator="ana"))
    await record(store, results)
    report = await labels.join(feedback)
    assert (report.joined, report.waiting, report.unmatched) == (40, 0, 0)
    assert report.calls <= len(feedback)  # at most one Redis call per label (here: 16 shards + 1 pair)
    pair = store.pair_id("m", "qa")
    figures = (await labels.agreement([pair]))[pair]
    assert figures is not None and (figures.labels, figures.events) == (40, 40)
    human = [(f.feedback.score - 1) / 4 for f in feedback]  # type: ignore[operator]
    human_pass = [h >= 0.6 for h in human]
    for name, rater, passes in [
        ("judge:alpha", [r.judge.judges[0].score / 10 for r in results], None),  # type: ignore[union-attr,operator]
        ("result", [round(r.score, 4) for r in results], [r.passed for r in results]),
        ("evaluator:exact_match", [r.evaluators[0].score for r in results], None),
    ]:
        got = figures.raters[name]
        passes = passes or [v >= 0.6 for v in rater]
        assert got.n == 40
        assert got.kappa == pytest.approx(cohen_kappa_score(passes, human_pass), abs=1e-12)
        assert got.pearson == pytest.approx(scipy_stats.pearsonr(rater, human).statistic, abs=1e-9)
        assert got.spearman == pytest.approx(scipy_stats.spearmanr(rater, human).statistic, abs=1e-9)
        assert got.alpha == pytest.approx(
            krippendorff.alpha(reliability_data=np.array([rater, human]), level_of_measurement="interval"),
            abs=1e-9,
        )
        assert got.mae == pytest.approx(float(np.mean(np.abs(np.array(rater) - human))), abs=1e-12)
        assert got.bias == pytest.approx(float(np.mean(rater) - np.mean(human)), abs=1e-12)
    # the window of the labels' arrival has the same figures
    window = (await labels.agreement([pair], 60, int(NOW // 60) * 60))[pair]
    assert window == figures


async def test_a_label_before_its_result_waits_then_joins(aredis: aioredis.Redis, prefix: str) -> None:
    store, labels = stores(aredis, prefix, wait_s=600)
    early = await labels.join([label("late-result", passed=False, annotator="bo")], now=NOW)
    assert (early.joined, early.waiting) == (0, 1)
    assert (await labels.retry_waiting(now=NOW + 0.5)).joined == 0  # not due yet, nothing taken
    await record(store, [result("late-result", {"alpha": 2.0, "beta": 3.0, "gamma": 1.0})])
    again = await labels.retry_waiting(now=NOW + 5)
    assert (again.joined, again.waiting, again.unmatched) == (1, 0, 0)
    assert (await labels.retry_waiting(now=NOW + 100)).joined == 0  # taken off the waiting list
    pair = store.pair_id("m", "qa")
    figures = (await labels.agreement([pair]))[pair]
    assert figures is not None and figures.labels == 1 and figures.raters["result"].n == 1


async def test_an_unknown_id_becomes_an_unmatched_dead_letter_after_the_wait(
    aredis: aioredis.Redis, prefix: str
) -> None:
    _, labels = stores(aredis, prefix, wait_s=60)
    raw = b'{"id": "nobody", "passed": true, "annotator": "cy"}'
    feedback = FeedbackDecoder().decode(raw)
    assert (await labels.join([Label(feedback, raw, "evals.feedback", 2, 41)], now=NOW)).waiting == 1
    assert (await labels.retry_waiting(now=NOW + 30)).waiting == 1
    final = await labels.retry_waiting(now=NOW + 61)
    assert (final.unmatched, final.waiting) == (1, 0)
    [letter] = final.dead_letters
    assert letter.kind == "unmatched_label" and letter.event_id == "nobody"
    assert (
        "no result for event id 'nobody'" in letter.reason and "STREAMEVAL_LABEL_WAIT_S=60" in letter.reason
    )
    assert (letter.source.topic, letter.source.partition, letter.source.offset) == ("evals.feedback", 2, 41)
    import base64

    assert base64.b64decode(letter.raw) == raw
    assert (await labels.retry_waiting(now=NOW + 62)).unmatched == 0  # its lease holds it meanwhile
    # a worker that died before its letter was out: after the lease another one dead-letters it again
    again = await labels.retry_waiting(now=NOW + 100)
    assert again.unmatched == 1
    await labels.settle_expired(again)  # the letter is out: the label leaves the list
    assert (await labels.retry_waiting(now=NOW + 200)).unmatched == 0


async def test_the_same_annotator_twice_counts_once_and_the_last_wins(
    aredis: aioredis.Redis, prefix: str
) -> None:
    store, labels = stores(aredis, prefix)
    await record(
        store,
        [
            result("d1", {"alpha": 9.0, "beta": 8.0, "gamma": 9.0}),
            result("d2", {"alpha": 1.0, "beta": 2.0, "gamma": 1.0}),
        ],
    )
    await labels.join(
        [label("d1", passed=False, annotator="ana"), label("d2", passed=False, annotator="ana")]
    )
    await labels.join([label("d1", passed=True, annotator="ana")])  # ana changes her mind
    await labels.join([label("d1", passed=True, annotator="bo"), label("d2", passed=True, annotator="bo")])
    pair = store.pair_id("m", "qa")
    figures = (await labels.agreement([pair]))[pair]
    assert figures is not None and (figures.labels, figures.events) == (4, 2)
    assert figures.raters["result"].n == 4
    # people among themselves: d1 both pass (agree), d2 ana fail / bo pass (disagree)
    assert figures.annotators is not None and figures.annotators.n == 2
    assert figures.annotators.mae == pytest.approx(0.5)


async def test_a_label_naming_another_model_does_not_join(aredis: aioredis.Redis, prefix: str) -> None:
    store, labels = stores(aredis, prefix, wait_s=10)
    await record(store, [result("x1", {"alpha": 5.0, "beta": 5.0, "gamma": 5.0}, model="gpt")])
    report = await labels.join([label("x1", passed=True, model="claude")], now=NOW)
    assert report.waiting == 1
    final = await labels.retry_waiting(now=NOW + 11)
    await labels.settle_expired(final)
    assert "evaluated for model 'gpt'" in final.dead_letters[0].reason


async def test_two_workers_give_exactly_the_figures_of_one(
    aredis: aioredis.Redis, prefix: str, redis_url: str
) -> None:
    other = aioredis.from_url(redis_url)
    try:
        store1, labels1 = stores(aredis, prefix)
        store2, labels2 = stores(other, prefix)
        rng = random.Random(11)
        results = [result(f"w{i}", {j: float(rng.randrange(0, 11)) for j in JUDGES}) for i in range(60)]
        await record(store1, results[::2])
        await record(store2, results[1::2])
        feedback = [
            label(f"w{i}", score=rng.randrange(0, 101) / 100, annotator=rng.choice(["a", "b"]))
            for i in range(60)
        ]
        # each worker joins the labels of its own partitions, in interleaved batches
        for k in range(0, 60, 10):
            await (labels1 if k % 20 else labels2).join(feedback[k : k + 10])
        pair = store1.pair_id("m", "qa")
        got = (await labels2.agreement([pair]))[pair]
        rows = parse_rows(await aredis.get(labels1.rows_key(pair)))
        assert len(rows) == 60
        one = human_agreement(rows, labels1._layouts)
        assert got == one
        human = [f.feedback.score for f in feedback]
        rater = [r.judge.judges[1].score / 10 for r in results]  # type: ignore[union-attr,operator]
        assert got is not None and got.raters["judge:beta"].pearson == pytest.approx(
            scipy_stats.pearsonr(rater, human).statistic, abs=1e-9
        )
    finally:
        await other.aclose()


async def test_bytes_kept_per_judged_event(aredis: aioredis.Redis, prefix: str) -> None:
    """What the join keeps per judged event once buckets hold a few dozen verdicts each (3 judges, the
    panel and one rule evaluator): measured with MEMORY USAGE over every bucket key."""
    store, labels = stores(aredis, prefix, buckets=256)
    rng = random.Random(5)
    n = 256 * 40
    for k in range(0, n, 500):
        await record(
            store,
            [
                result(f"b{i}", {j: float(rng.randrange(0, 11)) for j in JUDGES})
                for i in range(k, min(n, k + 500))
            ],
        )
    generation = int(NOW // labels.join_ttl_s)
    used = 0
    for bucket in range(256):
        key = labels.bucket_key(bucket, generation)
        assert await aredis.object("encoding", key) == b"listpack"
        used += await aredis.memory_usage(key, samples=0)
    per_event = used / n
    print(f"verdicts kept: {per_event:.1f} B per judged event ({n} events, 256 buckets)")
    assert per_event <= 64


def test_a_json_feedback_stream_is_read_through_its_map() -> None:
    spec = FeedbackInput(
        format="json",
        map={"id": "$.trace", "passed": "$.thumbs_up", "annotator": "$.user.id"},
        optional=["annotator"],
        set={"suite": "qa"},
    )
    decoder = FeedbackDecoder(spec)
    got = decoder.decode(b'{"trace": 123, "thumbs_up": false, "user": {"id": "u9"}}')
    assert (got.id, got.passed, got.annotator, got.suite, got.score) == ("123", False, "u9", "qa", None)
    assert decoder.decode(b'{"trace": "t", "thumbs_up": true}').annotator is None
    from streameval.errors import InvalidJSON, SchemaViolation

    with pytest.raises(SchemaViolation, match=r"map.passed: \$.thumbs_up found nothing"):
        decoder.decode(b'{"trace": "t"}')
    with pytest.raises(InvalidJSON):
        decoder.decode(b'{"trace": ')
    with pytest.raises(SchemaViolation, match="score 7 is outside the scale 0-1"):
        FeedbackDecoder().decode(b'{"id": "e", "score": 7}')


async def test_a_waiting_label_whose_data_is_gone_leaves_the_list(
    aredis: aioredis.Redis, prefix: str
) -> None:
    _, labels = stores(aredis, prefix, wait_s=600)
    await labels.join([label("lost", passed=True)], now=NOW)
    queue, data = labels.pending_keys
    await aredis.delete(data)
    assert (await labels.retry_waiting(now=NOW + 5)).waiting == 0
    assert await aredis.zcard(queue) == 0


async def test_a_newer_label_wins_over_an_older_one_that_waited(aredis: aioredis.Redis, prefix: str) -> None:
    """ana labels before the result (it waits), then again after it (joins at once); the waiting one joins
    last but is older: the newer label counts."""
    store, labels = stores(aredis, prefix, wait_s=600)
    await labels.join([label("o1", passed=False, annotator="ana")], now=NOW)
    await record(store, [result("o1", {"alpha": 9.0, "beta": 9.0, "gamma": 9.0})])
    assert (await labels.join([label("o1", passed=True, annotator="ana")], now=NOW + 3)).joined == 1
    assert (await labels.retry_waiting(now=NOW + 5)).joined == 1
    pair = store.pair_id("m", "qa")
    figures = (await labels.agreement([pair]))[pair]
    assert figures is not None and figures.labels == 1
    assert figures.raters["result"].mae == pytest.approx(1 - 0.7)  # score 0.7 against "passed": 1.0, not 0.0


async def test_every_bucket_has_its_ttl_even_after_a_lost_call(aredis: aioredis.Redis, prefix: str) -> None:
    """A bucket created by a call whose reply was lost, or by a worker that thought it had set the TTL,
    still gets one: the script gives a TTL to any bucket without one."""
    store, labels = stores(aredis, prefix, buckets=16)
    await record(store, [result(f"t{i}", {"alpha": 1.0, "beta": 2.0, "gamma": 3.0}) for i in range(40)])
    generation = int(NOW // labels.join_ttl_s)
    keys = [labels.bucket_key(b, generation) for b in range(16)]
    for key in keys:
        await aredis.persist(key)  # as if the TTL had been lost
    await record(store, [result(f"u{i}", {"alpha": 1.0, "beta": 2.0, "gamma": 3.0}) for i in range(40)])
    ttls = [await aredis.ttl(key) for key in keys if await aredis.exists(key)]
    assert ttls and all(0 < t <= 2 * labels.join_ttl_s for t in ttls)
