"""Request bodies of the evaluator API (the evaluator-module spec §5), validated with pydantic; the OpenAPI
document is generated from the same models, so the two cannot drift."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ._errors import BadRequest

__all__ = ["CreateBody", "TestBody", "UpdateBody", "bad_request"]

_STRICT = ConfigDict(extra="forbid", strict=True)
Name = Field(
    min_length=1, max_length=128, pattern=r"^[^\x00-\x1f\x7f]+$", description="unique among custom evaluators"
)
Description = Field(default=None, max_length=2000)


class CodeConfigBody(BaseModel):
    """A code evaluator's config (``CodeConfig``): Python or Node.js code defining evaluate(input, output, expected, metadata)."""

    model_config = _STRICT
    language: Literal["python", "nodejs"]
    code: str = Field(min_length=1, max_length=200_000)
    timeout: int = Field(default=5000, ge=1, le=60_000, description="ms per call (default: 5000)")


class CreateBody(BaseModel):
    """POST /api/v1/evaluators. Only ``code``: ``llm`` and ``composite`` (not built yet) are refused with
    a "not supported yet" 400 before this model is validated."""

    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        json_schema_extra={
            "examples": [
                {
                    "name": "min_length",
                    "description": "checks the output length",
                    "type": "code",
                    "config": {
                        "language": "nodejs",
                        "timeout": 5000,
                        "code": (
                            "module.exports = async function evaluate(input, output, expected, metadata) {\n"
                            "  const min = metadata.minLength || 100;\n"
                            "  return { passed: output.length >= min, score: Math.min(1, output.length / min) };\n};\n"
                        ),
                    },
                }
            ]
        },
    )
    name: str = Name
    description: str | None = Description
    type: Literal["code"]
    config: CodeConfigBody


class UpdateBody(BaseModel):
    """PUT /api/v1/evaluators/{id}: the fields to change (at least one); ``config`` is replaced whole."""

    model_config = _STRICT
    name: str | None = Field(default=None, min_length=1, max_length=128, pattern=r"^[^\x00-\x1f\x7f]+$")
    description: str | None = Description
    type: Literal["code"] | None = None
    config: CodeConfigBody | None = None

    @model_validator(mode="after")
    def _something(self) -> UpdateBody:
        if not self.model_fields_set:
            raise ValueError("give at least one of name, description, type, config")
        return self


class TestBody(BaseModel):
    """POST /api/v1/evaluators/{id}/test. ``params`` configure a preset (e.g. regex ``pattern``)."""

    model_config = _STRICT
    input: str | None = None
    output: str
    expected: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    params: dict[str, Any] = Field(
        default_factory=dict, description="preset params; not allowed for custom evaluators"
    )


def bad_request(exc: ValidationError, *, prefix: tuple[str | int, ...] = ()) -> BadRequest:
    """A 400 listing every problem of ``exc`` with its JSON path."""
    from .._util import json_path

    errors = [
        {"path": json_path((*prefix, *e["loc"])), "message": e["msg"]} for e in exc.errors(include_url=False)
    ]
    summary = "; ".join(f"{e['path']}: {e['message']}" for e in errors[:5])
    return BadRequest(f"invalid request: {summary}", errors)
