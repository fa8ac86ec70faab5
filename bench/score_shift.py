"""The score-shift detector (streameval.features.score_shift) on seeded simulated score streams: false alarms on a
stable stream and the delay to catch a mean shift, for the default settings and a few others.

    .venv/bin/python bench/score_shift.py            # ~1 minute
    .venv/bin/python bench/score_shift.py --events 5000000

Scores are drawn per event (a Beta distribution: continuous scores like similarity; a Bernoulli: pass /
fail scores), summed per window of ``--per-window`` events, and folded window by window as the window
closer does. Delay = events from the first shifted event to the end of the window that fired.
"""

from __future__ import annotations

import argparse
import random
import statistics

from streameval.features.score_shift import ScoreShiftConfig, SeriesState, cusum_h, fold


def _window(rng: random.Random, kind: str, mean: float, n: int) -> tuple[float, float, float]:
    if kind == "beta":  # sd ~0.15 around the mean
        conc = mean * (1 - mean) / 0.15**2 - 1
        xs = [rng.betavariate(mean * conc, (1 - mean) * conc) for _ in range(n)]
    else:
        xs = [1.0 if rng.random() < mean else 0.0 for _ in range(n)]
    return float(n), sum(xs), sum(x * x for x in xs)


def false_alarms(cfg: ScoreShiftConfig, kind: str, events: int, per_window: int, seed: int) -> int:
    rng, state, alarms = random.Random(seed), SeriesState(), 0
    for w in range(events // per_window):
        if fold(state, cfg, "overall", w, *_window(rng, kind, 0.7, per_window)) is not None:
            alarms += 1
    return alarms


def delays(
    cfg: ScoreShiftConfig, kind: str, shift: float, per_window: int, runs: int, seed: int
) -> list[int]:
    """Events from the shift to the alarm, over ``runs`` runs; a run with a false alarm before its shift
    (the reference is then learnt again, from the shifted data) is replaced by the next seed."""
    out: list[int] = []
    attempt = 0
    while len(out) < runs:
        attempt += 1
        rng, state = random.Random(seed * 100_000 + attempt), SeriesState()
        w = 0
        while state.ref_n < cfg.reference_events:  # the reference
            fold(state, cfg, "overall", w, *_window(rng, kind, 0.7, per_window))
            w += 1
        if any(fold(state, cfg, "overall", w + i, *_window(rng, kind, 0.7, per_window)) for i in range(20)):
            continue  # a false alarm before the shift
        w += 20
        after = 0
        while True:
            after += per_window
            if fold(state, cfg, "overall", w, *_window(rng, kind, 0.7 - shift, per_window)) is not None:
                out.append(after)
                break
            w += 1
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=2_000_000, help="stable events per false-alarm row")
    parser.add_argument("--per-window", type=int, default=20, help="events per window")
    parser.add_argument("--runs", type=int, default=200, help="shifted runs per delay row")
    args = parser.parse_args()
    print(
        f"{'scores':>9} {'arl':>9} {'shift':>5} {'h (σ0=0.15)':>11} {'false alarms':>13} {'delay median':>12} {'p95':>6} {'max':>6}"
    )
    for kind in ("beta", "bernoulli"):
        for arl in (10_000, 1_000_000):
            cfg = ScoreShiftConfig(window=60, arl=arl)
            alarms = false_alarms(cfg, kind, args.events, args.per_window, seed=1)
            got = sorted(delays(cfg, kind, 0.1, args.per_window, args.runs, seed=2))
            h = cusum_h(0.1 / (2 * 0.15), float(arl))
            print(
                f"{kind:>9} {arl:>9} {0.1:>5} {h:>11.2f} {alarms:>6} / {args.events / 1e6:g}M "
                f"{statistics.median(got):>12.0f} {got[int(0.95 * len(got)) - 1]:>6} {got[-1]:>6}"
            )


if __name__ == "__main__":
    main()
