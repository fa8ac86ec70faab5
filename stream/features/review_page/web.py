"""The review page in the web app: ``/review`` and the ``/api/v1/review/`` endpoints (docs/feedback.md).

Built by the composition root only when the page is on (:func:`review_feature`): a worker whose suite file
keeps review items, or ``streameval api`` with ``STREAMEVAL_REVIEW_PAGE=true``. Every endpoint names its
caller by the token it carries (:class:`~streameval.api.Identities`): the annotator of a label is that
name, never a field of the form. A label is a feedback v1 document sent to the feedback topic (and
acknowledged by the broker) before the item is marked labelled, so the join, the agreement figures and
``--labels`` take it like a label from any other tool.
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol, cast

import orjson
from aiohttp import web
from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ...api import IDENTITIES_KEY, WebFeature
from ...api._bodies import bad_request
from ...api._errors import BadRequest, Conflict, NotFound, Unavailable
from ...api._pages import WEB_DIR
from ...kafka_security import KafkaSecurity, bootstrap_hosts
from ...keyspace import Client
from ...models import FEEDBACK_SCALES, Feedback, format_time
from ...settings import Settings
from ..review import REASONS, ReviewConfig
from ._items import EXPORT_FORMATS, export_lines
from ._openapi import PATHS
from ._store import Order, ReviewPageStore

__all__ = [
    "PREFIX",
    "FeedbackSender",
    "LabelBody",
    "Sender",
    "open_review_feature",
    "review_feature",
    "review_page_on",
]

PREFIX = "/api/v1/review/"
_LIST_LIMIT = 200
_SEND_TIMEOUT_S = 15.0
_STORE: web.AppKey[ReviewPageStore] = web.AppKey("review_store", ReviewPageStore)
_WHY = {
    "gone": (NotFound, "the item is no longer kept (review.keep, review.keep_ttl_s)"),
    "labelled": (Conflict, "you labelled this item already"),
    "skipped": (Conflict, "you skipped this item"),
    "complete": (Conflict, "this item has all the labels it needs (review.reviewers)"),
    "taken": (Conflict, "someone else has this item open"),
}


class LabelBody(BaseModel):
    """POST /api/v1/review/items/{key}/label: the form. Scores are on the item's scale (its form)."""

    model_config = ConfigDict(extra="forbid", strict=True)
    passed: bool | None = None
    score: float | None = Field(default=None, ge=0.0, le=100.0)
    criteria: dict[str, float] = Field(default_factory=dict, max_length=64)
    expected: str | None = Field(default=None, max_length=65536, description="a corrected expected answer")
    comment: str | None = Field(default=None, max_length=4096)


class Sender(Protocol):
    """Where labels go: :class:`FeedbackSender` (the feedback topic), or a test's recorder."""

    async def send(self, key: bytes, value: bytes) -> None: ...

    async def close(self) -> None: ...


_SENDER: web.AppKey[Sender] = web.AppKey("review_sender", Sender)


class FeedbackSender:
    """Sends labels to the feedback topic and waits for the broker's acknowledgement (acks=all). The
    producer starts at the first label, so a server whose broker is down still serves the page."""

    def __init__(self, bootstrap: str, topic: str, security: KafkaSecurity) -> None:
        self.bootstrap, self.topic, self.security = bootstrap, topic, security
        self._producer: AIOKafkaProducer | None = None
        self._lock = asyncio.Lock()

    async def send(self, key: bytes, value: bytes) -> None:
        try:
            async with asyncio.timeout(_SEND_TIMEOUT_S):
                async with self._lock:
                    if self._producer is None:
                        producer = AIOKafkaProducer(
                            bootstrap_servers=bootstrap_hosts(self.bootstrap),
                            acks="all",
                            request_timeout_ms=int(_SEND_TIMEOUT_S * 1000),
                            **self.security.aiokafka_kwargs(),
                        )
                        try:
                            await producer.start()
                        except BaseException:
                            await producer.stop()
                            raise
                        self._producer = producer
                await self._producer.send_and_wait(self.topic, value=value, key=key)
        except (KafkaError, TimeoutError, OSError) as exc:
            raise Unavailable(
                f"the label was not sent: the broker at {self.bootstrap} did not take it "
                f"({type(exc).__name__}); try again"
            ) from exc

    async def close(self) -> None:
        if self._producer is not None:
            await self._producer.stop()
            self._producer = None


