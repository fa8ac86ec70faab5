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
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ._util import unknown_name
from .alerts import AlertRule
from .errors import ConfigError, ConfigIssue, UnroutableEvent
from .evaluators import Evaluator, build_evaluator
from .grading import GradeScale
from .inputs import FORMATS, InputConfig, OtlpInput, input_issues
from .judges import PANEL_RESULT_NAME, JudgeConfig, SuiteJudgeConfig, check_panel_weights, panel_judges
from .models import RequestEvent
from .sessions.paths import EventPath, compile_event_path
from .windowing import WindowingConfig

__all__ = [
    "DEFAULT_SESSION_EVALUATORS", "EvaluatorSpec", "LoadedConfig", "Match", "Session", "SessionConfig",
    "StreamEvalConfig", "Suite", "SuiteConfig", "Suites",
    "load_config", "parse_config", "parse_config_text", "read_config_text",
]  # fmt: skip


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
    gate: bool = Field(default=False, description="a hard gate: when it does not pass, the result fails "
                       "whatever the weighted mean, with the scale's lowest grade")

    @property
    def result_name(self) -> str:
        return self.name or self.evaluator


class _Scoring(_Strict):
    """How a result is scored and graded: what a suite and a session share."""

    threshold: float = Field(default=0.6, ge=0.0, le=1.0, description="pass at or above this score")
    grading: GradeScale = Field(default="levels", description="levels or letters")
    evaluators: list[EvaluatorSpec] = Field(min_length=1)
    judge: SuiteJudgeConfig | None = Field(default=None, description="LLM judge panel step (docs/judges.md)")


class SuiteConfig(_Scoring):
    name: str = Field(min_length=1, max_length=128)
    match: Match | None = Field(default=None, description="which events this suite takes")
    default: bool = Field(default=False, description="take events no other suite matches")


#: a session's evaluators when its entry names none: the mean of its turns' own scores
DEFAULT_SESSION_EVALUATORS = (EvaluatorSpec(evaluator="turn_scores"),)


class SessionConfig(_Scoring):
    """One ``sessions:`` entry: which turns form a conversation (or agent run) and how the whole thread is
    judged (docs/sessions.md). Scoring options are the suites' own (:class:`_Scoring`)."""

    name: str = Field(min_length=1, max_length=128, description="the session's name; shares one namespace with suites")
    match: Match | None = Field(default=None, description="which turns belong (suite routing syntax); none: every event")
    key: str = Field(min_length=1, description="path of the session key in the request event, e.g. metadata.conversation_id")
    gap_s: float = Field(default=300.0, gt=0.0, description="idle gap that closes the session (event time, and wall time "
                         "with no new turn)")
    end: str | None = Field(default=None, description="path of a boolean field; a turn with it true closes the session at once")
    grace_s: float | None = Field(default=None, ge=0.0, description="how long after closing a late turn still revises the "
                                  "session (default: gap_s)")
    max_turns: int = Field(default=500, ge=3, description="turns kept per session; beyond, middle turns are dropped")
    max_bytes: int = Field(default=1 << 20, ge=4096, description="bytes of turns kept per session; beyond, middle turns are dropped")
    category: str = Field(default="multi_turn", min_length=1, max_length=64,
                          description="the thread's category: picks the judge rubric (default multi_turn)")
    assemble: Literal["turns", "spans"] = Field(
        default="turns", description="turns: each request event is a turn; spans: an agent run from the spans of an OTLP trace, tool and root spans included")
    evaluators: list[EvaluatorSpec] = Field(default_factory=lambda: list(DEFAULT_SESSION_EVALUATORS), min_length=1)

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
    inputs: list[InputConfig] = Field(default_factory=list, description="input topics and formats (docs/inputs.md)")
    judges: list[JudgeConfig] = Field(default_factory=list, description="LLM judges (docs/judges.md)")
    suites: list[SuiteConfig] = Field(min_length=1)
    alerts: list[AlertRule] = Field(default_factory=list, description="alert rules (docs/statistics.md)")
    windowing: WindowingConfig = Field(default_factory=WindowingConfig,
                                       description="window closing: lateness, interval, lease (docs/statistics.md)")
    sessions: list[SessionConfig] = Field(default_factory=list,
                                          description="conversations and agent runs judged as a whole (docs/sessions.md)")

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
            raise ValueError(f"session names must differ from suite names (their figures share one namespace); "
                             f"both: {', '.join(clash)}")
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
    """A validated suite with its evaluators built (also a session's scoring: :class:`Session`)."""

    config: SuiteConfig | SessionConfig
    evaluators: tuple[BoundEvaluator, ...]

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def is_default(self) -> bool:
        """The suite for events no other suite matches (never a session's scoring)."""
        return isinstance(self.config, SuiteConfig) and self.config.default


