"""The suite file's shape: the pydantic models its YAML is validated against (suites, their evaluators and
shadow candidates, sessions, and the top-level sections), with the checks one section can make alone, and
an evaluator as a suite binds it once built (:class:`BoundEvaluator`).
:mod:`streameval.config` loads a file against them and names each bad field by its path."""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from .alerts import AlertRule
from .evaluators import Evaluator
from .features.guard._config import GuardConfig
from .features.labels import FeedbackInput
from .features.notify._config import ChannelConfig
from .features.redact import RedactConfig, RedactOverride
from .features.review import ReviewConfig
from .features.segments import SegmentsConfig
from .features.sessions.paths import compile_event_path
from .features.usage import BudgetConfig, PricesConfig
from .grading import GradeScale
from .inputs import InputConfig
from .judges import JudgeConfig, SuiteJudgeConfig
from .models import RequestEvent
from .windowing import WindowingConfig

__all__ = [
    "DEFAULT_SESSION_EVALUATORS",
    "BoundEvaluator",
    "EvaluatorSpec",
    "Match",
    "SessionConfig",
    "ShadowConfig",
    "StreamEvalConfig",
    "SuiteConfig",
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
        data = live.model_dump(mode="json", exclude={"shadow", "label", "guard"})
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
    guard: GuardConfig | None = Field(
        default=None,
        description="this suite answers POST /api/v1/check: decisions, deadline, timeout answer (docs/guard.md)",
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
    prices: PricesConfig | None = Field(
        default=None, description="prices per million tokens of the monitored models (docs/usage.md)"
    )
    budgets: list[BudgetConfig] = Field(
        default_factory=list, description="spend budgets per model or suite and period (docs/usage.md)"
    )
    segments: SegmentsConfig | None = Field(
        default=None, description="slices: windows kept per value of named dimensions (docs/segments.md)"
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
