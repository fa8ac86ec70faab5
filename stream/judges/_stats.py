"""In-process per-judge tallies: calls, cache hits, errors by kind, the last error, tokens.

The window counters in Redis (``judge_counters``) are what dashboards read; these tallies are for the
places where a person looks while something goes wrong: the worker's periodic log line per judge
(:meth:`JudgeStats.log_lines`, every ``interval`` seconds while anything happened) and the judge table
of ``streameval evaluate``. They count every verdict of this process, repeats included.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from dataclasses import dataclass, field

from ..models import JudgeVerdict

__all__ = ["JudgeStats", "JudgeTally"]

log = logging.getLogger("streameval.judges")


@dataclass
class JudgeTally:
    calls: int = 0  # HTTP calls made (an answer or an error after at least one attempt)
    cache_hits: int = 0  # answered from the cache or by an identical request in flight
    answered: int = 0
    skipped: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    last_error: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def error_count(self) -> int:
        return sum(self.errors.values())

    def add(self, other: JudgeTally) -> None:
        self.calls += other.calls
        self.cache_hits += other.cache_hits
        self.answered += other.answered
        self.skipped += other.skipped
        self.errors.update(other.errors)
        self.last_error = other.last_error or self.last_error
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens


def tally_verdict(tally: JudgeTally, verdict: JudgeVerdict) -> None:
    """Add one verdict to ``tally`` (the same rules as the window counters)."""
    if verdict.cached:
        tally.cache_hits += 1
    elif verdict.attempts > 0:
        tally.calls += 1
        tally.prompt_tokens += verdict.prompt_tokens
        tally.completion_tokens += verdict.completion_tokens
    if verdict.status == "ok":
        tally.answered += 1
    elif verdict.status == "skipped":
        tally.skipped += 1
    else:
        tally.errors[verdict.error or "internal"] += 1
        tally.last_error = verdict.reason or verdict.error


class JudgeStats:
    """Tallies per judge name since the start, and since the last log line."""

    def __init__(self) -> None:
        self._past: dict[str, JudgeTally] = {}  # up to the last log line
        self._recent: dict[str, JudgeTally] = {}

    def record(self, verdict: JudgeVerdict) -> None:
        tally = self._recent.get(verdict.name)
        if tally is None:
            tally = self._recent[verdict.name] = JudgeTally()
        tally_verdict(tally, verdict)

    @property
    def total(self) -> dict[str, JudgeTally]:
        """Tallies since the start (a fresh copy)."""
        out: dict[str, JudgeTally] = {}
        for tallies in (self._past, self._recent):
            for name, tally in tallies.items():
                out.setdefault(name, JudgeTally()).add(tally)
        return out

    def log_lines(self) -> list[str]:
        """One line per judge active since the last call, e.g.
        ``judge gw: 120 calls, 30 cache hits, 4 errors (judge_timeout 3, judge_auth 1); last error: ...``."""
        lines = []
        for name, t in sorted(self._recent.items()):
            line = f"judge {name}: {t.calls} calls, {t.cache_hits} cache hits, {t.error_count} errors"
            if t.errors:
                line += " (" + ", ".join(f"{kind} {n}" for kind, n in t.errors.most_common()) + ")"
            if t.skipped:
                line += f", {t.skipped} skipped"
            if t.last_error:
                line += f"; last error: {t.last_error}"
            lines.append(line)
            self._past.setdefault(name, JudgeTally()).add(t)
        self._recent = {}
        return lines

    async def log_every(self, interval_s: float) -> None:
        """Log :meth:`log_lines` every ``interval_s`` seconds (errors at WARNING, else INFO); runs until cancelled."""
        while True:
            await asyncio.sleep(interval_s)
            failing = any(t.errors for t in self._recent.values())
            for line in self.log_lines():
                log.log(logging.WARNING if failing else logging.INFO, "%s (last %g s)", line, interval_s)
