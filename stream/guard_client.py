"""A small client of ``POST /api/v1/check`` (docs/guard.md): ask "may I send this answer?" before sending it.

::

    from streameval.guard_client import GuardClient

    with GuardClient("http://guard:8080", token=os.environ["STREAMEVAL_API_TOKEN"]) as guard:
        answer = guard.check(input=question, output=reply, model="gpt-4o", suite="support")
        if answer.decision == "block":
            reply = "Sorry, I cannot answer that."
        elif answer.decision == "mask":
            reply = answer.output

:class:`GuardClient` (blocking) and :class:`AsyncGuardClient` (asyncio) each keep one ``httpx`` client, so
checks reuse their connections (keep-alive). A refused check raises :class:`CheckRefused` (its HTTP status
and the server's message); a server that cannot be reached in ``timeout`` raises ``httpx``'s own errors:
what to do then (send anyway, or not) is the caller's fail-open or fail-closed choice.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import httpx
import orjson

from .errors import StreamEvalError

__all__ = ["AsyncGuardClient", "CheckRefused", "GuardAnswer", "GuardClient"]

_PATH = "/api/v1/check"


class CheckRefused(StreamEvalError):
    """The server refused the check (400 bad event, 401/403 token, 404 no guarded suite, 413 too large)."""

    def __init__(self, status: int, message: str, data: Any = None) -> None:
        super().__init__(f"{status}: {message}")
        self.status, self.message, self.data = status, message, data


@dataclass(frozen=True)
class GuardAnswer:
    """The server's answer (docs/guard.md, "The answer"); ``raw`` holds every field."""

    decision: str  #: allow, warn, block or mask
    id: str
    suite: str
    score: float | None
    timed_out: bool
    output: str | None  #: decision mask: the output to send instead
    reasons: list[str]
    latency_ms: float
    raw: dict[str, Any] = field(repr=False)

    @property
    def allowed(self) -> bool:
        """True unless the decision is ``block`` (``mask``: send :attr:`output` instead)."""
        return self.decision != "block"


def _event(
    output: str, input: str | None, model: str, id: str | None, suite: str | None, extra: dict[str, Any]
) -> bytes:
    event: dict[str, Any] = {"output": output, "model": model, **extra}
    if input is not None:
        event["input"] = input
    if id is not None:
        event["id"] = id
    if suite is not None:
        event["suite"] = suite
    return orjson.dumps(event)


def _answer(response: httpx.Response) -> GuardAnswer:
    try:
        body = orjson.loads(response.content)
    except orjson.JSONDecodeError:
        raise CheckRefused(response.status_code, response.text[:200]) from None
    if response.status_code != 200 or not isinstance(body, dict) or "data" not in body:
        message = body.get("message", "") if isinstance(body, dict) else ""
        raise CheckRefused(
            response.status_code, message, body.get("data") if isinstance(body, dict) else None
        )
    data = body["data"]
    return GuardAnswer(
        decision=data["decision"],
        id=data["id"],
        suite=data["suite"],
        score=data.get("score"),
        timed_out=bool(data.get("timedOut")),
        output=data.get("output"),
        reasons=list(data.get("reasons") or ()),
        latency_ms=float(data.get("latencyMs", 0.0)),
        raw=data,
    )


def _params(suite: str | None) -> dict[str, str] | None:
    return None if suite is None else {"suite": suite}


def _headers(token: str | None) -> dict[str, str]:
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return headers


class GuardClient:
    """Blocking client; one connection pool for every check (use it as a context manager, or ``close()``)."""

    def __init__(
        self,
        url: str,
        *,
        token: str | None = None,
        timeout: float = 1.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self._client = httpx.Client(
            base_url=url, headers=_headers(token), timeout=timeout, transport=transport
        )

    def check(
        self,
        output: str,
        *,
        input: str | None = None,
        model: str = "unknown",
        id: str | None = None,
        suite: str | None = None,
        **extra: Any,
    ) -> GuardAnswer:
        """Check one answer; ``extra``: any other field of the request event (``expected``, ``category``...)."""
        return self.check_event(_event(output, input, model, id, suite, extra))

    def check_event(self, event: bytes | dict[str, Any], *, suite: str | None = None) -> GuardAnswer:
        """Check a whole request event (bytes as they are, or a dict encoded as JSON); ``suite`` overrides
        the event's."""
        body = event if isinstance(event, bytes) else orjson.dumps(event)
        return _answer(self._client.post(_PATH, content=body, params=_params(suite)))

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> GuardClient:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class AsyncGuardClient:
    """asyncio client; one connection pool for every check (``async with``, or ``await aclose()``)."""

    def __init__(
        self,
        url: str,
        *,
        token: str | None = None,
        timeout: float = 1.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._client = httpx.AsyncClient(
            base_url=url, headers=_headers(token), timeout=timeout, transport=transport
        )

    async def check(
        self,
        output: str,
        *,
        input: str | None = None,
        model: str = "unknown",
        id: str | None = None,
        suite: str | None = None,
        **extra: Any,
    ) -> GuardAnswer:
        """Check one answer; ``extra``: any other field of the request event (``expected``, ``category``...)."""
        return await self.check_event(_event(output, input, model, id, suite, extra))

    async def check_event(self, event: bytes | dict[str, Any], *, suite: str | None = None) -> GuardAnswer:
        """Check a whole request event (bytes as they are, or a dict encoded as JSON); ``suite`` overrides
        the event's."""
        body = event if isinstance(event, bytes) else orjson.dumps(event)
        return _answer(await self._client.post(_PATH, content=body, params=_params(suite)))

    async def aclose(self) -> None:
        await self._client.aclose()

    async def __aenter__(self) -> AsyncGuardClient:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()
