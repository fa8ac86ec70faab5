"""GenAI spans to request events: which spans are LLM calls, and where their model, input and output are.

Three conventions are read (docs/inputs.md has the full table):

* OpenTelemetry GenAI: ``gen_ai.operation.name`` is ``chat``, ``text_completion`` or ``generate_content``;
  text in ``gen_ai.input.messages`` / ``gen_ai.output.messages`` (JSON, or structured), or in the older
  span events ``gen_ai.user.message`` / ``gen_ai.choice``.
* OpenLLMetry (Traceloop): ``llm.request.type`` is ``chat`` or ``completion``; text in
  ``gen_ai.prompt.N.content`` / ``gen_ai.completion.N.content``.
* OpenInference (Arize): ``openinference.span.kind`` is ``LLM``; text in
  ``llm.input_messages.N.message.content`` / ``llm.output_messages.N.message.content``, else
  ``input.value`` / ``output.value``.

A span of an older GenAI instrumentation, with ``gen_ai.request.model`` or ``gen_ai.response.model`` and
none of those three attributes at all, is an LLM span when it has output text (without text it is skipped: it cannot be
told from an embedding call).

Input and output are each taken from the first of those places that has text, in that order, whatever
the convention that marked the span. The input is the last user message (the last message when none
has the user role); the output is the first output message (choice) with text. Text parts of one
message are joined with newlines; tool calls and other non-text parts are left out.

An LLM span whose output is tool calls only (what OpenAI's chat completions answer when the model calls
tools) has no text to evaluate: :func:`to_event` raises :class:`ToolCallsOnly` (a ``schema`` dead letter
naming the tools), and with an ``assemble: spans`` session the decoder makes it a ``plan`` step of its
run instead (:func:`to_plan`). The calls are read from the first of these places that has one:
``gen_ai.output.messages`` parts of type ``tool_call``; the ``gen_ai.choice`` event's
``message.tool_calls`` (OpenAI's shape); OpenLLMetry ``gen_ai.completion.N.tool_calls.M.name`` /
``.arguments``; OpenInference ``llm.output_messages.N.message.tool_calls.M.tool_call.function.name`` /
``.arguments``. A span that has such calls never takes its output from ``output.value`` (OpenInference
writes the response there as it came, JSON with ``"content": null``, not an answer).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import orjson

from ..errors import SchemaViolation
from ..models import format_time
from ._otlp import Span

__all__ = ["STEP_TEXT", "ToolCallsOnly", "convention", "to_event", "to_plan", "to_step"]

_OPERATIONS = frozenset({"chat", "text_completion", "generate_content"})
_REQUEST_TYPES = frozenset({"chat", "completion"})
_MISSING_ID = "0" * 16
_MARKERS = ("gen_ai.operation.name", "llm.request.type", "openinference.span.kind")


def convention(attributes: dict[str, Any]) -> str | None:
    """``gen_ai`` / ``openllmetry`` / ``openinference`` for an LLM span, None for any other span."""
    operation, request_type = attributes.get("gen_ai.operation.name"), attributes.get("llm.request.type")
    if isinstance(operation, str) and operation in _OPERATIONS:
        return "gen_ai"
    if isinstance(request_type, str) and request_type in _REQUEST_TYPES:
        return "openllmetry"
    if attributes.get("openinference.span.kind") == "LLM":
        return "openinference"
    return None


# -- message text -----------------------------------------------------------------------------------
def _text(content: Any) -> str | None:
    return content if isinstance(content, str) and content else None


def _message_text(message: Any) -> str | None:
    """Text of one GenAI message: its ``text`` parts (or a plain ``content`` string)."""
    if not isinstance(message, dict):
        return None
    parts = message.get("parts")
    if isinstance(parts, list):
        texts = [
            p["content"]
            for p in parts
            if isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("content"), str)
        ]
        return "\n".join(texts) or None
    return _text(message.get("content"))


def _messages(value: Any) -> list[Any]:
    if isinstance(value, str):
        try:
            value = orjson.loads(value)
        except orjson.JSONDecodeError:
            return []
    return value if isinstance(value, list) else []


def _last_user(messages: list[tuple[str | None, str | None]]) -> str | None:
    """The last user message's text, else the last message's text."""
    for role, text in reversed(messages):
        if role == "user" and text:
            return text
    return next((text for _, text in reversed(messages) if text), None)


def _first(messages: list[tuple[str | None, str | None]]) -> str | None:
    return next((text for _, text in messages if text), None)


def _gen_ai_messages(attrs: dict[str, Any], key: str) -> list[tuple[str | None, str | None]]:
    return [
        (m.get("role") if isinstance(m, dict) else None, _message_text(m)) for m in _messages(attrs.get(key))
    ]


def _json_object(value: Any) -> dict[str, Any]:
    if isinstance(value, str):
        try:
            value = orjson.loads(value)
        except orjson.JSONDecodeError:
            return {}
    return value if isinstance(value, dict) else {}


def _event_content(attrs: dict[str, Any]) -> dict[str, Any]:
    """An event's ``gen_ai.event.content`` JSON (some instrumentations put the body there)."""
    return _json_object(attrs.get("gen_ai.event.content"))


