"""The review page in a real headless Chromium (Debian's chromium + chromedriver, driven by selenium), served
by a real worker's web server on the real broker and Redis.

Items the worker sends for review appear on the page, are labelled with the keyboard only, the labels
arrive on the feedback topic (annotator: the token's name) and the agreement figures change; two browsers
never hold the same item; a page without a named token cannot submit; hostile text in outputs and reasons
renders as text. Screenshots go to test-artifacts/browser/ (docs/review-page.png is taken from one).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import yaml
from _support import raw_event

from streameval.embedded import EmbeddedBroker
from streameval.judges.sim import demo_judges
from streameval.kafka_io import Record, collect, ensure_topics, produce
from streameval.models import format_time

pytestmark = [pytest.mark.integration, pytest.mark.browser]

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts" / "browser"
CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")
TOKENS = {"ana": "ana-token-0123456789", "bo": "bo-token-0123456789"}
ADMIN = "admin-token-0123456789"
WAIT_S = 60
HOSTILE_OUTPUT = '"<img src=x onerror=window.pwned=1>"'
HOSTILE_EXPECTED = "<script>window.pwned=2</script>"

if CHROMIUM is None or CHROMEDRIVER is None:
    pytest.skip(
        "browser tests need Debian's chromium and chromedriver: apt-get install -y chromium chromium-driver",
        allow_module_level=True,
    )

from selenium import webdriver  # noqa: E402  (only once the browser is known to exist)
from selenium.common.exceptions import StaleElementReferenceException, TimeoutException  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.action_chains import ActionChains  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.remote.webdriver import WebDriver  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def browsers() -> Iterator[Callable[[], WebDriver]]:
    started: list[WebDriver] = []

    def start() -> WebDriver:
        options = webdriver.ChromeOptions()
        options.binary_location = str(CHROMIUM)
        for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1400,1800"):
            options.add_argument(arg)
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        driver = webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)), options=options)
        started.append(driver)
        return driver

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    try:
        yield start
    finally:
        for driver in started:
            driver.quit()


class Site:
    def __init__(self, base: str, feedback: str, bootstrap: str, requests: str, env: dict[str, str]) -> None:
        self.base, self.feedback, self.bootstrap, self.requests = base, feedback, bootstrap, requests
        self.env = env  # Redis and its prefix, for the command line

    def send(self, events: list[bytes]) -> None:
        asyncio.run(produce(self.bootstrap, self.requests, events))

    def api(self, method: str, path: str, token: str | None = None, **kw: Any) -> httpx.Response:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.request(method, self.base + path, headers=headers, timeout=10, **kw)

    def labels(self, n: int) -> list[dict[str, Any]]:
        records: list[Record] = asyncio.run(
            collect(self.bootstrap, [self.feedback], until=lambda r: len(r) >= n, timeout=WAIT_S)
        )
        return [orjson.loads(r.value) for r in records]


@pytest.fixture
def site(
    broker: EmbeddedBroker,
    start_worker: Callable[..., Any],
    topics: dict[str, str],
    tmp_path: Path,
    redis_url: str,
    prefix: str,
) -> Iterator[Site]:
    """A worker with the review page on, judged by the demo's three SIMULATED judges: every result goes to
    review (margin 1) and is kept for the page; events with a ``metadata.conversation_id`` are turns of a
    conversation too, whose result goes to review as well."""
    judge_port = free_port()
    sim = subprocess.Popen(
        [sys.executable, "-m", "streameval", "judge-sim", "--port", str(judge_port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + WAIT_S
    while True:
        try:
            with socket.create_connection(("127.0.0.1", judge_port), timeout=0.5):
                break
        except OSError:
            assert time.monotonic() < deadline and sim.poll() is None, "the simulated judge did not start"
            time.sleep(0.1)  # polling the judge's start with a deadline
    config = tmp_path / "suites.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "judges": demo_judges(f"http://127.0.0.1:{judge_port}"),
                "suites": [
                    {
                        "name": "qa",
                        "default": True,
                        "judge": {"consistency_rate": 0},
                        "evaluators": [
                            {"evaluator": "exact_match"},
                            {
                                "evaluator": "json_schema",
                                "gate": True,
                                "params": {"schema": {"type": "object"}},
                            },
                        ],
                    }
                ],
                "review": {"rate_per_min": 1000, "margin": 1.0, "control_rate": 0.0, "lease_s": 60},
                "sessions": [
                    {
                        "name": "conv",
                        "key": "metadata.conversation_id",
                        "end": "metadata.last",
                        "evaluators": [{"evaluator": "turn_scores"}],
                    }
                ],
            }
        )
    )
    tokens = tmp_path / "reviewers"
    tokens.write_text("# the review page's people\n" + "".join(f"{n}:{t}\n" for n, t in TOKENS.items()))
    feedback = topics["requests"].replace(".requests", ".feedback")
    asyncio.run(ensure_topics(broker.bootstrap, [*topics.values(), feedback], partitions=2))
    port = free_port()
    start_worker(
        config,
        STREAMEVAL_WEB_PORT=str(port),
        STREAMEVAL_API_TOKEN=ADMIN,
        STREAMEVAL_REVIEW_TOKENS_FILE=str(tokens),
        STREAMEVAL_TOPIC_FEEDBACK=feedback,
        STREAMEVAL_WINDOWS="2,60",
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
    env = {"REDIS_URL": redis_url, "STREAMEVAL_REDIS_PREFIX": prefix}
    try:
        yield Site(base, feedback, broker.bootstrap, topics["requests"], env)
    finally:
        sim.terminate()
        sim.wait(timeout=10)


def wait(driver: WebDriver, check: Callable[[WebDriver], Any], what: str) -> Any:
    try:
        # an element the page re-renders between finding and reading it is read again at the next poll
        return WebDriverWait(
            driver, WAIT_S, poll_frequency=0.1, ignored_exceptions=(StaleElementReferenceException,)
        ).until(check)
    except TimeoutException:
        said = driver.execute_script("return document.getElementById('message').textContent")
        logs = [e["message"] for e in driver.get_log("browser")]
        raise AssertionError(f"waiting for {what}; the page says {said!r}; console: {logs}") from None


def good(i: int) -> bytes:
    return raw_event(
        id=f"r-{i}",
        model="m",
        category="qa_simple",
        input=f"question {i}",
        output='{"capital": "北京"}',
        expected='{"capital": "北京"}' if i % 2 else '{"capital": "上海"}',
        references=[f"reference {i}"],
    )


def hostile() -> bytes:
    return raw_event(
        id="r-hostile",
        model="m",
        category="qa_simple",
        input="<b>bold?</b>",
        output=HOSTILE_OUTPUT,
        expected=HOSTILE_EXPECTED,
    )


def open_page(driver: WebDriver, site: Site, token: str | None) -> None:
    driver.get(f"{site.base}/review")
    wait(driver, lambda d: d.find_elements(By.ID, "api-token"), "the header")
    if token is not None:
        field = driver.find_element(By.ID, "api-token")
        field.send_keys(token)
        driver.execute_script("arguments[0].dispatchEvent(new Event('change'))", field)
        field.send_keys(Keys.ESCAPE)  # leave the field (Esc): from here on the keys are the page's


def sign_in_with_enter(driver: WebDriver, site: Site, token: str) -> None:
    """As people do: the token typed in the header's field, then Enter (no Esc)."""
    driver.get(f"{site.base}/review")
    wait(driver, lambda d: d.find_elements(By.ID, "api-token"), "the header")
    driver.find_element(By.ID, "api-token").send_keys(token + Keys.ENTER)


