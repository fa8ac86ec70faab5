"""The judge hub: every configured judge's client, budget and cache, and the panel fan-out (I/O).

:meth:`JudgeHub.ask` runs one judge on one prompt and never raises for the judge's failures: the
returned :class:`~streameval.models.JudgeVerdict` says ``ok``, ``error`` (with the error code) or
``skipped`` (reason ``budget``). :meth:`JudgeHub.ask_all` asks a panel concurrently. Scoring the
answers (pure functions, no I/O) is :mod:`._scoring`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import httpx

from .._util import clip
from ..models import JudgeVerdict
from ..stats import Moments
from ._budget import MoneyBudget
from ._cache import CachedAnswer, JudgeCache, TokenBudget
from ._client import JudgeClient
from ._config import JudgeConfig
from ._cost import prices_of, token_cost
from ._errors import JudgeBudgetExceeded, JudgeError
from ._flight import SingleFlight
from ._parse import SCALES, ParsedAnswer, normalise, parse_answer
from ._prompts import Prompt
from ._refusal import REFUSAL_WARNING, find_refusal, is_text_stage
from ._stats import JudgeStats
from ._structured import answer_schema

__all__ = ["Judge", "JudgeHub"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Judge:
    config: JudgeConfig
    client: JudgeClient
    budget: TokenBudget
    money: MoneyBudget | None = None

    @property
    def name(self) -> str:
        return self.config.name


class JudgeHub:
    """All judges of a config, opened once per process and shared by every suite."""

    def __init__(
        self,
        judges: Sequence[JudgeConfig],
        *,
        cache: JudgeCache | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        environ: Mapping[str, str] | None = None,
        clock: Callable[[], float] = time.monotonic,
        log_interval_s: float | None = 60.0,
        budget_scope: str = "",
    ) -> None:
        self.cache = cache
        self.log_interval_s = log_interval_s
        self._logger: asyncio.Future[None] | None = None
        self.judges: dict[str, Judge] = {
            cfg.name: Judge(
                cfg,
                JudgeClient(cfg, transport=transport, environ=environ, clock=clock),
                TokenBudget(cfg.tokens_per_minute, clock),
                _money(cfg, cache, budget_scope),
            )
            for cfg in judges
            if cfg.enabled
        }
        self.prices = prices_of({name: j.config for name, j in self.judges.items()})
        self._syncs: list[asyncio.Future[None]] = []
        #: per-judge running mean and std of its 0-10 scores (all suites, all time), for z-scores;
        #: refreshed from Redis by the worker's periodic task (streameval.windows)
        self.norms: dict[str, Moments] = {}
        #: identical requests in flight (one call each)
        self.flights: SingleFlight[_Fetched] = SingleFlight()
        #: in-process per-judge calls and errors, for the worker's periodic log and `evaluate`'s table
        self.stats = JudgeStats()

    async def start(self) -> None:
        for judge in self.judges.values():
            await judge.client.start()
        if self.log_interval_s and self._logger is None:
            self._logger = asyncio.ensure_future(self.stats.log_every(self.log_interval_s))
        if not self._syncs:
            self._syncs = [asyncio.ensure_future(j.money.run()) for j in self.judges.values() if j.money]

    async def close(self) -> None:
        if self._logger is not None:
            self._logger.cancel()
            await asyncio.gather(self._logger, return_exceptions=True)
            self._logger = None
        for sync in self._syncs:
            sync.cancel()
        await asyncio.gather(*self._syncs, return_exceptions=True)
        self._syncs = []
        for judge in self.judges.values():
            if judge.money is not None:
                await judge.money.sync()  # what this process spent last reaches the shared total
            await judge.client.close()

    def panel(self, names: Sequence[str] | None) -> list[Judge]:
        """The enabled judges named (all enabled judges for None), in config order."""
        return [j for name, j in self.judges.items() if names is None or name in names]

    async def ask_all(self, asks: Sequence[tuple[Judge, Prompt]]) -> list[JudgeVerdict]:
        """Every (judge, prompt) pair at once; results in the same order."""
        return list(await asyncio.gather(*(self.ask(judge, prompt) for judge, prompt in asks)))

    async def ask(
        self, judge: Judge, prompt: Prompt, *, fresh: bool = False, sent: asyncio.Event | None = None
    ) -> JudgeVerdict:
        """One judge's verdict; ``fresh`` bypasses the cache both ways (the multi-judge spec's consistency re-judging).

        Identical requests in flight at once make one call (:class:`SingleFlight`); the others share
        its answer and count as cache hits (``cached``), or share its failure with ``attempts`` 0.
        ``sent`` is set once the request holds a judge slot, or needs none (the cache, another
        request's flight, a skip, an error), or is done.
        """
        cfg = judge.config
        try:
            if fresh:
                got, shared = await self._fetch(judge, prompt, None, sent), False
            else:
                key = (
                    self.cache.key(cfg.name, cfg.model, prompt.version, prompt.system, prompt.user)
                    if self.cache
                    else None
                )
                flight = (cfg.name, cfg.model, prompt.version, prompt.system, prompt.user)
                got, shared = await self.flights.do(flight, lambda: self._fetch(judge, prompt, key, sent))
        except Exception as exc:  # a bug of ours must not lose the event: this judge counts as failed
            log.exception("judge %s failed unexpectedly", cfg.name)
            verdict = _verdict(cfg, prompt, status="error", error="internal", reason=type(exc).__name__)
        else:
            verdict = got.verdict(cfg, prompt, shared=shared)
        finally:
            if sent is not None:
                sent.set()
        self.stats.record(verdict)
        return verdict

    async def _fetch(
        self, judge: Judge, prompt: Prompt, key: str | None, sent: asyncio.Event | None
    ) -> _Fetched:
        """Cache read, call, parse, cache write: the work of one flight. Judge errors are returned."""
        cfg = judge.config
        got = _Fetched()
        try:
            got.answer = await self.cache.get(key) if self.cache and key else None
            if got.answer is not None:
                got.cached = True
                got.parsed = _read(got.answer.text, prompt)
                return got
            if judge.budget.exhausted():
                raise JudgeBudgetExceeded(
                    f"judge {cfg.name!r} spent its {cfg.tokens_per_minute} tokens of the last minute"
                )
            if judge.money is not None and judge.money.exhausted():
                raise JudgeBudgetExceeded(
                    f"judge {cfg.name!r} spent its budget of {cfg.budget_per_hour:g} for this hour (all workers)"
                )
            schema = answer_schema(prompt) if cfg.structured else None
            completion = await judge.client.complete(
                prompt.system, prompt.user, schema, on_slot=None if sent is None else sent.set
            )
            judge.budget.spend(completion.prompt_tokens + completion.completion_tokens)
            if judge.money is not None:
                judge.money.spend(
                    token_cost(self.prices[cfg.name], completion.prompt_tokens, completion.completion_tokens)
                )
            got.answer = CachedAnswer(completion.text, completion.prompt_tokens, completion.completion_tokens)
            got.latency_ms, got.attempts = completion.latency_ms, completion.attempts
            got.parsed = _read(got.answer.text, prompt)  # unusable answers raise and are not cached
            if completion.truncated is not None:  # the prompt was shortened to fit the context window
                got.parsed.warnings.append(completion.truncated)
        except JudgeError as exc:
            got.error = exc
            got.attempts = got.attempts or exc.attempts
            return got
        # nor are answers with no score in them, nor refusals (they may pass on another day)
        if self.cache and key and got.parsed.parse != "default" and not _refused(got.parsed):
            await self.cache.put(key, got.answer)
        return got


@dataclass(slots=True)
class _Fetched:
    """What one flight got: an answer and its parse, or a judge error (shared by its followers)."""

    answer: CachedAnswer | None = None
    parsed: ParsedAnswer = None  # type: ignore[assignment]  # set unless error is
    error: JudgeError | None = None
    cached: bool = False
    latency_ms: float = 0.0
    attempts: int = 0

    def verdict(self, cfg: JudgeConfig, prompt: Prompt, *, shared: bool) -> JudgeVerdict:
        """The verdict of the leader, or (``shared``) of a follower: no call, no tokens of its own."""
        exc = self.error
        if isinstance(exc, JudgeBudgetExceeded):
            return _verdict(cfg, prompt, status="skipped", error=exc.code, reason=str(exc))
        if exc is not None:
            reason = clip(str(exc), 500)
            if shared:
                return _verdict(
                    cfg,
                    prompt,
                    status="error",
                    error=exc.code,
                    reason=f"the same request in flight failed: {reason}",
                )
            return _verdict(
                cfg,
                prompt,
                status="error",
                error=exc.code,
                reason=reason,
                answer=self.answer,
                latency_ms=self.latency_ms,
                attempts=self.attempts,
                cached=self.cached,
            )
        if shared:
            return _verdict(cfg, prompt, status="ok", verdict=self.parsed, answer=self.answer, cached=True)
        return _verdict(
            cfg,
            prompt,
            status="ok",
            verdict=self.parsed,
            answer=self.answer,
            latency_ms=self.latency_ms,
            attempts=self.attempts,
            cached=self.cached,
        )


def _money(cfg: JudgeConfig, cache: JudgeCache | None, scope: str = "") -> MoneyBudget | None:
    """The judge's shared money budget (on the cache's Redis and prefix; per process without one). A
    ``scope`` (shadows: ``~shadow``, backfills: ``~backfill``) gives the judge a budget of its own there."""
    if cfg.budget_per_hour is None:
        return None
    if cache is None:
        return MoneyBudget(cfg.name + scope, cfg.budget_per_hour)
    return MoneyBudget(cfg.name + scope, cfg.budget_per_hour, client=cache.client, prefix=cache.prefix)


def _read(text: str, prompt: Prompt) -> ParsedAnswer:
    """Parse an answer; a refusal in an answer not read as JSON counts as the scale's midpoint."""
    verdict = parse_answer(text, prompt)
    if is_text_stage(verdict.parse):
        phrase = find_refusal(text)
        if phrase is not None:
            middle = SCALES[verdict.scale][2]
            verdict.scores = dict.fromkeys(verdict.scores, middle)
            verdict.overall = middle if verdict.scale == "0-1" else None  # the 0-1 answer is its overall
            verdict.computed = None if verdict.computed is None else middle
            verdict.score = round(normalise(middle, verdict.scale), 6)
            verdict.warnings.append(f"{REFUSAL_WARNING}{clip(phrase, 80)}")
    return verdict


