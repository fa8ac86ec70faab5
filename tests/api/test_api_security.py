"""HTTP hardening: security headers everywhere, the read-token option, bad header bytes, the token's
file, newline and minimum length, and pages that need no inline script or style."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis
from aiohttp.test_utils import TestClient, TestServer

from streameval.api import create_web_app, load_api_settings
from streameval.api._pages import WEB_DIR
from streameval.api._security import CSP, Access
from streameval.errors import ConfigError

TOKEN = "header-test-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


async def judge_down() -> None:
    raise ConnectionError("judge secret-name unreachable")


@pytest.fixture
async def open_reads(aredis: aioredis.Redis, prefix: str) -> AsyncIterator[TestClient[Any, Any]]:
    async with TestClient(TestServer(create_web_app(aredis, prefix=prefix, token=TOKEN))) as c:
        yield c


@pytest.mark.parametrize(
    "method,path,status",
    [
        ("GET", "/evaluators", 200),
        ("GET", "/dashboard", 200),
        ("GET", "/static/common.js", 200),
        ("GET", "/api/v1/evaluators", 200),
        ("GET", "/api/v1/openapi.json", 200),
        ("GET", "/health", 200),
        ("GET", "/metrics", 200),
        ("GET", "/nope", 404),
        ("POST", "/api/v1/evaluators", 401),
        ("GET", "/", 302),
    ],
)
async def test_every_answer_has_the_security_headers(
    open_reads: TestClient[Any, Any], method: str, path: str, status: int
) -> None:
    resp = await open_reads.request(method, path, allow_redirects=False)
    assert resp.status == status
    assert resp.headers["Content-Security-Policy"] == CSP
    assert "frame-ancestors 'none'" in CSP and "script-src 'self'" in CSP and "unsafe-inline" not in CSP
    assert resp.headers["X-Content-Type-Options"] == "nosniff"
    assert resp.headers["X-Frame-Options"] == "DENY"
    assert resp.headers["Referrer-Policy"] == "no-referrer"
    assert resp.headers["Server"] == "streameval"  # no Python or aiohttp version


async def test_bad_header_bytes_are_401_not_500(open_reads: TestClient[Any, Any]) -> None:
    server = open_reads.server
    reader, writer = await asyncio.open_connection(server.host, server.port)
    writer.write(
        b"POST /api/v1/evaluators HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \xff\xfe\r\n"
        b"Content-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}"
    )
    await writer.drain()
    head = (await reader.read(-1)).split(b"\r\n\r\n", 1)[0]
    writer.close()
    assert head.startswith(b"HTTP/1.1 401"), head
    assert b"Content-Security-Policy" in head


async def test_reads_can_require_the_token(aredis: aioredis.Redis, prefix: str) -> None:
    def app(access: Access) -> TestServer:
        return TestServer(
            create_web_app(
                aredis, prefix=prefix, token=TOKEN, access=access, checks=[("judge:secret-name", judge_down)]
            )
        )

    async with TestClient(app(Access(reads=True))) as c:
        for path in ("/api/v1/evaluators", "/api/v1/openapi.json", "/api/v1/stats/pairs"):
            resp = await c.get(path)
            assert resp.status == 401, path
            assert resp.headers["WWW-Authenticate"].startswith("Bearer")
        assert (await c.get("/api/v1/evaluators", headers=AUTH)).status == 200
        assert (await c.get("/api/v1/evaluators", headers={"Authorization": "Bearer wrong"})).status == 401
        assert (await c.get("/health")).status == 200 and (await c.get("/metrics")).status == 200
        ready = await c.get("/ready")  # probes keep working; the details need the token
        assert ready.status == 503 and await ready.json() == {"status": "not_ready"}
        detailed = await (await c.get("/ready", headers=AUTH)).json()
        assert "judge:secret-name" in detailed["checks"]
        assert (await c.get("/evaluators")).status == 200  # the page holds no data
    async with TestClient(app(Access(health=True, metrics=True))) as c:
        assert (await c.get("/health")).status == 401 and (await c.get("/metrics")).status == 401
        assert (await c.get("/health", headers=AUTH)).status == 200
        assert (await c.get("/metrics", headers=AUTH)).status == 200
        assert (await c.get("/api/v1/evaluators")).status == 200  # reads stay open unless asked
        assert "checks" in await (await c.get("/ready")).json()


def test_token_from_a_file_or_with_a_newline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("STREAMEVAL_API_TOKEN", TOKEN + "\n")  # what `$(cat secret)` style values carry
    assert load_api_settings().token() == TOKEN
    monkeypatch.delenv("STREAMEVAL_API_TOKEN")
    (tmp_path / "token").write_text(TOKEN + "\n")
    monkeypatch.setenv("STREAMEVAL_API_TOKEN_FILE", str(tmp_path / "token"))
    assert load_api_settings().token() == TOKEN


@pytest.mark.parametrize(
    "env,path,message",
    [
        ({"STREAMEVAL_API_TOKEN": "short"}, "STREAMEVAL_API_TOKEN", "at least 16"),
        (
            {"STREAMEVAL_API_TOKEN": "x" * 20, "STREAMEVAL_API_TOKEN_MIN_LENGTH": "32"},
            "STREAMEVAL_API_TOKEN",
            "at least 32",
        ),
        ({"STREAMEVAL_API_READ_AUTH": "1"}, "STREAMEVAL_API_READ_AUTH", "none is set"),
        ({"STREAMEVAL_API_TOKEN_FILE": "/nonexistent/token"}, "STREAMEVAL_API_TOKEN_FILE", "cannot read"),
    ],
)
def test_bad_token_settings_fail_at_start(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], path: str, message: str
) -> None:
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(ConfigError) as info:
        load_api_settings()
    assert [issue.path for issue in info.value.issues] == [path] and message in str(info.value)
    assert "short" not in str(info.value).replace("shortest", "")  # the token itself is never shown


def test_pages_need_no_inline_script_or_style() -> None:
    for page in WEB_DIR.glob("*.html"):
        html = page.read_text(encoding="utf-8")
        assert not re.search(r"<script(?![^>]*\bsrc=)", html), page.name  # every script is a file
        assert not re.search(r"\son[a-z]+\s*=", html), page.name  # no inline event handlers
        assert "style=" not in html and "<style" not in html, page.name
        assert "javascript:" not in html, page.name
    for script in WEB_DIR.glob("*.js"):
        js = script.read_text(encoding="utf-8")
        assert "localStorage.getItem" not in js and "localStorage.setItem" not in js, script.name
        assert not re.search(r"\{\s*style:", js), script.name  # style attributes are blocked by the CSP
        assert "eval(" not in js and "new Function" not in js, script.name
