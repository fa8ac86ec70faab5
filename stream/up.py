"""``streameval up``: a local stack that stays up — broker, Redis, a worker, the API and dashboard.

Everything binds to 127.0.0.1. State lives in ``--state-dir`` (default ``./.streameval``):

- ``redis/``: the embedded Redis's append-only file, so aggregates, the evaluator registry and the
  judge cache outlive a restart;
- ``broker/``: the broker's log. The embedded Tansu keeps messages in memory only (its build has no
  file storage), so topics start empty on every run; results already recorded stay in Redis;
- ``worker.log``, ``suites.yaml`` (the config the worker runs), ``faust/`` (Faust's scratch directory);
- ``up.pid``: the running ``up``'s pid, so two ``up`` on one directory refuse to share it.

It runs until SIGINT (Ctrl-C) or SIGTERM, then stops the worker, the simulated judges, Redis and the
broker, in that order, and returns 0. A worker that exits on its own stops the stack with exit 1.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

from rich.console import Console

from ._cliargs import EXIT_FAILED, EXIT_OK
from .config import load_config
from .demo import DEMO_JUDGED, DEMO_SIM, bundled_file, judged_config
from .embedded import EmbeddedBroker, EmbeddedRedis, die_with_parent, stop_process, wait_for_port
from .errors import UsageError
from .judges.sim import start_judge_sim

__all__ = ["run_up"]

APP_ID = "streameval-up"
WORKER_START_S = 120.0  # a cold worker (sandbox zygotes, topic creation) on a busy machine


def _check_port(port: int, option: str) -> None:
    if not 0 < port < 65536:
        raise UsageError(f"{option} must be within 1..65535, got {port}")
    with socket.socket() as sock:
        sock.setsockopt(
            socket.SOL_SOCKET, socket.SO_REUSEADDR, 1
        )  # as the servers bind: TIME_WAIT is no obstacle
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            raise UsageError(f"port {port} on 127.0.0.1 is in use; pass {option} to choose another") from None


def _claim(state: Path) -> Path:
    """Write ``up.pid``; refuse when another live ``up`` holds the directory."""
    pid_file = state / "up.pid"
    try:
        other = int(pid_file.read_text().strip())
    except (OSError, ValueError):
        other = None
    if other is not None and other != os.getpid():
        try:
            os.kill(other, 0)
        except ProcessLookupError:
            pass  # left by a run that was killed: take it over
        except PermissionError:
            raise UsageError(f"{state} is in use by process {other}; pass another --state-dir") from None
        else:
            raise UsageError(
                f"{state} is in use by `streameval up` (pid {other}); stop it or pass another --state-dir"
            )
    pid_file.write_text(f"{os.getpid()}\n")
    return pid_file


def run_up(args: argparse.Namespace, console: Console) -> int:
    for port, option in (
        (args.kafka_port, "--kafka-port"),
        (args.redis_port, "--redis-port"),
        (args.web_port, "--web-port"),
    ):
        _check_port(port, option)
    if len({args.kafka_port, args.redis_port, args.web_port}) < 3:
        raise UsageError("--kafka-port, --redis-port and --web-port must differ")
    if args.config is not None:
        load_config(args.config)  # a bad file fails before anything starts
    state = args.state_dir.resolve()
    state.mkdir(parents=True, exist_ok=True)
    pid_file = _claim(state)
    try:
        return asyncio.run(_up(args, state, console))
    finally:
        pid_file.unlink(missing_ok=True)


async def _up(args: argparse.Namespace, state: Path, console: Console) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    out = Console(soft_wrap=True, highlight=False, width=None if sys.stdout.isatty() else 120)
    async with contextlib.AsyncExitStack() as stack:
        broker = stack.enter_context(EmbeddedBroker(args.kafka_port, state / "broker"))
        redis = stack.enter_context(EmbeddedRedis(args.redis_port, state / "redis", persist=True))
        config = stack.enter_context(bundled_file("suites.yaml", args.config))
        judges = ""
        if args.config is None and not args.no_judges:
            judge_url = await stack.enter_async_context(start_judge_sim(**DEMO_SIM))
            config = judged_config(config, judge_url, state / "suites.yaml")
            judges = f"3 SIMULATED judges at {judge_url} (not real models) on suites {', '.join(DEMO_JUDGED)}"
        elif args.config is None:
            shutil.copyfile(config, state / "suites.yaml")
            config = state / "suites.yaml"
        worker = _start_worker(args, state, broker.bootstrap, redis.url, config)
        stack.callback(stop_process, worker)
        started = asyncio.ensure_future(
            asyncio.to_thread(
                wait_for_port, args.web_port, timeout=WORKER_START_S, proc=worker, log=state / "worker.log"
            )
        )
        interrupted = asyncio.ensure_future(stop.wait())
        await asyncio.wait({started, interrupted}, return_when=asyncio.FIRST_COMPLETED)
        if (
            not started.done()
        ):  # Ctrl-C while starting: stop what runs (the waiting thread ends with the worker)
            started.add_done_callback(lambda task: task.exception())
            console.print("interrupted while starting; stopping")
            return EXIT_OK
        interrupted.cancel()
        if started.exception() is not None:
            console.print(
                f"[bold red]error:[/] the worker did not start: {started.exception()}", highlight=False
            )
            return EXIT_FAILED
        web = f"http://127.0.0.1:{args.web_port}"
        bootstrap = broker.bootstrap
        out.print(f"""streameval is up (state in {state})
  broker     {bootstrap}  (embedded Tansu; memory storage: topics start empty on every run)
  redis      {redis.url}  (data in {state / "redis"}, kept between runs)
  worker     pid {worker.pid}, suites {config}, log {state / "worker.log"}
  dashboard  {web}/dashboard
  API        {web}/api/v1/evaluators   health {web}/health   metrics {web}/metrics""")
        if judges:
            out.print(f"  judges     {judges}")
        out.print(
            f"""
