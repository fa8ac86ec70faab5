"""Metrics counted per batch (evaluator latencies, result and dead-letter counts, quality series) export
exactly what one observe / inc per event did."""

from __future__ import annotations

import random
from types import SimpleNamespace
from typing import Any

import pytest
from prometheus_client import REGISTRY, CollectorRegistry, Counter, Histogram

from streameval import quality_metrics, telemetry

BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


def _samples(histogram: Histogram) -> list[tuple[str, dict[str, str], float]]:
    return [(s.name, s.labels, s.value) for metric in histogram.collect() for s in metric.samples]


def test_observing_many_at_once_gives_the_same_buckets_and_the_same_sum_bit_for_bit() -> None:
    rng = random.Random(5)
    # bucket bounds exactly (an observation on a bound counts in that bucket), beyond the last, tiny ones
    amounts = [*BUCKETS, 31.0, 0.0, 1e-9] + [rng.expovariate(200) for _ in range(5000)]
    one = Histogram("one", "h", ["e"], buckets=BUCKETS, registry=CollectorRegistry())
    many = Histogram("many", "h", ["e"], buckets=BUCKETS, registry=CollectorRegistry())
    for amount in amounts:
        one.labels("x").observe(amount)
    quality_metrics.observe_many(many.labels("x"), amounts[:100])
    quality_metrics.observe_many(many.labels("x"), amounts[100:])
    got = [(name.replace("many", "one"), labels, value) for name, labels, value in _samples(many)]
    assert got == _samples(one)  # the _sum sample compares floats with ==: bit for bit


def test_noted_latencies_are_observed_before_any_reader_sees_the_histogram() -> None:
    name = "noted-latency-test"
    count = (
        REGISTRY.get_sample_value("streameval_evaluator_latency_seconds_count", {"evaluator": name}) or 0.0
    )
    total = REGISTRY.get_sample_value("streameval_evaluator_latency_seconds_sum", {"evaluator": name}) or 0.0
    for seconds in (0.0003, 0.002, 0.2):
        telemetry.note_latency(name, seconds)
    labels = {"evaluator": name}
    assert REGISTRY.get_sample_value("streameval_evaluator_latency_seconds_count", labels) == count + 3
    assert (
        REGISTRY.get_sample_value("streameval_evaluator_latency_seconds_sum", labels)
        == total + 0.0003 + 0.002 + 0.2
    )
    assert (
        REGISTRY.get_sample_value("streameval_evaluator_latency_seconds_bucket", {**labels, "le": "0.001"})
        == 1
    )
    assert (
        b'streameval_evaluator_latency_seconds_count{evaluator="noted-latency-test"} 3.0'
        in telemetry.render()
    )


def test_noted_latencies_are_flushed_when_many_wait() -> None:
    name = "noted-flush-test"
    for _ in range(telemetry._FLUSH_AT):
        telemetry.note_latency(name, 0.001)
    assert not telemetry._noted
    assert telemetry._latency(name)._sum.get() > 0  # observed without anyone reading the histogram


def _outcomes() -> list[Any]:
    rng = random.Random(9)
    out: list[Any] = []
    for i in range(600):
        if i % 13 == 0:
            letter = SimpleNamespace(kind=rng.choice(["schema", "invalid_json"]))
            out.append(SimpleNamespace(result=None, dead_letter=letter, counters=None))
            continue
        gates = rng.choice([[], [], ["g1"], ["g1", "g2"]])
        result = SimpleNamespace(
            model=f"m{rng.randrange(4)}",
            suite=rng.choice(["s1", "s2"]),
            score=rng.random(),
            passed=rng.random() < 0.6,
            grade=rng.choice("ABCF"),
            failed_gates=gates,
        )
        out.append(SimpleNamespace(result=result, dead_letter=None, counters=None))
    return out


def _old_observe(outcomes: list[Any], labels: quality_metrics.ModelLabels) -> None:
    """The per-result code the batch counting replaced (quality_metrics.observe and observe_outcomes)."""
    for outcome in outcomes:
        if outcome.dead_letter is not None:
            telemetry.DEAD_LETTERS.labels(outcome.dead_letter.kind).inc()
        result = outcome.result
        if result is None:
            continue
        model = labels(result.model)
        quality_metrics.RESULT_SCORE.labels(model, result.suite).observe(result.score)
        if result.passed:
            quality_metrics.RESULT_PASSED.labels(model, result.suite).inc()
        quality_metrics.RESULT_GRADES.labels(model, result.suite, result.grade).inc()
        for gate in result.failed_gates:
            quality_metrics.GATE_FAILURES.labels(result.suite, gate).inc()
        telemetry.RESULTS_OUT.labels(result.suite).inc()


def _fresh_metrics(monkeypatch: pytest.MonkeyPatch) -> CollectorRegistry:
    registry = CollectorRegistry()
    for module, name in [
        (quality_metrics, "RESULT_SCORE"),
        (quality_metrics, "RESULT_PASSED"),
        (quality_metrics, "RESULT_GRADES"),
        (quality_metrics, "GATE_FAILURES"),
        (telemetry, "RESULTS_OUT"),
        (telemetry, "DEAD_LETTERS"),
    ]:
        metric = getattr(module, name)
        kind = Histogram if isinstance(metric, Histogram) else Counter
        extra = {"buckets": metric._upper_bounds} if kind is Histogram else {}
        fresh = kind(metric._name, metric._documentation, metric._labelnames, registry=registry, **extra)
        monkeypatch.setattr(module, name, fresh)
    monkeypatch.setattr(quality_metrics, "_labels", quality_metrics.ModelLabels(3))  # "other" is used too
    return registry


def test_batch_counting_exports_what_counting_each_result_did(monkeypatch: pytest.MonkeyPatch) -> None:
    batches = [_outcomes()[i : i + 64] for i in range(0, 600, 64)]
    with monkeypatch.context() as patched:
        old = _fresh_metrics(patched)
        labels = quality_metrics._labels
        for batch in batches:
            _old_observe(batch, labels)
        expected = [(s.name, s.labels, s.value) for m in old.collect() for s in m.samples]
    with monkeypatch.context() as patched:
        new = _fresh_metrics(patched)
        for batch in batches:
            telemetry.observe_outcomes(batch)
        got = [(s.name, s.labels, s.value) for m in new.collect() for s in m.samples]
    assert len(expected) > 40 and sorted(got, key=repr) == sorted(expected, key=repr)  # sums bit for bit
