"""The suite file's ``budgets:`` list and the budget periods (docs/usage.md).

.. code-block:: yaml

    budgets:
      - name: gpt4o-daily
        scope: {model: gpt-4o}        # or {suite: qa}
        period: day                   # hour | day | month
        time_zone: Europe/Paris       # the period's clock (IANA name); default UTC
        limit: 50
        currency: USD                 # the prices table's
        warn_at: [0.5, 0.8]           # alert when spend crosses these shares of the limit (1.0 always)
        burn_rate: true               # alert when the current rate spends the limit before the period ends

Spend is kept per model × suite pair and period (the record call adds each event's cost to its pair's
spend hash, field ``{period}@{time zone}:{period id}``); a budget's spend is the sum over the pairs in its
scope, read by the window closer's step.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ._prices import CURRENCIES

__all__ = ["BudgetConfig", "BudgetScope", "Budgets", "Period", "period_bounds", "period_field"]

Period = Literal["hour", "day", "month"]


class SliceScope(BaseModel):
    """One value of one slice dimension (the suite file's ``segments:``, docs/segments.md)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    dimension: str = Field(min_length=1, max_length=64)
    value: str = Field(min_length=1, max_length=128)


class BudgetScope(BaseModel):
    """What a budget covers: one model (every suite), one suite (every model), or one slice value (every pair)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str | None = Field(default=None, min_length=1, max_length=256, description="a model name")
    suite: str | None = Field(default=None, min_length=1, max_length=128, description="a suite name")
    segment: SliceScope | None = Field(default=None, description="one value of a segments: dimension")

    @model_validator(mode="after")
    def _one(self) -> BudgetScope:
        if sum(x is not None for x in (self.model, self.suite, self.segment)) != 1:
            raise ValueError("name one of model, suite or segment")
        return self

    def covers(self, model: str, suite: str) -> bool:
        """Whether the pair's spend counts (a slice's: every pair may hold some of it)."""
        if self.model is not None:
            return model == self.model
        return suite == self.suite if self.suite is not None else True

    def describe(self) -> str:
        if self.segment is not None:
            return f"{self.segment.dimension} {self.segment.value}"
        return f"model {self.model}" if self.model is not None else f"suite {self.suite}"


class BudgetConfig(BaseModel):
    """One ``budgets:`` entry."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.-]+$", description="unique name")
    scope: BudgetScope
    period: Period = Field(description="hour, day or month")
    time_zone: str = Field(default="UTC", description="the period's clock: an IANA time zone name")
    limit: float = Field(gt=0.0, description="spend allowed per period")
    currency: str = Field(description="the prices table's currency")
    warn_at: tuple[float, ...] = Field(
        default=(0.8,), validate_default=True, description="shares of the limit that alert when crossed"
    )
    burn_rate: bool = Field(default=True, description="alert when the current rate ends the budget early")
    severity: Literal["info", "warning", "critical"] = "warning"

    @field_validator("time_zone")
    @classmethod
    def _zone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            near = sorted(
                z for z in available_timezones() if z.lower().endswith(value.lower().split("/")[-1])
            )
            hint = f"; did you mean {', '.join(near[:3])}?" if near else ""
            raise ValueError(
                f"unknown time zone {value!r} (an IANA name such as Europe/Paris){hint}"
            ) from None
        return value

    @field_validator("currency")
    @classmethod
    def _currency(cls, value: str) -> str:
        if value not in CURRENCIES:
            raise ValueError(f"unknown currency {value!r}: an ISO 4217 code such as USD, EUR, CNY")
        return value

    @field_validator("warn_at")
    @classmethod
    def _levels(cls, levels: tuple[float, ...]) -> tuple[float, ...]:
        for level in levels:
            if not 0.0 < level <= 1.0:
                raise ValueError(f"level {level} is not a share of the limit in (0, 1]")
        return tuple(sorted(set(levels) | {1.0}))

    @property
    def key(self) -> str:
        """The spend hash's field prefix of this budget's periods (a slice's: the value's own spend)."""
        base = f"{self.period}@{self.time_zone}"
        segment = self.scope.segment
        return base if segment is None else f"{base}|{segment.dimension}={segment.value}"