produce:  streameval produce events.jsonl --bootstrap {bootstrap}
          echo '{{"id": "1", "model": "m", "output": "Paris", "expected": "Paris"}}' | streameval produce - --bootstrap {bootstrap}
tail:     streameval tail --topic evals.results --bootstrap {bootstrap}
          streameval tail --topic evals.deadletter --bootstrap {bootstrap}
Ctrl-C stops everything.""",
            markup=False,
        )
        reason = await _wait(stop, worker)
        if reason is not None:
            console.print(f"[bold red]error:[/] {reason}; its log: {state / 'worker.log'}", highlight=False)
            return EXIT_FAILED
        console.print("stopping worker, judges, Redis and broker")
    console.print(f"stopped; state kept in {state}")
    return EXIT_OK


async def _wait(stop: asyncio.Event, worker: subprocess.Popen[bytes]) -> str | None:
    """Until ``stop`` is set (None) or the worker exits (a reason)."""
    while not stop.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=0.5)
        if worker.poll() is not None:
            return f"the worker exited with code {worker.returncode}"
    return None


def _start_worker(
    args: argparse.Namespace, state: Path, bootstrap: str, redis_url: str, config: Path
) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "KAFKA_BOOTSTRAP_SERVERS": bootstrap,
        "REDIS_URL": redis_url,
        "STREAMEVAL_CONFIG": str(config),
        "STREAMEVAL_APP_ID": APP_ID,
        "STREAMEVAL_WEB_HOST": "127.0.0.1",
        "STREAMEVAL_WEB_PORT": str(args.web_port),
        "STREAMEVAL_DATA_DIR": str(state / "faust"),
        # the dashboard's drill-down: kept here whatever the suite file says (a worker keeps examples only
        # for alert rules otherwise, docs/performance.md)
        "STREAMEVAL_EXAMPLES": os.environ.get("STREAMEVAL_EXAMPLES", "20"),
        "STREAMEVAL_LOG_LEVEL": os.environ.get("STREAMEVAL_LOG_LEVEL", "warn"),
    }
    env.pop("STREAMEVAL_REDIS_URL", None)
    env.pop("STREAMEVAL_KAFKA_BOOTSTRAP_SERVERS", None)
    with (state / "worker.log").open("ab") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "streameval", "worker"],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            preexec_fn=die_with_parent,
            start_new_session=True,  # Ctrl-C reaches `up`, which stops the worker before the servers
        )
