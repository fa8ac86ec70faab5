"""Review items, drill-down examples and dead letters carry redacted text; without a redact: block they
are as before."""

from __future__ import annotations

import base64
import hashlib
import uuid
from typing import Any

import orjson
import pytest
import redis.asyncio as aioredis

from streameval.config import parse_config
from streameval.features.drilldown import Candidates
from streameval.features.redact import RedactConfig, Redactors, build_redactors
from streameval.features.review import ReviewConfig, ReviewQueue
from streameval.keyspace import Keys
from streameval.models import EvaluatorResult, GradedResult
from streameval.pipeline import Pipeline

EMAIL, PHONE = "wang.fang@example.cn", "13912345678"


def _redactors(**top: Any) -> Redactors:
    built = build_redactors(RedactConfig(**top), [("s", ("suites", 0), None)])
    assert built is not None
    return built


def _result(reason: str) -> GradedResult:
    return GradedResult(
        id=f"ev-{uuid.uuid4().hex[:8]}",
        model="m",
        suite="s",
        score=0.5,
        passed=False,
        threshold=0.6,
        grade="fail",
        evaluators=[EvaluatorResult(name="contains", score=0.0, passed=False, weight=1.0, reason=reason)],
        event_time="2026-11-27T10:00:00.000Z",
        evaluated_at="2026-11-27T10:00:00.000Z",
        latency_ms=1.0,
        pipeline_version="test",
        reason=f"gate failed for {EMAIL}",
    )


async def test_review_items_carry_redacted_text() -> None:
    client = aioredis.Redis(host="127.0.0.1", port=6379)
    keys = Keys(f"test-redact-{uuid.uuid4().hex[:8]}")
    raw = orjson.dumps({"input": f"my mail is {EMAIL}", "output": f"noted {EMAIL}, call {PHONE}"})
    try:
        queue = ReviewQueue(client, keys, ReviewConfig(margin=1.0), redact=_redactors().texts)
        [item] = await queue.select([("pair", _result("x"), raw)], 1_800_000_000.0)
        plain = ReviewQueue(client, keys, ReviewConfig(margin=1.0))
        [control] = await plain.select([("pair2", _result("x"), raw)], 1_800_000_000.0)
    finally:
        await client.aclose()
    assert item.input == "my mail is [EMAIL_1]" and item.output == "noted [EMAIL_1], call [PHONE_1]"
    assert control.output == f"noted {EMAIL}, call {PHONE}"


def test_drilldown_examples_carry_redacted_text() -> None:
    result = _result(f"output does not contain {PHONE!r}")
    candidates = Candidates(Keys("test-redact"), 3)
    candidates.redact = _redactors().result
    _, args, _ = candidates.part("pair", [60], [(result, 1_800_000_000.0, b"\0" * 32)], example_ttl_s=60)
    bodies = b" ".join(a for a in args if isinstance(a, bytes))
    assert b"[PHONE_1]" in bodies and b"[EMAIL_1]" in bodies
    assert PHONE.encode() not in bodies and EMAIL.encode() not in bodies
    assert result.reason is not None and EMAIL in result.reason  # the result itself is unchanged


def _pipeline(dead_letters: str | None) -> Pipeline:
    config: dict[str, Any] = {
        "suites": [{"name": "s", "default": True, "evaluators": [{"evaluator": "exact_match"}]}]
    }
    if dead_letters is not None:
        config["redact"] = {"dead_letters": dead_letters}
    _, suites = parse_config(config)
    return Pipeline(suites)


BAD = orjson.dumps({"id": "e1", "model": "m", "output": 5, "input": f"mail {EMAIL}\n{PHONE}"})


