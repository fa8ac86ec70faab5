"""Drill-down examples (docs/statistics.md): per window, the lowest-scored results and a sample of the failed
ones, kept as the batch is recorded (streameval.features.drilldown picks the candidates). Alert rules read the
window's lowest-scored ids from them, so the composition root turns this on for a suite file with alert
rules or score-shift detection, or when ``STREAMEVAL_EXAMPLES`` is set."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ...feature import Block, Call, RecordContext, Recorded
from ...models import GradedResult
from ._examples import Candidates

__all__ = ["ExamplesRecorder"]

# ARGV: 1 examples kept per zset (the lowest zset scores), 2 their ttl; per example zset (one KEY each): c,
# c × (zset score, compact result). The worker sends only candidates that can enter, so this is a ZADD
# member for the few candidates.
LUA = """
local keep, ttl = tonumber(ARGV[a0 + 1]), ARGV[a0 + 2]
local a = a0 + 3
for k = k0 + 1, k0 + nk do
  local c = tonumber(ARGV[a])
  redis.call('ZADD', KEYS[k], unpack(ARGV, a + 1, a + 2 * c))
  redis.call('ZREMRANGEBYRANK', KEYS[k], keep, -1)
  redis.call('EXPIRE', KEYS[k], ttl)
  a = a + 1 + 2 * c
end
"""


class ExamplesRecorder:
    """Keeps ``keep`` examples of each kind per window × pair for ``ttl_s`` after their last change (at least
    twice the largest window, at most the window TTL: a sample must not expire while its window still takes
    events)."""

    name = "drill-down examples"
    lua = LUA

    def __init__(self, keep: int = 20, ttl_s: int = 86400) -> None:
        self.keep = keep
        self.ttl_s = ttl_s
        self._candidates: Candidates | None = None
        # a result as its example may show it (the suite file's redact:, docs/redact.md); None: as it is
        self.redact: Callable[[GradedResult], GradedResult] | None = None

    def writes(
        self, ctx: RecordContext, events: Sequence[Recorded], now: float
    ) -> tuple[list[Call], list[tuple[Any, ...]]]:
        return [], []

    def block(
        self,
        ctx: RecordContext,
        pair: str,
        group: Sequence[Recorded],
        targets: Sequence[tuple[int, int]],
        now: float,
    ) -> Block | None:
        if self._candidates is None:
            self._candidates = Candidates(ctx.keys, self.keep)
            self._candidates.redact = self.redact
        events = [(e.result, e.event_time, e.digest) for e in group if e.result is not None and not e.retract]
        ttl = min(max(self.ttl_s, 2 * max(ctx.windows)), ctx.window_ttl_s)
        keys, args, sent = self._candidates.part(pair, ctx.windows, events, example_ttl_s=ttl)
        return Block(keys, args, sent) if keys else None

    def committed(self, token: Any) -> None:
        assert self._candidates is not None
        self._candidates.commit(token)