def _event_messages(
    span: Span,
) -> tuple[list[tuple[str | None, str | None]], list[tuple[str | None, str | None]]]:
    inputs: list[tuple[str | None, str | None]] = []
    choices: list[tuple[int, str | None]] = []
    for name, attrs in span.events:
        if name == "gen_ai.user.message":
            text = _text(attrs.get("content")) or _text(_event_content(attrs).get("content"))
            inputs.append(("user", text))
        elif name == "gen_ai.choice":
            message = attrs.get("message")
            if isinstance(message, str):
                message = _json_object(message)
            if not isinstance(message, dict):
                message = _event_content(attrs).get("message")
            index = attrs.get("index", len(choices))
            choices.append((index if isinstance(index, int) else len(choices), _message_text(message)))
    choices.sort(key=lambda c: c[0])
    return inputs, [(None, text) for _, text in choices]


def _indexed(
    attrs: dict[str, Any], prefix: str, content: str, role: str
) -> list[tuple[str | None, str | None]]:
    """``prefix.0.content``, ``prefix.1.content``, ... while either the content or the role key exists."""
    out: list[tuple[str | None, str | None]] = []
    i = 0
    while True:
        text, who = attrs.get(f"{prefix}.{i}.{content}"), attrs.get(f"{prefix}.{i}.{role}")
        if text is None and who is None:
            return out
        if text is None and prefix.startswith("llm."):  # OpenInference multimodal: message.contents.N
            text = "\n".join(_contents(attrs, f"{prefix}.{i}.message.contents")) or None
        out.append((who if isinstance(who, str) else None, _text(text)))
        i += 1


def _contents(attrs: dict[str, Any], prefix: str) -> list[str]:
    texts: list[str] = []
    j = 0
    while (kind := attrs.get(f"{prefix}.{j}.message_content.type")) is not None:
        text = attrs.get(f"{prefix}.{j}.message_content.text")
        if kind == "text" and isinstance(text, str):
            texts.append(text)
        j += 1
    return texts


def _texts(span: Span) -> tuple[str | None, str | None]:
    """(input, output) from the first place that has text, each in the module docstring's order.

    Places are looked at only until one has text (most spans stop at the first or second).
    """
    attrs = span.attributes
    events: list[tuple[list[tuple[str | None, str | None]], list[tuple[str | None, str | None]]]] = []

    def from_events(which: int) -> list[tuple[str | None, str | None]]:
        if not span.events:
            return []
        if not events:
            events.append(_event_messages(span))
        return events[0][which]

    inputs: tuple[Callable[[], list[tuple[str | None, str | None]]], ...] = (
        lambda: _gen_ai_messages(attrs, "gen_ai.input.messages"),
        lambda: from_events(0),
        lambda: _indexed(attrs, "gen_ai.prompt", "content", "role"),
        lambda: _indexed(attrs, "llm.input_messages", "message.content", "message.role"),
        lambda: [(None, _text(attrs.get("input.value")))],
    )
    outputs: tuple[Callable[[], list[tuple[str | None, str | None]]], ...] = (
        lambda: _gen_ai_messages(attrs, "gen_ai.output.messages"),
        lambda: from_events(1),
        lambda: _indexed(attrs, "gen_ai.completion", "content", "role"),
        lambda: _indexed(attrs, "llm.output_messages", "message.content", "message.role"),
        # OpenInference's output.value is the response as it came (JSON): not the answer of a tool call
        lambda: [] if _found_calls(span) else [(None, _text(attrs.get("output.value")))],
    )
    found_in = next((t for t in (_last_user(place()) for place in inputs) if t), None)
    found_out = next((t for t in (_first(place()) for place in outputs) if t), None)
    return found_in, found_out


