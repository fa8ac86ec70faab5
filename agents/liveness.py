"""A worker that cannot make progress exits; a stopping worker stops within its grace period.

Faust restarts a crashed agent in place, but a restarted ``noack_take`` agent can leave the crashed
one's take buffer registered on the stream: every later message waits on a buffer nobody drains, so
the process lives on, consumes nothing and answers /health (docs/reliability.md). And a graceful
Faust stop after such a failure is no better: it waits for acks that will never come, and once a
take is closed its stream acks (so commits) whatever still flows through it, unprocessed. So a
failure of the evaluating agent, its publisher or the window closer's set-up is *fatal*: one
CRITICAL line naming the cause, then the process ends at once with status :data:`EXIT_FATAL`,
committing nothing more. An orchestrator restarts it; everything not yet committed is read again
(results already recorded in Redis are re-published, not re-counted).

A stop by SIGTERM/SIGINT is graceful (in-flight batches are published and their offsets committed),
but bounded: past ``grace_s`` a thread ends the process with :data:`EXIT_GRACE_EXPIRED`, so a
wedged shutdown cannot hold it.
"""

from __future__ import annotations

import functools
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any

import faust

__all__ = ["EXIT_FATAL", "EXIT_GRACE_EXPIRED", "Lifeline", "LifelineWorker"]

log = logging.getLogger(__name__)

EXIT_FATAL = 70  # EX_SOFTWARE: the worker stopped itself because a part of it failed
EXIT_GRACE_EXPIRED = 75  # the stop took longer than the grace period; the process was ended anyway


class Lifeline:
    """Knows whether the worker is stopping and why; turns a fatal failure into an exit."""

    def __init__(self, grace_s: float, *, exit: Callable[[int], object] = os._exit) -> None:
        self.grace_s = grace_s
        self._exit = exit
        self.cause: str | None = None  # set by the first fatal failure
        self.stopping = False
        self._timer: threading.Timer | None = None

    def fatal(self, what: str, exc: BaseException | None = None) -> None:
        """A part of the worker failed for good: log it in one line and end the process (:data:`EXIT_FATAL`)."""
        if self.cause is not None:
            return
        text = what if exc is None else f"{what}: {type(exc).__name__}: {exc}"
        self.cause = " ".join(text.split())[:2000]  # one line, whatever the exception's message holds
        log.critical("worker stopping (exit %d): %s", EXIT_FATAL, self.cause)
        self.stopping = True
        _flush()
        self._exit(EXIT_FATAL)

    def begin_stop(self, code: int) -> None:
        """The worker is stopping: from now on it has ``grace_s`` seconds before the process ends."""
        self.stopping = True
        if self._timer is None:
            self._timer = threading.Timer(self.grace_s, self._expire, args=(code,))
            self._timer.daemon = True
            self._timer.start()

    def _expire(self, code: int) -> None:
        log.critical(
            "worker did not stop within %.0f s of the signal; exiting now (exit %d)", self.grace_s, code
        )
        _flush()
        self._exit(code)


def _flush() -> None:
    for handler in logging.getLogger().handlers:
        try:
            handler.flush()
        except Exception:  # a closed stream must not keep the process alive
            pass
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass


class LifelineWorker(faust.Worker):
    """Faust's worker whose SIGTERM/SIGINT start the lifeline's grace period.

    The signals get Python-level handlers instead of the event loop's: the grace timer starts when
    the signal arrives even if the event loop is busy (a loop handler runs only when the loop gets to
    it), and Faust's own stop is then scheduled on the loop.
    """

    def __init__(self, app: faust.App, lifeline: Lifeline, **kwargs: Any) -> None:
        super().__init__(app, **kwargs)
        self.lifeline = lifeline

    def _install_signal_handlers_unix(self) -> None:
        super()._install_signal_handlers_unix()
        for signum, stop in ((signal.SIGTERM, self._on_sigterm), (signal.SIGINT, self._on_sigint)):
            self.loop.remove_signal_handler(signum)
            signal.signal(signum, functools.partial(self._signalled, stop))

    def _signalled(self, stop: Callable[[], None], *_signal: object) -> None:
        """A signal handler (called with the signal number and frame, which it does not need)."""
        self.lifeline.begin_stop(EXIT_GRACE_EXPIRED)
        self.loop.call_soon_threadsafe(stop)

    def on_worker_shutdown(self) -> None:
        # A Faust service that crashed (e.g. the consumer on a failed offset commit) stops the worker;
        # say so in our one line and exit like any other fatal failure, not with Faust's status 1.
        if self.crash_reason is not None:
            self.lifeline.fatal("a Faust service crashed", self.crash_reason)
        super().on_worker_shutdown()
