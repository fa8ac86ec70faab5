"""Nothing planted reaches a judge: events, session threads and retries, through the offline run and the
pipeline; the rule evaluators see every planted value intact."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from streameval.config import parse_config
from streameval.features.setup import annotators
from streameval.judges.sim import start_judge_sim
from streameval.models import GradedResult
from streameval.offline import evaluate_file
from streameval.pipeline import Pipeline

#: planted values, each with the forms a leak could take (separators dropped, lower case)
PLANTED = {
    "EMAIL": "li.lei+test@example-mail.cn",
    "PHONE": "139 1234 5678",
    "CN_ID": "11010519491231002X",
    "CARD": "4111-1111-1111-1111",
    "IBAN": "DE89 3704 0044 0532 0130 00",
    "IP": "203.0.113.77",
    "URL_CREDENTIALS": "dbadmin:Hunter2pw",
    "JWT": "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
    "API_KEY": "sk-ant-api03-Zq8xN2vB7mK4pL1wR9tY6uI3oE5aS0dF",
    "PRIVATE_KEY": "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----",
}


def _leaks(value: str) -> list[str]:
    compact = "".join(ch for ch in value if ch not in " -")
    return sorted({value, compact, value.lower(), value.split("\n")[1] if "\n" in value else value})


def _texts() -> dict[str, str]:
    p = PLANTED
    return {
        "input": f"我的邮箱是{p['EMAIL']}，手机{p['PHONE']}，身份证{p['CN_ID']}。Card {p['CARD']}?",
        "output": (
            f"Noted {p['EMAIL']} and {p['PHONE']}, ID {p['CN_ID']}, card {p['CARD']}. Pay to {p['IBAN']} from {p['IP']}; "
            f"db at postgres://{p['URL_CREDENTIALS']}@db.internal/app, token {p['JWT']}, key {p['API_KEY']}\n"
            f"{p['PRIVATE_KEY']}"
        ),
        "expected": f"Contact {p['EMAIL']} on {p['PHONE']}",
    }


def _config(url: str, *, top: dict[str, Any] | None = None) -> dict[str, Any]:
    judge = {"protocol": "openai", "base_url": f"{url}/v1", "retry_wait_s": 0.01, "retry_jitter_s": 0}
    contains = [
        {"evaluator": "contains", "name": f"has_{kind.lower()}", "params": {"value": value}, "weight": 1}
        for kind, value in PLANTED.items()
    ]
    return {
        "judges": [
            {"name": "a", "model": "m-a", "weight": 0.5, **judge},
            {"name": "b", "model": "m-b", "weight": 0.5, **judge},
        ],
        "redact": top if top is not None else {},
        "suites": [{"name": "s", "default": True, "evaluators": contains, "judge": {}}],
        "sessions": [
            {
                "name": "chat",
                "key": "metadata.conversation_id",
                "judge": {},
                "evaluators": [{"evaluator": "turn_scores"}],
            }
        ],
    }


def _events(n: int) -> list[dict[str, Any]]:
    texts = _texts()
    return [
        {
            "id": f"ev-{i}",
            "model": "m",
            "category": "qa_simple",
            **texts,
            "output": f"(turn {i}) {texts['output']}",
            "references": [f"ref {PLANTED['IBAN']}"],
            "retrieval": {
                "chunks": [{"id": "c1", "text": f"mail {PLANTED['EMAIL']} card {PLANTED['CARD']}"}]
            },
            "metadata": {"conversation_id": f"conv-{i % 2}"},
            "timestamp": f"2026-11-27T10:00:0{i}Z",
        }
        for i in range(n)
    ]


async def test_no_planted_value_reaches_the_judges_offline(tmp_path: Path) -> None:
    requests: list[dict[str, Any]] = []
    source = tmp_path / "in.jsonl"
    source.write_bytes(b"\n".join(orjson.dumps(e) for e in _events(4)) + b"\n")
    # the first answers fail: every retry is recorded too
    async with start_judge_sim(script=["500", "500", "500"], requests=requests) as url:
        _, suites = parse_config(_config(url))
        pipeline = Pipeline(suites, annotators=annotators(suites))  # the sessions' turns
        await evaluate_file(
            pipeline,
            source,
            tmp_path / "out.jsonl",
            tmp_path / "dead.jsonl",
            sessions_path=tmp_path / "sessions.jsonl",
        )
    results = [
        GradedResult.model_validate_json(line) for line in (tmp_path / "out.jsonl").read_bytes().splitlines()
    ]
    sessions = [orjson.loads(line) for line in (tmp_path / "sessions.jsonl").read_bytes().splitlines()]
    assert len(results) == 4 and len(sessions) == 2
    # the rule evaluators saw the originals: every planted value found
    for result in results:
        rules = {e.name: e for e in result.evaluators if e.name.startswith("has_")}
        assert len(rules) == len(PLANTED) and all(e.passed for e in rules.values()), result.evaluators
        assert result.judge is not None and result.judge.status == "ok"
        assert result.redacted is not None and set(result.redacted) == set(PLANTED)
    # the judges: events (4 x 2), session threads (2 x 2), the three failed calls again
    bodies = [orjson.dumps(r).decode() for r in requests]
    assert len(bodies) >= 4 * 2 + 2 * 2 + 3
    assert any("[EMAIL_1]" in b for b in bodies)
    assert any("(turn 0)" in b and "(turn 2)" in b for b in bodies)  # a session thread was judged
    for kind, value in PLANTED.items():
        for form in _leaks(value):
            assert not any(form in b or form in orjson.loads(b).__repr__() for b in bodies), (kind, form)


def _escaped(text: str) -> str:
    return orjson.dumps(text).decode()[1:-1]


async def test_one_value_one_placeholder_across_fields() -> None:
    requests: list[dict[str, Any]] = []
    async with start_judge_sim(requests=requests) as url:
        _, suites = parse_config(_config(url))
        pipeline = Pipeline(suites)
        await pipeline.start()
        try:
            outcome = await pipeline.process(orjson.dumps(_events(1)[0]))
        finally:
            await pipeline.close()
    assert outcome.result is not None and outcome.result.redacted is not None
    user = requests[0]["messages"][-1]["content"]
    # the email is the first of its kind in the prompt and appears in prompt, output and reference alike
    assert user.count("[EMAIL_1]") == 3 and "[EMAIL_2]" not in user
    assert user.count("[PHONE_1]") == 3 and "[PHONE_2]" not in user  # 139 1234 5678 is 13912345678


@pytest.mark.parametrize(
    ("mode", "marker"),
    [("hash", "[EMAIL#"), ("drop", "[REDACTED]")],
)
async def test_modes(mode: str, marker: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_REDACT_KEY", "k" * 32)
    requests: list[dict[str, Any]] = []
    async with start_judge_sim(requests=requests) as url:
        _, suites = parse_config(_config(url, top={"mode": mode, "hash_key_env": "TEST_REDACT_KEY"}))
        pipeline = Pipeline(suites)
        await pipeline.start()
        try:
            await pipeline.process(orjson.dumps(_events(1)[0]))
        finally:
            await pipeline.close()
    body = orjson.dumps(requests).decode()
    assert _escaped(marker) in body
    assert PLANTED["EMAIL"] not in body


async def test_without_redact_nothing_changes() -> None:
    requests: list[dict[str, Any]] = []
    async with start_judge_sim(requests=requests) as url:
        config = _config(url)
        del config["redact"]
        _, suites = parse_config(config)
        pipeline = Pipeline(suites)
        assert pipeline.redactors is None
        await pipeline.start()
        try:
            outcome = await pipeline.process(orjson.dumps(_events(1)[0]))
        finally:
            await pipeline.close()
    assert outcome.result is not None and outcome.result.redacted is None
    assert b'"redacted"' not in outcome.result.model_dump_json().encode()
    assert _escaped(PLANTED["EMAIL"]) in orjson.dumps(requests).decode()  # the control: it would leak


async def test_fallback_prompts_carry_the_context_redacted() -> None:
    """The RAG-evaluation spec's metric prompts send the retrieval block as context: redacted too."""
    requests: list[dict[str, Any]] = []
    async with start_judge_sim(requests=requests) as url:
        config = _config(url)
        config["suites"][0]["judge"] = {
            "mode": "fallback",
            "fallbacks": [{"evaluator": "has_email", "prompt": "equivalence", "trigger": "always"}],
        }
        _, suites = parse_config(config)
        pipeline = Pipeline(suites)
        await pipeline.start()
        try:
            outcome = await pipeline.process(orjson.dumps(_events(1)[0]))
        finally:
            await pipeline.close()
    assert outcome.result is not None and outcome.result.judge is not None
    assert outcome.result.judge.fallbacks[0].triggered
    body = orjson.dumps(requests).decode()
    assert "context" in body and "[CARD_1]" in body
    for value in PLANTED.values():
        assert _escaped(value) not in body


