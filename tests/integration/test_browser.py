"""The pages in a real headless Chromium (Debian's chromium + chromedriver, driven by selenium), served
by a real worker's web server on the real broker and Redis.

Creates an evaluator in the editor, test-runs it and sees the result, sees a preset refuse edits (the
page is read-only and the server answers 403), and watches the dashboard change while events flow.
Screenshots go to test-artifacts/browser/. Needs ``apt-get install -y chromium chromium-driver``;
skipped with that message when the binaries are missing.
"""

from __future__ import annotations

import re
import shutil
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from _support import raw_event

from streameval.embedded import EmbeddedBroker
from streameval.kafka_io import ensure_topics, produce
from streameval.models import format_time

pytestmark = [pytest.mark.integration, pytest.mark.browser]

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts" / "browser"
CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")
TOKEN = "browser-token-0123456789"
WAIT_S = 60

if CHROMIUM is None or CHROMEDRIVER is None:
    pytest.skip(
        "browser tests need Debian's chromium and chromedriver: apt-get install -y chromium chromium-driver",
        allow_module_level=True,
    )

from selenium import webdriver  # noqa: E402  (only once the browser is known to exist)
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.remote.webdriver import WebDriver  # noqa: E402
from selenium.webdriver.support.ui import Select, WebDriverWait  # noqa: E402

NODE_CODE = """module.exports = async function evaluate(input, output, expected, metadata) {
  const min = metadata.minLength || 5;
  return { passed: output.length >= min, score: Math.min(1, output.length / min), reason: 'length ' + output.length };
};
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def browser() -> Iterator[WebDriver]:
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--window-size=1280,2000",
        "--lang=zh-CN",
    ):
        options.add_argument(arg)
    options.set_capability(
        "goog:loggingPrefs", {"browser": "ALL"}
    )  # console: Content-Security-Policy violations
    driver = webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)), options=options)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture
def site(
    broker: EmbeddedBroker, start_worker: Callable[..., Any], topics: dict[str, str], tmp_path: Path
) -> Iterator[str]:
    """A worker serving the pages; its suite scores events with two the evaluator-module spec's presets."""
    config = tmp_path / "suites.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "suites": [
                    {
                        "name": "qa",
                        "default": True,
                        "evaluators": [
                            {"evaluator": "exact_match"},
                            {"evaluator": "similarity", "params": {"threshold": 0.8}},
                        ],
                    }
                ],
                # 2 s windows close quickly, so the rule (2 of 3 outputs pass) fires while the test watches
                "windowing": {"allowed_lateness_s": 1},
                "alerts": [
                    {
                        "name": "qa-pass-rate-low",
                        "metric": "pass_rate",
                        "comparator": "<",
                        "threshold": 0.9,
                        "window": 2,
                        "severity": "warning",
                    }
                ],
            }
        )
    )
    yield serve_site(config, broker, start_worker, topics)


