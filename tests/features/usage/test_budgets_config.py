"""The ``budgets:`` section: refused at load with the path of the bad field; periods on a named clock."""

from __future__ import annotations

from typing import Any

import pytest

from streameval.config import parse_config
from streameval.errors import ConfigError
from streameval.features.setup import enabled, record_plugins, window_steps
from streameval.features.usage import UsageRecorder, UsageStep, period_bounds
from streameval.settings import Settings

SUITES = [{"name": "qa", "default": True, "evaluators": [{"evaluator": "exact_match"}]}]
PRICES = {"currency": "USD", "models": {"gpt-4o*": {"input": 2.5, "output": 10}}}
BUDGET = {"name": "b", "scope": {"model": "gpt-4o"}, "period": "day", "limit": 10, "currency": "USD"}


@pytest.mark.parametrize(
    ("budget", "prices", "path", "says"),
    [
        ({"time_zone": "Mars/Olympus"}, PRICES, "budgets[0].time_zone", "unknown time zone"),
        ({"currency": "EUR"}, PRICES, "budgets[0].currency", "not the prices table's currency"),
        ({"currency": "EURO"}, PRICES, "budgets[0].currency", "unknown currency"),
        ({"limit": -1}, PRICES, "budgets[0].limit", "greater than 0"),
        ({"warn_at": [1.5]}, PRICES, "budgets[0].warn_at", "not a share"),
        ({"period": "week"}, PRICES, "budgets[0].period", ""),
        (
            {"scope": {"model": "a", "suite": "qa"}},
            PRICES,
            "budgets[0].scope",
            "one of model, suite or segment",
        ),
        ({"scope": {"suite": "nope"}}, PRICES, "budgets[0].scope.suite", "no suite is named"),
        ({}, None, "budgets[0]", "needs prices"),
    ],
)
def test_bad_budget_is_refused_with_its_path(
    budget: dict[str, Any], prices: dict[str, Any] | None, path: str, says: str
) -> None:
    document: dict[str, Any] = {"suites": SUITES, "budgets": [{**BUDGET, **budget}]}
    if prices is not None:
        document["prices"] = prices
    with pytest.raises(ConfigError) as caught:
        parse_config(document)
    assert any(i.path == path and says in i.message for i in caught.value.issues), [
        str(i) for i in caught.value.issues
    ]


def test_usage_is_built_only_when_configured() -> None:
    _, plain = parse_config({"suites": SUITES})
    assert not any(isinstance(r, UsageRecorder) for r in record_plugins(enabled(Settings(), plain)))
    assert not any(isinstance(s, UsageStep) for s in window_steps(plain, (60,)))
    _, priced = parse_config({"suites": SUITES, "prices": PRICES, "budgets": [BUDGET]})
    on = enabled(Settings(), priced)
    (recorder,) = [r for r in record_plugins(on) if isinstance(r, UsageRecorder)]
    assert recorder.budgets is not None and [b.name for b in recorder.budgets.entries] == ["b"]
    assert enabled(Settings(), priced, backfill=True).budgets is None  # a backfill spends nothing
    assert [type(s) for s in window_steps(priced, (60,))] == [UsageStep]


@pytest.mark.parametrize(
    ("period", "zone", "t", "expected"),
    [
        # 2025-12-06 15:30 UTC is 16:30 in Paris and 23:30 in Shanghai
        ("day", "UTC", 1_765_035_000, ("2025-12-06", 1_764_979_200, 1_765_065_600)),
        ("day", "Europe/Paris", 1_765_035_000, ("2025-12-06", 1_764_975_600, 1_765_062_000)),
        ("hour", "Asia/Shanghai", 1_765_035_000, ("2025-12-06T23", 1_765_033_200, 1_765_036_800)),
        ("month", "UTC", 1_765_035_000, ("2025-12", 1_764_547_200, 1_767_225_600)),
        # the day DST starts in Paris (2026-03-29) is 23 hours long
        ("day", "Europe/Paris", 1_774_785_600, ("2026-03-29", 1_774_738_800, 1_774_821_600)),
    ],
)
def test_periods_on_a_named_clock(period: Any, zone: str, t: float, expected: tuple[str, int, int]) -> None:
    assert period_bounds(period, zone, t) == expected
