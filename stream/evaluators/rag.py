"""The RAG-evaluation spec's retrieval and graph metrics, scored by rule from the event's ``retrieval`` block.

Every metric is 0-1 (the RAG-evaluation spec: 0-0.3 poor, 0.4-0.7 fair, 0.8-1.0 good). Each class declares its
LLM fallback trigger from the RAG-evaluation spec's table as ``llm_fallback`` (see ``fallback.py``); no judge
is called here. Text matching is case-folded substring search; keywords are the block's ``keywords`` or the
content words of ``input`` (rjieba for Chinese, stop words removed).

The spec describes the rules in words; the exact formulas below are ours where it gives none, and
every constant is a parameter. Formulas (n_e entities, n_r relationships, kw = keyword match rate):

* retrieval_precision: |cited ∩ retrieved| / |cited|  (spec: matched / 引用实体总数)
* retrieval_utilization: mean over retrieved entities of 1 if cited or named in the answer, else the
  best similarity to a cited entity when >= ``partial_from`` (spec: 部分匹配和相似性), else 0
* retrieval_latency: raw seconds in ``details.latency_s`` and counter ``latency_s``; the score is
  ``min(1, budget_s / latency_s)`` — 1 within the latency budget, falling as the latency grows
* chunk_utilization: mean over cited chunks with text of (key phrases found in the answer / key phrases);
  key phrases = the chunk's ``max_phrases`` most frequent content words
* entity_coverage: (1 − count_weight) × kw(entity names + descriptions) + count_weight × min(1, n_e / entity_target)
* graph_coverage: 0.3 structure + 0.4 relevance + 0.3 connectivity; structure = mean of
  min(1, n_e / entity_target) and min(1, n_r / relationship_target), relevance = kw over entity and
  relationship text, connectivity = share of entities in at least one relationship
* relationship_utilization: mean of quantity min(1, n_r / relationship_target), quality (mean of the share
  with a description and the share of distinct types) and relevance (share touching a cited entity)
* subgraph_quality: 0.5 density (distinct edges / (n_e (n_e − 1) / 2)) + 0.5 connectivity
* community_relevance: min(1, base + match_weight × kw(community summaries) × boost), base and boost by
  ``agent_type`` (spec: 根据代理类型给予不同基础分和加成; defaults from the spec's implementation:
  graph 0.4 / ×1.2, hybrid 0.35 / ×1.1, others 0.3 / ×1)
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Annotated, ClassVar

from pydantic import BaseModel, ConfigDict, Field, field_validator
from rapidfuzz.distance import Indel

from ..blocks import RetrievalBlock
from ..models import RequestEvent
from ._base import Evaluator, MissingField, Params, Score, register
from ._lang import content_tokens, keywords, normalize_answer
from .fallback import LLMFallback

__all__ = [
    "ChunkUtilization",
    "CommunityRelevance",
    "EntityCoverage",
    "GraphCoverage",
    "RelationshipUtilization",
    "RetrievalLatency",
    "RetrievalPrecision",
    "RetrievalUtilization",
    "SubgraphQuality",
]


NonNegative = Annotated[float, Field(ge=0.0)]


def _block(event: RequestEvent) -> RetrievalBlock:
    if event.retrieval is None:
        raise MissingField("the event has no retrieval block")
    return event.retrieval


def _key(text: str) -> str:
    return text.casefold().strip()


def _keywords(event: RequestEvent, block: RetrievalBlock) -> list[str]:
    found = (
        [_key(k) for k in block.keywords if k.strip()]
        if block.keywords is not None
        else keywords(event.input or "")
    )
    if not found:
        raise MissingField("no question keywords: give retrieval.keywords or an input with content words")
    return found


def _match_rate(words: list[str], text: str) -> float:
    haystack = text.casefold()
    return sum(1 for w in words if w in haystack) / len(words)


def _node_ids(block: RetrievalBlock) -> set[str]:
    return {_key(e.id) for e in block.entities} or {_key(e) for e in block.cited_entities}


def _entity_text(block: RetrievalBlock) -> str:
    parts: Iterable[str | None] = [x for e in block.entities for x in (e.id, e.name, e.description)]
    return " ".join(p for p in parts if p) or " ".join(block.cited_entities)


def _relationship_text(block: RetrievalBlock) -> str:
    return " ".join(x for r in block.relationships for x in (r.source, r.type, r.target, r.description) if x)


class _RagParams(Params):
    threshold: float = Field(default=0.5, ge=0.0, le=1.0, description="pass at or above this score")


class _Rag(Evaluator):
    Params = _RagParams
    params: _RagParams

    def _score(self, value: float, reason: str, details: Mapping[str, object] | None = None) -> Score:
        value = min(1.0, max(0.0, value))
        return Score(value, value >= self.params.threshold, reason, dict(details) if details else None)


@register
class RetrievalPrecision(_Rag):
    """The RAG-evaluation spec §3.1: share of the cited entities that are among the retrieved ones."""

    name = "retrieval_precision"
    summary = "cited entities found among retrieved entities / cited"
    llm_fallback: ClassVar[LLMFallback] = LLMFallback("at_most", 0.5)

    def evaluate(self, event: RequestEvent) -> Score:
        block = _block(event)
        cited = {_key(e) for e in block.cited_entities if e.strip()}
        if not cited:
            raise MissingField("retrieval.cited_entities is empty")
        matched = len(cited & {_key(e) for e in block.retrieved_entities})
        return self._score(matched / len(cited), f"{matched} of {len(cited)} cited entities were retrieved")


class UtilizationParams(_RagParams):
    partial_from: float = Field(
        default=0.8, ge=0.0, le=1.0, description="similarity counted as a partial match"
    )


@register
class RetrievalUtilization(_Rag):
    """The RAG-evaluation spec §3.2: how much of what was retrieved the answer used (cited, named, or partially matched)."""

    name = "retrieval_utilization"
    summary = "share of retrieved entities the answer uses"
    Params = UtilizationParams
    params: UtilizationParams
    llm_fallback: ClassVar[LLMFallback] = LLMFallback("at_most", 0.5)

    def evaluate(self, event: RequestEvent) -> Score:
        block = _block(event)
        retrieved = list(dict.fromkeys(_key(e) for e in block.retrieved_entities if e.strip()))
        if not retrieved:
            raise MissingField("retrieval.retrieved_entities is empty")
        cited = {_key(e) for e in block.cited_entities}
        names = {_key(e.id): _key(e.name) for e in block.entities if e.name}
        answer = event.output.casefold()
        credit = 0.0
        for entity in retrieved:
            if entity in cited or entity in answer or (entity in names and names[entity] in answer):
                credit += 1.0
                continue
            best = max((Indel.normalized_similarity(entity, c) for c in cited), default=0.0)
            credit += best if best >= self.params.partial_from else 0.0
        return self._score(
            credit / len(retrieved), f"{credit:.2f} of {len(retrieved)} retrieved entities used"
        )


class LatencyParams(_RagParams):
    budget_s: float = Field(default=5.0, gt=0.0, description="latency budget in seconds; score 1 within it")


@register
class RetrievalLatency(_Rag):
    """The RAG-evaluation spec §3.3: the raw latency in seconds (``details.latency_s``, counter ``latency_s``
    so the window sums it); the 0-1 score is ``min(1, budget_s / latency_s)`` and passing means within the
    budget."""

    name = "retrieval_latency"
    summary = "retrieval latency: raw seconds in details/counters, score against a latency budget"
    Params = LatencyParams
    params: LatencyParams
    llm_fallback: ClassVar[LLMFallback] = LLMFallback("never")

    def evaluate(self, event: RequestEvent) -> Score:
        latency = _block(event).latency_s
        if latency is None:
            raise MissingField("retrieval.latency_s is missing")
        budget = self.params.budget_s
        score = 1.0 if latency <= budget else budget / latency
        return Score(
            score,
            latency <= budget,
            f"latency {latency:.3f} s against a budget of {budget:g} s",
            {"latency_s": latency, "budget_s": budget},
            {"latency_s": latency},
        )


class ChunkParams(_RagParams):
    max_phrases: int = Field(default=20, ge=1, le=200, description="key phrases taken from each chunk")


@register
class ChunkUtilization(_Rag):
    """The RAG-evaluation spec §3.4: mean share of each cited chunk's key phrases that appear in the answer."""

    name = "chunk_utilization"
    summary = "key phrases of cited chunks found in the answer"
    Params = ChunkParams
    params: ChunkParams
    llm_fallback: ClassVar[LLMFallback] = LLMFallback(
        "at_most", 0.4, on_missing=True, note="or chunk text unavailable"
    )

    def evaluate(self, event: RequestEvent) -> Score:
        answer = normalize_answer(event.output)
        ratios = []
        for chunk in _block(event).chunks:
            phrases = [
                w for w, _ in Counter(content_tokens(chunk.text or "")).most_common(self.params.max_phrases)
            ]
            if phrases:
                ratios.append(sum(1 for p in phrases if p in answer) / len(phrases))
        if not ratios:
            raise MissingField("no cited chunk with text (retrieval.chunks[].text)")
        return self._score(
            sum(ratios) / len(ratios),
            f"mean key-phrase use over {len(ratios)} chunk(s)",
            {"per_chunk": ratios},
        )


