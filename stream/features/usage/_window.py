"""The window closer's side of usage: the budgets' alerts (the aggregates' ``usage`` is built with the rest of
their figures, streameval.usage_figures, for the pair and for each of its slices).

:meth:`UsageStep.tick` checks the budgets once per run of
the closer, under a lease (one worker at a time): each budget's spend this period is the sum of its pairs'
spend (their spend hashes, written by the record call), and an alert goes out, through the alerts topic,
when a warning level is crossed and when the period's rate so far would spend the limit before the period
ends; each once per period (its claim is marked sent once the broker acknowledged it), resolved once the
period is over.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

import orjson

from ...feature import ClosingWindow, PublishedWindow, WindowContext, WindowShare
from ...keyspace import Keys, guard
from ...models import AggregateSegment, Alert, AlertWindow, format_time
from ...outputs import Publish, Send, publish_all
from ...store_codec import as_text
from ._budgets import BudgetConfig, Budgets, period_bounds

__all__ = ["BudgetState", "UsageStep", "budget_alerts", "status_key"]


class UsageStep:
    """The closer's step of usage (module docstring). ``budgets`` None: no budget to check."""

    name = "usage"

    #: how long one worker holds the budgets' check (it runs once per closer run, a few seconds apart)
    LEASE_S = 30

    def __init__(self, currency: str | None, budgets: Budgets | None, worker_id: str = "") -> None:
        self.currency = currency
        self.budgets = budgets
        self.worker_id = worker_id or "worker"

    async def closing(self, ctx: WindowContext, window: ClosingWindow) -> Mapping[str, Mapping[str, Any]]:
        return {}  # the aggregates' usage is read off the window's figures (streameval.usage_figures)

    async def published(self, ctx: WindowContext, window: PublishedWindow) -> WindowShare | None:
        return None

    async def tick(self, ctx: WindowContext, now: float, send: Send) -> None:
        if self.budgets is None or not self.budgets.entries:
            return
        store = ctx.store
        keys: Keys = store.keys
        lease = keys.prefix + "budgets:lease"
        client = store.client
        if not await guard(client.set(lease, self.worker_id, nx=True, ex=self.LEASE_S)):
            return
        try:
            await self._check(client, keys, now, send)
        finally:
            await guard(client.delete(lease))

    async def _check(self, client: Any, keys: Keys, now: float, send: Send) -> None:
        assert self.budgets is not None
        members = [as_text(m) for m in await guard(client.zrange(keys.pairs, 0, -1))]
        states = [BudgetState.of(b, now, members) for b in self.budgets.entries]
        async with client.pipeline(transaction=False) as pipe:
            for state in states:
                for pair in state.pairs:
                    pipe.hget(keys.spend(pair), state.field)
                    pipe.hget(keys.spend(pair), state.previous_field)
                for claim in state.claim_names():
                    pipe.get(keys.budget_claim(state.anchor, state.budget.name, *claim))
            replies = list(await guard(pipe.execute()))
        messages: list[Publish] = []
        marks: list[tuple[str, str, int]] = []
        at = 0
        for state in states:
            for _ in state.pairs:
                state.spend += float(replies[at] or 0.0)
                state.previous_spend += float(replies[at + 1] or 0.0)
                at += 2
            claims = state.claim_names()
            held = {
                c: as_text(replies[at + i]) if replies[at + i] is not None else None
                for i, c in enumerate(claims)
            }
            at += len(claims)
            for alert, claim, status in budget_alerts(state, held, now):
                messages.append(Publish("alert", alert.id.encode(), alert.model_dump_json().encode()))
                key = keys.budget_claim(state.anchor, state.budget.name, *claim)
                marks.append((key, status, max(60, math.ceil(state.end - now) + 2 * 86400)))
        await self._status(client, keys, states, now)
        if not messages:
            return
        await publish_all(send, messages)  # acknowledged: only then marked (a crash before: sent again)
        async with client.pipeline(transaction=False) as pipe:
            for key, status, ttl in marks:
                pipe.set(key, status, ex=ttl)
            await guard(pipe.execute())

    @staticmethod
    async def _status(client: Any, keys: Keys, states: Sequence[BudgetState], now: float) -> None:
        """Each budget's period and spend so far, for the dashboard (``GET /api/v1/stats/budgets``)."""
        key = status_key(keys)
        fields = {s.budget.name: orjson.dumps(s.status(now)) for s in states}
        async with client.pipeline(transaction=False) as pipe:
            pipe.hset(key, mapping=fields)
            pipe.expire(key, 2 * 86400)
            await guard(pipe.execute())


def status_key(keys: Keys) -> str:
    """The budgets' status hash (budget name -> JSON), rewritten by the checking worker on each run."""
    return keys.prefix + "budgets:status"


