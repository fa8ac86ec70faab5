"""Structured answers: asking for the rubric's JSON by the protocol's own means.

With ``structured: true`` a judge's rubric and report prompts also carry the answer's JSON Schema:

- OpenAI-compatible servers speak one of several dialects (``structured_mode``, :data:`DIALECTS`):

  - ``json_schema``: ``response_format: {"type": "json_schema", "json_schema": {"name": "evaluation",
    "schema": …, "strict": true}}`` (OpenAI, llama.cpp's C++ server, vLLM, Ollama's /v1 endpoint);
  - ``json_object``: ``response_format: {"type": "json_object", "schema": …}`` (llama-cpp-python's
    server; it answers HTTP 500 to ``json_schema``);
  - ``guided_json``: ``guided_json: …`` (vLLM before 0.10.2);
  - ``structured_outputs``: ``structured_outputs: {"json": …}`` (vLLM 0.10.2 and later);
  - ``auto`` (the default) tries ``json_schema``, then ``json_object``, and keeps what the server
    accepts (:class:`~._client.JudgeClient`: a clear refusal drops a dialect at once, an ambiguous
    answer only counts a strike).

- Anthropic: one tool, ``submit_evaluation``, whose ``input_schema`` is the schema, and
  ``tool_choice: {"type": "tool", "name": "submit_evaluation"}``; the answer is the tool call's input.

The schema is one a grammar can enforce (llama.cpp turns it into a GBNF grammar and ignores
``minimum``/``maximum``): criterion scores are an ``enum`` of the scale's whole numbers, the overall
score an ``enum`` in steps of 0.5, strengths and weaknesses at most :data:`MAX_ITEMS` items, and texts
have a ``maxLength`` (left out of ``json_schema``, whose strict mode at OpenAI refuses it), so a greedy
small model can neither leave the scale nor fill a list until ``max_tokens``.

The answer then reaches the parser as a JSON document (stage ``json``). The RAG-evaluation spec's
single-number metric prompts stay prompt-only. An endpoint that refuses every dialect is asked again
without the schema, and from then on the judge is prompt-only: the worker logs that once. The
parser's fallback stages remain for everything else.
"""

from __future__ import annotations

import functools
from typing import Any, Literal

import orjson

from ._prompts import Prompt

__all__ = [
    "AUTO_DIALECTS",
    "DIALECTS",
    "MAX_ITEMS",
    "TOOL_NAME",
    "StructuredMode",
    "answer_schema",
    "anthropic_fields",
    "openai_fields",
    "tool_input",
]

TOOL_NAME = "submit_evaluation"
StructuredMode = Literal["auto", "json_schema", "json_object", "guided_json", "structured_outputs"]
#: the OpenAI-compatible dialects of a structured request
DIALECTS: tuple[str, ...] = ("json_schema", "json_object", "guided_json", "structured_outputs")
#: what ``structured_mode: auto`` tries, in order
AUTO_DIALECTS: tuple[str, ...] = ("json_schema", "json_object")
#: the report-quality spec: 3-5 strengths and weaknesses
MAX_ITEMS = 5
_MAX_TEXT = {"justification": 300, "item": 200, "reasoning": 1000}


def answer_schema(prompt: Prompt) -> dict[str, Any] | None:
    """The JSON Schema of a rubric or report answer; None for single-number prompts (shared: do not
    change it)."""
    if prompt.scale == "0-1" or not prompt.weights:
        return None
    return _answer_schema(prompt.scale, tuple(prompt.weights))


@functools.lru_cache(maxsize=64)
def _answer_schema(scale: str, criteria: tuple[str, ...]) -> dict[str, Any]:
    low, high = (1, 5) if scale == "1-5" else (0, 10)
    criterion = {
        "type": "object",
        "properties": {
            "score": {"type": "integer", "enum": list(range(low, high + 1))},
            "justification": {"type": "string", "maxLength": _MAX_TEXT["justification"]},
        },
        "required": ["score", "justification"],
        "additionalProperties": False,
    }
    halves = [low + i / 2 for i in range(2 * (high - low) + 1)]
    texts = {
        "type": "array",
        "items": {"type": "string", "maxLength": _MAX_TEXT["item"]},
        "maxItems": MAX_ITEMS,
    }
    return {
        "type": "object",
        "properties": {
            "scores": {
                "type": "object",
                "properties": dict.fromkeys(criteria, criterion),
                "required": list(criteria),
                "additionalProperties": False,
            },
            "overall_score": {"type": "number", "enum": [int(v) if v.is_integer() else v for v in halves]},
            "strengths": texts,
            "weaknesses": texts,
            "reasoning": {"type": "string", "maxLength": _MAX_TEXT["reasoning"]},
        },
        "required": ["scores", "overall_score", "strengths", "weaknesses", "reasoning"],
        "additionalProperties": False,
    }


def openai_fields(schema: dict[str, Any], dialect: str = "json_schema") -> dict[str, Any]:
    """The request fields asking an OpenAI-compatible server for ``schema`` in ``dialect``."""
    if dialect == "json_schema":
        strict = _strict(orjson.dumps(schema))
        return {
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "evaluation", "schema": strict, "strict": True},
            }
        }
    if dialect == "json_object":
        return {"response_format": {"type": "json_object", "schema": schema}}
    if dialect == "guided_json":
        return {"guided_json": schema}
    if dialect == "structured_outputs":
        return {"structured_outputs": {"json": schema}}
    raise ValueError(f"unknown structured-output dialect {dialect!r}; known: {', '.join(DIALECTS)}")


@functools.lru_cache(maxsize=64)
def _strict(schema: bytes) -> Any:
    return _without(orjson.loads(schema), "maxLength")


def _without(value: Any, keyword: str) -> Any:
    """``value`` (a JSON Schema) without ``keyword`` at any depth."""
    if isinstance(value, dict):
        return {k: _without(v, keyword) for k, v in value.items() if k != keyword}
    if isinstance(value, list):
        return [_without(v, keyword) for v in value]
    return value


def anthropic_fields(schema: dict[str, Any]) -> dict[str, Any]:
    tool = {
        "name": TOOL_NAME,
        "description": "Submit the evaluation of the output in the evaluation data.",
        "input_schema": schema,
    }
    return {"tools": [tool], "tool_choice": {"type": "tool", "name": TOOL_NAME}}


def tool_input(content: Any) -> Any | None:
    """The input of the ``submit_evaluation`` tool call in an Anthropic answer's content, if any."""
    if not isinstance(content, list):
        return None
    for part in content:
        if isinstance(part, dict) and part.get("type") == "tool_use" and part.get("name") == TOOL_NAME:
            return part.get("input")
    return None
