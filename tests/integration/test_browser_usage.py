"""The dashboard's usage panels (docs/usage.md) in a real headless Chromium, served by a real worker on the real
broker and Redis: quality per cost shows each model's pass rate and cost per 1,000 events side by side (and per
slice value), and the budgets table the day's spend so far. Screenshots go to test-artifacts/browser/."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from _support import raw_event

from streameval.embedded import EmbeddedBroker
from streameval.kafka_io import produce
from streameval.models import format_time

from .test_browser import (  # noqa: F401  (browser: a fixture)
    ARTIFACTS,
    browser,
    csp_violations,
    open_dashboard,
    pick,
    serve_site,
    wait,
)

pytestmark = [pytest.mark.integration, pytest.mark.browser]

from selenium.webdriver.common.by import By  # noqa: E402  (test_browser skipped the module without a browser)
from selenium.webdriver.remote.webdriver import WebDriver  # noqa: E402

# model -> (outputs, input tokens, output tokens) per event; expected 北京
MODELS = {"big": (["北京"] * 4, 1000, 200), "small": (["北京", "上海", "北京", "上海"], 1000, 200)}


def test_quality_per_cost_and_budgets(
    browser: WebDriver,  # noqa: F811
    broker: EmbeddedBroker,
    start_worker: Callable[..., Any],
    topics: dict[str, str],
    tmp_path: Path,
) -> None:
    config = tmp_path / "suites.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "suites": [{"name": "qa", "default": True, "evaluators": [{"evaluator": "exact_match"}]}],
                "segments": {"dimensions": {"tier": "metadata.tier"}},
                "prices": {
                    "currency": "USD",
                    "models": {"big": {"input": 10, "output": 30}, "small": {"input": 1, "output": 2}},
                },
                "budgets": [
                    {
                        "name": "qa-day",
                        "scope": {"suite": "qa"},
                        "period": "day",
                        "limit": 1,
                        "currency": "USD",
                    }
                ],
            }
        )
    )
    site = serve_site(config, broker, start_worker, topics)
    now, events = time.time(), []
    for model, (outputs, tokens_in, tokens_out) in MODELS.items():
        for i, output in enumerate(outputs):
            events.append(
                raw_event(
                    id=f"u-{len(events)}",
                    model=model,
                    output=output,
                    expected="北京",
                    timestamp=format_time(now),
                    metadata={"tier": "gold" if i % 2 else "free"},
                    usage={"input_tokens": tokens_in, "output_tokens": tokens_out, "duration_ms": 500.0},
                )
            )
    asyncio.run(produce(broker.bootstrap, topics["requests"], events))
    open_dashboard(browser, site)

    wait(browser, lambda d: pick(d, "filter-suite", "qa"), "qa in the suite filter")

    def rows(d: WebDriver, table: str) -> list[list[str]]:  # one step: the table may be redrawn between reads
        return d.execute_script(  # type: ignore[no-any-return]
            f"return [...document.querySelectorAll('#{table} tbody tr')]"
            ".map((r) => [...r.children].map((c) => c.textContent))"
        )

    wait(browser, lambda d: sum(int(r[2]) for r in rows(d, "costs-table")) == 8, "the 8 events by model")
    table = {r[0]: r for r in rows(browser, "costs-table")}
    # big: 4 of 4 pass, (1000 × 10 + 200 × 30) / 10^6 = 0.016 per event; small: 2 of 4, 0.0014
    assert table["big"][3] == "100.0 %" and table["big"][5] == "16.0000 USD"
    assert table["small"][3] == "50.0 %" and table["small"][5] == "1.4000 USD"
    browser.execute_script("document.getElementById('costs-panel').scrollIntoView()")
    browser.save_screenshot(str(ARTIFACTS / "20-quality-per-cost.png"))

    field = browser.find_element(By.ID, "costs-dimension")
    field.send_keys("tier")
    browser.execute_script("document.getElementById('costs-dimension').dispatchEvent(new Event('change'))")
    wait(browser, lambda d: {r[1] for r in rows(d, "costs-table")} == {"free", "gold"}, "a row per tier")

    wait(browser, lambda d: bool(rows(d, "budgets-table")), "the budget's row")
    (budget,) = rows(browser, "budgets-table")
    assert budget[0] == "qa-day" and budget[3] == f"{4 * 0.016 + 4 * 0.0014:.2f} USD"
    browser.execute_script("document.getElementById('budgets-panel').scrollIntoView()")
    browser.save_screenshot(str(ARTIFACTS / "21-budgets.png"))
    assert not csp_violations(browser)
