"""The RAG-evaluation spec's retrieval and graph metrics on the ``retrieval`` block, and the LLM-fallback trigger table."""

from __future__ import annotations

from typing import Any

import pytest
from _support import event as request_event

from streameval.evaluators import MissingField, build_evaluator
from streameval.evaluators.fallback import LLMFallback, fallback_table
from streameval.models import RequestEvent

GRAPH: dict[str, Any] = {
    "retrieved_entities": ["Paris", "France", "Berlin", "Seine"],
    "cited_entities": ["paris", "France", "Lyon"],
    "entities": [
        {"id": "paris", "name": "Paris", "description": "capital city of France on the Seine"},
        {"id": "france", "name": "France", "description": "country in western Europe"},
        {"id": "lyon", "name": "Lyon"},
    ],
    "relationships": [
        {"source": "paris", "target": "france", "type": "capital_of", "description": "Paris is the capital"},
        {"source": "lyon", "target": "france", "type": "located_in"},
    ],
    "communities": [{"id": "c1", "summary": "European capitals and their rivers"}],
    "keywords": ["capital", "France", "river"],
    "latency_s": 2.5,
    "chunks": [{"id": "k1", "text": "Paris capital France. Paris river Seine."}, {"id": "k2"}],
}


def _event(output: str = "Paris is the capital of France.", **retrieval: Any) -> RequestEvent:
    return request_event(id="g", output=output, input="What is the capital of France?", retrieval=retrieval)


def _score(name: str, event: RequestEvent, params: dict[str, Any] | None = None) -> float:
    return build_evaluator(name, params).evaluate(event).score


def test_retrieval_precision() -> None:
    assert _score("retrieval_precision", _event(**GRAPH)) == pytest.approx(2 / 3)  # paris, france of 3 cited


def test_retrieval_utilization_counts_cited_named_and_partial() -> None:
    # paris, france: cited; berlin: no; seine: not cited, not in the answer -> 0
    assert _score("retrieval_utilization", _event(**GRAPH)) == pytest.approx(2 / 4)
    named = _event("Paris is on the Seine.", **GRAPH)  # seine named in the answer
    assert _score("retrieval_utilization", named) == pytest.approx(3 / 4)
    partial = dict(GRAPH, retrieved_entities=["Pariss"], cited_entities=["paris"])
    assert _score("retrieval_utilization", _event(**partial)) == pytest.approx(1 - 1 / 11)  # Indel 10/11


@pytest.mark.parametrize(
    ("latency", "score", "passed"), [(2.5, 1.0, True), (5.0, 1.0, True), (10.0, 0.5, False)]
)
def test_retrieval_latency_reports_seconds(latency: float, score: float, passed: bool) -> None:
    result = build_evaluator("retrieval_latency").evaluate(_event(**dict(GRAPH, latency_s=latency)))
    assert result.score == pytest.approx(score) and result.passed is passed
    assert (result.details or {})["latency_s"] == latency and result.counters == {"latency_s": latency}


def test_chunk_utilization() -> None:
    # chunk k1 key phrases: paris, capital, france, river, seine (k2 has no text and is skipped)
    assert _score("chunk_utilization", _event(**GRAPH)) == pytest.approx(3 / 5)


def test_entity_coverage() -> None:
    # keywords capital, france found in entity info; river not -> 2/3; 3 entities of a target of 5
    assert _score("entity_coverage", _event(**GRAPH)) == pytest.approx(0.8 * 2 / 3 + 0.2 * 3 / 5)


def test_graph_coverage() -> None:
    structure = (3 / 5 + 2 / 5) / 2
    relevance = 2 / 3
    connectivity = 3 / 3
    assert _score("graph_coverage", _event(**GRAPH)) == pytest.approx(
        0.3 * structure + 0.4 * relevance + 0.3 * connectivity
    )


def test_relationship_utilization() -> None:
    quantity, quality, relevance = 2 / 5, (1 / 2 + 2 / 2) / 2, 2 / 2
    assert _score("relationship_utilization", _event(**GRAPH)) == pytest.approx(
        (quantity + quality + relevance) / 3
    )


