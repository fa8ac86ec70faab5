"""The agreement figures against their references: sklearn, scipy, the krippendorff package."""

from __future__ import annotations

import random

import krippendorff
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as scipy_stats
from sklearn.isotonic import IsotonicRegression
from sklearn.metrics import cohen_kappa_score

from streameval.agreement import agreement, cohen_kappa, isotonic, ranks, spearman

# scores on the 1e-4 grid the join keeps (streameval.features.labels), some ties
GRID = st.integers(min_value=0, max_value=10_000).map(lambda v: v / 10_000)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.booleans()), min_size=1, max_size=60))
def test_kappa_equals_sklearn(pairs: list[tuple[bool, bool]]) -> None:
    a, b = [p[0] for p in pairs], [p[1] for p in pairs]
    kappa, _, _ = cohen_kappa(a, b)
    if kappa is None:  # p_e = 1: sklearn answers nan (0/0)
        assert len(set(a)) == 1 and set(a) == set(b)
        return
    assert kappa == pytest.approx(cohen_kappa_score(a, b), abs=1e-12)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(GRID, GRID), min_size=2, max_size=60))
def test_pearson_spearman_mae_bias_equal_scipy(pairs: list[tuple[float, float]]) -> None:
    x, y = [p[0] for p in pairs], [p[1] for p in pairs]
    got = agreement(x, y, [v >= 0.5 for v in x], [v >= 0.5 for v in y])
    assert got.n == len(x)
    assert got.mae == pytest.approx(float(np.mean(np.abs(np.array(x) - np.array(y)))), abs=1e-12)
    assert got.bias == pytest.approx(float(np.mean(x) - np.mean(y)), abs=1e-12)
    if len(set(x)) > 1 and len(set(y)) > 1:
        assert got.pearson == pytest.approx(scipy_stats.pearsonr(x, y).statistic, abs=1e-9)
        assert got.spearman == pytest.approx(scipy_stats.spearmanr(x, y).statistic, abs=1e-9)
    else:
        assert got.pearson is None and got.spearman is None


def test_ranks_equal_scipy_average_ranks() -> None:
    values = [0.3, 0.1, 0.3, 0.9, 0.1, 0.1, 0.5]
    assert ranks(values) == list(scipy_stats.rankdata(values, method="average"))
    assert spearman([1.0, 2.0], [2.0, 2.0]) is None


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 10), st.integers(0, 10)), min_size=2, max_size=40))
def test_alpha_equals_the_krippendorff_package(pairs: list[tuple[int, int]]) -> None:
    """The human as one more rater: each event a unit with the rater's and the human's value."""
    x, y = [p[0] / 10 for p in pairs], [p[1] / 10 for p in pairs]
    got = agreement(x, y, [v >= 0.5 for v in x], [v >= 0.5 for v in y]).alpha
    if len(set(x) | set(y)) < 2:
        assert got is None
        return
    expected = krippendorff.alpha(reliability_data=np.array([x, y]), level_of_measurement="interval")
    assert got == pytest.approx(expected, abs=1e-9)


def test_intervals_where_n_allows() -> None:
    rng = random.Random(7)
    human = [rng.randrange(0, 10_001) / 10_000 for _ in range(50)]
    rater = [min(1.0, max(0.0, h + rng.uniform(-0.2, 0.2))) for h in human]
    got = agreement(rater, human, [v >= 0.5 for v in rater], [v >= 0.5 for v in human])
    assert got.kappa_ci_low is not None and got.kappa_ci_low < got.kappa < got.kappa_ci_high  # type: ignore[operator]
    assert got.pearson_ci_low < got.pearson < got.pearson_ci_high  # type: ignore[operator]
    # Fisher's z interval, by hand
    z = np.arctanh(got.pearson)
    assert got.pearson_ci_low == pytest.approx(np.tanh(z - 1.959963984540054 / np.sqrt(47)), abs=1e-12)
    assert got.mae_ci_low < got.mae < got.mae_ci_high  # type: ignore[operator]
    small = agreement(rater[:3], human[:3], [True] * 3, [True, False, True])
    assert small.kappa_ci_low is None and small.pearson_ci_low is None


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 20), GRID), min_size=1, max_size=50))
def test_isotonic_equals_sklearn(pairs: list[tuple[int, float]]) -> None:
    x, y = [p[0] / 20 for p in pairs], [p[1] for p in pairs]
    fitted = isotonic(x, y)
    reference = IsotonicRegression(out_of_bounds="clip").fit(x, y)
    probe = sorted({*x, 0.0, 1.0, 0.33, 0.71})
    assert [fitted(v) for v in probe] == pytest.approx(list(reference.predict(probe)), abs=1e-9)