# -- requested tool calls (an output of tool calls only) --------------------------------------------
#: tool calls kept of one LLM call's output (the session's turn keeps as many: turns.MAX_TOOL_CALLS)
_MAX_CALLS = 20
#: output choices looked at for tool calls in the indexed conventions (OpenLLMetry, OpenInference)
_CHOICES = 4


def _message_calls(message: Any) -> list[tuple[Any, Any]]:
    """(name, arguments) of one output message's tool calls: GenAI ``tool_call`` parts, else OpenAI's
    ``tool_calls`` (``function.name`` / ``function.arguments``)."""
    if not isinstance(message, dict):
        return []
    parts = message.get("parts")
    if isinstance(parts, list):
        found = [
            (p.get("name"), p.get("arguments"))
            for p in parts
            if isinstance(p, dict) and p.get("type") == "tool_call"
        ]
        if found:
            return found
    calls = message.get("tool_calls")
    if not isinstance(calls, list):
        return []
    out = []
    for call in calls:
        if isinstance(call, dict):
            function = call.get("function")
            body = function if isinstance(function, dict) else call
            out.append((body.get("name"), body.get("arguments")))
    return out


def _first_calls(messages: list[Any]) -> list[tuple[Any, Any]]:
    return next((calls for calls in map(_message_calls, messages) if calls), [])


def _choice_calls(span: Span) -> list[tuple[Any, Any]]:
    """Tool calls of the older conventions' ``gen_ai.choice`` events (first choice that has some)."""
    messages = []
    for name, attrs in span.events:
        if name == "gen_ai.choice":
            message = attrs.get("message")
            if isinstance(message, str):
                message = _json_object(message)
            if not isinstance(message, dict):
                message = _event_content(attrs).get("message")
            messages.append(message)
    return _first_calls(messages)


def _indexed_calls(
    attrs: dict[str, Any], prefix: str, calls: str, name: str, arguments: str
) -> list[tuple[Any, Any]]:
    """``prefix.N.calls.M.name`` / ``.arguments`` (N: choice, M: call) of the first choice with calls."""
    for i in range(_CHOICES):
        out: list[tuple[Any, Any]] = []
        while (
            len(out) < _MAX_CALLS
            and (called := attrs.get(f"{prefix}.{i}.{calls}.{len(out)}.{name}")) is not None
        ):
            out.append((called, attrs.get(f"{prefix}.{i}.{calls}.{len(out)}.{arguments}")))
        if out:
            return out
    return []


def _found_calls(span: Span) -> list[tuple[Any, Any]]:
    """(name, arguments) of the tool calls in the first place that has one (module docstring)."""
    attrs = span.attributes
    places: tuple[Callable[[], list[tuple[Any, Any]]], ...] = (
        lambda: _first_calls(_messages(attrs.get("gen_ai.output.messages"))),
        lambda: _choice_calls(span) if span.events else [],
        lambda: _indexed_calls(attrs, "gen_ai.completion", "tool_calls", "name", "arguments"),
        lambda: _indexed_calls(
            attrs,
            "llm.output_messages",
            "message.tool_calls",
            "tool_call.function.name",
            "tool_call.function.arguments",
        ),
    )
    return next((calls for calls in (place() for place in places) if calls), [])


def requested_calls(span: Span) -> list[dict[str, str | None]]:
    """The tool calls an LLM span's output asks for (module docstring: the first place that has one), at
    most 20, each ``{"name", "arguments"}`` with the arguments as text clipped to :data:`STEP_TEXT`."""
    return [
        {"name": str(name)[:128] if name not in (None, "") else "?", "arguments": _step_text(arguments)}
        for name, arguments in _found_calls(span)[:_MAX_CALLS]
    ]


class ToolCallsOnly(SchemaViolation):
    """An LLM span that answered with tool calls only: nothing to evaluate as an event (a ``schema`` dead
    letter naming the tools), a ``plan`` step of its run with an ``assemble: spans`` session."""

    def __init__(
        self,
        reason: str,
        *,
        event_id: str,
        calls: list[dict[str, str | None]],
        model: str | None,
        input_text: str | None,
    ) -> None:
        super().__init__(reason, event_id=event_id)
        self.calls = calls
        self.model = model
        self.input_text = input_text


# -- the request event ------------------------------------------------------------------------------
def _pick(attrs: dict[str, Any], *keys: str) -> Any:
    for key in keys:
        value = attrs.get(key)
        if value is not None and value != "":
            return value
    return None