def console_errors(driver: WebDriver) -> list[str]:
    """The console's errors since the last call (a failed resource load, e.g. a 4xx, is one)."""
    return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def no_periodic_refresh(driver: WebDriver) -> None:
    """The pages opened from here on run no timer (the review page refreshes every 5 s): what they show
    came from the action itself."""
    driver.execute_cdp_cmd(
        "Page.addScriptToEvaluateOnNewDocument", {"source": "window.setInterval = () => 0;"}
    )


def current(driver: WebDriver) -> str | None:
    return driver.execute_script(
        "const n = document.querySelector('#queue li.current'); return n && n.dataset.key"
    )


def item_id(driver: WebDriver) -> str:
    title: str = driver.find_element(By.ID, "item-title").text
    return title.split(" · ")[0]


def keys(driver: WebDriver, *strokes: str) -> None:
    """Key strokes sent to whatever has the focus (the page's body unless a field was focused by a key)."""
    chain = ActionChains(driver)
    for stroke in strokes:
        chain.send_keys(stroke)
    chain.perform()


def human(site: Site, suite: str = "qa") -> dict[str, Any]:
    """All-time agreement with people of m × ``suite`` (empty before any label joined)."""
    reply = site.api("GET", f"/api/v1/stats/human?model=m&suite={suite}").json()
    return dict(reply["data"]["agreement"] or {})


