"""One judge's HTTP client: one of the judge protocols (:mod:`._protocols`) over a pooled transport.

Each judge owns one ``httpx.AsyncBaseTransport``, opened in :meth:`JudgeClient.start` and shared by
every event: by default an :class:`~._transport.AiohttpTransport` (an aiohttp pool of
``max_concurrency`` connections; httpx's own pool costs milliseconds of CPU per request at 64 in
flight, encode/httpcore#1035), or the injected ``transport`` (``httpx.MockTransport`` in unit tests).
Requests go straight to the transport (no ``httpx.AsyncClient``: its per-request work was about half
of the client's CPU), and to the default transport without httpx request and response objects at all
(:meth:`AiohttpTransport.post <._transport.AiohttpTransport.post>`: they cost about as much CPU as
aiohttp's own request); an injected transport is adapted by :class:`HttpxWire`. Either way the client
sends what httpx's client would: the merged ``base_url``, JSON body,
``Accept``/``Accept-Encoding``/``User-Agent`` and the protocol's headers, with ``timeout_s`` as the
connect/read/write/pool timeout. Every httpx exception is mapped to the :mod:`._errors` tree here, at
the boundary (the default transport raises httpx exceptions for aiohttp's). Limits applied per
attempt: a semaphore of ``max_concurrency`` requests, an optional ``requests_per_second`` start rate,
and ``timeout_s``. Retries (the multi-judge spec: 3 attempts, 2 s apart) add uniform jitter and honour a 429's
Retry-After (capped at ``max_retry_after_s``); a waiting retry holds no concurrency slot. The API key
is read from the environment at start and only ever placed in a request header.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import logging
import random
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import httpx
import orjson

from .._version import __version__
from ._config import JudgeConfig
from ._errors import (
    JudgeBadResponse,
    JudgeError,
    JudgeHTTPError,
    JudgeRateLimited,
    JudgeTimeout,
    map_httpx_error,
    status_error,
)
from ._hints import doubled_v1, explain_status
from ._keys import api_key
from ._limit import AdaptiveLimit
from ._protocols import ANTHROPIC_VERSION, endpoint, protocol_of
from ._transport import AiohttpTransport

__all__ = ["ANTHROPIC_VERSION", "Completion", "JudgeClient"]

log = logging.getLogger(__name__)


#: the timeouts given to the default transport: none of its own (see :meth:`JudgeClient.start`)
_BOUNDED_BY_CALLER: Mapping[str, float | None] = {}


@dataclass(frozen=True, slots=True)
class Completion:
    text: str
    prompt_tokens: int
    completion_tokens: int
    latency_ms: float  # of the successful attempt
    attempts: int


class _Wire(Protocol):
    """What the client needs of a transport: one POST, ``(status, headers, body)``; failures raised as
    httpx's exceptions. :class:`AiohttpTransport` has it; :class:`HttpxWire` adapts any httpx transport."""

    async def post(
        self,
        url: str,
        headers: Sequence[tuple[str, str]],
        content: bytes,
        timeout: Mapping[str, float | None],
    ) -> tuple[int, Mapping[str, str], bytes]: ...


class HttpxWire:
    """An ``httpx.AsyncBaseTransport`` (e.g. ``httpx.MockTransport`` in tests) as a :class:`_Wire`: the
    request httpx's client would send (Host first, Content-Length) and the body read and decoded by httpx."""

    def __init__(self, transport: httpx.AsyncBaseTransport) -> None:
        self.transport = transport

    async def post(
        self,
        url: str,
        headers: Sequence[tuple[str, str]],
        content: bytes,
        timeout: Mapping[str, float | None],
    ) -> tuple[int, Mapping[str, str], bytes]:
        target = httpx.URL(url)
        request = httpx.Request(
            "POST",
            target,
            stream=httpx.ByteStream(content),
            extensions={"timeout": dict(timeout)},
            headers=[
                ("host", target.netloc.decode("ascii")),
                *headers,
                ("content-length", str(len(content))),
            ],
        )
        response = await self.transport.handle_async_request(request)
        try:
            await response.aread()
        finally:
            await response.aclose()
        return response.status_code, response.headers, response.content


