"""The httpx -> JudgeError boundary: every httpx exception is mapped, and status codes map as documented."""

from __future__ import annotations

import email.utils
import inspect
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from streameval.errors import EvaluatorError
from streameval.judges import (
    JudgeAuthError,
    JudgeBadResponse,
    JudgeError,
    JudgeHTTPError,
    JudgeRateLimited,
    JudgeTimeout,
    JudgeUnavailable,
    map_httpx_error,
)
from streameval.judges._client import _retry_after
from streameval.judges._errors import HTTPX_ERROR_MAP, status_error

HTTPX_EXCEPTIONS = sorted(
    (
        obj
        for name in httpx.__all__
        if inspect.isclass(obj := getattr(httpx, name)) and issubclass(obj, Exception)
    ),
    key=lambda cls: cls.__name__,
)


def _instance(cls: type[Exception]) -> Exception:
    request = httpx.Request("POST", "http://127.0.0.1:1/v1/chat/completions")
    if issubclass(cls, httpx.HTTPStatusError):
        return cls("boom", request=request, response=httpx.Response(503, request=request))
    if issubclass(cls, httpx.RequestError):
        return cls("boom", request=request)
    if cls in (httpx.RequestNotRead, httpx.ResponseNotRead, httpx.StreamClosed, httpx.StreamConsumed):
        return cls()
    return cls("boom")


@pytest.mark.parametrize("cls", HTTPX_EXCEPTIONS, ids=lambda c: c.__name__)
def test_every_httpx_exception_is_listed_and_mapped(cls: type[Exception]) -> None:
    listed = {httpx_cls for httpx_cls, _ in HTTPX_ERROR_MAP}
    assert cls in listed, f"httpx.{cls.__name__} has no explicit entry in HTTPX_ERROR_MAP"
    mapped = map_httpx_error(_instance(cls), "j1")
    assert isinstance(mapped, JudgeError) and isinstance(mapped, EvaluatorError)
    assert type(mapped) is not JudgeError, "mapped only to the base class"
    assert "boom" not in str(mapped), "httpx messages (which may quote payloads) must not reach reasons"


@pytest.mark.parametrize(
    ("cls", "expected", "retryable"),
    [
        (httpx.ConnectTimeout, JudgeTimeout, True),
        (httpx.ReadTimeout, JudgeTimeout, True),
        (httpx.ConnectError, JudgeUnavailable, True),
        (httpx.RemoteProtocolError, JudgeUnavailable, True),
        (httpx.DecodingError, JudgeBadResponse, False),
    ],
)
def test_mapping_kinds(cls: type[Exception], expected: type[JudgeError], retryable: bool) -> None:
    mapped = map_httpx_error(_instance(cls), "j1")
    assert type(mapped) is expected and mapped.retryable is retryable


@pytest.mark.parametrize(
    ("status", "expected", "retryable", "code"),
    [
        (429, JudgeRateLimited, True, "judge_rate_limited"),
        (401, JudgeAuthError, False, "judge_auth"),
        (403, JudgeAuthError, False, "judge_auth"),
        (400, JudgeHTTPError, False, "judge_http_error"),
        (404, JudgeHTTPError, False, "judge_http_error"),
        (408, JudgeHTTPError, True, "judge_http_error"),
        (500, JudgeHTTPError, True, "judge_http_error"),
        (503, JudgeHTTPError, True, "judge_http_error"),
    ],
)
def test_status_errors(status: int, expected: type[JudgeError], retryable: bool, code: str) -> None:
    err = status_error("j1", status, 3.0)
    assert type(err) is expected and err.retryable is retryable and err.code == code
    if isinstance(err, JudgeRateLimited):
        assert err.retry_after == 3.0


def test_non_httpx_exception_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        map_httpx_error(ValueError("x"), "j1")


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        (None, None),
        ("7", 7.0),
        (" 1.5 ", 1.5),
        ("-3", 0.0),
        ("soon", None),
        ("Wed, 21 Oct 2015 07:28:00 GMT", 0.0),
    ],
)
def test_retry_after_header(value: str | None, seconds: float | None) -> None:
    assert _retry_after(value) == seconds


def test_retry_after_http_date_in_the_future() -> None:
    future = email.utils.format_datetime(datetime.now(UTC) + timedelta(seconds=120), usegmt=True)
    wait = _retry_after(future)
    assert wait is not None and 100 < wait <= 120
