"""Alert rules: the suite file's top-level ``alerts:`` list, checked against each closed window.

.. code-block:: yaml

    alerts:
      - name: qa-mean-low
        metric: mean_score        # see METRICS
        comparator: "<"
        threshold: 0.6
        window: 60                # one of STREAMEVAL_WINDOWS, seconds
        min_count: 20             # fewer events in the window: not evaluated
        severity: warning         # info | warning | critical
        cooldown_s: 600           # after firing for a model x suite, stay quiet this long
        suites: [qa]              # optional globs; default every suite
        models: ["gpt-4*"]        # optional globs; default every model

A rule is evaluated once per closed window × model × suite (streameval.windows publishes the
aggregate and the alerts together); a metric with no value in that window (e.g. alpha without a
panel) does not fire. Exactly-once across workers and the cooldown are claimed in Redis there.
"""

from __future__ import annotations

import fnmatch
import operator
from collections.abc import Callable, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from .errors import ConfigError, ConfigIssue
from .models import Aggregate, Alert

__all__ = [
    "EMPTY_WINDOWS",
    "HUMAN_MIN_LABELS",
    "METRICS",
    "AlertRule",
    "Metric",
    "build_alert",
    "check_alert_windows",
    "figures",
    "fires",
    "human_agreement",
    "metric_value",
]

Metric = Literal[
    "mean_score",
    "pass_rate",
    "alpha",
    "judge_drift",
    "dead_letter_rate",
    "judge_error_rate",
    "p95_latency_ms",
    "consistency",
    "human_agreement",
    "cost",
    "cost_per_event",
    "unpriced",
    "input_tokens",
    "output_tokens",
    "duration_p50_ms",
    "duration_p95_ms",
    "duration_p99_ms",
    "ttft_p95_ms",
    "length_finish_rate",
]

#: ``human_agreement`` reads a rater's kappa only with at least this many labels, unless the rule says
#: otherwise (``min_labels``): fewer pass/fail pairs give a kappa too noisy to alert on
HUMAN_MIN_LABELS = 30


def human_agreement(aggregate: Aggregate, min_labels: int = HUMAN_MIN_LABELS) -> float | None:
    """The lowest Cohen's kappa with people among the judges, the panel and the suite result of the window,
    over those with at least ``min_labels`` labelled pass/fail pairs (docs/feedback.md)."""
    if aggregate.human is None:
        return None
    return aggregate.human.lowest_kappa(min_labels)


#: with ``notify:``, a firing alert whose model x suite receives no event for this many windows of its size
#: resolves (``resolution: no_events``) unless the rule (or the detector's block) says otherwise
EMPTY_WINDOWS = 3


#: metric name -> how it is read off a window's aggregate (docs/statistics.md defines each figure)
METRICS: dict[str, Callable[[Aggregate], float | None]] = {
    "mean_score": lambda a: a.mean if a.count else None,
    "pass_rate": lambda a: a.pass_rate if a.count else None,
    "alpha": lambda a: a.alpha,
    "judge_drift": lambda a: max((j.drift for j in a.judges.values() if j.drift is not None), default=None),
    "dead_letter_rate": lambda a: a.dead_letter_rate,
    "judge_error_rate": lambda a: a.judge_error_rate,
    "p95_latency_ms": lambda a: a.latency_p95_ms,
    "consistency": lambda a: a.consistency,
    "human_agreement": human_agreement,
    # the monitored calls' usage (docs/usage.md): only with prices: or budgets: in the suite file
    "cost": lambda a: a.usage.cost if a.usage is not None and a.usage.priced else None,
    "cost_per_event": lambda a: a.usage.cost_per_event if a.usage is not None else None,
    "unpriced": lambda a: float(a.usage.unpriced) if a.usage is not None else None,
    "input_tokens": lambda a: float(a.usage.input_tokens) if a.usage is not None else None,
    "output_tokens": lambda a: float(a.usage.output_tokens) if a.usage is not None else None,
    "duration_p50_ms": lambda a: a.usage.duration_p50_ms if a.usage is not None else None,
    "duration_p95_ms": lambda a: a.usage.duration_p95_ms if a.usage is not None else None,
    "duration_p99_ms": lambda a: a.usage.duration_p99_ms if a.usage is not None else None,
    "ttft_p95_ms": lambda a: a.usage.ttft_p95_ms if a.usage is not None else None,
    "length_finish_rate": lambda a: _length_rate(a),
}

#: metrics in an alert's figures only when the window has them (the default alert stays as it was)
USAGE_METRICS = frozenset(list(METRICS)[list(METRICS).index("cost") :])


def _length_rate(aggregate: Aggregate) -> float | None:
    """Share of the window's calls with a finish reason that stopped at the token limit."""
    usage = aggregate.usage
    if usage is None:
        return None
    said = sum(usage.finish_reasons.values())
    cut = usage.finish_reasons.get("length", 0) + usage.finish_reasons.get("max_tokens", 0)
    return cut / said if said else None