def _ok(data: Any) -> web.Response:
    return web.Response(body=orjson.dumps({"code": 200, "data": data}), content_type="application/json")


def _who(request: web.Request) -> str:
    return request.app[IDENTITIES_KEY].require(request)


def _query(request: web.Request, name: str) -> str | None:
    value = request.query.get(name, "")
    return value or None


async def _page(request: web.Request) -> web.FileResponse:
    return web.FileResponse(WEB_DIR / "review.html", headers={"Cache-Control": "no-cache"})


async def _items(request: web.Request) -> web.Response:
    who = _who(request)
    order = request.query.get("order", "newest")
    reason = _query(request, "reason")
    if order not in ("newest", "important"):
        raise BadRequest("order is newest or important")
    if reason is not None and reason not in REASONS:
        raise BadRequest(f"reason is one of {', '.join(REASONS)}")
    store = request.app[_STORE]
    every = await store.summaries()
    queue = await store.queue(
        who,
        model=_query(request, "model"),
        suite=_query(request, "suite"),
        reason=reason,
        order=cast(Order, order),
        among=every,
    )
    now_open = sum(1 for s in queue if s.open_to(who))
    return _ok(
        {
            "annotator": who,
            "total": len(queue),
            "open": now_open,  # the caller may open these now; the rest are open by someone else
            "held_by_others": len(queue) - now_open,
            "items": [s.as_json(who) for s in queue[:_LIST_LIMIT]],
            "models": sorted({s.model for s in every}),
            "suites": sorted({s.suite for s in every}),
            "reasons": list(REASONS),
        }
    )


async def _reserved(store: ReviewPageStore, key: str, who: str) -> int:
    outcome, until = await store.reserve(key, who)
    if outcome != "ok":
        error, message = _WHY[outcome]
        raise error(message, {"reason": outcome})
    assert until is not None
    return until


def _trying(request: web.Request) -> bool:
    value = request.query.get("try", "false")
    if value not in ("true", "false"):
        raise BadRequest("try is true or false")
    return value == "true"


async def _reserve(request: web.Request) -> web.Response:
    """Open an item. With ``?try=true`` an item the caller cannot open (someone else has it, complete,
    labelled or skipped by them, gone) is an answer, ``{"reserved": false, "reason": ...}``, not an HTTP
    error: people racing for items is normal, and the page leaves the browser's console clean."""
    who, key = _who(request), request.match_info["key"]
    trying = _trying(request)
    store = request.app[_STORE]
    outcome, until = await store.reserve(key, who)
    doc = await store.document(key) if outcome == "ok" else None
    if outcome == "ok" and doc is None:
        await store.release(key, who)
        outcome = "gone"
    if outcome != "ok":
        if trying:
            return _ok({"annotator": who, "reserved": False, "reason": outcome, "why": _WHY[outcome][1]})
        error, message = _WHY[outcome]
        raise error(message, {"reason": outcome})
    assert until is not None
    return _ok({"annotator": who, "reserved": True, "lease_until": format_time(until / 1000), "item": doc})


async def _release(request: web.Request) -> web.Response:
    who = _who(request)
    await request.app[_STORE].release(request.match_info["key"], who)
    return _ok({"released": True})


async def _skip(request: web.Request) -> web.Response:
    who = _who(request)
    if not await request.app[_STORE].skip(request.match_info["key"], who):
        raise NotFound(_WHY["gone"][1], {"reason": "gone"})
    return _ok({"skipped": True})


