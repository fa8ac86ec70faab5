"""The feedback topic's messages as labels: the suite file's ``feedback:`` block and its decoder."""

from __future__ import annotations

import base64
import logging
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..._util import clip
from ..._version import __version__
from ...errors import EventError, SchemaViolation
from ...inputs._json_map import load_json
from ...inputs._path import MISSING, compile_path
from ...models import (
    DeadLetter,
    DeadLetterSource,
    Feedback,
    format_time,
)
from ...strictjson import DEFAULT_MAX_EVENT_DEPTH

log = logging.getLogger(__name__)

_FEEDBACK_FIELDS = tuple(name for name in Feedback.model_fields if name != "schema_version")


# -- the feedback input --------------------------------------------------------------------------------
class FeedbackInput(BaseModel):
    """The suite file's optional ``feedback:`` block: how messages of the feedback topic become labels.

    ``format: native`` reads feedback v1 documents; ``format: json`` reads any JSON with a field ``map``
    (paths as in ``inputs:``, docs/inputs.md), e.g. a thumbs-up stream as it is.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    format: Literal["native", "json"] = "native"
    map: dict[str, str] = Field(default_factory=dict, description="feedback field -> path in the message")
    optional: list[str] = Field(default_factory=list, description="mapped fields whose path may find nothing")
    set: dict[str, Any] = Field(
        default_factory=dict, description="feedback fields with one value for every label"
    )
    max_message_bytes: int = Field(default=64 << 10, ge=1, description="larger messages are too_large")


def feedback_issues(spec: FeedbackInput) -> list[tuple[tuple[str | int, ...], str]]:
    """Problems pydantic cannot see (paths relative to the ``feedback`` block)."""
    issues: list[tuple[tuple[str | int, ...], str]] = []
    valid = ", ".join(_FEEDBACK_FIELDS)
    if spec.format == "native" and (spec.map or spec.set or spec.optional):
        issues.append(((("map",)), "map, optional and set need format: json"))
    for name, path in spec.map.items():
        if name not in _FEEDBACK_FIELDS:
            issues.append((("map", name), f"{name!r} is not a feedback field; fields: {valid}"))
            continue
        try:
            compile_path(path)
        except ValueError as exc:
            issues.append((("map", name), str(exc)))
    for name in spec.set:
        if name not in _FEEDBACK_FIELDS or name == "id":
            issues.append(
                (("set", name), f"{name!r} cannot be set for every label; fields: {valid} (not id)")
            )
    for k, name in enumerate(spec.optional):
        if name not in spec.map:
            issues.append((("optional", k), f"{name!r} is not in map"))
    if spec.format == "json" and "id" not in spec.map:
        issues.append((("map",), "map needs 'id' (the labelled event's id)"))
    return issues


class FeedbackDecoder:
    """One message of the feedback topic -> :class:`Feedback`, or :class:`EventError` (a dead letter)."""

    def __init__(
        self, spec: FeedbackInput | None = None, *, max_depth: int = DEFAULT_MAX_EVENT_DEPTH
    ) -> None:
        self.spec = spec or FeedbackInput()
        self.max_depth = max_depth
        self._paths = [(name, compile_path(path)) for name, path in self.spec.map.items()]

    def decode(self, raw: bytes) -> Feedback:
        document = load_json(raw, max_bytes=self.spec.max_message_bytes, max_depth=self.max_depth)
        if self.spec.format == "json":
            label: dict[str, Any] = dict(self.spec.set)
            missing = []
            for name, path in self._paths:
                value = path.find(document)
                if value is MISSING or value is None:
                    if name not in self.spec.optional:
                        missing.append(f"map.{name}: {path} found {'null' if value is None else 'nothing'}")
                    continue
                if name == "id" and isinstance(value, int | float) and not isinstance(value, bool):
                    value = str(value)
                label[name] = value
            if missing:
                raise SchemaViolation(
                    "; ".join(missing), event_id=label.get("id") if isinstance(label.get("id"), str) else None
                )
            document = label
        if not isinstance(document, dict):
            raise SchemaViolation("a label is a JSON object (feedback v1)")
        try:
            return Feedback.model_validate(document)
        except ValidationError as exc:
            event_id = document.get("id") if isinstance(document.get("id"), str) else None
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or '<label>'}: {e['msg']}" for e in exc.errors()
            )
            raise SchemaViolation(f"not a feedback v1 label: {problems}", event_id=event_id) from None


def decode_error_letter(
    raw: bytes, exc: EventError, topic: str | None, partition: int | None, offset: int | None, now: float
) -> DeadLetter:
    """The dead letter of a message of the feedback topic that is not a label."""
    return DeadLetter(
        raw=base64.b64encode(raw).decode("ascii"),
        reason=clip(f"feedback: {exc.reason}"),
        kind=exc.kind,
        event_id=exc.event_id,
        source=DeadLetterSource(topic=topic, partition=partition, offset=offset),
        failed_at=format_time(now),
        pipeline_version=__version__,
    )
