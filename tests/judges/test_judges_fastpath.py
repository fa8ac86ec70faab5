"""The judged path's cheaper steps build what the validating steps built.

A judged suite's graded result is built without a second validation when its fields have the model's
types (``result_build.built_graded``, as for suites without a panel: the judge block is kept as the very
instance validation keeps); a verdict's parsed fields are set on the verdict itself instead of on a
``model_copy``; a blend panel not asked twice is gathered without a task around it; the counter
names of a judge pair are built once. Each is checked here against the code it replaced, on the
example events judged by the simulated panel (the multi-judge spec's three judges).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from streameval.config import parse_config
from streameval.judges import JudgeConfig, _panel, _scoring
from streameval.judges._cache import CachedAnswer
from streameval.judges._parse import parse_answer
from streameval.judges._prompts import build_rubric
from streameval.judges.sim import demo_judges, start_judge_sim
from streameval.models import GradedResult, JudgeVerdict, RequestEvent, encode_result
from streameval.pipeline import Pipeline, Source
from streameval.stats import alpha_unit

ROOT = Path(__file__).resolve().parents[2]
CLOCK = 1_764_000_000.25


def _events() -> list[bytes]:
    return [line for line in (ROOT / "examples" / "events.jsonl").read_bytes().splitlines() if line.strip()]


@pytest.mark.parametrize("consistency_rate", [0.0, 0.5])
async def test_judged_graded_results_equal_validated_ones(consistency_rate: float) -> None:
    async with start_judge_sim(malformed_rate=0.1, error_rate=0.05, seed=3) as url:
        _, suites = parse_config(
            {
                "judges": [{**j, "retry_wait_s": 0.0, "retry_jitter_s": 0.0} for j in demo_judges(url)],
                "suites": [
                    {
                        "name": "judged",
                        "default": True,
                        "evaluators": [{"evaluator": "exact_match"}, {"evaluator": "similarity"}],
                        "judge": {"consistency_rate": consistency_rate},
                    }
                ],
            }
        )
        pipeline = Pipeline(suites, clock=lambda: CLOCK)
        await pipeline.start()
        try:
            checked = repeats = 0
            for raw in _events()[:40]:
                outcome = await pipeline.process(raw, Source(), received_at=CLOCK - 0.5)
                got = outcome.result
                if got is None:
                    continue
                assert got.judge is not None and len(got.judge.judges) == 3
                values = {name: getattr(got, name) for name in got.model_fields_set}
                expected = GradedResult(**values)
                assert got == expected and got.model_fields_set == expected.model_fields_set
                assert got.__getstate__() == expected.__getstate__() and repr(got) == repr(expected)
                assert got.model_dump_json() == expected.model_dump_json()
                assert encode_result(got) == got.model_dump_json().encode()  # the judge block by orjson
                repeats += "repeat" in (got.evaluators[-1].details or {})
                checked += 1
        finally:
            await pipeline.close()
    assert checked > 30
    assert (repeats > 0) == (consistency_rate > 0)  # both ways of asking the panel ran


def _copied(cfg: Any, prompt: Any, verdict: Any, answer: CachedAnswer) -> JudgeVerdict:
    """The code the in-place update replaced: the base verdict, then ``model_copy(update=...)``."""
    out = JudgeVerdict(
        name=cfg.name,
        model=cfg.model,
        weight=cfg.weight,
        status="ok",
        prompt=prompt.kind,
        scale=prompt.scale,
        error=None,
        reason=None,
        latency_ms=12.5,
        attempts=1,
        cached=False,
        prompt_tokens=answer.prompt_tokens,
        completion_tokens=answer.completion_tokens,
    )
    return out.model_copy(
        update={
            "score": min(10.0, max(0.0, verdict.score)),
            "parse": verdict.parse,
            "scores": verdict.scores,
            "overall": verdict.overall,
            "computed": verdict.computed,
            "reasoning": verdict.reasoning,
            "strengths": verdict.strengths,
            "weaknesses": verdict.weaknesses,
            "warnings": verdict.warnings,
        }
    )


@pytest.mark.parametrize(
    "text",
    [
        '{"scores": {"accuracy": 4, "conciseness": 5, "clarity": 3}, "overall_score": 4, "reasoning": "ok",'
        ' "strengths": ["a"], "weaknesses": []}',
        '{"scores": {"accuracy": 4.5}, "reasoning": "partial"}',
        'I\'d say 3 out of 5. ```json\n{"overall_score": 3}\n```',
        "no score here at all",
    ],
)
def test_a_verdict_updated_in_place_equals_the_copied_one(text: str) -> None:
    event = RequestEvent.model_validate_json(_events()[1])
    for cfg in (JudgeConfig.model_validate(j) for j in demo_judges("http://127.0.0.1:9")):
        prompt = build_rubric(event, "qa_simple", cfg.scale, blind=cfg.blind)
        parsed = parse_answer(text, prompt)
        answer = CachedAnswer(text, 10, 20)
        got = _panel._verdict(
            cfg, prompt, status="ok", verdict=parsed, answer=answer, latency_ms=12.5, attempts=1
        )
        expected = _copied(cfg, prompt, parsed, answer)
        assert got == expected and got.model_fields_set == expected.model_fields_set
        assert got.model_dump_json() == expected.model_dump_json()


def _agreement_before(units: list[list[JudgeVerdict]]) -> dict[str, float]:
    """agreement_counters as it was written before its names were cached."""
    out: dict[str, float] = {}

    def add(name: str, value: float) -> None:
        if value:
            out[name] = out.get(name, 0.0) + value

    for unit in units:
        scored = sorted((v.name, v.score) for v in unit if v.status == "ok" and v.score is not None)
        for i, (a, x) in enumerate(scored):
            for b, y in scored[i + 1 :]:
                base = f"pair:{a}:{b}:"
                for stat, value in (
                    ("n", 1.0),
                    ("sx", x),
                    ("sy", y),
                    ("sxx", x * x),
                    ("syy", y * y),
                    ("sxy", x * y),
                ):
                    add(base + stat, value)
        m, s1, s2, observed = alpha_unit([score for _, score in scored])
        for stat, value in (("n", m), ("s1", s1), ("s2", s2), ("do", observed)):
            add("alpha:" + stat, value)
    return out


def test_agreement_counters_are_the_same_names_values_and_order() -> None:
    def verdict(name: str, score: float | None, status: str = "ok") -> JudgeVerdict:
        return JudgeVerdict(
            name=name, model="m", weight=0.5, status=status, prompt="standard", scale="1-5", score=score
        )

    units = [
        [verdict("b", 7.5), verdict("a", 2.0), verdict("c", 0.0)],
        [verdict("a", 10.0), verdict("b", None, "error"), verdict("c", 3.25)],
        [verdict("c", 5.0)],
        [],
    ]
    for chosen in (units, units[:1], units[1:], [units[0], units[0]]):
        got, expected = _scoring.agreement_counters(chosen), _agreement_before(chosen)
        assert orjson.dumps(got) == orjson.dumps(expected)


async def test_fallback_mode_results_encode_as_pydantic_writes_them() -> None:
    """The RAG-evaluation spec's per-metric fallback: judge blocks holding fallbacks with their verdicts."""
    async with start_judge_sim(malformed_rate=0.1, seed=5) as url:
        _, suites = parse_config(
            {
                "judges": demo_judges(url),
                "suites": [
                    {
                        "name": "rag",
                        "default": True,
                        "evaluators": [{"evaluator": "exact_match"}, {"evaluator": "similarity"}],
                        "judge": {
                            "mode": "fallback",
                            "fallbacks": [
                                {"evaluator": "exact_match", "prompt": "equivalence", "trigger": "always"},
                                {"evaluator": "similarity", "prompt": "similarity", "trigger": 0.9},
                            ],
                        },
                    }
                ],
            }
        )
        pipeline = Pipeline(suites, clock=lambda: CLOCK)
        await pipeline.start()
        try:
            fallbacks = 0
            for raw in _events()[:25]:
                outcome = await pipeline.process(raw, Source(), received_at=CLOCK - 0.5)
                if outcome.result is None:
                    continue
                assert outcome.result.judge is not None
                fallbacks += len(outcome.result.judge.fallbacks)
                assert encode_result(outcome.result) == outcome.result.model_dump_json().encode()
        finally:
            await pipeline.close()
    assert fallbacks > 20