async def _label(request: web.Request) -> web.Response:
    who, key = _who(request), request.match_info["key"]
    try:
        body = LabelBody.model_validate(orjson.loads(await request.read()))
    except orjson.JSONDecodeError:
        raise BadRequest("the body is not JSON") from None
    except ValidationError as exc:
        raise bad_request(exc) from None
    store = request.app[_STORE]
    doc = await store.document(key)
    if doc is None:
        raise NotFound(_WHY["gone"][1], {"reason": "gone"})
    await _reserved(store, key, who)  # still yours (or a place is free): two people never fill one place
    form, item = doc["form"], doc["item"]
    unknown = sorted(set(body.criteria) - {c["name"] for c in form["criteria"]})
    if unknown:
        raise BadRequest(f"criteria not in this item's rubric: {', '.join(unknown)}")
    try:
        label = Feedback(
            id=item["id"],
            model=item["model"],
            suite=item["suite"],
            passed=body.passed,
            score=body.score,
            scale=form["scale"] if form["scale"] in FEEDBACK_SCALES else "0-1",
            criteria=body.criteria,
            annotator=who,
            comment=body.comment or None,
            expected=body.expected or None,
            timestamp=format_time(store.clock()),
        )
    except ValidationError as exc:
        raise bad_request(exc) from None
    encoded = label.model_dump_json(exclude_none=True).encode()
    await request.app[_SENDER].send(
        item["id"].encode(), encoded
    )  # on the broker before it counts as labelled
    marked = await store.labelled(key, who, encoded)
    return _ok({"label": orjson.loads(encoded), "marked": marked >= 0})


async def _progress(request: web.Request) -> web.Response:
    who = _who(request)
    progress = await request.app[_STORE].progress()
    return _ok({"annotator": who, **progress.as_json()})


async def _export(request: web.Request) -> web.Response:
    _who(request)
    kind = request.query.get("format", "items")
    if kind not in EXPORT_FORMATS:
        raise BadRequest(f"format is one of {', '.join(EXPORT_FORMATS)}")
    docs = await request.app[_STORE].labelled_documents(
        model=_query(request, "model"), suite=_query(request, "suite")
    )
    lines = export_lines(docs, kind)
    return web.Response(body=b"".join(line + b"\n" for line in lines), content_type="application/x-ndjson")


def review_feature(store: ReviewPageStore, sender: Sender) -> WebFeature:
    """The page and its endpoints on ``store``, sending labels with ``sender`` (closed with the app)."""

    routes = [
        web.get("/review", _page),
        web.get(PREFIX + "items", _items),
        web.post(PREFIX + "items/{key}/reserve", _reserve),
        web.post(PREFIX + "items/{key}/release", _release),
        web.post(PREFIX + "items/{key}/skip", _skip),
        web.post(PREFIX + "items/{key}/label", _label),
        web.get(PREFIX + "progress", _progress),
        web.get(PREFIX + "export", _export),
    ]
    return WebFeature(routes, PREFIX, PATHS, sender.close, state={_STORE: store, _SENDER: sender})


def review_page_on(setting: bool | None, review: ReviewConfig | None, *, worker: bool) -> bool:
    """``STREAMEVAL_REVIEW_PAGE``: true or false as set; unset: a worker serves the page when its suite
    file keeps review items, ``streameval api`` does not."""
    if setting is not None:
        return setting
    return worker and review is not None and review.keep > 0


def open_review_feature(client: Client, settings: Settings, review: ReviewConfig | None) -> WebFeature:
    """The page on ``client`` (keys under the settings' prefix), sending labels to the feedback topic with
    the broker settings and security of the worker. Nothing connects to the broker before the first label."""
    store = ReviewPageStore(client, settings.redis_prefix, review)
    sender = FeedbackSender(
        settings.kafka_bootstrap_servers, settings.topic_feedback, KafkaSecurity.from_settings(settings)
    )
    return review_feature(store, sender)
