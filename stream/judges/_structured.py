"""Structured answers: asking for the rubric's JSON by the protocol's own means.

With ``structured: true`` a judge's rubric and report prompts also carry the answer's JSON Schema:

- OpenAI: ``response_format: {"type": "json_schema", "json_schema": {"name": "evaluation", "schema": …}}``;
- Anthropic: one tool, ``submit_evaluation``, whose ``input_schema`` is the schema, and
  ``tool_choice: {"type": "tool", "name": "submit_evaluation"}``; the answer is the tool call's input.

The answer then reaches the parser as a JSON document (stage ``json``). The RAG-evaluation spec's
single-number metric prompts stay prompt-only. An endpoint that rejects the request (HTTP 400 or 422 when the
schema was sent) is asked again without it, and from then on the judge is prompt-only: the worker
logs that once. The parser's fallback stages remain for everything else.
"""

from __future__ import annotations

from typing import Any

from ._prompts import Prompt

__all__ = ["TOOL_NAME", "answer_schema", "anthropic_fields", "openai_fields", "tool_input"]

TOOL_NAME = "submit_evaluation"


def answer_schema(prompt: Prompt) -> dict[str, Any] | None:
    """The JSON Schema of a rubric or report answer; None for single-number prompts."""
    if prompt.scale == "0-1" or not prompt.weights:
        return None
    criterion = {
        "type": "object",
        "properties": {"score": {"type": "number"}, "justification": {"type": "string"}},
        "required": ["score", "justification"],
        "additionalProperties": False,
    }
    texts = {"type": "array", "items": {"type": "string"}}
    return {
        "type": "object",
        "properties": {
            "scores": {
                "type": "object",
                "properties": dict.fromkeys(prompt.weights, criterion),
                "required": list(prompt.weights),
                "additionalProperties": False,
            },
            "overall_score": {"type": "number"},
            "strengths": texts,
            "weaknesses": texts,
            "reasoning": {"type": "string"},
        },
        "required": ["scores", "overall_score", "strengths", "weaknesses", "reasoning"],
        "additionalProperties": False,
    }


def openai_fields(schema: dict[str, Any]) -> dict[str, Any]:
    return {
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "evaluation", "schema": schema, "strict": True},
        }
    }


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
