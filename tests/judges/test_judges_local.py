"""What a local model server needs of the judge client, against scripted servers that answer as
llama-cpp-python's, llama.cpp's and vLLM's do (the real server: tests/judges_local): structured-output
dialects learned without giving up on one ambiguous answer, the context window (learned, counted,
prompts shortened with a mark), the first-byte timeout, /props."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import jsonschema
import orjson
import pytest
from _judges_helpers import event, judge
from aiohttp import web
from prometheus_client import REGISTRY

from streameval.judges import JudgeHub, build_rubric, judge_counters
from streameval.judges._context import CUT_MARK, estimate_tokens, fit_user
from streameval.judges._structured import answer_schema
from streameval.models import JudgeVerdict

ANSWER = {
    "scores": {c: {"score": 4, "justification": "ok"} for c in ("accuracy", "conciseness", "clarity")},
    "overall_score": 4,
    "strengths": ["right"],
    "weaknesses": [],
    "reasoning": "correct",
}

Handler = Callable[[dict[str, Any]], Awaitable[web.Response]]


@contextlib.asynccontextmanager
async def server(
    chat: Handler, **extra: Callable[[web.Request], Awaitable[web.Response]]
) -> AsyncIterator[str]:
    """An OpenAI-compatible server at ``{url}/v1`` whose chat endpoint is ``chat(body)``; ``extra`` routes
    (``props``, ``extras/tokenize/count``...) below the root."""

    async def handle(request: web.Request) -> web.Response:
        return await chat(await request.json())

    app = web.Application()
    app.router.add_post("/v1/chat/completions", handle)
    for path, route in extra.items():
        app.router.add_route("*", "/" + path.replace("__", "/"), route)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()


def completion(text: str, prompt_tokens: int = 100, completion_tokens: int = 40) -> web.Response:
    return web.json_response(
        {
            "choices": [{"message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens},
        }
    )


def error(status: int, message: str) -> web.Response:
    return web.json_response({"error": {"message": message, "type": "invalid_request_error"}}, status=status)


async def ask_all(cfg: Any, prompts: list[Any]) -> tuple[list[JudgeVerdict], Any]:
    hub = JudgeHub([cfg], log_interval_s=None)
    await hub.start()
    try:
        [j] = hub.panel(None)
        return [await hub.ask(j, p) for p in prompts], j.client
    finally:
        await hub.close()


def prompts(n: int, **fields: Any) -> list[Any]:
    return [
        build_rubric(event(output=f"Paris {i}", **fields), "qa_simple", "1-5", blind=True) for i in range(n)
    ]


async def test_llama_cpp_python_dialect_is_learned_after_two_strikes(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """llama-cpp-python answers HTTP 500 to json_schema and takes json_object + schema."""
    caplog.set_level(logging.WARNING)
    seen: list[str | None] = []

    async def chat(body: dict[str, Any]) -> web.Response:
        kind = (body.get("response_format") or {}).get("type")
        seen.append(kind)
        if kind == "json_schema":
            return web.json_response({"error": {"message": "Internal Server Error"}}, status=500)
        assert kind == "json_object" and body["response_format"]["schema"]["type"] == "object"
        return completion(orjson.dumps(ANSWER).decode())

    async with server(chat) as url:
        verdicts, client = await ask_all(judge("j", url, weight=1, structured=True, attempts=1), prompts(4))
    assert [v.status for v in verdicts] == ["ok"] * 4 and {v.parse for v in verdicts} == {"json"}
    # one 500 is not enough to give json_schema up: it is dropped after the second
    assert seen == ["json_schema", "json_object", "json_schema", "json_object", "json_object", "json_object"]
    assert client.dialect == "json_object" and client.structured


async def test_a_failing_server_never_loses_structured_output() -> None:
    """500 to everything: a server error, not a refusal of the format; every request still asks for JSON."""
    seen: list[str | None] = []

    async def chat(body: dict[str, Any]) -> web.Response:
        seen.append((body.get("response_format") or {}).get("type"))
        return web.json_response({"error": {"message": "model crashed"}}, status=500)

    async with server(chat) as url:
        verdicts, client = await ask_all(judge("j", url, weight=1, structured=True, attempts=1), prompts(3))
    assert [v.error for v in verdicts] == ["judge_http_error"] * 3
    assert seen == ["json_schema", "json_object", None] * 3
    assert client.dialect == "json_schema" and client.structured


async def test_an_explicit_dialect_is_sent_as_configured() -> None:
    bodies: list[dict[str, Any]] = []

    async def chat(body: dict[str, Any]) -> web.Response:
        bodies.append(body)
        return completion(orjson.dumps(ANSWER).decode())

    async with server(chat) as url:
        for mode in ("guided_json", "structured_outputs", "json_object"):
            await ask_all(judge("j", url, weight=1, structured=True, structured_mode=mode), prompts(1))
    schema = answer_schema(prompts(1)[0])
    assert bodies[0]["guided_json"] == schema
    assert bodies[1]["structured_outputs"] == {"json": schema}
    assert bodies[2]["response_format"] == {"type": "json_object", "schema": schema}


def test_the_schema_is_one_a_grammar_can_enforce() -> None:
    schema = answer_schema(prompts(1)[0])
    assert schema is not None
    score = schema["properties"]["scores"]["properties"]["accuracy"]["properties"]["score"]
    assert score["enum"] == [1, 2, 3, 4, 5]
    assert schema["properties"]["weaknesses"]["maxItems"] == 5
    assert schema["properties"]["reasoning"]["maxLength"] > 0
    assert 4.5 in schema["properties"]["overall_score"]["enum"]
    validator = jsonschema.Draft202012Validator(schema)
    validator.validate(ANSWER)
    with pytest.raises(jsonschema.ValidationError):
        validator.validate({**ANSWER, "overall_score": 7})  # off the 1-5 scale
    with pytest.raises(jsonschema.ValidationError):
        validator.validate({**ANSWER, "weaknesses": ["w"] * 6})


THREAD = "\n".join(f"{'user' if i % 2 == 0 else 'assistant'} turn {i}: " + "words " * 60 for i in range(40))


async def test_a_context_length_error_is_learned_and_the_prompt_shortened() -> None:
    """llama-cpp-python's 400 for a prompt longer than its window: not a refusal of the format."""
    bodies: list[dict[str, Any]] = []

    async def chat(body: dict[str, Any]) -> web.Response:
        bodies.append(body)
        size = sum(estimate_tokens(m["content"]) for m in body["messages"]) + body["max_tokens"]
        if size > 2048:
            return error(
                400,
                f"This model's maximum context length is 2048 tokens. However, you requested {size} tokens "
                f"({size - body['max_tokens']} in the messages, {body['max_tokens']} in the completion).",
            )
        return completion(orjson.dumps(ANSWER).decode())

    before = REGISTRY.get_sample_value("streameval_judge_prompts_truncated_total", {"judge": "ctx"}) or 0.0
    async with server(chat) as url:
        cfg = judge("ctx", url, weight=1, structured=True, max_tokens=200, attempts=1)
        [verdict], client = await ask_all(cfg, prompts(1, input=THREAD, category="multi_turn"))
    assert verdict.status == "ok" and verdict.parse == "json", verdict
    assert client.context == 2048 and client.dialect == "json_schema"  # the format was never blamed
    assert [b.get("response_format", {}).get("type") for b in bodies] == ["json_schema", "json_schema"]
    sent = bodies[-1]["messages"][1]["content"]
    assert "characters cut to fit the judge's context window" in sent
    assert "user turn 0:" in sent and "assistant turn 39:" in sent  # the first and last turns stay
    assert any(w.startswith("context: cut ") and "prompt" in w for w in verdict.warnings)
    assert judge_counters([verdict])["ctx.truncated"] == 1
    after = REGISTRY.get_sample_value("streameval_judge_prompts_truncated_total", {"judge": "ctx"})
    assert after == before + 1