@pytest.mark.parametrize("policy", [None, "keep", "redact", "digest"])
async def test_dead_letters(policy: str | None) -> None:
    letter = (await _pipeline(policy).process(BAD)).dead_letter
    assert letter is not None and letter.kind == "schema"
    raw = base64.b64decode(letter.raw)
    if policy in (None, "keep"):
        assert raw == BAD and letter.truncated is None
    elif policy == "redact":
        assert orjson.loads(raw)["input"] == "mail [EMAIL_1]\n[PHONE_1]"
        assert EMAIL.encode() not in raw and PHONE.encode() not in raw
    else:
        assert raw == b"" and letter.truncated is not None
        assert letter.truncated.sha256 == hashlib.sha256(BAD).hexdigest() and letter.truncated.length == len(
            BAD
        )


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({}, "is not set"),
        ({"STREAMEVAL_TEST_REDACT_KEY": ""}, "is not set"),
        ({"STREAMEVAL_TEST_REDACT_KEY": "short"}, "holds 5 bytes"),
    ],
)
@pytest.mark.parametrize(
    ("top", "suite", "path"),
    [
        ({"mode": "hash", "hash_key_env": "STREAMEVAL_TEST_REDACT_KEY"}, None, "redact.hash_key_env"),
        ({}, {"mode": "hash", "hash_key_env": "STREAMEVAL_TEST_REDACT_KEY"}, "suites[0].redact.hash_key_env"),
    ],
)
def test_hash_key_missing_fails_at_load_with_the_path(
    env: dict[str, str],
    message: str,
    top: dict[str, Any],
    suite: dict[str, Any] | None,
    path: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The key is checked when the suite file is loaded (a worker fails before it waits for its brokers),
    once however many suites share it, and again when the pipeline is built."""
    from streameval.errors import ConfigError

    monkeypatch.delenv("STREAMEVAL_TEST_REDACT_KEY", raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    own = {} if suite is None else {"redact": suite}
    config = {
        "redact": top,
        "suites": [
            {"name": "s", "default": True, "evaluators": [{"evaluator": "exact_match"}], **own},
            {"name": "t", "evaluators": [{"evaluator": "exact_match"}]},
        ],
    }
    with pytest.raises(ConfigError) as info:
        parse_config(config)
    assert [(i.path, message in i.message) for i in info.value.issues] == [(path, True)]
    monkeypatch.setenv("STREAMEVAL_TEST_REDACT_KEY", "k" * 16)
    _, suites = parse_config(config)
    monkeypatch.delenv("STREAMEVAL_TEST_REDACT_KEY")
    with pytest.raises(ConfigError) as built:
        Pipeline(suites)
    assert [(i.path, "is not set" in i.message) for i in built.value.issues] == [(path, True)]


@pytest.mark.parametrize(
    ("redact", "path"),
    [
        ({"mode": "hash"}, "redact.hash_key_env"),
        ({"detectors": ["emails"]}, "redact.detectors[0]"),
        ({"patterns": [{"kind": "X", "pattern": "("}]}, "redact.patterns[0].pattern"),
        ({"detectors": []}, "redact.detectors"),
    ],
)
def test_bad_blocks_fail_with_their_path(redact: dict[str, Any], path: str) -> None:
    from streameval.errors import ConfigError

    with pytest.raises(ConfigError) as info:
        parse_config(
            {
                "redact": redact,
                "suites": [{"name": "s", "default": True, "evaluators": [{"evaluator": "exact_match"}]}],
            }
        )
    assert path in [i.path for i in info.value.issues]


def test_suite_block_overrides_and_false_turns_it_off() -> None:
    _, suites = parse_config(
        {
            "redact": {"mode": "drop"},
            "suites": [
                {
                    "name": "a",
                    "default": True,
                    "evaluators": [{"evaluator": "exact_match"}],
                    "redact": {"mode": "mask"},
                },
                {"name": "b", "evaluators": [{"evaluator": "exact_match"}], "redact": False},
                {"name": "c", "evaluators": [{"evaluator": "exact_match"}]},
            ],
        }
    )
    redactors = Pipeline(suites).redactors
    assert redactors is not None
    assert redactors.texts("a", [EMAIL]) == ["[EMAIL_1]"]
    assert redactors.texts("b", [EMAIL]) == [EMAIL]
    assert redactors.texts("c", [EMAIL]) == ["[REDACTED]"]
    # versions: a suite without redaction keeps its version; one with it gets another
    _, plain = parse_config(
        {"suites": [{"name": "c", "default": True, "evaluators": [{"evaluator": "exact_match"}]}]}
    )
    assert plain.by_name["c"].version != suites.by_name["c"].version
    assert "redact" not in plain.by_name["c"].definition


@pytest.mark.parametrize("policy", ["keep", "redact", "digest"])
def test_label_dead_letters_follow_the_policy(policy: str) -> None:
    """The feedback topic's dead letters (made by the label join) get the same treatment as the engine's."""
    from streameval.errors import SchemaViolation
    from streameval.features.labels._input import decode_error_letter

    raw = orjson.dumps({"id": "e1", "label": f"wrong, call me on {PHONE}"})
    made = decode_error_letter(
        raw, SchemaViolation(f"bad label from {EMAIL}"), "feedback", 0, 7, 1_800_000_000.0
    )
    redactors = build_redactors(RedactConfig(dead_letters=policy), [("s", ("suites", 0), None)])  # type: ignore[arg-type]
    assert redactors is not None
    letter = redactors.letter(made)
    body = letter.model_dump_json().encode() + base64.b64decode(letter.raw)
    if policy == "keep":
        assert letter == made
        return
    assert PHONE.encode() not in body and EMAIL.encode() not in body
    assert letter.reason == "feedback: bad label from [EMAIL_1]" and letter.source == made.source
    if policy == "redact":
        assert orjson.loads(base64.b64decode(letter.raw))["label"] == "wrong, call me on [PHONE_1]"
    else:
        assert letter.raw == "" and letter.truncated is not None and letter.truncated.length == len(raw)


def test_stored_result_documents_redacted_as_examples_are() -> None:
    """What GET /api/v1/results/{id} serves when given Redactors.result_document: the texts a drill-down
    example redacts, with the same placeholders; other suites' results and the document itself unchanged."""
    result = _result(f"output does not contain {PHONE!r} nor {EMAIL!r}")
    document = orjson.loads(result.model_dump_json())
    kept = orjson.loads(result.model_dump_json())
    redacted = _redactors().result_document(document)
    assert redacted == orjson.loads(_redactors().result(result).model_dump_json())
    assert PHONE not in orjson.dumps(redacted).decode() and EMAIL not in orjson.dumps(redacted).decode()
    assert document == kept
    other = dict(document, suite="not-redacting")
    assert _redactors().result_document(other) is other


async def test_label_intake_redacts_its_dead_letters() -> None:
    """The worker's label intake hands its letters to the policy before they are cut and published."""
    from streameval.deadletters import DeadLetterPolicy
    from streameval.envelope import Source
    from streameval.features.labels import FeedbackDecoder, LabelIntake

    redactors = build_redactors(RedactConfig(dead_letters="redact"), [("s", ("suites", 0), None)])
    assert redactors is not None
    intake = LabelIntake(
        None, FeedbackDecoder(), DeadLetterPolicy(), lambda: 1_800_000_000.0, redactors.letter
    )  # type: ignore[arg-type]
    raw = b"call me on " + PHONE.encode()  # not JSON: not a label
    [published] = await intake.feedback([(raw, Source(topic="feedback", partition=0, offset=1))])
    assert PHONE.encode() not in published.value and base64.b64decode(
        orjson.loads(published.value)["raw"]
    ) == (b"call me on [PHONE_1]")


async def test_the_results_api_serves_a_stored_result_redacted() -> None:
    """GET /api/v1/results/{id} on real Redis: with the suite file's redaction the reasons are redacted as the
    drill-down example's are; without it (an API process with no suite file) the stored result as it is."""
    from aiohttp.test_utils import TestClient, TestServer

    from streameval.api import create_web_app
    from streameval.store import ResultStore

    client = aioredis.Redis(host="127.0.0.1", port=6379)
    prefix = f"test-redact-api-{uuid.uuid4().hex[:8]}"
    result = _result(f"output does not contain {PHONE!r} nor {EMAIL!r}")
    try:
        store = ResultStore(client, prefix=prefix, windows=(60,))
        await store.record_many([(result, result.model_dump_json().encode(), None)])
        answers = []
        for redact in (_redactors().result_document, None):
            app = create_web_app(client, prefix=prefix, token=None, windows=(60,), redact_result=redact)
            async with TestClient(TestServer(app)) as http:
                resp = await http.get(f"/api/v1/results/{result.id}")
                assert resp.status == 200, await resp.text()
                answers.append((await resp.json())["data"])
    finally:
        keys = [k async for k in client.scan_iter(match=f"{prefix}*", count=1000)]
        if keys:
            await client.delete(*keys)
        await client.aclose()
    redacted, stored = answers
    assert redacted == orjson.loads(_redactors().result(result).model_dump_json())
    assert PHONE not in orjson.dumps(redacted).decode() and EMAIL not in orjson.dumps(redacted).decode()
    assert stored == orjson.loads(result.model_dump_json())  # no suite file: served as stored
