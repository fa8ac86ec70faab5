"""The suite file's ``inputs:`` list: which topics the worker reads, and how each one's messages become
request events. Validated with the rest of the suite file (file, line and field path on every problem).

.. code-block:: yaml

    inputs:
      - {topic: evals.requests, format: native}
      - topic: otlp_spans                      # what the Collector's kafka exporter writes
        format: otlp_proto                     # or otlp_json
        category_attribute: app.eval.category  # span (else resource) attribute -> event category
        tag_attributes: [deployment.environment]
      - topic: app.completions
        format: json
        map: {id: $.request_id, model: $.model, output: $.choices[0].text, input: $.prompt,
              usage.input_tokens: $.usage.prompt_tokens, usage.output_tokens: $.usage.completion_tokens}
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..blocks import UsageBlock
from ..models import RequestEvent
from ._path import compile_path

__all__ = [
    "DEFAULT_MAX_MESSAGE_BYTES",
    "FORMATS",
    "InputConfig",
    "JsonInput",
    "NativeInput",
    "OtlpInput",
    "input_issues",
]

FORMATS = ("native", "json", "otlp_proto", "otlp_json")
#: a Kafka message larger than this is dead-lettered (too_large) before it is parsed; each request event
#: made from it is still held to STREAMEVAL_MAX_EVENT_BYTES
DEFAULT_MAX_MESSAGE_BYTES = 4 << 20
#: the usage block's fields a ``json`` input's ``map`` may set one by one (``usage.input_tokens``)
USAGE_FIELDS = tuple(f"usage.{name}" for name in UsageBlock.model_fields)
#: request fields a ``json`` input's ``map`` may set
MAPPABLE = tuple(name for name in RequestEvent.model_fields if name != "schema_version") + USAGE_FIELDS
REQUIRED = ("id", "model", "output")

Topic = Annotated[str, Field(min_length=1, max_length=249, pattern=r"^[A-Za-z0-9._\-]+$")]


class _Input(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    topic: Topic = Field(description="Kafka topic to read")


class NativeInput(_Input):
    """The request event itself, held to ``STREAMEVAL_MAX_EVENT_BYTES`` like the default input."""

    format: Literal["native"]


class _Parsed(_Input):
    max_message_bytes: int = Field(
        default=DEFAULT_MAX_MESSAGE_BYTES, ge=1, description="larger messages are too_large"
    )


class JsonInput(_Parsed):
    format: Literal["json"]
    map: dict[str, str] = Field(description="request field -> path in the message ($.a.b[0])")
    optional: list[str] = Field(default_factory=list, description="mapped fields whose path may find nothing")
    set: dict[str, Any] = Field(
        default_factory=dict, description="request fields with the same value on every event"
    )
    derive_id: Literal["sha256"] | None = Field(
        default=None, description="with no id in map: sha256 (hex) of the message's bytes"
    )


class OtlpInput(_Parsed):
    format: Literal["otlp_proto", "otlp_json"]
    category_attribute: str | None = Field(default=None, description="span or resource attribute -> category")
    tag_attributes: list[str] = Field(default_factory=list, description="span or resource attributes -> tags")


InputConfig = Annotated[NativeInput | JsonInput | OtlpInput, Field(discriminator="format")]


def input_issues(inputs: list[Any]) -> Iterator[tuple[tuple[str | int, ...], str]]:
    """Problems pydantic cannot see: repeated topics, bad map paths, unmappable or missing fields."""
    seen: set[str] = set()
    for i, spec in enumerate(inputs):
        base: tuple[str | int, ...] = ("inputs", i)
        if spec.topic in seen:
            yield (*base, "topic"), f"topic {spec.topic!r} is read by an earlier input already"
        seen.add(spec.topic)
        if isinstance(spec, JsonInput):
            yield from _json_issues(spec, base)


def _json_issues(spec: JsonInput, base: tuple[str | int, ...]) -> Iterator[tuple[tuple[str | int, ...], str]]:
    valid = ", ".join(f for f in MAPPABLE if not f.startswith("usage.")) + ", usage.<field> (one of usage's)"
    for field, path in spec.map.items():
        if field not in MAPPABLE:
            yield (*base, "map", field), f"{field!r} is not a request field; fields: {valid}"
            continue
        try:
            compile_path(path)
        except ValueError as exc:
            yield (*base, "map", field), str(exc)
    for field in spec.set:
        if field == "id":
            yield (*base, "set", field), "every event needs its own id: map it or use derive_id: sha256"
        elif field not in MAPPABLE:
            yield (*base, "set", field), f"{field!r} is not a request field; fields: {valid}"
        elif field in spec.map:
            yield (*base, "set", field), f"{field!r} is both mapped and set; keep one"
    for k, field in enumerate(spec.optional):
        if field not in spec.map:
            yield (*base, "optional", k), f"{field!r} is not in map"
        elif field in REQUIRED:
            yield (*base, "optional", k), f"{field!r} is required and cannot be optional"
    if "usage" in {*spec.map, *spec.set} and any(f.startswith("usage.") for f in (*spec.map, *spec.set)):
        yield (*base, "map", "usage"), "usage is mapped whole and field by field (usage.*); keep one"
    if "id" in spec.map and spec.derive_id is not None:
        yield (*base, "derive_id"), "map sets id already; drop derive_id or map.id"
    for field in REQUIRED:
        if field not in spec.map and field not in spec.set and not (field == "id" and spec.derive_id):
            hint = " (or derive_id: sha256)" if field == "id" else ""
            yield (*base, "map"), f"map needs {field!r}{hint}"
