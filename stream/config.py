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

import fnmatch
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ._util import unknown_name
from .alerts import AlertRule
from .errors import ConfigError, ConfigIssue, UnroutableEvent
from .evaluators import Evaluator, build_evaluator
from .features.labels import FeedbackInput, feedback_issues
from .features.notify._config import ChannelConfig, notify_issues
from .features.redact import (
    RedactConfig,
    Redactors,
    RedactOverride,
    build_redactors,
    effective,
    redact_issues,
)
from .features.review import ReviewConfig
from .features.sessions.paths import EventPath, compile_event_path
from .grading import GRADE_SCALES, GradeScale
from .inputs import FORMATS, InputConfig, OtlpInput, input_issues
from .judges import (
    PANEL_RESULT_NAME,
    JudgeConfig,
    SuiteJudgeConfig,
    check_panel_weights,
    panel_judges,
    sampled,
)
from .models import RequestEvent
from .versioning import definition_hash
from .windowing import WindowingConfig

__all__ = [
    "DEFAULT_SESSION_EVALUATORS",
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


def _require_unique(kind: str, names: list[str]) -> None:
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValueError(f"{kind} names must be unique; repeated: {', '.join(dupes)}")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Match(_Strict):
    category: list[str] | None = Field(default=None, description="event categories (globs)")
    model: list[str] | None = Field(default=None, description="model names (globs)")
    tags: list[str] | None = Field(default=None, description="any event tag matching any glob")

    def accepts(self, event: RequestEvent) -> bool:
        if self.category is not None and not _any_glob(event.category, self.category):
            return False
        if self.model is not None and not _any_glob(event.model, self.model):
            return False
        if self.tags is not None and not any(_any_glob(tag, self.tags) for tag in event.tags):
            return False
        return True


def _any_glob(value: str | None, patterns: Sequence[str]) -> bool:
    return value is not None and any(fnmatch.fnmatchcase(value, p) for p in patterns)


class EvaluatorSpec(_Strict):
    evaluator: str = Field(description="registered evaluator name")
    name: str | None = Field(default=None, description="result name; defaults to the evaluator name")
    weight: float = Field(default=1.0, ge=0.0, description="weight in the suite's weighted mean")
    params: dict[str, Any] = Field(default_factory=dict, description="the evaluator's own parameters")
    gate: bool = Field(
        default=False,
        description="a hard gate: when it does not pass, the result fails "
        "whatever the weighted mean, with the scale's lowest grade",
    )

    @property
    def result_name(self) -> str:
        return self.name or self.evaluator


class _Scoring(_Strict):
    """How a result is scored and graded: what a suite and a session share."""

    threshold: float = Field(default=0.6, ge=0.0, le=1.0, description="pass at or above this score")
    grading: GradeScale = Field(default="levels", description="levels or letters")
    evaluators: list[EvaluatorSpec] = Field(min_length=1)
    judge: SuiteJudgeConfig | None = Field(default=None, description="LLM judge panel step (docs/judges.md)")
    redact: RedactOverride | Literal[False] | None = Field(
        default=None,
        description="redaction before judging, over the top-level block; false: off (docs/redact.md)",
    )


_LABEL = r"^[A-Za-z0-9_.@+-]+$"


class ShadowConfig(_Strict):
    """A shadow candidate of a suite (docs/versions.md): the live suite with these fields replaced, evaluated
    on the same events (``sample_rate`` of them, by event-id hash); its results are published with
    ``shadow: true`` under its own version and never alert."""

    label: str | None = Field(
        default=None,
        min_length=1,
        max_length=64,
        pattern=_LABEL,
        description="a name for people of the candidate's version",
    )
    sample_rate: float = Field(
        default=1.0, ge=0.0, le=1.0, description="share of the suite's events (by event-id hash)"
    )
    threshold: float | None = Field(default=None, ge=0.0, le=1.0, description="default: the live suite's")
    grading: GradeScale | None = Field(default=None, description="default: the live suite's")
    evaluators: list[EvaluatorSpec] | None = Field(
        default=None, min_length=1, description="default: the live suite's"
    )
    judge: SuiteJudgeConfig | None = Field(default=None, description="default: the live suite's (absent key)")

    def applied_to(self, live: SuiteConfig) -> dict[str, Any]:
        """The candidate's whole suite definition: the live suite's, with the fields this candidate sets."""
        data = live.model_dump(mode="json", exclude={"shadow", "label"})
        data.update(self.model_dump(mode="json", include=self.model_fields_set - {"sample_rate"}))
        return data


class SuiteConfig(_Scoring):
    name: str = Field(min_length=1, max_length=128)
    match: Match | None = Field(default=None, description="which events this suite takes")
    default: bool = Field(default=False, description="take events no other suite matches")
    label: str | None = Field(
        default=None,
        min_length=1,
        max_length=64,
        pattern=_LABEL,
        description="a name for people of this suite's version (docs/versions.md); "
        "reused with a different definition, the worker refuses to start",
    )
    shadow: list[ShadowConfig] = Field(
        default_factory=list,
        max_length=8,
        description="shadow candidates evaluated on the same events (docs/versions.md)",
    )


#: a session's evaluators when its entry names none: the mean of its turns' own scores
DEFAULT_SESSION_EVALUATORS = (EvaluatorSpec(evaluator="turn_scores"),)


class SessionConfig(_Scoring):
    """One ``sessions:`` entry: which turns form a conversation (or agent run) and how the whole thread is
    judged (docs/sessions.md). Scoring options are the suites' own (:class:`_Scoring`)."""

    name: str = Field(
        min_length=1, max_length=128, description="the session's name; shares one namespace with suites"
    )
    match: Match | None = Field(
        default=None, description="which turns belong (suite routing syntax); none: every event"
    )
    key: str = Field(
        min_length=1,
        description="path of the session key in the request event, e.g. metadata.conversation_id",
    )
    gap_s: float = Field(
        default=300.0,
        gt=0.0,
        description="idle gap that closes the session (event time, and wall time with no new turn)",
    )
    end: str | None = Field(
        default=None, description="path of a boolean field; a turn with it true closes the session at once"
    )
    grace_s: float | None = Field(
        default=None,
        ge=0.0,
        description="how long after closing a late turn still revises the session (default: gap_s)",
    )
    max_turns: int = Field(
        default=500, ge=3, description="turns kept per session; beyond, middle turns are dropped"
    )
    max_bytes: int = Field(
        default=1 << 20,
        ge=4096,
        description="bytes of turns kept per session; beyond, middle turns are dropped",
    )
    category: str = Field(
        default="multi_turn",
        min_length=1,
        max_length=64,
        description="the thread's category: picks the judge rubric (default multi_turn)",
    )
    assemble: Literal["turns", "spans"] = Field(
        default="turns",
        description="turns: each request event is a turn; spans: an agent run from the spans of an OTLP trace, tool and root spans included",
    )
    evaluators: list[EvaluatorSpec] = Field(
        default_factory=lambda: list(DEFAULT_SESSION_EVALUATORS), min_length=1
    )

    @field_validator("key", "end")
    @classmethod
    def _path(cls, value: str | None) -> str | None:
        if value is not None:
            compile_event_path(value)  # a ValueError names where the path stops making sense
        return value

    @property
    def grace(self) -> float:
        return self.gap_s if self.grace_s is None else self.grace_s


class StreamEvalConfig(_Strict):
    inputs: list[InputConfig] = Field(
        default_factory=list, description="input topics and formats (docs/inputs.md)"
    )
    judges: list[JudgeConfig] = Field(default_factory=list, description="LLM judges (docs/judges.md)")
    suites: list[SuiteConfig] = Field(min_length=1)
    alerts: list[AlertRule] = Field(default_factory=list, description="alert rules (docs/statistics.md)")
    windowing: WindowingConfig = Field(
        default_factory=WindowingConfig,
        description="window closing: lateness, interval, lease (docs/statistics.md)",
    )
    feedback: FeedbackInput = Field(
        default_factory=FeedbackInput,
        description="how the feedback topic's messages become labels (docs/feedback.md)",
    )
    review: ReviewConfig | None = Field(
        default=None, description="the review queue: what is sent for a person's look (docs/feedback.md)"
    )
    sessions: list[SessionConfig] = Field(
        default_factory=list, description="conversations and agent runs judged as a whole (docs/sessions.md)"
    )
    redact: RedactConfig | None = Field(
        default=None, description="redaction before judging, for every suite and session (docs/redact.md)"
    )
    notify: list[ChannelConfig] = Field(
        default_factory=list, description="where alerts are delivered: Slack, PagerDuty, ... (docs/notify.md)"
    )

    @field_validator("sessions")
    @classmethod
    def _unique_sessions(cls, sessions: list[SessionConfig]) -> list[SessionConfig]:
        _require_unique("session", [s.name for s in sessions])
        return sessions

    @model_validator(mode="after")
    def _sessions_apart_from_suites(self) -> StreamEvalConfig:
        # session results are recorded as pairs model x session name, next to suites' pairs: one namespace
        clash = sorted({s.name for s in self.sessions} & {s.name for s in self.suites})
        if clash:
            raise ValueError(
                f"session names must differ from suite names (their figures share one namespace); "
                f"both: {', '.join(clash)}"
            )
        return self

    @field_validator("alerts")
    @classmethod
    def _unique_alerts(cls, alerts: list[AlertRule]) -> list[AlertRule]:
        _require_unique("alert rule", [a.name for a in alerts])
        return alerts

    @field_validator("judges")
    @classmethod
    def _unique_judges(cls, judges: list[JudgeConfig]) -> list[JudgeConfig]:
        _require_unique("judge", [j.name for j in judges])
        return judges

    @field_validator("suites")
    @classmethod
    def _unique_names(cls, suites: list[SuiteConfig]) -> list[SuiteConfig]:
        _require_unique("suite", [s.name for s in suites])
        if sum(s.default for s in suites) > 1:
            raise ValueError("at most one suite may be the default")
        return suites


@dataclass(frozen=True)
class BoundEvaluator:
    name: str
    weight: float
    evaluator: Evaluator
    gate: bool = False


@dataclass(frozen=True)
class Suite:
    """A validated suite with its evaluators built (also a session's scoring: :class:`Session`); ``version``
    is its definition's hash (docs/versions.md)."""

    config: SuiteConfig | SessionConfig
    evaluators: tuple[BoundEvaluator, ...]
    version: str = ""
    definition: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    shadows: tuple[Shadow, ...] = ()

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def is_default(self) -> bool:
        """The suite for events no other suite matches (never a session's scoring)."""
        return isinstance(self.config, SuiteConfig) and self.config.default

    @property
    def label(self) -> str | None:
        return self.config.label if isinstance(self.config, SuiteConfig) else None


@dataclass(frozen=True)
class Shadow:
    """A shadow candidate, built: its suite (the live suite's name, its own version) and its sample rate."""

    suite: Suite
    sample_rate: float = 1.0


# what does not change a result's meaning: routing, names for people, and the judges' transport
_ROUTING_FIELDS = frozenset({"name", "match", "default", "label", "shadow"})
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


@dataclass(frozen=True)
class Session:
    """A validated ``sessions:`` entry: its paths compiled, its whole-thread scoring built as a suite
    (never routed to: events reach it only as turns, streameval.features.sessions)."""

    config: SessionConfig
    suite: Suite
    key: EventPath
    end: EventPath | None

    @property
    def name(self) -> str:
        return self.config.name

    def accepts(self, event: RequestEvent) -> bool:
        return self.config.match is None or self.config.match.accepts(event)


class LoadedConfig:
    """The loaded suite file: its suites with their evaluators bound (the routing table: explicit suite,
    first match, default), and its judges, alerts, windowing and inputs."""

    def __init__(
        self,
        suites: Sequence[Suite],
        judges: Sequence[JudgeConfig] = (),
        alerts: Sequence[AlertRule] = (),
        windowing: WindowingConfig | None = None,
        inputs: Sequence[InputConfig] = (),
        sessions: Sequence[Session] = (),
    ) -> None:
        self.all = tuple(suites)
        self.sessions = tuple(sessions)  # conversations judged as a whole (streameval.features.sessions)
        #: some session assembles agent runs from spans: OTLP decoders hand on tool and root spans as steps
        self.assembles_spans = any(s.config.assemble == "spans" for s in self.sessions)
        self.inputs = tuple(inputs)  # the topics the worker reads and their formats (streameval.inputs)
        self.judges = tuple(judges)  # the config's judges; the pipeline opens their clients
        self.alerts = tuple(alerts)  # checked on each closed window (streameval.windows)
        self.windowing = windowing or WindowingConfig()
        self.shadow_judges: tuple[JudgeConfig, ...] = ()  # judges only shadows use (add_shadow_file)
        self.feedback = FeedbackInput()  # the feedback topic's format (streameval.features.labels)
        self.feedback_configured = False  # the suite file has a ``feedback:`` section (labels are expected)
        self.review: ReviewConfig | None = None  # the review queue (streameval.features.review); None: off
        self.redact: RedactConfig | None = None  # the top-level redact: block (docs/redact.md); None: none
        self.notify: tuple[ChannelConfig, ...] = ()  # alert channels (streameval.features.notify); (): none
        self.by_name = {s.name: s for s in suites}
        self._matching = [s for s in suites if s.config.match is not None and not s.is_default]
        self._default = next((s for s in suites if s.is_default), None)
        # the suite of each (category, model, tags) seen: the globs are matched once, not per event (~2 % of
        # a demo worker); bounded, as models and tags come from producers
        self._routes: dict[tuple[str | None, str, tuple[str, ...]], Suite] = {}

    def _remember(self, key: tuple[str | None, str, tuple[str, ...]], suite: Suite) -> Suite:
        if len(self._routes) >= 4096:
            self._routes.clear()
        self._routes[key] = suite
        return suite

    def resolve_registry(self, versions: Mapping[str, str | None]) -> list[str]:
        """Put the registered evaluators' versions (reference, an id or name -> ``id@n``) into the versions of
        the suites that use them; returns the names of the suites whose version changed. Called when the
        worker's registry loads and after each registry change (never per event)."""
        changed = []
        for suite in self.scoring:
            if not any(spec.evaluator == "registered" for spec in suite.config.evaluators):
                continue
            definition = suite_definition(suite.config, suite.evaluators, self.judges, versions)
            version = definition_hash(definition)
            if version != suite.version:
                object.__setattr__(suite, "version", version)  # the one place a Suite changes: its registry
                object.__setattr__(suite, "definition", definition)
                changed.append(suite.name)
        return changed

    def route(self, event: RequestEvent) -> Suite:
        if event.suite is not None:
            try:
                return self.by_name[event.suite]
            except KeyError:
                raise UnroutableEvent(
                    unknown_name("suite", event.suite, self.by_name),
                    kind="unknown_suite",
                    event_id=event.id,
                ) from None
        key = (event.category, event.model, tuple(event.tags))
        found = self._routes.get(key)
        if found is not None:
            return found
        for suite in self._matching:
            assert suite.config.match is not None
            if suite.config.match.accepts(event):
                return self._remember(key, suite)
        if self._default is not None:
            return self._remember(key, self._default)
        raise UnroutableEvent(
            f"no suite matches model={event.model!r} category={event.category!r} tags={event.tags!r} "
            "and no default suite is configured",
            kind="no_suite",
            event_id=event.id,
        )

    @property
    def scoring(self) -> tuple[Suite, ...]:
        """Every suite and every session's scoring suite (what the pipeline can evaluate)."""
        return self.all + tuple(s.suite for s in self.sessions)

    async def start(self) -> None:
        for suite in self.scoring:
            for bound in suite.evaluators:
                await bound.evaluator.start()

    async def close(self) -> None:
        for suite in self.scoring:
            for bound in suite.evaluators:
                await bound.evaluator.close()


class ShadowRouting(LoadedConfig):
    """The ``index``-th shadow candidate of each suite, routed as the live suites route (docs/versions.md).

    ``route`` raises :class:`UnroutableEvent` for an event whose live suite has no such candidate or whose
    id is outside the candidate's sample: the shadow pipeline's dead letters are dropped, never published.
    """

    def __init__(self, live: LoadedConfig, index: int) -> None:
        chosen = [s.shadows[index].suite for s in live.all if len(s.shadows) > index]
        judges = {j.name: j for j in (*live.judges, *live.shadow_judges)}
        super().__init__(chosen, tuple(judges.values()), (), live.windowing, live.inputs)
        self.live = live
        self.index = index

    def route(self, event: RequestEvent) -> Suite:
        suite = self.live.route(event)
        if len(suite.shadows) <= self.index:
            raise UnroutableEvent(
                f"suite {suite.name!r} has no shadow {self.index}", kind="no_suite", event_id=event.id
            )
        shadow = suite.shadows[self.index]
        if not sampled("shadow:" + event.id, shadow.sample_rate):
            raise UnroutableEvent("not in the shadow's sample", kind="no_suite", event_id=event.id)
        return shadow.suite


def shadow_routings(suites: LoadedConfig) -> list[ShadowRouting]:
    """One routing per candidate position (the first candidates of every suite, the second ones, ...)."""
    return [ShadowRouting(suites, k) for k in range(max((len(s.shadows) for s in suites.all), default=0))]


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


def _loc_to_path(loc: Sequence[str | int]) -> str:
    path = ""
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path


def _node_at(root: yaml.Node | None, loc: Sequence[str | int]) -> tuple[yaml.Node | None, bool]:
    """The YAML node at ``loc``, or its nearest existing parent (then ``False``)."""
    node = root
    for part in loc:
        child = None
        if isinstance(node, yaml.MappingNode) and isinstance(part, str):
            child = next((v for k, v in node.value if getattr(k, "value", None) == part), None)
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            child = node.value[part]
        if child is None:
            return node, False
        node = child
    return node, True


def _line_of(root: yaml.Node | None, loc: Sequence[str | int]) -> int | None:
    """1-based line of the YAML node at ``loc`` (or of its nearest existing parent)."""
    node, _ = _node_at(root, loc)
    return node.start_mark.line + 1 if node is not None else None


_CODE_LINE = re.compile(r"\(line (\d+)\)")


def _text_line(root: yaml.Node | None, loc: Sequence[str | int], message: str) -> int | None:
    """The file line of "(line N)" in ``message`` about the text at ``loc`` (a code evaluator's code):
    line N of a block scalar (``code: |``) is N lines below its indicator; of any other scalar, its first line."""
    found = _CODE_LINE.search(message)
    node, exact = _node_at(root, loc)
    if found is None or not exact or not isinstance(node, yaml.ScalarNode):
        return None
    if node.style not in ("|", ">"):  # a quoted or plain scalar: its escapes hide the code's lines
        return node.start_mark.line + 1
    return node.start_mark.line + 1 + int(found.group(1))


#: the former name of :class:`LoadedConfig` (kept: ``streameval.Suites``)
Suites = LoadedConfig


#: the key of an ``assemble: spans`` session: a run is one trace (its tool and root spans carry no other key)
TRACE_KEY = ("metadata", "trace_id")


def _run_issues(config: StreamEvalConfig) -> Iterator[tuple[tuple[str | int, ...], str]]:
    """Agent runs (``assemble: spans``) need an OTLP input, and are keyed by trace id."""
    otlp = any(isinstance(spec, OtlpInput) for spec in config.inputs)
    formats = " or ".join(get_args(OtlpInput.model_fields["format"].annotation))
    for i, session in enumerate(config.sessions):
        if session.assemble != "spans":
            continue
        if not otlp:
            yield (
                ("sessions", i, "assemble"),
                (
                    "spans assembles agent runs from OTLP trace exports; the suite file "
                    f"has no {formats} input"
                ),
            )
        if compile_event_path(session.key).steps != TRACE_KEY:
            yield (
                ("sessions", i, "key"),
                (
                    f"an agent run (assemble: spans) is keyed by its trace: key: metadata.trace_id, "
                    f"not {session.key!r}"
                ),
            )


def parse_config(
    data: Any, *, file: str = "<config>", node: yaml.Node | None = None
) -> tuple[StreamEvalConfig, LoadedConfig]:
    """Validate a config document and build every evaluator. Raises :class:`ConfigError` with all issues."""

    def issue(loc: Sequence[str | int], message: str) -> ConfigIssue:
        message = message.removeprefix("Value error, ")  # pydantic's wording for a validator's ValueError
        line = _text_line(node, loc, message)
        if line is not None:
            message = _CODE_LINE.sub(lambda m: f"(line {m.group(1)} of the code)", message, count=1)
        return ConfigIssue(
            file=file, path=_loc_to_path(loc), message=message, line=line or _line_of(node, loc)
        )

    try:
        config = StreamEvalConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(
            [issue(*_input_error(e["loc"], e["type"], e["msg"], e.get("ctx"))) for e in exc.errors()]
        ) from None

    issues: list[ConfigIssue] = [issue(loc, message) for loc, message in input_issues(config.inputs)]
    issues += [issue(("feedback", *loc), message) for loc, message in feedback_issues(config.feedback)]
    issues += [issue(loc, message) for loc, message in _run_issues(config)]
    issues += [
        issue(loc, message)
        for loc, message in redact_issues(
            config.redact,
            [(("suites", i), s.redact) for i, s in enumerate(config.suites)]
            + [(("sessions", i), s.redact) for i, s in enumerate(config.sessions)],
        )
    ]
    issues += [issue(loc, message) for loc, message in notify_issues(config.notify)]

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
                        f"evaluator name {spec.result_name!r} used twice in this {_kind(base)}; set a distinct 'name'",
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
                issue(loc, message) for loc, message in _judge_issues(config, scoring.judge, base, names)
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
    return config, parsed


def _with_shadows(suite: Suite, shadows: Sequence[Shadow]) -> Suite:
    object.__setattr__(suite, "shadows", tuple(shadows))
    return suite


def _input_error(
    loc: Sequence[str | int], kind: str, message: str, ctx: dict[str, Any] | None
) -> tuple[Sequence[str | int], str]:
    """pydantic's error for an ``inputs`` entry, located in the file's terms: without the format tag it
    adds to the path (``inputs.0.json.map``), and a bad format named as such."""
    if len(loc) < 2 or loc[0] != "inputs":
        return loc, message
    if kind == "union_tag_invalid":
        return (
            *loc[:2],
            "format",
        ), f"unknown input format {(ctx or {}).get('tag')!r}; valid formats: {', '.join(FORMATS)}"
    if kind == "union_tag_not_found":
        return (*loc[:2], "format"), f"missing; valid formats: {', '.join(FORMATS)}"
    if len(loc) > 2 and loc[2] in FORMATS:
        return (*loc[:2], *loc[3:]), message
    return loc, message


def _kind(at: tuple[str | int, ...]) -> str:
    """``suite`` or ``session``: what the config entry at ``at`` is."""
    return "session" if at[0] == "sessions" else "suite"


def _judge_issues(
    config: StreamEvalConfig, block: SuiteJudgeConfig, at: tuple[str | int, ...], names: set[str]
) -> list[tuple[tuple[str | int, ...], str]]:
    """Problems of the judge block of the suite (or session) at ``at``: unknown judges, weights, fallback evaluators."""
    base: tuple[str | int, ...] = (*at, "judge")
    out: list[tuple[tuple[str | int, ...], str]] = []
    known = {j.name for j in config.judges}
    if not config.judges:
        out.append((base, f"the {_kind(at)} has a judge block but the config has no top-level 'judges' list"))
        return out
    for k, name in enumerate(block.judges or []):
        if name not in known:
            out.append(((*base, "judges", k), unknown_name("judge", name, known)))
    chosen = [j for j in config.judges if block.judges is None or j.name in block.judges]
    problem = check_panel_weights(chosen)
    if problem is not None:
        out.append(((*base, "judges") if block.judges is not None else ("judges",), problem))
    if len(panel_judges(config.judges, block.judges)) < block.min_judges:
        out.append(
            ((*base, "min_judges"), f"min_judges {block.min_judges} is more than the panel's enabled judges")
        )
    for k, spec in enumerate(block.fallbacks):
        if spec.evaluator not in names:
            out.append(
                (
                    (*base, "fallbacks", k, "evaluator"),
                    f"no evaluator named {spec.evaluator!r} in this suite; names: {', '.join(sorted(names))}",
                )
            )
    if PANEL_RESULT_NAME in names:
        out.append(((*at, "evaluators"), f"{PANEL_RESULT_NAME!r} is reserved for the judge panel's result"))
    return out


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