class EntityCoverageParams(_RagParams):
    count_weight: float = Field(default=0.2, ge=0.0, le=1.0, description="weight of the entity-count factor")
    entity_target: int = Field(default=5, ge=1, description="entities for a full count factor")


@register
class EntityCoverage(_Rag):
    """The RAG-evaluation spec §4.1: question keywords found in the cited entities' names and descriptions,
    with a smaller weight on how many entities there are."""

    name = "entity_coverage"
    summary = "question keywords matched in cited entity info"
    Params = EntityCoverageParams
    params: EntityCoverageParams
    llm_fallback: ClassVar[LLMFallback] = LLMFallback("at_most", 0.4)

    def evaluate(self, event: RequestEvent) -> Score:
        block = _block(event)
        words = _keywords(event, block)
        rate = _match_rate(words, _entity_text(block))
        count = len(_node_ids(block))
        w = self.params.count_weight
        score = (1 - w) * rate + w * min(1.0, count / self.params.entity_target)
        return self._score(score, f"keyword match {rate:.2f} over {count} entities", {"keyword_match": rate})


class GraphCoverageParams(_RagParams):
    entity_target: int = Field(default=5, ge=1, description="entities for a full structure score")
    relationship_target: int = Field(default=5, ge=1, description="relationships for a full structure score")
    weights: tuple[NonNegative, NonNegative, NonNegative] = Field(
        default=(0.3, 0.4, 0.3), description="structure, relevance, connectivity weights (>= 0, positive sum)"
    )

    @field_validator("weights")
    @classmethod
    def _positive_sum(cls, weights: tuple[float, float, float]) -> tuple[float, float, float]:
        if sum(weights) <= 0:
            raise ValueError("graph_coverage weights must have a positive sum")
        return weights


