"""The slices' block of each pair's record call: every target window's figures per value of each dimension, in
the same script that counts the pair's events (so each event is counted in its slices exactly once with its
mark: the block runs only when the core counted the whole call), capped at ``max_values`` values per
dimension, pair and window in Redis itself (docs/segments.md)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from ...feature import Block, Call, RecordContext, Recorded, slice_values
from ...store_codec import pack_increments
from ._config import Dimension

__all__ = ["SLICE_FIGURES", "SlicesRecorder"]

#: the increments of an event kept per slice: enough for the mean and pass rate with their intervals
SLICE_FIGURES = frozenset(("count", "sum", "sumsq", "passes"))

# KEYS: 1 the pair's set of dimension names (for readers: no keyspace scan); per target window t (the core's
# order) and dimension d: the slice hash of t, then those of the two candidate open windows of t's size (the
# core's ``via[t]`` says which one a redirected target went to).
# ARGV: 1 TTL of a new hash, 2 dimensions, then each dimension's cap and name; per (t, d): n, then n × (value,
# MessagePack increments). First seen wins: a value already in the hash, or while it holds fewer than the cap,
# is kept; any other goes to (other). (missing) and (invalid) take no place. ``hmget`` / ``hset``: the core's.
LUA = """
local ttl, ndims = ARGV[a0 + 1], tonumber(ARGV[a0 + 2])
local caps, dims = {}, {}
for d = 1, ndims do caps[d], dims[d] = tonumber(ARGV[a0 + 1 + 2 * d]), ARGV[a0 + 2 + 2 * d] end
local a, k = a0 + 3 + 2 * ndims, k0 + 1
local function merge(figures, increments)
  for name, value in pairs(cmsgpack.unpack(increments)) do figures[name] = (figures[name] or 0) + value end
  return figures
end
for t = 1, ntargets do
  for d = 1, ndims do
    local n = tonumber(ARGV[a])
    if n > 0 then
      local key = KEYS[k + 1]
      if via[t] then key = KEYS[k + 1 + via[t]] end
      local names = {}
      for i = 1, n do names[i] = ARGV[a + 2 * i - 1] end
      names[n + 1], names[n + 2], names[n + 3] = '(other)', '(missing)', '(invalid)'
      local got = hmget(key, names)
      local held = redis.call('HLEN', key)
      local used = held
      for i = n + 1, n + 3 do if got[i] then used = used - 1 end end
      local flat, other = {}, nil
      for i = 1, n do
        local value, inc = names[i], ARGV[a + 2 * i]
        local free = value == '(missing)' or value == '(invalid)'
        if got[i] or free or used < caps[d] then
          if not got[i] and not free then used = used + 1 end
          flat[#flat + 1] = value
          flat[#flat + 1] = cmsgpack.pack(merge(got[i] and cmsgpack.unpack(got[i]) or {}, inc))
        else
          other = merge(other or (got[n + 1] and cmsgpack.unpack(got[n + 1]) or {}), inc)
        end
      end
      if other then flat[#flat + 1], flat[#flat + 2] = '(other)', cmsgpack.pack(other) end
      hset(key, flat)
      if held == 0 then
        redis.call('EXPIRE', key, ttl)
        redis.call('SADD', KEYS[k0 + 1], dims[d])
        redis.call('EXPIRE', KEYS[k0 + 1], ttl)
      end
    end
    a, k = a + 1 + 2 * n, k + 3
  end
end
"""


class SlicesRecorder:
    """Keeps each window's figures per slice (module docstring). ``prefixes``: names of increments kept per slice
    besides :data:`SLICE_FIGURES` (a feature that adds its figures to the increments, streameval.feature)."""

    name = "slices"
    lua = LUA

    def __init__(self, dimensions: Sequence[Dimension], prefixes: Sequence[str] = ()) -> None:
        self.dimensions = tuple(dimensions)
        self.prefixes = tuple(prefixes)
        self._kept: dict[str, bool] = {}  # increment name -> kept per slice (names repeat: computed once)

    def writes(
        self, ctx: RecordContext, events: Sequence[Recorded], now: float
    ) -> tuple[list[Call], list[tuple[Any, ...]]]:
        return [], []

    def _keeps(self, name: str) -> bool:
        kept = self._kept.get(name)
        if kept is None:
            kept = name in SLICE_FIGURES or (bool(self.prefixes) and name.startswith(self.prefixes))
            if len(self._kept) < 10_000:
                self._kept[name] = kept
        return kept

    def block(
        self,
        ctx: RecordContext,
        pair: str,
        group: Sequence[Recorded],
        targets: Sequence[tuple[int, int]],
        now: float,
    ) -> Block | None:
        ndims = len(self.dimensions)
        where = {target: t for t, target in enumerate(targets)}
        sizes = ctx.windows
        # (target, dimension) -> value -> summed increments
        sums: dict[tuple[int, int], dict[str, dict[str, float]]] = defaultdict(dict)
        for event in group:
            values = slice_values(event)
            if len(values) != ndims or event.retract:
                continue
            figures = {name: v for name, v in event.increments.items() if self._keeps(name)}
            for s, size in enumerate(sizes):
                t = where[(s, int(event.event_time // size) * size)]
                for d, value in enumerate(values):
                    inc = sums[(t, d)].get(value)
                    if inc is None:
                        sums[(t, d)][value] = dict(figures)
                    else:
                        for name, v in figures.items():
                            inc[name] = inc.get(name, 0.0) + v
        if not sums:
            return None
        keys: list[str] = [ctx.keys.slice_dimensions(pair)]
        args: list[Any] = [ctx.window_ttl_s, ndims]
        for dimension in self.dimensions:
            args += [dimension.max_values, dimension.name]
        candidates = {size: ctx.candidates(size, now) for size in sizes}
        for t, (s, start) in enumerate(targets):
            size = sizes[s]
            first, second = candidates[size]
            for d, dimension in enumerate(self.dimensions):
                name = dimension.name
                keys += [
                    ctx.keys.slice(pair, name, size, start),
                    ctx.keys.slice(pair, name, size, first),
                    ctx.keys.slice(pair, name, size, second),
                ]
                found = sums.get((t, d), {})
                args.append(len(found))
                for value, inc in found.items():
                    args += [value, pack_increments(inc)]
        return Block(keys, args)

    def committed(self, token: Any) -> None:
        pass
