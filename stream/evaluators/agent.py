"""The agent-metrics spec's generalisation metrics for agents, from the event's ``agent`` block.

* ``collaboration_efficiency`` = task_quality / (communication_rounds × task_time + 1); a task_time of 0
  scores 0 (the spec's ``if task_time == 0`` guard).
* ``portability`` = 1 − min(loss, 1) with loss = (original − transferred) / original; an original score
  of 0 scores 0 (the spec). A transfer that *improves* the score (negative loss) is clamped to 1 — the spec
  would return more than 1 although it says the result stays in [0, 1]; the raw loss is in ``details``.
* ``adaptability`` = mean of per-domain scores. Per event: the mean over the domains of the event's
  ``results`` (the spec's plain mean when each domain appears once). Over a window: every event adds
  ``domain:{name}:sum`` and ``domain:{name}:n`` counters, and :func:`adaptability_from_counters` gives the mean over domains of
  each domain's mean — so a domain with many events does not outweigh one with few.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping

from pydantic import Field

from ..blocks import AgentBlock
from ..models import RequestEvent
from ._base import Evaluator, MissingField, Params, Score, register

__all__ = [
    "Adaptability",
    "CollaborationEfficiency",
    "Portability",
    "adaptability_from_counters",
    "domain_means",
]


def _block(event: RequestEvent) -> AgentBlock:
    if event.agent is None:
        raise MissingField("the event has no agent block")
    return event.agent


def _need(value: float | None, field: str) -> float:
    if value is None:
        raise MissingField(f"agent.{field} is missing")
    return float(value)


class AgentParams(Params):
    threshold: float = Field(default=0.5, ge=0.0, le=1.0, description="pass at or above this score")


class EfficiencyParams(Params):
    threshold: float = Field(
        default=0.0,
        ge=0.0,
        le=1.0,
        description="pass at or above this efficiency; 0 = always pass (the figure is small by construction)",
    )


@register
class CollaborationEfficiency(Evaluator):
    """The agent-metrics spec: task_quality / (communication_rounds × task_time + 1)."""

    name = "collaboration_efficiency"
    summary = "quality / (rounds × time + 1)"
    Params = EfficiencyParams
    params: EfficiencyParams

    def evaluate(self, event: RequestEvent) -> Score:
        block = _block(event)
        quality = _need(block.task_quality, "task_quality")
        rounds = _need(block.communication_rounds, "communication_rounds")
        seconds = _need(block.task_time, "task_time")
        value = 0.0 if seconds == 0 else quality / (rounds * seconds + 1)
        details = {"quality": quality, "communication_rounds": rounds, "task_time": seconds}
        return Score(value, value >= self.params.threshold, f"efficiency {value:.4f}", details)


@register
class Portability(Evaluator):
    """The agent-metrics spec: 1 − min((original − transferred) / original, 1), clamped to [0, 1]."""

    name = "portability"
    summary = "performance kept after moving to another environment"
    Params = AgentParams
    params: AgentParams

    def evaluate(self, event: RequestEvent) -> Score:
        block = _block(event)
        original = _need(block.original_score, "original_score")
        transferred = _need(block.transferred_score, "transferred_score")
        if original == 0:
            return Score(0.0, False, "original score is 0: portability 0", {"performance_loss": 1.0})
        loss = (original - transferred) / original
        value = min(1.0, 1.0 - min(loss, 1.0))
        return Score(
            value, value >= self.params.threshold, f"performance loss {loss:.3f}", {"performance_loss": loss}
        )


def domain_means(counters: Mapping[str, float], *, evaluator: str | None = None) -> dict[str, float]:
    """Per-domain mean score from summed ``domain:{name}:sum`` / ``domain:{name}:n`` counters; with
    ``evaluator`` set, from an aggregate's hash fields ``ev:{evaluator}:c:domain:...``."""
    prefix = f"ev:{evaluator}:c:domain:" if evaluator is not None else "domain:"
    sums: dict[str, float] = defaultdict(float)
    counts: dict[str, float] = defaultdict(float)
    for key, value in counters.items():
        if not key.startswith(prefix):
            continue
        domain, _, kind = key[len(prefix) :].rpartition(":")
        if kind == "sum":
            sums[domain] += float(value)
        elif kind == "n":
            counts[domain] += float(value)
    return {d: sums[d] / n for d, n in counts.items() if n > 0}


def adaptability_from_counters(counters: Mapping[str, float], *, evaluator: str | None = None) -> float:
    """The agent-metrics spec's adaptability over a window: the mean of the per-domain means (0.0 with no
    domain)."""
    means = domain_means(counters, evaluator=evaluator)
    return sum(means.values()) / len(means) if means else 0.0


@register
class Adaptability(Evaluator):
    """The agent-metrics spec: mean of per-domain scores; counters per domain feed the window figure."""

    name = "adaptability"
    summary = "mean of per-domain scores; per-domain window counters"
    Params = AgentParams
    params: AgentParams

    def evaluate(self, event: RequestEvent) -> Score:
        results = _block(event).results
        if not results:
            raise MissingField("agent.results is empty")
        counters: dict[str, float] = defaultdict(float)
        for r in results:
            counters[f"domain:{r.domain}:sum"] += r.score
            counters[f"domain:{r.domain}:n"] += 1.0
        means = domain_means(counters)
        value = sum(means.values()) / len(means)
        return Score(
            value,
            value >= self.params.threshold,
            f"mean over {len(means)} domain(s) {value:.3f}",
            {"domains": means},
            dict(counters),
        )
