"""What every input format shares: the unit a decoder hands on (:class:`Item`) and the native format."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from ..envelope import Source
from ..errors import EventTooLarge

__all__ = ["Decoder", "Item", "NativeDecoder", "check_size"]


@dataclass(frozen=True, slots=True)
class Item:
    """One request event made from a message, or the reason it could not be made.

    ``raw`` is a native request event (JSON) when ``error`` is None; otherwise the bytes the dead letter
    carries (the message itself, or the one span at fault). ``source.item`` tells apart several events
    of one message (an OTLP export's spans), so each counts once when the message is delivered again.
    """

    raw: bytes
    source: Source
    error: Exception | None = (
        None  # an EventError; anything else is a bug of ours (an "internal" dead letter)
    )
    #: ``raw`` is the step document of an agent run (a tool or root span: :func:`..._genai.to_step`), not a
    #: request event: it is never evaluated, only appended to the runs of ``assemble: spans`` sessions
    step: bool = False


class Decoder(Protocol):
    format: str

    def decode(self, raw: bytes, source: Source) -> list[Item]:
        """The request events in one message, in order. Never raises for a bad message."""
        ...


def check_size(raw: bytes, limit: int) -> None:
    if len(raw) > limit:
        raise EventTooLarge(f"message is {len(raw)} bytes; the input's max_message_bytes is {limit}")


class NativeDecoder:
    """The request event itself (schemas/request-event.v1.json); the pipeline checks it."""

    format = "native"

    def decode(self, raw: bytes, source: Source) -> list[Item]:
        return [Item(raw, source)]
