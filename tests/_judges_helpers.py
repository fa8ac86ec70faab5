"""Shared helpers of the judge tests (not a test module)."""

from __future__ import annotations

from typing import Any

from _support import event as request_event

from streameval.judges import JudgeConfig
from streameval.models import RequestEvent


def judge(name: str, base_url: str, *, weight: float, protocol: str = "openai", **extra: Any) -> JudgeConfig:
    """A judge pointed at a simulated judge's base URL, with fast retries for tests."""
    url = f"{base_url}/v1" if protocol == "openai" else base_url
    fields: dict[str, Any] = {
        "name": name,
        "protocol": protocol,
        "base_url": url,
        "model": f"judge-model-{name}",
        "weight": weight,
        "retry_wait_s": 0.01,
        "retry_jitter_s": 0.0,
        "timeout_s": 5.0,
    }
    fields.update(extra)
    return JudgeConfig(**fields)


def event(**fields: Any) -> RequestEvent:
    return request_event(
        **{
            "id": "ev-1",
            "model": "model-under-test",
            "input": "What is the capital of France?",
            "output": "The capital of France is Paris.",
            "expected": "Paris",
            "category": "qa_simple",
            **fields,
        }
    )
