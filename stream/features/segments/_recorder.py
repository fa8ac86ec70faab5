"""The slices' block of each pair's record call: every target window's figures per value of each dimension, in
the same script that counts the pair's events (so each event is counted in its slices exactly once with its
mark: the block runs only when the core counted the whole call), capped at ``max_values`` values per
dimension, pair and window in Redis itself (docs/segments.md)."""

from __future__ import annotations

import struct
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

from ...feature import Block, Call, RecordContext, Recorded, slice_values
from ...store_codec import SLICE_FIGURES, pack_increments
from ._config import Dimension

__all__ = ["SLICE_FIGURES", "SlicesRecorder"]


# KEYS: 1 the pair's set of dimension names (for readers: no keyspace scan); per target window t (the core's
# order) and dimension d: the slice hash of t, then those of the two candidate open windows of t's size (the
# core's ``via[t]`` says which one a redirected target went to).
# ARGV: 1 TTL of a new hash, 2 dimensions, then each dimension's cap and name; per (t, d): n, then one string of
# n × (value, increments), each a 2-byte little-endian length and its bytes (one argument, not 2n: the worker
# packs and Redis reads far fewer of them; ``struct.unpack('<Hc0Hc0')`` takes one entry). A slice's figures (a field's value, and an increment) are SLICE_FIGURES as 4 little-endian
# doubles (``struct``: no Lua table per value, the cost of MessagePack here), then, only when a feature keeps
# figures of its own per slice, those: the usage feature's in a fixed layout of doubles added place by place
# (its first byte ``u``: streameval.usage_figures.pack_slice_usage), any other feature's as a MessagePack map
# (``pack``); streameval.store_codec.slice_figures reads them all. A call's usage figures replace a value's of
# the other format (hashes of a version before, for as long as their window is open).
# First seen wins: a value already in the hash, or while it holds fewer than the cap, is kept; any other goes
# to (other). (missing) and (invalid) take no place. ``hmget`` / ``hset``: the core's.
LUA = """
local ttl, ndims = ARGV[a0 + 1], tonumber(ARGV[a0 + 2])
local caps, dims = {}, {}
for d = 1, ndims do caps[d], dims[d] = tonumber(ARGV[a0 + 1 + 2 * d]), ARGV[a0 + 2 + 2 * d] end
local a, k = a0 + 3 + 2 * ndims, k0 + 1
local fmts = {}
local function numbers(s, pos)  -- the doubles of s from pos, in a table
  local n = (#s - pos + 1) / 8
  local f = fmts[n]
  if not f then f = '<' .. string.rep('d', n); fmts[n] = f end
  return {struct.unpack(f, s, pos)}
end
local function widen(a, b, head)  -- the ranges of a and b merged into new ones (a: the sums added already)
  local out = {}
  for j = 1, 7 do out[j] = a[j] end
  local i, m, o = 8, 8, 8
  for r = 1, 3 do
    local alo, ak, blo, bk = a[i], a[i + 1], b[m], b[m + 1]
    local lo, top = blo, blo + bk
    if bk == 0 then lo, top = alo, alo + ak
    elseif ak > 0 then lo, top = math.min(alo, blo), math.max(alo + ak, blo + bk) end
    out[o], out[o + 1] = lo, top - lo
    for x = lo, top - 1 do
      local v = 0
      if x >= alo and x < alo + ak then v = a[i + 2 + x - alo] end
      if x >= blo and x < blo + bk then v = v + b[m + 2 + x - blo] end
      out[o + 2 + x - lo] = v
    end
    i, m, o = i + 2 + ak, m + 2 + bk, o + 2 + top - lo
  end
  o = o - 1
  local f = fmts[o]
  if not f then f = '<' .. string.rep('d', o); fmts[o] = f end
  return head .. struct.pack(f, unpack(out, 1, o))
end
-- two usage layouts (streameval.usage_figures.pack_slice_usage) summed: the tag, the currency, 7 sums, then
-- three ranges (first place, length, a count per place); in place when inc's ranges lie within old's (the
-- usual case once a window has seen a few events), else widened
local function usage(old, inc)
  local ho, hi = 35 + string.byte(old, 34), 35 + string.byte(inc, 34)
  local a, b = numbers(old, ho), numbers(inc, hi)
  for j = 1, 7 do a[j] = a[j] + b[j] end
  local i, m = 8, 8
  for r = 1, 3 do
    local alo, ak, blo, bk = a[i], a[i + 1], b[m], b[m + 1]
    if bk > 0 and (blo < alo or blo + bk > alo + ak) then return widen(a, b, string.sub(inc, 33, hi - 1)) end
    i, m = i + 2 + ak, m + 2 + bk
  end
  i, m = 8, 8
  for r = 1, 3 do
    local ak, bk = a[i + 1], b[m + 1]
    if bk > 0 then
      local d, e = i + 2 - a[i], m + 2 - b[m]
      for x = b[m], b[m] + bk - 1 do a[d + x] = a[d + x] + b[e + x] end
    end
    i, m = i + 2 + ak, m + 2 + bk
  end
  local n = (#old - ho + 1) / 8
  return string.sub(old, 33, ho - 1) .. struct.pack(fmts[n], unpack(a, 1, n))
end
local function add(old, inc)
  if not old then return inc end  -- a new value (or (other)): its increments are its figures
  local c, s, q, p = struct.unpack('<dddd', inc)
  local c0, s0, q0, p0 = struct.unpack('<dddd', old)
  local out = struct.pack('<dddd', c + c0, s + s0, q + q0, p + p0)
  if #old <= 32 then  -- no figures of other features (slices alone: always)
    if #inc > 32 then out = out .. string.sub(inc, 33) end
    return out
  end
  if #inc <= 32 then return out .. string.sub(old, 33) end
  local ui, uo = string.byte(inc, 33) == 117, string.byte(old, 33) == 117  -- 'u': the usage layout
  if ui and uo then return out .. usage(old, inc) end
  if ui or uo then return out .. string.sub(inc, 33) end  -- the other layout (a version before): the call's
  local figures = cmsgpack.unpack(string.sub(old, 33))
  for name, v in pairs(cmsgpack.unpack(string.sub(inc, 33))) do figures[name] = (figures[name] or 0) + v end
  return out .. cmsgpack.pack(figures)
end
for t = 1, ntargets do
  for d = 1, ndims do
    local n = tonumber(ARGV[a])
    if n > 0 then
      local key = KEYS[k + 1]
      if via[t] then key = KEYS[k + 1 + via[t]] end
      local names, incs, blob, pos = {}, {}, ARGV[a + 1], 1
      for i = 1, n do names[i], incs[i], pos = struct.unpack('<Hc0Hc0', blob, pos) end
      names[n + 1], names[n + 2], names[n + 3] = '(other)', '(missing)', '(invalid)'
      local got = hmget(key, names)
      local held, used = nil, nil
      local exists = got[n + 1] or got[n + 2] or got[n + 3]
      local flat, other = {}, nil
      for i = 1, n do
        local value, inc = names[i], incs[i]
        if got[i] then exists = true end
        local keep = got[i] or value == '(missing)' or value == '(invalid)'
        if not keep then
          if not used then  -- the values held: only read when a new one comes
            held = redis.call('HLEN', key)
            used = held
            for j = n + 1, n + 3 do if got[j] then used = used - 1 end end
          end
          if used < caps[d] then keep, used = true, used + 1 end
        end
        if keep then
          flat[#flat + 1], flat[#flat + 2] = value, add(got[i], inc)
        else
          other = add(other or got[n + 1], inc)
        end
      end
      if other then flat[#flat + 1], flat[#flat + 2] = '(other)', other end
      if held == nil and not exists then held = redis.call('HLEN', key) end  -- a new hash?
      hset(key, flat)
      if held == 0 then
        redis.call('EXPIRE', key, ttl)
        redis.call('SADD', KEYS[k0 + 1], dims[d])
        redis.call('EXPIRE', KEYS[k0 + 1], ttl)
      end
    end
    a, k = a + 2, k + 3
  end
end
"""

