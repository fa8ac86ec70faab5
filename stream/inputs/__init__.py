"""Input formats: what the worker reads besides the native request event (docs/inputs.md).

The suite file's ``inputs:`` list names each topic and its format (``native``, ``json`` with a field
map, ``otlp_proto`` / ``otlp_json`` OpenTelemetry trace exports). A decoder turns one message into zero
or more request events (:class:`Item`); everything after that — routing, evaluators, judges, windows,
idempotency — is the pipeline's, the same for every format; a batch of messages to outcomes is :mod:`streameval.batch`.
"""

from __future__ import annotations

from ._base import Decoder, Item, NativeDecoder
from ._config import FORMATS, InputConfig, JsonInput, NativeInput, OtlpInput, input_issues
from ._genai import convention, to_event
from ._json_map import JsonDecoder
from ._otlp import Span, spans_from_json, spans_from_proto
from ._path import MISSING, Path, compile_path
from ._router import Inputs, OtlpDecoder, build_decoder, check_input_topics

__all__ = [
    "FORMATS",
    "MISSING",
    "Decoder",
    "InputConfig",
    "Inputs",
    "Item",
    "JsonDecoder",
    "JsonInput",
    "NativeDecoder",
    "NativeInput",
    "OtlpDecoder",
    "OtlpInput",
    "Path",
    "Span",
    "build_decoder",
    "check_input_topics",
    "compile_path",
    "convention",
    "input_issues",
    "spans_from_json",
    "spans_from_proto",
    "to_event",
]
