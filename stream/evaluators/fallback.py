"""When a rule metric should ask an LLM judge (the RAG-evaluation spec's "LLM回退触发条件").

The RAG-evaluation spec scores every answer/RAG/graph metric by rule first and asks an LLM when the rule score
is low; the final score is ``max(rule, llm)``. Each rule evaluator declares its trigger as the class attribute
``llm_fallback``; :func:`fallback_table` collects them by evaluator name for the judge stage. Nothing in
this module calls a judge: it only says *when*.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["LLMFallback", "fallback_table"]


@dataclass(frozen=True, slots=True)
class LLMFallback:
    """One row of the RAG-evaluation spec's trigger table.

    ``when``: ``always`` (ask whatever the rule says), ``at_most`` (rule score <= ``threshold``),
    ``below`` (rule score < ``threshold``), ``never``. ``on_missing``: also ask when the rule cannot score
    the event because its data is missing (the evaluator raised ``missing_field``), e.g. chunk_utilization
    "或无法获取文本块内容". The combined score is ``max(rule, llm)`` (the RAG-evaluation spec §1).
    """

    when: Literal["always", "at_most", "below", "never"]
    threshold: float | None = None
    on_missing: bool = False
    note: str = ""

    def triggered(self, rule_score: float | None) -> bool:
        """Should the judge be asked, given the rule score (``None``: the rule could not score)?"""
        if self.when == "never":
            return False
        if rule_score is None:
            return self.on_missing or self.when == "always"
        if self.when == "always":
            return True
        assert self.threshold is not None
        return rule_score <= self.threshold if self.when == "at_most" else rule_score < self.threshold


def fallback_table() -> dict[str, LLMFallback]:
    """Every registered evaluator that declares an ``llm_fallback``, by evaluator name."""
    from ._base import evaluator_class, evaluator_names

    table: dict[str, LLMFallback] = {}
    for name in evaluator_names():
        rule = getattr(evaluator_class(name), "llm_fallback", None)
        if isinstance(rule, LLMFallback):
            table[name] = rule
    return table
