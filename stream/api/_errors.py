"""Errors the API answers with, each an HTTP status plus the envelope ``code`` (the evaluator-module spec §9).

::

    ApiError                 status / code / message (+ optional data)
    ├── BadRequest           400 / 400      invalid input; ``data.errors`` lists [{path, message}]
    ├── Unauthorized         401 / 401      missing or wrong bearer token
    ├── Forbidden            403 / 403      presets are read-only; writes disabled without a token
    ├── NotFound             404 / 503001   the evaluator-module spec: 评估器不存在 (evaluator does not exist)
    ├── NotRetained          404 / 404      a result by id that is not (or no longer) kept in Redis
    ├── Conflict             409 / 409      the name is taken
    ├── ExecutionFailed      422 / 503002   the evaluator-module spec: 评估器执行失败 (evaluator execution failed)
    └── Unavailable          503 / 503      Redis cannot be reached
"""

from __future__ import annotations

from typing import Any, ClassVar

from ..errors import StreamEvalError

__all__ = [
    "EXECUTION_FAILED",
    "NOT_FOUND",
    "ApiError",
    "BadRequest",
    "Conflict",
    "ExecutionFailed",
    "Forbidden",
    "NotFound",
    "NotRetained",
    "Unauthorized",
    "Unavailable",
]

#: the evaluator-module spec §9 error codes
NOT_FOUND = 503001
EXECUTION_FAILED = 503002


class ApiError(StreamEvalError):
    """An API request refused: its HTTP status, its error code and message (docs/api.md)."""

    status: ClassVar[int] = 500
    code: ClassVar[int] = 500

    def __init__(self, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.data = data

    def envelope(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "data": self.data}


class BadRequest(ApiError):
    status = code = 400

    def __init__(self, message: str, errors: list[dict[str, str]] | None = None) -> None:
        super().__init__(message, {"errors": errors or [{"path": "$", "message": message}]})


class Unauthorized(ApiError):
    status = code = 401


class Forbidden(ApiError):
    status = code = 403


class NotFound(ApiError):
    status, code = 404, NOT_FOUND


class NotRetained(ApiError):
    """A graded result asked for by id that Redis does not hold: never recorded, or past its retention.
    A plain 404, not the evaluator module's 503001 (which means "evaluator does not exist")."""

    status = code = 404


class Conflict(ApiError):
    status = code = 409


class ExecutionFailed(ApiError):
    status, code = 422, EXECUTION_FAILED


class Unavailable(ApiError):
    status = code = 503
