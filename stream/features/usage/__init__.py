"""Usage of the monitored call: token counts, durations, cost by a prices table, and spend budgets
(docs/usage.md). Built only when the suite file has ``prices:`` or ``budgets:`` (streameval.features.setup).

Modules: ``_prices`` (the ``prices:`` table and a call's cost: pure), ``_budgets`` (the ``budgets:`` list and
their periods on a named clock: pure), ``_notes`` (each event's usage and cost, an annotator), ``_recorder``
(each event's usage in its increments, the record call's block: spend per period), ``_window`` (the
closer's step: the budgets' alerts); the window figures themselves are read by streameval.usage_figures, ``_load`` (the sections loaded and checked with the suite file).
"""

from __future__ import annotations

from ._budgets import BudgetConfig, Budgets, BudgetScope, period_bounds, period_field
from ._load import load_prices, usage_issues
from ._notes import KEY, Usage, UsageAnnotator
from ._prices import CURRENCIES, Price, PricesConfig, call_cost
from ._recorder import UsageRecorder
from ._window import UsageStep

__all__ = [
    "CURRENCIES",
    "KEY",
    "BudgetConfig",
    "BudgetScope",
    "Budgets",
    "Price",
    "PricesConfig",
    "Usage",
    "UsageAnnotator",
    "UsageRecorder",
    "UsageStep",
    "call_cost",
    "load_prices",
    "period_bounds",
    "period_field",
    "usage_issues",
]
