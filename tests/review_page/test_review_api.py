"""The review endpoints on the real Redis (unique prefix): who may call them (named tokens), the label a
submit produces, the OpenAPI document, the settings of the named tokens and the suite file's review keys.
Labels go to a recording sender here; tests/integration/test_review_page.py sends them to the real broker."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import redis.asyncio as aioredis
from _feedback_helpers import result
from aiohttp.test_utils import TestClient, TestServer

from streameval.api import Identities, create_web_app, load_api_settings
from streameval.api._errors import Unavailable
from streameval.config import parse_config_text
from streameval.errors import ConfigError
from streameval.features.review import ReviewConfig, ReviewQueue
from streameval.features.review_page import ReviewPageStore, item_key
from streameval.features.review_page.web import FeedbackSender, review_feature, review_page_on
from streameval.kafka_security import KafkaSecurity
from streameval.keyspace import Keys

ADMIN = "admin-token-0123456789"
NAMED = Identities((("api", ADMIN), ("ana", "ana-token-0123456789"), ("bo", "bo-token-0123456789")))


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


ANA, BO = auth("ana-token-0123456789"), auth("bo-token-0123456789")


class Recorder:
    def __init__(self) -> None:
        self.sent: list[tuple[bytes, bytes]] = []
        self.down = False
        self.closed = False

    async def send(self, key: bytes, value: bytes) -> None:
        if self.down:
            raise Unavailable("the broker did not take it")
        self.sent.append((key, value))

    async def close(self) -> None:
        self.closed = True


async def keep(
    aredis: aioredis.Redis, prefix: str, ids: list[str], category: str | None = "qa_simple"
) -> None:
    config = ReviewConfig(rate_per_min=100, control_rate=0.0)
    store = ReviewPageStore(aredis, prefix, config)
    keys = Keys(prefix)
    results = [result(i, {"alpha": 9.0, "beta": 1.0}) for i in ids]
    results = [
        r.model_copy(update={"judge": r.judge.model_copy(update={"category": category})}) if r.judge else r
        for r in results
    ]
    for r in results:
        assert r.judge is not None
    fresh = [
        (keys.pair_id("m", "qa"), r, orjson.dumps({"id": r.id, "model": "m", "output": "o"})) for r in results
    ]
    items = await ReviewQueue(aredis, keys, config).select(fresh, 1795255231.0)
    await store.keep(items, fresh)


@pytest.fixture
async def served(aredis: aioredis.Redis, prefix: str) -> AsyncIterator[tuple[TestClient[Any, Any], Recorder]]:
    recorder = Recorder()
    feature = review_feature(ReviewPageStore(aredis, prefix), recorder)
    app = create_web_app(aredis, prefix=prefix, token=ADMIN, identities=NAMED, features=[feature])
    async with TestClient(TestServer(app)) as client:
        yield client, recorder
    assert recorder.closed  # the producer is closed with the app


async def test_every_review_route_is_in_the_openapi_document(
    served: tuple[TestClient[Any, Any], Recorder],
) -> None:
    client, _ = served
    doc = await (await client.get("/api/v1/openapi.json")).json()
    routes = {
        (r.method.lower(), r.resource.canonical) for r in client.app.router.routes() if r.resource is not None
    }  # type: ignore[union-attr]
    documented = {(m, p) for p, ops in doc["paths"].items() for m in ops if m != "parameters"}
    served_api = {
        (m, p) for m, p in routes if p.startswith("/api/v1/") and "openapi" not in p and m != "head"
    }
    assert served_api == documented
    assert {p for _, p in served_api if p.startswith("/api/v1/review/")} == {
        "/api/v1/review/items",
        "/api/v1/review/items/{key}/reserve",
        "/api/v1/review/items/{key}/release",
        "/api/v1/review/items/{key}/skip",
        "/api/v1/review/items/{key}/label",
        "/api/v1/review/progress",
        "/api/v1/review/export",
    }


async def test_without_the_feature_there_is_no_page(aredis: aioredis.Redis, prefix: str) -> None:
    async with TestClient(TestServer(create_web_app(aredis, prefix=prefix, token=ADMIN))) as client:
        assert (await client.get("/review")).status == 404
        assert (await client.get("/api/v1/review/items", headers=auth(ADMIN))).status == 404
        doc = await (await client.get("/api/v1/openapi.json")).json()
        assert not [p for p in doc["paths"] if "review" in p]


@pytest.mark.parametrize(
    ("headers", "status", "name"),
    [
        ({}, 401, None),
        (auth("not-a-token-0123456789"), 401, None),
        ({"Authorization": "Basic " + "ana-token-0123456789"}, 401, None),
        (ANA, 200, "ana"),
        (auth(ADMIN), 200, "api"),  # STREAMEVAL_API_TOKEN_NAME
    ],
)
async def test_the_caller_is_named_by_the_token(
    served: tuple[TestClient[Any, Any], Recorder], headers: dict[str, str], status: int, name: str | None
) -> None:
    client, _ = served
    resp = await client.get("/api/v1/review/items", headers=headers)
    assert resp.status == status
    if name is not None:
        assert (await resp.json())["data"]["annotator"] == name


async def test_a_reviewers_token_opens_the_review_endpoints_only(
    served: tuple[TestClient[Any, Any], Recorder],
) -> None:
    client, _ = served
    resp = await client.post("/api/v1/evaluators", json={"name": "x"}, headers=ANA)
    assert resp.status == 401  # writes elsewhere need STREAMEVAL_API_TOKEN itself
    assert (await client.get("/review")).status == 200  # the page holds no data


async def test_no_named_token_configured_is_403(aredis: aioredis.Redis, prefix: str) -> None:
    feature = review_feature(ReviewPageStore(aredis, prefix), Recorder())
    async with TestClient(
        TestServer(create_web_app(aredis, prefix=prefix, token=None, features=[feature]))
    ) as c:
        resp = await c.get("/api/v1/review/items", headers=ANA)
        assert resp.status == 403 and "STREAMEVAL_REVIEW_TOKENS_FILE" in (await resp.json())["message"]


async def test_a_submit_sends_a_feedback_label_named_by_the_token(
    served: tuple[TestClient[Any, Any], Recorder], aredis: aioredis.Redis, prefix: str
) -> None:
    client, recorder = served
    await keep(aredis, prefix, ["e1"])
    key = item_key("m", "qa", "e1")
    opened = await (await client.post(f"/api/v1/review/items/{key}/reserve", headers=ANA)).json()
    assert opened["data"]["item"]["item"]["id"] == "e1" and opened["data"]["item"]["form"]["scale"] == "0-10"
    taken = await client.post(f"/api/v1/review/items/{key}/label", json={"passed": True}, headers=BO)
    assert taken.status == 409 and (await taken.json())["data"]["reason"] == "taken"
    for body, message in [
        ({"passed": True, "criteria": {"style": 3}}, "criteria not in this item's rubric: style"),
        ({"score": 11}, "outside the scale 0-10"),
        ({"passed": True, "annotator": "someone"}, "annotator"),  # never a field of the form
        ({}, "a label needs passed and/or score"),
    ]:
        resp = await client.post(f"/api/v1/review/items/{key}/label", json=body, headers=ANA)
        assert resp.status == 400 and message in (await resp.json())["message"], body
    assert recorder.sent == []
    body = {
        "passed": False,
        "score": 3,
        "criteria": {"accuracy": 2},
        "expected": "北京市",
        "comment": "<b>x</b>",
    }
    recorder.down = True  # the broker does not take it: nothing is marked, the person may submit again
    assert (await client.post(f"/api/v1/review/items/{key}/label", json=body, headers=ANA)).status == 503
    recorder.down = False
    resp = await client.post(f"/api/v1/review/items/{key}/label", json=body, headers=ANA)
    assert resp.status == 200
    [(sent_key, value)] = recorder.sent
    label = orjson.loads(value)
    assert sent_key == b"e1" and label["annotator"] == "ana" and label["id"] == "e1"
    assert {k: label[k] for k in body} == body and label["scale"] == "0-10"
    assert label["model"] == "m" and label["suite"] == "qa" and label["timestamp"]
    again = await client.post(f"/api/v1/review/items/{key}/label", json=body, headers=ANA)
    assert again.status == 409 and (await again.json())["data"]["reason"] == "labelled"
    progress = (await (await client.get("/api/v1/review/progress", headers=BO)).json())["data"]
    assert progress["annotator"] == "bo"
    assert progress["annotators"] == [{"annotator": "ana", "labelled": 1, "skipped": 0, "holding": 0}]
    exported = await (await client.get("/api/v1/review/export?format=labels", headers=BO)).read()
    assert [orjson.loads(line) for line in exported.splitlines()] == [label]


async def test_a_race_for_an_item_is_an_answer_when_trying(
    served: tuple[TestClient[Any, Any], Recorder], aredis: aioredis.Redis, prefix: str
) -> None:
    """``?try=true``: an item the caller cannot open answers 200 ``reserved: false`` and why (the page uses
    it: the browser logs every 4xx as a console error); without it the answers are 409 / 404 as before.
    The queue counts the items others hold apart."""
    client, _ = served
    await keep(aredis, prefix, ["e1", "e2"])
    key = item_key("m", "qa", "e1")
    mine = await (await client.post(f"/api/v1/review/items/{key}/reserve?try=true", headers=ANA)).json()
    assert mine["data"]["reserved"] is True and mine["data"]["item"]["item"]["id"] == "e1"
    resp = await client.post(f"/api/v1/review/items/{key}/reserve?try=true", headers=BO)
    data = (await resp.json())["data"]
    assert resp.status == 200 and data["reserved"] is False and data["reason"] == "taken"
    assert data["why"] == "someone else has this item open" and "item" not in data
    assert (await client.post(f"/api/v1/review/items/{key}/reserve", headers=BO)).status == 409
    resp = await client.post("/api/v1/review/items/0000/reserve?try=true", headers=BO)
    assert resp.status == 200 and (await resp.json())["data"]["reason"] == "gone"
    assert (await client.post(f"/api/v1/review/items/{key}/reserve?try=yes", headers=BO)).status == 400
    queue = (await (await client.get("/api/v1/review/items", headers=BO)).json())["data"]
    assert (queue["total"], queue["open"], queue["held_by_others"]) == (2, 1, 1)
    queue = (await (await client.get("/api/v1/review/items", headers=ANA)).json())["data"]
    assert (queue["total"], queue["open"], queue["held_by_others"]) == (2, 2, 0)


async def test_bad_queries_and_gone_items(served: tuple[TestClient[Any, Any], Recorder]) -> None:
    client, _ = served
    assert (await client.get("/api/v1/review/items?order=random", headers=ANA)).status == 400
    assert (await client.get("/api/v1/review/items?reason=bored", headers=ANA)).status == 400
    assert (await client.get("/api/v1/review/export?format=csv", headers=ANA)).status == 400
    resp = await client.post("/api/v1/review/items/0000/reserve", headers=ANA)
    assert resp.status == 404 and (await resp.json())["data"]["reason"] == "gone"
    assert (
        await client.post("/api/v1/review/items/0000/label", json={"passed": True}, headers=ANA)
    ).status == 404
    assert (await client.post("/api/v1/review/items/0000/skip", headers=ANA)).status == 404


def test_review_page_is_on_only_when_asked_for() -> None:
    kept, none = ReviewConfig(), ReviewConfig(keep=0)
    assert review_page_on(None, kept, worker=True) and not review_page_on(None, kept, worker=False)
    assert not review_page_on(None, none, worker=True) and not review_page_on(None, None, worker=True)
    assert review_page_on(True, None, worker=False) and not review_page_on(False, kept, worker=True)


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        ("ana:ana-token-0123456789\nbo bo:bo-token-0123456789\n", "line 2"),
        ("ana:short\n", "at least 16"),
        ("ana:ana-token-0123456789\nana:other-token-0123456789\n", "named twice"),
        ("ana:ana-token-0123456789\nbo:ana-token-0123456789\n", "another name's token"),
        ("api:api-token-0123456789\n", "named twice"),  # the API token's own name
    ],
)
def test_bad_reviewer_tokens_stop_the_start_naming_the_line(tmp_path: Path, lines: str, message: str) -> None:
    path = tmp_path / "reviewers"
    path.write_text(lines)
    with pytest.raises(ConfigError) as failed:
        load_api_settings(review_tokens_file=str(path), api_token=ADMIN)
    assert message in str(failed.value) and "STREAMEVAL_REVIEW_TOKENS_FILE line" in str(failed.value)


def test_reviewer_tokens_name_people(tmp_path: Path) -> None:
    path = tmp_path / "reviewers"
    path.write_text("# people\n\nana:ana-token-0123456789\n bo : bo-token-0123456789 \n")
    api = load_api_settings(review_tokens_file=str(path), api_token=ADMIN, api_token_name="lead")
    assert api.identities().tokens == (
        ("lead", ADMIN),
        ("ana", "ana-token-0123456789"),
        ("bo", "bo-token-0123456789"),
    )
    assert load_api_settings().identities().tokens == ()


@pytest.mark.parametrize(
    ("review", "path"),
    [
        ({"reviewers": 0}, "review.reviewers"),
        ({"keep": -1}, "review.keep"),
        ({"lease_s": 1}, "review.lease_s"),
        ({"keep_ttl_s": 10}, "review.keep_ttl_s"),
    ],
)
def test_bad_review_keys_fail_with_their_path(review: dict[str, Any], path: str) -> None:
    text = orjson.dumps(
        {
            "suites": [{"name": "qa", "default": True, "evaluators": [{"evaluator": "exact_match"}]}],
            "review": review,
        }
    ).decode()
    with pytest.raises(ConfigError) as failed:
        parse_config_text(text, file="suites.yaml")
    assert path in str(failed.value)


async def test_a_label_the_broker_does_not_take_is_unavailable() -> None:
    with socket.socket() as sock:  # a loopback port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    sender = FeedbackSender(f"127.0.0.1:{port}", "t.evals.feedback", KafkaSecurity())
    with pytest.raises(Unavailable, match="the label was not sent"):
        await sender.send(b"e1", b'{"id": "e1", "passed": true}')
    await sender.close()


@pytest.mark.parametrize(
    "path",
    ["/api/v1/review/../evaluators", "/api/v1/review/%2e%2e/evaluators", "/api/v1/review/%2E%2E/evaluators"],
)
async def test_the_review_prefix_opens_no_other_write(
    served: tuple[TestClient[Any, Any], Recorder], path: str
) -> None:
    client, _ = served
    resp = await client.post(path, json={"name": "x", "type": "code"}, headers=ANA)
    assert resp.status in (401, 404), await resp.text()
    listed = await (await client.get("/api/v1/evaluators", headers=auth(ADMIN))).json()
    assert not [e for e in listed["data"] if e["name"] == "x"]
