"""A clock and a sink for the window closer's tests: the closer's time set by hand (its own and Redis's), and
every message it publishes kept in order."""

from __future__ import annotations

import asyncio

import orjson
from jsonschema import Draft202012Validator

from streameval import schemas
from streameval.models import Aggregate, Alert
from streameval.outputs import Publish


class Clock:
    """The closer's clock (``now``) and the Redis clock it reads (``redis``): both the same, moved by hand."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    async def redis(self) -> float:
        return self.now


class Sink:
    """A send that keeps each published message (kind, value), yielding first as a real send would."""

    def __init__(self) -> None:
        self.messages: list[tuple[str, bytes]] = []

    async def __call__(self, message: Publish) -> None:
        await asyncio.sleep(0)  # let the other closer run in between, as a real send would
        self.messages.append((message.kind, message.value))

    def check_contracts(self) -> None:
        """Every published message is valid against its JSON Schema (what consumers validate)."""
        validators = {
            "aggregate": Draft202012Validator(schemas.load("aggregate")),
            "alert": Draft202012Validator(schemas.load("alert")),
        }
        for kind, value in self.messages:
            errors = [e.message for e in validators[kind].iter_errors(orjson.loads(value))]
            assert not errors, (kind, errors)

    def aggregates(self) -> list[Aggregate]:
        return [Aggregate.model_validate_json(v) for k, v in self.messages if k == "aggregate"]

    def alerts(self) -> list[Alert]:
        return [Alert.model_validate_json(v) for k, v in self.messages if k == "alert"]
