"""Local receivers that check each provider's documented request, over real HTTP; the webhook's signature
is checked with the recipe of docs/notify.md; ``streameval notify test`` prints the answer."""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from _notify_helpers import Receiver, alert
from aiohttp import web

import streameval.features.notify as notify
from streameval.cli import main
from streameval.features.notify import ChannelConfig, ChannelWorker, Links

LINKS = Links("https://evals.example.com")


def verify(secret: bytes, header: str, body: bytes, tolerance_s: int = 300) -> bool:
    """docs/notify.md's verification recipe, as a receiver would run it."""
    parts = dict(item.split("=", 1) for item in header.split(","))
    timestamp, signature = parts.get("t", ""), parts.get("v1", "")
    if not timestamp.isdigit() or abs(time.time() - int(timestamp)) > tolerance_s:
        return False
    expected = hmac.new(secret, timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, signature)


def pagerduty(request: web.Request, doc: Any) -> web.Response:
    # Events API v2: 400 "Invalid event" unless the event is well formed
    problems = []
    if request.path != "/v2/enqueue" or request.headers.get("Content-Type") != "application/json":
        problems.append("path or content type")
    if doc.get("routing_key") != "R0UTING" or len(doc.get("dedup_key", "")) > 255:
        problems.append("routing_key or dedup_key")
    if doc.get("event_action") == "trigger":
        payload = doc.get("payload", {})
        if not payload.get("summary") or len(payload["summary"]) > 1024 or not payload.get("source"):
            problems.append("summary or source")
        if payload.get("severity") not in ("critical", "error", "warning", "info"):
            problems.append("severity")
        if not all({"href", "text"} <= set(link) for link in doc.get("links", [])):
            problems.append("links")
    elif doc.get("event_action") != "resolve" or not doc.get("dedup_key"):
        problems.append("event_action")
    if problems:
        return web.json_response({"status": "invalid event", "errors": problems}, status=400)
    return web.json_response(
        {"status": "success", "message": "Event processed", "dedup_key": doc["dedup_key"]}, status=202
    )


def opsgenie(request: web.Request, doc: Any) -> web.Response:
    if request.headers.get("Authorization") != "GenieKey genie-key":
        return web.json_response({"message": "Key format is not valid!"}, status=422)
    if request.path == "/v2/alerts":
        ok = 0 < len(doc.get("message", "")) <= 130 and 0 < len(doc.get("alias", "")) <= 512
        ok = ok and doc.get("priority") in ("P1", "P2", "P3", "P4", "P5")
        ok = ok and all(isinstance(v, str) for v in doc.get("details", {}).values())
    else:  # close by alias
        ok = (
            request.path == "/v2/alerts/streameval:low-mean:60:gpt-4o:qa/close"
            and request.query.get("identifierType") == "alias"
        )
    if not ok:
        return web.json_response({"message": "Request body is not processable"}, status=422)
    return web.json_response(
        {"result": "Request will be processed", "took": 0.01, "requestId": "r1"}, status=202
    )


def slack(request: web.Request, doc: Any) -> web.Response:
    blocks = doc.get("blocks", [])
    ok = isinstance(doc.get("text"), str) and 0 < len(blocks) <= 50
    ok = ok and all(b["type"] in ("header", "section", "context") for b in blocks)
    ok = ok and all(len(f["text"]) <= 2000 for b in blocks for f in b.get("fields", []))
    return web.Response(text="ok" if ok else "invalid_blocks", status=200 if ok else 400)


def webhook(request: web.Request, doc: Any, body: bytes) -> web.Response:
    if not verify(b"s3cret", request.headers.get("X-Streameval-Signature", ""), body):
        return web.Response(status=401, text="bad signature")
    return web.Response(status=204)


PROVIDERS: dict[str, tuple[Callable[..., web.Response], dict[str, str]]] = {
    "pagerduty": (pagerduty, {"routing_key": "R0UTING", "path": "/v2/enqueue"}),
    "opsgenie": (opsgenie, {"api_key": "genie-key", "path": ""}),
    "slack": (slack, {"path": "/services/T0/B0/X"}),
    "webhook": (webhook, {"signing_secret": "s3cret", "path": "/hook"}),
}


async def provider(kind: str) -> tuple[Receiver, ChannelConfig]:
    check, fields = PROVIDERS[kind]

    async def script(request: web.Request, body: bytes) -> web.StreamResponse:
        doc = orjson.loads(body)
        return check(request, doc, body) if kind == "webhook" else check(request, doc)

    server = await Receiver(script).start()
    extra = {k: v for k, v in fields.items() if k != "path"}
    cfg = ChannelConfig.model_validate(
        {"name": kind, "kind": kind, "url": server.url + fields["path"], **extra}
    )
    return server, cfg


@pytest.mark.parametrize("kind", sorted(PROVIDERS))
@pytest.mark.parametrize("status", ["firing", "resolved"])
async def test_each_provider_accepts_what_we_send(kind: str, status: str) -> None:
    server, cfg = await provider(kind)
    try:
        async with httpx.AsyncClient() as http:
            outcome = await ChannelWorker(cfg, http, LINKS).deliver(alert(status=status))
        assert outcome.delivered and outcome.attempts == 1, outcome.answer
    finally:
        await server.stop()


async def test_a_wrong_signing_secret_is_refused_and_final() -> None:
    server, cfg = await provider("webhook")
    try:
        wrong = cfg.model_copy(
            update={"signing_secret": cfg.signing_secret and type(cfg.signing_secret)("other")}
        )
        async with httpx.AsyncClient() as http:
            outcome = await ChannelWorker(wrong, http, LINKS).deliver(alert())
        assert not outcome.delivered and outcome.answer == "HTTP 401: bad signature" and outcome.attempts == 1
    finally:
        await server.stop()


@pytest.mark.parametrize(
    ("kind", "answer"),
    [("pagerduty", '(pagerduty): HTTP 202: {"status": "success"'), ("slack", "(slack): HTTP 200: ok")],
)
async def test_notify_test_prints_the_answer(
    kind: str, answer: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server, cfg = await provider(kind)
    try:
        secret = {"pagerduty": "routing_key: R0UTING", "slack": ""}[kind]
        config = tmp_path / "suites.yaml"
        config.write_text(
            "suites: [{name: qa, default: true, evaluators: [{evaluator: exact_match}]}]\n"
            f"notify:\n  - name: {kind}\n    kind: {kind}\n    url: {cfg.endpoint()}\n    {secret}\n"
        )
        code = await _run_cli(["notify", "test", "--config", str(config), "--channel", kind])
        out = capsys.readouterr().out
        assert code == 0 and answer in out, out
        [(_, _, body)] = server.requests
        assert b"TEST [FIRING] streameval-test" in body  # clearly marked
        assert await _run_cli(["notify", "test", "--config", str(config), "--channel", "nope"]) == 2
    finally:
        await server.stop()


async def _run_cli(argv: list[str]) -> int:
    """``streameval ARGV`` in a thread (it runs its own event loop) while this loop serves the receiver."""
    import asyncio

    return await asyncio.to_thread(main, argv)


def test_the_public_names() -> None:
    assert set(notify.__all__) == {
        "KINDS",
        "SIGNATURE_HEADER",
        "ChannelConfig",
        "ChannelKind",
        "ChannelWorker",
        "HttpRequest",
        "Links",
        "Marks",
        "Notifier",
        "Outcome",
        "ResolveStep",
        "build_request",
        "incident_key",
        "notify_issues",
        "sign",
    }
    assert all(hasattr(notify, name) for name in notify.__all__)
