"""The guard over HTTP against the same suite in-process: latency at a steady rate and CPU per check.

    .venv/bin/python bench/guard.py [--events 2000] [--workers 2] [--step-s 3] [--rates 100,200,...]

The six-check suite of bench/framework_share.py (exact_match, contains, regex, json_schema, levenshtein
similarity, a length regex, over ~1.7 kB JSON answers) with a ``guard:`` section, served by
``streameval guard`` (a real process tree). In the same run:

* **in-process**: the same suite and events through :meth:`Pipeline.process_sync` (decode, route,
  evaluate, the graded result), process CPU per event: the baseline;
* **one client**: one kept-alive connection sending checks at a steady rate (open loop: each request
  is due at its time; latency counts from that time, so a server that falls behind shows it);
* **32 clients**: 32 kept-alive connections sharing the same total rate.

Each scenario steps through ``--rates`` (checks/s) for ``--step-s`` seconds each and prints p50 / p99
latency, the server's CPU per check (user + system of every server process, from /proc) and its ratio
to the in-process CPU per event, then the highest rate whose p99 stayed at or under 10 ms (the guard's
target). The client is a minimal asyncio HTTP/1.1 writer/reader, so its own CPU stays small; it shares
the machine with the server. Nothing is asserted: numbers only.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "features" / "guard"))
from _guard_helpers import start_guard
from framework_share import SUITES, events

from streameval._util import freeze_heap
from streameval.config import parse_config
from streameval.envelope import Source
from streameval.pipeline import Pipeline

TOKEN = "bench-guard-token-0123456789"
P99_TARGET_MS = 10.0  # the guard's latency target: p99 at or under 10 ms (docs/performance.md, the guard)
_TICKS = os.sysconf("SC_CLK_TCK")


def suite_file() -> dict[str, Any]:
    document = {"suites": [dict(s) for s in SUITES["six"]["suites"]]}
    document["suites"][0]["guard"] = {"deadline_ms": 1000}  # no check of this suite comes near it
    return document


def in_process(raws: list[bytes], rounds: int = 3) -> float:
    """CPU seconds per event of the suite in-process (median of ``rounds`` passes over ``raws``)."""
    _, loaded = parse_config(suite_file())
    pipeline = Pipeline(loaded)
    source = Source()
    for raw in raws[:100]:  # warm-up
        pipeline.process_sync(raw, source, time.time())
    costs = []
    for _ in range(rounds):
        started = time.process_time()
        for raw in raws:
            outcome = pipeline.process_sync(raw, source, time.time())
            assert outcome is not None and outcome.result is not None
        costs.append((time.process_time() - started) / len(raws))
    return statistics.median(costs)


def guard_in_process(raws: list[bytes], rounds: int = 3) -> float:
    """CPU seconds per check of :meth:`Guard.check` called in-process (the check without HTTP)."""
    from streameval.features.guard._check import Guard

    _, loaded = parse_config(suite_file())
    guard = Guard(loaded)

    async def passes() -> list[float]:
        await guard.start()
        for raw in raws[:100]:
            await guard.check(raw)
        costs = []
        for _ in range(rounds):
            started = time.process_time()
            for raw in raws:
                await guard.check(raw)
            costs.append((time.process_time() - started) / len(raws))
        return costs

    return statistics.median(asyncio.run(passes()))


def served_in_process(raws: list[bytes], *, bare: bool, count: int = 3000) -> float:
    """CPU seconds per request of one server process answering ``count`` back-to-back requests on one
    kept-alive connection from a forked client: the guard's app (``bare`` False) or an aiohttp app whose
    handler reads the body and answers a small constant (``bare``: what HTTP alone costs here)."""
    from aiohttp import web

    from streameval.api import Identities
    from streameval.features.guard._check import Guard
    from streameval.features.guard._web import guard_app

    async def constant(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(body=b'{"code":200,"data":{}}', content_type="application/json")

    async def serve() -> float:
        if bare:
            app = web.Application()
            app.add_routes([web.post("/api/v1/check", constant)])
        else:
            _, loaded = parse_config(suite_file())
            guard = Guard(loaded)
            await guard.start()
            app = guard_app(guard, Identities((("api", TOKEN),)))
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        freeze_heap()  # as streameval guard's processes do once started
        port = runner.addresses[0][1]
        pid = os.fork()
        if pid == 0:  # the client, in its own process: its CPU is not the server's

            async def client() -> None:
                connection = await Connection.open("127.0.0.1", port)
                requests = [request("127.0.0.1", port, raw) for raw in raws]
                for n in range(count):
                    await connection.post(requests[n % len(requests)])

            asyncio.run(client())
            os._exit(0)
        started = time.process_time()
        while not os.waitpid(pid, os.WNOHANG)[0]:
            await asyncio.sleep(0.02)
        cost = (time.process_time() - started) / count
        await runner.cleanup()
        return cost

    return asyncio.run(serve())


def _tree(pid: int) -> list[int]:
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return []
    return [pid] + [p for c in children for p in _tree(int(c))]


def server_cpu(pid: int) -> float:
    """User + system CPU seconds of the server's process tree so far."""
    total = 0
    for p in _tree(pid):
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / _TICKS


