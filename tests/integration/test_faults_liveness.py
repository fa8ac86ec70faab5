"""No zombie worker: a failure at any stage ends in resumption or in a non-zero exit, never a live
process that consumes nothing; SIGTERM stops a wedged worker within its grace period.

Faults are injected into real worker processes on the real broker and Redis by
``tests/integration/faultinject/sitecustomize.py`` (``STREAMEVAL_TEST_FAULT=<stage>``), on the batch
holding the marker event. Stages that cannot be recovered in place must exit with status 70 and one
CRITICAL line naming the cause; a new worker in the same consumer group (the orchestrator's restart)
must then publish every event, the marker's included: nothing unpublished was acked.
"""

from __future__ import annotations

import asyncio
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from _support import raw_event, wait_until

from streameval.embedded import EmbeddedBroker, free_port
from streameval.kafka_io import ensure_topics, produce

from .faults_support import LiveReader, write_config

pytestmark = [pytest.mark.integration, pytest.mark.faults]

FAULTINJECT = str(Path(__file__).resolve().parent / "faultinject")
EXIT_FATAL, EXIT_GRACE_EXPIRED = 70, 75


def events(run: str, start: int, n: int) -> list[bytes]:
    return [raw_event(id=f"{run}-{i}", output="Paris", expected="Paris") for i in range(start, start + n)]


def marker(run: str) -> bytes:
    return raw_event(id=f"{run}-INJECT-FAULT", output="Paris", expected="Paris")


def faulty(stage: str, **env: str) -> dict[str, str]:
    return {
        "PYTHONPATH": FAULTINJECT,
        "STREAMEVAL_TEST_FAULT": stage,
        "STREAMEVAL_LOG_LEVEL": "info",
        "STREAMEVAL_BROKER_SESSION_TIMEOUT": "6",
        **env,
    }


WorkerProcess = Any  # tests/conftest.py's WorkerProcess


def wait_exit(worker: WorkerProcess, timeout: float) -> int:
    try:
        return worker.proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        raise AssertionError(
            f"the worker is still running {timeout:.0f} s after the fault:\n{worker.log()[-3000:]}"
        ) from None


def critical_lines(worker: WorkerProcess) -> list[str]:
    return [line for line in worker.log().splitlines() if "worker stopping (exit 70)" in line]


@pytest.mark.parametrize(
    ("stage", "cause"),
    [
        ("evaluate", "RuntimeError: injected evaluate fault"),
        ("record", "ResponseError: OOM command not allowed"),
        ("publish", "KafkaTimeoutError"),
    ],
)
async def test_a_fatal_fault_exits_and_a_restart_loses_nothing(
    stage: str,
    cause: str,
    broker: EmbeddedBroker,
    start_worker: Callable[..., Any],
    topics: dict[str, str],
    tmp_path: Path,
) -> None:
    run = f"{stage}-{uuid.uuid4().hex[:6]}"
    await ensure_topics(broker.bootstrap, topics.values(), partitions=1)
    config, app_id = write_config(tmp_path), f"live-{uuid.uuid4().hex[:8]}"
    stream = [*events(run, 0, 50), marker(run), *events(run, 50, 50)]
    expected = {f"{run}-{i}".encode() for i in range(100)} | {f"{run}-INJECT-FAULT".encode()}
    async with LiveReader(broker.bootstrap, topics["results"], topics["deadletter"]) as reader:
        first = start_worker(config, app_id=app_id, **faulty(stage))
        await produce(broker.bootstrap, topics["requests"], stream)
        code = await asyncio.to_thread(wait_exit, first, 90)
        assert code == EXIT_FATAL, first.log()[-3000:]
        lines = critical_lines(first)
        assert len(lines) == 1 and cause in lines[0], first.log()[-3000:]
        assert f"{run}-INJECT-FAULT".encode() not in reader.result_ids  # its batch was not published
        second = start_worker(
            config, app_id=app_id, STREAMEVAL_BROKER_SESSION_TIMEOUT="6"
        )  # the restart, no fault
        await reader.wait_for(
            lambda: expected <= reader.result_ids, timeout=90, what="every result after the restart"
        )
    assert second.stop() == 0


