"""The evaluator contract and the registry that resolves evaluator names.

An evaluator is a class registered under a name, with a pydantic ``Params`` model. It is built once
at config load (patterns compiled, schemas checked, clients created) and then called per event.
Every evaluator returns the same shape (the evaluator-module spec): ``passed``, ``score`` in [0, 1],
``reason``, optional ``details``. ``counters`` are numbers the store adds to this evaluator's window aggregate
(e.g. confusion-matrix cells), so evaluators can feed window statistics without knowing Redis.

Sync evaluators (rules) implement :meth:`Evaluator.evaluate`; one that is cheaper per batch than per
event (embeddings) also implements :meth:`Evaluator.prepare`, which the pipeline calls with a batch's
events of the suite before it evaluates each. :meth:`Evaluator.wants` lets an evaluator sample events:
an event it does not want gets no result from it (not a failing one). Evaluators that wait on I/O (judges,
sandboxes) set ``is_async = True`` and implement :meth:`Evaluator.aevaluate`, and may hold resources
opened in :meth:`start` and released in :meth:`close`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict

from .._util import unknown_name
from ..errors import EvaluatorError
from ..models import RequestEvent

__all__ = [
    "Evaluator",
    "MissingField",
    "NoParams",
    "Params",
    "Score",
    "build_evaluator",
    "evaluator_class",
    "evaluator_names",
    "register",
    "unregister",
]


class Params(BaseModel):
    """Base of every evaluator's params model: unknown keys are config errors."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class NoParams(Params):
    pass


@dataclass(slots=True)
class Score:
    """What an evaluator says about one event."""

    score: float
    passed: bool
    reason: str | None = None
    details: dict[str, Any] | None = None
    counters: dict[str, float] | None = None
    #: the definition's version, for evaluators whose definition changes at run time (``registered``)
    version: str | None = None


class MissingField(EvaluatorError):
    """The event lacks a field this evaluator needs (e.g. no expected answer)."""

    code = "missing_field"


#: the params base class under another name: inside :class:`Evaluator`, ``Params`` is the class attribute
_ParamsModel = Params


class Evaluator:
    """Base class of every evaluator. Subclasses set ``name`` and ``Params`` and are ``@register``-ed."""

    name: ClassVar[str]
    Params: ClassVar[type[Params]] = NoParams
    is_async: ClassVar[bool] = False
    #: a one-line description for docs, the CLI and the registry API
    summary: ClassVar[str] = ""

    def __init__(self, params: _ParamsModel) -> None:
        self.params = params

    def prepare(self, events: Sequence[RequestEvent]) -> None:
        """Work for a batch at once, before :meth:`evaluate` is called on each of ``events`` (optional)."""

    def wants(self, event: RequestEvent) -> bool:
        """False to leave ``event`` out (sampling); the result then has no entry for this evaluator."""
        return True

    def evaluate(self, event: RequestEvent) -> Score:
        raise NotImplementedError(f"{type(self).__name__} is async; call aevaluate()")

    async def aevaluate(self, event: RequestEvent) -> Score:
        return self.evaluate(event)

    async def start(self) -> None:
        """Open resources (pools, clients). Called once before the first event."""

    async def close(self) -> None:
        """Release what :meth:`start` opened."""

    @staticmethod
    def targets(event: RequestEvent) -> list[str]:
        """The texts to compare the output with; raises :class:`MissingField` when there are none."""
        targets = event.targets()
        if not targets:
            raise MissingField("the event has no expected answer or references to compare with")
        return targets


_REGISTRY: dict[str, type[Evaluator]] = {}


def register(cls: type[Evaluator]) -> type[Evaluator]:
    """Class decorator: make ``cls`` available in suites under ``cls.name``."""
    name = cls.name
    if name in _REGISTRY and _REGISTRY[name] is not cls:
        raise ValueError(f"evaluator name {name!r} registered twice")
    _REGISTRY[name] = cls
    return cls


def unregister(name: str) -> None:
    """Remove ``name`` from the registry (tests, and evaluators defined at run time)."""
    _REGISTRY.pop(name, None)


def evaluator_names() -> list[str]:
    return sorted(_REGISTRY)


def evaluator_class(name: str) -> type[Evaluator]:
    """The class registered under ``name``; ``KeyError`` lists the valid names."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(unknown_name("evaluator", name, evaluator_names())) from None


def build_evaluator(name: str, params: dict[str, Any] | None = None) -> Evaluator:
    """Validate ``params`` and build the evaluator. Raises ``KeyError`` or pydantic ``ValidationError``."""
    cls = evaluator_class(name)
    return cls(cls.Params.model_validate(params or {}))