async def test_a_known_window_is_counted_by_the_servers_tokenizer_before_sending() -> None:
    counted: list[str] = []
    bodies: list[dict[str, Any]] = []

    async def count(request: web.Request) -> web.Response:
        text = (await request.json())["input"]
        counted.append(text)
        return web.json_response({"count": len(text) // 4})

    async def chat(body: dict[str, Any]) -> web.Response:
        bodies.append(body)
        return completion(orjson.dumps(ANSWER).decode())

    async with server(chat, extras__tokenize__count=count) as url:
        cfg = judge("tok", url, weight=1, context_tokens=1024, max_tokens=128)
        [verdict], _ = await ask_all(cfg, prompts(1, input=THREAD))
    assert len(bodies) == 1 and counted  # never sent too long: no 400 to learn from
    user = bodies[0]["messages"][1]["content"]
    assert len(user) // 4 <= 1024 - 128
    assert any(w.startswith("context: cut ") for w in verdict.warnings)


async def test_props_give_the_window_and_the_slots() -> None:
    async def props(request: web.Request) -> web.Response:
        return web.json_response({"default_generation_settings": {"n_ctx": 4096}, "total_slots": 2})

    async def chat(body: dict[str, Any]) -> web.Response:
        return completion(orjson.dumps(ANSWER).decode())

    async with server(chat, props=props) as url:
        cfg = judge("p", url, weight=1, context_tokens="auto", max_concurrency=8, max_tokens=256)
        [verdict], client = await ask_all(cfg, prompts(1))
    assert verdict.status == "ok" and client.context == 4096 and client._slots.maximum == 2


async def test_first_byte_timeout_is_its_own_limit() -> None:
    async def chat(body: dict[str, Any]) -> web.Response:
        await asyncio.sleep(2.0)
        return completion(orjson.dumps(ANSWER).decode())

    async with server(chat) as url:
        cfg = judge("slow", url, weight=1, first_byte_timeout_s=0.2, timeout_s=30, attempts=1)
        [verdict], _ = await ask_all(cfg, prompts(1))
    assert verdict.error == "judge_timeout" and "first_byte_timeout_s" in (verdict.reason or "")


async def test_the_fit_cuts_the_longest_parts_first() -> None:
    prompt = build_rubric(
        event(input=THREAD, output="short answer", expected="Paris " * 400, category="multi_turn"),
        "multi_turn",
        "1-5",
        blind=True,
    )

    async def count(text: str) -> int:
        return estimate_tokens(text)

    user, cut = await fit_user(prompt.user, 1500, count)
    assert cut is not None and estimate_tokens(user) <= 1500
    assert "short answer" in user  # the short output is left whole
    assert set(cut.fields) == {"prompt", "reference"} and cut.chars > 0
    assert CUT_MARK.split("{n}")[1] in user
    with pytest.raises(ValueError, match="cannot be shortened"):
        await fit_user(prompt.user, 10, count)
