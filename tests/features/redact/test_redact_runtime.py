"""The worker's composition root wires redaction into review items, drill-down examples and dead letters
(real Redis; no broker: the processor's batch step)."""

from __future__ import annotations

import base64
from pathlib import Path

import orjson
import redis.asyncio as aioredis

from streameval.models import DeadLetter, ReviewItem
from streameval.pipeline import Source
from streameval.runtime import Runtime, load_worker_config
from streameval.settings import Settings

EMAIL, PHONE = "zhao.lei@example.cn", "13712345678"
SUITE = f"""
suites:
  - name: qa
    default: true
    evaluators:
      - {{evaluator: exact_match}}
      - {{evaluator: contains, params: {{value: "{PHONE}"}}}}
review: {{margin: 1.0, rate_per_min: 100}}
redact: {{dead_letters: digest}}
"""


async def test_review_examples_and_dead_letters_leave_redacted(
    tmp_path: Path, redis_url: str, prefix: str, aredis: aioredis.Redis
) -> None:
    path = tmp_path / "suites.yaml"
    path.write_text(SUITE)
    # drill-down examples kept (a suite file without alert rules keeps none by default)
    settings = Settings(
        config=str(path), redis_url=redis_url, redis_prefix=prefix, windows=(60,), examples=20
    )
    runtime = await Runtime.build(load_worker_config(settings))
    try:
        events = [
            orjson.dumps(
                {
                    "id": f"e{i}",
                    "model": "m",
                    "input": f"mail {EMAIL}",
                    "output": f"call {EMAIL}",
                    "expected": "x",
                }
            )
            for i in range(3)
        ]
        bad = orjson.dumps({"id": "bad", "model": "m", "output": 5, "input": f"mail {EMAIL} {PHONE}"})
        batch = [(raw, Source("t", 0, i)) for i, raw in enumerate([*events, bad])]
        published = await runtime.processor.process_batch(batch)
    finally:
        await runtime.close()
    kinds = sorted(m.kind for m in published)
    assert kinds.count("result") == 3 and "deadletter" in kinds and "review" in kinds, kinds
    reviews = [ReviewItem.model_validate_json(m.value) for m in published if m.kind == "review"]
    assert reviews and all(r.input == "mail [EMAIL_1]" and r.output == "call [EMAIL_1]" for r in reviews)
    [letter] = [DeadLetter.model_validate_json(m.value) for m in published if m.kind == "deadletter"]
    assert letter.raw == "" and letter.truncated is not None and letter.truncated.length == len(bad)
    assert EMAIL.encode() not in base64.b64decode(letter.raw) and EMAIL not in letter.reason
    # the drill-down examples the record script kept: the contains evaluator's reason quotes the phone
    examples = [k for k in await aredis.keys(f"{prefix}*") if b":ex:" in k]
    assert examples
    members = [m for k in examples for m in await aredis.zrange(k, 0, -1)]
    assert members and all(PHONE.encode() not in m for m in members)
    assert any(b"[PHONE_1]" in m for m in members)
    # the published results are the rule evaluators' own: unchanged
    results = [m.value for m in published if m.kind == "result"]
    assert all(PHONE.encode() in r for r in results)