def _refused(verdict: ParsedAnswer) -> bool:
    return any(w.startswith(REFUSAL_WARNING) for w in verdict.warnings)


def _verdict(
    cfg: JudgeConfig,
    prompt: Prompt,
    *,
    status: Literal["ok", "error", "skipped"],
    verdict: ParsedAnswer | None = None,
    answer: CachedAnswer | None = None,
    error: str | None = None,
    reason: str | None = None,
    latency_ms: float = 0.0,
    attempts: int = 0,
    cached: bool = False,
) -> JudgeVerdict:
    out = JudgeVerdict(
        name=cfg.name,
        model=cfg.model,
        weight=cfg.weight,
        status=status,
        prompt=prompt.kind,
        scale=prompt.scale,  # type: ignore[arg-type]  # Prompt.scale is one of the three
        error=error,
        reason=reason,
        latency_ms=latency_ms,
        attempts=attempts,
        cached=cached,
        prompt_tokens=answer.prompt_tokens if answer else 0,
        completion_tokens=answer.completion_tokens if answer else 0,
    )
    if verdict is None:
        return out
    # what out.model_copy(update=...) stores (no validation), on ``out`` itself: nobody else holds it yet
    update = {
        "score": min(10.0, max(0.0, verdict.score)),
        "parse": verdict.parse,
        "scores": verdict.scores,
        "overall": verdict.overall,
        "computed": verdict.computed,
        "reasoning": verdict.reasoning,
        "strengths": verdict.strengths,
        "weaknesses": verdict.weaknesses,
        "warnings": verdict.warnings,
    }
    out.__dict__.update(update)
    out.__pydantic_fields_set__.update(update)
    return out
