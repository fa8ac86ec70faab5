"""The prices table: a call's cost against a hand-computed table (cached and reasoning tokens included), and
a bad table refused when the suite file loads, with the path of the bad field (docs/usage.md)."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

from streameval.blocks import UsageBlock
from streameval.config import load_config
from streameval.errors import ConfigError
from streameval.features.usage import Price, PricesConfig, call_cost

TABLE = PricesConfig.model_validate(
    {
        "currency": "USD",
        "models": {
            "gpt-4o-mini*": {"input": 0.15, "output": 0.60, "cached_input": 0.075},
            "o3*": {"input": 2.0, "output": 8.0, "cached_input": 0.5, "reasoning": 8.0},
            "reasoner": {"input": 1.0, "output": 4.0, "reasoning": 2.0},
            "gpt-4o*": {"input": 2.5, "output": 10.0},
            "free-*": {"input": 0, "output": 0},
        },
    }
)

# (model, usage, cost in USD), each worked out by hand per million tokens:
# cached input is part of the input tokens, reasoning part of the output tokens
HAND = [
    # 1000 in at 0.15 + 500 out at 0.60 = 0.00015 + 0.0003
    ("gpt-4o-mini-2024-07-18", {"input_tokens": 1000, "output_tokens": 500}, 0.00045),
    # (1000 - 800) at 0.15 + 800 at 0.075 + 500 at 0.60 = 0.00003 + 0.00006 + 0.0003
    ("gpt-4o-mini", {"input_tokens": 1000, "cached_input_tokens": 800, "output_tokens": 500}, 0.00039),
    # (10000 - 4000) at 2 + 4000 at 0.5 + (3000 - 2500) at 8 + 2500 at 8 = 0.012 + 0.002 + 0.004 + 0.02
    (
        "o3-mini",
        {"input_tokens": 10000, "cached_input_tokens": 4000, "output_tokens": 3000, "reasoning_tokens": 2500},
        0.038,
    ),
    # reasoning priced apart: 100 at 1 + (1000 - 600) at 4 + 600 at 2 = 0.0001 + 0.0016 + 0.0012
    ("reasoner", {"input_tokens": 100, "output_tokens": 1000, "reasoning_tokens": 600}, 0.0029),
    # no cached price: cached tokens at the input price: 2000 at 2.5 + 100 at 10 = 0.005 + 0.001
    ("gpt-4o", {"input_tokens": 2000, "cached_input_tokens": 1500, "output_tokens": 100}, 0.006),
    # the first matching entry wins: gpt-4o-mini* before gpt-4o*
    ("gpt-4o-mini-x", {"input_tokens": 1_000_000, "output_tokens": 0}, 0.15),
    ("free-llama", {"input_tokens": 5000, "output_tokens": 5000}, 0.0),  # a price of 0 is $0
    ("unknown-model", {"input_tokens": 5000, "output_tokens": 5000}, None),  # no price: no cost, not $0
    ("gpt-4o", {"finish_reason": "stop"}, None),  # no tokens: no cost
    ("gpt-4o", {"input_tokens": 1, "cost": 0.5}, 0.5),  # the producer's cost wins, in the table's currency
    ("gpt-4o", {"input_tokens": 1, "cost": 0.5, "currency": "USD"}, 0.5),
    ("gpt-4o", {"input_tokens": 1000, "cost": 0.5, "currency": "EUR"}, 0.0025),  # another currency: the table
    ("unknown-model", {"input_tokens": 1, "cost": 0.5, "currency": "EUR"}, None),
]


@pytest.mark.parametrize(("model", "usage", "cost"), HAND)
def test_cost_against_hand_computed_table(model: str, usage: dict[str, Any], cost: float | None) -> None:
    found = call_cost(UsageBlock.model_validate(usage), TABLE.price(model), TABLE.currency)
    if cost is None:
        assert found is None
    else:
        assert found == pytest.approx(cost, rel=1e-12, abs=1e-15)


def test_price_defaults_and_lookup_is_first_match() -> None:
    assert TABLE.price("gpt-4o-mini-2024") == Price(input=0.15, output=0.60, cached_input=0.075)
    assert TABLE.price("gpt-4o-2024") == Price(input=2.5, output=10.0)
    assert TABLE.price("claude") is None


def write(tmp_path: Path, text: str, name: str = "suites.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


SUITES = """\
suites:
  - name: qa
    match: {model: ["gpt-4o*", "o3-*"]}
    evaluators: [{evaluator: exact_match}]