def test_label_with_the_keyboard_only_and_the_labels_join(
    site: Site, browsers: Callable[[], WebDriver]
) -> None:
    site.send([good(i) for i in range(3)])
    driver = browsers()
    open_page(driver, site, TOKENS["ana"])
    wait(
        driver, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#queue li")) == 3, "three items in the queue"
    )
    assert driver.find_element(By.ID, "annotator").text == "ana"
    wait(driver, lambda d: d.find_element(By.ID, "item").is_displayed(), "the first item opened")
    assert driver.find_element(By.ID, "item-why").text.startswith("near_threshold")
    judges = [r.text for r in driver.find_elements(By.CSS_SELECTOR, "#item-judges tbody tr")]
    assert [j.split()[0] for j in judges] == ["sim-deepseek", "sim-glm", "sim-minimax"] and all(
        "/10" in j for j in judges
    )
    criteria = [
        i.get_attribute("data-criterion") for i in driver.find_elements(By.CSS_SELECTOR, "#criteria input")
    ]
    assert criteria == ["accuracy", "conciseness", "clarity"]  # the qa_simple rubric
    assert (
        driver.find_element(By.ID, "form-scale").get_attribute("textContent")
        == "scale 1-5 · rubric qa_simple"
    )
    before = human(site)

    # 1: fail, score 2, a corrected expected answer and a comment, submitted with Ctrl+Enter from the comment
    first = item_id(driver)
    keys(driver, "f", "2", "e")
    keys(driver, "北京市", Keys.ESCAPE, "c", "wrong key")
    driver.save_screenshot(str(ARTIFACTS / "review-01-form.png"))  # docs/review-page.png
    ActionChains(driver).key_down(Keys.CONTROL).send_keys(Keys.ENTER).key_up(Keys.CONTROL).perform()
    wait(
        driver,
        lambda d: item_id(d) != first and "labelled" in d.find_element(By.ID, "message").text,
        "the next item",
    )
    driver.save_screenshot(str(ARTIFACTS / "review-02-labelled.png"))
    # 2: pass, 5 and per-criterion scores by Tab, submitted with Enter
    second = item_id(driver)
    keys(driver, "p", "5", "r", "4", Keys.TAB, "5", Keys.ESCAPE, Keys.ENTER)
    wait(driver, lambda d: item_id(d) != second, "the third item")
    # 3: skipped: never offered to ana again
    third = item_id(driver)
    keys(driver, "s")
    wait(driver, lambda d: not d.find_element(By.ID, "item").is_displayed(), "an empty queue")
    assert driver.find_elements(By.CSS_SELECTOR, "#queue li") == []

    labels = site.labels(2)
    assert [(x["id"], x["annotator"]) for x in labels] == [(first, "ana"), (second, "ana")]
    assert labels[0]["passed"] is False and labels[0]["score"] == 2 and labels[0]["scale"] == "1-5"
    assert labels[0]["expected"] == "北京市" and labels[0]["comment"] == "wrong key"
    assert labels[1]["passed"] is True and labels[1]["criteria"] == {"accuracy": 4, "conciseness": 5}
    assert all(x["model"] == "m" and x["suite"] == "qa" for x in labels)

    # the worker joins them: the agreement figures change
    deadline = time.monotonic() + WAIT_S
    while (human(site).get("labels") or 0) < 2:
        assert time.monotonic() < deadline, f"the labels did not join: {human(site)}"
        time.sleep(0.2)  # polling the join with a deadline
    after = human(site)
    assert (before.get("labels") or 0) == 0 and after["labels"] == 2 and after["raters"]["result"]["n"] == 2

    # progress on the page and the API; the skipped item is still open to bo
    row = wait(
        driver,
        lambda d: d.find_element(By.CSS_SELECTOR, "#progress-annotators tr[data-annotator=ana]").text.split(),
        "progress",
    )
    assert row == ["ana", "2", "1", "0"]
    queued = site.api("GET", "/api/v1/review/items", TOKENS["bo"]).json()["data"]["items"]
    assert [i["id"] for i in queued] == [third]

    # export: the API and the command line give the same lines
    exported = site.api("GET", "/api/v1/review/export?format=items", TOKENS["bo"])
    assert exported.status_code == 200 and exported.headers["content-type"].startswith("application/x-ndjson")
    lines = [orjson.loads(line) for line in exported.content.splitlines()]
    assert sorted(x["label"]["id"] for x in lines) == sorted([first, second])
    assert next(x for x in lines if x["label"]["id"] == first)["expected"] == "北京市"
    assert all(x["event"]["id"] == x["result"]["id"] == x["label"]["id"] for x in lines)
    cli = subprocess.run(
        [sys.executable, "-m", "streameval", "review", "export", "--format", "labels"],
        env={**os.environ, **site.env},
        capture_output=True,
        timeout=60,
        check=True,
    )
    api = site.api("GET", "/api/v1/review/export?format=labels", TOKENS["ana"]).content
    assert cli.stdout == api and sorted(orjson.loads(x)["id"] for x in api.splitlines()) == sorted(
        [first, second]
    )
    assert b"2 labels exported" in cli.stderr


