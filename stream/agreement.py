"""Agreement between a rater (a judge, the panel, the suite result, a rule evaluator) and people: pure functions.

Computed at read time from the paired values themselves (bounded per window, streameval.features.labels), so
the figures are exact whatever the number of workers that joined the labels. Each function is checked
against a reference (``sklearn.metrics.cohen_kappa_score``, ``scipy.stats.pearsonr`` / ``spearmanr``,
the ``krippendorff`` package, ``sklearn.isotonic.IsotonicRegression``) in tests/feedback/.

* :func:`cohen_kappa` -- Cohen's κ on pass/fail: (p_o − p_e) / (1 − p_e).
* :func:`agreement` -- κ, Krippendorff's α (interval; the human is one more rater: each labelled event
  is a unit with two values), Pearson, Spearman (Pearson of average ranks), mean absolute error, bias
  (rater mean − human mean), with 95 % intervals where n allows: κ ± 1.96·SE, SE = √(p_o(1−p_o)/n)/(1−p_e)
  (n ≥ :data:`KAPPA_CI_MIN_N`); Pearson by Fisher's z, tanh(atanh r ± 1.96/√(n−3)) (n ≥ 4); the MAE as
  a mean (Student t up to n = 30, streameval.stats.confidence_interval).
* :func:`isotonic` -- pool-adjacent-violators: the monotone (non-decreasing) least-squares map of rater
  score to human score.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from .models import Agreement
from .stats import alpha_unit, confidence_interval, krippendorff_alpha, moments, pearson

__all__ = ["KAPPA_CI_MIN_N", "IsotonicMap", "agreement", "cohen_kappa", "isotonic", "ranks", "spearman"]

#: 95 % two-sided normal quantile (the intervals of κ and of Fisher's z)
_Z = 1.959963984540054
#: κ's interval needs at least this many pass/fail pairs (its normal approximation is poor below)
KAPPA_CI_MIN_N = 10


def cohen_kappa(rater: Sequence[bool], human: Sequence[bool]) -> tuple[float | None, float, float]:
    """(κ, p_o, p_e) of two pass/fail sequences; κ is None when p_e = 1 (both sides constant and equal)."""
    n = len(rater)
    if n == 0 or n != len(human):
        return None, 0.0, 0.0
    both = sum(1 for a, b in zip(rater, human, strict=True) if a and b)
    neither = sum(1 for a, b in zip(rater, human, strict=True) if not a and not b)
    p_rater, p_human = sum(rater) / n, sum(human) / n
    p_o = (both + neither) / n
    p_e = p_rater * p_human + (1 - p_rater) * (1 - p_human)
    if p_e >= 1.0 - 1e-15:
        return None, p_o, p_e
    return (p_o - p_e) / (1 - p_e), p_o, p_e


def ranks(values: Sequence[float]) -> list[float]:
    """1-based ranks, ties sharing their average rank (``scipy.stats.rankdata(method="average")``)."""
    order = sorted(range(len(values)), key=values.__getitem__)
    out = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        rank = (i + j) / 2 + 1
        for k in range(i, j + 1):
            out[order[k]] = rank
        i = j + 1
    return out


def _pearson(x: Sequence[float], y: Sequence[float]) -> float | None:
    n = len(x)
    if n < 2:
        return None
    # centred sums: exact enough for the references (scipy centres too); stats.pearson takes raw sums
    mx, my = math.fsum(x) / n, math.fsum(y) / n
    dx = [a - mx for a in x]
    dy = [b - my for b in y]
    return pearson(
        n,
        0.0,
        0.0,
        math.fsum(a * a for a in dx),
        math.fsum(b * b for b in dy),
        math.fsum(a * b for a, b in zip(dx, dy, strict=True)),
    )


def spearman(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Spearman's ρ: Pearson's r of the average ranks; None when n < 2 or a side is constant."""
    return _pearson(ranks(x), ranks(y))


