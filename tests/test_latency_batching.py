"""Evaluator latencies noted per event and observed per batch export what one observe per event did."""

from __future__ import annotations

import random

from prometheus_client import REGISTRY, CollectorRegistry, Histogram

from streameval import telemetry

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
    telemetry._observe_many(many.labels("x"), amounts[:100])
    telemetry._observe_many(many.labels("x"), amounts[100:])
    got = [(name.replace("many", "one"), labels, value) for name, labels, value in _samples(many)]
    assert got == _samples(one)  # the _sum sample compares floats with ==: bit for bit


def test_noted_latencies_are_observed_before_any_reader_sees_the_histogram() -> None:
    name = "noted-latency-test"
    count = REGISTRY.get_sample_value("streameval_evaluator_latency_seconds_count", {"evaluator": name}) or 0.0
    total = REGISTRY.get_sample_value("streameval_evaluator_latency_seconds_sum", {"evaluator": name}) or 0.0
    for seconds in (0.0003, 0.002, 0.2):
        telemetry.note_latency(name, seconds)
    labels = {"evaluator": name}
    assert REGISTRY.get_sample_value("streameval_evaluator_latency_seconds_count", labels) == count + 3
    assert REGISTRY.get_sample_value("streameval_evaluator_latency_seconds_sum", labels) == total + 0.0003 + 0.002 + 0.2
    assert REGISTRY.get_sample_value("streameval_evaluator_latency_seconds_bucket", {**labels, "le": "0.001"}) == 1
    assert b'streameval_evaluator_latency_seconds_count{evaluator="noted-latency-test"} 3.0' in telemetry.render()


def test_noted_latencies_are_flushed_when_many_wait() -> None:
    name = "noted-flush-test"
    for _ in range(telemetry._FLUSH_AT):
        telemetry.note_latency(name, 0.001)
    assert not telemetry._noted
    assert telemetry._latency(name)._sum.get() > 0  # observed without anyone reading the histogram