async def test_a_decode_fault_costs_one_dead_letter_and_the_worker_goes_on(
    broker: EmbeddedBroker,
    start_worker: Callable[..., Any],
    topics: dict[str, str],
    tmp_path: Path,
) -> None:
    run = f"decode-{uuid.uuid4().hex[:6]}"
    await ensure_topics(broker.bootstrap, topics.values(), partitions=1)
    worker = start_worker(write_config(tmp_path), **faulty("decode"))
    async with LiveReader(broker.bootstrap, topics["results"], topics["deadletter"]) as reader:
        await produce(
            broker.bootstrap, topics["requests"], [*events(run, 0, 50), marker(run), *events(run, 50, 50)]
        )
        await reader.wait_for(
            lambda: len(reader.result_ids) >= 100 and reader.dead >= 1,
            timeout=90,
            what="100 results and the marker's dead letter",
        )
        letters = [orjson.loads(r.value) for r in reader.records if r.topic == topics["deadletter"]]
        assert [(d["kind"], d["reason"]) for d in letters] == [
            ("internal", "RuntimeError: injected decode fault")
        ]
        await produce(
            broker.bootstrap, topics["requests"], events(run, 100, 20)
        )  # still consuming afterwards
        await reader.wait(120, timeout=60, what="the events sent after the fault")
    assert worker.proc.poll() is None
    assert worker.stop() == 0


async def test_a_commit_fault_exits_or_resumes(
    broker: EmbeddedBroker,
    start_worker: Callable[..., Any],
    topics: dict[str, str],
    tmp_path: Path,
) -> None:
    run = f"commit-{uuid.uuid4().hex[:6]}"
    await ensure_topics(broker.bootstrap, topics.values(), partitions=1)
    config, app_id = write_config(tmp_path), f"live-{uuid.uuid4().hex[:8]}"
    async with LiveReader(broker.bootstrap, topics["results"], topics["deadletter"]) as reader:
        worker = start_worker(config, app_id=app_id, **faulty("commit"))
        await produce(broker.bootstrap, topics["requests"], [*events(run, 0, 50), marker(run)])
        await reader.wait(51, timeout=90, what="the results before the commit fault")
        await wait_until(
            lambda: "injected commit fault" in worker.log(), timeout=60, what="the injected commit failure"
        )
        await produce(broker.bootstrap, topics["requests"], events(run, 50, 50))
        expected = {f"{run}-{i}".encode() for i in range(100)}
        try:
            await reader.wait_for(
                lambda: expected <= reader.result_ids or worker.proc.poll() is not None,
                timeout=60,
                what="resumption or exit",
            )
        except AssertionError:
            raise AssertionError(f"a zombie: alive, not consuming\n{worker.log()[-3000:]}") from None
        if worker.proc.poll() is not None:  # exited: non-zero, and a restart publishes everything
            assert worker.proc.returncode == EXIT_FATAL, worker.log()[-3000:]
            lines = critical_lines(worker)
            assert len(lines) == 1 and "CommitFailedError" in lines[0], worker.log()[-3000:]
            second = start_worker(config, app_id=app_id)
            await reader.wait_for(
                lambda: expected <= reader.result_ids, timeout=90, what="results after restart"
            )
            assert second.stop() == 0
        else:
            assert worker.stop() == 0


async def test_a_window_closer_fault_is_recovered_in_place(
    broker: EmbeddedBroker,
    start_worker: Callable[..., Any],
    topics: dict[str, str],
    tmp_path: Path,
) -> None:
    run = f"closer-{uuid.uuid4().hex[:6]}"
    await ensure_topics(broker.bootstrap, topics.values(), partitions=1)
    config = write_config(
        tmp_path,
        """
suites:
  - name: qa
    default: true
    evaluators: [{evaluator: exact_match}]
windowing: {allowed_lateness_s: 0, close_interval_s: 0.5}
""",
    )
    worker = start_worker(config, STREAMEVAL_WINDOWS="1", **faulty("closer"))
    await produce(broker.bootstrap, topics["requests"], [marker(run)])
    await wait_until(
        lambda: "injected window closer fault" in worker.log(), timeout=60, what="the injected closer failure"
    )
    sent_after = time.time()
    await produce(broker.bootstrap, topics["requests"], events(run, 0, 5))
    aggregates: list[dict[str, Any]] = []

    async def read() -> None:
        from streameval.kafka_io import tail

        async for record in tail(broker.bootstrap, [topics["aggregates"]]):
            aggregates.append(orjson.loads(record.value))

    reading = asyncio.create_task(read())
    try:
        await wait_until(
            lambda: any(_epoch(a["window"]["end"]) > sent_after for a in aggregates),
            timeout=60,
            what="an aggregate of a window closed after the fault",
        )
    finally:
        reading.cancel()
    # logged once the tick that published it returns: the aggregate can be read first
    await wait_until(
        lambda: "closing windows resumed after 1 failed tick(s)" in worker.log(),
        timeout=30,
        what="the resumed log",
    )
    assert worker.proc.poll() is None
    assert worker.stop() == 0


def _epoch(text: str) -> float:
    from streameval.models import parse_time

    return parse_time(text)