def agreement(
    rater: Sequence[float], human: Sequence[float], rater_pass: Sequence[bool], human_pass: Sequence[bool]
) -> Agreement:
    """Every figure of one rater against people, from paired values on 0-1 and paired pass/fail."""
    n = len(rater)
    kappa, p_o, p_e = cohen_kappa(rater_pass, human_pass)
    n_pass = len(rater_pass)
    kappa_ci = None
    if kappa is not None and n_pass >= KAPPA_CI_MIN_N:
        se = math.sqrt(p_o * (1 - p_o) / n_pass) / (1 - p_e)
        kappa_ci = (max(-1.0, kappa - _Z * se), min(1.0, kappa + _Z * se))
    if n == 0:
        return Agreement(
            n=0,
            n_pass=n_pass,
            kappa=kappa,
            kappa_ci_low=kappa_ci and kappa_ci[0],
            kappa_ci_high=kappa_ci and kappa_ci[1],
        )
    units = [alpha_unit((a, b)) for a, b in zip(rater, human, strict=True)]
    alpha = krippendorff_alpha(*(math.fsum(u[i] for u in units) for i in range(4)))
    r = _pearson(rater, human)
    r_ci = None
    if r is not None and n >= 4:
        if abs(r) >= 1.0:
            r_ci = (r, r)
        else:
            z, half = math.atanh(r), _Z / math.sqrt(n - 3)
            r_ci = (math.tanh(z - half), math.tanh(z + half))
    errors = [abs(a - b) for a, b in zip(rater, human, strict=True)]
    m = moments(n, math.fsum(errors), math.fsum(e * e for e in errors))
    mae_ci = confidence_interval(m, bounds=(0.0, 1.0))
    return Agreement(
        n=n,
        n_pass=n_pass,
        kappa=kappa,
        kappa_ci_low=kappa_ci[0] if kappa_ci else None,
        kappa_ci_high=kappa_ci[1] if kappa_ci else None,
        alpha=alpha,
        pearson=r,
        pearson_ci_low=r_ci[0] if r_ci else None,
        pearson_ci_high=r_ci[1] if r_ci else None,
        spearman=spearman(rater, human),
        mae=m.mean,
        mae_ci_low=mae_ci[0] if mae_ci else None,
        mae_ci_high=mae_ci[1] if mae_ci else None,
        bias=math.fsum(rater) / n - math.fsum(human) / n,
    )


@dataclass(frozen=True)
class IsotonicMap:
    """A monotone step map fitted by :func:`isotonic`: ``xs`` ascending, ``ys`` non-decreasing;
    between two points it interpolates linearly, outside it holds the end values."""

    xs: tuple[float, ...]
    ys: tuple[float, ...]

    def __call__(self, x: float) -> float:
        xs, ys = self.xs, self.ys
        if not xs:
            return x
        if x <= xs[0]:
            return ys[0]
        if x >= xs[-1]:
            return ys[-1]
        lo, hi = 0, len(xs) - 1
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if xs[mid] <= x:
                lo = mid
            else:
                hi = mid
        if xs[hi] == xs[lo]:
            return ys[hi]
        return ys[lo] + (ys[hi] - ys[lo]) * (x - xs[lo]) / (xs[hi] - xs[lo])


def isotonic(x: Sequence[float], y: Sequence[float]) -> IsotonicMap:
    """The non-decreasing least-squares fit of ``y`` on ``x`` (pool adjacent violators), as sklearn's
    ``IsotonicRegression(out_of_bounds="clip")``: equal ``x`` are pooled first (their mean ``y``)."""
    groups: dict[float, list[float]] = {}
    for a, b in zip(x, y, strict=True):
        groups.setdefault(a, []).append(b)
    xs = sorted(groups)
    # blocks of (sum of y, weight, first x index, last x index)
    blocks: list[list[float]] = []
    for i, a in enumerate(xs):
        blocks.append([math.fsum(groups[a]), float(len(groups[a])), i, i])
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] > blocks[-1][0] / blocks[-1][1]:
            s, w, _, last = blocks.pop()
            blocks[-1][0] += s
            blocks[-1][1] += w
            blocks[-1][3] = last
    ys = [0.0] * len(xs)
    for s, w, first, last in blocks:
        for i in range(int(first), int(last) + 1):
            ys[i] = s / w
    return IsotonicMap(tuple(xs), tuple(ys))
