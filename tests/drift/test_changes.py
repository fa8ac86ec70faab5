"""The score-shift detector's logic (streameval.features.score_shift) on seeded simulated streams: quiet on 100 k
stable events, a 0.1 mean shift caught within a documented number of events, the change point and the
shift estimated, per-window folding independent of how events were split."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streameval.features.score_shift import (
    Detector,
    ScoreShiftConfig,
    SeriesState,
    cusum_h,
    fold,
    window_series,
)

PER_WINDOW = 20


def _beta(rng: random.Random, mean: float, n: int) -> list[float]:
    conc = mean * (1 - mean) / 0.15**2 - 1  # sd 0.15
    return [rng.betavariate(mean * conc, (1 - mean) * conc) for _ in range(n)]


def _bernoulli(rng: random.Random, mean: float, n: int) -> list[float]:
    return [1.0 if rng.random() < mean else 0.0 for _ in range(n)]


def _sums(xs: list[float]) -> tuple[float, float, float]:
    return float(len(xs)), sum(xs), sum(x * x for x in xs)


def test_h_grows_with_the_run_length_and_shrinks_with_k() -> None:
    assert cusum_h(0.25, 1e4) < cusum_h(0.25, 1e6) < cusum_h(0.25, 1e8)
    assert cusum_h(0.5, 1e6) < cusum_h(0.25, 1e6)
    # Siegmund: ARL(h) = (e^{2kb} - 2kb - 1) / (2k²), b = h + 1.166, per side twice the wanted ARL
    k, h = 0.25, cusum_h(0.25, 1e6)
    b = h + 1.166
    assert pytest.approx(2e6, rel=1e-6) == ((2.718281828459045 ** (2 * k * b)) - 2 * k * b - 1) / (2 * k * k)


@pytest.mark.parametrize("draw", [_beta, _bernoulli])
def test_quiet_on_100k_stable_events(draw: object) -> None:
    cfg, state, rng = ScoreShiftConfig(window=60), SeriesState(), random.Random(20261125)
    alarms = [
        w
        for w in range(100_000 // PER_WINDOW)
        if fold(state, cfg, "overall", w, *_sums(draw(rng, 0.7, PER_WINDOW))) is not None
    ]  # type: ignore[operator]
    assert alarms == []


@pytest.mark.parametrize(("draw", "within", "early"), [(_beta, 400, 5), (_bernoulli, 5000, 25)])
def test_a_drop_of_0_1_is_caught_with_its_change_point_and_size(
    draw: object, within: int, early: int
) -> None:
    """docs/drift.md: scores with sd 0.15 are caught within 400 events (median ~60), pass/fail scores
    (sd 0.46) within 5000 (median ~320), at the default arl of 10⁶ events; 30 seeded runs each."""
    cfg = ScoreShiftConfig(window=60)
    for run in range(30):
        rng, state = random.Random(run), SeriesState()
        w = 0
        while state.ref_n < cfg.reference_events or w < 60:
            assert fold(state, cfg, "overall", w, *_sums(draw(rng, 0.7, PER_WINDOW))) is None  # type: ignore[operator]
            w += 1
        shifted_at, change = w, None
        while change is None:
            change = fold(state, cfg, "overall", w, *_sums(draw(rng, 0.6, PER_WINDOW)))  # type: ignore[operator]
            w += 1
        delay = (w - shifted_at) * PER_WINDOW
        assert delay <= within, (run, delay)
        assert change.direction == "down"
        # the estimated change point: near the true one (``early`` windows before it at most; a chance dip
        # just before a change starts the run early), never after the alarm
        assert shifted_at - early <= change.change_start <= w
        assert change.reference_mean == pytest.approx(0.7, abs=0.06)


def test_the_shift_estimate_and_a_rise() -> None:
    cfg, state, rng = ScoreShiftConfig(window=60, shift=0.1), SeriesState(), random.Random(3)
    for w in range(20):
        fold(state, cfg, "overall", w, *_sums(_beta(rng, 0.5, 50)))
    change, w = None, 20
    while change is None:
        change = fold(state, cfg, "overall", w, *_sums(_beta(rng, 0.7, 50)))
        w += 1
    assert change.direction == "up" and change.shift == pytest.approx(0.2, abs=0.07)
    assert change.ewma > 0.55 and change.change_start >= 18


def test_after_an_alarm_the_reference_is_learnt_again_one_alarm_per_shift() -> None:
    cfg, state, rng = ScoreShiftConfig(window=60), SeriesState(), random.Random(9)
    alarms = []
    for w in range(2000):
        mean = 0.7 if w < 100 else 0.55
        if fold(state, cfg, "overall", w, *_sums(_beta(rng, mean, PER_WINDOW))) is not None:
            alarms.append(w)
    assert len(alarms) == 1 and 100 <= alarms[0] < 130


def test_trailing_reference_follows_a_slow_level() -> None:
    cfg = ScoreShiftConfig(window=60, reference="trailing", reference_events=200)
    state, rng = SeriesState(), random.Random(5)
    for w in range(30):
        fold(state, cfg, "overall", w, *_sums(_beta(rng, 0.7, PER_WINDOW)))
    assert sum(t[0] for t in state.trail) < 200 + PER_WINDOW  # bounded: only the latest windows
    change, w = None, 30
    while change is None and w < 200:
        change = fold(state, cfg, "overall", w, *_sums(_beta(rng, 0.55, PER_WINDOW)))
        w += 1
    assert change is not None and change.direction == "down"


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=4), min_size=60, max_size=60), st.integers(0, 2**32 - 1))
def test_how_events_are_split_between_workers_changes_nothing(split: list[int], seed: int) -> None:
    """Each window's sums are the sums of the workers' partial sums: the detector sees the same input."""
    cfg = ScoreShiftConfig(window=60, reference_events=40, arl=1000)
    rng = random.Random(seed)
    windows = [_beta(rng, 0.7 if w < 30 else 0.5, 12) for w in range(60)]
    whole, parts = Detector(cfg), Detector(cfg)
    got_whole, got_parts = [], []
    for w, (xs, workers) in enumerate(zip(windows, split, strict=True)):
        fields = {"count": 0.0, "sum": 0.0, "sumsq": 0.0}
        for i in range(workers):  # each worker adds its share into the window hash
            share = xs[i::workers]
            fields = {
                "count": fields["count"] + len(share),
                "sum": fields["sum"] + sum(share),
                "sumsq": fields["sumsq"] + sum(x * x for x in share),
            }
        got_parts += parts.fold_window(w, fields)
        got_whole += whole.fold_window(w, dict(zip(("count", "sum", "sumsq"), _sums(xs), strict=True)))
    assert [(c.change_start, c.direction) for c in got_parts] == [
        (c.change_start, c.direction) for c in got_whole
    ]
    assert [c.shift for c in got_parts] == pytest.approx([c.shift for c in got_whole], abs=1e-9)
    assert got_whole  # the drop at window 30 is caught


def test_a_window_is_folded_once_and_state_round_trips() -> None:
    cfg = ScoreShiftConfig(window=60, reference_events=10)
    det = Detector(cfg)
    det.fold_window(100, {"count": 10.0, "sum": 7.0, "sumsq": 5.0})
    again = Detector.from_json(cfg, det.to_json())
    assert again.to_json() == det.to_json()
    assert again.fold_window(100, {"count": 10.0, "sum": 0.0, "sumsq": 0.0}) == []
    assert again.to_json() == det.to_json()  # the repeated window changed nothing


def test_series_of_a_window_hash() -> None:
    fields = {
        "count": 4.0,
        "sum": 2.0,
        "sumsq": 1.5,
        "ev:exact_match:count": 4.0,
        "ev:exact_match:sum": 1.0,
        "ev:exact_match:sumsq": 1.0,
        "ev:exact_match:c:tp": 1.0,
        "ev:judge_panel:c:alice.n": 3.0,
        "ev:judge_panel:c:alice.score_sum": 21.0,
        "ev:judge_panel:c:alice.score_sumsq": 150.0,
        "ev:judge_panel:c:pair:alice:bob:n": 3.0,
    }
    assert window_series(fields, ["overall", "evaluators", "judges"]) == {
        "overall": (4.0, 2.0, 1.5),
        "evaluator:exact_match": (4.0, 1.0, 1.0),
        "judge:alice": (3.0, 21.0, 150.0),
    }
    assert list(window_series(fields, ["judges"])) == ["judge:alice"]
