"""The judges' default HTTP transport: an ``httpx.AsyncBaseTransport`` on an aiohttp connection pool.

Why not httpx's own transport: httpcore's ``AsyncConnectionPool`` scans every connection for every
queued request (encode/httpcore#1035) and wraps each request in anyio cancel scopes. Measured on the
development box against the simulated judge (docs/judges.md "Performance"): ~0.7 ms of client CPU
per request at 8 in flight, ~2.3 ms at 64, ~10 ms at 192; this transport ~0.15 ms flat.

It keeps the httpx interface, so :class:`~streameval.judges.JudgeClient` has one code path for this
transport and for an injected one (``httpx.MockTransport`` in unit tests): requests and responses
are ``httpx.Request`` / ``httpx.Response``, timeouts come from the request's ``timeout`` extension,
and every aiohttp failure is raised as the httpx exception that httpx's transport would raise
(:data:`AIOHTTP_ERROR_MAP`), which :func:`~streameval.judges._errors.map_httpx_error` then maps to
the JudgeError tree. What stays as with httpx's default client: TLS verification against certifi
(``httpx.create_ssl_context()``), proxies from ``HTTP(S)_PROXY`` / ``ALL_PROXY`` / ``NO_PROXY``, no redirects
followed, bodies decoded (gzip, deflate) by httpx, idle connections kept 5 s. Cookies are not kept.
"""

from __future__ import annotations

import asyncio
import ssl
import urllib.request
from collections.abc import Mapping, Sequence
from typing import Any

import aiohttp
import httpx
from yarl import URL

from ..errors import StreamEvalError

__all__ = ["AIOHTTP_ERROR_MAP", "AiohttpTransport", "FirstByteTimeout", "to_httpx_error"]


class FirstByteTimeout(httpx.ReadTimeout, StreamEvalError):
    """No answer (status line and headers) within the request's ``first_byte`` timeout."""


#: every exception class aiohttp exports that a request can raise, most specific first, with the
#: httpx exception raised in its place (tests/judges/test_judges_errors.py fails if one is missing)
AIOHTTP_ERROR_MAP: tuple[tuple[type[BaseException], type[httpx.HTTPError] | type[httpx.InvalidURL]], ...] = (
    (aiohttp.ConnectionTimeoutError, httpx.ConnectTimeout),  # includes waiting for a pooled connection
    (aiohttp.SocketTimeoutError, httpx.ReadTimeout),
    (aiohttp.ServerTimeoutError, httpx.ReadTimeout),
    (aiohttp.ClientProxyConnectionError, httpx.ProxyError),
    (aiohttp.ClientHttpProxyError, httpx.ProxyError),
    (aiohttp.ClientConnectorCertificateError, httpx.ConnectError),
    (aiohttp.ClientConnectorSSLError, httpx.ConnectError),
    (aiohttp.ClientSSLError, httpx.ConnectError),
    (aiohttp.ClientConnectorDNSError, httpx.ConnectError),
    (aiohttp.ClientConnectorError, httpx.ConnectError),
    (aiohttp.ServerFingerprintMismatch, httpx.ConnectError),
    (aiohttp.ServerDisconnectedError, httpx.RemoteProtocolError),  # the server hung up mid-answer
    (aiohttp.ServerConnectionError, httpx.RemoteProtocolError),
    (aiohttp.ClientPayloadError, httpx.RemoteProtocolError),  # body cut short or badly framed
    (aiohttp.ClientConnectionResetError, httpx.ReadError),
    (aiohttp.ClientOSError, httpx.ReadError),
    (aiohttp.ClientConnectionError, httpx.NetworkError),
    (aiohttp.NonHttpUrlRedirectClientError, httpx.UnsupportedProtocol),
    (aiohttp.NonHttpUrlClientError, httpx.UnsupportedProtocol),
    (aiohttp.InvalidUrlRedirectClientError, httpx.InvalidURL),
    (aiohttp.InvalidUrlClientError, httpx.InvalidURL),
    (aiohttp.InvalidURL, httpx.InvalidURL),
    (aiohttp.TooManyRedirects, httpx.TooManyRedirects),
    (aiohttp.RedirectClientError, httpx.TooManyRedirects),
    (aiohttp.WSServerHandshakeError, httpx.RemoteProtocolError),
    (aiohttp.ContentTypeError, httpx.RemoteProtocolError),
    (aiohttp.ClientResponseError, httpx.RemoteProtocolError),  # an answer aiohttp could not parse
    (aiohttp.UploadAbortedError, httpx.WriteError),
    (aiohttp.ClientError, httpx.TransportError),
    (TimeoutError, httpx.ReadTimeout),
    (ValueError, httpx.LocalProtocolError),  # a request aiohttp refused to build, e.g. CR/LF in a header
    (OSError, httpx.NetworkError),
)


