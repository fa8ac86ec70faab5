"""The typed ``report`` / ``retrieval`` / ``agent`` blocks and ``label``: pydantic and the JSON Schema agree,
a malformed block is dead-lettered with its path, and every metric evaluator runs in a suite."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
import redis.asyncio as aioredis
from jsonschema import Draft202012Validator
from pydantic import BaseModel, ValidationError

from streameval import schemas
from streameval.blocks import AgentBlock, ReportBlock, RetrievalBlock
from streameval.config import parse_config
from streameval.evaluators.classification import classification_stats
from streameval.models import RequestEvent
from streameval.pipeline import Pipeline
from streameval.store import ResultStore

VALIDATOR = Draft202012Validator(schemas.load("request"))
BASE = {"id": "e1", "model": "m", "output": "Paris is the capital of France.", "expected": "Paris"}

VALID: list[dict[str, Any]] = [
    {"report": None, "retrieval": None, "agent": None, "label": None},
    {"report": {}, "retrieval": {}, "agent": {}, "label": True},
    {
        "report": {
            "style": "news",
            "required_sections": ["A"],
            "sections": [],
            "word_count": 0,
            "citations": 3,
            "sources": ["https://a.org"],
            "images": 1,
        }
    },
    {
        "retrieval": {
            "retrieved_entities": ["a"],
            "cited_entities": ["a"],
            "latency_s": 0,
            "chunks": [{"id": "c", "text": None}],
            "entities": [{"id": "a", "name": "A", "description": None}],
            "relationships": [{"source": "a", "target": "b", "type": None, "description": "d"}],
            "communities": [{"id": "x", "summary": "s"}],
            "keywords": ["k"],
            "agent_type": "graph",
        }
    },
    {
        "agent": {
            "task_quality": 1,
            "communication_rounds": 0,
            "task_time": 1.5,
            "original_score": 0.9,
            "transferred_score": 2,
            "results": [{"domain": "d", "score": 0.5}],
        }
    },
]

INVALID: list[tuple[dict[str, Any], str]] = [
    ({"report": {"style": "blog"}}, "$.report.style"),
    ({"report": {"citations": -1}}, "$.report.citations"),
    ({"report": {"pages": 3}}, "$.report"),
    ({"report": []}, "$.report"),
    ({"retrieval": {"entities": [{"name": "no id"}]}}, "$.retrieval.entities[0]"),
    (
        {"retrieval": {"relationships": [{"source": "a", "target": ""}]}},
        "$.retrieval.relationships[0].target",
    ),
    ({"retrieval": {"latency_s": -0.1}}, "$.retrieval.latency_s"),
    ({"retrieval": {"retrieved_entities": "a"}}, "$.retrieval.retrieved_entities"),
    ({"agent": {"task_quality": 1.5}}, "$.agent.task_quality"),
    ({"agent": {"communication_rounds": 2.5}}, "$.agent.communication_rounds"),
    ({"agent": {"results": [{"domain": "d"}]}}, "$.agent.results[0]"),
    ({"label": 1}, "$.label"),
    ({"label": "yes"}, "$.label"),
]


@pytest.mark.parametrize("extra", VALID)
def test_valid_blocks_pass_both(extra: dict[str, Any]) -> None:
    doc = {**BASE, **extra}
    assert not list(VALIDATOR.iter_errors(doc))
    event = RequestEvent.model_validate_json(orjson.dumps(doc))
    assert event.model_dump(exclude_unset=True) == doc


@pytest.mark.parametrize(("extra", "path"), INVALID)
def test_invalid_blocks_fail_both_and_dead_letter_with_the_path(extra: dict[str, Any], path: str) -> None:
    doc = {**BASE, **extra}
    assert list(VALIDATOR.iter_errors(doc))
    with pytest.raises(ValidationError):
        RequestEvent.model_validate_json(orjson.dumps(doc))
    _, suites = parse_config(
        {"suites": [{"name": "s", "default": True, "evaluators": [{"evaluator": "exact_match"}]}]}
    )
    import asyncio

    outcome = asyncio.run(Pipeline(suites).process(orjson.dumps(doc)))
    assert outcome.dead_letter is not None and outcome.dead_letter.kind == "schema"
    assert path in outcome.dead_letter.reason


def _props(model: type[BaseModel]) -> set[str]:
    return set(model.model_fields)


@pytest.mark.parametrize(
    ("model", "name"), [(ReportBlock, "report"), (RetrievalBlock, "retrieval"), (AgentBlock, "agent")]
)
def test_schema_defs_have_the_model_fields(model: type[BaseModel], name: str) -> None:
    schema = schemas.load("request")["$defs"][name]
    assert set(schema["properties"]) == _props(model)
    assert schema["additionalProperties"] is False and schema["required"] == []


ALL_METRICS = [
    "exact_match_normalized",
    "token_f1",
    "bleu",
    "bleu_simple",
    "rouge_l",
    "keyword_match",
    "report_metrics",
    "report_sections",
    "report_citations",
    "report_word_count",
    "report_sources",
    "report_images",
    "retrieval_precision",
    "retrieval_utilization",
    "retrieval_latency",
    "chunk_utilization",
    "entity_coverage",
    "graph_coverage",
    "relationship_utilization",
    "subgraph_quality",
    "community_relevance",
    "collaboration_efficiency",
    "portability",
    "adaptability",
]

FULL_EVENT = {
    **BASE,
    "input": "What is the capital of France?",
    "label": True,
    "report": {"style": "news", "citations": 4, "sources": ["a", "b"], "images": 1, "word_count": 1200},
    "retrieval": {**VALID[3]["retrieval"], "chunks": [{"id": "c", "text": "Paris is the French capital"}]},
    "agent": VALID[4]["agent"],
}


async def test_every_metric_runs_in_a_suite() -> None:
    config = {
        "suites": [{"name": "all", "default": True, "evaluators": [{"evaluator": n} for n in ALL_METRICS]}]
    }
    _, suites = parse_config(config)
    outcome = await Pipeline(suites).process(orjson.dumps(FULL_EVENT))
    assert outcome.result is not None, outcome.dead_letter
    results = {r.name: r for r in outcome.result.evaluators}
    assert set(results) == set(ALL_METRICS)
    assert [n for n, r in results.items() if r.error] == []
    assert outcome.counters is not None
    assert outcome.counters["keyword_match"] == {"tp": 1.0}
    assert outcome.counters["retrieval_latency"] == {"latency_s": 0.0}
    assert outcome.counters["adaptability"] == {"domain:d:sum": 0.5, "domain:d:n": 1.0}


async def test_confusion_cells_accumulate_in_the_redis_window(aredis: aioredis.Redis, prefix: str) -> None:
    store = ResultStore(aredis, prefix=prefix, windows=(60,))
    _, suites = parse_config(
        {"suites": [{"name": "s", "default": True, "evaluators": [{"evaluator": "keyword_match"}]}]}
    )
    pipeline = Pipeline(suites)
    rows = [
        ("Paris is the capital of France", True),
        ("Paris is the capital of France", False),
        ("I do not know", True),
        ("I do not know", False),
        ("capital France Paris", True),
    ]
    for i, (output, label) in enumerate(rows):
        doc = {
            "id": f"e{i}",
            "model": "m",
            "output": output,
            "expected": "The capital of France is Paris",
            "label": label,
            "timestamp": "2026-11-21T10:00:00Z",
        }
        outcome = await pipeline.process(orjson.dumps(doc))
        assert outcome.result is not None
        await store.record(outcome.result, outcome.result.model_dump_json().encode(), outcome.counters)
    # a redelivered event does not count twice
    await store.record(outcome.result, outcome.result.model_dump_json().encode(), outcome.counters)
    aggregate = (await store.all_time())[0]
    stats = classification_stats(aggregate.fields, evaluator="keyword_match")
    assert stats["count"] == 5
    assert stats["accuracy"] == pytest.approx(3 / 5)  # tp, tn, tp correct; fp, fn wrong
    assert stats["precision"] == pytest.approx(2 / 3) and stats["recall"] == pytest.approx(2 / 3)