def _finish_reasons(span: Span) -> list[str] | None:
    attrs = span.attributes
    reasons = attrs.get("gen_ai.response.finish_reasons")
    if isinstance(reasons, list):
        return [str(r) for r in reasons]
    if isinstance(reasons, str):
        return [reasons]
    found = [
        m.get("finish_reason") for m in _messages(attrs.get("gen_ai.output.messages")) if isinstance(m, dict)
    ]
    found += [attrs.get(f"gen_ai.completion.{i}.finish_reason") for i in range(4)]
    found += [a.get("finish_reason") for n, a in span.events if n == "gen_ai.choice"]
    reasons = [r for r in found if isinstance(r, str) and r]
    return reasons or None


#: the usage block's token counts and the span attributes that carry each, first found wins: the OpenTelemetry
#: GenAI conventions (current, then deprecated names), OpenInference, OpenLLMetry
_USAGE_TOKENS = (
    ("input_tokens", ("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens", "llm.token_count.prompt")),
    (
        "output_tokens",
        ("gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens", "llm.token_count.completion"),
    ),
    (
        "cached_input_tokens",
        (
            "gen_ai.usage.cache_read.input_tokens",
            "gen_ai.usage.cache_read_input_tokens",
            "llm.token_count.prompt_details.cache_read",
        ),
    ),
    (
        "reasoning_tokens",
        ("gen_ai.usage.reasoning.output_tokens", "llm.token_count.completion_details.reasoning"),
    ),
)


def _usage(span: Span, reasons: list[str] | None, event_id: str) -> dict[str, Any] | None:
    """The request event's ``usage`` block of an LLM span (docs/inputs.md): token counts, the span's
    duration, the first finish reason; None when the span says none of them. Values are passed as found (a
    whole double as an integer): the event's validation dead-letters a negative or absurd count by its field."""
    usage: dict[str, Any] = {}
    for field, keys in _USAGE_TOKENS:
        value = _pick(span.attributes, *keys)
        if isinstance(value, float) and not math.isfinite(value):  # JSON has no NaN: say it here
            raise SchemaViolation(f"usage.{field}: {value} is not a token count", event_id=event_id)
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if value is not None:
            usage[field] = value
    if span.start_ns > 0 and span.end_ns >= span.start_ns:
        usage["duration_ms"] = (span.end_ns - span.start_ns) / 1e6
    if reasons and reasons[0]:
        usage["finish_reason"] = reasons[0][:64]
    return usage or None


def _tags(values: list[Any]) -> list[str]:
    out: list[str] = []
    for value in values:
        for item in value if isinstance(value, list) else [value]:
            if item is not None and item != "":
                out.append(item if isinstance(item, str) else orjson.dumps(item).decode())
    return out


def _attribute(span: Span, key: str) -> Any:
    value = span.attributes.get(key)
    return span.resource.get(key) if value is None else value


