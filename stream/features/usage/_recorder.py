"""The usage figures of each window and the spend of each budget period, in the pair's record call.

Per target window of the call, one MessagePack map of sums (tokens, cost, how many events were priced,
duration buckets, finish reasons) added to the window's usage key (``Keys.usage_window``: the open window's
when the core redirected the target there, as it does with the window's own figures); per budget period
the call's events fall in, its cost added to the pair's spend hash (``Keys.spend``). Both ride on the
record call: counted once with the events' marks, whichever worker and however often a batch comes.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from ...feature import Block, Call, RecordContext, Recorded
from ...store_codec import pack_increments
from ._budgets import Budgets
from ._notes import KEY, Usage, bucket

__all__ = ["LUA", "UsageRecorder", "increments"]

# KEYS after k0: per target t, its usage key and those of its size's two candidate open windows; then the
# spend hash when ARGV says so. ARGV after a0: per target, its increments ('' none); then the number of
# spend entries, the spend hash's TTL, and per entry its field and amount.
LUA = """
for t = 1, ntargets do
  local inc = ARGV[a0 + t]
  if inc ~= '' then
    local k = k0 + 3 * (t - 1) + 1
    if via[t] then k = k + via[t] end
    local packed = redis.call('GET', KEYS[k])
    local figures = packed and cmsgpack.unpack(packed) or {}
    for name, value in pairs(cmsgpack.unpack(inc)) do figures[name] = (figures[name] or 0) + value end
    redis.call('SET', KEYS[k], cmsgpack.pack(figures), 'EX', ARGV[6])
  end
end
local nspend = tonumber(ARGV[a0 + ntargets + 1])
if nspend > 0 then
  local spend = KEYS[k0 + 3 * ntargets + 1]
  for i = 1, nspend do
    local a = a0 + ntargets + 2 + 2 * i
    redis.call('HINCRBYFLOAT', spend, ARGV[a - 1], ARGV[a])
  end
  redis.call('EXPIRE', spend, ARGV[a0 + ntargets + 2])
end
"""


def increments(notes: Sequence[tuple[Usage, float]]) -> dict[str, float]:
    """The window sums of some events' usage notes, each with its sign (-1: a retraction)."""
    inc: dict[str, float] = defaultdict(float)
    for note, sign in notes:
        inc["n"] += sign
        inc["in"] += sign * note.input_tokens
        inc["out"] += sign * note.output_tokens
        inc["cin"] += sign * note.cached_input_tokens
        inc["rt"] += sign * note.reasoning_tokens
        if note.cost is not None:
            inc["p"] += sign
            inc["c"] += sign * note.cost
        if note.duration_ms is not None:
            inc[f"d{bucket(note.duration_ms)}"] += sign
        if note.time_to_first_token_ms is not None:
            inc[f"t{bucket(note.time_to_first_token_ms)}"] += sign
        if note.finish_reason is not None:
            inc[f"f:{note.finish_reason}"] += sign
    return inc


class UsageRecorder:
    """The block of each pair's record call (module docstring); ``budgets``: the periods to keep spend for."""

    name = "usage"
    lua = LUA

    def __init__(self, budgets: Budgets | None = None) -> None:
        self.budgets = budgets

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
        noted = [
            (e, note)
            for e in group
            if e.annotation is not None and (note := e.annotation.get(KEY)) is not None
        ]
        if not noted:
            return None
        keys = ctx.keys
        windows = ctx.windows
        klist: list[str] = []
        args: list[Any] = []
        for s, start in targets:
            size = windows[s]
            first, second = ctx.candidates(size, now)
            klist += [
                keys.usage_window(pair, size, start),
                keys.usage_window(pair, size, first),
                keys.usage_window(pair, size, second),
            ]
            mine = [
                (note, -1.0 if e.retract else 1.0)
                for e, note in noted
                if int(e.event_time // size) * size == start
            ]
            args.append(pack_increments(increments(mine)) if mine else "")
        spend: list[Any] = []
        result = noted[0][0].result
        # a shadow's or a backfill's evaluation of an event is not another call: the live pair spends
        if self.budgets is not None and result is not None and not result.shadow and not result.backfill:
            amounts: dict[str, float] = defaultdict(float)
            for field_of in self.budgets.periods_of(result.model, result.suite):
                for e, note in noted:
                    if note.cost is not None:
                        amounts[field_of(e.event_time)] += -note.cost if e.retract else note.cost
            for name, amount in amounts.items():
                if amount:
                    spend += [name, repr(amount)]
        if spend:
            klist.append(keys.spend(pair))
            args += [len(spend) // 2, self.budgets.spend_ttl_s if self.budgets is not None else 0, *spend]
        else:
            args.append(0)
        return Block(klist, args)

    def committed(self, token: Any) -> None:
        pass
