"""LLM judge panel: the multi-judge spec, the report-quality spec's blend, the RAG-evaluation spec's fallback.

Configure judges in the suite file's top-level ``judges:`` list and a suite's ``judge:`` block
(:mod:`streameval.config`); the pipeline runs the panel after the rule evaluators. See docs/judges.md.
"""

from __future__ import annotations

from ._cache import JudgeCache, TokenBudget
from ._client import Completion, JudgeClient
from ._config import FallbackSpec, JudgeConfig, SuiteJudgeConfig, check_panel_weights, panel_judges
from ._cost import prices_of, token_cost
from ._errors import (
    JudgeAuthError,
    JudgeBadResponse,
    JudgeBudgetExceeded,
    JudgeContextTooLong,
    JudgeError,
    JudgeHTTPError,
    JudgeRateLimited,
    JudgeRequestError,
    JudgeTimeout,
    JudgeUnavailable,
    map_httpx_error,
)
from ._panel import Judge, JudgeHub
from ._parse import ParsedAnswer, normalise, parse_answer
from ._prompts import TEMPLATE_VERSION, Prompt, build_metric, build_report, build_rubric
from ._protocols import PROTOCOLS, Protocol
from ._ready import JudgeProbe, judge_ready_checks
from ._rubrics import CRITERIA, METRIC_PROMPTS, REPORT_DIMENSIONS, RUBRICS
from ._scoring import agreement_counters, judge_counters, panel_score, repeat_counters, zscore_panel_score
from ._stats import JudgeTally, tally_verdict
from ._suite import PANEL_RESULT_NAME, Judgement, SuiteJudge, rejudged, sampled

__all__ = [
    "CRITERIA",
    "METRIC_PROMPTS",
    "PANEL_RESULT_NAME",
    "PROTOCOLS",
    "REPORT_DIMENSIONS",
    "RUBRICS",
    "TEMPLATE_VERSION",
    "Completion",
    "FallbackSpec",
    "Judge",
    "JudgeAuthError",
    "JudgeBadResponse",
    "JudgeBudgetExceeded",
    "JudgeCache",
    "JudgeClient",
    "JudgeConfig",
    "JudgeContextTooLong",
    "JudgeError",
    "JudgeHTTPError",
    "JudgeHub",
    "JudgeProbe",
    "JudgeRateLimited",
    "JudgeRequestError",
    "JudgeTally",
    "JudgeTimeout",
    "JudgeUnavailable",
    "Judgement",
    "ParsedAnswer",
    "Prompt",
    "Protocol",
    "SuiteJudge",
    "SuiteJudgeConfig",
    "TokenBudget",
    "agreement_counters",
    "build_metric",
    "build_report",
    "build_rubric",
    "check_panel_weights",
    "judge_counters",
    "judge_ready_checks",
    "map_httpx_error",
    "normalise",
    "panel_judges",
    "panel_score",
    "parse_answer",
    "prices_of",
    "rejudged",
    "repeat_counters",
    "sampled",
    "tally_verdict",
    "token_cost",
    "zscore_panel_score",
]