def test_subgraph_quality() -> None:
    # 3 nodes, 2 distinct edges of 3 possible; all 3 nodes linked
    assert _score("subgraph_quality", _event(**GRAPH)) == pytest.approx(0.5 * 2 / 3 + 0.5 * 1.0)


@pytest.mark.parametrize(
    ("agent_type", "expected"),
    [
        ("graph", 0.4 + 0.5 * (2 / 3) * 1.2),
        ("hybrid", 0.35 + 0.5 * (2 / 3) * 1.1),
        ("naive", 0.3 + 0.5 * 2 / 3),
        (None, 0.3 + 0.5 * 2 / 3),
    ],
)
def test_community_relevance_by_agent_type(agent_type: str | None, expected: float) -> None:
    # keywords capital, river found in "European capitals and their rivers"; france not
    assert _score("community_relevance", _event(**dict(GRAPH, agent_type=agent_type))) == pytest.approx(
        expected
    )


def test_keywords_default_to_the_question_content_words() -> None:
    block = dict(GRAPH, keywords=None)  # input "What is the capital of France?" -> capital, france
    assert _score("entity_coverage", _event(**block)) == pytest.approx(0.8 * 1.0 + 0.2 * 3 / 5)


@pytest.mark.parametrize(
    ("name", "block", "message"),
    [
        ("retrieval_precision", {}, "cited_entities"),
        ("retrieval_utilization", {}, "retrieved_entities"),
        ("retrieval_latency", {}, "latency_s"),
        ("chunk_utilization", {"chunks": [{"id": "x"}]}, "chunk"),
        ("relationship_utilization", {}, "relationships"),
        ("subgraph_quality", {}, "neither"),
        ("entity_coverage", {"keywords": []}, "keywords"),
    ],
)
def test_missing_data_raises_missing_field(name: str, block: dict[str, Any], message: str) -> None:
    with pytest.raises(MissingField, match=message):
        build_evaluator(name).evaluate(_event(**block))
    with pytest.raises(MissingField, match="no retrieval block"):
        build_evaluator(name).evaluate(RequestEvent(id="g", model="m", output="x"))


# the RAG-evaluation spec's "评估指标总结表": the LLM fallback trigger of every rule metric
SEED_TABLE = {
    "exact_match_normalized": ("below", 0.7, False),
    "token_f1": ("always", None, False),
    "retrieval_precision": ("at_most", 0.5, False),
    "retrieval_utilization": ("at_most", 0.5, False),
    "retrieval_latency": ("never", None, False),
    "chunk_utilization": ("at_most", 0.4, True),
    "entity_coverage": ("at_most", 0.4, False),
    "graph_coverage": ("at_most", 0.4, False),
    "relationship_utilization": ("at_most", 0.4, True),
    "subgraph_quality": ("at_most", 0.4, True),
    "community_relevance": ("at_most", 0.4, False),
}


def test_fallback_table_matches_the_seed() -> None:
    table = fallback_table()
    assert {n: (r.when, r.threshold, r.on_missing) for n, r in table.items()} == SEED_TABLE


@pytest.mark.parametrize(
    ("rule", "score", "expected"),
    [
        (LLMFallback("always"), 0.9, True),
        (LLMFallback("never"), 0.0, False),
        (LLMFallback("never"), None, False),
        (LLMFallback("at_most", 0.4), 0.4, True),
        (LLMFallback("at_most", 0.4), 0.41, False),
        (LLMFallback("at_most", 0.4), None, False),
        (LLMFallback("at_most", 0.4, on_missing=True), None, True),
        (LLMFallback("below", 0.7), 0.7, False),
        (LLMFallback("below", 0.7), 0.0, True),
    ],
)
def test_fallback_trigger(rule: LLMFallback, score: float | None, expected: bool) -> None:
    assert rule.triggered(score) is expected


@pytest.mark.parametrize("weights", [[0, 0, 0], [-1, 1, 1], [1, 1]])
def test_graph_coverage_rejects_bad_weights(weights: list[float]) -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError):
        build_evaluator("graph_coverage", {"weights": weights})
