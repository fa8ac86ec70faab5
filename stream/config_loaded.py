"""The loaded suite file: its suites with their evaluators built, its sessions, and the routing table that
gives each event its suite (explicit suite, first match, default), for the live suites and each position
of their shadow candidates."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ._util import unknown_name
from .alerts import AlertRule
from .config_models import BoundEvaluator, SessionConfig, SuiteConfig
from .config_versions import suite_definition
from .errors import UnroutableEvent
from .features.labels import FeedbackInput
from .features.notify._config import ChannelConfig
from .features.redact import RedactConfig
from .features.review import ReviewConfig
from .features.segments import Dimension
from .features.sessions.paths import EventPath
from .features.usage import BudgetConfig, PricesConfig
from .inputs import InputConfig
from .judges import JudgeConfig, sampled
from .models import RequestEvent
from .versioning import definition_hash
from .windowing import WindowingConfig

__all__ = [
    "LoadedConfig",
    "Session",
    "Shadow",
    "ShadowRouting",
    "Suite",
    "Suites",
    "shadow_routings",
]


@dataclass(frozen=True)
class Suite:
    """A validated suite with its evaluators built (also a session's scoring: :class:`Session`); ``version``
    is its definition's hash (docs/versions.md)."""

    config: SuiteConfig | SessionConfig
    evaluators: tuple[BoundEvaluator, ...]
    version: str = ""
    definition: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    shadows: tuple[Shadow, ...] = ()

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def is_default(self) -> bool:
        """The suite for events no other suite matches (never a session's scoring)."""
        return isinstance(self.config, SuiteConfig) and self.config.default

    @property
    def label(self) -> str | None:
        return self.config.label if isinstance(self.config, SuiteConfig) else None


@dataclass(frozen=True)
class Shadow:
    """A shadow candidate, built: its suite (the live suite's name, its own version) and its sample rate."""

    suite: Suite
    sample_rate: float = 1.0


@dataclass(frozen=True)
class Session:
    """A validated ``sessions:`` entry: its paths compiled, its whole-thread scoring built as a suite
    (never routed to: events reach it only as turns, streameval.features.sessions)."""

    config: SessionConfig
    suite: Suite
    key: EventPath
    end: EventPath | None

    @property
    def name(self) -> str:
        return self.config.name

    def accepts(self, event: RequestEvent) -> bool:
        return self.config.match is None or self.config.match.accepts(event)


class LoadedConfig:
    """The loaded suite file: its suites with their evaluators bound (the routing table: explicit suite,
    first match, default), and its judges, alerts, windowing and inputs."""

    def __init__(
        self,
        suites: Sequence[Suite],
        judges: Sequence[JudgeConfig] = (),
        alerts: Sequence[AlertRule] = (),
        windowing: WindowingConfig | None = None,
        inputs: Sequence[InputConfig] = (),
        sessions: Sequence[Session] = (),
    ) -> None:
        self.all = tuple(suites)
        self.sessions = tuple(sessions)  # conversations judged as a whole (streameval.features.sessions)
        #: some session assembles agent runs from spans: OTLP decoders hand on tool and root spans as steps
        self.assembles_spans = any(s.config.assemble == "spans" for s in self.sessions)
        self.inputs = tuple(inputs)  # the topics the worker reads and their formats (streameval.inputs)
        self.judges = tuple(judges)  # the config's judges; the pipeline opens their clients
        self.alerts = tuple(alerts)  # checked on each closed window (streameval.windows)
        self.windowing = windowing or WindowingConfig()
        self.shadow_judges: tuple[JudgeConfig, ...] = ()  # judges only shadows use (add_shadow_file)
        self.feedback = FeedbackInput()  # the feedback topic's format (streameval.features.labels)
        self.feedback_configured = False  # the suite file has a ``feedback:`` section (labels are expected)
        self.review: ReviewConfig | None = None  # the review queue (streameval.features.review); None: off
        self.redact: RedactConfig | None = None  # the top-level redact: block (docs/redact.md); None: none
        self.notify: tuple[ChannelConfig, ...] = ()  # alert channels (streameval.features.notify); (): none
        self.prices: PricesConfig | None = None  # the prices table (streameval.features.usage); None: none
        self.budgets: tuple[BudgetConfig, ...] = ()  # spend budgets (streameval.features.usage)
        self.segments: tuple[Dimension, ...] = ()  # slice dimensions (streameval.features.segments); (): none
        self.by_name = {s.name: s for s in suites}
        self._matching = [s for s in suites if s.config.match is not None and not s.is_default]
        self._default = next((s for s in suites if s.is_default), None)
        # the suite of each (category, model, tags) seen: the globs are matched once, not per event (~2 % of
        # a demo worker); bounded, as models and tags come from producers
        self._routes: dict[tuple[str | None, str, tuple[str, ...]], Suite] = {}

    def _remember(self, key: tuple[str | None, str, tuple[str, ...]], suite: Suite) -> Suite:
        if len(self._routes) >= 4096:
            self._routes.clear()
        self._routes[key] = suite
        return suite

    def resolve_registry(self, versions: Mapping[str, str | None]) -> list[str]:
        """Put the registered evaluators' versions (reference, an id or name -> ``id@n``) into the versions of
        the suites that use them; returns the names of the suites whose version changed. Called when the
        worker's registry loads and after each registry change (never per event)."""
        changed = []
        for suite in self.scoring:
            if not any(spec.evaluator == "registered" for spec in suite.config.evaluators):
                continue
            definition = suite_definition(suite.config, suite.evaluators, self.judges, versions)
            version = definition_hash(definition)
            if version != suite.version:
                object.__setattr__(suite, "version", version)  # the one place a Suite changes: its registry
                object.__setattr__(suite, "definition", definition)
                changed.append(suite.name)
        return changed

    def route(self, event: RequestEvent) -> Suite:
        if event.suite is not None:
            try:
                return self.by_name[event.suite]
            except KeyError:
                raise UnroutableEvent(
                    unknown_name("suite", event.suite, self.by_name),
                    kind="unknown_suite",
                    event_id=event.id,
                ) from None
        key = (event.category, event.model, tuple(event.tags))
        found = self._routes.get(key)
        if found is not None:
            return found
        for suite in self._matching:
            assert suite.config.match is not None
            if suite.config.match.accepts(event):
                return self._remember(key, suite)
        if self._default is not None:
            return self._remember(key, self._default)
        raise UnroutableEvent(
            f"no suite matches model={event.model!r} category={event.category!r} tags={event.tags!r} "
            "and no default suite is configured",
            kind="no_suite",
            event_id=event.id,
        )

    @property
    def scoring(self) -> tuple[Suite, ...]:
        """Every suite and every session's scoring suite (what the pipeline can evaluate)."""
        return self.all + tuple(s.suite for s in self.sessions)

    async def start(self) -> None:
        for suite in self.scoring:
            for bound in suite.evaluators:
                await bound.evaluator.start()

    async def close(self) -> None:
        for suite in self.scoring:
            for bound in suite.evaluators:
                await bound.evaluator.close()


class ShadowRouting(LoadedConfig):
    """The ``index``-th shadow candidate of each suite, routed as the live suites route (docs/versions.md).

    ``route`` raises :class:`UnroutableEvent` for an event whose live suite has no such candidate or whose
    id is outside the candidate's sample: the shadow pipeline's dead letters are dropped, never published.
    """

    def __init__(self, live: LoadedConfig, index: int) -> None:
        chosen = [s.shadows[index].suite for s in live.all if len(s.shadows) > index]
        judges = {j.name: j for j in (*live.judges, *live.shadow_judges)}
        super().__init__(chosen, tuple(judges.values()), (), live.windowing, live.inputs)
        self.live = live
        self.index = index

    def route(self, event: RequestEvent) -> Suite:
        suite = self.live.route(event)
        if len(suite.shadows) <= self.index:
            raise UnroutableEvent(
                f"suite {suite.name!r} has no shadow {self.index}", kind="no_suite", event_id=event.id
            )
        shadow = suite.shadows[self.index]
        if not sampled("shadow:" + event.id, shadow.sample_rate):
            raise UnroutableEvent("not in the shadow's sample", kind="no_suite", event_id=event.id)
        return shadow.suite


def shadow_routings(suites: LoadedConfig) -> list[ShadowRouting]:
    """One routing per candidate position (the first candidates of every suite, the second ones, ...)."""
    return [ShadowRouting(suites, k) for k in range(max((len(s.shadows) for s in suites.all), default=0))]


#: the former name of :class:`LoadedConfig` (kept: ``streameval.Suites``)
Suites = LoadedConfig
