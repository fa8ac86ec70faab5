"""A suite's ``guard:`` section (docs/guard.md): which result is which decision, the deadline and what a
timeout answers, which slow steps may run, masking and publishing."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["Decision", "GuardConfig", "guard_issues", "guard_section"]

Decision = Literal["allow", "warn", "block", "mask"]

#: the evaluators that need a model (an embedding model): run by the guard only with ``semantic: true``
MODEL_EVALUATORS = frozenset({"semantic_similarity"})


class GuardConfig(BaseModel):
    """``suites[].guard``: this suite answers ``POST /api/v1/check``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    block_below: float | None = Field(
        default=None,
        ge=0.0,
        le=1.0,
        description="block when the score is below this (default: the suite's threshold)",
    )
    warn_below: float | None = Field(
        default=None, ge=0.0, le=1.0, description="warn when the score is below this (default: never)"
    )
    block_on: list[str] | None = Field(
        default=None,
        description="evaluator names whose failure blocks, whatever the score (default: the suite's gates)",
    )
    warn_on: list[str] = Field(
        default_factory=list, description="evaluator names whose failure warns (when nothing blocks)"
    )
    deadline_ms: float = Field(
        default=50.0, gt=0.0, le=60_000.0, description="longest a check may take; past it: on_timeout"
    )
    on_timeout: Literal["allow", "block"] = Field(
        default="block", description="the answer past the deadline: allow (fail open) or block (fail closed)"
    )
    judges: bool = Field(default=False, description="run the suite's judge panel too (within the deadline)")
    semantic: bool = Field(
        default=False,
        description="run model-based evaluators (semantic_similarity) too (within the deadline)",
    )
    mask: bool = Field(
        default=False,
        description="answer mask with the redacted output when the suite's redact: block changed it",
    )
    publish: bool = Field(
        default=False, description="also send each checked event to the requests topic (once by id)"
    )

    @model_validator(mode="after")
    def _bands(self) -> GuardConfig:
        if (
            self.block_below is not None
            and self.warn_below is not None
            and self.warn_below < self.block_below
        ):
            raise ValueError(
                f"warn_below ({self.warn_below:g}) is below block_below ({self.block_below:g}): "
                "the warn band would be empty"
            )
        return self


def guard_issues(
    guard: GuardConfig,
    base: tuple[str | int, ...],
    evaluators: Sequence[tuple[str, str, float]],
    *,
    has_judge: bool,
    redacts: bool,
) -> Iterable[tuple[tuple[str | int, ...], str]]:
    """What is wrong with ``guard`` for its suite: names in ``block_on`` / ``warn_on`` that are not the suite's
    evaluators, ``judges`` without a panel, ``mask`` without redaction, and a suite left without a weighted
    evaluator once the model-based ones are left out. ``evaluators``: (result name, evaluator, weight)."""
    at = (*base, "guard")
    names = [name for name, _, _ in evaluators]
    for key in ("block_on", "warn_on"):
        for i, name in enumerate(getattr(guard, key) or ()):
            if name not in names:
                yield (
                    (*at, key, i),
                    f"no evaluator {name!r} in this suite; its evaluators: {', '.join(names)}",
                )
    if guard.judges and not has_judge:
        yield (*at, "judges"), "the suite has no judge panel (judge:) to run"
    if guard.mask and not redacts:
        yield (*at, "mask"), "mask needs redaction: give the suite (or the file) a redact: block"
    if not guard.semantic and not any(w > 0 for _, kind, w in evaluators if kind not in MODEL_EVALUATORS):
        yield (
            (*at, "semantic"),
            ("without its model-based evaluators (semantic: false) the suite has no weighted evaluator left"),
        )


def guard_section(suite: Any) -> GuardConfig | None:
    """The ``guard:`` section of a loaded suite (``suite.config.guard``; sessions have none)."""
    section = getattr(suite.config, "guard", None)
    return section if isinstance(section, GuardConfig) else None