def test_hostile_text_renders_as_text(site: Site, browsers: Callable[[], WebDriver]) -> None:
    site.send([hostile()])
    driver = browsers()
    open_page(driver, site, TOKENS["bo"])
    wait(driver, lambda d: d.find_element(By.ID, "item").is_displayed(), "the hostile item")
    assert driver.find_element(By.ID, "item-output").text == HOSTILE_OUTPUT
    assert driver.find_element(By.ID, "item-expected").text == HOSTILE_EXPECTED
    assert driver.find_element(By.ID, "item-input").text == "<b>bold?</b>"
    reasons = [r.text for r in driver.find_elements(By.CSS_SELECTOR, "#item-evaluators tbody td:last-child")]
    assert any("<img src=x onerror=window.pwned=1>" in r for r in reasons), reasons
    assert "json_schema" in driver.find_element(By.ID, "item-gates").text
    assert driver.find_elements(By.CSS_SELECTOR, "#item img, #item script, #item b, #queue img") == []
    assert driver.execute_script("return window.pwned === undefined")
    logs = [e["message"] for e in driver.get_log("browser")]
    assert not [m for m in logs if "Content Security Policy" in m], logs  # the page broke none of it
    driver.save_screenshot(str(ARTIFACTS / "review-03-hostile.png"))


def test_two_browsers_never_hold_the_same_item(site: Site, browsers: Callable[[], WebDriver]) -> None:
    site.send([good(i) for i in range(10, 14)])
    ana, bo = browsers(), browsers()
    open_page(ana, site, TOKENS["ana"])
    open_page(bo, site, TOKENS["bo"])
    for driver in (ana, bo):
        wait(driver, lambda d: current(d) is not None, "an item opened")
    seen: list[tuple[str | None, str | None]] = []
    for _ in range(3):  # both move on: never the same item at once
        a, b = current(ana), current(bo)
        seen.append((a, b))
        assert a != b
        holders = [
            i for i in site.api("GET", "/api/v1/review/items", ADMIN).json()["data"]["items"] if i["reserved"]
        ]
        assert all(i["reserved"] <= 1 for i in holders)
        keys(ana, "j")
        wait(
            ana,
            lambda d, a=a: current(d) != a or "no further" in d.find_element(By.ID, "message").text,
            "ana moved",
        )
    # bo clicking ana's item is refused: someone else has it open
    held = current(ana)
    assert held is not None and held != current(bo)
    bo.execute_script("document.querySelector(`#queue li[data-key='${arguments[0]}']`).click()", held)
    wait(
        bo,
        lambda d: "someone else has this item open" in d.find_element(By.ID, "message").text,
        "the refusal",
    )
    assert current(bo) != held
    result = site.api("POST", f"/api/v1/review/items/{held}/label", TOKENS["bo"], json={"passed": True})
    assert result.status_code == 409 and result.json()["data"]["reason"] == "taken"
    ana.get("about:blank")  # ana leaves the page: the item is free at once, not at the lease's end
    deadline = time.monotonic() + WAIT_S
    while current(bo) != held:
        assert time.monotonic() < deadline, "the item ana left stayed reserved"
        bo.execute_script("document.querySelector(`#queue li[data-key='${arguments[0]}']`).click()", held)
        time.sleep(0.2)  # polling the release with a deadline
    bo.save_screenshot(str(ARTIFACTS / "review-04-two-people.png"))
    # a race on j: the item bo would open next is taken (by the API's named token) just before bo moves on
    listed = bo.execute_script("return [...document.querySelectorAll('#queue li')].map((n) => n.dataset.key)")
    after = [k for k in listed[listed.index(held) + 1 :] if k != current(ana)]
    if after:
        site.api("POST", f"/api/v1/review/items/{after[0]}/reserve", ADMIN)
        keys(bo, "j")
        wait(bo, lambda d: current(d) != held, "bo moved on")
        assert current(bo) != after[0]
    # people racing for items is normal: neither console has an error (a 409 is logged as one)
    assert console_errors(ana) == [] and console_errors(bo) == []


