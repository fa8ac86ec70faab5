"""The judge exception tree, and the one place where httpx errors become ours.

::

    EvaluatorError (streameval.errors)
    └── JudgeError                 code "judge_error"; a judge gave no usable answer for this event
        ├── JudgeUnavailable       code "judge_unavailable"; the judge could not be reached
        │   ├── JudgeTimeout           code "judge_timeout"; connect/read/write/pool timeout
        │   └── JudgeRateLimited       code "judge_rate_limited"; 429 after every retry
        ├── JudgeHTTPError         code "judge_http_error"; a non-2xx status (``status``)
        │   ├── JudgeAuthError         code "judge_auth"; 401 / 403 (check the api_key_env variable)
        │   └── JudgeContextTooLong    code "judge_context_length"; the prompt does not fit the
        │                              server's context window (``limit``: its size, when known)
        ├── JudgeBadResponse       code "judge_bad_response"; a 2xx body we cannot read, or scores
        │                          outside the scale
        ├── JudgeRequestError      code "judge_request"; a request httpx refused to build or send
        │                          (bad URL, redirects, protocol misuse): a configuration problem
        └── JudgeBudgetExceeded    code "budget"; the judge's tokens-per-minute budget is spent

:func:`map_httpx_error` translates every httpx exception into this tree (tests/judges/test_judges_errors.py
fails if an httpx exception class is not listed). Messages name the judge and what went wrong; they
never contain the API key, request headers or whole provider payloads.
"""

from __future__ import annotations

import httpx

from ..errors import EvaluatorError

__all__ = [
    "HTTPX_ERROR_MAP",
    "JudgeAuthError",
    "JudgeBadResponse",
    "JudgeBudgetExceeded",
    "JudgeContextTooLong",
    "JudgeError",
    "JudgeHTTPError",
    "JudgeRateLimited",
    "JudgeRequestError",
    "JudgeTimeout",
    "JudgeUnavailable",
    "map_httpx_error",
    "status_error",
]


class JudgeError(EvaluatorError):
    """A judge gave no usable answer. ``retryable`` says whether another attempt may succeed;
    ``attempts`` is how many HTTP attempts were made before giving up (0 when none was)."""

    code = "judge_error"
    retryable = False
    attempts = 0


class JudgeUnavailable(JudgeError):
    code = "judge_unavailable"
    retryable = True


class JudgeTimeout(JudgeUnavailable):
    code = "judge_timeout"


class JudgeRateLimited(JudgeUnavailable):
    """HTTP 429. ``retry_after`` is the server's Retry-After in seconds, when it sent one."""

    code = "judge_rate_limited"

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class JudgeHTTPError(JudgeError):
    """A non-2xx answer. 5xx, 408 and 409 are worth retrying; other 4xx are not. ``format_refused``:
    a 400 or 422 whose error names the structured-output request (``response_format``, ``json_schema``,
    ``guided_json``, ``schema``...), i.e. a clear refusal of the format (:mod:`._dialects`)."""

    code = "judge_http_error"
    format_refused = False

    def __init__(self, message: str, *, status: int) -> None:
        super().__init__(message)
        self.status = status
        self.retryable = status >= 500 or status in (408, 409)


class JudgeContextTooLong(JudgeHTTPError):
    """The prompt and ``max_tokens`` do not fit the server's context window (its 400 said so, or the
    prompt could not be shortened enough). ``limit`` is the window's size in tokens when known."""

    code = "judge_context_length"

    def __init__(self, message: str, *, status: int = 400, limit: int | None = None) -> None:
        super().__init__(message, status=status)
        self.limit = limit
        self.retryable = False


class JudgeAuthError(JudgeHTTPError):
    code = "judge_auth"


class JudgeBadResponse(JudgeError):
    code = "judge_bad_response"


class JudgeRequestError(JudgeError):
    code = "judge_request"


class JudgeBudgetExceeded(JudgeError):
    code = "budget"


#: every exception class httpx exports, most specific first, with the JudgeError class it becomes
HTTPX_ERROR_MAP: tuple[tuple[type[Exception], type[JudgeError]], ...] = (
    (httpx.ConnectTimeout, JudgeTimeout),
    (httpx.ReadTimeout, JudgeTimeout),
    (httpx.WriteTimeout, JudgeTimeout),
    (httpx.PoolTimeout, JudgeTimeout),
    (httpx.TimeoutException, JudgeTimeout),
    (httpx.ConnectError, JudgeUnavailable),
    (httpx.ReadError, JudgeUnavailable),
    (httpx.WriteError, JudgeUnavailable),
    (httpx.CloseError, JudgeUnavailable),
    (httpx.NetworkError, JudgeUnavailable),
    (httpx.RemoteProtocolError, JudgeUnavailable),  # the server hung up mid-answer
    (httpx.ProxyError, JudgeUnavailable),
    (httpx.LocalProtocolError, JudgeRequestError),
    (httpx.ProtocolError, JudgeUnavailable),
    (httpx.UnsupportedProtocol, JudgeRequestError),
    (httpx.TransportError, JudgeUnavailable),
    (httpx.DecodingError, JudgeBadResponse),
    (httpx.TooManyRedirects, JudgeRequestError),
    (httpx.RequestError, JudgeUnavailable),
    (httpx.HTTPStatusError, JudgeHTTPError),
    (httpx.HTTPError, JudgeUnavailable),
    (httpx.InvalidURL, JudgeRequestError),
    (httpx.CookieConflict, JudgeRequestError),
    (httpx.RequestNotRead, JudgeRequestError),
    (httpx.ResponseNotRead, JudgeBadResponse),
    (httpx.StreamClosed, JudgeBadResponse),
    (httpx.StreamConsumed, JudgeBadResponse),
    (httpx.StreamError, JudgeBadResponse),
)


def map_httpx_error(exc: Exception, judge: str) -> JudgeError:
    """The :class:`JudgeError` for an httpx exception raised while calling ``judge``.

    The message carries the judge name and the exception's class, not ``str(exc)``: httpx messages
    can quote URLs and payload fragments, and a reason must never leak a provider payload.
    """
    for httpx_cls, judge_cls in HTTPX_ERROR_MAP:
        if isinstance(exc, httpx_cls):
            if judge_cls is JudgeHTTPError and isinstance(exc, httpx.HTTPStatusError):
                return status_error(judge, exc.response.status_code, None)
            if judge_cls is JudgeTimeout:
                return JudgeTimeout(f"judge {judge!r} timed out ({type(exc).__name__})")
            return judge_cls(f"judge {judge!r} request failed: {type(exc).__name__}")
    raise TypeError(f"not an httpx exception: {type(exc).__name__}")


def status_error(judge: str, status: int, retry_after: float | None) -> JudgeError:
    """The error for a non-2xx HTTP status."""
    if status == 429:
        wait = f"; Retry-After {retry_after:g} s" if retry_after is not None else ""
        return JudgeRateLimited(f"judge {judge!r} rate-limited us (HTTP 429{wait})", retry_after=retry_after)
    if status in (401, 403):
        return JudgeAuthError(
            f"judge {judge!r} refused the credentials (HTTP {status}); check its api_key_env variable",
            status=status,
        )
    return JudgeHTTPError(f"judge {judge!r} answered HTTP {status}", status=status)
