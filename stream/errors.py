"""The exception tree of streameval.

::

    StreamEvalError
    ├── ConfigError            a bad suite file or setting; fails at start with file and field path
    ├── EventError             an event that cannot be evaluated; goes to the dead-letter topic
    │   ├── EventTooLarge          kind "too_large"
    │   ├── InvalidJSON            kind "invalid_json" (bad UTF-8, bad JSON, duplicate keys, NaN)
    │   ├── SchemaViolation        kind "schema"
    │   ├── UnroutableEvent        kind "no_suite" or "unknown_suite"
    │   └── UnmatchedLabel         kind "unmatched_label": a human label whose result never came (streameval.features.labels)
    ├── EvaluatorError         raised by an evaluator; becomes a failed evaluator result, not a crash
    │   ├── EvaluatorTimeout
    │   ├── MissingField           the event lacks a field the evaluator needs (streameval.evaluators)
    │   ├── RegisteredNotFound     a registered evaluator that no longer exists (streameval.evaluators)
    │   ├── JudgeError             a judge gave no usable answer; its subtree: streameval.judges
    │   └── SandboxError           user code failed in the sandbox; its subtree: streameval.sandbox
    ├── StoreUnavailable       Redis cannot be reached; the worker waits and retries, never skips
    ├── ConnectFailed          Kafka or Redis refused us for good at start (credentials, TLS): one line, exit 1
    ├── BrokerUnavailable      no Kafka broker answered within the wait (the CLI exits 3)
    ├── UsageError             a command lacks something it needs (e.g. no Redis URL); exit 2
    │                          (LocalJudgeUnavailable: the local-judge extra or its model, streameval.judges.local)
    ├── FirstByteTimeout       a judge server sent no headers within first_byte_timeout_s (streameval.judges;
    │                          also an httpx.ReadTimeout, so the judge client retries it like one)
    ├── PublishFailed          the broker did not take a batch's messages (streameval.inflight; the worker exits)
    ├── MissingExtra           the semantic extra or a model package is missing (streameval.embedding)
    ├── NameTaken              a custom evaluator's name is in use (streameval.registry)
    ├── RegistryFull           the evaluator registry holds its maximum (streameval.registry)
    ├── Stalled                the /ready check: a batch waits too long for publication (streameval.api)
    ├── CheckError             a guard check refused before any evaluator ran (streameval.features.guard:
    │                          BadCheck 400, CheckTooLarge 413, NoGuardedSuite 404)
    ├── CheckRefused           the guard server refused a check (streameval.guard_client)
    └── ApiError               an API request refused with its HTTP status and code; its subtree:
                               streameval.api (BadRequest, Unauthorized, Forbidden, NotFound, NotRetained,
                               Conflict, ExecutionFailed, Unavailable)

``PublishFailed`` and ``Stalled`` also subclass ``RuntimeError``. Private exceptions that never leave
their module (a parser's control flow) subclass ``StreamEvalError`` too.

Errors raised by libraries (redis, orjson, pydantic, jsonschema) are translated into these at the
boundary where they happen; nothing matches on exception message strings.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = [
    "BrokerUnavailable",
    "ConfigError",
    "ConfigIssue",
    "ConnectFailed",
    "DeadLetterKind",
    "EvaluatorError",
    "EvaluatorTimeout",
    "EventError",
    "EventTooLarge",
    "InvalidJSON",
    "SchemaViolation",
    "StoreUnavailable",
    "StreamEvalError",
    "UnmatchedLabel",
    "UnroutableEvent",
    "UsageError",
]

#: Every reason an event can end in the dead-letter topic (the dead letter schema's "kind" enum).
DeadLetterKind = Literal[
    "too_large",
    "invalid_json",
    "schema",
    "no_suite",
    "unknown_suite",
    "internal",
    "unmatched_label",
    "undelivered",  # a notification no channel attempt delivered (docs/notify.md)
]


class StreamEvalError(Exception):
    """Base of every error streameval raises on purpose."""


@dataclass(frozen=True)
class ConfigIssue:
    """One problem in a config file: where (file, dotted field path, line) and what."""

    file: str
    path: str
    message: str
    line: int | None = None

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line is not None else self.file
        return f"{where}: {self.path or '<root>'}: {self.message}"


class ConfigError(StreamEvalError):
    """A config that cannot be used. ``issues`` lists every problem found, each with its field path."""

    def __init__(self, issues: list[ConfigIssue] | str) -> None:
        if isinstance(issues, str):
            issues = [ConfigIssue(file="<config>", path="", message=issues)]
        self.issues = issues
        lines = "\n".join(f"  {issue}" for issue in issues)
        super().__init__(f"invalid configuration ({len(issues)} problem(s)):\n{lines}")


class EventError(StreamEvalError):
    """An event that cannot be evaluated. Never fatal: the event goes to the dead-letter topic."""

    kind: DeadLetterKind = "internal"

    def __init__(self, reason: str, *, event_id: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.event_id = event_id


class EventTooLarge(EventError):
    kind: DeadLetterKind = "too_large"


class InvalidJSON(EventError):
    kind: DeadLetterKind = "invalid_json"


class SchemaViolation(EventError):
    kind: DeadLetterKind = "schema"


class UnmatchedLabel(EventError):
    kind: DeadLetterKind = "unmatched_label"


class UnroutableEvent(EventError):
    def __init__(self, reason: str, *, kind: DeadLetterKind, event_id: str | None = None) -> None:
        super().__init__(reason, event_id=event_id)
        self.kind = kind


class EvaluatorError(StreamEvalError):
    """An evaluator could not produce a score for this event (bad output, missing field, ...)."""

    code = "evaluator_error"


class EvaluatorTimeout(EvaluatorError):
    code = "timeout"


class StoreUnavailable(StreamEvalError):
    """The state store (Redis) did not answer; the caller retries with backoff."""


class ConnectFailed(StreamEvalError):
    """Kafka or Redis cannot be used with these settings (wrong credential, unknown CA, TLS mismatch).

    The message is one line naming the server, the mechanism and the cause, with no secret in it.
    """


class BrokerUnavailable(StreamEvalError):
    """No Kafka broker answered at the bootstrap servers within the wait."""


class UsageError(StreamEvalError):
    """A command lacks something it needs that is not a config file's field (a Redis URL, a broker)."""
