"""The curated public surface: what ``import streameval`` offers, and that it does not drag in Faust."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import subprocess
import sys

import streameval


def test_exported_names() -> None:
    assert sorted(streameval.__all__) == sorted(
        [
            "Aggregate",
            "Alert",
            "ConfigError",
            "DeadLetter",
            "Evaluator",
            "EvaluatorError",
            "EvaluatorResult",
            "EvaluatorTimeout",
            "EventError",
            "GradedResult",
            "Outcome",
            "Pipeline",
            "Processor",
            "RequestEvent",
            "ResultStore",
            "Score",
            "Settings",
            "Source",
            "StoreUnavailable",
            "StreamEvalError",
            "Suites",
            "__version__",
            "build_evaluator",
            "combine",
            "evaluator_names",
            "grade",
            "load_config",
            "load_settings",
            "parse_config",
            "register",
        ]
    )
    for name in streameval.__all__:
        assert getattr(streameval, name) is not None


def test_core_does_not_import_faust() -> None:
    # stream/ knows no Faust (the design card); only streameval.agents does.
    code = "import sys, streameval, streameval.cli, streameval.runtime; print('faust' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def _exception_classes() -> list[type[BaseException]]:
    """Every exception class defined in any module of the package (imported, then walked)."""
    found: dict[str, type[BaseException]] = {}
    for info in pkgutil.walk_packages(streameval.__path__, "streameval."):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for obj in vars(module).values():
            if inspect.isclass(obj) and issubclass(obj, BaseException) and obj.__module__ == module.__name__:
                found[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return list(found.values())


def test_every_error_is_a_streameval_error() -> None:
    classes = _exception_classes()
    names = {c.__name__ for c in classes}
    # the walk reaches every corner: the core, the API, the registry, the worker's in-flight batches
    assert {
        "ConfigError",
        "ApiError",
        "NameTaken",
        "RegistryFull",
        "PublishFailed",
        "Stalled",
        "JudgeError",
    } <= names
    outside = sorted(
        f"{c.__module__}.{c.__qualname__}" for c in classes if not issubclass(c, streameval.StreamEvalError)
    )
    assert outside == [], f"exceptions outside the StreamEvalError tree: {outside}"


def test_error_tree_lists_every_public_subtree() -> None:
    """streameval.errors draws the tree: every public exception is named there, or its listed base is."""
    from streameval import errors

    tree = errors.__doc__ or ""
    for cls in _exception_classes():
        if cls.__name__.startswith("_"):
            continue
        named = [
            c.__name__
            for c in cls.__mro__
            if issubclass(c, streameval.StreamEvalError) and c.__name__ in tree
        ]
        assert (named and named[0] != "StreamEvalError") or cls is streameval.StreamEvalError, cls


def test_inputs_exported_names() -> None:
    import streameval.inputs

    assert sorted(streameval.inputs.__all__) == sorted(
        [
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
    )
    for name in streameval.inputs.__all__:
        assert getattr(streameval.inputs, name) is not None


def test_batch_exported_names() -> None:
    """A batch of messages to outcomes (decode, then evaluate) sits above the decoders and the pool."""
    import streameval.batch

    assert sorted(streameval.batch.__all__) == [
        "Ready",
        "SLICE_S",
        "evaluate_batch",
        "evaluate_items",
        "evaluate_messages",
        "finish_batch",
    ]
    for name in streameval.batch.__all__:
        assert getattr(streameval.batch, name) is not None
