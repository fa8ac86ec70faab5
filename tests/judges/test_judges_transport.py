"""The judges' default HTTP path (aiohttp under the httpx interface) over real loopback HTTP, and the
coalesced judge cache. docs/judges.md "Performance"."""

from __future__ import annotations

import asyncio
import gzip
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import aiohttp
import httpx
import orjson
import pytest
import redis.asyncio as aioredis
from _judges_helpers import event, judge
from aiohttp import web
from redis import exceptions as redis_errors

from streameval.judges import JudgeCache, JudgeClient, JudgeError, JudgeHub, build_rubric
from streameval.judges._cache import CachedAnswer
from streameval.judges._errors import map_httpx_error
from streameval.judges._transport import AIOHTTP_ERROR_MAP, AiohttpTransport, to_httpx_error
from streameval.judges.sim import start_judge_sim

ANSWER = orjson.dumps(
    {"scores": {"accuracy": 5, "conciseness": 5, "clarity": 5}, "overall_score": 5, "reasoning": "r"}
).decode()
OPENAI_BODY = {
    "choices": [{"message": {"content": ANSWER}}],
    "usage": {"prompt_tokens": 7, "completion_tokens": 3},
}

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


async def _serve(handler: Handler) -> tuple[web.AppRunner, str]:
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handler)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.2)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return runner, f"http://127.0.0.1:{runner.addresses[0][1]}"


@pytest.fixture
async def server() -> AsyncIterator[Callable[[Handler], Awaitable[str]]]:
    runners: list[web.AppRunner] = []

    async def start(handler: Handler) -> str:
        runner, url = await _serve(handler)
        runners.append(runner)
        return url

    yield start
    for runner in runners:
        await runner.cleanup()


async def _ask(url: str, count: int = 1, **cfg: Any) -> list[Any]:
    hub = JudgeHub([judge("j", url, weight=1, **cfg)])
    await hub.start()
    try:
        [j] = hub.panel(None)
        return list(
            await asyncio.gather(
                *(
                    hub.ask(
                        j,
                        build_rubric(event(id=f"e{n}", output=f"Paris {n}"), "qa_simple", "1-5", blind=True),
                    )
                    for n in range(count)
                )
            )
        )
    finally:
        await hub.close()


# -- the error boundary ------------------------------------------------------------------------------------

AIOHTTP_EXCEPTIONS = sorted(
    (
        obj
        for name in aiohttp.__all__
        if isinstance(obj := getattr(aiohttp, name), type) and issubclass(obj, aiohttp.ClientError)
    ),
    key=lambda cls: cls.__name__,
)


@pytest.mark.parametrize("cls", AIOHTTP_EXCEPTIONS, ids=lambda c: c.__name__)
def test_every_aiohttp_client_error_is_listed_and_becomes_a_mapped_httpx_error(cls: type[Exception]) -> None:
    assert cls in {aio for aio, _ in AIOHTTP_ERROR_MAP}, f"aiohttp.{cls.__name__} has no explicit entry"
    request = httpx.Request("POST", "http://127.0.0.1:1/v1/chat/completions")
    exc = cls.__new__(cls)  # an instance without the class's constructor arguments
    as_httpx = to_httpx_error(exc, request)
    assert isinstance(as_httpx, httpx.HTTPError | httpx.InvalidURL)
    mapped = map_httpx_error(as_httpx, "j")
    assert isinstance(mapped, JudgeError) and type(mapped) is not JudgeError


@pytest.mark.parametrize(
    ("cls", "expected"),
    [
        (aiohttp.ConnectionTimeoutError, httpx.ConnectTimeout),
        (aiohttp.SocketTimeoutError, httpx.ReadTimeout),
        (aiohttp.ServerDisconnectedError, httpx.RemoteProtocolError),
        (aiohttp.ClientConnectorError, httpx.ConnectError),
        (aiohttp.ClientPayloadError, httpx.RemoteProtocolError),
        (ConnectionResetError, httpx.NetworkError),
    ],
)
def test_aiohttp_errors_become_the_httpx_error_of_the_same_kind(
    cls: type[Exception], expected: type[Exception]
) -> None:
    as_httpx = to_httpx_error(cls.__new__(cls), httpx.Request("GET", "http://x"))
    assert type(as_httpx) is expected


def test_other_exceptions_are_not_converted() -> None:
    assert to_httpx_error(KeyError("x"), httpx.Request("GET", "http://x")) is None


