"""A suite's version (docs/versions.md): the hash of its resolved definition, what changes a result's
meaning and nothing else (routing, names for people and the judges' transport are left out)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .config_models import BoundEvaluator, SessionConfig, SuiteConfig
from .grading import GRADE_SCALES
from .judges import JudgeConfig
from .versioning import definition_hash

__all__ = ["judge_prompts_definition", "suite_definition", "suite_version"]

# what does not change a result's meaning: routing, names for people, the judges' transport, and how the
# guard turns a result into a decision (docs/guard.md)
_ROUTING_FIELDS = frozenset({"name", "match", "default", "label", "shadow", "guard"})
_JUDGE_MEANING = (
    "protocol",
    "model",
    "temperature",
    "max_tokens",
    "weight",
    "scale",
    "blind",
    "enabled",
    "structured",
)


def judge_prompts_definition() -> dict[str, Any]:
    """The built-in rubrics and prompt templates the judges are asked with (their text is part of a
    judged suite's meaning: a new template is a new version). Computed once per process."""
    global _PROMPTS
    if _PROMPTS is None:
        from dataclasses import asdict

        from .judges import _prompts, _rubrics

        def plain(value: Any) -> Any:
            if hasattr(value, "__dataclass_fields__"):
                return asdict(value)
            if isinstance(value, dict):
                return {k: plain(v) for k, v in value.items()}
            if isinstance(value, (list, tuple)):
                return [plain(v) for v in value]
            return value

        tables = {
            name: plain(getattr(_rubrics, name))
            for name in _rubrics.__all__
            if isinstance(getattr(_rubrics, name), dict)
        }
        texts = {
            name: value
            for name, value in vars(_prompts).items()
            if isinstance(value, str) and name.lstrip("_").isupper()
        }
        _PROMPTS = {"templates": definition_hash(texts), "rubrics": definition_hash(tables)}
    return _PROMPTS


_PROMPTS: dict[str, Any] | None = None


def suite_definition(
    suite: SuiteConfig | SessionConfig,
    bound: Sequence[BoundEvaluator],
    judges: Sequence[JudgeConfig],
    registry: Mapping[str, str | None] | None = None,
) -> dict[str, Any]:
    """A suite's resolved definition, the input of its version: every field of its config except routing
    and labels, each evaluator's validated params (defaults filled in, a code evaluator's source), the
    judge models and settings that change an answer, the prompt templates and rubrics, and the version of
    each registered evaluator (``registry``: reference -> ``id@n``, when the worker knows them)."""
    # a session's match and key say which turns form it: part of its meaning; only its name is not
    data = suite.model_dump(
        mode="json", exclude=set(_ROUTING_FIELDS) if isinstance(suite, SuiteConfig) else {"name"}
    )
    if data.get("redact", 0) is None:  # without redaction a suite keeps its version (parse_config adds it)
        del data["redact"]
    by_name = {b.name: b for b in bound}
    steps = []
    for spec in suite.evaluators:
        step = spec.model_dump(mode="json")
        step["name"] = spec.result_name
        built = by_name.get(spec.result_name)
        if built is not None:
            step["params"] = built.evaluator.params.model_dump(mode="json")
        if spec.evaluator == "registered" and registry is not None:
            ref = str(spec.params.get("id") or spec.params.get("name") or "")
            step["registered_version"] = registry.get(ref)
        steps.append(step)
    data["evaluators"] = steps
    if suite.judge is not None:
        data["judge"] = suite.judge.model_dump(mode="json", exclude={"backpressure"})
        chosen = [j for j in judges if suite.judge.judges is None or j.name in suite.judge.judges]
        data["judges"] = {j.name: {k: getattr(j, k) for k in _JUDGE_MEANING} for j in chosen}
        data["prompts"] = judge_prompts_definition()
    data["grade_scale"] = [
        [floor if floor != float("-inf") else None, name] for floor, name in GRADE_SCALES[suite.grading]
    ]
    return data


def suite_version(
    suite: SuiteConfig | SessionConfig,
    bound: Sequence[BoundEvaluator],
    judges: Sequence[JudgeConfig],
    registry: Mapping[str, str | None] | None = None,
) -> str:
    """The suite's version: :func:`~streameval.versioning.definition_hash` of :func:`suite_definition`."""
    return definition_hash(suite_definition(suite, bound, judges, registry))
