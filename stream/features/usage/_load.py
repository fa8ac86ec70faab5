"""The ``prices:`` and ``budgets:`` sections as the suite file's loader checks them (streameval.config): the
prices table read from its own file when it names one, and the checks across sections, each with its path."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from ._budgets import BudgetConfig
from ._prices import PricesConfig, price_issues

__all__ = ["load_prices", "usage_issues"]

Loc = tuple[str | int, ...]


def load_prices(
    prices: PricesConfig, suite_file: str
) -> tuple[PricesConfig | None, list[tuple[str, Loc, str]]]:
    """The table itself: ``prices`` when inline, else its file's (relative to ``suite_file``'s folder).
    Problems as (file, path, message): the prices file's own name their field in that file."""
    if prices.file is None:
        return prices, []
    base = Path(suite_file).parent if not suite_file.startswith("<") else Path.cwd()
    path = base / prices.file
    try:
        data: Any = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        return None, [(suite_file, ("prices", "file"), f"cannot read {str(path)!r}: {exc.strerror}")]
    except yaml.YAMLError as exc:
        return None, [(str(path), (), f"not valid YAML: {exc}")]
    if not isinstance(data, dict) or "file" in data:
        return None, [(str(path), (), "a prices file is a mapping of currency and models")]
    try:
        return PricesConfig.model_validate(data), []
    except ValidationError as exc:
        return None, [
            (str(path), tuple(e["loc"]), str(e["msg"]).removeprefix("Value error, ")) for e in exc.errors()
        ]


def usage_issues(
    prices: PricesConfig | None,
    budgets: Sequence[BudgetConfig],
    routes: Sequence[Sequence[str] | None],
    suites: Sequence[str],
    dimensions: Sequence[str] = (),
) -> Iterator[tuple[Loc, str]]:
    """Problems across sections: price entries matching no model the suites take (``routes``: each suite's
    ``match.model``, None when it takes any model), budgets in another currency than the prices', or without
    prices at all, or naming a suite the file lacks; repeated budget names."""
    if prices is not None:
        yield from price_issues(prices, routes)
    seen: set[str] = set()
    for i, budget in enumerate(budgets):
        if budget.name in seen:
            yield ("budgets", i, "name"), f"budget name {budget.name!r} is used twice"
        seen.add(budget.name)
        if prices is None:
            yield (
                ("budgets", i),
                "a budget needs prices: (a prices table, or producers' costs in its currency)",
            )
        elif budget.currency != prices.currency:
            yield (
                ("budgets", i, "currency"),
                f"{budget.currency!r} is not the prices table's currency ({prices.currency}); no conversion is made",
            )
        if budget.scope.suite is not None and budget.scope.suite not in suites:
            yield ("budgets", i, "scope", "suite"), f"no suite is named {budget.scope.suite!r}"
        segment = budget.scope.segment
        if segment is not None and segment.dimension not in dimensions:
            yield (
                ("budgets", i, "scope", "segment", "dimension"),
                f"no dimension {segment.dimension!r} in segments: (known: {sorted(dimensions)})",
            )
