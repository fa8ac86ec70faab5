"""The review queue: results worth a person's look, at a bounded rate per model × suite (docs/feedback.md).

A new result (not a redelivered one; an event's, or a closed session's: :mod:`.step`) is a candidate when

* ``gate_failed``: a gate evaluator failed;
* ``judges_disagree``: the spread (highest − lowest) of its judges' scores (0-10) is at least ``spread``;
* ``near_threshold``: its score is within ``margin`` of the suite threshold;
* ``control``: it passed and falls in a ``control_rate`` sample (by a hash of its id, so a replay picks
  the same ones): people should see some passes too, or agreement is measured on failures only.

Candidates of one batch are ranked in that order (then by how many reasons they have), and each pair may
publish at most ``rate_per_min`` per minute of the Redis clock, counted across every worker in one
counter per pair and minute (``P{T}:rv:{minute}``, one script call per pair with candidates per batch).
A burst publishes its first ``rate_per_min`` best candidates and drops the rest (counted in
``streameval_review_dropped_total``): the queue is for people, who cannot read faster than that anyway.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import orjson
from pydantic import BaseModel, ConfigDict, Field

from ... import _lua, telemetry
from ..._util import clip
from ...keyspace import Client, Keys, guard, run_scripts
from ...models import GradedResult, ReviewItem, ReviewReason, format_time

__all__ = ["REASONS", "ReviewConfig", "ReviewKeeper", "ReviewQueue", "reasons"]

REASONS: tuple[ReviewReason, ...] = ("gate_failed", "judges_disagree", "near_threshold", "control")
Reason = ReviewReason
_TEXT_CHARS = 4000


class ReviewConfig(BaseModel):
    """The suite file's optional top-level ``review:`` block; absent: no review queue."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    rate_per_min: int = Field(
        default=10,
        ge=1,
        le=100_000,
        description="most results sent for review per model × suite and minute (all workers)",
    )
    spread: float = Field(
        default=3.0,
        gt=0.0,
        le=10.0,
        description="judges disagree: highest - lowest judge score (0-10) at least this",
    )
    margin: float = Field(
        default=0.05, ge=0.0, le=1.0, description="near the threshold: |score - threshold| <= this"
    )
    control_rate: float = Field(
        default=0.01, ge=0.0, le=1.0, description="share of passing results sent as a control"
    )
    # the review page (streameval.features.review_page): the queue people label in the browser
    reviewers: int = Field(
        default=1, ge=1, le=100, description="labels wanted per item, each by another person"
    )
    keep: int = Field(
        default=1000, ge=0, le=10_000, description="recent items kept for the review page (0: none)"
    )
    keep_ttl_s: int = Field(
        default=7 * 86400, ge=60, le=90 * 86400, description="how long the review page keeps an item, s"
    )
    lease_s: float = Field(
        default=600.0,
        ge=10.0,
        le=86400.0,
        description="an opened item is reserved this long (renewed while open)",
    )


def _spread(result: GradedResult) -> float | None:
    scores = [
        v.score
        for v in (result.judge.judges if result.judge else [])
        if v.status == "ok" and v.score is not None
    ]
    return max(scores) - min(scores) if len(scores) >= 2 else None


def reasons(result: GradedResult, config: ReviewConfig) -> list[Reason]:
    """Why ``result`` is worth a look, most important first; empty when it is not."""
    out: list[Reason] = []
    if result.failed_gates:
        out.append("gate_failed")
    spread = _spread(result)
    if spread is not None and spread >= config.spread:
        out.append("judges_disagree")
    if abs(result.score - result.threshold) <= config.margin:
        out.append("near_threshold")
    if not out and result.passed and config.control_rate > 0:
        roll = int.from_bytes(hashlib.sha256(f"review:{result.id}".encode()).digest()[:8], "big") / 2**64
        if roll < config.control_rate:
            out.append("control")
    return out


def _words(result: GradedResult, why: list[Reason], spread: float | None, config: ReviewConfig) -> str:
    parts = []
    for reason in why:
        if reason == "gate_failed":
            parts.append(f"gate(s) failed: {', '.join(result.failed_gates)}")
        elif reason == "judges_disagree":
            parts.append(f"judges disagree: spread {spread:g} >= {config.spread:g} (0-10)")
        elif reason == "near_threshold":
            parts.append(
                f"score {result.score:.3f} within {config.margin:g} of the threshold {result.threshold:g}"
            )
        else:
            parts.append(f"a random control sample of passing results ({config.control_rate:g})")
    return "; ".join(parts)


