"""The specs' rubrics as data: the multi-judge spec's ten categories, the report-quality spec's six report
dimensions, and the RAG-evaluation spec's single-number metric prompts with their fallback triggers.

The multi-judge spec gives 1-5 descriptions for accuracy, conciseness, clarity, reasoning_quality,
code_correctness and structure; the other criteria's descriptions are written to the same pattern
(5 = best, 1 = worst) and marked ``seed=False`` so the docs can say which are which.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = [
    "CRITERIA",
    "METRIC_PROMPTS",
    "REPORT_DIMENSIONS",
    "RUBRICS",
    "Criterion",
    "MetricPrompt",
    "MetricPromptSpec",
]


@dataclass(frozen=True)
class Criterion:
    label: str  # the multi-judge spec's Chinese name, kept so Chinese-speaking judges see the spec's words
    meaning: str
    levels: tuple[str, str, str, str, str]  # descriptions of 5, 4, 3, 2, 1
    seed: bool = True


CRITERIA: dict[str, Criterion] = {
    "accuracy": Criterion(
        "准确性",
        "the information is correct",
        (
            "fully accurate, no errors",
            "basically accurate, minor flaws",
            "partly accurate, clear errors",
            "mostly inaccurate",
            "completely wrong",
        ),
    ),
    "conciseness": Criterion(
        "简洁性",
        "says it in as few words as needed",
        (
            "complete in the fewest words",
            "concise but slightly redundant",
            "moderately concise",
            "rather verbose",
            "very verbose, with irrelevant content",
        ),
    ),
    "clarity": Criterion(
        "清晰度",
        "easy to follow",
        (
            "clearly structured, easy to understand",
            "fairly clear",
            "basically clear",
            "muddled",
            "hard to understand",
        ),
    ),
    "reasoning_quality": Criterion(
        "推理质量",
        "the reasoning is sound",
        (
            "rigorous and correct",
            "basically correct logic",
            "flawed reasoning",
            "confused reasoning",
            "no logical reasoning",
        ),
    ),
    "code_correctness": Criterion(
        "代码正确性",
        "the code does what was asked",
        (
            "fully correct, runs as is",
            "basically correct, needs small fixes",
            "partly correct, clear errors",
            "mostly wrong",
            "completely wrong",
        ),
    ),
    "structure": Criterion(
        "结构",
        "the text is organised",
        (
            "complete structure, clear logic",
            "good structure",
            "basically complete structure",
            "disorganised",
            "no structure",
        ),
    ),
    "completeness": Criterion(
        "完整性",
        "covers everything the task needs",
        (
            "covers every required point",
            "misses a minor point",
            "misses some important points",
            "misses most points",
            "covers almost nothing",
        ),
        seed=False,
    ),
    "code_style": Criterion(
        "代码风格",
        "idiomatic, readable code",
        (
            "idiomatic and clean",
            "readable with small lapses",
            "acceptable but inconsistent",
            "hard to read",
            "unreadable",
        ),
        seed=False,
    ),
    "efficiency": Criterion(
        "效率",
        "sensible time and memory use",
        (
            "optimal approach",
            "efficient with small waste",
            "works but wasteful",
            "needlessly slow or large",
            "unusable cost",
        ),
        seed=False,
    ),
    "documentation": Criterion(
        "文档",
        "comments and docs explain the code",
        ("clear, sufficient docs", "mostly documented", "some docs", "scarce docs", "no docs"),
        seed=False,
    ),
    "content_quality": Criterion(
        "内容质量",
        "substantive, correct, useful content",
        ("rich and insightful", "solid content", "adequate content", "thin content", "no useful content"),
        seed=False,
    ),
    "creativity": Criterion(
        "创造力",
        "fresh ideas and expression",
        ("highly creative", "creative", "somewhat creative", "formulaic", "no creativity"),
        seed=False,
    ),
    "fluency": Criterion(
        "流畅性",
        "reads naturally in the target language",
        ("native-like", "fluent with small slips", "understandable but stiff", "awkward", "broken"),
        seed=False,
    ),
    "cultural_appropriateness": Criterion(
        "文化适应性",
        "fits the target culture and register",
        (
            "fully appropriate",
            "mostly appropriate",
            "some mismatches",
            "often inappropriate",
            "inappropriate",
        ),
        seed=False,
    ),
    "coherence": Criterion(
        "连贯性",
        "the parts hang together",
        ("fully coherent", "mostly coherent", "some jumps", "often incoherent", "incoherent"),
        seed=False,
    ),
    "emotional_impact": Criterion(
        "情感冲击",
        "moves the reader",
        ("strong impact", "clear impact", "some impact", "little impact", "no impact"),
        seed=False,
    ),
    "originality": Criterion(
        "原创性",
        "not derivative",
        ("wholly original", "mostly original", "partly derivative", "mostly derivative", "copied"),
        seed=False,
    ),
    "citation_quality": Criterion(
        "引用质量",
        "claims are backed by suitable sources",
        ("every claim well sourced", "mostly sourced", "some sources", "few or weak sources", "none"),
        seed=False,
    ),
    "context_retention": Criterion(
        "上下文保持",
        "uses what was said earlier in the conversation",
        (
            "keeps all context",
            "keeps most context",
            "loses some context",
            "loses much context",
            "ignores context",
        ),
        seed=False,
    ),
    "relevance": Criterion(
        "相关性",
        "answers what was asked",
        ("fully on topic", "mostly on topic", "partly off topic", "mostly off topic", "off topic"),
        seed=False,
    ),
}

#: the multi-judge spec's "评价标准": category -> criterion -> weight (each category's weights sum to 1)
RUBRICS: dict[str, dict[str, float]] = {
    "qa_simple": {"accuracy": 0.40, "conciseness": 0.30, "clarity": 0.30},
    "reasoning_complex": {"reasoning_quality": 0.40, "completeness": 0.30, "clarity": 0.30},
    "code_generation": {
        "code_correctness": 0.50,
        "code_style": 0.20,
        "efficiency": 0.20,
        "documentation": 0.10,
    },
    "generation_long": {"structure": 0.25, "content_quality": 0.35, "creativity": 0.20, "clarity": 0.20},
    "summarization": {"completeness": 0.40, "conciseness": 0.30, "accuracy": 0.30},
    "translation": {"accuracy": 0.50, "fluency": 0.30, "cultural_appropriateness": 0.20},
    "math_reasoning": {"accuracy": 0.50, "reasoning_quality": 0.30, "clarity": 0.20},
    "creative_writing": {
        "creativity": 0.30,
        "coherence": 0.30,
        "emotional_impact": 0.20,
        "originality": 0.20,
    },
    "factual_accuracy": {"accuracy": 0.50, "completeness": 0.30, "citation_quality": 0.20},
    "multi_turn": {"context_retention": 0.40, "relevance": 0.30, "coherence": 0.30},
}

#: the report-quality spec's "LLM 评判机制": dimension -> (weight, what it asks), each scored 0-10
REPORT_DIMENSIONS: dict[str, tuple[float, str]] = {
    "relevance": (0.20, "does the report answer the research question and stay on topic"),
    "depth": (0.20, "is the analysis deep, with detailed argument"),
    "accuracy": (0.20, "is the information accurate, free of factual errors"),
    "structure": (0.15, "is it clearly organised, with coherent logic"),
    "clarity": (0.15, "is it clearly expressed and easy to understand"),
    "completeness": (0.10, "does it cover every important aspect, with nothing left out"),
}

MetricPrompt = Literal[
    "equivalence",
    "similarity",
    "coherence",
    "factual_consistency",
    "comprehensiveness",
    "retrieval_precision",
    "retrieval_utilization",
    "chunk_utilization",
    "entity_coverage",
    "graph_coverage",
    "relationship_utilization",
    "subgraph_quality",
    "community_relevance",
]


@dataclass(frozen=True)
class MetricPromptSpec:
    question: str
    trigger: (
        float | Literal["always", "never"]
    )  # the RAG-evaluation spec's "LLM回退触发条件": ask when rule <= trigger


#: the RAG-evaluation spec's "评估指标总结表": the LLM fallback question and default trigger of each metric
METRIC_PROMPTS: dict[str, MetricPromptSpec] = {
    # "不完全匹配且内容相似度一般": below the 0.7-1.0 partial-credit band of the rule
    "equivalence": MetricPromptSpec(
        "Is the answer equivalent in content to the reference answer, "
        "judged by how many key information points match?",
        0.7,
    ),
    "similarity": MetricPromptSpec(
        "How much information does the answer share with the reference answer?", "always"
    ),
    "coherence": MetricPromptSpec("How well structured and logically coherent is the answer?", "always"),
    "factual_consistency": MetricPromptSpec(
        "Is the answer internally consistent, free of self-contradiction and logical errors?", "always"
    ),
    "comprehensiveness": MetricPromptSpec("Does the answer cover every aspect of the question?", "always"),
    "retrieval_precision": MetricPromptSpec(
        "How well do the cited entities match the retrieved entities?", 0.5
    ),
    "retrieval_utilization": MetricPromptSpec("How fully does the answer use the retrieved entities?", 0.5),
    "chunk_utilization": MetricPromptSpec(
        "How well does the answer use the content of the cited text chunks?", 0.4
    ),
    "entity_coverage": MetricPromptSpec("How relevant are the cited entities to the question?", 0.4),
    "graph_coverage": MetricPromptSpec("How relevant and complete is the graph data for the question?", 0.4),
    "relationship_utilization": MetricPromptSpec(
        "How well does the answer use the relationships between entities?", 0.4
    ),
    "subgraph_quality": MetricPromptSpec("How good and information-dense is the retrieved subgraph?", 0.4),
    "community_relevance": MetricPromptSpec(
        "How relevant is the answer to the knowledge communities of its entities?", 0.4
    ),
}