@dataclass(frozen=True)
class Session:
    """A validated ``sessions:`` entry: its paths compiled, its whole-thread scoring built as a suite
    (never routed to: events reach it only as turns, streameval.sessions)."""

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

    def __init__(self, suites: Sequence[Suite], judges: Sequence[JudgeConfig] = (),
                 alerts: Sequence[AlertRule] = (), windowing: WindowingConfig | None = None,
                 inputs: Sequence[InputConfig] = (), sessions: Sequence[Session] = ()) -> None:  # fmt: skip
        self.all = tuple(suites)
        self.sessions = tuple(sessions)  # conversations judged as a whole (streameval.sessions)
        #: some session assembles agent runs from spans: OTLP decoders hand on tool and root spans as steps
        self.assembles_spans = any(s.config.assemble == "spans" for s in self.sessions)
        self.inputs = tuple(inputs)  # the topics the worker reads and their formats (streameval.inputs)
        self.judges = tuple(judges)  # the config's judges; the pipeline opens their clients
        self.alerts = tuple(alerts)  # checked on each closed window (streameval.windows)
        self.windowing = windowing or WindowingConfig()
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
            yield ("sessions", i, "assemble"), ("spans assembles agent runs from OTLP trace exports; the suite file "
                                                f"has no {formats} input")  # fmt: skip
        if compile_event_path(session.key).steps != TRACE_KEY:
            yield ("sessions", i, "key"), (f"an agent run (assemble: spans) is keyed by its trace: key: metadata.trace_id, "
                                           f"not {session.key!r}")  # fmt: skip


def parse_config(data: Any, *, file: str = "<config>", node: yaml.Node | None = None) -> tuple[StreamEvalConfig, LoadedConfig]:
    """Validate a config document and build every evaluator. Raises :class:`ConfigError` with all issues."""

    def issue(loc: Sequence[str | int], message: str) -> ConfigIssue:
        message = message.removeprefix("Value error, ")  # pydantic's wording for a validator's ValueError
        line = _text_line(node, loc, message)
        if line is not None:
            message = _CODE_LINE.sub(lambda m: f"(line {m.group(1)} of the code)", message, count=1)
        return ConfigIssue(file=file, path=_loc_to_path(loc), message=message, line=line or _line_of(node, loc))

    try:
        config = StreamEvalConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError([issue(*_input_error(e["loc"], e["type"], e["msg"], e.get("ctx"))) for e in exc.errors()]) from None

    issues: list[ConfigIssue] = [issue(loc, message) for loc, message in input_issues(config.inputs)]
    issues += [issue(loc, message) for loc, message in _run_issues(config)]

    def build(scoring: SuiteConfig | SessionConfig, base: tuple[str | int, ...]) -> Suite:
        """Build one suite's (or session's) evaluators, adding any problem to ``issues``."""
        bound: list[BoundEvaluator] = []
        names: set[str] = set()
        for j, spec in enumerate(scoring.evaluators):
            loc = (*base, "evaluators", j)
            if spec.result_name in names:
                issues.append(issue((*loc, "name"), f"evaluator name {spec.result_name!r} used twice in this {_kind(base)}; set a distinct 'name'"))
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
            issues.append(issue((*base, "evaluators"), "weights sum to 0; at least one evaluator needs a weight > 0"))
        if scoring.judge is not None:
            issues.extend(issue(loc, message) for loc, message in _judge_issues(config, scoring.judge, base, names))
        return Suite(scoring, tuple(bound))

    suites = [build(suite_cfg, ("suites", i)) for i, suite_cfg in enumerate(config.suites)]
    sessions = [
        Session(session_cfg, build(session_cfg, ("sessions", i)), compile_event_path(session_cfg.key),
                None if session_cfg.end is None else compile_event_path(session_cfg.end))
        for i, session_cfg in enumerate(config.sessions)
    ]  # fmt: skip
    if issues:
        raise ConfigError(issues)
    return config, LoadedConfig(suites, config.judges, config.alerts, config.windowing, config.inputs, sessions)


def _input_error(
    loc: Sequence[str | int], kind: str, message: str, ctx: dict[str, Any] | None
) -> tuple[Sequence[str | int], str]:
    """pydantic's error for an ``inputs`` entry, located in the file's terms: without the format tag it
    adds to the path (``inputs.0.json.map``), and a bad format named as such."""
    if len(loc) < 2 or loc[0] != "inputs":
        return loc, message
    if kind == "union_tag_invalid":
        return (*loc[:2], "format"), f"unknown input format {(ctx or {}).get('tag')!r}; valid formats: {', '.join(FORMATS)}"
    if kind == "union_tag_not_found":
        return (*loc[:2], "format"), f"missing; valid formats: {', '.join(FORMATS)}"
    if len(loc) > 2 and loc[2] in FORMATS:
        return (*loc[:2], *loc[3:]), message
    return loc, message


def _kind(at: tuple[str | int, ...]) -> str:
    """``suite`` or ``session``: what the config entry at ``at`` is."""
    return "session" if at[0] == "sessions" else "suite"


def _judge_issues(config: StreamEvalConfig, block: SuiteJudgeConfig, at: tuple[str | int, ...],
                  names: set[str]) -> list[tuple[tuple[str | int, ...], str]]:  # fmt: skip
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
        out.append(((*base, "min_judges"), f"min_judges {block.min_judges} is more than the panel's enabled judges"))
    for k, spec in enumerate(block.fallbacks):
        if spec.evaluator not in names:
            out.append(((*base, "fallbacks", k, "evaluator"),
                        f"no evaluator named {spec.evaluator!r} in this suite; names: {', '.join(sorted(names))}"))
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
        raise ConfigError([ConfigIssue(file=str(path), path="", message=f"cannot read: {exc.strerror}")]) from None


def parse_config_text(text: str, *, file: str = "<config>") -> tuple[StreamEvalConfig, LoadedConfig]:
    """:func:`load_config` on the file's text (evaluation processes parse the text the worker read)."""
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        raise ConfigError([ConfigIssue(file=file, path="", message=f"not valid YAML: {exc}", line=line)]) from None
    return parse_config(data, file=file, node=node)