class BudgetState:
    """One budget at one time: its period, its pairs and their spend (this period and the one before)."""

    def __init__(self, budget: BudgetConfig, now: float, pairs: Sequence[str]) -> None:
        self.budget = budget
        self.period_id, self.start, self.end = period_bounds(budget.period, budget.time_zone, now)
        self.previous_id = period_bounds(budget.period, budget.time_zone, self.start - 1.0)[0]
        self.field = f"{budget.key}:{self.period_id}"
        self.previous_field = f"{budget.key}:{self.previous_id}"
        self.pairs = sorted(pairs)
        # claims live in one slot: the budget's name's own (a pair-like tag of it)
        self.anchor = f"budget:{budget.name}"
        self.spend = 0.0
        self.previous_spend = 0.0

    @classmethod
    def of(cls, budget: BudgetConfig, now: float, members: Sequence[str]) -> BudgetState:
        pairs = [m for m in members if budget.scope.covers(*Keys.split_pair(m)[:2])]
        return cls(budget, now, pairs)

    def status(self, now: float) -> dict[str, Any]:
        """The budget as the dashboard shows it: its period, spend so far, limit and share."""
        b = self.budget
        return {
            "name": b.name,
            "scope": b.scope.model_dump(exclude_none=True),
            "period": b.period,
            "time_zone": b.time_zone,
            "period_id": self.period_id,
            "period_start": format_time(self.start),
            "period_end": format_time(self.end),
            "spend": self.spend,
            "limit": b.limit,
            "currency": b.currency,
            "share": self.spend / b.limit,
            "checked_at": format_time(now),
        }

    def claim_names(self) -> list[tuple[str, str]]:
        """(period id, level) of every alert this budget may send now or resolve: this period's and the last."""
        levels = [f"{level:g}" for level in self.budget.warn_at] + (["burn"] if self.budget.burn_rate else [])
        return [(p, lv) for p in (self.period_id, self.previous_id) for lv in levels]


def _alert(state: BudgetState, level: str, period: str, value: float, message: str, now: float) -> Alert:
    budget = state.budget
    start, end = (state.start, state.end) if period == state.period_id else _previous(state)
    scope = budget.scope
    return Alert(
        id=f"budget:{budget.name}:{period}:{level}",
        rule=budget.name,
        severity=budget.severity if level != "1" else "critical",
        metric="budget_burn_rate" if level == "burn" else "budget_spend",
        comparator=">=",
        threshold=budget.limit if level == "burn" else float(level) * budget.limit,
        value=value,
        count=len(state.pairs),
        model=scope.model or "*",
        suite=scope.suite or "*",
        window=AlertWindow(size_s=max(1, round(end - start)), start=format_time(start), end=format_time(end)),
        message=message,
        fired_at=format_time(now),
        figures={"spend": value, "limit": budget.limit},
        segment=None
        if scope.segment is None
        else AggregateSegment(dimension=scope.segment.dimension, value=scope.segment.value),
    )


def _previous(state: BudgetState) -> tuple[float, float]:
    _, start, end = period_bounds(state.budget.period, state.budget.time_zone, state.start - 1.0)
    return start, end


_PERIODLY = {"hour": "hourly", "day": "daily", "month": "monthly"}


def _clock(t: float, zone: str) -> str:
    return datetime.fromtimestamp(t, ZoneInfo(zone)).strftime("%H:%M")


def budget_alerts(
    state: BudgetState, held: Mapping[tuple[str, str], str | None], now: float
) -> list[tuple[Alert, tuple[str, str], str]]:
    """The alerts of one budget to send now, each with its claim and the status to mark it with: a level
    crossed this period (once), the burn rate (once a period), and the resolves of last period's alerts."""
    budget = state.budget
    cur = budget.currency
    out: list[tuple[Alert, tuple[str, str], str]] = []
    for level in budget.warn_at:
        name = f"{level:g}"
        claim = (state.period_id, name)
        if held.get(claim) is None and state.spend >= level * budget.limit:
            message = (
                f"budget {budget.name} ({budget.scope.describe()}): {state.spend:.2f} {cur} spent this "
                f"{budget.period}, {state.spend / budget.limit:.0%} of {budget.limit:g} {cur} (level {level:g})"
            )
            out.append((_alert(state, name, state.period_id, state.spend, message, now), claim, "sent"))
    if budget.burn_rate and held.get((state.period_id, "burn")) is None and state.spend < budget.limit:
        elapsed = now - state.start
        length = state.end - state.start
        if elapsed >= max(300.0, 0.05 * length) and state.spend > 0:
            rate = state.spend / elapsed
            gone = now + (budget.limit - state.spend) / rate
            if gone < state.end:
                message = (
                    f"budget {budget.name} ({budget.scope.describe()}): at this rate the {_PERIODLY[budget.period]} "
                    f"budget of {budget.limit:g} {cur} is gone at {_clock(gone, budget.time_zone)} "
                    f"({budget.time_zone}); {state.spend:.2f} {cur} spent so far"
                )
                alert = _alert(state, "burn", state.period_id, state.spend, message, now)
                out.append((alert, (state.period_id, "burn"), "sent"))
    for (period, name), status in held.items():
        if period == state.previous_id and status == "sent":  # the period is over: resolve what fired
            message = (
                f"budget {budget.name}: the {budget.period} is over ({state.previous_spend:.2f} {cur} spent)"
            )
            alert = _alert(state, name, period, state.previous_spend, message, now).model_copy(
                update={"status": "resolved"}
            )
            out.append((alert, (period, name), "resolved"))
    return out
