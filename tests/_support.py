"""Helpers every test may use: one way to wait for a condition, one request-event factory.

(Reading output topics to quiescence is :func:`integration._topics.settle`.)
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import orjson

from streameval.models import RequestEvent

__all__ = ["event", "event_fields", "raw_event", "wait_until"]

T = TypeVar("T")


async def wait_until(
    check: Callable[[], T | Awaitable[T]],
    *,
    timeout: float,
    what: str | Callable[[], str] = "the condition",
    interval: float = 0.05,
    ignore: tuple[type[BaseException], ...] = (),
) -> T:
    """Wait until ``check()`` (sync or async) returns something true, and return it.

    Fails with "timed out after N s waiting for WHAT" after ``timeout`` seconds; an exception in
    ``ignore`` counts as "not yet". ``what`` may be a function, read when it fails (a count so far).
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = check()
            if inspect.isawaitable(value):
                value = await value
            if value:
                return value  # type: ignore[return-value]
        except ignore:
            pass
        if time.monotonic() > deadline:
            raise AssertionError(
                f"timed out after {timeout}s waiting for {what() if callable(what) else what}"
            )
        await asyncio.sleep(interval)


#: the fields a request event needs; everything else is named by the test
REQUIRED: dict[str, Any] = {"id": "e1", "model": "m", "output": ""}


def event_fields(**fields: Any) -> dict[str, Any]:
    """A request event's JSON object: ``fields`` over :data:`REQUIRED`."""
    return {**REQUIRED, **fields}


def event(**fields: Any) -> RequestEvent:
    """A validated request event (the worker's model) with ``fields``."""
    return RequestEvent.model_validate(event_fields(**fields))


def raw_event(**fields: Any) -> bytes:
    """A request event as a producer sends it: JSON bytes of ``fields`` over :data:`REQUIRED`."""
    return orjson.dumps(event_fields(**fields))