def to_event(
    span: Span, *, category_attribute: str | None = None, tag_attributes: tuple[str, ...] = ()
) -> dict[str, Any] | None:
    """The request event of an LLM span; None for any other span. Raises :class:`SchemaViolation` for an
    LLM span that cannot make one (no output text, no model, no trace or span id): :class:`ToolCallsOnly`
    when its output is tool calls only."""
    attrs = span.attributes
    family = convention(attrs)
    texts = None
    if family is None:
        # GenAI instrumentations older than gen_ai.operation.name mark nothing: a span naming a GenAI model
        # that has output text is an LLM call all the same (without text it may be an embedding call)
        if any(attrs.get(marker) not in (None, "") for marker in _MARKERS) or (
            attrs.get("gen_ai.request.model") is None and attrs.get("gen_ai.response.model") is None
        ):
            return None  # marked as something else (embeddings, invoke_agent, TOOL, ...), or no GenAI model
        texts = _texts(span)
        if texts[1] is None:
            return None
        family = "gen_ai"
    if len(span.trace_id) != 32 or len(span.span_id) != 16 or span.span_id == _MISSING_ID:
        raise SchemaViolation(
            f"LLM span {span.name!r} has no valid trace and span id "
            f"(traceId {span.trace_id[:64]!r}, spanId {span.span_id[:64]!r})"
        )
    event_id = f"{span.trace_id}-{span.span_id}"
    model = _pick(
        attrs,
        "gen_ai.response.model",
        "gen_ai.request.model",
        "llm.response.model_name",
        "llm.model_name",
        "llm.request.model_name",
    )
    input_text, output_text = texts or _texts(span)
    if output_text is None:
        calls = requested_calls(span)
        if calls:
            names = ", ".join(c["name"] or "?" for c in calls[:5]) + (", ..." if len(calls) > 5 else "")
            raise ToolCallsOnly(
                f"LLM span {span.span_id} ({span.name!r}, trace {span.trace_id}) answered with tool calls "
                f"only ({names}): no text to evaluate",
                event_id=event_id,
                calls=calls,
                model=model if isinstance(model, str) else None,
                input_text=input_text,
            )
        raise SchemaViolation(
            f"LLM span {span.span_id} ({span.name!r}, trace {span.trace_id}) has no output text "
            "(is content capture on in its instrumentation?)",
            event_id=event_id,
        )
    if not isinstance(model, str):
        raise SchemaViolation(
            f"LLM span {span.span_id} ({span.name!r}, trace {span.trace_id}) names no model "
            "(gen_ai.response.model, gen_ai.request.model, llm.model_name)",
            event_id=event_id,
        )
    reasons = _finish_reasons(span)
    metadata = {
        "trace_id": span.trace_id,
        "span_id": span.span_id,
        "span_name": span.name,
        "convention": family,
        "service.name": span.resource.get("service.name"),
        "provider": _pick(attrs, "gen_ai.provider.name", "gen_ai.system", "llm.provider", "llm.system"),
        "operation": _pick(attrs, "gen_ai.operation.name", "llm.request.type"),
        "input_tokens": _pick(
            attrs, "gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens", "llm.token_count.prompt"
        ),
        "output_tokens": _pick(
            attrs,
            "gen_ai.usage.output_tokens",
            "gen_ai.usage.completion_tokens",
            "llm.token_count.completion",
        ),
        "total_tokens": _pick(attrs, "llm.usage.total_tokens", "llm.token_count.total"),
        "finish_reasons": reasons,
    }
    event: dict[str, Any] = {
        "id": event_id,
        "model": model,
        "output": output_text,
        "metadata": {k: v for k, v in metadata.items() if v is not None},
    }
    if input_text is not None:
        event["input"] = input_text
    usage = _usage(span, reasons, event_id)
    if usage is not None:
        event["usage"] = usage
    if span.end_ns > 0:
        try:
            event["timestamp"] = format_time(span.end_ns / 1e9)
        except (OverflowError, OSError, ValueError):
            raise SchemaViolation(
                f"LLM span {span.span_id}: end time {span.end_ns} is out of range", event_id=event_id
            ) from None
    if category_attribute is not None:
        category = _attribute(span, category_attribute)
        if category is not None and category != "":
            event["category"] = category if isinstance(category, str) else orjson.dumps(category).decode()
    if tag_attributes:
        tags = _tags([_attribute(span, key) for key in tag_attributes])
        if tags:
            event["tags"] = tags
    return event


# -- steps of an agent run (sessions with ``assemble: spans``) ---------------------------------------
#: span kinds that are tool executions: GenAI ``gen_ai.operation.name``, OpenInference, OpenLLMetry
_TOOL_MARKERS = (
    ("gen_ai.operation.name", "execute_tool"),
    ("openinference.span.kind", "TOOL"),
    ("traceloop.span.kind", "tool"),
)
#: span kinds that are an agent's invocation (a sub-agent when below the trace's root span)
_AGENT_MARKERS = (
    ("gen_ai.operation.name", "invoke_agent"),
    ("openinference.span.kind", "AGENT"),
    ("traceloop.span.kind", "agent"),
)
#: characters kept of a step's text (a tool call's arguments and result, an error): what the session's
#: turn keeps of a tool call (streameval.features.sessions.turns.TOOL_TEXT clips again to its own bound)
STEP_TEXT = 2000


def _is_tool(attrs: dict[str, Any]) -> bool:
    return any(attrs.get(key) == value for key, value in _TOOL_MARKERS)


def _is_agent(attrs: dict[str, Any]) -> bool:
    return any(attrs.get(key) == value for key, value in _AGENT_MARKERS)


def _step_text(value: Any) -> str | None:
    if value is None or value == "":
        return None
    text = value if isinstance(value, str) else orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
    return text[:STEP_TEXT]