@lru_cache(maxsize=64)
def _zone(name: str) -> ZoneInfo:
    return ZoneInfo(name)


def period_bounds(period: Period, zone: str, t: float) -> tuple[str, float, float]:
    """The id (local ``2026-12-06``, ``2026-12-06T14``, ``2026-12``), start and end (epoch s) of the
    period of ``period`` holding time ``t`` on ``zone``'s clock."""
    tz = _zone(zone)
    local = datetime.fromtimestamp(t, tz)
    if period == "hour":
        start = local.replace(minute=0, second=0, microsecond=0)
        begin = start.timestamp()
        return start.strftime("%Y-%m-%dT%H"), begin, begin + 3600.0  # an hour is an hour, across DST too
    if period == "day":
        start = local.replace(hour=0, minute=0, second=0, microsecond=0)
        nxt = (start + timedelta(days=1)).replace(tzinfo=None)
        return start.strftime("%Y-%m-%d"), start.timestamp(), nxt.replace(tzinfo=tz).timestamp()
    start = local.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    year, month = (start.year + 1, 1) if start.month == 12 else (start.year, start.month + 1)
    nxt = start.replace(year=year, month=month, tzinfo=None).replace(tzinfo=tz)
    return start.strftime("%Y-%m"), start.timestamp(), nxt.timestamp()


def period_field(period: Period, zone: str, t: float) -> str:
    """The spend hash field of the period holding ``t``."""
    return f"{period}@{zone}:{period_bounds(period, zone, t)[0]}"


@dataclass(frozen=True)
class Budgets:
    """The suite file's budgets as the recorder and the closer's step use them."""

    entries: tuple[BudgetConfig, ...]

    #: the spend hash outlives the longest period (a month) and the one before it
    spend_ttl_s: int = 70 * 86400

    #: the slice dimensions in the order of an event's slice values (streameval.feature.slice_values)
    dimensions: tuple[str, ...] = ()

    def periods_of(self, model: str, suite: str) -> list[tuple[int, str, Callable[[float], str]]]:
        """Per distinct spend field prefix of the budgets covering ``model`` × ``suite``: the index of the
        slice dimension it needs (-1: none), the value it needs, and the field of a time."""
        return _periods(self, model, suite)

    def covering(self, model: str, suite: str) -> Sequence[BudgetConfig]:
        return [b for b in self.entries if b.scope.covers(model, suite)]


@lru_cache(maxsize=4096)
def _periods(budgets: Budgets, model: str, suite: str) -> list[tuple[int, str, Callable[[float], str]]]:
    out: dict[str, tuple[int, str, Callable[[float], str]]] = {}
    for b in budgets.entries:
        if not b.scope.covers(model, suite) or b.key in out:
            continue
        segment = b.scope.segment
        if segment is None:
            out[b.key] = (-1, "", _field_of(b.period, b.time_zone, b.key))
        elif segment.dimension in budgets.dimensions:
            index = budgets.dimensions.index(segment.dimension)
            out[b.key] = (index, segment.value, _field_of(b.period, b.time_zone, b.key))
    return [out[k] for k in sorted(out)]


def _field_of(period: Period, zone: str, key: str) -> Callable[[float], str]:
    # every time zone's offset is a whole number of minutes: a period starts on a minute, so one look-up per
    # minute of event time (a batch's events share a few) rather than a datetime per event
    found: dict[int, str] = {}

    def field(t: float) -> str:
        minute = int(t // 60)
        name = found.get(minute)
        if name is None:
            if len(found) > 1024:
                found.clear()
            name = found[minute] = f"{key}:{period_bounds(period, zone, minute * 60.0)[0]}"
        return name

    return field
