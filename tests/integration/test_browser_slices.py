"""The dashboard's slices (docs/segments.md) in a real headless Chromium (Debian's chromium + chromedriver),
served by a real worker on the real broker and Redis: the slice selector lists the dimensions and values the
worker kept, the worst-slices table puts the value furthest below the pair's mean first with its count and
interval, and picking one slice shows its figures per window. Screenshots go to test-artifacts/browser/."""

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

# tier -> outputs: free fails most, gold never
TIERS = {"gold": ["北京"] * 6, "free": ["上海", "上海", "上海", "北京"], "team": ["北京", "上海"]}


def test_slice_selector_and_worst_slices(
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
                "segments": {"dimensions": {"tier": "metadata.tier", "region": "tag:region:"}},
            }
        )
    )
    site = serve_site(config, broker, start_worker, topics)
    now, events = time.time(), []
    for tier, outputs in TIERS.items():
        for output in outputs:
            events.append(
                raw_event(
                    id=f"s-{len(events)}",
                    model="model-a",
                    output=output,
                    expected="北京",
                    timestamp=format_time(now),
                    metadata={"tier": tier},
                    tags=[f"region:{'eu' if len(events) % 2 else 'us'}"],
                )
            )
    asyncio.run(produce(broker.bootstrap, topics["requests"], events))
    open_dashboard(browser, site)
    assert browser.find_element(By.ID, "segments-note").text == "pick a model and a suite"

    wait(browser, lambda d: pick(d, "filter-model", "model-a"), "model-a in the model filter")
    wait(browser, lambda d: pick(d, "filter-suite", "qa"), "qa in the suite filter")

    def rows(d: WebDriver) -> list[tuple[str, str, str]]:  # one step: the table may be redrawn between reads
        return d.execute_script(  # type: ignore[no-any-return]
            "return [...document.querySelectorAll('#segments-table tbody tr')]"
            ".map((r) => [...r.children].slice(0, 3).map((c) => c.textContent))"
        )

    wait(browser, lambda d: sum(int(r[2]) for r in rows(d) if r[0] == "tier") == 12, "the 12 events by tier")
    table = rows(browser)
    assert table[0][:2] == ["tier", "free"]  # furthest below the pair's mean (1 of 4 passed)
    assert {(r[0], r[1], r[2]) for r in table if r[0] == "tier"} == {
        ("tier", "gold", "6"),
        ("tier", "free", "4"),
        ("tier", "team", "2"),
    }
    assert {r[1] for r in table if r[0] == "region"} == {"eu", "us"}
    first = browser.find_element(By.CSS_SELECTOR, "#segments-table tbody tr").text
    assert "[" in first  # its 95 % interval
    browser.execute_script("document.getElementById('segments-panel').scrollIntoView()")
    browser.save_screenshot(str(ARTIFACTS / "10-worst-slices.png"))

    # the selector: one dimension, then one slice with its figures per window
    wait(browser, lambda d: pick(d, "segment-dimension", "tier"), "tier in the slice selector")
    wait(browser, lambda d: {r[0] for r in rows(d)} == {"tier"}, "only the tier slices")
    wait(browser, lambda d: pick(d, "segment-value", "team"), "team among the values")
    wait(browser, lambda d: [r[1] for r in rows(d)] == ["team"], "the team slice alone")
    wait(
        browser,
        lambda d: (
            d.find_element(By.ID, "segment-series").is_displayed()
            and d.find_elements(By.CSS_SELECTOR, "#segment-series tbody tr")
        ),
        "the team slice per window",
    )
    browser.execute_script("document.getElementById('segments-panel').scrollIntoView()")
    browser.save_screenshot(str(ARTIFACTS / "11-one-slice.png"))
    assert not csp_violations(browser)