def serve_site(
    config: Path, broker: EmbeddedBroker, start_worker: Callable[..., Any], topics: dict[str, str], **env: str
) -> str:
    """The base URL of a worker serving the pages with the suite file ``config``, once it answers."""
    import asyncio

    asyncio.run(ensure_topics(broker.bootstrap, topics.values(), partitions=2))
    port = free_port()
    start_worker(
        config, STREAMEVAL_WEB_PORT=str(port), STREAMEVAL_API_TOKEN=TOKEN, STREAMEVAL_WINDOWS="2,60", **env
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + WAIT_S
    while True:
        try:
            if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                break
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, "the worker's web server did not start"
        time.sleep(0.1)  # polling the server's start with a deadline
    return base


def wait(driver: WebDriver, check: Callable[[WebDriver], Any], what: str) -> Any:
    return WebDriverWait(driver, WAIT_S, poll_frequency=0.1).until(check, message=f"waiting for {what}")


def shown_result(driver: WebDriver) -> str | None:
    """The test-run box's text once it shows a verdict."""
    text: str = driver.find_element(By.ID, "test-result").text
    return text if "passed=" in text else None


def set_token(driver: WebDriver) -> None:
    field = driver.find_element(By.ID, "api-token")
    field.clear()
    field.send_keys(TOKEN)
    driver.execute_script("arguments[0].dispatchEvent(new Event('change'))", field)


def open_dashboard(driver: WebDriver, site: str) -> None:
    """The dashboard with the token set, once it has refreshed once."""
    driver.get(f"{site}/dashboard")
    set_token(driver)
    wait(driver, lambda d: d.find_element(By.ID, "updated").text != "—", "the dashboard's first refresh")


def pick(driver: WebDriver, select_id: str, value: str) -> bool:
    """Selects ``value`` in the ``select_id`` list once it is one of its options (False until then)."""
    options = [
        o.get_attribute("value") for o in driver.find_elements(By.CSS_SELECTOR, f"#{select_id} option")
    ]
    if value not in options:
        return False
    Select(driver.find_element(By.ID, select_id)).select_by_value(value)
    return True


def csp_violations(driver: WebDriver) -> list[str]:
    """The browser log's Content Security Policy messages since the last read of the log."""
    return [e["message"] for e in driver.get_log("browser") if "Content Security Policy" in e["message"]]


def test_create_test_run_and_presets_read_only(browser: WebDriver, site: str) -> None:
    browser.get(f"{site}/evaluators")
    rows = wait(
        browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#presets-table tbody tr"), "the presets table"
    )
    assert [r.get_attribute("data-id") for r in rows[:5]] == [
        "exact_match",
        "contains",
        "regex",
        "json_schema",
        "similarity",
    ]
    assert (
        rows[0].find_element(By.TAG_NAME, "a").text.startswith("精确匹配")
    )  # the evaluator-module spec §6 display name
    browser.save_screenshot(str(ARTIFACTS / "01-presets.png"))
    set_token(browser)

    # create a Node.js evaluator in the editor
    browser.find_element(By.ID, "new-evaluator").click()
    wait(browser, lambda d: d.find_element(By.ID, "title").text == "新建评估器", "the editor")
    browser.find_element(By.ID, "name").send_keys("min_length")
    browser.find_element(By.ID, "description").send_keys("the evaluator-module spec §4.4 length check")
    code = browser.find_element(By.ID, "code")
    browser.execute_script(
        "arguments[0].value = arguments[1]; arguments[0].dispatchEvent(new Event('input'))", code, NODE_CODE
    )
    keywords = browser.find_elements(By.CSS_SELECTOR, "#code-view .tok-kw")
    assert {k.text for k in keywords} >= {"async", "function", "return", "const"}  # highlighted
    browser.save_screenshot(str(ARTIFACTS / "02-editor-new.png"))
    browser.find_element(By.ID, "save").click()
    wait(
        browser,
        lambda d: "created=1" in d.current_url and d.find_element(By.ID, "message").text == "已创建",
        "the created evaluator",
    )
    assert browser.find_element(By.ID, "title").text == "min_length · v1"

    # test-run it and see the result
    browser.find_element(By.ID, "test-output").send_keys("abc")
    metadata = browser.find_element(By.ID, "test-metadata")
    metadata.clear()
    metadata.send_keys('{"minLength": 4}')
    browser.find_element(By.ID, "run-test").click()
    result = wait(browser, lambda d: shown_result(d), "the test result")
    assert "✗ passed=false, score=0.75" in result and "reason: length 3" in result
    browser.save_screenshot(str(ARTIFACTS / "03-test-run.png"))

    # the custom tab lists it with the evaluator-module spec's columns
    browser.get(f"{site}/evaluators#custom")
    row = wait(
        browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#custom-table tbody tr"), "the custom table"
    )[0]
    cells = [c.text for c in row.find_elements(By.TAG_NAME, "td")]
    assert cells[:3] == ["min_length", "代码", "Node.js"] and cells[3] and "编辑" in cells[4]
    headers = [h.text for h in browser.find_elements(By.CSS_SELECTOR, "#custom-table thead th")]
    assert headers == ["名称", "类型", "语言", "更新时间", "操作"]
    browser.save_screenshot(str(ARTIFACTS / "04-custom-tab.png"))

    # a preset: read-only page, and the server refuses a write made from the page
    browser.get(f"{site}/evaluators/regex")
    wait(browser, lambda d: d.find_element(By.ID, "readonly-badge").is_displayed(), "the read-only badge")
    assert not browser.find_element(By.ID, "save").is_displayed()
    assert not browser.find_element(By.ID, "name").is_enabled()
    params = [
        r.find_element(By.TAG_NAME, "td").text
        for r in browser.find_elements(By.CSS_SELECTOR, "#params-table tbody tr")
    ]
    assert "pattern" in params and "flags" in params
    status = browser.execute_async_script(
        "const done = arguments[0];"
        "SE.api('PUT', '/api/v1/evaluators/regex', {name: 'x'}).then(r => done([r.status, r.payload.message]));"
    )
    assert status[0] == 403 and "cannot be changed" in status[1]
    # only the fields a preset has: no language or timeout; its default params run as given
    assert not browser.find_element(By.ID, "language").is_displayed()
    assert not browser.find_element(By.ID, "timeout").is_displayed()
    browser.find_element(By.ID, "test-output").send_keys("2026")
    browser.find_element(By.ID, "run-test").click()
    assert "✓ passed=true, score=1" in wait(browser, lambda d: shown_result(d), "the preset's default run")
    browser.find_element(By.ID, "test-output").clear()
    field = browser.find_element(By.ID, "test-params")
    field.clear()
    field.send_keys('{"pattern": "^\\\\d+$"}')
    browser.find_element(By.ID, "test-output").send_keys("2026")
    browser.find_element(By.ID, "run-test").click()
    result = wait(browser, lambda d: shown_result(d), "the preset's result")
    assert "✓ passed=true, score=1" in result
    browser.save_screenshot(str(ARTIFACTS / "05-preset-read-only.png"))


def test_pages_run_under_the_csp_and_the_token_lives_in_the_session(browser: WebDriver, site: str) -> None:
    browser.get(f"{site}/evaluators")
    wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#presets-table tbody tr"), "the presets table")
    set_token(browser)
    stored = browser.execute_script(
        "return [sessionStorage.getItem(SE.TOKEN_KEY), localStorage.getItem(SE.TOKEN_KEY)]"
    )
    assert stored == [TOKEN, None]
    browser.get(f"{site}/evaluators/regex")
    wait(browser, lambda d: d.find_element(By.ID, "readonly-badge").is_displayed(), "the editor")
    browser.get(f"{site}/dashboard")
    wait(browser, lambda d: d.find_element(By.ID, "updated").text != "—", "the dashboard's first refresh")
    # the policy is in force (an inline script is refused) and the pages themselves broke none of it
    browser.execute_script(
        "const s = document.createElement('script'); s.textContent = 'window.ran = 1'; document.body.append(s)"
    )
    assert browser.execute_script("return window.ran === undefined")
    logs = [entry["message"] for entry in browser.get_log("browser")]
    violations = [m for m in logs if "Content Security Policy" in m]
    assert len(violations) == 1 and "script-src" in violations[0], logs


def events(start: int, n: int) -> list[bytes]:
    now = time.time()
    out = []
    for i in range(start, start + n):
        good = i % 3 != 0
        out.append(
            raw_event(
                id=f"b-{i}",
                model="model-a" if i % 2 else "model-b",
                output="北京" if good else "上海",
                expected="北京",
                timestamp=format_time(now),
            )
        )
    out.append(b"not json %d" % start)  # one dead letter per burst
    return out


def test_dashboard_changes_while_events_flow(
    browser: WebDriver, site: str, broker: EmbeddedBroker, topics: dict[str, str]
) -> None:
    import asyncio

    browser.get(f"{site}/dashboard")
    wait(browser, lambda d: d.find_element(By.ID, "updated").text != "—", "the first refresh")
    assert browser.find_element(By.ID, "total-events").text == "0"
    assert browser.find_element(By.ID, "no-alerts").is_displayed()  # alerts do not exist yet: an empty list

    def total(d: WebDriver) -> int:
        return int(d.find_element(By.ID, "total-events").text)

    asyncio.run(produce(broker.bootstrap, topics["requests"], events(0, 30)))
    wait(browser, lambda d: total(d) == 30, "30 events on the dashboard")
    wait(
        browser,
        lambda d: d.find_elements(By.CSS_SELECTOR, "#score-chart circle"),
        "points in the score chart",
    )
    first = browser.find_element(By.ID, "dead-letters").text
    assert first.startswith("1 (")
    browser.save_screenshot(str(ARTIFACTS / "06-dashboard-30.png"))

    asyncio.run(produce(broker.bootstrap, topics["requests"], events(30, 60)))
    wait(browser, lambda d: total(d) == 90, "90 events on the dashboard")
    wait(
        browser,
        lambda d: d.find_element(By.ID, "dead-letters").text.startswith("2 ("),
        "the second dead letter",
    )
    legend = browser.find_element(By.ID, "score-legend").text
    assert "model-a × qa" in legend and "model-b × qa" in legend
    bars = {
        b.get_attribute("data-name"): int(b.get_attribute("data-value"))
        for b in browser.find_elements(By.CSS_SELECTOR, "#grade-levels-chart rect")
    }
    assert sum(bars.values()) == 90 and set(bars) <= {"excellent", "good", "pass", "fail", "severe_defect"}
    assert (
        browser.find_element(By.ID, "pass-rate").text == f"{60 / 90 * 100:.1f}%"
    )  # 2 of every 3 outputs match
    alert = wait(
        browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#alerts li"), "an alert on the dashboard"
    )[0]
    assert "qa-pass-rate-low" in alert.text and "× qa" in alert.text and "warning" in alert.text
    assert not browser.find_element(By.ID, "no-alerts").is_displayed()
    browser.save_screenshot(str(ARTIFACTS / "07-dashboard-90.png"))

    # drill-down: a point of the score chart opens that window's lowest-scored results
    def click(selector: str) -> None:  # the page redraws every 2 s: find and click in one step
        assert browser.execute_script(
            "const n = document.querySelector(arguments[0]); if (!n) return false;"
            "n.dispatchEvent(new MouseEvent('click', {bubbles: true})); return true;",
            selector,
        ), selector

    def column(selector: str, index: int) -> list[str]:  # one step too: rows may be redrawn between two reads
        return list(
            browser.execute_script(
                "return [...document.querySelectorAll(arguments[0])].map(r => r.children[arguments[1]].textContent)",
                selector,
                index,
            )
        )

    def example_ids(d: WebDriver) -> list[str]:
        return list(
            d.execute_script(
                "return [...document.querySelectorAll('#examples-table tbody tr')].map(r => r.dataset.id)"
            )
        )

    click("#score-chart circle.point")
    ids = wait(browser, example_ids, "the examples of a clicked point")
    assert browser.find_element(By.ID, "examples-panel").is_displayed()
    assert "window from" in browser.find_element(By.ID, "examples-title").text
    assert browser.find_element(By.ID, "examples-note").text.startswith(f"the {len(ids)} lowest-scored")
    scores = [float(v) for v in column("#examples-table tbody tr", 1)]
    assert scores == sorted(scores)  # lowest first
    for example_id in ids:  # every example id opens its result (the stored copy, or the window's example)
        full = httpx.get(f"{site}/api/v1/results/{example_id}", timeout=5)
        assert full.status_code == 200 and full.json()["data"]["id"] == example_id
    browser.save_screenshot(str(ARTIFACTS / "08-drilldown-examples.png"))

    # a result's details: score, grade, each evaluator's score and reason
    click("#examples-table tbody tr")
    wait(browser, lambda d: d.find_element(By.ID, "result-detail").is_displayed(), "the result's details")
    assert browser.find_element(By.ID, "detail-title").text == f"Result {ids[0]}"
    assert "score" in browser.find_element(By.ID, "detail-summary").text
    evaluators = column("#detail-evaluators tbody tr", 0)
    assert evaluators == ["exact_match", "similarity"]
    # the stored copy until the broker has the result (published marks), the window's example after
    source = browser.find_element(By.ID, "detail-source").text
    assert source.startswith(("the full result", "the example kept with the window")), source
    assert "undefined" not in source and "HTTP" not in source, source
    browser.save_screenshot(str(ARTIFACTS / "09-result-detail.png"))

    # the failing tab lists failed results only (a sample), latest first
    click("#examples-kind button[data-kind=failing]")
    wait(
        browser,
        lambda d: "failed results of this window" in d.find_element(By.ID, "examples-note").text,
        "the failing examples",
    )
    passed = column("#examples-table tbody tr", 3)
    assert passed and set(passed) == {"no"}

    # an alert opens its window's examples, its own example ids highlighted; those ids exist. The events may
    # fall in two windows, each with its alert, and the page redraws every 2 s: the alert clicked is the one
    # whose text was read in the same step
    clicked = browser.execute_script(
        "const n = document.querySelector('#alerts li'); if (!n) return null;"
        "n.dispatchEvent(new MouseEvent('click', {bubbles: true})); return n.textContent;"
    )
    assert clicked and "examples: " in clicked, clicked
    shown = set(clicked.rsplit("examples: ", 1)[1].split(", "))
    alerts = httpx.get(f"{site}/api/v1/alerts", timeout=5).json()["data"]
    [alert] = [a for a in alerts if set(a["examples"]) == shown]
    assert 0 < len(alert["examples"]) <= 3
    for example_id in alert["examples"]:
        assert httpx.get(f"{site}/api/v1/results/{example_id}", timeout=5).status_code == 200
    wait(
        browser,
        lambda d: d.find_elements(By.CSS_SELECTOR, "#examples-table tbody tr.highlight"),
        "the alert's examples",
    )
    highlighted = list(
        browser.execute_script(
            "return [...document.querySelectorAll('#examples-table tbody tr.highlight')].map(r => r.dataset.id)"
        )
    )
    assert set(highlighted) <= shown and highlighted
    browser.save_screenshot(str(ARTIFACTS / "10-alert-examples.png"))

    # a model × suite row opens its latest window's examples
    click("#pairs-table tbody tr")
    wait(
        browser,
        lambda d: (
            "window from" in d.find_element(By.ID, "examples-title").text
            and example_ids(d)
            and not d.find_elements(By.CSS_SELECTOR, "#examples-table tbody tr.highlight")
        ),
        "a row's examples",
    )

    # the per-evaluator breakdown, latency and throughput are shown; the time axis has labelled ticks
    assert set(column("#evaluators-table tbody tr", 2)) == {"exact_match", "similarity"}
    assert browser.find_element(By.ID, "throughput").text.endswith("/s")
    assert browser.find_elements(By.CSS_SELECTOR, "#latency-chart circle")
    assert browser.find_elements(By.CSS_SELECTOR, "#score-chart .x-tick")
    assert (
        len(browser.execute_script("return Charts.timeTicks(1800000000, 1800003600)")) >= 5
    )  # an hour: several labels
    assert browser.find_element(By.ID, "consumer-lag").text != "—"  # from the worker's /metrics

    # filters: one model
    from selenium.webdriver.support.ui import Select

    Select(browser.find_element(By.ID, "filter-model")).select_by_value("model-a")
    wait(browser, lambda d: total(d) == 45, "the model filter")
    legend = browser.find_element(By.ID, "score-legend").text
    assert "model-a × qa" in legend and "model-b" not in legend
    assert set(column("#pairs-table tbody tr", 0)) == {"model-a"}
    Select(browser.find_element(By.ID, "filter-range")).select_by_value("900")
    wait(
        browser,
        lambda d: d.find_elements(By.CSS_SELECTOR, "#score-chart circle"),
        "points within the last 15 minutes",
    )
    browser.save_screenshot(str(ARTIFACTS / "11-dashboard-filtered.png"))
    click("#examples-close")
    browser.set_window_size(1280, 4000)  # the whole page: tables and panels below the charts
    wait(browser, lambda d: not d.find_element(By.ID, "examples-panel").is_displayed(), "the examples closed")
    browser.save_screenshot(str(ARTIFACTS / "12-dashboard-whole.png"))


LEVELS = ["excellent", "good", "pass", "fail", "severe_defect"]
LETTERS = ["A+", "A", "A-", "B+", "B", "B-", "C+", "C", "C-", "D", "F"]
#: emoji and pictographs: a page that needs them shows empty boxes where no emoji font is installed
EMOJI = re.compile("[\u2600-\u27bf\U0001f000-\U0001faff\ufe0f]")


@pytest.fixture
def busy_site(
    broker: EmbeddedBroker, start_worker: Callable[..., Any], topics: dict[str, str], tmp_path: Path
) -> str:
    """A worker whose two suites grade on different scales: ``qa`` on levels, ``report`` on letters."""
    config = tmp_path / "suites.yaml"
    similarity = [{"evaluator": "similarity", "params": {"threshold": 0.6}}]
    config.write_text(
        yaml.safe_dump(
            {
                "suites": [
                    {"name": "qa", "match": {"category": ["qa_simple"]}, "evaluators": similarity},
                    {"name": "report", "default": True, "grading": "letters", "evaluators": similarity},
                ]
            }
        )
    )
    # the drill-down examples kept (a suite file without alert rules keeps none unless asked)
    return serve_site(config, broker, start_worker, topics, STREAMEVAL_EXAMPLES="20")


def many_pairs(now: float) -> list[bytes]:
    """12 models × 2 suites, model ``mNN`` with 13 - NN events in each suite: 24 pairs, 180 events."""
    outputs = ["北京", "北京市", "北京城区", "上海"]  # similarity 1 down to 0: several grades on each scale
    out = []
    for m in range(12):
        for suite, category in (("qa", "qa_simple"), ("report", "report")):
            for i in range(13 - m):
                out.append(
                    raw_event(
                        id=f"many-{m}-{suite}-{i}",
                        model=f"m{m:02d}",
                        category=category,
                        output=outputs[(m + i) % len(outputs)],
                        expected="北京",
                        timestamp=format_time(now),
                    )
                )
    return out


def test_dashboard_stays_readable_with_many_pairs_and_scales(
    browser: WebDriver, busy_site: str, broker: EmbeddedBroker, topics: dict[str, str]
) -> None:
    import asyncio

    browser.get(f"{busy_site}/dashboard")
    wait(browser, lambda d: d.find_element(By.ID, "updated").text != "—", "the first refresh")
    sent_at = time.time()
    asyncio.run(produce(broker.bootstrap, topics["requests"], many_pairs(sent_at)))
    wait(
        browser, lambda d: d.find_element(By.ID, "total-events").text == "180", "180 events on the dashboard"
    )

    def legend(element_id: str) -> list[str]:  # read in one step: the page redraws every 2 s
        return list(
            browser.execute_script(
                "return [...document.querySelectorAll(`#${arguments[0]} span[data-series]`)].map(n => n.dataset.series)",
                element_id,
            )
        )

    # the 8 pairs with the most events get a line each, the 16 others share one
    top = {f"m{m:02d} × {suite}" for m in range(4) for suite in ("qa", "report")}
    wait(browser, lambda d: len(legend("score-legend")) == 9, "the score legend's 8 pairs and others")
    assert set(legend("score-legend")) == top | {"others (16 pairs)"}
    assert set(legend("pass-legend")) == top | {"others (16 pairs)"}
    assert 'smaller pairs in "others"' in browser.find_element(By.ID, "score-legend").text
    latency = legend("latency-legend")
    assert len(latency) == 10 and "others (20 pairs) p95" in latency and "m00 × qa p50" in latency
    # the others line folds pairs together: it opens no window's examples
    assert browser.execute_script(
        "return [...document.querySelectorAll('#score-chart circle.point')].every(c => !c.dataset.series.startsWith('others'))"
    )

    # one grade chart per scale, each with only its own grades
    def bars(chart: str) -> dict[str, int]:
        return {
            str(name): int(value)
            for name, value in browser.execute_script(
                "return [...document.querySelectorAll(`#${arguments[0]} rect`)].map(r => [r.dataset.name, r.dataset.value])",
                chart,
            )
        }

    levels, letters, verdict = (
        bars("grade-levels-chart"),
        bars("grade-letters-chart"),
        bars("grade-verdict-chart"),
    )
    assert set(levels) <= set(LEVELS) and sum(levels.values()) == 90 and len(levels) > 1
    assert set(letters) <= set(LETTERS) and sum(letters.values()) == 90 and len(letters) > 1
    assert set(verdict) == {"passed", "failed"} and sum(verdict.values()) == 180
    assert not browser.find_element(By.ID, "grades-other").is_displayed()

    # icons drawn as SVG, no emoji; the favicon is there, so nothing on the page failed to load
    header = browser.find_element(By.TAG_NAME, "header")
    assert len(header.find_elements(By.CSS_SELECTOR, "svg.icon")) == 3
    assert not EMOJI.search(browser.execute_script("return document.body.innerText"))
    icon = browser.execute_script("return document.querySelector('link[rel=icon]').href")
    assert httpx.get(icon, timeout=5).headers["content-type"] == "image/svg+xml"
    assert httpx.get(f"{busy_site}/favicon.ico", timeout=5).status_code == 200
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == [], errors
    browser.save_screenshot(str(ARTIFACTS / "10-dashboard-many-pairs.png"))

    # a notification's link into one window: the filters are set and the window's worst results open
    start = int(sent_at // 60 * 60)
    worst = httpx.get(
        f"{busy_site}/api/v1/stats/examples",
        params={"model": "m00", "suite": "qa", "size": 60, "kind": "worst", "window": start},
        timeout=5,
    ).json()["data"]
    browser.get(f"{busy_site}/dashboard?model=m00&suite=qa&size=60&window={format_time(start)}")
    title = wait(
        browser, lambda d: d.find_element(By.ID, "examples-title").text, "the linked window's examples"
    )
    assert title.startswith("Examples · m00 × qa · 60-second window from")
    assert browser.find_element(By.ID, "filter-model").get_attribute("value") == "m00"
    wait(browser, lambda d: d.find_element(By.ID, "total-events").text == "13", "only m00 × qa counted")
    rows = wait(
        browser,
        lambda d: d.execute_script(
            "return [...document.querySelectorAll('#examples-table tbody tr')].map(r => r.dataset.id)"
        ),
        "the linked window's rows",
    )
    assert rows == [e["id"] for e in worst["examples"]]