"""


@pytest.mark.parametrize(
    ("prices", "path", "says"),
    [
        (
            "prices: {currency: USX, models: {'gpt-4o': {input: 1, output: 2}}}",
            "prices.currency",
            "unknown currency",
        ),
        (
            "prices: {currency: USD, models: {'gpt-4o': {input: -1, output: 2}}}",
            "prices.models.gpt-4o.input",
            "greater than or equal to 0",
        ),
        (
            "prices: {currency: USD, models: {'gpt-4o': {input: .nan, output: 2}}}",
            "prices.models.gpt-4o.input",
            "",
        ),
        (
            "prices: {currency: USD, models: {'gpt-4o': {input: 1}}}",
            "prices.models.gpt-4o.output",
            "required",
        ),
        (
            "prices: {currency: USD, models: {'claude-*': {input: 1, output: 2}}}",
            "prices.models.claude-*",
            "matches no model",
        ),
        (
            "prices: {currency: USD, models: {'gpt-4o': {input: 1, output: 2, cache: 1}}}",
            "prices.models.gpt-4o.cache",
            "",
        ),
        ("prices: {models: {'gpt-4o': {input: 1, output: 2}}}", "prices", "needs currency"),
        ("prices: {file: nope.yaml}", "prices.file", "cannot read"),
    ],
)
def test_bad_table_is_refused_with_its_path(tmp_path: Path, prices: str, path: str, says: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(write(tmp_path, SUITES + prices + "\n"))
    issues = caught.value.issues
    assert any(i.path == path and says in i.message for i in issues), [str(i) for i in issues]


def test_globs_overlapping_a_route_are_accepted(tmp_path: Path) -> None:
    _, loaded = load_config(
        write(
            tmp_path,
            SUITES
            + "prices: {currency: EUR, models: {'gpt-4o-mini*': {input: 1, output: 2}, 'o3*': {input: 1, output: 2},"
            " 'gpt-*': {input: 1, output: 2}}}\n",
        )
    )
    assert loaded.prices is not None and loaded.prices.currency == "EUR"


def test_a_suite_taking_any_model_lets_every_entry_match(tmp_path: Path) -> None:
    text = SUITES + "  - {name: rest, default: true, evaluators: [{evaluator: exact_match}]}\n"
    _, loaded = load_config(
        write(tmp_path, text + "prices: {currency: USD, models: {'claude-*': {input: 3, output: 15}}}\n")
    )
    assert loaded.prices is not None and loaded.prices.price("claude-3") is not None


def test_table_in_a_file_of_its_own(tmp_path: Path) -> None:
    write(tmp_path, "currency: CNY\nmodels:\n  'gpt-4o*': {input: 18, output: 72}\n", "prices.yaml")
    _, loaded = load_config(write(tmp_path, SUITES + "prices: {file: prices.yaml}\n"))
    assert loaded.prices is not None and loaded.prices.currency == "CNY"
    assert loaded.prices.price("gpt-4o") == Price(input=18, output=72)


def test_a_bad_prices_file_names_that_file_and_field(tmp_path: Path) -> None:
    table = write(tmp_path, "currency: USD\nmodels:\n  'gpt-4o*': {input: 1, output: -2}\n", "prices.yaml")
    with pytest.raises(ConfigError) as caught:
        load_config(write(tmp_path, SUITES + "prices: {file: prices.yaml}\n"))
    (issue,) = caught.value.issues
    assert (issue.file, issue.path) == (str(table), "models.gpt-4o*.output")


def test_no_prices_no_feature(tmp_path: Path) -> None:
    _, loaded = load_config(write(tmp_path, SUITES))
    assert loaded.prices is None and loaded.budgets == ()
