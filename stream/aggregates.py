"""A closed window's figures: the :class:`~streameval.models.Aggregate` of one window hash, and the judges'
running norms over every pair's all-time hash (docs/statistics.md defines each figure).

Pure functions of the hashes the record script keeps (streameval.store); the window closer
(streameval.windows) reads the hashes and publishes what these build.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .models import (
    PANEL_RESULT_NAME,
    Aggregate,
    AggregateEvaluator,
    AggregateJudge,
    AlertWindow,
    HumanAgreement,
    format_time,
)
from .stats import Moments, confidence_interval, histogram_quantile, krippendorff_alpha, moments, pearson
from .usage_figures import usage_of

__all__ = ["CONSISTENCY_WARN_BELOW", "build_aggregate", "judge_norms"]

#: the multi-judge spec's 一致性检查: repeat-vs-first correlation below this warns
CONSISTENCY_WARN_BELOW = 0.8
_PANEL = f"ev:{PANEL_RESULT_NAME}:c:"


@dataclass(frozen=True)
class _Panel:
    judges: dict[str, dict[str, float]]  # judge -> counter -> value
    pairs: dict[tuple[str, str], dict[str, float]]
    alpha: dict[str, float]
    repeat: dict[str, float]
    skips: dict[str, float]  # "skip:{why}" counters of the suite (why: backpressure)


def _panel(fields: dict[str, float]) -> _Panel:
    panel = _Panel({}, {}, {}, {}, {})
    for field, value in fields.items():
        if not field.startswith(_PANEL):
            continue
        name = field[len(_PANEL) :]
        if ":" not in name:  # "{judge}.{counter}" (judge names have no ':')
            judge, _, counter = name.rpartition(".")
            panel.judges.setdefault(judge, {})[counter] = value
        elif name.startswith("pair:"):
            _, a, b, stat = name.split(":")
            panel.pairs.setdefault((a, b), {})[stat] = value
        elif name.startswith("alpha:"):
            panel.alpha[name[6:]] = value
        elif name.startswith("repeat:"):
            panel.repeat[name[7:]] = value
        elif name.startswith("skip:"):
            panel.skips[name[5:]] = value
    return panel


def _sums(stats: dict[str, float]) -> tuple[float, ...]:
    return tuple(stats.get(k, 0.0) for k in ("n", "sx", "sy", "sxx", "syy", "sxy"))


def _judge_moments(counters: dict[str, float]) -> Moments:
    return moments(counters.get("n", 0.0), counters.get("score_sum", 0.0), counters.get("score_sumsq", 0.0))


def build_aggregate(
    model: str,
    suite: str,
    size: int,
    start: int,
    fields: dict[str, float],
    all_time: dict[str, float],
    *,
    dead_letters: int,
    window_events: int,
    published_at: str,
    human: HumanAgreement | None = None,
) -> Aggregate:
    """The aggregate of one window hash (``fields``); ``all_time`` gives the judges' drift baseline.

    ``dead_letters`` and ``window_events`` (results of every pair in the window) give the dead-letter rate.
    """
    score = moments(fields.get("count", 0.0), fields.get("sum", 0.0), fields.get("sumsq", 0.0))
    ci = confidence_interval(score, bounds=(0.0, 1.0))  # scores are on 0-1
    evaluators: dict[str, AggregateEvaluator] = {}
    for field, value in fields.items():
        # "ev:{name}:count", not an evaluator's own counter "ev:{name}:c:count"
        if field.startswith("ev:") and field.endswith(":count") and ":c:" not in field and value > 0:
            name = field[3:-6]
            evaluators[name] = AggregateEvaluator(
                count=int(value),
                mean=fields.get(f"ev:{name}:sum", 0.0) / value,
                pass_rate=min(1.0, fields.get(f"ev:{name}:passes", 0.0) / value),
            )
    panel, history = _panel(fields), _panel(all_time)
    judges: dict[str, AggregateJudge] = {}
    for name, counters in sorted(panel.judges.items()):
        m, errors = _judge_moments(counters), int(counters.get("errors", 0.0))
        base = _judge_moments(history.judges.get(name, {}))
        drift = abs(m.mean - base.mean) / base.std if m.n and base.n >= 2 and base.std > 0 else None
        judges[name] = AggregateJudge(
            n=m.n,
            mean=m.mean if m.n else None,
            std=m.std if m.n >= 2 else None,
            errors=errors,
            error_rate=errors / (m.n + errors) if m.n + errors else None,
            drift=drift,
            calls=int(counters.get("calls", 0.0) + counters.get("repeat_calls", 0.0)),
            cache_hits=int(counters.get("cache_hits", 0.0)),
            cost=round(counters["cost"], 9) if "cost" in counters else None,
        )
    asked = sum(j.n + j.errors for j in judges.values())
    repeat = pearson(*_sums(panel.repeat))
    consistency_n = int(panel.repeat.get("n", 0.0))
    warnings = []
    if repeat is not None and repeat < CONSISTENCY_WARN_BELOW:
        warnings.append(
            f"judge consistency {repeat:.2f} < {CONSISTENCY_WARN_BELOW} over {consistency_n} repeats"
        )
    redirected = int(fields.get("late_redirected", 0.0))
    if redirected:
        warnings.append(
            f"{redirected} event(s) of already closed windows counted here (beyond the allowed lateness)"
        )
    latency_counts = {int(f[4:]): v for f, v in fields.items() if f.startswith("lat:")}
    total = dead_letters + window_events
    return Aggregate(
        model=model,
        suite=suite,
        window=AlertWindow(size_s=size, start=format_time(start), end=format_time(start + size)),
        count=score.n,
        mean=score.mean,
        std=score.std,
        pass_rate=min(1.0, fields.get("passes", 0.0) / score.n) if score.n else 0.0,
        grades={f[6:]: int(v) for f, v in sorted(fields.items()) if f.startswith("grade:") and v},
        evaluators=evaluators,
        published_at=published_at,
        ci_low=ci[0] if ci else None,
        ci_high=ci[1] if ci else None,
        dead_letters=dead_letters,
        dead_letter_rate=dead_letters / total if total else None,
        judge_error_rate=sum(j.errors for j in judges.values()) / asked if asked else None,
        tokens={
            kind: int(sum(c.get(f"{kind}_tokens", 0.0) for c in panel.judges.values()))
            for kind in ("prompt", "completion")
        }
        if panel.judges
        else {},
        latency_p95_ms=histogram_quantile(latency_counts, 0.95),
        judges=judges,
        judge_pearson={f"{a}|{b}": pearson(*_sums(stats)) for (a, b), stats in sorted(panel.pairs.items())},
        alpha=krippendorff_alpha(*(panel.alpha.get(k, 0.0) for k in ("n", "s1", "s2", "do"))),
        consistency=repeat,
        consistency_n=consistency_n,
        late=int(fields.get("late", 0.0)),
        late_redirected=redirected,
        warnings=warnings,
        judge_cost=round(sum(j.cost for j in judges.values() if j.cost is not None), 9)
        if any(j.cost is not None for j in judges.values())
        else None,
        backpressure_skips=int(panel.skips.get("backpressure", 0.0)),
        human=human,
        usage=usage_of(fields, score.n),
    )


def judge_norms(all_time: Sequence[dict[str, float]]) -> dict[str, Moments]:
    """Each judge's running mean and std over every pair's all-time hash (for z-score aggregation)."""
    sums: dict[str, list[float]] = {}
    for fields in all_time:
        for name, counters in _panel(fields).judges.items():
            acc = sums.setdefault(name, [0.0, 0.0, 0.0])
            for i, key in enumerate(("n", "score_sum", "score_sumsq")):
                acc[i] += counters.get(key, 0.0)
    return {name: moments(*acc) for name, acc in sums.items()}