def to_httpx_error(exc: BaseException, request: httpx.Request) -> Exception | None:
    """The httpx exception for an aiohttp (or socket) failure, or None when ``exc`` is not one.

    The message names only the aiohttp class: aiohttp messages can quote URLs and headers.
    """
    for aio_cls, httpx_cls in AIOHTTP_ERROR_MAP:
        if isinstance(exc, aio_cls):
            message = f"{type(exc).__name__} (aiohttp)"
            if issubclass(httpx_cls, httpx.RequestError):
                return httpx_cls(message, request=request)
            return httpx_cls(message)
    return None


class AiohttpTransport(httpx.AsyncBaseTransport):
    """``limit`` connections at most (one judge's ``max_concurrency``); opened on first use."""

    def __init__(
        self, limit: int, *, keepalive_s: float = 5.0, ssl_context: ssl.SSLContext | None = None
    ) -> None:
        self.limit = limit
        self.keepalive_s = keepalive_s
        self._ssl = ssl_context
        self._session: aiohttp.ClientSession | None = None
        self._timeouts: dict[tuple[float | None, ...], aiohttp.ClientTimeout] = {}
        self._proxies: dict[tuple[str, str, int | None], tuple[URL | None, aiohttp.BasicAuth | None]] = {}
        self._targets: dict[str, tuple[URL, URL | None, aiohttp.BasicAuth | None]] = {}

    def _open(self) -> aiohttp.ClientSession:
        ssl_context = self._ssl if self._ssl is not None else httpx.create_ssl_context()  # certifi, as httpx
        connector = aiohttp.TCPConnector(
            limit=self.limit, limit_per_host=0, keepalive_timeout=self.keepalive_s, ssl=ssl_context
        )
        # trust_env=False: with it aiohttp reads ~/.netrc in a thread on every request (measured: more
        # than half of the worker's CPU at 1,000 requests/s); the proxy is looked up once per host instead
        self._session = aiohttp.ClientSession(
            connector=connector,
            auto_decompress=False,
            trust_env=False,
            cookie_jar=aiohttp.DummyCookieJar(),
            raise_for_status=False,
        )
        return self._session

    def _proxy(self, url: httpx.URL) -> tuple[URL | None, aiohttp.BasicAuth | None]:
        """The proxy for ``url`` from HTTP_PROXY / HTTPS_PROXY / ALL_PROXY and NO_PROXY, as httpx's
        default client takes them (read once per scheme, host and port)."""
        key = (url.scheme, url.host, url.port)
        found = self._proxies.get(key)
        if found is None:
            found = (None, None)
            proxies = urllib.request.getproxies()
            value = proxies.get(url.scheme) or proxies.get("all")
            if value and not (url.host and urllib.request.proxy_bypass(url.host)):
                proxy = URL(value if "://" in value else f"http://{value}")
                if proxy.scheme in ("http", "https"):
                    auth = aiohttp.BasicAuth(proxy.user, proxy.password or "") if proxy.user else None
                    found = (proxy.with_user(None), auth)
            self._proxies[key] = found
        return found

    def _timeout(self, spec: Mapping[str, float | None]) -> aiohttp.ClientTimeout:
        key = (spec.get("pool"), spec.get("connect"), spec.get("read"))
        timeout = self._timeouts.get(key)
        if timeout is None:
            pool, connect, read = key
            # aiohttp's `connect` covers the wait for a pooled connection plus connecting
            total_connect = None if pool is None and connect is None else (pool or 0.0) + (connect or 0.0)
            # the read timeout is applied per answer, not per socket read: aiohttp re-arms a timer on
            # every chunk received (~4 % of a judged worker's CPU); JudgeClient bounds each attempt anyway
            timeout = aiohttp.ClientTimeout(total=read, connect=total_connect, sock_connect=connect)
            self._timeouts[key] = timeout
        return timeout

    def _target(self, url: str) -> tuple[URL, URL | None, aiohttp.BasicAuth | None]:
        """The request URL and its proxy, parsed once per URL."""
        found = self._targets.get(url)
        if found is None:
            if len(self._targets) >= 256:  # a judge posts to one URL; handle_async_request may see many
                self._targets.clear()
            found = self._targets[url] = (URL(url, encoded=True), *self._proxy(httpx.URL(url)))
        return found

    async def _send(
        self,
        method: str,
        url: str,
        headers: Sequence[tuple[str, str]],
        content: bytes,
        timeout: Mapping[str, float | None],
        request: httpx.Request | None,
    ) -> tuple[int, Mapping[str, str], Any, str | None, bytes]:
        """(status, headers, raw headers, reason, body) of one request (the headers a case-insensitive
        mapping); failures raised as httpx's exceptions."""
        session = self._session or self._open()
        target, proxy, proxy_auth = self._target(url)
        first_byte = timeout.get("first_byte")
        # a `first_byte` limit (JudgeConfig.first_byte_timeout_s) bounds the wait for the answer's status
        # line and headers; the caller's limit bounds the whole attempt
        limit = None if first_byte is None else asyncio.timeout(first_byte)
        try:
            pending = session.request(
                method,
                target,
                headers=headers,
                data=content or None,
                allow_redirects=False,
                timeout=self._timeout(timeout),
                proxy=proxy,
                proxy_auth=proxy_auth,
            )
            if limit is None:
                answer = await pending
            else:
                async with limit:
                    answer = await pending
            async with answer:
                body = await answer.read()
                return answer.status, answer.headers, answer.raw_headers, answer.reason, body
        except TimeoutError as exc:
            if limit is not None and limit.expired():
                raise FirstByteTimeout(f"no answer within {first_byte:g} s") from exc
            mapped = to_httpx_error(exc, request or httpx.Request(method, url, headers=headers))
            raise (mapped or exc) from exc
        except Exception as exc:
            mapped = to_httpx_error(exc, request or httpx.Request(method, url, headers=headers))
            if mapped is None:
                raise
            raise mapped from exc

    async def post(
        self,
        url: str,
        headers: Sequence[tuple[str, str]],
        content: bytes,
        timeout: Mapping[str, float | None],
    ) -> tuple[int, Mapping[str, str], bytes]:
        """POST without building httpx requests and responses (the judge client's path: those objects
        cost about as much CPU as aiohttp's own request): (status, headers, body). The body is decoded
        as httpx decodes it when the answer has a Content-Encoding; failures are httpx's exceptions."""
        status, answer_headers, raw_headers, _, body = await self._send(
            "POST", url, headers, content, timeout, None
        )
        if "content-encoding" in answer_headers:  # rare (we ask for gzip, deflate): httpx's own decoders
            response = httpx.Response(
                status, headers=raw_headers, stream=httpx.ByteStream(body), request=httpx.Request("POST", url)
            )
            await response.aread()
            body = response.content
        return status, answer_headers, body

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        content = await request.aread()  # in memory (JudgeClient sends an httpx.ByteStream)
        status, _, headers, reason, body = await self._send(
            request.method,
            str(request.url),
            request.headers.multi_items(),
            content,
            request.extensions.get("timeout") or {},
            request,
        )
        extensions = {
            "http_version": b"HTTP/1.1",
            "reason_phrase": (reason or "").encode("latin-1", "replace"),
        }
        return httpx.Response(
            status, headers=headers, stream=httpx.ByteStream(body), request=request, extensions=extensions
        )

    async def aclose(self) -> None:
        if self._session is not None:
            session, self._session = self._session, None
            await session.close()