def test_a_page_without_a_named_token_cannot_submit(site: Site, browsers: Callable[[], WebDriver]) -> None:
    site.send([good(20)])
    driver = browsers()
    open_page(driver, site, None)
    wait(driver, lambda d: "Type your token" in d.find_element(By.ID, "message").text, "the token request")
    assert driver.find_elements(By.CSS_SELECTOR, "#queue li") == []
    deadline = time.monotonic() + WAIT_S
    while not (items := site.api("GET", "/api/v1/review/items", ADMIN).json()["data"]["items"]):
        assert time.monotonic() < deadline, "the item was not kept"
        time.sleep(0.1)  # polling the worker with a deadline
    key = items[0]["key"]
    for token in ("", "wrong-token-0123456789"):
        driver.execute_script("sessionStorage.setItem(SE.TOKEN_KEY, arguments[0])", token)
        status = driver.execute_async_script(
            "const done = arguments[arguments.length - 1];"
            "SE.api('POST', `/api/v1/review/items/${arguments[0]}/label`, {passed: true}).then(r => done(r.status));",
            key,
        )
        assert status == 401
    listed = site.api("GET", "/api/v1/review/items", TOKENS["ana"]).json()["data"]["items"]
    assert listed[0]["labels"] == 0  # nothing was labelled
    assert site.api("GET", "/api/v1/review/progress").status_code == 401


def test_signed_in_with_enter_the_keys_are_the_pages(site: Site, browsers: Callable[[], WebDriver]) -> None:
    """After the token and Enter the focus leaves the token field: `p`, `4`, Enter label the item (they are
    not typed into the token, whose Enter would sign in again with a wrong one)."""
    site.send([good(i) for i in range(30, 32)])
    driver = browsers()
    sign_in_with_enter(driver, site, TOKENS["ana"])
    wait(driver, lambda d: d.find_element(By.ID, "item").is_displayed(), "the first item opened")
    first = item_id(driver)
    keys(driver, "p", "4", Keys.ENTER)
    wait(driver, lambda d: "labelled" in d.find_element(By.ID, "message").text, "the label sent")
    [label] = site.labels(1)
    assert (label["id"], label["passed"], label["score"], label["annotator"]) == (first, True, 4, "ana")
    assert driver.execute_script("return sessionStorage.getItem(SE.TOKEN_KEY)") == TOKENS["ana"]
    assert console_errors(driver) == []


