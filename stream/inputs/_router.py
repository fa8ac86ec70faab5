"""Which decoder reads which topic (a batch of messages to outcomes is :mod:`streameval.batch`)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import orjson

from .. import telemetry
from ..envelope import Source
from ..errors import ConfigError, ConfigIssue, EventError, SchemaViolation
from ..outputs import OUTPUTS
from ..strictjson import DEFAULT_MAX_EVENT_DEPTH
from ._base import Decoder, Item, NativeDecoder, check_size
from ._config import InputConfig, JsonInput, NativeInput, OtlpInput
from ._genai import ToolCallsOnly, to_event, to_plan, to_step
from ._json_map import JsonDecoder
from ._otlp import Span, spans_from_json, spans_from_proto

log = logging.getLogger(__name__)

__all__ = ["Inputs", "OtlpDecoder", "build_decoder", "check_input_topics"]


class OtlpDecoder:
    """One request event per LLM span of an OTLP trace export; other spans are skipped and counted.

    With ``steps`` (the suite file has an ``assemble: spans`` session), tool spans, sub-agent spans and
    each trace's root span are also handed on, as step items (:attr:`Item.step`): steps of the trace's
    agent run, never evaluated as events; so is an LLM span that answered with tool calls only (a
    ``plan`` step; without ``steps`` it is a ``schema`` dead letter naming the tools). A root span that
    is also an LLM span gives both (the end step's id ends in ``:end``).
    """

    def __init__(
        self, spec: OtlpInput, *, max_depth: int = DEFAULT_MAX_EVENT_DEPTH, steps: bool = False
    ) -> None:
        self.spec = spec
        self.steps = steps
        self.format: str = spec.format
        self.max_depth = max_depth
        self._tags = tuple(spec.tag_attributes)

    def spans(self, raw: bytes) -> list[Span]:
        if self.format == "otlp_proto":
            check_size(raw, self.spec.max_message_bytes)
            return spans_from_proto(raw)
        return spans_from_json(raw, max_bytes=self.spec.max_message_bytes, max_depth=self.max_depth)

    def decode(self, raw: bytes, source: Source) -> list[Item]:
        try:
            spans = self.spans(raw)
        except EventError as exc:
            return [Item(raw, source, exc)]
        items: list[Item] = []
        skipped = 0
        llm = 0
        for span in spans:
            plan = None
            try:
                try:
                    event = to_event(
                        span, category_attribute=self.spec.category_attribute, tag_attributes=self._tags
                    )
                except ToolCallsOnly as only:
                    if not self.steps:
                        raise
                    event, plan = None, to_plan(span, only)
                step = to_step(span) if self.steps else None
            except SchemaViolation as exc:
                items.append(
                    Item(
                        orjson.dumps(span.document()),
                        replace(source, item=f"{span.trace_id}-{span.span_id}"),
                        exc,
                    )
                )
                continue
            if event is not None:
                llm += 1
                items.append(Item(orjson.dumps(event), replace(source, item=event["id"])))
            elif plan is not None:
                llm += 1
                items.append(Item(orjson.dumps(plan), replace(source, item=plan["id"]), step=True))
            if step is not None:
                if event is not None or plan is not None:
                    step["id"] += ":end"
                items.append(Item(orjson.dumps(step), replace(source, item=step["id"]), step=True))
            elif event is None and plan is None:
                skipped += 1
        telemetry.observe_spans(self.spec.topic, llm=llm, skipped=skipped)
        return items


def build_decoder(
    spec: InputConfig, *, max_depth: int = DEFAULT_MAX_EVENT_DEPTH, steps: bool = False
) -> Decoder:
    """The decoder of one input; ``steps``: OTLP inputs also hand on agent-run steps (:class:`OtlpDecoder`)."""
    if isinstance(spec, JsonInput):
        return JsonDecoder(spec, max_depth=max_depth)
    if isinstance(spec, OtlpInput):
        return OtlpDecoder(spec, max_depth=max_depth, steps=steps)
    assert isinstance(spec, NativeInput)
    return NativeDecoder()


class Inputs:
    """The decoder of each input topic; messages from any other topic are read as native events."""

    def __init__(
        self,
        specs: Sequence[InputConfig] = (),
        *,
        max_depth: int = DEFAULT_MAX_EVENT_DEPTH,
        steps: bool = False,
    ) -> None:
        self.specs = tuple(specs)
        self._decoders: dict[str | None, Decoder] = {
            s.topic: build_decoder(s, max_depth=max_depth, steps=steps) for s in specs
        }
        self._native = NativeDecoder()

    def topics(self, default: str) -> list[str]:
        """The topics to subscribe to: the configured inputs, else ``default`` (native events)."""
        return [s.topic for s in self.specs] or [default]

    @property
    def decodes(self) -> bool:
        """True when some input is not native (its messages need decoding into request events)."""
        return any(spec.format != "native" for spec in self.specs)

    def decoder(self, topic: str | None) -> Decoder:
        return self._decoders.get(topic, self._native)

    def expand(self, batch: Sequence[tuple[bytes, Source]]) -> list[Item]:
        """The request events in a batch of messages, in order (a message may hold none or several)."""
        if not self._decoders:
            return [Item(raw, source) for raw, source in batch]
        items: list[Item] = []
        for raw, source in batch:
            try:
                items.extend(self.decoder(source.topic).decode(raw, source))
            except Exception as exc:  # a bug of ours must cost only this message: an "internal" dead letter
                log.exception("decoding a message from %s failed", source)
                items.append(Item(raw, source, exc))
        return items


def check_input_topics(specs: Sequence[InputConfig], settings: Any, *, file: str) -> None:
    """Raise :class:`ConfigError` when an input reads a topic the worker writes (it would read its own output)."""
    outputs = {getattr(settings, output.setting): output.env for output in OUTPUTS}
    issues = [
        ConfigIssue(
            file=file,
            path=f"inputs[{i}].topic",
            message=f"{spec.topic!r} is the worker's output topic "
            f"({outputs[spec.topic]}); an input cannot read it",
        )
        for i, spec in enumerate(specs)
        if spec.topic in outputs
    ]
    if issues:
        raise ConfigError(issues)
