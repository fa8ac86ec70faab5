"""The usage figures of each window and the spend of each budget period, in the pair's record call.

Each event's usage goes into its increments (``use:*`` names, streameval.usage_figures), which the core
adds to its windows (the open window's when it redirects a late event) and the slices to each slice of
them; per budget period the call's events fall in, their cost is added to the pair's spend hash
(``Keys.spend``), in this recorder's block. All of it rides on the record call: counted once with the
events' marks, whichever worker and however often a batch comes.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from ...feature import Block, Call, RecordContext, Recorded, slice_values
from ...usage_figures import COARSE, bucket
from ._budgets import Budgets
from ._notes import KEY, Usage

__all__ = ["LUA", "UsageRecorder", "add_increments"]

# KEYS after k0: the pair's spend hash. ARGV after a0: its TTL, then per entry its field and amount.
LUA = """
local spend = KEYS[k0 + 1]
for a = a0 + 2, a0 + na, 2 do redis.call('HINCRBYFLOAT', spend, ARGV[a], ARGV[a + 1]) end
redis.call('EXPIRE', spend, ARGV[a0 + 1])
"""


def add_increments(inc: dict[str, float], note: Usage, currency: str | None, slices: bool = False) -> None:
    """Add one event's usage figures (streameval.usage_figures names) to its increments (``slices``: also the
    coarse duration buckets the slices keep)."""
    added = [
        ("use:n", 1.0),
        ("use:in", note.input_tokens),
        ("use:out", note.output_tokens),
        ("use:cin", note.cached_input_tokens),
        ("use:rt", note.reasoning_tokens),
    ]
    if note.cost is not None:
        added += [(f"use:p:{currency or ''}", 1.0), ("use:c", note.cost)]
    if note.duration_ms is not None:
        added.append((f"use:d{bucket(note.duration_ms)}", 1.0))
        if slices:
            added.append((f"use:D{bucket(note.duration_ms, COARSE)}", 1.0))
    if note.time_to_first_token_ms is not None:
        added.append((f"use:t{bucket(note.time_to_first_token_ms)}", 1.0))
        if slices:
            added.append((f"use:T{bucket(note.time_to_first_token_ms, COARSE)}", 1.0))
    if note.finish_reason is not None:
        added.append((f"use:f:{note.finish_reason}", 1.0))
    for name, value in added:
        if value:  # a zero adds nothing (and no name to the packed figures)
            inc[name] = inc.get(name, 0.0) + value


class UsageRecorder:
    """The block of each pair's record call (module docstring); ``budgets``: the periods to keep spend for."""

    name = "usage"
    lua = LUA

    #: the names kept per slice value (streameval.features.segments' prefixes): all but the fine buckets
    SLICE_PREFIXES = (
        "use:n",
        "use:in",
        "use:out",
        "use:cin",
        "use:rt",
        "use:c",
        "use:p:",
        "use:f:",
        "use:D",
        "use:T",
    )

    def __init__(self, currency: str | None, budgets: Budgets | None = None, *, slices: bool = False) -> None:
        self.currency = currency
        self.budgets = budgets
        self.slices = slices
        self.lua = LUA if budgets is not None else ""  # without budgets: no block in the record call

    def writes(
        self, ctx: RecordContext, events: Sequence[Recorded], now: float
    ) -> tuple[list[Call], list[tuple[Any, ...]]]:
        # before the record calls are built: the core sums these increments into every window it counts
        for event in events:
            if event.annotation is not None and (note := event.annotation.get(KEY)) is not None:
                add_increments(event.increments, note, self.currency, self.slices)
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
        spend: list[Any] = []
        result = noted[0][0].result
        if self.budgets is None or result is None:
            return None
        # a shadow's or a backfill's evaluation of an event is not another call: the live pair spends
        if not result.shadow and not result.backfill:
            amounts: dict[str, float] = defaultdict(float)
            for index, value, field_of in self.budgets.periods_of(result.model, result.suite):
                for e, note in noted:
                    if note.cost is None:
                        continue
                    if index >= 0:  # a slice's budget: only the events of its value
                        values = slice_values(e)
                        if len(values) <= index or values[index] != value:
                            continue
                    amounts[field_of(e.event_time)] += -note.cost if e.retract else note.cost
            for name, amount in amounts.items():
                if amount:
                    spend += [name, repr(amount)]
        if not spend:
            return None
        return Block([ctx.keys.spend(pair)], [self.budgets.spend_ttl_s, *spend])

    def committed(self, token: Any) -> None:
        pass
