"""Structured answers (OpenAI response_format json_schema, Anthropic tool use) and the prompt-only fallback."""

from __future__ import annotations

import logging
from typing import Any

import jsonschema
import orjson
import pytest
from _judges_helpers import event, judge

from streameval.judges import JudgeHub, build_metric, build_rubric
from streameval.judges._structured import TOOL_NAME, answer_schema, openai_fields
from streameval.judges.sim import start_judge_sim


async def _ask(cfg: Any, prompts: list[Any]) -> list[Any]:
    hub = JudgeHub([cfg], log_interval_s=None)
    await hub.start()
    try:
        [j] = hub.panel(None)
        return [await hub.ask(j, p) for p in prompts]
    finally:
        await hub.close()


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
async def test_structured_answers_over_both_protocols(protocol: str) -> None:
    requests: list[dict[str, Any]] = []
    prompt = build_rubric(event(), "qa_simple", "1-5", blind=True)
    async with start_judge_sim(requests=requests) as url:
        [verdict] = await _ask(judge("j", url, weight=1, protocol=protocol, structured=True), [prompt])
    [body] = requests
    schema = answer_schema(prompt)
    assert schema is not None
    jsonschema.Draft202012Validator.check_schema(schema)
    if protocol == "openai":
        assert body["response_format"]["type"] == "json_schema"
        # the same schema without maxLength (OpenAI's strict mode refuses it)
        assert (
            body["response_format"]["json_schema"]["schema"]
            == openai_fields(schema, "json_schema")["response_format"]["json_schema"]["schema"]
        )
        assert "maxLength" not in orjson.dumps(body["response_format"]).decode()
    else:
        assert body["tools"][0]["name"] == TOOL_NAME and body["tools"][0]["input_schema"] == schema
        assert body["tool_choice"] == {"type": "tool", "name": TOOL_NAME}
    assert verdict.status == "ok" and verdict.parse == "json" and set(verdict.scores) == set(prompt.weights)


async def test_a_rejecting_endpoint_falls_back_to_prompt_only_and_says_so_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING)
    requests: list[dict[str, Any]] = []
    prompts = [build_rubric(event(output=f"Paris {n}"), "qa_simple", "1-5", blind=True) for n in range(3)]
    async with start_judge_sim(reject_structured=True, requests=requests) as url:
        verdicts = await _ask(judge("j", url, weight=1, structured=True), prompts)
    assert all(v.status == "ok" and v.parse == "json" for v in verdicts)
    # the first call: json_schema refused, json_object refused (each 400 names response_format), then asked
    # without the schema; the others: prompt-only at once
    assert [body.get("response_format", {}).get("type") for body in requests] == [
        "json_schema",
        "json_object",
        None,
        None,
        None,
    ]
    warnings = [r for r in caplog.records if "rejected structured output" in r.getMessage()]
    assert len(warnings) == 1


async def test_metric_prompts_stay_prompt_only() -> None:
    requests: list[dict[str, Any]] = []
    async with start_judge_sim(requests=requests) as url:
        [verdict] = await _ask(
            judge("j", url, weight=1, protocol="anthropic", structured=True),
            [build_metric(event(), "coherence", blind=True)],
        )
    assert "tools" not in requests[0] and verdict.status == "ok" and verdict.parse == "number"


async def test_an_openai_structured_refusal_is_read_as_a_refusal() -> None:
    from aiohttp import web

    async def handle(request: web.Request) -> web.Response:
        message = {"role": "assistant", "content": None, "refusal": "I'm sorry, but I can't help with that."}
        return web.json_response(
            {"choices": [{"message": message}], "usage": {"prompt_tokens": 5, "completion_tokens": 3}}
        )

    app = web.Application()
    app.router.add_post("/v1/chat/completions", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        url = f"http://127.0.0.1:{runner.addresses[0][1]}"
        [verdict] = await _ask(
            judge("j", url, weight=1, structured=True),
            [build_rubric(event(), "qa_simple", "1-5", blind=True)],
        )
    finally:
        await runner.cleanup()
    assert verdict.status == "ok" and verdict.parse == "default" and verdict.score == 5.0
    assert any(w.startswith("refusal: I'm sorry, but") for w in verdict.warnings)
    assert orjson.dumps(verdict.warnings)
