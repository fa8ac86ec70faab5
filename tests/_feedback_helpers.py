"""Shared helpers of the human-label tests (not a test module): judged results, stores, labels."""

from __future__ import annotations

from typing import Any

import redis.asyncio as aioredis

from streameval.features.labels import Label, LabelStore, VerdictRecorder
from streameval.keyspace import Keys
from streameval.models import EvaluatorResult, Feedback, GradedResult, JudgeBlock, JudgeVerdict
from streameval.store import ResultStore

NOW = 1795255231.0  # 2026-11-21T10:00:31Z: the events' windows are open
JUDGES = ("alpha", "beta", "gamma")


def result(
    event_id: str, scores: dict[str, float | None], *, model: str = "m", suite: str = "qa", rule: float = 0.5
) -> GradedResult:
    verdicts = [
        JudgeVerdict(
            name=j,
            model=f"m-{j}",
            weight=1 / 3,
            status="ok" if s is not None else "error",
            prompt="standard",
            scale="0-10",
            score=s,
        )
        for j, s in scores.items()
    ]
    answered = [s for s in scores.values() if s is not None]
    panel = sum(answered) / len(answered) if answered else 0.0
    score = (panel / 10 + rule) / 2
    return GradedResult(
        id=event_id,
        model=model,
        suite=suite,
        score=score,
        passed=score >= 0.6,
        threshold=0.6,
        grade="x",
        evaluators=[
            EvaluatorResult(name="exact_match", score=rule, passed=rule >= 0.6, weight=1.0),
            EvaluatorResult(name="judge_panel", score=panel / 10, passed=panel >= 6, weight=1.0),
        ],
        event_time="2026-11-21T10:00:30Z",
        evaluated_at="2026-11-21T10:00:30Z",
        latency_ms=5.0,
        pipeline_version="t",
        judge=JudgeBlock(
            status="ok",
            mode="blend",
            prompt="rubric",
            category=None,
            panel_score=panel,
            metrics_score=panel,
            final_score=panel,
            reason="",
            judges=verdicts,
            fallbacks=[],
        ),
    )


def stores(aredis: aioredis.Redis, prefix: str, **options: Any) -> tuple[ResultStore, LabelStore]:
    labels = LabelStore(aredis, Keys(prefix), windows=(60,), clock=lambda: NOW, **options)
    store = ResultStore(
        aredis, prefix=prefix, windows=(60,), clock=lambda: NOW, recorders=[VerdictRecorder(labels)]
    )
    return store, labels


async def record(store: ResultStore, results: list[GradedResult]) -> None:
    await store.record_many([(r, r.model_dump_json().encode(), None) for r in results])


def label(event_id: str, **fields: Any) -> Label:
    feedback = Feedback(id=event_id, **fields)
    return Label(feedback, feedback.model_dump_json().encode(), "evals.feedback", 0, 7)