@register
class GraphCoverage(_Rag):
    """The RAG-evaluation spec §4.2: weighted structure, relevance and connectivity of the cited graph data."""

    name = "graph_coverage"
    summary = "structure, keyword relevance and connectivity of the cited graph"
    Params = GraphCoverageParams
    params: GraphCoverageParams
    llm_fallback: ClassVar[LLMFallback] = LLMFallback("at_most", 0.4)

    def evaluate(self, event: RequestEvent) -> Score:
        block = _block(event)
        words = _keywords(event, block)
        nodes = _node_ids(block)
        p = self.params
        structure = (
            min(1.0, len(nodes) / p.entity_target)
            + min(1.0, len(block.relationships) / p.relationship_target)
        ) / 2
        relevance = _match_rate(words, _entity_text(block) + " " + _relationship_text(block))
        linked = {_key(x) for r in block.relationships for x in (r.source, r.target)}
        connectivity = len(nodes & linked) / len(nodes) if nodes else 0.0
        ws, wr, wc = p.weights
        score = (ws * structure + wr * relevance + wc * connectivity) / (ws + wr + wc)
        parts = {"structure": structure, "relevance": relevance, "connectivity": connectivity}
        return self._score(score, ", ".join(f"{k} {v:.2f}" for k, v in parts.items()), parts)


class RelationshipParams(_RagParams):
    relationship_target: int = Field(default=5, ge=1, description="relationships for a full quantity score")


