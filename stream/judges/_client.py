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
from ._context import TEMPLATE_TOKENS, TRUNCATED, Cut, context_limit, estimate_tokens, fit_user, names_format
from ._errors import (
    JudgeBadResponse,
    JudgeContextTooLong,
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
from ._structured import AUTO_DIALECTS
from ._transport import AiohttpTransport, FirstByteTimeout

__all__ = ["ANTHROPIC_VERSION", "STRIKES", "Completion", "JudgeClient"]

log = logging.getLogger(__name__)


#: ambiguous failures (5xx, a 400 not naming the format) that drop a structured-output dialect, each
#: counted only when another form of the same request was then answered
STRIKES = 2

#: the timeouts given to the default transport: none of its own (see :meth:`JudgeClient.start`)
_BOUNDED_BY_CALLER: Mapping[str, float | None] = {}


@dataclass(frozen=True, slots=True)
class Completion:
    text: str
    prompt_tokens: int
    completion_tokens: int
    latency_ms: float  # of the successful attempt
    attempts: int
    truncated: str | None = None  # what was cut to fit the context window (a verdict warning)


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
        #: ask for structured answers (``structured: true``) until the endpoint has refused every dialect
        self.structured = config.structured
        self._dialects: list[str] = (
            ["tool"]
            if config.protocol != "openai"
            else list(AUTO_DIALECTS if config.structured_mode == "auto" else (config.structured_mode,))
        )
        self._strikes: dict[str, int] = {}
        #: the server's context window in tokens (configured, asked at start, or learned); None: unknown
        self.context: int | None = config.context_tokens if isinstance(config.context_tokens, int) else None
        self._slack = 1.0  # share of the room used (lowered when the server counted more than we did)
        self._system_tokens: dict[str, int] = {}
        self._tokenize: tuple[str, str, Callable[[Any], int]] | None = None
        self._tokenizers: tuple[tuple[str, str, Callable[[Any], int]], ...] = ()
        self._root = config.base_url

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
        first_byte = cfg.first_byte_timeout_s
        if isinstance(self._http, AiohttpTransport):
            self._wire = self._http
            # every attempt runs under asyncio.timeout(timeout_s), started before the POST: aiohttp's own
            # timers (total, connect) would start later with the same or longer delays, so they could
            # never fire first; without them a request arms no timer of its own (docs/performance.md)
            self._wire_timeout = _BOUNDED_BY_CALLER if first_byte is None else {"first_byte": first_byte}
        else:
            self._wire = HttpxWire(self._http)
            self._wire_timeout = (
                self._timeout if first_byte is None else {**self._timeout, "read": first_byte}
            )
        if proto.name == "openai":
            # the server's own root (OpenAI-compatible roots end in /v1): tokenizer and /props live there
            base = cfg.base_url.rstrip("/")
            self._root = base[: -len("/v1")] if base.endswith("/v1") else base
            self._tokenizers = (
                (
                    str(endpoint(self._root, "extras/tokenize/count")),
                    "input",
                    _count_field,
                ),  # llama-cpp-python
                (str(endpoint(self._root, "tokenize")), "content", _tokens_field),  # llama.cpp's server
            )
        if cfg.context_tokens == "auto":
            await self._probe_server()

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

        ``schema`` (with ``structured: true``) asks for the answer's JSON by the protocol's own means,
        in the server's dialect (:meth:`_ask`). With the server's context window known (or learned
        from its context-length error), ``user`` is shortened to fit first (:mod:`._context`)."""
        cfg = self.config
        sent, cut = user, None
        if self.context is not None:
            sent, cut = await self._fit(system, user)
        for attempt in range(1, cfg.attempts + 1):
            try:
                try:
                    text, tokens_in, tokens_out, latency = await self._ask(
                        system, sent, schema if self.structured else None, on_slot
                    )
                except JudgeContextTooLong as exc:
                    on_slot = None
                    if not self._learn_context(exc.limit):
                        raise
                    sent, cut = await self._fit(system, user)  # the new size: once more, shortened
                    text, tokens_in, tokens_out, latency = await self._ask(
                        system, sent, schema if self.structured else None, None
                    )
                on_slot = None
            except JudgeError as exc:
                on_slot = None
                if not exc.retryable or attempt == cfg.attempts:
                    exc.attempts = attempt
                    raise
                await self._sleep(self._retry_delay(exc))
                continue
            if cut is not None:
                TRUNCATED.labels(self.name).inc()
            return Completion(
                text,
                tokens_in,
                tokens_out,
                latency,
                attempt,
                None if cut is None else cut.warning(self.context or 0),
            )
        raise AssertionError("unreachable: the last attempt returns or raises")

    async def _ask(
        self,
        system: str,
        user: str,
        schema: dict[str, Any] | None,
        on_slot: Callable[[], None] | None,
    ) -> tuple[str, int, int, float]:
        """One attempt: with ``schema``, in each dialect still in play until one is answered.

        A 400/422 that names the structured request (:attr:`JudgeHTTPError.format_refused`) drops
        its dialect for good. Any other 400/422 or a 5xx is ambiguous (llama-cpp-python answers 500
        to ``json_schema``; a server may also just be failing): the next dialect, then the prompt
        alone, is tried at once, and the ambiguous dialect gets a strike only when another form of
        the same request was then answered; :data:`STRIKES` strikes drop it. A too-long prompt is
        never held against a dialect (:class:`JudgeContextTooLong` passes through). When no
        dialect is left the judge is prompt-only from then on (logged once)."""
        if schema is None or not self._dialects:
            return await self._attempt(system, user, None, on_slot)
        unclear: list[str] = []
        for dialect in list(self._dialects):
            try:
                answer = await self._attempt(system, user, schema, on_slot, dialect)
            except JudgeContextTooLong:
                raise
            except JudgeHTTPError as exc:
                on_slot = None
                if exc.format_refused:
                    self._drop(dialect, f"HTTP {exc.status} naming the structured request")
                elif exc.status in (400, 422) or exc.status >= 500:
                    unclear.append(dialect)
                else:
                    raise
                continue
            self._strike(unclear)
            return answer
        # no dialect was answered: the prompt alone (an error here is the server's trouble, not the format's)
        answer = await self._attempt(system, user, None, on_slot)
        self._strike(unclear)
        return answer

    def _drop(self, dialect: str, why: str) -> None:
        if dialect in self._dialects:
            self._dialects.remove(dialect)
            log.warning("judge %r: the server refused structured output as %s (%s)", self.name, dialect, why)
        if not self._dialects:
            self._reject_structured(why)

    def _strike(self, dialects: Sequence[str]) -> None:
        for dialect in dialects:
            self._strikes[dialect] = self._strikes.get(dialect, 0) + 1
            if self._strikes[dialect] >= STRIKES:
                self._drop(dialect, f"{STRIKES} failed requests that another form of the request passed")

    @property
    def dialect(self) -> str | None:
        """The structured-output dialect the next request uses first (None: prompt-only)."""
        return self._dialects[0] if self.structured and self._dialects else None

    def _learn_context(self, limit: int | None) -> bool:
        """Take ``limit`` (from a context-length error) as the window; False when that tells nothing new."""
        if limit is None or limit <= self.config.max_tokens:
            return False
        if self.context is not None and limit >= self.context:
            if self._slack < 0.5:
                return False
            self._slack *= 0.8  # our count was short of the server's: leave more room next time
        self.context = limit
        log.warning(
            "judge %r: the server's context window is %d tokens; longer prompts are shortened",
            self.name,
            limit,
        )
        return True

    async def _fit(self, system: str, user: str) -> tuple[str, Cut | None]:
        """``user`` shortened to fit the context window next to ``system`` and ``max_tokens``.

        The estimate (an over-estimate) is tried first: a prompt it fits needs no count by the server."""
        assert self.context is not None
        limit = int((self.context - self.config.max_tokens - TEMPLATE_TOKENS) * self._slack)
        if estimate_tokens(system) + estimate_tokens(user) <= limit:
            return user, None
        system_tokens = self._system_tokens.get(system)
        if system_tokens is None:
            system_tokens = self._system_tokens[system] = await self._count(system)
            if len(self._system_tokens) > 256:
                self._system_tokens.clear()
        room = limit - system_tokens
        if room <= 0:
            raise JudgeContextTooLong(
                f"judge {self.name!r}: the instructions ({system_tokens} tokens) and max_tokens "
                f"{self.config.max_tokens} leave no room in its {self.context}-token context window",
                limit=self.context,
            )
        if estimate_tokens(user) <= room:
            return user, None
        try:
            return await fit_user(user, room, self._count)
        except ValueError as exc:
            raise JudgeContextTooLong(f"judge {self.name!r}: {exc}", limit=self.context) from None

    async def _count(self, text: str) -> int:
        """``text``'s tokens by the server's tokenizer when it has one, else :func:`estimate_tokens`.

        A count holds one of the judge's slots like a completion (the server may serve both one at a
        time: llama-cpp-python does), and a failed or late one falls back to the estimate."""
        candidates = [self._tokenize] if self._tokenize is not None else list(self._tokenizers)
        for url, field, read in candidates:
            await self._slots.acquire()
            try:
                status, _, content = await self._get_or_post(url, {field: text})
                count = read(orjson.loads(content)) if status < 300 else None
            except (httpx.HTTPError, TimeoutError, orjson.JSONDecodeError, KeyError, TypeError, ValueError):
                count = None
            finally:
                self._slots.release()
            if count is not None:
                self._tokenize, self._tokenizers = (url, field, read), ()
                return count
        self._tokenizers = ()  # none answered: the estimate from now on (a known tokenizer is kept)
        return estimate_tokens(text)

    async def _get_or_post(
        self, url: str, body: dict[str, Any] | None
    ) -> tuple[int, Mapping[str, str], bytes]:
        """A side request to the judge's server (tokenizer, /props), bounded by ``timeout_s``."""
        assert self._wire is not None and self._route is not None
        async with asyncio.timeout(self.config.timeout_s):
            if body is None:
                async with httpx.AsyncClient(
                    transport=self._transport, timeout=self.config.timeout_s
                ) as client:
                    got = await client.get(url, headers=self._route[1])
                    return got.status_code, got.headers, got.content
            return await self._wire.post(url, self._route[1], orjson.dumps(body), self._wire_timeout)

    async def _probe_server(self) -> None:
        """``context_tokens: auto``: llama.cpp's ``GET /props`` (context size, parallel slots)."""
        try:
            status, _, content = await self._get_or_post(str(endpoint(self._root, "props")), None)
            props = orjson.loads(content) if status < 300 else {}
        except (httpx.HTTPError, TimeoutError, orjson.JSONDecodeError):
            props = {}
        settings = props.get("default_generation_settings") if isinstance(props, dict) else None
        n_ctx = settings.get("n_ctx") if isinstance(settings, dict) else None
        if isinstance(n_ctx, int) and n_ctx > self.config.max_tokens:
            self.context = n_ctx
        slots = props.get("total_slots") if isinstance(props, dict) else None
        if isinstance(slots, int) and 0 < slots < self._slots.maximum:
            self._slots.maximum = slots
            self._slots.limit = min(self._slots.limit, float(slots))
        log.info(
            "judge %r: context window %s tokens, %s parallel slots (server's /props)",
            self.name,
            self.context or "unknown",
            slots if isinstance(slots, int) else "unknown",
        )

    def _retry_delay(self, exc: JudgeError) -> float:
        cfg = self.config
        if isinstance(exc, JudgeRateLimited) and exc.retry_after is not None:
            return min(exc.retry_after, cfg.max_retry_after_s) + cfg.retry_jitter_s * self._jitter()
        return cfg.retry_wait_s + cfg.retry_jitter_s * self._jitter()

    def _reject_structured(self, why: str) -> None:
        if self.structured:
            self.structured = False
            log.warning(
                "judge %r rejected structured output (%s); asking for JSON in the prompt only from now on",
                self.name,
                why,
            )

    async def _attempt(
        self,
        system: str,
        user: str,
        schema: dict[str, Any] | None = None,
        on_slot: Callable[[], None] | None = None,
        dialect: str = "json_schema",
    ) -> tuple[str, int, int, float]:
        if self._wire is None or self._route is None:
            raise RuntimeError(f"judge {self.name!r} is not started; call start() first")
        cfg = self.config
        url, headers = self._route
        body = self._protocol.body(cfg, system, user, schema, dialect)
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
            except FirstByteTimeout:
                self._slots.congested(started)
                raise JudgeTimeout(
                    f"judge {self.name!r} sent no answer within {cfg.first_byte_timeout_s:g} s (first_byte_timeout_s)"
                ) from None
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
            if status in (400, 413, 422):
                too_long, limit = context_limit(content)
                if too_long:
                    size = f" of {limit} tokens" if limit else ""
                    raise JudgeContextTooLong(
                        f"judge {self.name!r} answered HTTP {status}: the prompt does not fit its context window{size}",
                        status=status,
                        limit=limit,
                    )
            error = explain_status(cfg, status, content, status_error(self.name, status, retry_after))
            if status in (400, 422) and schema is not None and isinstance(error, JudgeHTTPError):
                error.format_refused = names_format(content)
            raise error
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


def _count_field(answer: Any) -> int:
    return int(answer["count"])


def _tokens_field(answer: Any) -> int:
    return len(answer["tokens"])


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