def test_progress_changes_at_once_and_held_items_count_apart(
    site: Site, browsers: Callable[[], WebDriver]
) -> None:
    """With no periodic refresh, the submitter's own figures are right as soon as the next item is open
    (holding 1, not 0), and the queue counts the items someone else holds apart."""
    site.send([good(i) for i in range(40, 44)])
    deadline = time.monotonic() + WAIT_S
    while len(items := site.api("GET", "/api/v1/review/items", ADMIN).json()["data"]["items"]) < 4:
        assert time.monotonic() < deadline, "the items were not kept"
        time.sleep(0.1)  # polling the worker with a deadline
    taken = items[-1]["key"]  # the oldest: opened last by ana's page
    assert site.api("POST", f"/api/v1/review/items/{taken}/reserve", ADMIN).status_code == 200
    driver = browsers()
    no_periodic_refresh(driver)
    sign_in_with_enter(driver, site, TOKENS["ana"])
    wait(driver, lambda d: d.find_element(By.ID, "item").is_displayed(), "the first item opened")

    def mine(d: WebDriver) -> list[str]:
        return list(
            d.find_element(By.CSS_SELECTOR, "#progress-annotators tr[data-annotator=ana]").text.split()
        )

    assert wait(
        driver,
        lambda d: d.find_elements(By.CSS_SELECTOR, "#progress-annotators tr[data-annotator=ana]"),
        "ana's row",
    )
    assert mine(driver) == ["ana", "0", "0", "1"]
    assert driver.find_element(By.ID, "queue-count").text == "3 to label · 1 open by someone else"
    keys(driver, "f", "2", Keys.ENTER)
    wait(driver, lambda d: "labelled" in d.find_element(By.ID, "message").text, "the label sent")
    assert mine(driver) == ["ana", "1", "0", "1"]  # labelled one, holding the next
    assert driver.find_element(By.ID, "queue-count").text == "2 to label · 1 open by someone else"
    assert console_errors(driver) == []


def test_a_conversation_is_reviewed_with_its_thread(site: Site, browsers: Callable[[], WebDriver]) -> None:
    """A closed conversation's result is a review item: the page shows its thread in place of the output,
    and its label carries the session result's id."""
    site.send(
        [
            raw_event(
                id=f"t-{i}",
                model="m",
                category="qa_simple",
                input=f"turn question {i}",
                output=f'{{"answer": "reply {i}"}}',
                metadata={"conversation_id": "c1", "last": i == 1},
                timestamp=format_time(time.time() - 10 + i),  # the thread's order is the turns' time
            )
            for i in range(2)
        ]
    )
    deadline = time.monotonic() + WAIT_S
    while not [
        i
        for i in site.api("GET", "/api/v1/review/items", ADMIN).json()["data"]["items"]
        if i["suite"] == "conv"
    ]:
        assert time.monotonic() < deadline, "the conversation's item was not kept"
        time.sleep(0.2)  # polling the session closer with a deadline
    driver = browsers()
    sign_in_with_enter(driver, site, TOKENS["bo"])
    wait(driver, lambda d: d.find_element(By.ID, "item").is_displayed(), "an item opened")
    wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "#queue li b"), "the queue")
    driver.execute_script(
        "[...document.querySelectorAll('#queue li')].find((n) => n.textContent.includes('conv:c1#0')).click()"
    )
    wait(driver, lambda d: item_id(d) == "conv:c1#0", "the conversation's item")
    assert driver.find_element(By.ID, "item-output-title").text.lower() == "thread"
    assert not driver.find_element(By.ID, "item-output").is_displayed()
    turns = [li.text for li in driver.find_elements(By.CSS_SELECTOR, "#item-thread li")]
    assert turns == [
        "user turn question 0",
        'assistant {"answer": "reply 0"}',
        "user turn question 1",
        'assistant {"answer": "reply 1"}',
    ]
    driver.save_screenshot(str(ARTIFACTS / "review-05-thread.png"))
    keys(driver, "p", "4", Keys.ENTER)
    wait(driver, lambda d: "labelled conv:c1#0" in d.find_element(By.ID, "message").text, "the label sent")
    [label] = site.labels(1)
    assert (label["id"], label["suite"], label["passed"], label["annotator"]) == (
        "conv:c1#0",
        "conv",
        True,
        "bo",
    )
    assert console_errors(driver) == []
    # the worker joins it to the session result's verdicts, like an event's label
    deadline = time.monotonic() + WAIT_S
    while (human(site, "conv").get("labels") or 0) < 1:
        assert time.monotonic() < deadline, f"the label did not join: {human(site, 'conv')}"
        time.sleep(0.2)  # polling the join with a deadline
    assert human(site, "conv")["raters"]["result"]["n"] == 1
