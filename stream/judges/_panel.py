"""The judge hub: every configured judge's client, budget and cache, and the panel fan-out.

:meth:`JudgeHub.ask` runs one judge on one prompt and never raises for the judge's failures: the
returned :class:`~streameval.models.JudgeVerdict` says ``ok``, ``error`` (with the error code) or
``skipped`` (reason ``budget``). :meth:`JudgeHub.ask_all` asks a panel concurrently; :func:`panel_score`
is the weighted mean over the judges that answered (seed 003 加权平均, 0-10).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import httpx

from .._util import clip
from ..models import JudgeVerdict
from ._cache import CachedAnswer, JudgeCache, TokenBudget
from ._client import JudgeClient
from ._config import JudgeConfig
from ._errors import JudgeBudgetExceeded, JudgeError
from ._parse import Verdict, parse_answer
from ._prompts import Prompt

__all__ = ["Judge", "JudgeHub", "judge_counters", "panel_score"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Judge:
    config: JudgeConfig
    client: JudgeClient
    budget: TokenBudget

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
    ) -> None:
        self.cache = cache
        self.judges: dict[str, Judge] = {
            cfg.name: Judge(cfg, JudgeClient(cfg, transport=transport, environ=environ, clock=clock),
                            TokenBudget(cfg.tokens_per_minute, clock))
            for cfg in judges if cfg.enabled
        }  # fmt: skip

    async def start(self) -> None:
        for judge in self.judges.values():
            await judge.client.start()

    async def close(self) -> None:
        for judge in self.judges.values():
            await judge.client.close()

    def panel(self, names: Sequence[str] | None) -> list[Judge]:
        """The enabled judges named (all enabled judges for None), in config order."""
        return [j for name, j in self.judges.items() if names is None or name in names]

    async def ask_all(self, asks: Sequence[tuple[Judge, Prompt]]) -> list[JudgeVerdict]:
        """Every (judge, prompt) pair at once; results in the same order."""
        return list(await asyncio.gather(*(self.ask(judge, prompt) for judge, prompt in asks)))

    async def ask(self, judge: Judge, prompt: Prompt) -> JudgeVerdict:
        cfg = judge.config
        key = self.cache.key(cfg.name, cfg.model, prompt.version, prompt.system, prompt.user) if self.cache else None
        answer: CachedAnswer | None = await self.cache.get(key) if self.cache and key else None
        cached = answer is not None
        latency_ms, attempts = 0.0, 0
        try:
            if answer is None:
                if judge.budget.exhausted():
                    raise JudgeBudgetExceeded(
                        f"judge {cfg.name!r} spent its {cfg.tokens_per_minute} tokens of the last minute")
                completion = await judge.client.complete(prompt.system, prompt.user)
                judge.budget.spend(completion.prompt_tokens + completion.completion_tokens)
                answer = CachedAnswer(completion.text, completion.prompt_tokens, completion.completion_tokens)
                latency_ms, attempts = completion.latency_ms, completion.attempts
                verdict = parse_answer(answer.text, prompt)  # unusable answers raise and are not cached
                if self.cache and key and verdict.parse != "default":  # nor are answers with no score in them
                    await self.cache.put(key, answer)
            else:
                verdict = parse_answer(answer.text, prompt)
        except JudgeBudgetExceeded as exc:
            return _verdict(cfg, prompt, status="skipped", error=exc.code, reason=str(exc))
        except JudgeError as exc:
            return _verdict(cfg, prompt, status="error", error=exc.code, reason=clip(str(exc), 500), answer=answer,
                            latency_ms=latency_ms, attempts=attempts or exc.attempts, cached=cached)  # fmt: skip
        except Exception as exc:  # a bug of ours must not lose the event: this judge counts as failed
            log.exception("judge %s failed unexpectedly", cfg.name)
            return _verdict(cfg, prompt, status="error", error="internal", reason=type(exc).__name__)
        return _verdict(cfg, prompt, status="ok", verdict=verdict, answer=answer, latency_ms=latency_ms,
                        attempts=attempts, cached=cached)  # fmt: skip


def _verdict(
    cfg: JudgeConfig,
    prompt: Prompt,
    *,
    status: Literal["ok", "error", "skipped"],
    verdict: Verdict | None = None,
    answer: CachedAnswer | None = None,
    error: str | None = None,
    reason: str | None = None,
    latency_ms: float = 0.0,
    attempts: int = 0,
    cached: bool = False,
) -> JudgeVerdict:
    out = JudgeVerdict(
        name=cfg.name, model=cfg.model, weight=cfg.weight, status=status, prompt=prompt.kind,
        scale=prompt.scale,  # type: ignore[arg-type]  # Prompt.scale is one of the three
        error=error, reason=reason, latency_ms=latency_ms, attempts=attempts, cached=cached,
        prompt_tokens=answer.prompt_tokens if answer else 0,
        completion_tokens=answer.completion_tokens if answer else 0,
    )  # fmt: skip
    if verdict is None:
        return out
    return out.model_copy(update={
        "score": min(10.0, max(0.0, verdict.score)), "parse": verdict.parse, "scores": verdict.scores,
        "overall": verdict.overall, "computed": verdict.computed, "reasoning": verdict.reasoning,
        "strengths": verdict.strengths, "weaknesses": verdict.weaknesses, "warnings": verdict.warnings,
    })  # fmt: skip


def panel_score(verdicts: Sequence[JudgeVerdict]) -> float | None:
    """Weighted mean (0-10) over the judges that answered; None when none did (or their weights are 0)."""
    answered = [(v.score, v.weight) for v in verdicts if v.status == "ok" and v.score is not None]
    total = math.fsum(w for _, w in answered)
    if not answered or total <= 0:
        return None
    return round(math.fsum(s * w for s, w in answered) / total, 6)


def judge_counters(verdicts: Sequence[JudgeVerdict]) -> dict[str, float]:
    """Per-judge window counters (added into ``ev:judge_panel:c:<judge>.<counter>`` by the store).

    ``calls`` are HTTP calls made (cache misses), ``cache_hits``, ``prompt_tokens`` and
    ``completion_tokens`` of calls made, ``errors``, ``budget_skips``, and ``n``/``score_sum``/
    ``score_sumsq`` of answered scores (0-10) for per-judge window statistics.
    """
    out: dict[str, float] = {}

    def add(judge: str, counter: str, value: float) -> None:
        if value:
            out[f"{judge}.{counter}"] = out.get(f"{judge}.{counter}", 0.0) + value

    for v in verdicts:
        if v.cached:
            add(v.name, "cache_hits", 1)
        elif v.status != "skipped":
            add(v.name, "calls", 1)
            add(v.name, "prompt_tokens", v.prompt_tokens)
            add(v.name, "completion_tokens", v.completion_tokens)
        if v.status == "error":
            add(v.name, "errors", 1)
        elif v.status == "skipped":
            add(v.name, "budget_skips", 1)
        elif v.score is not None:
            add(v.name, "n", 1)
            add(v.name, "score_sum", v.score)
            add(v.name, "score_sumsq", v.score * v.score)
    return out
