"""OTLP trace exports (``ExportTraceServiceRequest``) to :class:`Span` records, from protobuf or OTLP/JSON.

These are the two payloads the OpenTelemetry Collector's ``kafka`` exporter writes for traces:
``otlp_proto`` (its default) and ``otlp_json`` (hex trace and span ids, lowerCamelCase field names, 64-bit
integers as strings). OTLP/JSON written with the protobuf field names (``trace_id``) is read too.

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

from ..errors import SchemaViolation
from ._json_map import load_json

__all__ = ["Span", "spans_from_json", "spans_from_proto"]


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

    def document(self) -> dict[str, Any]:
        """The span as a JSON-ready dict (what a dead letter about this span carries)."""
        return {
            "traceId": self.trace_id, "spanId": self.span_id, "name": self.name, "endTimeUnixNano": str(self.end_ns),
            "attributes": self.attributes, "events": [{"name": n, "attributes": a} for n, a in self.events],
            "resource": self.resource,
        }  # fmt: skip


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
                out.append(Span(
                    span.trace_id.hex(), span.span_id.hex(), span.name, span.end_time_unix_nano,
                    _proto_attributes(span.attributes),
                    [(e.name, _proto_attributes(e.attributes)) for e in span.events],
                    resource,
                ))  # fmt: skip
    return out


# -- OTLP/JSON --------------------------------------------------------------------------------------
class _Shape(Exception):
    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")


def _get(node: dict[str, Any], camel: str, snake: str) -> Any:
    value = node.get(camel)
    return node.get(snake) if value is None else value


def _list(node: dict[str, Any], camel: str, snake: str, path: str) -> list[Any]:
    value = _get(node, camel, snake)
    if value is None:
        return []
    if not isinstance(value, list):
        raise _Shape(f"{path}.{camel}", f"expected an array, found {type(value).__name__}")
    return value


def _object(value: Any, path: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _Shape(path, f"expected an object, found {type(value).__name__}")
    return value


def _int(value: Any, path: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise _Shape(path, f"expected an integer, found {type(value).__name__}")
    try:
        return int(value)
    except ValueError:
        raise _Shape(path, f"expected an integer, found {str(value)[:40]!r}") from None


_DOUBLES = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}


def _json_value(node: Any, path: str) -> Any:
    value = _object(node, path)
    if "stringValue" in value or "string_value" in value:
        text = _get(value, "stringValue", "string_value")
        if not isinstance(text, str):
            raise _Shape(path, "stringValue is not a string")
        return text
    if "intValue" in value or "int_value" in value:
        return _int(_get(value, "intValue", "int_value"), f"{path}.intValue")
    if "doubleValue" in value or "double_value" in value:
        number = _get(value, "doubleValue", "double_value")
        if isinstance(number, str) and number in _DOUBLES:
            return _DOUBLES[number]
        if isinstance(number, bool) or not isinstance(number, int | float):
            raise _Shape(path, "doubleValue is not a number")
        return float(number)
    if "boolValue" in value or "bool_value" in value:
        flag = _get(value, "boolValue", "bool_value")
        if not isinstance(flag, bool):
            raise _Shape(path, "boolValue is not a boolean")
        return flag
    if "arrayValue" in value or "array_value" in value:
        inner = _object(_get(value, "arrayValue", "array_value"), f"{path}.arrayValue")
        return [_json_value(v, f"{path}.arrayValue.values[{i}]")
                for i, v in enumerate(_list(inner, "values", "values", f"{path}.arrayValue"))]  # fmt: skip
    if "kvlistValue" in value or "kvlist_value" in value:
        inner = _object(_get(value, "kvlistValue", "kvlist_value"), f"{path}.kvlistValue")
        return _json_attributes(_list(inner, "values", "values", f"{path}.kvlistValue"), f"{path}.kvlistValue.values")
    if "bytesValue" in value or "bytes_value" in value:
        data = _get(value, "bytesValue", "bytes_value")
        if not isinstance(data, str):
            raise _Shape(path, "bytesValue is not a base64 string")
        return data
    return None


def _json_attributes(pairs: list[Any], path: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for i, pair in enumerate(pairs):
        where = f"{path}[{i}]"
        kv = _object(pair, where)
        key = kv.get("key")
        if not isinstance(key, str):
            raise _Shape(f"{where}.key", "expected a string")
        out[key] = _json_value(kv.get("value", {}), f"{where}.value")
    return out


def _hex_id(value: Any, path: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise _Shape(path, f"expected a hex string, found {type(value).__name__}")
    return value.lower()


def spans_from_json(raw: bytes, *, max_bytes: int, max_depth: int) -> list[Span]:
    """Every span of an OTLP/JSON ``ExportTraceServiceRequest``. Raises :class:`EventError`."""
    document = load_json(raw, max_bytes=max_bytes, max_depth=max_depth)
    try:
        return _json_spans(_object(document, "$"))
    except _Shape as exc:
        raise SchemaViolation(f"not an OTLP/JSON trace export: {exc}") from None


def _json_spans(document: dict[str, Any]) -> list[Span]:
    if "resourceSpans" not in document and "resource_spans" not in document:
        raise _Shape("$", "no resourceSpans")
    out: list[Span] = []
    for r, resource_spans in enumerate(_list(document, "resourceSpans", "resource_spans", "$")):
        rpath = f"resourceSpans[{r}]"
        resource_spans = _object(resource_spans, rpath)
        resource_node = _object(resource_spans.get("resource") or {}, f"{rpath}.resource")
        resource = _json_attributes(_list(resource_node, "attributes", "attributes", f"{rpath}.resource"),
                                    f"{rpath}.resource.attributes")  # fmt: skip
        for s, scope_spans in enumerate(_list(resource_spans, "scopeSpans", "scope_spans", rpath)):
            spath = f"{rpath}.scopeSpans[{s}]"
            for k, span in enumerate(_list(_object(scope_spans, spath), "spans", "spans", spath)):
                out.append(_json_span(_object(span, f"{spath}.spans[{k}]"), f"{spath}.spans[{k}]", resource))
    return out


def _json_span(span: dict[str, Any], path: str, resource: dict[str, Any]) -> Span:
    name = span.get("name", "")
    if not isinstance(name, str):
        raise _Shape(f"{path}.name", "expected a string")
    end = _get(span, "endTimeUnixNano", "end_time_unix_nano")
    events = []
    for e, event in enumerate(_list(span, "events", "events", path)):
        event = _object(event, f"{path}.events[{e}]")
        event_name = event.get("name", "")
        if not isinstance(event_name, str):
            raise _Shape(f"{path}.events[{e}].name", "expected a string")
        events.append((event_name, _json_attributes(_list(event, "attributes", "attributes", f"{path}.events[{e}]"),
                                                    f"{path}.events[{e}].attributes")))  # fmt: skip
    return Span(
        _hex_id(_get(span, "traceId", "trace_id"), f"{path}.traceId"),
        _hex_id(_get(span, "spanId", "span_id"), f"{path}.spanId"),
        name,
        0 if end is None else _int(end, f"{path}.endTimeUnixNano"),
        _json_attributes(_list(span, "attributes", "attributes", path), f"{path}.attributes"),
        events,
        resource,
    )
