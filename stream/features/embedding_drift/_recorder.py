"""The record script's embedding-drift block: per window of the drift size, the sums of the events' output
vectors and a bottom-k reservoir of them, added with the events' figures (``_drift`` computes the numbers)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any, cast

from ...feature import Block, Call, RecordContext, Recorded
from ...models import GradedResult
from ._drift import DriftSample, EmbeddingDriftConfig, pack_sums, reservoir_field, sum_samples

__all__ = ["KEY", "DriftRecorder"]

#: the samples' slot in an outcome's annotations (streameval.envelope.Outcome), noted by the annotator
KEY = "embedding_drift"

# Per drift target, the batch's sums (doubles holding integers: exact) added into field 's' of the window's
# drift hash (the open window's when the target was redirected, like its figures), and its reservoir
# candidates merged: the lowest fields kept. KEYS per drift target: the drift hashes of the target window
# and of the size's two candidate open windows. ARGV: drift targets, reservoir kept per window; per drift
# target: its target's number, the batch's sums (little-endian doubles), reservoir candidates r,
# r × (field, vector).
LUA = """
local nd, keepd = tonumber(ARGV[a0 + 1]), tonumber(ARGV[a0 + 2])
local a = a0 + 3
for d = 1, nd do
  local t, sums, nr = tonumber(ARGV[a]), ARGV[a + 1], tonumber(ARGV[a + 2])
  local key = KEYS[k0 + 3 * (d - 1) + 1 + (via[t] or 0)]
  local have = redis.call('HGET', key, 's')
  if have and #have == #sums then  -- (another length: the model or features changed; start again)
    local fmt = '<' .. string.rep('d', #sums / 8)
    local x, y = {struct.unpack(fmt, have)}, {struct.unpack(fmt, sums)}
    for i = 1, #sums / 8 do y[i] = x[i] + y[i] end
    sums = struct.pack(fmt, unpack(y, 1, #sums / 8))
  end
  redis.call('HSET', key, 's', sums)
  if nr > 0 then
    redis.call('HSET', key, unpack(ARGV, a + 3, a + 2 + 2 * nr))
    local names = redis.call('HKEYS', key)
    if #names > keepd + 1 then
      table.sort(names)  -- 's' sorts after every entry: its first byte is below 0x10 (a 52-bit hash)
      local drop = {}
      for i = keepd + 1, #names do if names[i] ~= 's' then drop[#drop + 1] = names[i] end end
      if #drop > 0 then redis.call('HDEL', key, unpack(drop)) end
    end
  end
  if not have then redis.call('EXPIRE', key, ARGV[6]) end
  a = a + 3 + 2 * nr
end
"""


class DriftRecorder:
    """The record script's embedding-drift block for ``config`` (its window must be one of the store's)."""

    name = "embedding drift"
    lua = LUA

    def __init__(self, config: EmbeddingDriftConfig) -> None:
        self.config = config

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
        """Per window of the drift size: the batch's sums (added up here: exact integers) and its bottom-k
        reservoir candidates (the script keeps the window's bottom k)."""
        cfg = self.config
        samples = [
            e
            for e in group
            if e.annotation is not None
            and isinstance(e.annotation.get(KEY), DriftSample)
            and e.result is not None
            and not e.retract
        ]
        if cfg.window not in ctx.windows or not samples:
            return None
        s, size = ctx.windows.index(cfg.window), cfg.window
        by_start: dict[int, list[Recorded]] = defaultdict(list)
        for event in samples:
            by_start[int(event.event_time // size) * size].append(event)
        first, second = ctx.candidates(size, now)
        keys: list[str] = []
        args: list[Any] = [len(by_start), cfg.reservoir]
        for start, events in by_start.items():
            keys += [
                ctx.keys.embedding_window(pair, size, start),
                ctx.keys.embedding_window(pair, size, first),
                ctx.keys.embedding_window(pair, size, second),
            ]
            drifts = [cast(DriftSample, cast(Any, e.annotation)[KEY]) for e in events]
            candidates = sorted(
                (reservoir_field(d, cast(GradedResult, e.result).id), d.vector)
                for e, d in zip(events, drifts, strict=True)
            )[: cfg.reservoir]
            args += [list(targets).index((s, start)) + 1, pack_sums(sum_samples(drifts)), len(candidates)]
            for name, vector in candidates:
                args += [name, vector]
        return Block(keys, args)

    def committed(self, token: Any) -> None:
        pass
