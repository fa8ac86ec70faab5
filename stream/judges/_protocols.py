"""The judge protocols: everything that differs between OpenAI chat completions and Anthropic messages.

A :class:`Protocol` says where a request goes (``path`` and ``models_path`` below ``base_url``), which
headers carry the key and the version, how the request body is built (with the answer's JSON Schema
for ``structured: true``: :mod:`._structured`), and how the answer's text and token counts are read.
The simulated judge (:mod:`.sim`) uses the other side of the same seam: the prompts of a request body
and the answer body for a text. :class:`~._client.JudgeClient`, the ``/ready`` probe
(:mod:`._ready`), the configuration hints (:mod:`._hints`), :class:`~._config.JudgeConfig`'s
``protocol`` field (its values are the keys of :data:`PROTOCOLS`) and ``bench/_judgesim.py`` all read
it from here; a new protocol is one more entry in :data:`PROTOCOLS` plus its docs (docs/judges.md).
"""

from __future__ import annotations

import typing
from collections.abc import Mapping
from typing import Any

import httpx
import orjson

from ._structured import anthropic_fields, openai_fields, tool_input


class BodyConfig(typing.Protocol):
    """What a request body needs of a judge's configuration (:class:`~._config.JudgeConfig` has it; the
    configuration validates ``protocol`` against :data:`PROTOCOLS`, so it cannot be imported here)."""

    @property
    def protocol(self) -> str: ...
    @property
    def model(self) -> str: ...
    @property
    def temperature(self) -> float: ...
    @property
    def max_tokens(self) -> int: ...


__all__ = [
    "ANTHROPIC_VERSION",
    "PROTOCOLS",
    "AnthropicMessages",
    "OpenAIChat",
    "Protocol",
    "endpoint",
    "protocol_of",
]

ANTHROPIC_VERSION = "2023-06-01"


def endpoint(base_url: str, path: str) -> httpx.URL:
    """``path`` below ``base_url``, joined as ``httpx.AsyncClient(base_url=...)`` joins it (always appended)."""
    base = httpx.URL(base_url)
    root = base.raw_path if base.raw_path.endswith(b"/") else base.raw_path + b"/"
    return base.copy_with(raw_path=root + path.encode())


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return str(content or "")


class Protocol:
    """One judge protocol. Subclasses set the class attributes, the request body's prompt and schema fields
    (``body`` puts them after the fields every protocol has) and the other methods."""

    #: the name in ``protocol:`` (a key of :data:`PROTOCOLS`)
    name: str = ""
    #: the completion endpoint below ``base_url`` (no leading slash)
    path: str = ""
    #: the unbilled models listing below ``base_url`` that ``/ready`` probes
    models_path: str = ""
    #: what to check after an HTTP 404, or None when there is nothing specific to say
    not_found_hint: str | None = None

    def headers(self, key: str | None) -> dict[str, str]:
        """The protocol's own request headers: the API key (when there is one) and any version header."""
        raise NotImplementedError

    def body(
        self,
        cfg: BodyConfig,
        system: str,
        user: str,
        schema: dict[str, Any] | None,
        dialect: str = "json_schema",
    ) -> dict[str, Any]:
        """The request body asking ``cfg.model``; ``schema`` asks for a structured (JSON) answer, in the
        structured-output ``dialect`` where the protocol has several (:mod:`._structured`)."""
        body: dict[str, Any] = {
            "model": cfg.model,
            "max_tokens": cfg.max_tokens,
            "temperature": cfg.temperature,
            **self._prompt_fields(system, user),
        }
        if schema is not None:
            body.update(self._schema_fields(schema, dialect))
        return body

    def _prompt_fields(self, system: str, user: str) -> dict[str, Any]:
        """The request fields carrying the system and user prompts (after model, max_tokens, temperature)."""
        raise NotImplementedError

    def _schema_fields(self, schema: dict[str, Any], dialect: str) -> dict[str, Any]:
        """The request fields asking for a structured answer by ``schema`` (:mod:`._structured`)."""
        raise NotImplementedError

    def read(self, payload: Any) -> tuple[str, int, int]:
        """(answer text, prompt tokens, completion tokens) of a 2xx answer's JSON.

        Raises KeyError, IndexError, TypeError, AttributeError or ValueError when the answer is not in
        the protocol's shape (the client reports that as a bad response)."""
        raise NotImplementedError

    # -- the server's side (the simulated judge) --------------------------------------------------
    def prompts(self, body: Mapping[str, Any]) -> tuple[str, str]:
        """(system, user) text of a request body."""
        raise NotImplementedError

    def structured(self, body: Mapping[str, Any]) -> bool:
        """Whether a request body asks for a structured answer."""
        raise NotImplementedError

    def answer(self, body: Mapping[str, Any], text: str, n: int, tokens: tuple[int, int]) -> dict[str, Any]:
        """The answer body carrying ``text`` (as a structured answer when the request asked for one
        and ``text`` is a JSON object); ``n`` numbers the answer, ``tokens`` are (prompt, completion)."""
        raise NotImplementedError


