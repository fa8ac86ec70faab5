"""``streameval worker``: validate config, create topics, connect Redis, run the Faust worker."""

from __future__ import annotations

import asyncio
import logging
import sys
from typing import Any

import faust

from streameval._util import freeze_heap
from streameval.runtime import Runtime, WebServer, WorkerConfig, load_worker_config, prepare, serve_web
from streameval.settings import Settings

from .app import create_app
from .liveness import Lifeline, LifelineWorker

__all__ = ["make_faust_worker", "run_worker"]

log = logging.getLogger(__name__)


def run_worker(settings: Settings) -> None:
    """Run until SIGTERM/SIGINT. Raises :class:`ConfigError` before touching the broker if misconfigured.

    Exits with 0 after a clean stop; ends the process with :data:`~streameval.agents.liveness.EXIT_FATAL`
    when a part of the worker failed for good (one CRITICAL log line names it), and with
    :data:`~streameval.agents.liveness.EXIT_GRACE_EXPIRED` when a stop takes longer than
    ``settings.shutdown_grace_s`` (:mod:`streameval.agents.liveness`). The parts are built by
    :mod:`streameval.runtime`; this module only runs them under Faust.
    """
    config = load_worker_config(settings)  # fail fast, with file and field path
    asyncio.run(prepare(config))  # credentials, topics, Redis mode
    asyncio.set_event_loop(asyncio.new_event_loop())  # asyncio.run closed its loop; Faust needs one

    lifeline = Lifeline(settings.shutdown_grace_s)
    app = create_app(
        config.settings,  # with the label join resolved from the suite file
        lambda: Runtime.build(config),
        close_interval_s=config.suites.windowing.close_interval_s,
        input_topics=config.input_topics,
        lifeline=lifeline,
    )
    if config.api.web_port is not None:
        _serve_web(app, config)
    if config.suites.notify:  # alert notifications: their own consumer group, beside the agent
        _run_notifier(app, config)
    worker = make_faust_worker(app, settings, lifeline)
    freeze_heap()  # everything imported and configured: full collections skip it from now on
    worker.execute_from_commandline()


def make_faust_worker(app: faust.App, settings: Settings, lifeline: Lifeline | None = None) -> faust.Worker:
    lifeline = lifeline if lifeline is not None else Lifeline(settings.shutdown_grace_s)
    worker = LifelineWorker(app, lifeline, loglevel=settings.log_level, stdout=sys.stdout, stderr=sys.stderr)
    # Faust's start-up spinner, at log levels of warn and above, sets the root logger to DEBUG so that it
    # spins on every record: aiokafka then builds a debug record per message sent (~5 % of a worker's CPU,
    # docs/performance.md). A service's log is no terminal: no spinner.
    worker.spinner = None
    return worker


def _serve_web(app: faust.App, config: WorkerConfig) -> None:
    """Serve /health, /ready, /metrics and the API on ``api.web_port`` for the worker's lifetime."""
    state: dict[str, WebServer] = {}

    @app.task  # type: ignore[untyped-decorator]
    async def _web() -> None:
        state["web"] = await serve_web(config)

    @app.on_before_shutdown.connect  # type: ignore[arg-type]  # mode's receiver type (NamedArg) matches no plain def
    async def _stop_web(app: faust.App, **kwargs: Any) -> None:
        if "web" in state:
            await state.pop("web").close()


def _run_notifier(app: faust.App, config: WorkerConfig) -> None:
    """Deliver alerts to the suite file's ``notify:`` channels for the worker's lifetime (a failure of the
    notifier is logged and it starts again; evaluation never waits for it)."""
    from streameval.features.notify._program import run_notifier

    stop = asyncio.Event()

    @app.task  # type: ignore[untyped-decorator]
    async def _notify() -> None:
        await run_notifier(config.settings, config.suites.notify, stop)

    @app.on_before_shutdown.connect  # type: ignore[arg-type]  # mode's receiver type (NamedArg) matches no plain def
    async def _stop_notify(app: faust.App, **kwargs: Any) -> None:
        stop.set()
