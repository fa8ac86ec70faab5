"""Suite configuration: a YAML file validated at start, every error reported with file, line and path.

.. code-block:: yaml

    suites:
      - name: qa
        match: {category: [qa_simple], model: ["gpt-4*"], tags: [prod]}   # all given keys must match
        threshold: 0.6            # pass when the weighted score >= threshold
        grading: levels           # levels (the multi-judge spec) | letters (the report-quality spec)
        evaluators:
          - {evaluator: exact_match, weight: 1}
          - {evaluator: similarity, params: {algorithm: levenshtein, threshold: 0.8}, weight: 2}
          - {evaluator: regex, name: order_id, params: {pattern: 'ORD-\\d{6}'}, weight: 0, gate: true}
      - name: fallback
        default: true             # used when no other suite matches

Hard gates: an evaluator with ``gate: true`` that does not pass (or cannot score the event) fails the
result whatever the weighted mean; the grade is the scale's lowest and ``reason`` names the gate
(:func:`~streameval.grading.apply_gates`). A gate may have weight 0: it then only gates.

Routing: an event's explicit ``suite`` wins; otherwise the first suite whose ``match`` accepts the
event; otherwise the ``default`` suite; otherwise the event is dead-lettered (kind ``no_suite``).
Match values are shell-style globs (``gpt-4*``); within a key any value may match, across keys all must.

LLM judges (docs/judges.md): a top-level ``judges:`` list of :class:`~streameval.judges.JudgeConfig`
and, per suite, a ``judge:`` block (:class:`~streameval.judges.SuiteJudgeConfig`). Checked here: judge
names are unique and exist, each suite panel's enabled weights sum to 1, fallback evaluators exist.

Windows and alerts (docs/statistics.md): an optional top-level ``windowing:`` block
(:class:`~streameval.windowing.WindowingConfig`) and a top-level ``alerts:`` list of
:class:`~streameval.alerts.AlertRule`; names must be unique. Whether each rule's ``window`` is one of
``STREAMEVAL_WINDOWS`` is checked when the worker starts (the file does not know the settings).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from ._util import unknown_name
from .config_issues import (
    CODE_LINE,
    input_error,
    judge_issues,
    kind_of,
    line_of,
    loc_to_path,
    run_issues,
    text_line,
)
from .config_loaded import (
    LoadedConfig,
    Session,
    Shadow,
    ShadowRouting,
    Suite,
    Suites,
    shadow_routings,
)
from .config_models import (
    DEFAULT_SESSION_EVALUATORS,
    BoundEvaluator,
    EvaluatorSpec,
    Match,
    SessionConfig,
    ShadowConfig,
    StreamEvalConfig,
    SuiteConfig,
)
from .config_versions import suite_definition, suite_version
from .errors import ConfigError, ConfigIssue
from .evaluators import build_evaluator
from .features.guard import guard_issues
from .features.labels import feedback_issues
from .features.notify._config import notify_issues
from .features.redact import Redactors, build_redactors, effective, redact_issues
from .features.segments import SLICE_METRICS
from .features.sessions.paths import compile_event_path
from .features.usage import load_prices, usage_issues
from .inputs import input_issues
from .versioning import definition_hash

__all__ = [
    "DEFAULT_SESSION_EVALUATORS",
    "BoundEvaluator",
    "EvaluatorSpec",
    "LoadedConfig",
    "Match",
    "Session",
    "SessionConfig",
    "Shadow",
    "ShadowConfig",
    "ShadowRouting",
    "StreamEvalConfig",
    "Suite",
    "SuiteConfig",
    "Suites",
    "add_shadow_file",
    "load_config",
    "parse_config",
    "parse_config_text",
    "read_config_text",
    "redaction",
    "shadow_routings",
    "suite_definition",
    "suite_version",
]


def add_shadow_file(suites: LoadedConfig, path: str | Path, *, sample_rate: float = 1.0) -> None:
    """``streameval worker --shadow FILE``: each suite of FILE becomes a shadow candidate of the live suite of
    the same name (sampled at ``sample_rate``); FILE's judges join the live ones for the shadows. Raises
    :class:`ConfigError` for a suite FILE names that the live config lacks, or a candidate identical to it."""
    _, extra = load_config(path)
    problems = []
    for k, candidate in enumerate(extra.all):
        live = suites.by_name.get(candidate.name)
        if live is None:
            problems.append(
                ConfigIssue(
                    file=str(path),
                    path=f"suites[{k}].name",
                    message=unknown_name("live suite", candidate.name, suites.by_name),
                )
            )
        elif candidate.version == live.version or candidate.version in {
            s.suite.version for s in live.shadows
        }:
            problems.append(
                ConfigIssue(
                    file=str(path),
                    path=f"suites[{k}]",
                    message=f"version {candidate.version} is already the live suite's or one of its shadows",
                )
            )
        else:
            _with_shadows(live, (*live.shadows, Shadow(candidate, sample_rate)))
    if problems:
        raise ConfigError(problems)
    suites.shadow_judges = tuple(j for j in extra.judges if j.name not in {x.name for x in suites.judges})


def parse_config(
    data: Any, *, file: str = "<config>", node: yaml.Node | None = None
) -> tuple[StreamEvalConfig, LoadedConfig]:
    """Validate a config document and build every evaluator. Raises :class:`ConfigError` with all issues."""

    def issue(loc: Sequence[str | int], message: str) -> ConfigIssue:
        message = message.removeprefix("Value error, ")  # pydantic's wording for a validator's ValueError
        line = text_line(node, loc, message)
        if line is not None:
            message = CODE_LINE.sub(lambda m: f"(line {m.group(1)} of the code)", message, count=1)
        return ConfigIssue(file=file, path=loc_to_path(loc), message=message, line=line or line_of(node, loc))

    try:
        config = StreamEvalConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(
            [issue(*input_error(e["loc"], e["type"], e["msg"], e.get("ctx"))) for e in exc.errors()]
        ) from None

    issues: list[ConfigIssue] = [issue(loc, message) for loc, message in input_issues(config.inputs)]
    issues += [issue(("feedback", *loc), message) for loc, message in feedback_issues(config.feedback)]
    issues += [issue(loc, message) for loc, message in run_issues(config)]
    issues += [
        issue(loc, message)
        for loc, message in redact_issues(
            config.redact,
            [(("suites", i), s.redact) for i, s in enumerate(config.suites)]
            + [(("sessions", i), s.redact) for i, s in enumerate(config.sessions)],
        )
    ]
    issues += [issue(loc, message) for loc, message in notify_issues(config.notify)]
    issues += [
        issue(loc, message)
        for i, suite_cfg in enumerate(config.suites)
        if suite_cfg.guard is not None
        for loc, message in guard_issues(
            suite_cfg.guard,
            ("suites", i),
            [(spec.result_name, spec.evaluator, spec.weight) for spec in suite_cfg.evaluators],
            has_judge=suite_cfg.judge is not None,
            redacts=effective(config.redact, suite_cfg.redact) is not None,
        )
    ]
    prices = config.prices
    if prices is not None:
        prices, problems = load_prices(prices, file)
        for where, loc, message in problems:  # the prices file's own problems name that file
            issues.append(
                issue(loc, message) if where == file else ConfigIssue(where, loc_to_path(loc), message)
            )
    if prices is not None or config.budgets:
        routes = [None if s.match is None or s.match.model is None else s.match.model for s in config.suites]
        issues += [
            issue(loc, message)
            for loc, message in usage_issues(
                prices,
                config.budgets,
                routes,
                [s.name for s in config.suites],
                list(config.segments.dimensions) if config.segments is not None else [],
            )
        ]
    dimensions = set(config.segments.dimensions) if config.segments is not None else set()
    issues += [
        issue(
            ("alerts", i, "segments", j), f"no dimension {name!r} in segments: (known: {sorted(dimensions)})"
        )
        for i, rule in enumerate(config.alerts)
        for j, name in enumerate(rule.segments or ())
        if name not in dimensions
    ]
    issues += [
        issue(
            ("alerts", i, "metric"),
            f"{rule.metric} is not kept per slice; a rule with segments: watches {', '.join(SLICE_METRICS)}",
        )
        for i, rule in enumerate(config.alerts)
        if rule.segments and rule.metric not in SLICE_METRICS
    ]

    def build(scoring: SuiteConfig | SessionConfig, base: tuple[str | int, ...]) -> Suite:
        """Build one suite's (or session's) evaluators, adding any problem to ``issues``."""
        bound: list[BoundEvaluator] = []
        names: set[str] = set()
        for j, spec in enumerate(scoring.evaluators):
            loc = (*base, "evaluators", j)
            if spec.result_name in names:
                issues.append(
                    issue(
                        (*loc, "name"),
                        f"evaluator name {spec.result_name!r} used twice in this {kind_of(base)}; set a distinct 'name'",
                    )
                )
            names.add(spec.result_name)
            try:
                evaluator = build_evaluator(spec.evaluator, spec.params)
            except KeyError as exc:
                issues.append(issue((*loc, "evaluator"), str(exc.args[0])))
                continue
            except ValidationError as exc:
                issues.extend(issue((*loc, "params", *e["loc"]), e["msg"]) for e in exc.errors())
                continue
            bound.append(BoundEvaluator(spec.result_name, spec.weight, evaluator, spec.gate))
        if not any(spec.weight > 0 for spec in scoring.evaluators):
            issues.append(
                issue((*base, "evaluators"), "weights sum to 0; at least one evaluator needs a weight > 0")
            )
        if scoring.judge is not None:
            issues.extend(
                issue(loc, message) for loc, message in judge_issues(config, scoring.judge, base, names)
            )
        definition = suite_definition(scoring, bound, config.judges)
        redaction = effective(config.redact, scoring.redact)
        if redaction is not None:  # what the judges see is part of the suite's meaning (docs/redact.md)
            definition["redact"] = redaction.model_dump(mode="json", exclude={"dead_letters", "hash_key_env"})
        return Suite(scoring, tuple(bound), definition_hash(definition), definition)

    def with_shadows(suite: Suite, suite_cfg: SuiteConfig, base: tuple[str | int, ...]) -> Suite:
        """The suite with its ``shadow:`` candidates built (docs/versions.md)."""
        shadows: list[Shadow] = []
        for k, candidate in enumerate(suite_cfg.shadow):
            where: tuple[str | int, ...] = (*base, "shadow", k)
            try:
                shadow_cfg = SuiteConfig.model_validate(
                    {**candidate.applied_to(suite_cfg), "label": candidate.label}
                )
            except ValidationError as exc:
                issues.extend(issue((*where, *e["loc"]), e["msg"]) for e in exc.errors())
                continue
            built = build(shadow_cfg, where)
            if built.version == suite.version:
                issues.append(
                    issue(
                        where,
                        f"the candidate's definition is the live suite's (version {suite.version}); "
                        "a shadow must change something",
                    )
                )
            elif built.version in {s.suite.version for s in shadows}:
                issues.append(
                    issue(where, f"the same definition as an earlier candidate (version {built.version})")
                )
            shadows.append(Shadow(built, candidate.sample_rate))
        return _with_shadows(suite, shadows)

    suites = [
        with_shadows(build(suite_cfg, ("suites", i)), suite_cfg, ("suites", i))
        for i, suite_cfg in enumerate(config.suites)
    ]
    sessions = [
        Session(
            session_cfg,
            build(session_cfg, ("sessions", i)),
            compile_event_path(session_cfg.key),
            None if session_cfg.end is None else compile_event_path(session_cfg.end),
        )
        for i, session_cfg in enumerate(config.sessions)
    ]
    if issues:
        raise ConfigError(issues)
    parsed = LoadedConfig(suites, config.judges, config.alerts, config.windowing, config.inputs, sessions)
    parsed.feedback = config.feedback
    parsed.feedback_configured = "feedback" in config.model_fields_set
    parsed.review = config.review
    parsed.redact = config.redact
    parsed.notify = tuple(config.notify)
    parsed.prices = prices
    parsed.budgets = tuple(config.budgets)
    parsed.segments = config.segments.resolved() if config.segments is not None else ()
    return config, parsed


def _with_shadows(suite: Suite, shadows: Sequence[Shadow]) -> Suite:
    object.__setattr__(suite, "shadows", tuple(shadows))
    return suite


def load_config(path: str | Path) -> tuple[StreamEvalConfig, LoadedConfig]:
    """Read and validate a YAML suite file. Raises :class:`ConfigError` naming the file and field."""
    return parse_config_text(read_config_text(path), file=str(path))


def read_config_text(path: str | Path) -> str:
    """The suite file's text. Raises :class:`ConfigError` naming the file when it cannot be read."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(
            [ConfigIssue(file=str(path), path="", message=f"cannot read: {exc.strerror}")]
        ) from None


def parse_config_text(text: str, *, file: str = "<config>") -> tuple[StreamEvalConfig, LoadedConfig]:
    """:func:`load_config` on the file's text (evaluation processes parse the text the worker read)."""
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        raise ConfigError(
            [ConfigIssue(file=file, path="", message=f"not valid YAML: {exc}", line=line)]
        ) from None
    return parse_config(data, file=file, node=node)


def redaction(suites: LoadedConfig) -> Redactors | None:
    """The suite file's redaction before judging (docs/redact.md), built once at start; None: nothing is
    redacted (no ``redact:`` block), and nothing costs anything. A ``hash`` key variable that is not set
    fails here with the path of the field that names it."""
    return build_redactors(
        suites.redact,
        [(s.name, ("suites", i), s.config.redact) for i, s in enumerate(suites.all)]
        + [(s.name, ("sessions", i), s.config.redact) for i, s in enumerate(suites.sessions)],
    )