@register
class RelationshipUtilization(_Rag):
    """The RAG-evaluation spec §4.3: mean of quantity, quality (described, diverse types) and relevance
    (touching a cited entity) of the relationships."""

    name = "relationship_utilization"
    summary = "quantity, quality and relevance of the cited relationships"
    Params = RelationshipParams
    params: RelationshipParams
    llm_fallback: ClassVar[LLMFallback] = LLMFallback(
        "at_most", 0.4, on_missing=True, note="or no relationships"
    )

    def evaluate(self, event: RequestEvent) -> Score:
        block = _block(event)
        rels = block.relationships
        if not rels:
            raise MissingField("retrieval.relationships is empty")
        n = len(rels)
        quantity = min(1.0, n / self.params.relationship_target)
        described = sum(1 for r in rels if r.description and r.description.strip()) / n
        diversity = len({_key(r.type) for r in rels if r.type}) / n
        quality = (described + diversity) / 2
        cited = {_key(e) for e in block.cited_entities} or _node_ids(block)
        relevance = sum(1 for r in rels if _key(r.source) in cited or _key(r.target) in cited) / n
        parts = {"quantity": quantity, "quality": quality, "relevance": relevance}
        return self._score(
            sum(parts.values()) / 3, ", ".join(f"{k} {v:.2f}" for k, v in parts.items()), parts
        )


@register
class SubgraphQuality(_Rag):
    """The RAG-evaluation spec §4.4: 0.5 × density + 0.5 × connectivity of the cited subgraph."""

    name = "subgraph_quality"
    summary = "density and connectivity of the cited subgraph"
    llm_fallback: ClassVar[LLMFallback] = LLMFallback(
        "at_most", 0.4, on_missing=True, note="or no entities/relationships"
    )

    def evaluate(self, event: RequestEvent) -> Score:
        block = _block(event)
        nodes = _node_ids(block)
        if not nodes and not block.relationships:
            raise MissingField("retrieval has neither entities nor relationships")
        edges = {frozenset((_key(r.source), _key(r.target))) for r in block.relationships}
        n = len(nodes)
        density = min(1.0, len(edges) / (n * (n - 1) / 2)) if n > 1 else 0.0
        linked = {x for edge in edges for x in edge}
        connectivity = len(nodes & linked) / n if n else 0.0
        parts = {"density": density, "connectivity": connectivity}
        return self._score(
            0.5 * density + 0.5 * connectivity,
            f"density {density:.2f}, connectivity {connectivity:.2f}",
            parts,
        )


class AgentBoost(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    base: float = Field(ge=0.0, le=1.0)
    boost: float = Field(default=1.0, ge=0.0)


class CommunityParams(_RagParams):
    base: float = Field(default=0.3, ge=0.0, le=1.0, description="base score for agent types not listed")
    match_weight: float = Field(default=0.5, ge=0.0, le=1.0, description="weight of the keyword match rate")
    agent_types: dict[str, AgentBoost] = Field(
        default_factory=lambda: {
            "graph": AgentBoost(base=0.4, boost=1.2),
            "hybrid": AgentBoost(base=0.35, boost=1.1),
        },
        description="base score and match boost by retrieval.agent_type",
    )


@register
class CommunityRelevance(_Rag):
    """The RAG-evaluation spec §4.5: question keywords found in the communities' summaries, on a base by agent type."""

    name = "community_relevance"
    summary = "question keywords matched in community summaries, by agent type"
    Params = CommunityParams
    params: CommunityParams
    llm_fallback: ClassVar[LLMFallback] = LLMFallback("at_most", 0.4)

    def evaluate(self, event: RequestEvent) -> Score:
        block = _block(event)
        words = _keywords(event, block)
        agent = self.params.agent_types.get(_key(block.agent_type or ""))
        base, boost = (agent.base, agent.boost) if agent else (self.params.base, 1.0)
        text = " ".join(c.summary for c in block.communities if c.summary)
        if not text:
            return self._score(base, "no community summaries: base score only", {"keyword_match": None})
        rate = _match_rate(words, text)
        score = base + self.params.match_weight * rate * boost
        return self._score(
            score,
            f"keyword match {rate:.2f} in {len(block.communities)} communities",
            {"keyword_match": rate},
        )
