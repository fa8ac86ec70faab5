"""Typed context blocks of a request event: ``report`` (the report-quality spec), ``retrieval`` (the
RAG-evaluation spec), ``agent`` (the agent-metrics spec). Mirrored by ``$defs`` in
schemas/request-event.v1.json; a malformed block fails decoding (the event is dead-lettered with the field
path). Every field is optional: an evaluator that needs a missing one fails that event with ``missing_field``
and says which.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = [
    "REPORT_STYLES",
    "AgentBlock",
    "Chunk",
    "Community",
    "DomainScore",
    "Entity",
    "Relationship",
    "ReportBlock",
    "ReportStyle",
    "RetrievalBlock",
    "UsageBlock",
]

_STRICT = ConfigDict(extra="forbid", strict=True)

#: the report-quality spec's five report styles
ReportStyle = Literal["academic", "strategic_investment", "popular_science", "news", "social_media"]
REPORT_STYLES: tuple[str, ...] = (
    "academic",
    "strategic_investment",
    "popular_science",
    "news",
    "social_media",
)


class ReportBlock(BaseModel):
    """Facts about a generated report. Counts left out are measured from ``output`` (Markdown)."""

    model_config = _STRICT

    style: ReportStyle | None = None
    required_sections: list[str] | None = None
    sections: list[str] | None = None
    word_count: int | None = Field(default=None, ge=0)
    citations: int | None = Field(default=None, ge=0)
    sources: list[str] | None = None
    images: int | None = Field(default=None, ge=0)


class Entity(BaseModel):
    model_config = _STRICT

    id: str = Field(min_length=1)
    name: str | None = None
    description: str | None = None


class Relationship(BaseModel):
    model_config = _STRICT

    source: str = Field(min_length=1)
    target: str = Field(min_length=1)
    type: str | None = None
    description: str | None = None


class Chunk(BaseModel):
    model_config = _STRICT

    id: str = Field(min_length=1)
    text: str | None = None


class Community(BaseModel):
    model_config = _STRICT

    id: str = Field(min_length=1)
    summary: str | None = None


class RetrievalBlock(BaseModel):
    """What a RAG / GraphRAG system retrieved and cited for this answer (the RAG-evaluation spec §3-4)."""

    model_config = _STRICT

    retrieved_entities: list[str] = Field(default_factory=list)
    cited_entities: list[str] = Field(default_factory=list)
    latency_s: float | None = Field(default=None, ge=0.0)
    chunks: list[Chunk] = Field(default_factory=list)
    entities: list[Entity] = Field(default_factory=list)
    relationships: list[Relationship] = Field(default_factory=list)
    communities: list[Community] = Field(default_factory=list)
    keywords: list[str] | None = None
    agent_type: str | None = Field(default=None, min_length=1, max_length=64)


class DomainScore(BaseModel):
    model_config = _STRICT

    domain: str = Field(min_length=1, max_length=128)
    score: float = Field(ge=0.0, le=1.0)


class AgentBlock(BaseModel):
    """The agent-metrics spec's agent fields (same names as the spec's dataset requirements)."""

    model_config = _STRICT

    task_quality: float | None = Field(default=None, ge=0.0, le=1.0)
    communication_rounds: int | None = Field(default=None, ge=0)
    task_time: float | None = Field(default=None, ge=0.0)
    original_score: float | None = Field(default=None, ge=0.0)
    transferred_score: float | None = Field(default=None, ge=0.0)
    results: list[DomainScore] = Field(default_factory=list)


#: the most tokens one call may report in a ``usage`` field: larger is a producer's bug, dead-lettered
#: (no model context holds 10^8 tokens; a sum of a million events stays exact in a double)
MAX_TOKENS = 100_000_000
#: the most one call may cost (any currency) and last (ms, a day): larger is a producer's bug
MAX_COST = 1_000_000.0
MAX_DURATION_MS = 86_400_000.0


class UsageBlock(BaseModel):
    """What the monitored call used (docs/usage.md). Token counts follow OpenAI's and the OpenTelemetry GenAI
    conventions: ``cached_input_tokens`` are part of ``input_tokens`` and ``reasoning_tokens`` part of
    ``output_tokens``, so neither may exceed its total."""

    model_config = _STRICT

    input_tokens: int | None = Field(default=None, ge=0, le=MAX_TOKENS)
    output_tokens: int | None = Field(default=None, ge=0, le=MAX_TOKENS)
    cached_input_tokens: int | None = Field(default=None, ge=0, le=MAX_TOKENS)
    reasoning_tokens: int | None = Field(default=None, ge=0, le=MAX_TOKENS)
    duration_ms: float | None = Field(default=None, ge=0.0, le=MAX_DURATION_MS)
    time_to_first_token_ms: float | None = Field(default=None, ge=0.0, le=MAX_DURATION_MS)
    cost: float | None = Field(default=None, ge=0.0, le=MAX_COST)
    currency: str | None = Field(default=None, pattern=r"^[A-Z]{3}$")
    finish_reason: str | None = Field(default=None, min_length=1, max_length=64)

    @model_validator(mode="after")
    def _parts_within_totals(self) -> UsageBlock:
        for part, total in (("cached_input_tokens", "input_tokens"), ("reasoning_tokens", "output_tokens")):
            have, of = getattr(self, part), getattr(self, total)
            if have is not None and of is not None and have > of:
                raise ValueError(f"{part} ({have}) exceeds {total} ({of}): it is a part of it")
        first, whole = self.time_to_first_token_ms, self.duration_ms
        if first is not None and whole is not None and first > whole:
            raise ValueError(f"time_to_first_token_ms ({first}) exceeds duration_ms ({whole})")
        return self