_FOUR = struct.Struct("<dddd")
_LENGTH = struct.Struct("<H")


class SlicesRecorder:
    """Keeps each window's figures per slice (module docstring). ``prefixes``: names of increments kept per slice
    besides :data:`SLICE_FIGURES` (a feature that adds its figures to the increments, streameval.feature)."""

    name = "slices"
    lua = LUA

    def __init__(
        self,
        dimensions: Sequence[Dimension],
        prefixes: Sequence[str] = (),
        pack: Callable[[dict[str, float]], bytes] = pack_increments,
    ) -> None:
        self.dimensions = tuple(dimensions)
        self.prefixes = tuple(prefixes)
        self.pack = pack
        self._kept: dict[str, bool] = {}  # increment name -> under a prefix (names repeat: computed once)

    def writes(
        self, ctx: RecordContext, events: Sequence[Recorded], now: float
    ) -> tuple[list[Call], list[tuple[Any, ...]]]:
        return [], []

    def _extra(self, increments: dict[str, float]) -> dict[str, float] | None:
        """The event's figures of other features kept per slice (names under ``prefixes``); None: none."""
        if not self.prefixes:
            return None
        kept = self._kept
        out = {}
        for name, value in increments.items():
            keep = kept.get(name)
            if keep is None:
                keep = name.startswith(self.prefixes) and name not in SLICE_FIGURES
                if len(kept) < 10_000:
                    kept[name] = keep
            if keep:
                out[name] = value
        return out or None

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
        # (target, dimension) -> value -> [count, sum, sumsq, passes, other features' figures or None]
        sums: dict[tuple[int, int], dict[str, list[Any]]] = defaultdict(dict)
        for event in group:
            values = slice_values(event)
            if len(values) != ndims or event.retract:
                continue
            inc = event.increments  # SLICE_FIGURES, spelt out: this runs per event
            count, total = inc.get("count", 0.0), inc.get("sum", 0.0)
            squares, passes = inc.get("sumsq", 0.0), inc.get("passes", 0.0)
            extra = self._extra(inc) if self.prefixes else None
            at = event.event_time
            for s, size in enumerate(sizes):
                t = where[(s, int(at // size) * size)]
                for d, value in enumerate(values):
                    found = sums[(t, d)]
                    acc = found.get(value)
                    if acc is None:
                        found[value] = [count, total, squares, passes, dict(extra) if extra else None]
                        continue
                    acc[0] += count
                    acc[1] += total
                    acc[2] += squares
                    acc[3] += passes
                    if extra:
                        more = acc[4] = acc[4] or {}
                        for name, v in extra.items():
                            more[name] = more.get(name, 0.0) + v
        if not sums:
            return None
        keys: list[str] = [ctx.keys.slice_dimensions(pair)]
        args: list[Any] = [ctx.window_ttl_s, ndims]
        for dimension in self.dimensions:
            args += [dimension.max_values, dimension.name]
        candidates = {size: ctx.candidates(size, now) for size in sizes}
        pack, length, tail = _FOUR.pack, _LENGTH.pack, self.pack
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
                entries: list[bytes] = []
                for value, acc in found.items():
                    raw = value.encode()
                    figures = pack(acc[0], acc[1], acc[2], acc[3])
                    if acc[4]:
                        figures += tail(acc[4])
                    entries += [length(len(raw)), raw, length(len(figures)), figures]
                args += [len(found), b"".join(entries)]
        return Block(keys, args)

    def committed(self, token: Any) -> None:
        pass
