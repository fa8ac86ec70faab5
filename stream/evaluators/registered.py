"""``registered``: a suite step that runs a custom evaluator from the registry (docs/api.md).

.. code-block:: yaml

    evaluators:
      - {evaluator: registered, name: min_length, params: {name: min_length}}
      - {evaluator: registered, params: {id: 0b6c...}}

The definition is read from the worker's :class:`~streameval.registry.LiveRegistry` on every event,
so an update through the API takes effect without a restart; each result records the version it
used (``version`` = ``{id}@{n}``). A reference that is not (or no longer) registered fails the step
with error ``not_found`` (the evaluator-module spec's code 503001); the stream goes on. Offline runs (no
Redis) cannot use it: ``start()`` raises :class:`~streameval.errors.ConfigError` (exit code 2).
"""

from __future__ import annotations

import asyncio

from pydantic import Field, model_validator

from ..errors import ConfigError, EvaluatorError
from ..models import RequestEvent
from ..registry import EvaluatorRecord, LiveRegistry, live_registry
from ..sandbox import CodeEvaluator, CodeParams
from ._base import Evaluator, Params, Score, register
from ._base import Params as ParamsBase

__all__ = ["RegisteredEvaluator", "RegisteredNotFound", "code_params"]


class RegisteredNotFound(EvaluatorError):
    """The evaluator-module spec §9: 503001 — the evaluator does not exist."""

    code = "not_found"


class RegisteredParams(Params):
    id: str | None = Field(default=None, min_length=1, description="the registered evaluator's id")
    name: str | None = Field(default=None, min_length=1, description="or its name (ids survive renames)")

    @model_validator(mode="after")
    def _one(self) -> RegisteredParams:
        if (self.id is None) == (self.name is None):
            raise ValueError("give exactly one of 'id' or 'name'")
        return self


def code_params(record: EvaluatorRecord) -> CodeParams:
    """The ``code`` evaluator params of a registry record (compiles the code: a blocking check)."""
    return CodeParams(
        language=record.config.language, code=record.config.code, timeout_ms=record.config.timeout
    )


@register
class RegisteredEvaluator(Evaluator):
    name = "registered"
    summary = "a custom evaluator from the registry API, by id or name; updates apply without a restart"
    Params = RegisteredParams
    params: RegisteredParams
    is_async = True

    def __init__(self, params: ParamsBase) -> None:
        super().__init__(params)
        self._registry: LiveRegistry | None = None
        self._built: tuple[str, CodeEvaluator] | None = None  # (version tag, started evaluator)
        self._lock = asyncio.Lock()

    async def start(self) -> None:
        self._registry = live_registry()
        if self._registry is None:
            raise ConfigError(
                "'registered' evaluators need the stream worker's registry (Redis); "
                "they cannot run offline — copy the code into a 'code' step instead"
            )

    async def close(self) -> None:
        if self._built is not None:
            await self._built[1].close()
            self._built = None

    async def _evaluator(self, record: EvaluatorRecord) -> CodeEvaluator:
        async with self._lock:
            if self._built is None or self._built[0] != record.version_tag:
                # compiling Node code spawns node: keep it off the event loop
                params = await asyncio.to_thread(code_params, record)
                fresh = CodeEvaluator(params)
                await fresh.start()
                old, self._built = self._built, (record.version_tag, fresh)
                if old is not None:
                    await old[1].close()
            return self._built[1]

    async def aevaluate(self, event: RequestEvent) -> Score:
        if self._registry is None:
            raise EvaluatorError("the registered evaluator was not started")
        record = self._registry.get(evaluator_id=self.params.id, name=self.params.name)
        if record is None:
            ref = f"id {self.params.id!r}" if self.params.id else f"name {self.params.name!r}"
            raise RegisteredNotFound(f"no registered evaluator with {ref}")
        try:
            evaluator = await self._evaluator(record)
        except ValueError as exc:  # stored code that no longer compiles here (e.g. node missing)
            raise EvaluatorError(f"registered evaluator {record.name!r} cannot be built: {exc}") from None
        score = await evaluator.aevaluate(event)
        score.version = record.version_tag
        return score
