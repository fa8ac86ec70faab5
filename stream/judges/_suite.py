"""A suite's judge step: sampling, the panel call and the specs' blends.

``mode: blend`` (the report-quality spec's 最终分数): final = (metrics_weight x metrics + panel_weight x panel) /
(metrics_weight + panel_weight), 0.4 / 0.6 by default; when the panel fails (fewer than
``min_judges`` answers) the final score is the metrics score alone and the reason says so.

``mode: fallback`` (the RAG-evaluation spec's LLM回退): for each listed rule evaluator whose score is at or
under its trigger, the panel answers the metric's single-number prompt; the evaluator's score becomes
max(rule, LLM); when no judge answers, max(rule, ``default_score``). The suite score is then the
usual weighted mean of the (updated) evaluator scores.

Sampling: an event is judged when ``H(event id) < sample_rate``, with ``H`` the first 8 bytes of the
id's SHA-256 as a fraction of 2^64, so a replay samples the same events. Unsampled events keep the
rule scores and get a judge block with status ``unsampled``.

Panel aggregation (blend): ``weighted`` is :func:`panel_score`; ``zscore`` is the multi-judge spec's Z-score
standardisation (:func:`zscore_panel_score`) using the hub's running per-judge norms, falling back to
the weighted mean (and saying so in the reason) until every answering judge has ``zscore_min_n`` scores.

Consistency (the multi-judge spec's 一致性检查): a judged event is asked a second time, bypassing the cache, when
``H("consistency:" + id) < consistency_rate``; the (first, repeat) pairs go into the window counters
(:func:`repeat_counters`), the repeat never changes the score.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..agreement import IsotonicMap
from ..grading import combine
from ..models import PANEL_RESULT_NAME, EvaluatorResult, JudgeBlock, JudgeFallback, JudgeVerdict, RequestEvent
from ..signals import no_lag
from ._config import FallbackSpec, SuiteJudgeConfig
from ._cost import add_costs, prices_of
from ._panel import Judge, JudgeHub
from ._pressure import Backpressure
from ._prompts import Prompt, build_metric, build_report, build_rubric, data_block, known_category
from ._refusal import unscored_kind
from ._scoring import agreement_counters, judge_counters, panel_score, repeat_counters, zscore_panel_score

__all__ = ["PANEL_RESULT_NAME", "Judgement", "SuiteJudge", "apply_unscored", "rejudged", "sampled"]

#: name of the weight-0 evaluator result that carries the panel score and judge counters


def sampled(event_id: str, rate: float) -> bool:
    """Whether ``event_id`` is in the ``rate`` sample (deterministic; replays agree)."""
    if rate >= 1.0:
        return True
    fraction = int.from_bytes(hashlib.sha256(event_id.encode()).digest()[:8], "big") / 2.0**64
    return fraction < rate


def rejudged(event_id: str, rate: float) -> bool:
    """Whether a judged event is asked twice (the multi-judge spec's 一致性检查); a salted hash, independent of
    sampling."""
    return rate > 0 and sampled("consistency:" + event_id, rate)


Pair = tuple[JudgeVerdict, JudgeVerdict]
Asked = tuple[list[JudgeVerdict], list[Pair]]  # the panel's verdicts, and (first, repeat) pairs (or [])
#: what :meth:`SuiteJudge.begin` started: the panel's verdicts (no repeats), or a task asking repeats too
Started = asyncio.Future[list[JudgeVerdict]] | asyncio.Task[Asked]


@dataclass(frozen=True)
class Judgement:
    """The judge step's output: the final 0-1 score, the block, and the evaluator results to publish."""

    score: float
    block: JudgeBlock
    results: list[EvaluatorResult]
    counters: dict[str, float]


class SuiteJudge:
    def __init__(
        self,
        config: SuiteJudgeConfig,
        hub: JudgeHub,
        *,
        threshold: float,
        suite: str = "",
        lag: Callable[[], int] = no_lag,
    ) -> None:
        self.config = config
        self.hub = hub
        self.judges: list[Judge] = hub.panel(config.judges)
        self.threshold = threshold
        self.pressure = (
            None
            if config.backpressure is None
            else Backpressure(
                suite, config.backpressure, queued=lambda: sum(j.client.queued for j in self.judges), lag=lag
            )
        )
        self.prices = prices_of({j.name: j.config for j in self.judges})
        # calibrate: each judge's map judge score -> human score (0-1), from the suite file
        self._maps = {
            name: IsotonicMap(tuple(p[0] for p in points), tuple(p[1] for p in points))
            for name, points in config.calibration.items()
        }

    def _left_out(self, event: RequestEvent) -> str | None:
        """Why ``event`` is not judged (``unsampled`` or ``backpressure``), or None: judge it."""
        rate = self.config.sample_rate
        if not sampled(event.id, rate):
            return "unsampled"
        if self.pressure is not None:
            share = self.pressure.share()
            # the same hash at a lower rate: the events judged at a low level are a subset of the others
            if share < 1.0 and not sampled(event.id, rate * share):
                return "backpressure"
        return None

    def begin(self, event: RequestEvent) -> Started | None:
        """Start a blend panel's calls now (they do not depend on the rule scores); None otherwise."""
        if self.config.mode != "blend" or self._left_out(event) is not None:
            return None
        if not rejudged(event.id, self.config.consistency_rate):
            # the panel's asks gathered directly: no task around them (one task per event less)
            return asyncio.gather(*(self.hub.ask(j, p) for j, p in self._blend_asks(event)))
        return asyncio.ensure_future(self._ask_blend(event))

    async def _ask_blend(self, event: RequestEvent) -> Asked:
        asks = self._blend_asks(event)
        if not rejudged(event.id, self.config.consistency_rate):
            return await self.hub.ask_all(asks), []
        # each judge's repeat is asked once its primary holds a judge slot (or needed none), so a
        # repeat never takes a slot or a rate-limit turn ahead of its primary, yet both are in flight
        # together (one round trip); a primary that already failed gets no repeat, and a failed repeat
        # only loses its own pair
        sent = [asyncio.Event() for _ in asks]
        primary = [
            asyncio.ensure_future(self.hub.ask(j, p, sent=e)) for (j, p), e in zip(asks, sent, strict=True)
        ]

        async def again(i: int) -> JudgeVerdict | None:
            await sent[i].wait()
            if primary[i].done() and primary[i].result().status != "ok":
                return None
            return await self.hub.ask(*asks[i], fresh=True)

        try:
            repeat = await asyncio.gather(*(again(i) for i in range(len(asks))))
            first = list(await asyncio.gather(*primary))
        finally:
            for task in primary:
                task.cancel()  # only if we were cancelled: they are done otherwise
        return first, [(first[i], r) for i, r in enumerate(repeat) if r is not None]

    async def run(
        self, event: RequestEvent, results: list[EvaluatorResult], started: Started | None = None
    ) -> Judgement:
        """Judge ``event`` given its rule results; ``started`` is what :meth:`begin` returned."""
        metrics = combine((r.score, r.weight) for r in results)
        why = None if started is not None else self._left_out(event)
        if why == "unsampled":
            reason = f"not sampled (sample_rate {self.config.sample_rate:g}): rule scores only"
            block = self._block("unsampled", metrics, metrics, None, reason, category=None)
            return Judgement(metrics, block, results, {})
        if why == "backpressure" and self.pressure is not None:
            self.pressure.skipped()
            reason = (
                f"skipped: backpressure (judging {self.pressure.current:g} of the sampled events; "
                f"{self.pressure.why or 'recovering'}): rule scores only"
            )
            block = self._block("unsampled", metrics, metrics, None, reason, category=None)
            return Judgement(metrics, block, results, {"skip:backpressure": 1.0})
        if self.config.mode == "blend":
            got = await (started if started is not None else self._ask_blend(event))
            verdicts, repeat = got if isinstance(got, tuple) else (got, [])
            return self._blend(event, results, metrics, verdicts, repeat)
        return await self._fallback(event, results, metrics)

    # -- the report-quality spec's blend -----------------------------------------------------------
    def _category(self, event: RequestEvent) -> str | None:
        """The multi-judge spec's rubric for a rubric prompt: the event's category, or
        ``default_category``."""
        if self.config.prompt == "report":
            return None
        return event.category if known_category(event.category) else self.config.default_category

    def _blend_asks(self, event: RequestEvent) -> list[tuple[Judge, Prompt]]:
        category = self._category(event)
        if category is None:
            return [(j, build_report(event, blind=j.config.blind)) for j in self.judges]
        blocks: dict[bool, str] = {}  # the user message, built once per blind setting (not per judge)
        asks = []
        for j in self.judges:
            blind = j.config.blind
            user = blocks.get(blind)
            if user is None:
                user = blocks[blind] = data_block(event, blind=blind)
            asks.append((j, build_rubric(event, category, j.config.scale, blind=blind, user=user)))
        return asks

    def _blend(
        self,
        event: RequestEvent,
        results: list[EvaluatorResult],
        metrics: float,
        verdicts: list[JudgeVerdict],
        repeat: list[Pair],
    ) -> Judgement:
        cfg = self.config
        category = self._category(event)
        verdicts, unscored = apply_unscored(verdicts, cfg.unscored)
        answered = sum(v.status == "ok" for v in verdicts)
        # calibrate: the panel is computed from each judge's calibrated score; the verdicts keep the raw scores
        # (what the calibration is fitted on, docs/feedback.md)
        scored = self._calibrated(verdicts) if cfg.calibrate else verdicts
        panel = panel_score(scored) if answered >= cfg.min_judges else None
        note = (
            ""
            if category is None or category == event.category
            else (f"; category {event.category!r} has no rubric, used {category}")
        )
        if cfg.calibrate and panel is not None:
            note += f"; calibrated to human labels (uncalibrated panel {panel_score(verdicts):.2f})"
        if panel is not None and cfg.aggregation == "zscore":
            z = zscore_panel_score(scored, self.hub.norms, cfg.zscore_min_n)
            if z is None:
                note += f"; z-score norms not ready (fewer than {cfg.zscore_min_n} scores per judge): weighted mean"
            else:
                note += f"; z-score panel {z:.2f} (weighted {panel:.2f})"
                panel = z
        if panel is None:
            final = metrics
            reason = f"judge panel failed ({_failures(verdicts)}); final = metrics only (fallback){note}"
            status = "failed"
        else:
            mw, pw = cfg.metrics_weight, cfg.panel_weight
            final = (mw * metrics + pw * panel / 10.0) / (mw + pw)
            reason = (
                f"final = {mw:g} x metrics {metrics * 10:.2f} + {pw:g} x panel {panel:.2f}"
                f"{'' if math.isclose(mw + pw, 1.0) else f' / {mw + pw:g}'} = {final * 10:.2f}{note}"
            )
            status = "ok" if answered == len(verdicts) and not unscored else "partial"
            if answered < len(verdicts):
                reason += f"; {_failures(verdicts)}"
            if unscored and cfg.unscored == "midpoint":
                reason += f"; {_unscored_note(unscored)} counted as the midpoint"
        block = self._block(status, metrics, final, panel, reason, category=category, judges=verdicts)
        panel_result = self._panel_result(None if panel is None else panel / 10.0, status, verdicts)
        counters = judge_counters(verdicts)
        # a repeat that did not judge (refusal, default) says nothing about consistency: its call still counts
        pairs = [
            (a, b if unscored_kind(b) is None else b.model_copy(update={"status": "error"}))
            for a, b in repeat
            if a.name not in unscored
        ]
        repeated = repeat_counters([a for a, _ in pairs], [b for _, b in pairs]) if pairs else {}
        for extra in (agreement_counters([verdicts]), repeated):
            for name, value in extra.items():
                counters[name] = counters.get(name, 0.0) + value
        add_costs(counters, self.prices)
        if repeat:
            panel_result.details["repeat"] = {b.name: b.score for _, b in repeat}  # type: ignore[index]
        return Judgement(final, block, [*results, panel_result], counters)

    def _calibrated(self, verdicts: list[JudgeVerdict]) -> list[JudgeVerdict]:
        """Each answered verdict with its score mapped through its judge's calibration (0-10 in and out)."""
        maps = self._maps
        return [
            v.model_copy(update={"score": round(maps[v.name](v.score / 10) * 10, 6)})
            if v.status == "ok" and v.score is not None and v.name in maps
            else v
            for v in verdicts
        ]

    # -- the RAG-evaluation spec's per-metric fallback ---------------------------------------------
    async def _fallback(
        self, event: RequestEvent, results: list[EvaluatorResult], metrics: float
    ) -> Judgement:
        by_name = {r.name: i for i, r in enumerate(results)}
        specs = [s for s in self.config.fallbacks if s.evaluator in by_name]
        triggered = [s for s in specs if _triggered(s, results[by_name[s.evaluator]].score)]
        asks: list[tuple[Judge, Prompt]] = [
            (j, build_metric(event, s.prompt, blind=j.config.blind)) for s in triggered for j in self.judges
        ]
        verdicts, unscored = apply_unscored(await self.hub.ask_all(asks), self.config.unscored)
        per_metric = {
            s.evaluator: verdicts[i * len(self.judges) : (i + 1) * len(self.judges)]
            for i, s in enumerate(triggered)
        }
        updated = list(results)
        fallbacks: list[JudgeFallback] = []
        llm_scores: list[float] = []
        for spec in specs:
            index = by_name[spec.evaluator]
            rule = results[index].score
            judged = per_metric.get(spec.evaluator, [])
            answered = sum(v.status == "ok" for v in judged)
            panel = panel_score(judged) if judged and answered >= self.config.min_judges else None
            llm = None if panel is None else panel / 10.0
            if llm is not None:
                llm_scores.append(llm)
            final, source = rule, "rule"
            if spec.evaluator in per_metric:
                candidate = llm if llm is not None else self.config.default_score
                if candidate > rule:
                    final, source = candidate, "llm" if llm is not None else "default"
            fallbacks.append(
                JudgeFallback(
                    evaluator=spec.evaluator,
                    prompt=spec.prompt,
                    trigger=spec.effective_trigger(),
                    rule_score=rule,
                    triggered=spec.evaluator in per_metric,
                    llm_score=llm,
                    final_score=final,
                    source=source,  # type: ignore[arg-type]
                    judges=judged,
                )
            )
            if source != "rule":
                updated[index] = _raised(results[index], rule, final, source, self.threshold)
        final_score = combine((r.score, r.weight) for r in updated)
        asked = len(triggered)
        got = sum(f.llm_score is not None for f in fallbacks)
        status = "ok" if got == asked and not unscored else ("partial" if got else "failed")
        if not asked:
            reason = "no metric at or under its LLM fallback trigger: rule scores only"
        else:
            raised = [
                f"{f.evaluator} {f.rule_score:.2f} -> {f.final_score:.2f} ({f.source})"
                for f in fallbacks
                if f.source != "rule"
            ]
            reason = (
                f"LLM fallback asked for {asked} metric(s), {got} answered (final = max(rule, LLM)); "
                + (f"raised: {', '.join(raised)}" if raised else "no score raised")
            )
            if status == "failed":
                reason += (
                    f"; judges failed ({_failures(verdicts)}), default_score {self.config.default_score:g}"
                )
            if unscored and self.config.unscored == "midpoint":
                reason += f"; {_unscored_note(unscored)} counted as the midpoint"
        panel = round(math.fsum(llm_scores) / len(llm_scores) * 10.0, 6) if llm_scores else None
        block = self._block(status, metrics, final_score, panel, reason, category=None, fallbacks=fallbacks)
        out = updated
        if asked:
            out = [*updated, self._panel_result(None if panel is None else panel / 10.0, status, verdicts)]
        counters = judge_counters(verdicts)
        counters.update(agreement_counters(list(per_metric.values())))  # one unit per asked metric
        add_costs(counters, self.prices)
        return Judgement(final_score, block, out, counters)

    # -- helpers -----------------------------------------------------------------------------
    def _block(
        self,
        status: str,
        metrics: float,
        final: float,
        panel: float | None,
        reason: str,
        *,
        category: str | None,
        judges: Sequence[JudgeVerdict] = (),
        fallbacks: Sequence[JudgeFallback] = (),
    ) -> JudgeBlock:
        prompt = "metric" if self.config.mode == "fallback" else self.config.prompt
        return JudgeBlock(
            status=status,  # type: ignore[arg-type]
            mode=self.config.mode,
            prompt=prompt,
            category=category,
            panel_score=panel,
            metrics_score=round(metrics * 10.0, 6),
            final_score=round(min(1.0, max(0.0, final)) * 10.0, 6),
            reason=reason,
            judges=list(judges),
            fallbacks=list(fallbacks),
        )

    def _panel_result(
        self, score: float | None, status: str, verdicts: Sequence[JudgeVerdict]
    ) -> EvaluatorResult:
        answered = sum(v.status == "ok" for v in verdicts)
        details = {"status": status, "answered": answered, "asked": len(verdicts)}
        if score is None:
            return EvaluatorResult(
                name=PANEL_RESULT_NAME,
                score=0.0,
                passed=False,
                weight=0.0,
                details=details,
                reason=f"no usable judge answer ({_failures(verdicts)})",
                error="judge_unavailable",
            )
        return EvaluatorResult(
            name=PANEL_RESULT_NAME,
            score=round(score, 6),
            passed=score >= self.threshold,
            weight=0.0,
            details=details,
        )


def _triggered(spec: FallbackSpec, rule: float) -> bool:
    trigger = spec.effective_trigger()
    if trigger == "always":
        return True
    if trigger == "never":
        return False
    return rule <= trigger


def _raised(
    result: EvaluatorResult, rule: float, final: float, source: str, threshold: float
) -> EvaluatorResult:
    details = dict(result.details or {})
    details["llm_fallback"] = {"rule_score": rule, "final_score": final, "source": source}
    return result.model_copy(
        update={"score": final, "passed": result.passed or final >= threshold, "details": details}
    )


def apply_unscored(verdicts: list[JudgeVerdict], policy: str) -> tuple[list[JudgeVerdict], dict[str, str]]:
    """The verdicts under the suite's ``unscored`` policy, and ``{judge: refusal|default}`` of those that
    answered without judging. ``midpoint`` keeps them (the multi-judge spec: the default 3.0); ``exclude``
    turns them into errors ``judge_refused`` / ``judge_no_score``, so they leave the panel score."""
    unscored: dict[str, str] = {}
    out = list(verdicts)
    for i, v in enumerate(verdicts):
        kind = unscored_kind(v)
        if kind is None:
            continue
        unscored[v.name] = kind
        if policy == "exclude":
            code = "judge_refused" if kind == "refusal" else "judge_no_score"
            why = "refused to judge" if kind == "refusal" else "gave no score the parser could read"
            out[i] = v.model_copy(
                update={
                    "status": "error",
                    "error": code,
                    "score": None,
                    "reason": f"judge {v.name!r} {why}; left out of the panel (unscored: exclude)",
                }
            )
    return out, unscored


def _unscored_note(unscored: dict[str, str]) -> str:
    return (
        f"{len(unscored)} judge(s) gave no judgement ({', '.join(f'{n}: {k}' for n, k in unscored.items())})"
    )


def _failures(verdicts: Sequence[JudgeVerdict]) -> str:
    failed = [f"{v.name}: {v.error}" for v in verdicts if v.status != "ok"]
    return f"{len(failed)} of {len(verdicts)} judge(s) gave no score" + (
        f": {', '.join(failed)}" if failed else ""
    )