async def test_a_wedged_batch_is_reported_and_sigterm_still_stops_the_worker(
    broker: EmbeddedBroker,
    start_worker: Callable[..., Any],
    topics: dict[str, str],
    tmp_path: Path,
) -> None:
    run = f"hang-{uuid.uuid4().hex[:6]}"
    port = free_port()
    await ensure_topics(broker.bootstrap, topics.values(), partitions=1)
    worker = start_worker(
        write_config(tmp_path),
        **faulty(
            "hang",
            STREAMEVAL_STALL_AFTER_S="2",
            STREAMEVAL_SHUTDOWN_GRACE_S="5",
            STREAMEVAL_WEB_PORT=str(port),
        ),
    )
    base = f"http://127.0.0.1:{port}"
    await produce(broker.bootstrap, topics["requests"], [*events(run, 0, 10), marker(run)])
    await wait_until(
        lambda: "stall: batches taken but not published" in worker.log(),
        timeout=60,
        what="the stall log line",
    )
    assert f"{topics['requests']}[0] offsets" in worker.log()
    status, body = await asyncio.to_thread(_get, f"{base}/ready")
    assert status == 503 and "batches taken but not published" in body["checks"]["pipeline"]["error"], body
    metrics = (await asyncio.to_thread(urllib.request.urlopen, f"{base}/metrics")).read().decode()
    ages = [
        float(line.rsplit(" ", 1)[1])
        for line in metrics.splitlines()
        if line.startswith("streameval_oldest_unpublished_batch_age_seconds{")
    ]
    assert ages and max(ages) > 2
    worker.proc.terminate()
    code = await asyncio.to_thread(wait_exit, worker, 60)
    # the wedged batch can never be acked, so Faust's graceful stop would wait for it forever
    assert code == EXIT_GRACE_EXPIRED, worker.log()[-3000:]
    assert "worker did not stop within 5 s of the signal" in worker.log()


def _get(url: str) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(url) as response:
            return response.status, orjson.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, orjson.loads(exc.read())


async def test_a_lost_produce_answer_holds_results_for_the_publish_timeout_only(
    broker: EmbeddedBroker,
    start_worker: Callable[..., Any],
    topics: dict[str, str],
    tmp_path: Path,
) -> None:
    # aiokafka keeps one produce request in flight per broker: with Faust's default 1200 s timeout one lost
    # answer held every later result of the worker for 20 minutes, the worker alive and /health green
    run = f"lost-{uuid.uuid4().hex[:6]}"
    await ensure_topics(broker.bootstrap, topics.values(), partitions=1)
    config, app_id = write_config(tmp_path), f"live-{uuid.uuid4().hex[:8]}"
    expected = {f"{run}-{i}".encode() for i in range(100)} | {f"{run}-INJECT-FAULT".encode()}
    async with LiveReader(broker.bootstrap, topics["results"], topics["deadletter"]) as reader:
        worker = start_worker(
            config, app_id=app_id, **faulty("lost-produce", STREAMEVAL_PUBLISH_TIMEOUT_S="3")
        )
        await produce(
            broker.bootstrap, topics["requests"], [*events(run, 0, 50), marker(run), *events(run, 50, 50)]
        )
        await wait_until(
            lambda: "injected: a produce request is lost" in worker.log(), timeout=60, what="the lost request"
        )
        await reader.wait_for(
            lambda: expected <= reader.result_ids or worker.proc.poll() is not None,
            timeout=60,
            what="the results after the lost answer, or an exit",
        )
        if worker.proc.poll() is not None:
            assert worker.proc.returncode == EXIT_FATAL, worker.log()[-3000:]
            second = start_worker(config, app_id=app_id, STREAMEVAL_BROKER_SESSION_TIMEOUT="6")
            await reader.wait_for(
                lambda: expected <= reader.result_ids, timeout=90, what="results after restart"
            )
            assert second.stop() == 0
        else:
            assert worker.stop() == 0


async def test_sigterm_stops_a_worker_whose_event_loop_is_blocked(
    broker: EmbeddedBroker,
    start_worker: Callable[..., Any],
    topics: dict[str, str],
    tmp_path: Path,
) -> None:
    run = f"freeze-{uuid.uuid4().hex[:6]}"
    await ensure_topics(broker.bootstrap, topics.values(), partitions=1)
    worker = start_worker(write_config(tmp_path), **faulty("freeze", STREAMEVAL_SHUTDOWN_GRACE_S="3"))
    await produce(broker.bootstrap, topics["requests"], [marker(run)])
    await wait_until(
        lambda: "injected: the event loop is frozen" in worker.log(), timeout=60, what="the frozen loop"
    )
    worker.proc.terminate()
    code = await asyncio.to_thread(wait_exit, worker, 60)  # the freeze lasts 120 s
    assert code == EXIT_GRACE_EXPIRED, worker.log()[-3000:]
    assert "worker did not stop within 3 s of the signal" in worker.log()
