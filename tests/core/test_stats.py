"""streameval.stats against reference implementations: statistics, numpy, scipy, krippendorff."""

from __future__ import annotations

import math
import statistics

import krippendorff
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sps

from streameval.stats import (
    LATENCY_BUCKETS_MS,
    alpha_unit,
    confidence_interval,
    histogram_quantile,
    krippendorff_alpha,
    latency_bucket,
    moments,
    pearson,
    t_quantile_975,
)

scores = st.lists(st.floats(0, 1, allow_nan=False), min_size=2, max_size=60)


@given(scores)
def test_moments_match_statistics(values: list[float]) -> None:
    m = moments(len(values), sum(values), sum(v * v for v in values))
    assert m.mean == pytest.approx(statistics.fmean(values), abs=1e-9)
    assert m.std == pytest.approx(statistics.stdev(values), abs=1e-6)  # sqrt amplifies cancellation near 0


@pytest.mark.parametrize("values", [[7, 8, 9], [8.26] * 5 + [7.0, 9.5], list(range(40)), [1, 2]])
def test_confidence_interval_matches_scipy_t_then_seed_z(values: list[float]) -> None:
    m = moments(len(values), sum(values), sum(v * v for v in values))
    low, high = confidence_interval(m)  # type: ignore[misc]
    n = len(values)
    sem = statistics.stdev(values) / math.sqrt(n)
    q = float(sps.t.ppf(0.975, n - 1)) if n <= 30 else 1.96
    assert low == pytest.approx(statistics.fmean(values) - q * sem, abs=1e-9)
    assert high == pytest.approx(statistics.fmean(values) + q * sem, abs=1e-9)


def test_seed_003_worked_interval() -> None:
    # the multi-judge spec's 置信区间: mean 8.26, std 0.5, n 100 -> [8.16, 8.36]
    from streameval.stats import Moments

    low, high = confidence_interval(Moments(100, 8.26, 0.5))  # type: ignore[misc]
    assert (round(low, 2), round(high, 2)) == (8.16, 8.36)


@pytest.mark.parametrize("n", range(2, 31))
def test_t_table_equals_scipy(n: int) -> None:
    assert t_quantile_975(n) == pytest.approx(float(sps.t.ppf(0.975, n - 1)), abs=1e-12)


def test_interval_needs_two_values() -> None:
    assert confidence_interval(moments(1, 0.5, 0.25)) is None


def test_confidence_interval_is_clipped_to_the_bounds() -> None:
    spread = moments(3, 0.0 + 0.5 + 1.0, 0.0 + 0.25 + 1.0)  # [-0.74, 1.74] unclipped
    low, high = confidence_interval(spread)  # type: ignore[misc]
    assert low < 0 and high > 1
    assert confidence_interval(spread, bounds=(0.0, 1.0)) == (0.0, 1.0)
    narrow = moments(4, 0.4 + 0.5 + 0.5 + 0.6, 0.16 + 0.25 + 0.25 + 0.36)
    assert confidence_interval(narrow, bounds=(0.0, 1.0)) == confidence_interval(narrow)


@settings(max_examples=200)
@given(st.lists(st.tuples(st.integers(0, 10), st.integers(0, 10)), min_size=2, max_size=40))
def test_pearson_matches_numpy(pairs: list[tuple[int, int]]) -> None:
    x = np.array([p[0] for p in pairs], dtype=float)
    y = np.array([p[1] for p in pairs], dtype=float)
    r = pearson(len(pairs), x.sum(), y.sum(), (x * x).sum(), (y * y).sum(), (x * y).sum())
    if x.std() == 0 or y.std() == 0:
        assert r is None
    else:
        assert r == pytest.approx(float(np.corrcoef(x, y)[0, 1]), abs=1e-9)


def _alpha(units: list[list[float | None]]) -> float | None:
    terms = [alpha_unit([v for v in unit if v is not None]) for unit in units]
    return krippendorff_alpha(*(math.fsum(t[i] for t in terms) for i in range(4)))


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.lists(st.one_of(st.none(), st.integers(1, 5)), min_size=3, max_size=3), min_size=2, max_size=25
    )
)
def test_alpha_matches_krippendorff_package(units: list[list[int | None]]) -> None:
    ours = _alpha(units)  # type: ignore[arg-type]
    data = np.array(
        [[np.nan if v is None else v for v in unit] for unit in units], dtype=float
    ).T  # judges × units
    pairable = [u for u in units if sum(v is not None for v in u) >= 2]
    values = {v for u in pairable for v in u if v is not None}
    if len(values) < 2:  # no disagreement to expect: the package divides by zero, we say None
        assert ours is None
        return
    reference = krippendorff.alpha(reliability_data=data, level_of_measurement="interval")
    assert ours == pytest.approx(reference, abs=1e-9)


def test_alpha_perfect_agreement_is_one() -> None:
    assert _alpha([[1, 1, 1], [3, 3, 3], [5, 5, None]]) == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("latency", "bucket"),
    [(0, 0), (5, 0), (5.1, 1), (120000, len(LATENCY_BUCKETS_MS) - 1), (1e9, len(LATENCY_BUCKETS_MS))],
)
def test_latency_bucket(latency: float, bucket: int) -> None:
    assert latency_bucket(latency) == bucket


@given(st.lists(st.floats(0, 200000, allow_nan=False), min_size=1, max_size=200))
def test_p95_is_the_bound_of_the_bucket_holding_numpy_p95(latencies: list[float]) -> None:
    counts: dict[int, float] = {}
    for value in latencies:
        counts[latency_bucket(value)] = counts.get(latency_bucket(value), 0) + 1
    p95 = histogram_quantile(counts, 0.95)
    exact = float(np.percentile(latencies, 95, method="inverted_cdf"))
    bucket = latency_bucket(exact)
    assert p95 == float(LATENCY_BUCKETS_MS[min(bucket, len(LATENCY_BUCKETS_MS) - 1)])


def test_empty_histogram() -> None:
    assert histogram_quantile({}, 0.95) is None
