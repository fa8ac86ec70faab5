"""Judge configuration: the top-level ``judges:`` list and a suite's ``judge:`` block.

.. code-block:: yaml

    judges:
      - {name: deepseek, protocol: openai, base_url: "https://api.deepseek.com", model: deepseek-chat,
         api_key_env: DEEPSEEK_API_KEY, weight: 0.30, scale: "1-5"}
      - {name: glm, protocol: anthropic, base_url: "https://open.bigmodel.cn/api/anthropic",
         model: glm-4.7, api_key_env: GLM_API_KEY, weight: 0.30, scale: "1-5"}
      - {name: minimax, protocol: anthropic, base_url: "https://api.minimaxi.com/anthropic",
         model: MiniMax-M2.1, api_key_env: MINIMAX_API_KEY, weight: 0.40, scale: "0-10"}
    suites:
      - name: qa
        evaluators: [{evaluator: exact_match}]
        judge: {sample_rate: 0.2, prompt: rubric, mode: blend}

Defaults follow the multi-judge spec (temperature 0.3, max_tokens 2048, blind evaluation, three attempts 2 s
apart) and the report-quality spec (blend 0.4 × metrics + 0.6 × judges). The weights of the enabled judges of
a panel must sum to 1 (the multi-judge spec); :func:`check_panel_weights` says by how much they miss.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ._pressure import BackpressureConfig
from ._protocols import PROTOCOLS
from ._rubrics import METRIC_PROMPTS, MetricPrompt
from ._structured import StructuredMode
from ._urls import insecure_http_problem

__all__ = [
    "Aggregation",
    "BlendMode",
    "FallbackSpec",
    "JudgeConfig",
    "JudgeScale",
    "PromptKind",
    "SuiteJudgeConfig",
    "check_panel_weights",
    "panel_judges",
]

JudgeScale = Literal["1-5", "0-10"]
PromptKind = Literal["rubric", "report"]
BlendMode = Literal["blend", "fallback"]
Aggregation = Literal["weighted", "zscore"]

#: weights are decimals typed by people: 0.3 + 0.3 + 0.4 is 1.0000000000000002 in floats
WEIGHT_TOLERANCE = 1e-6


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class JudgeConfig(_Strict):
    """One LLM judge. The API key is never part of the config: only the name of its variable."""

    name: str = Field(
        min_length=1,
        max_length=64,
        pattern=r"^[A-Za-z0-9_.-]+$",
        description="unique judge name (used in results, counters and cache keys)",
    )
    protocol: str = Field(
        description="; ".join(f"{p.name}: POST {{base_url}}/{p.path}" for p in PROTOCOLS.values()),
        json_schema_extra={"enum": list(PROTOCOLS)},
    )
    base_url: str = Field(pattern=r"^https?://", description="API root, as the provider's SDK takes it")
    model: str = Field(min_length=1, description="the judge model's name")
    api_key_env: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
        description="environment variable holding the API key; none: no auth",
    )
    temperature: float = Field(default=0.3, ge=0.0, le=2.0, description="sampling temperature")
    max_tokens: int = Field(default=2048, ge=1, description="most tokens per answer")
    weight: float = Field(ge=0.0, le=1.0, description="share in the panel; enabled weights sum to 1")
    scale: JudgeScale = Field(default="1-5", description="rubric scale: 1-5 per criterion, or 0-10 overall")
    blind: bool = Field(default=True, description="never tell the judge which model wrote the output")
    timeout_s: float = Field(default=60.0, gt=0.0, description="limit of one attempt, seconds")
    max_concurrency: int = Field(default=16, ge=1, description="requests in flight to this judge")
    requests_per_second: float | None = Field(
        default=None, gt=0.0, description="start rate cap; none: no cap"
    )
    attempts: int = Field(default=3, ge=1, le=10, description="tries per call, the first included")
    retry_wait_s: float = Field(default=2.0, ge=0.0, description="seconds between tries")
    retry_jitter_s: float = Field(default=0.5, ge=0.0, description="uniform random extra wait, seconds")
    max_retry_after_s: float = Field(default=60.0, ge=0.0, description="cap on a 429's Retry-After")
    tokens_per_minute: int | None = Field(
        default=None, ge=1, description="budget; over it: skipped, reason budget"
    )
    enabled: bool = Field(default=True, description="disabled judges are never called")
    api_key_file: str | None = Field(
        default=None,
        description="file holding the API key (trailing newline "
        "stripped); else <api_key_env>_FILE, else the variable itself",
    )
    allow_insecure_http: bool = Field(
        default=False,
        description="allow plain http:// to a non-loopback host "
        "(the key would cross the network unencrypted)",
    )

    price_input_per_mtok: float | None = Field(
        default=None, ge=0.0, description="price of a million input tokens; none: cost not counted"
    )
    price_output_per_mtok: float | None = Field(
        default=None, ge=0.0, description="price of a million output tokens; none: cost not counted"
    )
    adaptive_concurrency: bool = Field(
        default=True, description="AIMD between 1 and max_concurrency on 429/5xx/timeouts"
    )
    budget_per_hour: float | None = Field(
        default=None, gt=0.0, description="money per UTC clock hour, all workers together; over it: budget"
    )
    structured: bool = Field(
        default=False, description="ask for the JSON answer by response_format / tool use"
    )
    structured_mode: StructuredMode = Field(
        default="auto",
        description="openai protocol, structured: true: the server's dialect (json_schema, json_object, "
        "guided_json, structured_outputs); auto: json_schema, then json_object, kept once accepted",
    )
    context_tokens: int | Literal["auto"] | None = Field(
        default=None,
        description="the server's context window in tokens, to shorten prompts that would not fit; auto: "
        "asked of the server at start (llama.cpp's /props); none: learned from a context-length error",
    )
    first_byte_timeout_s: float | None = Field(
        default=None, gt=0.0, description="limit until the answer's first byte, seconds; none: timeout_s only"
    )

    @field_validator("protocol")
    @classmethod
    def _known_protocol(cls, value: str) -> str:
        if value not in PROTOCOLS:  # the protocols are the keys of PROTOCOLS (judges/_protocols.py)
            raise ValueError(f"unknown protocol {value!r}; known protocols: {', '.join(PROTOCOLS)}")
        return value

    @model_validator(mode="after")
    def _context_fits_an_answer(self) -> JudgeConfig:
        if isinstance(self.context_tokens, int) and self.context_tokens <= self.max_tokens:
            raise ValueError(
                f"max_tokens {self.max_tokens} leaves no room for the prompt in context_tokens "
                f"{self.context_tokens}; lower max_tokens"
            )
        return self

    @model_validator(mode="after")
    def _no_key_over_plain_http(self) -> JudgeConfig:
        keyless = self.api_key_env is None and self.api_key_file is None  # nothing to leak (a local model)
        problem = None if self.allow_insecure_http or keyless else insecure_http_problem(self.base_url)
        if problem:
            raise ValueError(f"base_url: {problem}")
        return self

    @model_validator(mode="after")
    def _budget_needs_prices(self) -> JudgeConfig:
        if (
            self.budget_per_hour is not None
            and self.price_input_per_mtok is None
            and self.price_output_per_mtok is None
        ):
            raise ValueError("budget_per_hour needs price_input_per_mtok and/or price_output_per_mtok")
        return self


class FallbackSpec(_Strict):
    """The RAG-evaluation spec's LLM fallback for one rule evaluator of the suite."""

    evaluator: str = Field(description="result name of a rule evaluator in this suite")
    prompt: MetricPrompt = Field(description="which single-number metric prompt to ask")
    trigger: float | Literal["always", "never"] | None = Field(
        default=None, description="ask when the rule score <= trigger; default: the metric's own trigger"
    )

    def effective_trigger(self) -> float | Literal["always", "never"]:
        return self.trigger if self.trigger is not None else METRIC_PROMPTS[self.prompt].trigger


