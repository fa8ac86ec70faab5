"""The consumer lag reaches the judges' backpressure from the composition root, not from /metrics."""

from __future__ import annotations

from _judges_helpers import judge

from streameval import telemetry
from streameval.config import LoadedConfig, parse_config
from streameval.pipeline import Pipeline
from streameval.signals import ConsumerLag, no_lag


def test_consumer_lag_keeps_the_latest_lag_of_each_partition() -> None:
    lag = ConsumerLag()
    assert lag.total() == 0 and no_lag() == 0
    lag.update({("t", 0): 5, ("t", 1): 7})
    lag.update({("t", 0): 2})
    assert lag.total() == 9


def test_observe_lag_returns_the_lags_it_sets() -> None:
    marks = {("lag-topic", 0): 10, ("lag-topic", 1): None}
    lags = telemetry.observe_lag(
        [("lag-topic", 0, 3), ("lag-topic", 0, 6), ("lag-topic", 1, 4), (None, None, None)],
        lambda topic, partition: marks[(topic, partition)],
    )
    assert lags == {("lag-topic", 0): 3}  # offsets 7, 8, 9 wait; partition 1 has no high watermark yet


def _suites(max_lag: int) -> LoadedConfig:
    _, suites = parse_config(
        {
            "judges": [judge("lag-judge", "http://127.0.0.1:9", weight=1).model_dump()],
            "suites": [
                {
                    "name": "lag-suite",
                    "default": True,
                    "evaluators": [{"evaluator": "exact_match"}],
                    "judge": {"backpressure": {"max_lag": max_lag, "min_share": 0.25, "interval_s": 0.001}},
                }
            ],
        }
    )
    return suites


def test_the_pipeline_hands_the_lag_it_is_given_to_backpressure() -> None:
    lag = ConsumerLag()
    pipeline = Pipeline(_suites(max_lag=100), lag=lag.total)
    pressure = pipeline._suite_judges["lag-suite"].pressure
    assert pressure is not None
    assert pressure.share() == 1.0
    lag.update({("t", 0): 5000})  # what the agent does after each batch
    pressure._next = 0.0  # the next call re-reads the signals
    assert pressure.share() == 0.5 and "lag 5000 > 100" in pressure.why


def test_without_a_lag_the_metric_is_not_read() -> None:
    """Offline (no lag given) a consumer-lag gauge set by someone else changes nothing."""
    telemetry.CONSUMER_LAG.labels("lag-elsewhere", "0").set(10**9)
    pressure = Pipeline(_suites(max_lag=1))._suite_judges["lag-suite"].pressure
    assert pressure is not None and pressure.share() == 1.0
