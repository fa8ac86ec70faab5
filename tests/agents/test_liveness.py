"""The worker's lifeline and stall watchdog, without a broker (the worker-level tests are in
tests/integration/test_faults_liveness.py)."""

from __future__ import annotations

import threading

import pytest

from streameval import telemetry
from streameval.agents.liveness import EXIT_FATAL, EXIT_GRACE_EXPIRED, Lifeline
from streameval.inflight import StallWatchdog, batch_positions
from streameval.pipeline import Source


def test_a_fatal_failure_logs_one_line_and_exits_70(caplog: pytest.LogCaptureFixture) -> None:
    exits: list[int] = []
    lifeline = Lifeline(20, exit=exits.append)
    lifeline.fatal("publishing results failed", RuntimeError("broker gone"))
    lifeline.fatal("something later", RuntimeError("ignored"))  # only the first cause counts
    assert exits == [EXIT_FATAL]
    lines = [r.getMessage() for r in caplog.records if r.levelname == "CRITICAL"]
    assert lines == ["worker stopping (exit 70): publishing results failed: RuntimeError: broker gone"]


def test_a_stop_that_outlasts_the_grace_period_ends_the_process() -> None:
    done = threading.Event()
    exits: list[int] = []

    def exit_(code: int) -> None:
        exits.append(code)
        done.set()

    lifeline = Lifeline(0.05, exit=exit_)
    lifeline.begin_stop(EXIT_GRACE_EXPIRED)
    lifeline.begin_stop(EXIT_GRACE_EXPIRED)  # a second signal does not start a second timer
    assert done.wait(10)
    assert exits == [EXIT_GRACE_EXPIRED] and lifeline.stopping


def test_batch_positions_give_each_partitions_offset_range() -> None:
    batch = [(b"", Source("t", 0, 5)), (b"", Source("t", 1, 9)), (b"", Source("t", 0, 7)), (b"", Source())]
    assert batch_positions(batch) == {("t", 0): (5, 7), ("t", 1): (9, 9)}


def test_watchdog_reports_the_oldest_batch_per_partition_and_the_stall(
    caplog: pytest.LogCaptureFixture,
) -> None:
    now = [100.0]
    watchdog = StallWatchdog(10, clock=lambda: now[0])
    pending = [(95.0, {("wt", 0): (0, 9)}), (99.0, {("wt", 0): (10, 19), ("wt", 1): (0, 4)})]
    assert watchdog.check(pending) is None
    assert telemetry.OLDEST_BATCH_AGE.labels("wt", "0")._value.get() == 5.0
    assert telemetry.OLDEST_BATCH_AGE.labels("wt", "1")._value.get() == 1.0
    assert telemetry.stall() is None
    now[0] = 106.0
    stall = watchdog.check(pending)
    assert stall is not None and "wt[0] offsets 0-9 taken 11 s ago" in stall and "wt[1]" not in stall
    assert telemetry.stall() == stall
    watchdog.check(pending)  # the same stall is logged once
    assert sum("stall:" in r.getMessage() for r in caplog.records) == 1
    assert watchdog.check([]) is None  # published: over, and the ages drop to 0
    assert telemetry.stall() is None
    assert telemetry.OLDEST_BATCH_AGE.labels("wt", "0")._value.get() == 0.0
    assert any("stall over" in r.getMessage() for r in caplog.records)