class SuiteJudgeConfig(_Strict):
    """A suite's ``judge:`` block."""

    judges: list[str] | None = Field(
        default=None, min_length=1, description="judge names of this suite's panel; none: every enabled judge"
    )
    sample_rate: float = Field(
        default=1.0, ge=0.0, le=1.0, description="share of events judged (by event-id hash)"
    )
    prompt: PromptKind = Field(default="rubric", description="rubric or report")
    default_category: str = Field(
        default="qa_simple", description="rubric for events whose category is not one of the ten"
    )
    mode: BlendMode = Field(default="blend", description="blend or fallback")
    metrics_weight: float = Field(
        default=0.4, ge=0.0, description="final = metrics_weight x metrics + panel_weight x panel"
    )
    panel_weight: float = Field(
        default=0.6, ge=0.0, description="final = metrics_weight x metrics + panel_weight x panel"
    )
    fallbacks: list[FallbackSpec] = Field(
        default_factory=list, description="mode fallback: per-metric settings"
    )
    default_score: float = Field(
        default=0.0, ge=0.0, le=1.0, description="the LLM score used when no judge answers"
    )
    min_judges: int = Field(default=1, ge=1, description="fewer answers than this: the panel failed")
    aggregation: Aggregation = Field(
        default="weighted",
        description="weighted (weighted mean) or zscore (each judge's scores z-normalised first)",
    )
    zscore_min_n: int = Field(
        default=30, ge=2, description="zscore: scores a judge needs before its norm is used; fewer: weighted"
    )
    consistency_rate: float = Field(
        default=0.1,
        ge=0.0,
        le=1.0,
        description="share of judged events asked twice (chosen by id hash) to measure judge consistency (blend)",
    )
    unscored: Literal["midpoint", "exclude"] = Field(
        default="midpoint",
        description="a refusal or an answer with no score in it: midpoint (the multi-judge spec) or exclude",
    )
    backpressure: BackpressureConfig | None = Field(
        default=None,
        description="judge a smaller share while consumer lag or the judge queue is over a bound",
    )
    calibrate: bool = Field(
        default=False,
        description="blend: map each judge's score through its calibration "
        "(fitted to human labels, docs/feedback.md) before the panel is computed",
    )
    calibration: dict[str, list[tuple[float, float]]] = Field(
        default_factory=dict,
        description="per judge name: points [judge score, human score] (both 0-1), judge score "
        "ascending, human score non-decreasing, as GET /api/v1/stats/human exports them",
    )

    @field_validator("default_category")
    @classmethod
    def _known_category(cls, value: str) -> str:
        from ._rubrics import RUBRICS

        if value not in RUBRICS:
            raise ValueError(f"unknown category {value!r}; known categories: {', '.join(RUBRICS)}")
        return value

    @model_validator(mode="after")
    def _mode_settings(self) -> SuiteJudgeConfig:
        if self.mode == "blend" and self.metrics_weight + self.panel_weight <= 0:
            raise ValueError("metrics_weight + panel_weight must be > 0")
        if self.mode == "fallback" and not self.fallbacks:
            raise ValueError("mode fallback needs a non-empty 'fallbacks' list")
        if self.mode == "blend" and self.fallbacks:
            raise ValueError("'fallbacks' only applies to mode fallback")
        if self.mode == "fallback" and self.aggregation == "zscore":
            raise ValueError("aggregation zscore applies to mode blend (the norms are of rubric scores)")
        if self.calibrate and (self.mode != "blend" or not self.calibration):
            raise ValueError("calibrate: true needs mode blend and a calibration map for at least one judge")
        for name, points in self.calibration.items():
            xs, ys = [p[0] for p in points], [p[1] for p in points]
            if not points or any(not 0.0 <= v <= 1.0 for v in xs + ys):
                raise ValueError(
                    f"calibration.{name}: points [judge score, human score] within 0-1, at least one"
                )
            if any(b <= a for a, b in itertools.pairwise(xs)) or any(
                b < a for a, b in itertools.pairwise(ys)
            ):
                raise ValueError(
                    f"calibration.{name}: judge scores must ascend and human scores must not descend"
                )
        return self


def panel_judges(judges: Sequence[JudgeConfig], names: Sequence[str] | None) -> list[JudgeConfig]:
    """The enabled judges of a panel (all enabled judges when ``names`` is None), in config order."""
    chosen = [j for j in judges if names is None or j.name in names]
    return [j for j in chosen if j.enabled]


def check_panel_weights(judges: Sequence[JudgeConfig]) -> str | None:
    """None when the enabled judges' weights sum to 1, else the message showing the sum (the multi-judge
    spec)."""
    enabled = [j for j in judges if j.enabled]
    if not enabled:
        return "the panel has no enabled judge"
    total = math.fsum(j.weight for j in enabled)
    if abs(total - 1.0) <= WEIGHT_TOLERANCE:
        return None
    terms = " + ".join(f"{j.name} {j.weight:g}" for j in enabled)
    return f"weights of the enabled judges must sum to 1; they sum to {total:g} ({terms})"
