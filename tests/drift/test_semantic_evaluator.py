"""semantic_similarity in the pipeline: scores, max over references, one embedding pass per batch,
sampling, and the same outcomes in evaluation processes as in the worker."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
import yaml
from _semantic_extra import need_extra

from streameval.config import parse_config_text
from streameval.evalpool import EvalPool
from streameval.pipeline import Outcome, Pipeline, Source


def _suite(**params: Any) -> str:
    return yaml.safe_dump(
        {
            "suites": [
                {
                    "name": "meaning",
                    "default": True,
                    "evaluators": [
                        {"evaluator": "semantic_similarity", "params": params},
                        {"evaluator": "similarity"},
                    ],
                }
            ]
        }
    )


def _event(n: int, output: str, expected: str | None = None, references: list[str] | None = None) -> bytes:
    doc: dict[str, Any] = {"id": f"e-{n}", "model": "m", "input": "q", "output": output}
    if expected is not None:
        doc["expected"] = expected
    if references is not None:
        doc["references"] = references
    return orjson.dumps(doc)


def _pipeline(text: str) -> Pipeline:
    _, suites = parse_config_text(text)
    return Pipeline(suites)


def _semantic(outcome: Outcome | None) -> Any:
    assert outcome is not None and outcome.result is not None
    return next((r for r in outcome.result.evaluators if r.name == "semantic_similarity"), None)


BATCH = [
    _event(
        0,
        "The meeting was moved to Thursday afternoon.",
        "We rescheduled the meeting for Thursday afternoon.",
    ),
    _event(
        1, "The meeting was moved to Thursday afternoon.", "Penguins live mostly in the Southern Hemisphere."
    ),
    _event(
        2, "Tokyo is Japan's capital city.", references=["The sky is blue.", "The capital of Japan is Tokyo."]
    ),
    _event(3, "no targets at all"),
]


def test_scores_paraphrase_high_unrelated_low_and_best_reference() -> None:
    need_extra()
    outcomes = _pipeline(_suite(threshold=0.6)).process_sync_batch([(raw, Source()) for raw in BATCH], 0.0)
    para, unrelated, refs, missing = (_semantic(o) for o in outcomes)
    assert para.passed and para.score > 0.6 and para.details["cosine"] == pytest.approx(para.score, abs=1e-6)
    assert not unrelated.passed and unrelated.score < 0.3
    assert refs.passed and refs.details["target"] == 1
    assert missing.error == "missing_field" and not missing.passed
    assert "semantic similarity" in para.reason and "at least 0.6" in para.reason


def test_one_embedding_pass_per_batch_gives_the_per_event_scores(monkeypatch: pytest.MonkeyPatch) -> None:
    need_extra()
    batched, single = _pipeline(_suite()), _pipeline(_suite())
    evaluator = batched.suites.by_name["meaning"].evaluators[0].evaluator
    calls: list[int] = []
    encode = evaluator.encoder.encode_exact

    def counting(texts: list[str], **kw: Any) -> Any:
        calls.append(len(texts))
        return encode(texts, **kw)

    monkeypatch.setattr(evaluator.encoder, "encode_exact", counting)
    together = batched.process_sync_batch([(raw, Source()) for raw in BATCH], 0.0)
    assert calls == [7]  # the batch's distinct outputs and targets, once; evaluate() found them all
    apart = [single.process_sync(raw, Source(), 0.0) for raw in BATCH]
    for a, b in zip(together, apart, strict=True):
        sa, sb = _semantic(a), _semantic(b)
        # no padding (encode_exact): an event's score does not depend on the batch it came in
        assert (sa.score, sa.passed, sa.details) == (sb.score, sb.passed, sb.details)


def test_sample_rate_leaves_unsampled_events_without_an_entry() -> None:
    need_extra()
    pipeline = _pipeline(_suite(sample_rate=0.3))
    raws = [_event(n, f"answer number {n}", f"the answer is {n}") for n in range(200)]
    outcomes = pipeline.process_sync_batch([(raw, Source()) for raw in raws], 0.0)
    kept = [o for o in outcomes if _semantic(o) is not None]
    assert 40 <= len(kept) <= 80  # ~60 of 200
    assert all(len(o.result.evaluators) == 1 for o in outcomes if _semantic(o) is None)  # similarity only
    again = pipeline.process_sync_batch([(raw, Source()) for raw in raws], 0.0)
    assert [_semantic(o) is None for o in again] == [_semantic(o) is None for o in outcomes]  # by event id


async def test_evaluation_processes_give_the_worker_outcomes() -> None:
    need_extra()
    text = _suite(threshold=0.6)
    local = _pipeline(text).process_sync_batch([(raw, Source()) for raw in BATCH], 0.0)
    pool = EvalPool(text, "suite.yaml", 1, max_event_bytes=1 << 20, max_event_depth=64)
    await pool.start()
    try:
        remote = await pool.evaluate([(raw, Source()) for raw in BATCH], 0.0)
    finally:
        await pool.close()
    for a, b in zip(local, remote, strict=True):
        assert (_semantic(a).score, _semantic(a).passed) == pytest.approx(
            (_semantic(b).score, _semantic(b).passed)
        )
