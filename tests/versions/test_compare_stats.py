"""The version comparison's statistics against scipy and scikit-learn, and its compact records."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sps
from sklearn.metrics import cohen_kappa_score

from streameval.features.compare import (
    ABSENT,
    Compact,
    compact,
    compare,
    kappa,
    pack_chunk,
    rank,
    unpack_chunks,
)


def records(scores: list[tuple[float, bool]], prefix: str = "e") -> dict[str, Compact]:
    return {f"{prefix}{i}": compact(1_800_000_000 + i, s, p, [(s, p)]) for i, (s, p) in enumerate(scores)}


def test_chunks_round_trip_and_the_first_record_of_an_id_wins() -> None:
    data = pack_chunk(
        [("id-1", 1_800_000_000.7, 0.25, True, [(0.5, True), (0.0, False)]), ("ü\0" * 100, 5, 1.0, False, [])]
    ) + pack_chunk([("id-1", 1_800_000_001, 0.9, False, [(1.0, False)])])  # a redelivered copy
    out = unpack_chunks(data)
    assert set(out) == {"id-1", "ü\1" * 100}
    first = out["id-1"]
    assert first[:3] == (1_800_000_000, 0.25, 1)
    assert first[3] == 0x8000 | round(0.5 * 32766) and first[4] == 0
    assert out["ü\1" * 100][3:] == (ABSENT, ABSENT)  # padded to the chunk's widest record
    assert first == compact(1_800_000_000.7, 0.25, True, [(0.5, True), (0.0, False)])
    assert set(unpack_chunks(data, since=1_800_000_000, until=1_800_000_001)) == {"id-1"}
    assert unpack_chunks(data[:-3]).keys() == {"id-1", "ü\1" * 100}  # a cut chunk ends the reading
    one = pack_chunk([("x" * 36, 0, 0.5, True, [(0.5, True)] * 3)])
    assert len(one) == 9 + (9 + 6) + 36  # header, then ~15 bytes + the id per event with 3 evaluators


@pytest.mark.filterwarnings("ignore:Precision loss occurred")  # scipy's, on near-constant data
@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.floats(0, 1), st.floats(0, 1), st.booleans(), st.booleans()), min_size=3, max_size=60
    )
)
def test_statistics_match_scipy_and_sklearn(rows: list[tuple[float, float, bool, bool]]) -> None:
    xs = [float(np.float32(r[0])) for r in rows]  # float32 storage: compare on what is stored
    ys = [float(np.float32(r[1])) for r in rows]
    a = records([(x, r[2]) for x, r in zip(xs, rows, strict=True)])
    b = records([(y, r[3]) for y, r in zip(ys, rows, strict=True)])
    out = compare(a, b)
    diffs = [y - x for x, y in zip(xs, ys, strict=True)]
    assert out["n"] == len(rows)
    assert out["mean_diff"] == pytest.approx(sum(diffs) / len(diffs), abs=1e-12)
    ttest = sps.ttest_rel(ys, xs)
    if math.isfinite(ttest.statistic) and len(rows) <= 30:
        # the CI uses t(0.975, n-1) up to n = 30, 1.96 beyond (streameval.stats): equal up to n = 30
        low, high = ttest.confidence_interval(0.95)
        assert (out["ci_low"], out["ci_high"]) == pytest.approx((low, high), abs=1e-9)
    pa, pb = [r[2] for r in rows], [r[3] for r in rows]
    if len(set(pa)) == 1 and len(set(pb)) == 1 and pa[0] == pb[0]:
        assert out["kappa"] is None  # all one label on both sides: chance agreement is total
    else:
        assert out["kappa"] == pytest.approx(cohen_kappa_score(pa, pb), abs=1e-9)
    if np.std(xs) > 1e-6 and np.std(ys) > 1e-6:
        assert out["pearson"] == pytest.approx(sps.pearsonr(xs, ys).statistic, abs=1e-9)
        assert out["spearman"] == pytest.approx(sps.spearmanr(xs, ys).statistic, abs=1e-9)
    else:
        assert out["pearson"] is None or abs(out["pearson"]) <= 1
    assert out["pass_to_fail"] == sum(1 for x, y in zip(pa, pb, strict=True) if x and not y)
    assert out["fail_to_pass"] == sum(1 for x, y in zip(pa, pb, strict=True) if y and not x)


def test_ranks_match_scipy() -> None:
    values = [0.5, 0.1, 0.5, 0.9, 0.1, 0.1]
    assert rank(values) == list(sps.rankdata(values))


def test_flips_name_their_events_and_evaluators_get_deltas() -> None:
    a = {
        "x": compact(0, 0.8, True, [(0.8, True), (1.0, True)]),
        "y": compact(0, 0.2, False, [(0.2, False), (0.0, False)]),
        "only-a": compact(0, 1.0, True, []),
    }
    b = {
        "x": compact(0, 0.4, False, [(0.4, False)]),
        "y": compact(0, 0.9, True, [(0.9, True)]),
        "only-b": compact(0, 0.0, False, []),
    }
    out = compare(a, b, names_a=["sim", "gone"], names_b=["sim"])
    assert (out["n"], out["n_a"], out["n_b"]) == (2, 3, 3)
    assert out["pass_to_fail_ids"] == ["x"] and out["fail_to_pass_ids"] == ["y"]
    assert out["evaluators"]["sim"]["mean_diff"] == pytest.approx(((0.4 - 0.8) + (0.9 - 0.2)) / 2, abs=1e-4)
    assert out["evaluators"]["sim"]["pass_rate_a"] == 0.5 and out["evaluators"]["sim"]["pass_rate_b"] == 0.5
    assert out["evaluators"]["gone"] == {"n": 0, "only_in": "a"}


def test_no_shared_event_is_an_empty_comparison_with_a_reason() -> None:
    out = compare(records([(0.5, True)], "a"), records([(0.5, True)], "b"))
    assert out["empty"] is True and out["n"] == 0 and "no event in common" in out["reason"]
    assert compare({}, records([(0.5, True)]))["reason"] == "version a has no retained scores"


def test_kappa_degenerate_cases() -> None:
    assert kappa([True, True], [True, True]) is None
    assert kappa([True, False], [True, False]) == 1.0
    rng = random.Random(3)
    a = [rng.random() < 0.5 for _ in range(500)]
    assert kappa(a, a[::-1]) == pytest.approx(cohen_kappa_score(a, a[::-1]))