def test_metrics_count_redactions_per_kind() -> None:
    from streameval import telemetry
    from streameval.features.redact import count_redactions

    def value(kind: str) -> float:
        line = f'streameval_redactions_total{{kind="{kind}"}} '
        found = [x for x in telemetry.render().decode().splitlines() if x.startswith(line)]
        return float(found[0].split()[-1]) if found else 0.0

    before = value("TEST_KIND")
    count_redactions({"TEST_KIND": 3})
    assert value("TEST_KIND") == before + 3


def test_the_redact_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from streameval.cli import main

    config = tmp_path / "suites.yaml"
    config.write_text(
        "redact: {patterns: [{kind: ORDER_REF, pattern: 'REF-\\d{8}'}]}\n"
        "suites:\n"
        "  - {name: qa, default: true, evaluators: [{evaluator: exact_match}], redact: {mode: drop}}\n"
        "  - {name: raw, evaluators: [{evaluator: exact_match}], redact: false}\n"
    )
    assert main(["redact", "--config", str(config), "mail bob@example.com, 13912345678, REF-12345678"]) == 0
    out, err = capsys.readouterr()
    assert out == "mail [EMAIL_1], [PHONE_1], [ORDER_REF_1]\n" and "EMAIL 1" in err
    assert main(["redact", "--config", str(config), "--suite", "qa", "bob@example.com"]) == 0
    assert capsys.readouterr().out == "[REDACTED]\n"
    assert main(["redact", "--config", str(config), "--suite", "raw", "x"]) == 2  # redacts nothing: says so
    assert "redacts nothing" in capsys.readouterr().err
    assert main(["redact", "--config", str(config), "--suite", "nope", "x"]) == 2