_COMPARE: dict[str, Callable[[float, float], bool]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


class AlertRule(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(
        min_length=1,
        max_length=128,
        pattern=r"^[A-Za-z0-9_.-]+$",
        description="unique rule name (in alerts and Redis keys)",
    )
    metric: Metric = Field(description="what to watch: " + ", ".join(METRICS))
    comparator: Literal["<", "<=", ">", ">="] = Field(description="fire when value <comparator> threshold")
    threshold: float
    window: int = Field(gt=0, description="window size in seconds; must be one of STREAMEVAL_WINDOWS")
    min_count: int = Field(
        default=1, ge=0, description="events the window needs before the rule is evaluated"
    )
    severity: Literal["info", "warning", "critical"] = "warning"
    cooldown_s: int = Field(default=0, ge=0, description="quiet time per model x suite after firing, seconds")
    suites: list[str] | None = Field(default=None, min_length=1, description="suite name globs; none: all")
    models: list[str] | None = Field(default=None, min_length=1, description="model name globs; none: all")
    min_labels: int = Field(
        default=HUMAN_MIN_LABELS,
        ge=1,
        description="human_agreement: labels a rater needs in the window before its kappa counts",
    )
    segments: list[str] | None = Field(
        default=None,
        min_length=1,
        description="slice dimensions (segments:): fire per value of each instead of on the pair (docs/segments.md)",
    )
    resolve_after_empty: int | None = Field(
        default=EMPTY_WINDOWS,
        ge=1,
        description="with notify: a firing alert resolves (no_events) once this many windows of its size "
        "passed without an event of its model x suite; null: never",
    )

    def applies(self, model: str, suite: str) -> bool:
        return _glob(suite, self.suites) and _glob(model, self.models)


def _glob(value: str, patterns: list[str] | None) -> bool:
    return patterns is None or any(fnmatch.fnmatchcase(value, p) for p in patterns)


def check_alert_windows(
    rules: Sequence[AlertRule], windows: Sequence[int], *, file: str = "<config>"
) -> None:
    """Raise :class:`ConfigError` (path ``alerts[i].window``) for each rule whose window is not kept."""
    kept = ", ".join(map(str, windows))
    issues = [
        ConfigIssue(
            file=file,
            path=f"alerts[{i}].window",
            message=f"window {r.window} is not one of the kept windows (STREAMEVAL_WINDOWS={kept})",
        )
        for i, r in enumerate(rules)
        if r.window not in windows
    ]
    if issues:
        raise ConfigError(issues)


def metric_value(metric: str, aggregate: Aggregate) -> float | None:
    return METRICS[metric](aggregate)


def fires(rule: AlertRule, aggregate: Aggregate) -> float | None:
    """The metric's value when ``rule`` fires on ``aggregate``, else None (cooldown is not checked here)."""
    if aggregate.window.size_s != rule.window or not rule.applies(aggregate.model, aggregate.suite):
        return None
    segment = aggregate.segment
    if (segment is None) != (rule.segments is None):  # a rule with segments: fires on slices only
        return None
    if segment is not None and segment.dimension not in (rule.segments or ()):
        return None
    if aggregate.count < rule.min_count:
        return None
    value = (
        human_agreement(aggregate, rule.min_labels)
        if rule.metric == "human_agreement"
        else metric_value(rule.metric, aggregate)
    )
    if value is None or not _COMPARE[rule.comparator](value, rule.threshold):
        return None
    return value


def figures(aggregate: Aggregate) -> dict[str, float | None]:
    """Every alertable metric of the window plus its count, for the alert's ``figures``."""
    out: dict[str, float | None] = {
        name: read(aggregate)
        for name, read in METRICS.items()
        if aggregate.usage is not None or name not in USAGE_METRICS
    }
    out["count"] = float(aggregate.count)
    return out


def build_alert(
    rule: AlertRule, aggregate: Aggregate, value: float, *, fired_at: str, examples: Sequence[str] = ()
) -> Alert:
    """The alert message for ``rule`` firing on ``aggregate``; the id is stable per rule × window × pair.

    ``examples``: ids of the window's lowest-scored results (the first 3 are kept).
    """
    alert_id = (
        f"{rule.name}:{aggregate.window.size_s}:{aggregate.window.start}:{aggregate.model}:{aggregate.suite}"
    )
    if aggregate.suite_version:  # one alert per version of the suite (docs/versions.md)
        alert_id += f":{aggregate.suite_version}"
    segment = aggregate.segment
    where = "" if segment is None else f" ({segment.dimension} = {segment.value})"
    if segment is not None:
        alert_id += f":{segment.dimension}={segment.value}"
    message = (
        f"{rule.metric} {value:.4g} {rule.comparator} {rule.threshold:g} for {aggregate.model} / "
        f"{aggregate.suite}{where} in the {rule.window}s window from {aggregate.window.start} "
        f"({aggregate.count} events)"
    )
    return Alert(
        id=alert_id,
        rule=rule.name,
        severity=rule.severity,
        metric=rule.metric,
        comparator=rule.comparator,
        threshold=rule.threshold,
        value=value,
        count=aggregate.count,
        model=aggregate.model,
        suite=aggregate.suite,
        window=aggregate.window,
        message=message,
        fired_at=fired_at,
        min_count=rule.min_count,
        cooldown_s=rule.cooldown_s,
        figures=figures(aggregate),
        examples=list(examples)[:3],
        suite_version=aggregate.suite_version,
        segment=segment,
    )