class OpenAIChat(Protocol):
    """``POST {base_url}/chat/completions``, the key as ``Authorization: Bearer``; structured answers in
    one of the dialects of :mod:`._structured` (``response_format``, ``guided_json``, ``structured_outputs``)."""

    name = "openai"
    path = "chat/completions"
    models_path = "models"
    not_found_hint = "check base_url and model (OpenAI-compatible roots usually end in /v1)"

    def headers(self, key: str | None) -> dict[str, str]:
        return {} if key is None else {"authorization": f"Bearer {key}"}

    def _prompt_fields(self, system: str, user: str) -> dict[str, Any]:
        return {"messages": [{"role": "system", "content": system}, {"role": "user", "content": user}]}

    def _schema_fields(self, schema: dict[str, Any], dialect: str) -> dict[str, Any]:
        return openai_fields(schema, dialect)

    def read(self, payload: Any) -> tuple[str, int, int]:
        message = payload["choices"][0]["message"]
        text = message["content"]
        if text is None and isinstance(message.get("refusal"), str):  # structured outputs' refusal
            text = message["refusal"]
        if not isinstance(text, str):
            raise TypeError("content is not text")
        usage = payload.get("usage") or {}
        return text, int(usage.get("prompt_tokens", 0) or 0), int(usage.get("completion_tokens", 0) or 0)

    def prompts(self, body: Mapping[str, Any]) -> tuple[str, str]:
        messages = body.get("messages") or []
        system = "".join(_text(m.get("content")) for m in messages if m.get("role") == "system")
        user = "".join(_text(m.get("content")) for m in messages if m.get("role") == "user")
        return system, user

    def structured(self, body: Mapping[str, Any]) -> bool:
        return "response_format" in body or "guided_json" in body or "structured_outputs" in body

    def answer(self, body: Mapping[str, Any], text: str, n: int, tokens: tuple[int, int]) -> dict[str, Any]:
        tokens_in, tokens_out = tokens
        return {
            "id": f"chatcmpl-sim-{n}",
            "object": "chat.completion",
            "model": body.get("model"),
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
            ],
            "usage": {
                "prompt_tokens": tokens_in,
                "completion_tokens": tokens_out,
                "total_tokens": tokens_in + tokens_out,
            },
        }


class AnthropicMessages(Protocol):
    """``POST {base_url}/v1/messages`` with ``anthropic-version``, the key as ``x-api-key``; structured
    answers by a forced tool (``submit_evaluation``) whose input is the answer."""

    name = "anthropic"
    path = "v1/messages"
    models_path = "v1/models"

    def headers(self, key: str | None) -> dict[str, str]:
        headers = {} if key is None else {"x-api-key": key}
        headers["anthropic-version"] = ANTHROPIC_VERSION
        return headers

    def _prompt_fields(self, system: str, user: str) -> dict[str, Any]:
        return {"system": system, "messages": [{"role": "user", "content": user}]}

    def _schema_fields(self, schema: dict[str, Any], dialect: str) -> dict[str, Any]:
        return anthropic_fields(schema)  # one dialect: the forced tool

    def read(self, payload: Any) -> tuple[str, int, int]:
        called = tool_input(payload["content"])
        if isinstance(called, dict):  # structured: the submit_evaluation tool call
            text = orjson.dumps(called).decode()
        else:
            text = "".join(part.get("text", "") for part in payload["content"] if part.get("type") == "text")
        usage = payload.get("usage") or {}
        return text, int(usage.get("input_tokens", 0) or 0), int(usage.get("output_tokens", 0) or 0)

    def prompts(self, body: Mapping[str, Any]) -> tuple[str, str]:
        messages = body.get("messages") or []
        return _text(body.get("system")), "".join(
            _text(m.get("content")) for m in messages if m.get("role") == "user"
        )

    def structured(self, body: Mapping[str, Any]) -> bool:
        return "tools" in body

    def answer(self, body: Mapping[str, Any], text: str, n: int, tokens: tuple[int, int]) -> dict[str, Any]:
        called = _tool_call(body, text, n) if self.structured(body) else None
        return {
            "id": f"msg_sim_{n}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model"),
            "content": [{"type": "text", "text": text}] if called is None else [called],
            "stop_reason": "end_turn" if called is None else "tool_use",
            "usage": {"input_tokens": tokens[0], "output_tokens": tokens[1]},
        }


def _tool_call(body: Mapping[str, Any], text: str, n: int) -> dict[str, Any] | None:
    """A tool_use block answering the forced tool with ``text`` (when it is a JSON object)."""
    choice = body.get("tool_choice")
    name = choice.get("name") if isinstance(choice, dict) else None
    try:
        document = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    if not name or not isinstance(document, dict):
        return None
    return {"type": "tool_use", "id": f"toolu_sim_{n}", "name": name, "input": document}


#: every protocol by its ``protocol:`` name; JudgeConfig accepts exactly these keys
PROTOCOLS: dict[str, Protocol] = {p.name: p for p in (OpenAIChat(), AnthropicMessages())}


def protocol_of(cfg: BodyConfig) -> Protocol:
    return PROTOCOLS[cfg.protocol]