# -- concurrency -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("concurrency", [64, 128])
async def test_max_concurrency_requests_are_really_in_flight_at_once(server, concurrency: int) -> None:  # type: ignore[no-untyped-def]
    barrier = asyncio.Barrier(concurrency)  # answers only once `concurrency` requests are in the server
    peers: set[Any] = set()

    async def handle(request: web.Request) -> web.Response:
        peers.add(request.transport.get_extra_info("peername") if request.transport else None)
        await asyncio.wait_for(barrier.wait(), timeout=10)
        return web.json_response(OPENAI_BODY)

    url = await server(handle)
    verdicts = await _ask(url, concurrency, max_concurrency=concurrency, timeout_s=15, attempts=1)
    assert all(v.status == "ok" for v in verdicts)
    assert len(peers) == concurrency  # one connection each


async def test_never_more_than_max_concurrency_in_flight_and_connections_are_reused(server) -> None:  # type: ignore[no-untyped-def]
    state = {"now": 0, "peak": 0}
    peers: set[Any] = set()

    async def handle(request: web.Request) -> web.Response:
        peers.add(request.transport.get_extra_info("peername") if request.transport else None)
        state["now"] += 1
        state["peak"] = max(state["peak"], state["now"])
        await asyncio.sleep(0.02)
        state["now"] -= 1
        return web.json_response(OPENAI_BODY)

    url = await server(handle)
    verdicts = await _ask(url, 60, max_concurrency=6)
    assert all(v.status == "ok" for v in verdicts)
    assert state["peak"] == 6
    assert len(peers) <= 6  # 60 requests over at most 6 kept-alive connections


# -- what goes over the wire -------------------------------------------------------------------------------


async def test_request_line_headers_and_body(server) -> None:  # type: ignore[no-untyped-def]
    seen: list[tuple[str, str, dict[str, str], bytes]] = []

    async def handle(request: web.Request) -> web.Response:
        seen.append((request.method, request.path_qs, dict(request.headers), await request.read()))
        return web.json_response(OPENAI_BODY)

    url = await server(handle)
    cfg = judge("j", url, weight=1, api_key_env="JUDGE_KEY")
    client = JudgeClient(cfg, environ={"JUDGE_KEY": "sk-secret"})
    await client.start()
    try:
        completion = await client.complete("SYS", "USER")
    finally:
        await client.close()
    [(method, path, headers, body)] = seen
    assert (completion.text, completion.prompt_tokens, completion.completion_tokens) == (ANSWER, 7, 3)
    assert (method, path) == ("POST", "/v1/chat/completions")
    assert headers["Host"] == url.removeprefix("http://")
    assert headers["Content-Type"] == "application/json" and int(headers["Content-Length"]) == len(body)
    assert headers["Authorization"] == "Bearer sk-secret" and headers["User-Agent"].startswith("streameval/")
    assert "gzip" in headers["Accept-Encoding"]
    assert b"sk-secret" not in body
    assert orjson.loads(body)["messages"] == [
        {"role": "system", "content": "SYS"},
        {"role": "user", "content": "USER"},
    ]


async def test_header_injection_is_refused_as_a_request_error() -> None:
    async with start_judge_sim() as url:
        cfg = judge("j", url, weight=1, api_key_env="K", attempts=1)
        client = JudgeClient(cfg, environ={"K": "abc\r\nX-Evil: 1"})
        await client.start()
        try:
            with pytest.raises(JudgeError) as caught:
                await client.complete("SYS", "USER")
        finally:
            await client.close()
    assert caught.value.code == "judge_request" and "abc" not in str(caught.value)


async def test_gzip_answers_are_decoded(server) -> None:  # type: ignore[no-untyped-def]
    async def handle(request: web.Request) -> web.Response:
        return web.Response(
            body=gzip.compress(orjson.dumps(OPENAI_BODY)),
            headers={"Content-Encoding": "gzip", "Content-Type": "application/json"},
        )

    [verdict] = await _ask(await server(handle))
    assert verdict.status == "ok" and verdict.score == 10.0


async def test_redirects_are_not_followed(server) -> None:  # type: ignore[no-untyped-def]
    calls: list[str] = []

    async def handle(request: web.Request) -> web.Response:
        calls.append(request.path)
        raise web.HTTPTemporaryRedirect("/elsewhere")

    [verdict] = await _ask(await server(handle), attempts=1)
    assert (
        verdict.status == "error"
        and verdict.error == "judge_http_error"
        and "HTTP 307" in (verdict.reason or "")
    )
    assert calls == ["/v1/chat/completions"]


async def test_server_hanging_up_mid_answer_is_unavailable_and_retried(server) -> None:  # type: ignore[no-untyped-def]
    calls: list[int] = []

    async def handle(request: web.Request) -> web.StreamResponse:
        calls.append(1)
        response = web.StreamResponse(headers={"Content-Length": "1000", "Content-Type": "application/json"})
        await response.prepare(request)
        await response.write(b'{"choices": [')
        assert request.transport is not None
        request.transport.close()  # 13 of the 1,000 bytes promised
        return response

    [verdict] = await _ask(await server(handle), attempts=2)
    assert verdict.status == "error" and verdict.error == "judge_unavailable" and len(calls) == 2


