"""The judge-protocol seam: each protocol's request and answer, read back by its other side."""

from __future__ import annotations

import orjson
import pytest
from pydantic import ValidationError

from streameval.judges import PROTOCOLS, JudgeConfig
from streameval.judges._protocols import endpoint
from streameval.judges._structured import TOOL_NAME

SCHEMA = {
    "type": "object",
    "properties": {"overall_score": {"type": "number"}},
    "required": ["overall_score"],
}


def config(protocol: str, **kw: object) -> JudgeConfig:
    return JudgeConfig(
        name="j", protocol=protocol, base_url="http://127.0.0.1:9/api", model="m", weight=1.0, **kw
    )


@pytest.mark.parametrize("name", sorted(PROTOCOLS))
def test_a_request_body_carries_the_prompts_and_the_answer_reads_back(name: str) -> None:
    proto = PROTOCOLS[name]
    cfg = config(name, temperature=0.1, max_tokens=77)
    body = orjson.loads(orjson.dumps(proto.body(cfg, "the system", "the user", None)))
    assert (body["model"], body["max_tokens"], body["temperature"]) == ("m", 77, 0.1)
    assert proto.prompts(body) == ("the system", "the user")
    assert not proto.structured(body)
    answer = orjson.loads(orjson.dumps(proto.answer(body, "a verdict", 3, (11, 4))))
    assert proto.read(answer) == ("a verdict", 11, 4)


@pytest.mark.parametrize("name", sorted(PROTOCOLS))
def test_a_structured_request_gets_its_json_back(name: str) -> None:
    proto = PROTOCOLS[name]
    body = orjson.loads(orjson.dumps(proto.body(config(name), "s", "u", SCHEMA)))
    assert proto.structured(body)
    text, _, _ = proto.read(orjson.loads(orjson.dumps(proto.answer(body, '{"overall_score": 7}', 1, (1, 1)))))
    assert orjson.loads(text) == {"overall_score": 7}


def test_the_protocols_own_fields() -> None:
    openai, anthropic = PROTOCOLS["openai"], PROTOCOLS["anthropic"]
    assert openai.headers("k") == {"authorization": "Bearer k"} and openai.headers(None) == {}
    assert anthropic.headers("k") == {"x-api-key": "k", "anthropic-version": "2023-06-01"}
    assert anthropic.headers(None) == {"anthropic-version": "2023-06-01"}
    body = anthropic.body(config("anthropic"), "s", "u", SCHEMA)
    assert (
        body["tool_choice"] == {"type": "tool", "name": TOOL_NAME}
        and body["tools"][0]["input_schema"] == SCHEMA
    )
    assert (
        openai.body(config("openai"), "s", "u", SCHEMA)["response_format"]["json_schema"]["schema"] == SCHEMA
    )
    # an OpenAI structured refusal carries its text in `refusal`
    assert openai.read({"choices": [{"message": {"content": None, "refusal": "no"}}]}) == ("no", 0, 0)
    with pytest.raises(KeyError):
        anthropic.read({"choices": []})


@pytest.mark.parametrize(
    ("base", "path", "url"),
    [
        ("https://h/api", "v1/messages", "https://h/api/v1/messages"),
        ("https://h/v1/", "chat/completions", "https://h/v1/chat/completions"),
        ("https://h", "models", "https://h/models"),
    ],
)
def test_endpoints_are_always_below_the_base_url(base: str, path: str, url: str) -> None:
    assert str(endpoint(base, path)) == url


def test_the_config_accepts_exactly_the_known_protocols() -> None:
    for name in PROTOCOLS:
        assert config(name).protocol == name
    with pytest.raises(ValidationError) as caught:
        config("gemini")
    assert "unknown protocol 'gemini'; known protocols: openai, anthropic" in str(caught.value)
    assert caught.value.errors()[0]["loc"] == ("protocol",)
    assert JudgeConfig.model_json_schema()["properties"]["protocol"]["enum"] == list(PROTOCOLS)
