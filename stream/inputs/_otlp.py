"""OTLP trace exports (``ExportTraceServiceRequest``) to :class:`Span` records, from protobuf or OTLP/JSON.

These are the two payloads the OpenTelemetry Collector's ``kafka`` exporter writes for traces:
``otlp_proto`` (its default) and ``otlp_json`` (hex trace and span ids, lowerCamelCase field names, 64-bit
integers as strings). OTLP/JSON written with the protobuf field names (``trace_id``) is read too.

OTLP/JSON is read as strict JSON within ``STREAMEVAL_MAX_EVENT_DEPTH`` (an export nests ~10 levels before
its first attribute value; each level of an array or key-value list value adds 3-4), and its attribute
values nest at most :data:`MAX_VALUE_DEPTH` levels; protobuf's parser stops at 100 nested messages on its
own (~33 levels of values).

An export is decoded whole or not at all: bytes that are not an export (or an export whose JSON does
not have the OTLP shape) raise :class:`~streameval.errors.EventError` naming the problem, and the
caller dead-letters the message with its bytes. Decoding is linear in the size of the export.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from ..errors import SchemaViolation, StreamEvalError
from ._json_map import load_json

__all__ = ["MAX_VALUE_DEPTH", "Span", "spans_from_json", "spans_from_proto"]

#: how deep attribute values (arrays and key-value lists) may nest in an OTLP/JSON export
MAX_VALUE_DEPTH = 32


@dataclass(slots=True)
class Span:
    """One span with its attributes as plain Python values (arrays as lists, key-value lists as dicts)."""

    trace_id: str  # lowercase hex, "" when absent
    span_id: str
    name: str
    end_ns: int
    attributes: dict[str, Any]
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    resource: dict[str, Any] = field(default_factory=dict)
    parent_span_id: str = ""  # lowercase hex; "" (or all zeros) for a trace's root span
    status_code: int = 0  # OTLP StatusCode: 0 unset, 1 ok, 2 error
    status_message: str = ""
    start_ns: int = 0  # 0 when absent

    @property
    def is_root(self) -> bool:
        """No parent span: the trace's root (an agent run's outermost span)."""
        return not self.parent_span_id.strip("0")

    def document(self) -> dict[str, Any]:
        """The span as a JSON-ready dict (what a dead letter about this span carries)."""
        return {
            "traceId": self.trace_id,
            "spanId": self.span_id,
            "name": self.name,
            "endTimeUnixNano": str(self.end_ns),
            "attributes": self.attributes,
            "events": [{"name": n, "attributes": a} for n, a in self.events],
            "resource": self.resource,
            "parentSpanId": self.parent_span_id,
            "status": {"code": self.status_code, "message": self.status_message},
        }


# -- protobuf ---------------------------------------------------------------------------------------
def _proto_value(value: Any) -> Any:
    kind = value.WhichOneof("value")
    if kind == "string_value":
        return value.string_value
    if kind == "int_value":
        return value.int_value
    if kind == "double_value":
        return value.double_value
    if kind == "bool_value":
        return value.bool_value
    if kind == "array_value":
        return [_proto_value(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _proto_value(kv.value) for kv in value.kvlist_value.values}
    if kind == "bytes_value":
        return base64.b64encode(value.bytes_value).decode("ascii")
    return None


def _proto_attributes(pairs: Sequence[Any]) -> dict[str, Any]:
    return {kv.key: _proto_value(kv.value) for kv in pairs}


def spans_from_proto(raw: bytes) -> list[Span]:
    """Every span of a protobuf ``ExportTraceServiceRequest``. Raises :class:`SchemaViolation`."""
    request = ExportTraceServiceRequest()
    try:
        request.ParseFromString(raw)
    except DecodeError as exc:
        raise SchemaViolation(f"not an OTLP ExportTraceServiceRequest (protobuf): {exc}") from None
    if raw and not request.resource_spans:
        raise SchemaViolation(f"not an OTLP trace export: {len(raw)} bytes with no resource spans")
    out: list[Span] = []
    for resource_spans in request.resource_spans:
        resource = _proto_attributes(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                out.append(
                    Span(
                        span.trace_id.hex(),
                        span.span_id.hex(),
                        span.name,
                        span.end_time_unix_nano,
                        _proto_attributes(span.attributes),
                        [(e.name, _proto_attributes(e.attributes)) for e in span.events],
                        resource,
                        span.parent_span_id.hex(),
                        span.status.code,
                        span.status.message,
                        span.start_time_unix_nano,
                    )
                )
    return out


# -- OTLP/JSON --------------------------------------------------------------------------------------
# Paths for error messages are built only when something is wrong: each level re-raises with its step.
class _Shape(StreamEvalError):
    def __init__(self, message: str, path: str = "") -> None:
        super().__init__(message)
        self.message, self.path = message, path

    def under(self, step: str) -> _Shape:
        return _Shape(self.message, step + self.path)

    def __str__(self) -> str:
        return f"{self.path.lstrip('.') or '$'}: {self.message}"


def _get(node: dict[str, Any], camel: str, snake: str) -> Any:
    value = node.get(camel)
    return node.get(snake) if value is None else value


def _list(node: dict[str, Any], camel: str, snake: str) -> list[Any]:
    value = _get(node, camel, snake)
    if value is None:
        return []
    if not isinstance(value, list):
        raise _Shape(f"expected an array, found {type(value).__name__}", f".{camel}")
    return value


def _object(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _Shape(f"expected an object, found {type(value).__name__}")
    return value


def _int(value: Any, step: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise _Shape(f"expected an integer, found {type(value).__name__}", step)
    try:
        return int(value)
    except ValueError:
        raise _Shape(f"expected an integer, found {str(value)[:40]!r}", step) from None


_DOUBLES = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}


def _json_value(node: Any, depth: int) -> Any:
    if depth > MAX_VALUE_DEPTH:
        raise _Shape(f"attribute values nest more than {MAX_VALUE_DEPTH} levels deep")
    value = _object(node)
    if "stringValue" in value or "string_value" in value:
        text = _get(value, "stringValue", "string_value")
        if not isinstance(text, str):
            raise _Shape("not a string", ".stringValue")
        return text
    if "intValue" in value or "int_value" in value:
        return _int(_get(value, "intValue", "int_value"), ".intValue")
    if "doubleValue" in value or "double_value" in value:
        number = _get(value, "doubleValue", "double_value")
        if isinstance(number, str) and number in _DOUBLES:
            return _DOUBLES[number]
        if isinstance(number, bool) or not isinstance(number, int | float):
            raise _Shape("not a number", ".doubleValue")
        return float(number)
    if "boolValue" in value or "bool_value" in value:
        flag = _get(value, "boolValue", "bool_value")
        if not isinstance(flag, bool):
            raise _Shape("not a boolean", ".boolValue")
        return flag
    if "arrayValue" in value or "array_value" in value:
        try:
            values = _list(_object(_get(value, "arrayValue", "array_value")), "values", "values")
        except _Shape as exc:
            raise exc.under(".arrayValue") from None
        out = []
        for i, item in enumerate(values):
            try:
                out.append(_json_value(item, depth + 1))
            except _Shape as exc:
                raise exc.under(f".arrayValue.values[{i}]") from None
        return out
    if "kvlistValue" in value or "kvlist_value" in value:
        try:
            pairs = _list(_object(_get(value, "kvlistValue", "kvlist_value")), "values", "values")
            return _json_attributes(pairs, depth + 1, ".values")
        except _Shape as exc:
            raise exc.under(".kvlistValue") from None
    if "bytesValue" in value or "bytes_value" in value:
        data = _get(value, "bytesValue", "bytes_value")
        if not isinstance(data, str):
            raise _Shape("not a base64 string", ".bytesValue")
        return data
    return None


def _json_attributes(pairs: list[Any], depth: int = 0, step: str = ".attributes") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for i, pair in enumerate(pairs):
        try:
            kv = _object(pair)
            key = kv.get("key")
            if not isinstance(key, str):
                raise _Shape("expected a string", ".key")
            try:
                out[key] = _json_value(kv.get("value", {}), depth)
            except _Shape as exc:
                raise exc.under(".value") from None
        except _Shape as exc:
            raise exc.under(f"{step}[{i}]") from None
    return out


def _hex_id(value: Any, step: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise _Shape(f"expected a hex string, found {type(value).__name__}", step)
    return value.lower()


def spans_from_json(raw: bytes, *, max_bytes: int, max_depth: int) -> list[Span]:
    """Every span of an OTLP/JSON ``ExportTraceServiceRequest``. Raises :class:`EventError`."""
    document = load_json(raw, max_bytes=max_bytes, max_depth=max_depth)
    try:
        return _json_spans(_object(document))
    except _Shape as exc:
        raise SchemaViolation(f"not an OTLP/JSON trace export: {exc}") from None


def _json_spans(document: dict[str, Any]) -> list[Span]:
    if "resourceSpans" not in document and "resource_spans" not in document:
        raise _Shape("no resourceSpans")
    out: list[Span] = []
    for r, resource_spans in enumerate(_list(document, "resourceSpans", "resource_spans")):
        try:
            out.extend(_json_resource_spans(_object(resource_spans)))
        except _Shape as exc:
            raise exc.under(f".resourceSpans[{r}]") from None
    return out


def _json_resource_spans(resource_spans: dict[str, Any]) -> list[Span]:
    try:
        resource = _json_attributes(
            _list(_object(resource_spans.get("resource") or {}), "attributes", "attributes")
        )
    except _Shape as exc:
        raise exc.under(".resource") from None
    out: list[Span] = []
    for s, scope_spans in enumerate(_list(resource_spans, "scopeSpans", "scope_spans")):
        try:
            for k, span in enumerate(_list(_object(scope_spans), "spans", "spans")):
                try:
                    out.append(_json_span(_object(span), resource))
                except _Shape as exc:
                    raise exc.under(f".spans[{k}]") from None
        except _Shape as exc:
            raise exc.under(f".scopeSpans[{s}]") from None
    return out


def _json_span(span: dict[str, Any], resource: dict[str, Any]) -> Span:
    name = span.get("name", "")
    if not isinstance(name, str):
        raise _Shape("expected a string", ".name")
    end = _get(span, "endTimeUnixNano", "end_time_unix_nano")
    start = _get(span, "startTimeUnixNano", "start_time_unix_nano")
    events = []
    for e, event in enumerate(_list(span, "events", "events")):
        try:
            event = _object(event)
            event_name = event.get("name", "")
            if not isinstance(event_name, str):
                raise _Shape("expected a string", ".name")
            events.append((event_name, _json_attributes(_list(event, "attributes", "attributes"))))
        except _Shape as exc:
            raise exc.under(f".events[{e}]") from None
    return Span(
        _hex_id(_get(span, "traceId", "trace_id"), ".traceId"),
        _hex_id(_get(span, "spanId", "span_id"), ".spanId"),
        name,
        0 if end is None else _int(end, ".endTimeUnixNano"),
        _json_attributes(_list(span, "attributes", "attributes")),
        events,
        resource,
        _hex_id(_get(span, "parentSpanId", "parent_span_id"), ".parentSpanId"),
        *_json_status(span.get("status")),
        0 if start is None else _int(start, ".startTimeUnixNano"),
    )


_STATUS_CODES = {"STATUS_CODE_UNSET": 0, "STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2}


def _json_status(status: Any) -> tuple[int, str]:
    """(code, message) of a span's ``status`` (the code as a number or its enum name)."""
    if status is None:
        return 0, ""
    try:
        status = _object(status)
    except _Shape as exc:
        raise exc.under(".status") from None
    code, message = status.get("code", 0), status.get("message") or ""
    if isinstance(code, str) and code in _STATUS_CODES:
        code = _STATUS_CODES[code]
    elif code is not None:
        code = _int(code, ".status.code")
    if not isinstance(message, str):
        raise _Shape("expected a string", ".status.message")
    return code or 0, message