async def test_slow_answer_times_out(server) -> None:  # type: ignore[no-untyped-def]
    async def handle(request: web.Request) -> web.Response:
        await asyncio.sleep(3)
        return web.json_response(OPENAI_BODY)

    [verdict] = await _ask(await server(handle), timeout_s=0.2, attempts=1)
    assert verdict.status == "error" and verdict.error == "judge_timeout"


@pytest.mark.parametrize("bypass", [False, True])
async def test_proxy_from_the_environment(monkeypatch: pytest.MonkeyPatch, bypass: bool) -> None:
    """HTTP_PROXY is used as httpx's default client uses it; NO_PROXY hosts are reached directly."""
    proxied: list[bytes] = []

    async def proxy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            int(line.split(b":")[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length")
        )
        await reader.readexactly(length)
        proxied.append(head.split(b"\r\n")[0])
        body = orjson.dumps(OPENAI_BODY)
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
            % (len(body), body)
        )
        await writer.drain()
        writer.close()

    proxy_server = await asyncio.start_server(proxy, "127.0.0.1", 0)
    port = proxy_server.sockets[0].getsockname()[1]
    for name in ("HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{port}")
    if bypass:
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    try:
        async with start_judge_sim() as url:
            [verdict] = await _ask(url)
    finally:
        proxy_server.close()
        await proxy_server.wait_closed()
    assert verdict.status == "ok"
    if bypass:
        assert proxied == []
    else:
        assert proxied == [f"POST {url}/v1/chat/completions HTTP/1.1".encode()]


async def test_transport_closes_its_pool() -> None:
    transport = AiohttpTransport(4)
    async with start_judge_sim() as url:
        request = httpx.Request(
            "POST",
            f"{url}/v1/chat/completions",
            json={"messages": []},
            extensions={"timeout": {"connect": 5, "read": 5, "write": 5, "pool": 5}},
        )
        response = await transport.handle_async_request(request)
        await response.aread()
        assert response.status_code == 200 and response.headers["x-judge-simulated"] == "true"
        session = transport._session
        await transport.aclose()
    assert session is not None and session.closed and transport._session is None


# -- the coalesced cache -----------------------------------------------------------------------------------


async def test_concurrent_cache_reads_and_writes_are_coalesced(
    aredis: aioredis.Redis, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = JudgeCache(aredis, prefix=prefix, ttl_s=60)
    calls: dict[str, int] = {"mget": 0, "get": 0, "set": 0, "pipeline": 0}
    for name in list(calls):
        original = getattr(aredis, name)

        def counted(*args: Any, _name: str = name, _original: Any = original, **kwargs: Any) -> Any:
            calls[_name] += 1
            return _original(*args, **kwargs)

        monkeypatch.setattr(aredis, name, counted)
    keys = [f"{prefix}k{n}" for n in range(40)]
    await asyncio.gather(*(cache.put(k, CachedAnswer(f"t{n}", n, 1)) for n, k in enumerate(keys[:20])))
    assert (calls["pipeline"], calls["set"]) == (1, 0)  # 20 writes, one pipeline
    assert 0 < await aredis.ttl(keys[0]) <= 60
    got = await asyncio.gather(*(cache.get(k) for k in keys))
    assert (calls["mget"], calls["get"]) == (1, 0)  # 40 reads, one MGET
    assert got == [CachedAnswer(f"t{n}", n, 1) for n in range(20)] + [None] * 20
    cache.BATCH = 16
    await asyncio.gather(*(cache.get(k) for k in keys))
    assert calls["mget"] == 1 + 3  # 40 keys in chunks of 16


class _BrokenRedis:
    async def mget(self, keys: list[str]) -> list[bytes | None]:
        raise redis_errors.ConnectionError("down")

    def pipeline(self, transaction: bool = True) -> Any:
        class Pipe:
            def set(self, *args: Any, **kwargs: Any) -> None:
                pass

            async def execute(self) -> None:
                raise redis_errors.ConnectionError("down")

        return Pipe()


async def test_cache_failures_are_misses_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    cache = JudgeCache(_BrokenRedis())  # type: ignore[arg-type]
    with caplog.at_level(logging.WARNING):
        got = await asyncio.gather(cache.get("a"), cache.get("b"))
        await asyncio.gather(cache.put("a", CachedAnswer("t", 1, 1)), cache.put("b", CachedAnswer("t", 1, 1)))
    assert got == [None, None]
    assert "judge cache read failed (ConnectionError)" in caplog.text
    assert "judge cache write failed (ConnectionError)" in caplog.text
