"""Scoring a panel's verdicts, pure functions with no I/O: :func:`panel_score` is the weighted mean over
the judges that answered (the multi-judge spec's 加权平均, 0-10); :func:`zscore_panel_score` is the multi-judge spec's Z-score
alternative. :func:`judge_counters` and :func:`agreement_counters` give the per-event sufficient
statistics the store adds into the window (docs/statistics.md).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence

from ..models import JudgeVerdict
from ..stats import Moments, alpha_unit
from ._context import TRUNCATION_WARNING

__all__ = ["agreement_counters", "judge_counters", "panel_score", "repeat_counters", "zscore_panel_score"]


def panel_score(verdicts: Sequence[JudgeVerdict]) -> float | None:
    """Weighted mean (0-10) over the judges that answered; None when none did (or their weights are 0)."""
    answered = [(v.score, v.weight) for v in verdicts if v.status == "ok" and v.score is not None]
    total = math.fsum(w for _, w in answered)
    if not answered or total <= 0:
        return None
    return round(math.fsum(s * w for s, w in answered) / total, 6)


def zscore_panel_score(
    verdicts: Sequence[JudgeVerdict], norms: Mapping[str, Moments], min_n: int
) -> float | None:
    """The multi-judge spec's Z-score 标准化 as a panel aggregation; None when a judge that answered has no usable norm.

    Each answer becomes z = (score - judge mean) / judge std (the judge's running figures); the panel
    value is the weighted mean z mapped back onto 0-10 with the weighted mean of the answering judges'
    means and stds: clip(μ̄ + z̄·σ̄, 0, 10). A lenient judge's 8 and a strict judge's 6 can so mean the
    same. A judge with fewer than ``min_n`` scores or a zero std has no usable norm (caller falls back).
    """
    answered = [v for v in verdicts if v.status == "ok" and v.score is not None]
    total = math.fsum(v.weight for v in answered)
    if not answered or total <= 0:
        return None
    rows: list[tuple[float, float, Moments]] = []
    for v in answered:
        m = norms.get(v.name)
        if m is None or m.n < min_n or m.std <= 0 or v.score is None:
            return None
        rows.append((v.weight, v.score, m))
    z = math.fsum(w * (score - m.mean) / m.std for w, score, m in rows)
    mean = math.fsum(w * m.mean for w, _, m in rows)
    std = math.fsum(w * m.std for w, _, m in rows)
    value = mean / total + (z / total) * (std / total)
    return round(min(10.0, max(0.0, value)), 6)


def agreement_counters(units: Sequence[Sequence[JudgeVerdict]]) -> dict[str, float]:
    """Inter-judge agreement sums over ``units`` (each the panel's verdicts on one prompt).

    ``pair:{a}:{b}:n|sx|sy|sxx|syy|sxy`` (a < b by name) for Pearson per judge pair, and
    ``alpha:n|s1|s2|do`` for Krippendorff's interval alpha (:func:`streameval.stats.alpha_unit`).
    Only answered scores (0-10) count. The names hold a ``:``, which judge names cannot, so they never
    collide with :func:`judge_counters`' ``{judge}.{counter}``.
    """
    out: dict[str, float] = {}

    def add(name: str, value: float) -> None:
        if value:
            out[name] = out.get(name, 0.0) + value

    for unit in units:
        scored = sorted((v.name, v.score) for v in unit if v.status == "ok" and v.score is not None)
        for i, (a, x) in enumerate(scored):
            for b, y in scored[i + 1 :]:
                for name, value in zip(_pair_names(a, b), (1.0, x, y, x * x, y * y, x * y), strict=True):
                    add(name, value)
        for name, value in zip(_ALPHA_NAMES, alpha_unit([score for _, score in scored]), strict=True):
            add(name, value)
    return out


_ALPHA_NAMES = ("alpha:n", "alpha:s1", "alpha:s2", "alpha:do")


@functools.lru_cache(maxsize=1024)
def _pair_names(a: str, b: str) -> tuple[str, ...]:
    """The six counter names of the judge pair (a, b), in the order they are added."""
    return tuple(f"pair:{a}:{b}:{stat}" for stat in ("n", "sx", "sy", "sxx", "syy", "sxy"))


def repeat_counters(first: Sequence[JudgeVerdict], repeat: Sequence[JudgeVerdict]) -> dict[str, float]:
    """The multi-judge spec's 一致性检查 sums: (first, repeat) score pairs per judge, pooled, as ``repeat:n|sx|...``.

    Also ``{judge}.repeat_calls`` and the repeat calls' tokens, so their cost shows in the window.
    """
    out: dict[str, float] = {}

    def add(name: str, value: float) -> None:
        if value:
            out[name] = out.get(name, 0.0) + value

    for a, b in zip(first, repeat, strict=True):
        if b.status != "skipped":
            add(f"{b.name}.repeat_calls", 1)
            add(f"{b.name}.prompt_tokens", b.prompt_tokens)
            add(f"{b.name}.completion_tokens", b.completion_tokens)
        if a.status == "ok" and b.status == "ok" and a.score is not None and b.score is not None:
            x, y = a.score, b.score
            for stat, value in (
                ("n", 1.0),
                ("sx", x),
                ("sy", y),
                ("sxx", x * x),
                ("syy", y * y),
                ("sxy", x * y),
            ):
                add("repeat:" + stat, value)
    return out


def judge_counters(verdicts: Sequence[JudgeVerdict]) -> dict[str, float]:
    """Per-judge window counters (added into ``ev:judge_panel:c:<judge>.<counter>`` by the store).

    ``calls`` are HTTP calls made (cache misses) and ``retries`` their attempts after the first,
    ``cache_hits`` (the cache, or an identical request in flight), ``prompt_tokens`` and
    ``completion_tokens`` of calls made, ``errors``, ``budget_skips``, ``truncated`` (prompts shortened
    to fit the judge's context window, :mod:`._context`), and ``n``/``score_sum``/``score_sumsq`` of
    answered scores (0-10) for per-judge window statistics.
    """
    out: dict[str, float] = {}

    def add(judge: str, counter: str, value: float) -> None:
        if value:
            key = f"{judge}.{counter}"
            out[key] = out.get(key, 0.0) + value

    for v in verdicts:
        if v.cached:
            add(v.name, "cache_hits", 1)
        elif v.attempts > 0:  # a follower of a failed identical request made no call
            add(v.name, "calls", 1)
            add(v.name, "retries", v.attempts - 1)
            add(v.name, "prompt_tokens", v.prompt_tokens)
            add(v.name, "completion_tokens", v.completion_tokens)
        if v.status == "error":
            add(v.name, "errors", 1)
        elif v.status == "skipped":
            add(v.name, "budget_skips", 1)
        elif v.score is not None:
            if v.warnings and not v.cached and any(w.startswith(TRUNCATION_WARNING) for w in v.warnings):
                add(v.name, "truncated", 1)
            add(v.name, "n", 1)
            add(v.name, "score_sum", v.score)
            add(v.name, "score_sumsq", v.score * v.score)
    return out
