"""``/ready`` checks for judges: an unbilled, authenticated request (the models listing), cached.

A TCP connection says nothing about a revoked key or a gateway that lost its upstream, so the
worker's ``/ready`` asks each enabled judge for its protocol's models listing (``GET {base_url}/models``
for openai, ``GET {base_url}/v1/models`` for anthropic: ``Protocol.models_path``) with the judge's own headers. Listing models costs no tokens.

- 2xx, or 429 (the key was accepted; the judge is busy): ready.
- 404 / 405 (the endpoint has no models listing): ready, since the judge answered over HTTP, except
  for a ``base_url`` ending in ``/v1`` below which the protocol appends ``v1/`` again (anthropic),
  which fails with the fix.
- 401 / 403, 5xx, timeouts and connection errors: not ready, with the same actionable messages the
  judge calls give (:mod:`._hints`).

A result is kept ``ttl_ok_s`` (60 s) when ready and ``ttl_fail_s`` (10 s) when not, so a busy
``/ready`` does not become traffic to the provider. A probe runs in its own task: a ``/ready`` that
gives up waiting leaves it running, and the next ``/ready`` gets its result.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping

import httpx

from ._config import JudgeConfig
from ._errors import JudgeError, map_httpx_error, status_error
from ._hints import doubled_v1, explain_status
from ._keys import api_key
from ._protocols import endpoint, protocol_of

__all__ = ["JudgeProbe", "judge_ready_checks"]


class JudgeProbe:
    """One judge's readiness, probed at most once per TTL; calling it raises a :class:`JudgeError` when not ready."""

    def __init__(
        self,
        cfg: JudgeConfig,
        *,
        environ: Mapping[str, str] | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        ttl_ok_s: float = 60.0,
        ttl_fail_s: float = 10.0,
        timeout_s: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.cfg = cfg
        self._environ = environ
        self._transport = transport
        self._ttl = (ttl_ok_s, ttl_fail_s)
        self._timeout_s = min(timeout_s, cfg.timeout_s)
        self._clock = clock
        self._result: tuple[float, JudgeError | None] | None = None  # (expires at, error)
        self._running: asyncio.Task[JudgeError | None] | None = None
        self.probes = 0  # requests sent (for tests and logs)

    async def __call__(self) -> None:
        now = self._clock()
        if self._result is None or now >= self._result[0]:
            if self._running is None:
                self._running = asyncio.ensure_future(self._probe())
                self._running.add_done_callback(self._store)
            await asyncio.shield(self._running)
        assert self._result is not None
        if self._result[1] is not None:
            raise self._result[1]

    def _store(self, task: asyncio.Task[JudgeError | None]) -> None:
        self._running = None
        if task.cancelled():
            return
        error = task.exception() or task.result()
        if not isinstance(error, JudgeError) and error is not None:
            error = JudgeError(f"judge {self.cfg.name!r} readiness probe failed: {type(error).__name__}")
        self._result = (self._clock() + self._ttl[0 if error is None else 1], error)

    def _request(self) -> tuple[str, dict[str, str]]:
        cfg = self.cfg
        proto = protocol_of(cfg)
        key = api_key(cfg, self._environ)  # api_key_file, <api_key_env>_FILE or <api_key_env>
        return str(endpoint(cfg.base_url, proto.models_path)), {
            "accept": "application/json",
            **proto.headers(key or None),
        }

    async def _probe(self) -> JudgeError | None:
        cfg = self.cfg
        url, headers = self._request()
        self.probes += 1
        try:
            async with httpx.AsyncClient(transport=self._transport, timeout=self._timeout_s) as client:
                response = await client.get(url, headers=headers)
        except httpx.HTTPError as exc:
            return map_httpx_error(exc, cfg.name)
        status = response.status_code
        if status < 300 or status == 429:
            return None
        if status in (404, 405) and not doubled_v1(cfg):
            return None
        return explain_status(cfg, status, response.content, status_error(cfg.name, status, None))


def judge_ready_checks(
    configs: Iterable[JudgeConfig],
    *,
    environ: Mapping[str, str] | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
) -> list[tuple[str, Callable[[], Awaitable[None]]]]:
    """``(judge:<name>, check)`` for each enabled judge, in the shape ``/ready`` takes."""
    return [
        (f"judge:{cfg.name}", JudgeProbe(cfg, environ=environ, transport=transport))
        for cfg in configs
        if cfg.enabled
    ]