#: (suite, texts) -> the texts redacted (docs/redact.md)
Redact = Callable[[str, Sequence[str | None]], list[str | None]]


def _texts(raw: bytes | None, redact: Redact | None = None, suite: str = "") -> tuple[str | None, str | None]:
    """Input and output of a native request event's bytes (other formats: unknown here), redacted before
    they are cut (a value cut in half would not be found)."""
    if not raw:
        return None, None
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None, None
    if not isinstance(doc, dict):
        return None, None
    text_in, text_out = doc.get("input"), doc.get("output")
    if redact is not None:
        text_in, text_out = redact(
            suite,
            [text_in if isinstance(text_in, str) else None, text_out if isinstance(text_out, str) else None],
        )
    return (
        clip(text_in, _TEXT_CHARS) if isinstance(text_in, str) else None,
        clip(text_out, _TEXT_CHARS) if isinstance(text_out, str) else None,
    )


class ReviewKeeper(Protocol):
    """Keeps the items published for review (the review page's queue); built only when it is on."""

    async def keep(
        self,
        items: Sequence[ReviewItem],
        results: Sequence[tuple[str, GradedResult, bytes | None]],
        threads: Mapping[str, list[dict[str, str]]] | None = None,
    ) -> int: ...


class ReviewQueue:
    """Selects candidates and applies the per-pair rate (module docstring); ``keeper`` keeps what it sends."""

    def __init__(
        self,
        client: Client,
        keys: Keys,
        config: ReviewConfig,
        *,
        keeper: ReviewKeeper | None = None,
        redact: Redact | None = None,
    ) -> None:
        """``redact``: the texts of an item as they may leave (the suite file's ``redact:``)."""
        self.client = client
        self.redact = redact
        self.keys = keys
        self.config = config
        self.keeper = keeper
        self._take = client.register_script(_lua.REVIEW_TAKE)

    def counter_key(self, pair: str, minute: int) -> str:
        return self.keys.pair(pair) + f"rv:{minute}"

    async def select(
        self, results: Sequence[tuple[str, GradedResult, bytes | None]], now: float
    ) -> list[ReviewItem]:
        """The review items of new results ``(pair, result, raw request or None)``, within each pair's rate."""
        by_pair: dict[str, list[tuple[int, GradedResult, list[Reason], bytes | None]]] = {}
        for pair, result, raw in results:
            why = reasons(result, self.config)
            if why:
                rank = min(REASONS.index(r) for r in why)
                by_pair.setdefault(pair, []).append((rank * 10 - len(why), result, why, raw))
        if not by_pair:
            return []
        minute = int(now // 60)
        calls: list[tuple[Any, list[str], list[Any]]] = [
            (self._take, [self.counter_key(pair, minute)], [self.config.rate_per_min, len(group), 120])
            for pair, group in by_pair.items()
        ]
        grants = await guard(run_scripts(self.client, calls))
        items: list[ReviewItem] = []
        stamp = format_time(now)
        for group, grant in zip(by_pair.values(), grants, strict=True):
            group.sort(key=lambda c: c[0])
            keep = int(grant)
            if len(group) > keep:
                telemetry.REVIEW_DROPPED.labels(group[0][1].suite).inc(len(group) - keep)
            for _, result, why, raw in group[:keep]:
                spread = _spread(result)
                text_in, text_out = _texts(raw, self.redact, result.suite)
                judges = {
                    v.name: v.score if v.status == "ok" else None
                    for v in (result.judge.judges if result.judge else [])
                }
                items.append(
                    ReviewItem(
                        id=result.id,
                        model=result.model,
                        suite=result.suite,
                        reasons=why,
                        reason=_words(result, why, spread, self.config),
                        score=result.score,
                        passed=result.passed,
                        threshold=result.threshold,
                        judges=judges,
                        judge_spread=spread,
                        failed_gates=result.failed_gates,
                        input=text_in,
                        output=text_out,
                        event_time=result.event_time,
                        selected_at=stamp,
                    )
                )
        return items