class _StartRate:
    """Spaces request starts at least 1/rate seconds apart (a leaky bucket without burst)."""

    def __init__(
        self, rate: float | None, clock: Callable[[], float], sleep: Callable[[float], Awaitable[None]]
    ) -> None:
        self.interval = 1.0 / rate if rate else 0.0
        self.clock = clock
        self.sleep = sleep
        self.next_start = 0.0
        self.lock = asyncio.Lock()

    async def wait(self) -> None:
        if not self.interval:
            return
        async with self.lock:
            now = self.clock()
            delay = self.next_start - now
            self.next_start = max(now, self.next_start) + self.interval
        if delay > 0:
            await self.sleep(delay)


class JudgeClient:
    def __init__(
        self,
        config: JudgeConfig,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        environ: Mapping[str, str] | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        self.config = config
        self._transport = transport
        self._environ = environ
        self._clock = clock
        self._sleep = sleep
        self._jitter = jitter
        self._http: httpx.AsyncBaseTransport | None = None
        self._protocol = protocol_of(config)
        self._route: tuple[str, list[tuple[str, str]]] | None = None  # (URL, headers)
        self._wire: _Wire | None = None
        self._wire_timeout: Mapping[str, float | None] = _BOUNDED_BY_CALLER
        self._timeout = {
            "connect": config.timeout_s,
            "read": config.timeout_s,
            "write": config.timeout_s,
            "pool": config.timeout_s,
        }
        self._slots = AdaptiveLimit(
            config.name, config.max_concurrency, adaptive=config.adaptive_concurrency, clock=clock
        )
        self._rate = _StartRate(config.requests_per_second, clock, sleep)
        #: ask for structured answers (``structured: true``) until the endpoint rejects them once
        self.structured = config.structured

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def queued(self) -> int:
        """Attempts waiting for one of this judge's slots."""
        return self._slots.queued

    async def start(self) -> None:
        """Read the key and open the pool. Raises :class:`ConfigError` when the key variable is unset."""
        if self._http is not None:
            return
        cfg = self.config
        headers = {
            "accept": "*/*",
            "accept-encoding": "gzip, deflate",
            "user-agent": f"streameval/{__version__}",
            "content-type": "application/json",
        }
        proto = self._protocol
        headers.update(
            proto.headers(api_key(cfg, self._environ))
        )  # api_key_file, <api_key_env>_FILE or <api_key_env>
        if doubled_v1(cfg):
            log.warning(
                "judge %r: base_url ends in /v1 and the %s protocol appends /%s (requests go to …/v1/%s); "
                "give the root without /v1",
                cfg.name,
                proto.name,
                proto.path,
                proto.path,
            )
        for value in (*headers, *headers.values()):
            value.encode("ascii")  # as httpx.Headers encodes str values: a non-ASCII key fails here, at start
        self._route = (str(endpoint(cfg.base_url, proto.path)), list(headers.items()))
        self._http = self._transport if self._transport is not None else AiohttpTransport(cfg.max_concurrency)
        if isinstance(self._http, AiohttpTransport):
            self._wire = self._http
            # every attempt runs under asyncio.timeout(timeout_s), started before the POST: aiohttp's own
            # timers (total, connect) would start later with the same or longer delays, so they could
            # never fire first; without them a request arms no timer of its own (docs/performance.md)
            self._wire_timeout = _BOUNDED_BY_CALLER
        else:
            self._wire = HttpxWire(self._http)
            self._wire_timeout = self._timeout

    async def close(self) -> None:
        if self._http is not None:
            await self._http.aclose()
            self._http = self._wire = None

    async def complete(
        self,
        system: str,
        user: str,
        schema: dict[str, Any] | None = None,
        *,
        on_slot: Callable[[], None] | None = None,
    ) -> Completion:
        """Ask the judge; retry what may pass on another attempt. Raises a :class:`JudgeError`.

        ``on_slot`` is called once the first attempt holds a slot (the request is on its way).

        ``schema`` (with ``structured: true``) asks for the answer's JSON by the protocol's own means
        (:mod:`._structured`); an endpoint that rejects it is asked again without it, and from then on
        never gets it (logged once)."""
        cfg = self.config
        for attempt in range(1, cfg.attempts + 1):
            try:
                try:
                    sent = schema if self.structured else None
                    text, tokens_in, tokens_out, latency = await self._attempt(system, user, sent, on_slot)
                    on_slot = None
                except JudgeHTTPError as exc:
                    if sent is None or exc.status not in (400, 422):
                        raise
                    self._reject_structured(exc.status)
                    text, tokens_in, tokens_out, latency = await self._attempt(system, user, None)
            except JudgeError as exc:
                on_slot = None
                if not exc.retryable or attempt == cfg.attempts:
                    exc.attempts = attempt
                    raise
                await self._sleep(self._retry_delay(exc))
                continue
            return Completion(text, tokens_in, tokens_out, latency, attempt)
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _retry_delay(self, exc: JudgeError) -> float:
        cfg = self.config
        if isinstance(exc, JudgeRateLimited) and exc.retry_after is not None:
            return min(exc.retry_after, cfg.max_retry_after_s) + cfg.retry_jitter_s * self._jitter()
        return cfg.retry_wait_s + cfg.retry_jitter_s * self._jitter()

    def _reject_structured(self, status: int) -> None:
        if self.structured:
            self.structured = False
            log.warning(
                "judge %r rejected structured output (HTTP %d); asking for JSON in the prompt only from now on",
                self.name,
                status,
            )

    async def _attempt(
        self,
        system: str,
        user: str,
        schema: dict[str, Any] | None = None,
        on_slot: Callable[[], None] | None = None,
    ) -> tuple[str, int, int, float]:
        if self._wire is None or self._route is None:
            raise RuntimeError(f"judge {self.name!r} is not started; call start() first")
        cfg = self.config
        url, headers = self._route
        body = self._protocol.body(cfg, system, user, schema)
        started = await self._slots.acquire()  # waiting here is not part of the attempt's timeout
        if on_slot is not None:
            on_slot()
        try:
            await self._rate.wait()
            began = self._clock()
            try:
                async with asyncio.timeout(cfg.timeout_s):
                    status, answer_headers, content = await self._wire.post(
                        url, headers, orjson.dumps(body), self._wire_timeout
                    )
            except TimeoutError:
                self._slots.congested(started)
                raise JudgeTimeout(f"judge {self.name!r} timed out after {cfg.timeout_s:g} s") from None
            except httpx.HTTPError as exc:
                error = map_httpx_error(exc, self.name)
                if isinstance(error, JudgeTimeout):
                    self._slots.congested(started)
                raise error from exc
            except (httpx.InvalidURL, httpx.CookieConflict, httpx.StreamError) as exc:
                raise map_httpx_error(exc, self.name) from exc
            latency_ms = (self._clock() - began) * 1000.0
        finally:
            self._slots.release()
        if status == 429 or status >= 500:
            self._slots.congested(started)
        else:
            self._slots.succeeded()
        if status >= 300:
            retry_after = _retry_after(answer_headers.get("retry-after"))
            if status == 429 and retry_after:
                self._slots.pause(min(retry_after, cfg.max_retry_after_s))
            raise explain_status(cfg, status, content, status_error(self.name, status, retry_after))
        try:
            payload = orjson.loads(content)
        except orjson.JSONDecodeError:
            try:  # what orjson refuses and Python's json reads (NaN, UTF-16, huge integers), as httpx's .json()
                payload = json.loads(content)
            except ValueError:
                raise JudgeBadResponse(f"judge {self.name!r} answered a body that is not JSON") from None
        text, tokens_in, tokens_out = self._read(payload)
        return text, tokens_in, tokens_out, round(latency_ms, 3)

    def _read(self, payload: Any) -> tuple[str, int, int]:
        try:
            return self._protocol.read(payload)
        except (KeyError, IndexError, TypeError, AttributeError, ValueError):
            raise JudgeBadResponse(
                f"judge {self.name!r} answered JSON without the {self.config.protocol} message content"
            ) from None


def _retry_after(value: str | None) -> float | None:
    """Retry-After as seconds: delta-seconds or an HTTP date (RFC 9110 10.2.3)."""
    if value is None:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())
