"""The curated public surface: what ``import streameval`` offers, and that it does not drag in Faust."""

from __future__ import annotations

import subprocess
import sys

import streameval


def test_exported_names() -> None:
    assert sorted(streameval.__all__) == sorted(
        [
            "Aggregate", "Alert", "ConfigError", "DeadLetter", "Evaluator", "EvaluatorError", "EvaluatorResult",
            "EvaluatorTimeout", "EventError", "GradedResult", "Outcome", "Pipeline", "Processor", "RequestEvent",
            "ResultStore", "Score", "Settings", "Source", "StoreUnavailable", "StreamEvalError", "Suites",
            "__version__", "build_evaluator", "combine", "evaluator_names", "grade", "load_config",
            "load_settings", "parse_config", "register",
        ]
    )  # fmt: skip
    for name in streameval.__all__:
        assert getattr(streameval, name) is not None


def test_core_does_not_import_faust() -> None:
    # stream/ knows no Faust (the design card); only streameval.agents does.
    code = "import sys, streameval, streameval.cli; print('faust' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_every_error_is_a_streameval_error() -> None:
    for name in ("ConfigError", "EvaluatorError", "EvaluatorTimeout", "EventError", "StoreUnavailable"):
        assert issubclass(getattr(streameval, name), streameval.StreamEvalError)


def test_inputs_exported_names() -> None:
    import streameval.inputs

    assert sorted(streameval.inputs.__all__) == sorted(
        [
            "FORMATS", "MISSING", "Decoder", "InputConfig", "Inputs", "Item", "JsonDecoder", "JsonInput", "NativeDecoder",
            "NativeInput", "OtlpDecoder", "OtlpInput", "Path", "Span", "build_decoder", "check_input_topics",
            "compile_path", "convention", "evaluate_items", "evaluate_messages", "input_issues", "spans_from_json", "spans_from_proto",
            "to_event",
        ]
    )  # fmt: skip
    for name in streameval.inputs.__all__:
        assert getattr(streameval.inputs, name) is not None