class Connection:
    """One kept-alive HTTP/1.1 connection: a request's bytes out, its answer's status and body back."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, host: str, port: int) -> Connection:
        return cls(*await asyncio.open_connection(host, port))

    async def post(self, request: bytes) -> int:
        self.writer.write(request)
        head = await self.reader.readuntil(b"\r\n\r\n")
        length = int(re.search(rb"(?i)content-length: *(\d+)", head).group(1))  # type: ignore[union-attr]
        await self.reader.readexactly(length)
        return int(head[9:12])

    def close(self) -> None:
        self.writer.close()


def request(host: str, port: int, body: bytes) -> bytes:
    return (
        f"POST /api/v1/check HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Bearer {TOKEN}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode() + body


async def step(
    host: str, port: int, requests: list[bytes], rate: float, seconds: float, clients: int, pid: int
) -> dict[str, float]:
    """Send ``rate`` checks/s for ``seconds`` over ``clients`` connections; latencies and server CPU."""
    connections = [await Connection.open(host, port) for _ in range(clients)]
    total = max(1, int(rate * seconds))
    latencies: list[float] = []
    errors = 0
    start = time.perf_counter() + 0.05
    cpu_before = server_cpu(pid)

    async def client(index: int) -> None:
        nonlocal errors
        connection = connections[index]
        for n in range(index, total, clients):
            due = start + n / rate
            wait = due - time.perf_counter()
            if wait > 0:
                await asyncio.sleep(wait)
            status = await connection.post(requests[n % len(requests)])
            latencies.append((time.perf_counter() - due) * 1000)
            errors += status != 200

    await asyncio.gather(*(client(i) for i in range(clients)))
    elapsed = time.perf_counter() - start
    cpu = server_cpu(pid) - cpu_before
    for connection in connections:
        connection.close()
    latencies.sort()
    return {
        "rate": rate,
        "achieved": total / elapsed,
        "p50": latencies[len(latencies) // 2],
        "p99": latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))],
        "cpu_per_check": cpu / total,
        "errors": errors,
    }


def start_server(config: Path, workers: int) -> tuple[subprocess.Popen[str], str, int]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMEVAL_")}
    env["STREAMEVAL_API_TOKEN"] = TOKEN
    process, url = start_guard(config, workers, env)
    address = urlsplit(url)
    assert address.hostname is not None and address.port is not None, url
    return process, address.hostname, address.port


async def ready(host: str, port: int, body: bytes, processes: int) -> None:
    """Until every server process answers (connections to one port land on each in turn)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            connections = [await Connection.open(host, port) for _ in range(4 * processes)]
            statuses = [await c.post(request(host, port, body)) for c in connections]
            for c in connections:
                c.close()
            if all(s == 200 for s in statuses):
                return
        except OSError:
            pass
        await asyncio.sleep(0.2)
    raise SystemExit("the guard server did not answer")


async def run(args: argparse.Namespace, raws: list[bytes], base: float) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "suites.yaml"
        config.write_text(yaml.safe_dump(suite_file()))
        process, host, port = start_server(config, args.workers)
        try:
            requests = [request(host, port, raw) for raw in raws]
            await ready(host, port, raws[0], args.workers)
            await step(host, port, requests, 200, 1.0, 1, process.pid)  # warm-up
            for clients in (1, 32):
                print(f"\n{clients} kept-alive client(s), {args.workers} server process(es):")
                print("  rate/s  achieved/s  p50 ms  p99 ms  CPU µs/check  ratio to in-process  errors")
                best = None
                for rate in args.rates:
                    figures = await step(host, port, requests, rate, args.step_s, clients, process.pid)
                    print(
                        f"  {rate:6.0f}  {figures['achieved']:10.0f}  {figures['p50']:6.2f}  {figures['p99']:6.2f}"
                        f"  {figures['cpu_per_check'] * 1e6:12.1f}  {figures['cpu_per_check'] / base:19.2f}"
                        f"  {figures['errors']:6.0f}"
                    )
                    if figures["p99"] <= P99_TARGET_MS and figures["errors"] == 0:
                        best = rate
                    elif figures["p99"] > 4 * P99_TARGET_MS:
                        break  # far past the target: higher rates only queue more
                print(
                    f"  highest rate with p99 <= {P99_TARGET_MS:g} ms: {best if best is not None else 'none'}"
                )
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--workers", type=int, default=2, help="server processes")
    parser.add_argument("--step-s", type=float, default=3.0, help="seconds per rate")
    parser.add_argument(
        "--rates",
        type=lambda text: [float(r) for r in text.split(",")],
        default=[100, 200, 400, 600, 800, 1000, 1200, 1600, 2000],
        help="checks per second to step through",
    )
    args = parser.parse_args()
    raws = events("six", args.events)
    base = in_process(raws)
    print(f"in-process (Pipeline.process_sync): {base * 1e6:.1f} µs CPU per event (the baseline)")
    check = guard_in_process(raws)
    print(f"Guard.check in-process, no HTTP: {check * 1e6:.1f} µs CPU per check ({check / base:.2f}x)")
    rounds = [(served_in_process(raws, bare=True), served_in_process(raws, bare=False)) for _ in range(3)]
    bare = statistics.median(b for b, _ in rounds)  # alternated: both see the same box
    app = statistics.median(a for _, a in rounds)
    print(f"aiohttp alone, one connection back to back: {bare * 1e6:.1f} µs CPU per request")
    print(
        f"the guard's app, one connection back to back: {app * 1e6:.1f} µs CPU per check ({app / base:.2f}x)"
    )
    asyncio.run(run(args, raws, base))


if __name__ == "__main__":
    main()