def _span_error(span: Span) -> str | None:
    """Why a span failed: status error (its message, else the ``exception`` event's message or
    ``error.type``), None when it did not."""
    if span.status_code != 2:
        return None
    exception = next((a for n, a in span.events if n == "exception"), {})
    reason = (
        span.status_message
        or _text(exception.get("exception.message"))
        or _text(span.attributes.get("error.type"))
        or _text(exception.get("exception.type"))
        or "error"
    )
    return reason[:STEP_TEXT]


def _tool_texts(span: Span) -> tuple[str | None, str | None]:
    """A tool call's (arguments, result): GenAI attributes, else the span events the GenAI conventions
    define (``gen_ai.tool.message`` content), else OpenInference ``input.value`` / ``output.value``."""
    attrs = span.attributes
    arguments = _pick(
        attrs, "gen_ai.tool.call.arguments", "tool.parameters", "input.value", "traceloop.entity.input"
    )
    result = _pick(attrs, "gen_ai.tool.call.result", "output.value", "traceloop.entity.output")
    if result is None:
        for name, event_attrs in span.events:
            if name == "gen_ai.tool.message":
                result = event_attrs.get("content") or _event_content(event_attrs).get("content")
    return _step_text(arguments), _step_text(result)


def _agent_texts(span: Span) -> tuple[str | None, str | None]:
    """A sub-agent's (input, output): the last user message of ``gen_ai.input.messages`` and the first
    text of ``gen_ai.output.messages``, else OpenInference ``input.value`` / ``output.value``, else
    OpenLLMetry ``traceloop.entity.input`` / ``output``."""
    attrs = span.attributes
    given = _last_user(_gen_ai_messages(attrs, "gen_ai.input.messages")) or _pick(
        attrs, "input.value", "traceloop.entity.input"
    )
    answer = _first(_gen_ai_messages(attrs, "gen_ai.output.messages")) or _pick(
        attrs, "output.value", "traceloop.entity.output"
    )
    return _step_text(given), _step_text(answer)


def to_step(span: Span) -> dict[str, Any] | None:
    """The step document of a tool span, of a sub-agent's span (an agent invoked below the trace's
    root) or of a trace's root span (an agent run's own steps, which are not evaluated as events); None
    for any other span. Raises :class:`SchemaViolation` when the span has no valid trace and span id."""
    attrs = span.attributes
    tool = _is_tool(attrs)
    agent = not tool and not span.is_root and _is_agent(attrs)
    if not tool and not agent and not span.is_root:
        return None
    if len(span.trace_id) != 32 or len(span.span_id) != 16 or span.span_id == _MISSING_ID:
        raise SchemaViolation(
            f"span {span.name!r} has no valid trace and span id "
            f"(traceId {span.trace_id[:64]!r}, spanId {span.span_id[:64]!r})"
        )
    step: dict[str, Any] = {
        "id": f"{span.trace_id}-{span.span_id}",
        "kind": "tool" if tool else "agent" if agent else "root",
        "name": str(_pick(attrs, "gen_ai.tool.name", "tool.name", "gen_ai.agent.name") or span.name)[:128],
        "t": span.end_ns / 1e9,
        "root": span.is_root,
        "error": _span_error(span),
        "metadata": {
            "trace_id": span.trace_id,
            "span_id": span.span_id,
            "span_name": span.name,
            "service.name": span.resource.get("service.name"),
        },
    }
    if tool:
        step["arguments"], step["result"] = _tool_texts(span)
    elif agent:
        step["arguments"], step["result"] = _agent_texts(span)
    return step


def to_plan(span: Span, only: ToolCallsOnly) -> dict[str, Any]:
    """The ``plan`` step of an LLM span that answered with tool calls only (``only``, raised by
    :func:`to_event` for it): the model, the tool calls it asked for, its input (the last user message).
    Never evaluated: with an ``assemble: spans`` session it is a step of its run, shown as the calls."""
    return {
        "id": f"{span.trace_id}-{span.span_id}",
        "kind": "plan",
        "name": span.name[:128],
        "t": span.end_ns / 1e9,
        "root": span.is_root,
        "error": None,
        "model": only.model[:256] if only.model is not None else None,
        "input": only.input_text,  # clipped by the turn as an LLM turn's input is
        "calls": only.calls,
        "metadata": {
            "trace_id": span.trace_id,
            "span_id": span.span_id,
            "span_name": span.name,
            "service.name": span.resource.get("service.name"),
            "finish_reasons": _finish_reasons(span),
        },
    }
